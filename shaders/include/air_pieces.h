// air_pieces.h - the interface of an AIR's generated piece code, which internal/kernels/piececode
// writes at run time, per proving key, for the pieces AIR_PIECE_FIRST .. AIR_PIECE_FIRST +
// AIR_PIECE_COUNT - 1 of the AIR's program (one run-time module per such range, so that the
// modules compile in parallel). The module templates (scripts/mslgen) hold a marker in place of
// this header, which the device backends replace by the generated code; only the checks
// (scripts/check-msl.sh, the clang copy) read the placeholder below.
// mslgen:runtime-header
#ifndef AIR_PIECES_H
#define AIR_PIECES_H
#include "pieces.h"

#define AIR_PIECE_FIRST 0u
#define AIR_PIECE_COUNT 1u

// Runs piece k (AIR_PIECE_FIRST ≤ k < AIR_PIECE_FIRST + AIR_PIECE_COUNT) at point pt: adds its
// weighted outputs to sums[kind] (see internal/kernels/piececode).
MSL_FN void air_piece(uint k, PG_DEVICE const uint* vals, uint P, uint pt, PG_DEVICE const uint* cp,
                      PG_DEVICE const uint* w, PG_THREAD bb4* sums) {
  (void)k;
  (void)P;
  (void)cp;
  sums[0] = bb4_add(sums[0], bb4_mul_base(bb4_load(w, 0u), vals[pt]));
}

#endif  // AIR_PIECES_H
