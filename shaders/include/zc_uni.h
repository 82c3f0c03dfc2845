// zc_uni.h - what the round-0 kernels of zerocheck.metal share with the generated ones of
// zerocheck_pieces.metal (which CUDA compiles as a module of its own): the parameters of round 0
// in pieces and the accumulation of a point's weighted sums into partial rows.
#ifndef ZC_UNI_H
#define ZC_UNI_H
#include "bb4.h"

struct ZcUniPiecesParams {
  uint log_m;       // M = 2^log_m points per block
  uint x0;          // first block of the slice
  uint points;      // points of the slice (slice_blocks·M)
  uint width;       // P: the row length of vals (points rounded up to MSL_LANES)
  uint npieces;     // pieces of the program
  uint nslots;      // the largest piece's slots
  uint nregs;       // the largest piece's registers
  uint has_den;     // add the constant denominator term (once: piece 0)
  uint nout;        // outputs of the whole program
  uint zero;        // zero this thread's partial rows first (the first slice)
  uint eq_off;      // Fp4 index of e(0) in eq
  uint interleave;  // scratch layout, as in ZcUniParams
  uint lanes;       // MSL_LANES the launcher assumed
};

// partials[row·12 + 4k ..] += e·v_k for (v_0, v_1, v_2) = (zc, num, den) of one lane.
MSL_FN void zc_accumulate(device uint* partials, uint row, bb4 e, bb4 zc, bb4 num, bb4 den) {
  device uint* pr = partials + 12u * row;
  bb4_store(pr, 0u, bb4_add(bb4_load(pr, 0u), bb4_mul(e, zc)));
  bb4_store(pr, 1u, bb4_add(bb4_load(pr, 1u), bb4_mul(e, num)));
  bb4_store(pr, 2u, bb4_add(bb4_load(pr, 2u), bb4_mul(e, den)));
}

#endif  // ZC_UNI_H
