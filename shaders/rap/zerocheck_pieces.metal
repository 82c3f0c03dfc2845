// zerocheck_pieces.metal - round 0 and the rounds j ≥ 1 in pieces of the batch constraint
// sumcheck (zerocheck.metal) by generated piece code (scripts/piecegen:
// shaders/include/<air>_pieces.h), two kernels per AIR with generated pieces. internal/kernels/zerocheck_pieces.go launches them.
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

// The rounds j ≥ 1 in pieces with generated Fp4 piece code for the pieces with the stamp of
// keccakf_pieces.h (the launcher checks it): zc_round_pieces without the scratch. Same work items
// (piece, lane group u of f = y·(d+1) + X − 1, piece-major) and partial rows ((gid·MSL_LANES +
// lane)·(d+1) + X − 1); each piece reads its slots itself, slot s from table tmap[s] (the trace's
// table of each program slot) at rows 2y, 2y+1 as zc_round_fill does. prog, the slots and the
// registers of ZcPiecesParams are unused.
kernel void zc_round_keccakf(device const uint* cp [[buffer(0)]],
                             device const uint* table [[buffer(1)]],
                             device const uint* weights [[buffer(2)]],
                             device const uint* tmap [[buffer(3)]],
                             device const uint* tables [[buffer(4)]],
                             device const uint* eq [[buffer(5)]],
                             device uint* partials [[buffer(6)]],
                             constant ZcPiecesParams& p [[buffer(7)]],
                             uint gid [[thread_position_in_grid]],
                             uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint pairs = 1u << (p.log_rows - 1u);
  uint st = 4u * p.stride;
  uint npts = p.points;
  uint total = pairs * npts;
  uint units = (total + MSL_LANES - 1u) / MSL_LANES;
  uint items = units * p.npieces;
  for (uint k = 0u; k < 12u * npts * MSL_LANES; k++) partials[12u * npts * MSL_LANES * gid + k] = 0u;
  bb4 den_const = bb4_load(weights, p.nout);
  for (uint it = gid; it < items; it += G) {
    uint piece = it / units;
    uint u = it - piece * units;
    device const uint* pcp = cp + table[4u * piece + 1u];
    // Scalar piece code (one point per call): on GPUs a lane group is one point; the host device,
    // where this kernel serves tests, calls it per lane (zc_round_fill's spare lanes, repeats of
    // the last item that add nothing, are skipped).
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint f = u * MSL_LANES + l;
      if (f >= total) break;
      uint y = f / npts;
      uint x = f - y * npts;  // X − 1
      bb4 sums[3] = {bb4_zero(), bb4_zero(), p.has_den != 0u && piece == 0u ? den_const : bb4_zero()};
      keccakf_piece4(piece, tables + 8u * y, st, tmap, bb_to_mont(x + 1u), pcp, weights, sums);
      zc_accumulate(partials, (gid * MSL_LANES + l) * npts + x, bb4_load(eq, p.eq_off + y), sums[0], sums[1], sums[2]);
    }
  }
}
