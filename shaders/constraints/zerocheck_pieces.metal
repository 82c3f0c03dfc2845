// zerocheck_pieces.metal - round 0 of the batch constraint sumcheck (zerocheck.metal) by an AIR's
// generated piece code (internal/kernels/piececode), written at run time per proving key.
// internal/kernels/zerocheck_generated.go launches it.
//
// This file is a module template: scripts/mslgen writes it per target with a marker in place of
// air_pieces.h, and the device backends compile one module per range of the AIR's pieces (the
// marker replaced by that range's code), in parallel, cached on disk by the code's digest.
// mslgen:module pieces
#include "zc_uni.h"
#include "pieces.h"
#include "air_pieces.h"

// Round 0 over the slice for the pieces AIR_PIECE_FIRST .. AIR_PIECE_FIRST + AIR_PIECE_COUNT - 1
// (this module's): zc_uni_pieces without the scratch, each piece reading its slots from vals
// itself and keeping its values in registers. The launcher dispatches every module of the AIR
// over the same grid, the first with p.zero set where the slice is the first. prog, the slots
// and the registers of ZcUniPiecesParams are unused.
kernel void zc_uni_generated(device const uint* cp [[buffer(0)]],
                             device const uint* table [[buffer(1)]],
                             device const uint* weights [[buffer(2)]],
                             device const uint* vals [[buffer(3)]],
                             device const uint* eq [[buffer(4)]],
                             device uint* partials [[buffer(5)]],
                             constant ZcUniPiecesParams& p [[buffer(6)]],
                             uint gid [[thread_position_in_grid]],
                             uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES || AIR_PIECE_FIRST + AIR_PIECE_COUNT > p.npieces) return;
  uint P = p.width;
  uint units = P / MSL_LANES;
  uint items = units * AIR_PIECE_COUNT;
  if (p.zero != 0u) {
    for (uint k = 0u; k < 12u * MSL_LANES; k++) partials[12u * MSL_LANES * gid + k] = 0u;
  }
  bb4 den_const = bb4_load(weights, p.nout);
  for (uint it = gid; it < items; it += G) {
    uint q = it / units;
    uint piece = AIR_PIECE_FIRST + q;
    uint u = it - q * units;
    device const uint* pcp = cp + table[4u * piece + 1u];
    // The piece code is scalar (one point per call): on GPUs a lane group is one point; the host
    // device, where this kernel serves tests, calls it per lane.
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint pp = u * MSL_LANES + l;
      if (pp >= p.points) break;
      bb4 sums[3] = {bb4_zero(), bb4_zero(), p.has_den != 0u && piece == 0u ? den_const : bb4_zero()};
      air_piece(piece, vals, P, pp, pcp, weights, sums);
      bb4 e = bb4_load(eq, p.eq_off + p.x0 + (pp >> p.log_m));
      zc_accumulate(partials, gid * MSL_LANES + l, e, sums[0], sums[1], sums[2]);
    }
  }
}
