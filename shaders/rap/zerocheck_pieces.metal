// zerocheck_pieces.metal - round 0 of the batch constraint sumcheck (zerocheck.metal) by generated
// piece code (scripts/piecegen: shaders/include/<air>_pieces.h), one kernel per AIR with
// generated pieces. internal/kernels/zerocheck_pieces.go launches them.
//
// CUDA compiles this file as a module of its own, on first use, with NVRTC's fast-compile
// option where it has one: the straight-line code of Keccak-f's 126 pieces (~43,000 operations)
// would otherwise make the kernels' first load take minutes (docs/perf-notes/keccakf-kernel.md).
// mslgen:module pieces
#include "zc_uni.h"
#include "keccakf_pieces.h"

// Round 0 over the slice with generated piece code (scripts/piecegen) for the pieces with the
// stamp of keccakf_pieces.h (the launcher checks it): zc_uni_pieces without the scratch, each
// piece reading its slots from vals itself and keeping its values in registers. prog, the slots
// and the registers of ZcUniPiecesParams are unused.
kernel void zc_uni_keccakf(device const uint* cp [[buffer(0)]],
                           device const uint* table [[buffer(1)]],
                           device const uint* weights [[buffer(2)]],
                           device const uint* vals [[buffer(3)]],
                           device const uint* eq [[buffer(4)]],
                           device uint* partials [[buffer(5)]],
                           constant ZcUniPiecesParams& p [[buffer(6)]],
                           uint gid [[thread_position_in_grid]],
                           uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint P = p.width;
  uint units = P / MSL_LANES;
  uint items = units * p.npieces;
  if (p.zero != 0u) {
    for (uint k = 0u; k < 12u * MSL_LANES; k++) partials[12u * MSL_LANES * gid + k] = 0u;
  }
  bb4 den_const = bb4_load(weights, p.nout);
  for (uint it = gid; it < items; it += G) {
    uint piece = it / units;
    uint u = it - piece * units;
    device const uint* pcp = cp + table[4u * piece + 1u];
    // The piece code is scalar (one point per call): on GPUs a lane group is one point; the host
    // device, where this kernel serves tests, calls it per lane.
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint pp = u * MSL_LANES + l;
      if (pp >= p.points) break;
      bb4 sums[3] = {bb4_zero(), bb4_zero(), p.has_den != 0u && piece == 0u ? den_const : bb4_zero()};
      keccakf_piece(piece, vals, P, pp, pcp, weights, sums);
      bb4 e = bb4_load(eq, p.eq_off + p.x0 + (pp >> p.log_m));
      zc_accumulate(partials, gid * MSL_LANES + l, e, sums[0], sums[1], sums[2]);
    }
  }
}
