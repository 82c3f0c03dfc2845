// pieces.h - what the generated piece code (internal/kernels/piececode, written at run time per
// proving key: air_pieces.h) needs: the field operations it is written in, PIECE_FN, the
// declaration of a piece's function, and PG_DEVICE / PG_THREAD, the address spaces of its
// parameters (the keyword itself on Metal; mslgen rewrites the definitions below for the other
// targets, so the generated code needs no rewriting). CUDA and the host keep each piece a function
// of its own (a few hundred operations: the compilers' time grows faster than linearly with a
// function's size); Metal decides for itself.
//
// On the host device the pieces serve tests only (its lane interpreter is faster there), so the
// operations stay calls (pg_* below, out of line): the tens of thousands of operations of a long
// AIR's pieces then compile in seconds, where inlined they took GCC 12 over 100 s at -O3.
#ifndef PIECES_H
#define PIECES_H
#include "bb4.h"

#define PG_DEVICE device
#define PG_THREAD thread

// AIR_UNIT_FN defines, AIR_UNIT_DECL declares, the function of a unit of generated code (a range
// of pieces compiled on its own and linked with the module's main code: CUDA -rdc and the host's
// shared library); Metal compiles one source, units first.
#if defined(MSL_TARGET_CUDA)
#define AIR_UNIT_FN __device__ __attribute__((noinline))
#define AIR_UNIT_DECL extern __device__
#elif defined(MSL_TARGET_HOST)
#define AIR_UNIT_FN __attribute__((noinline, visibility("hidden")))
#define AIR_UNIT_DECL extern __attribute__((visibility("hidden")))
#else
#define AIR_UNIT_FN static
#define AIR_UNIT_DECL static
#endif

#if defined(MSL_TARGET_CUDA)
#define PIECE_FN static __device__ __attribute__((noinline))
#elif defined(MSL_TARGET_HOST)
#define PIECE_FN static __attribute__((noinline))
#else
#define PIECE_FN static
#endif

// acc + Σ_k w_k·v_k for two to four outputs of one kind (the Fp4 weights at w_k, base values v_k
// < p): each coefficient's products summed in 64 bits and reduced once (bb_redc_wide: four products
// are below 4p² < 2p·2^32), a widening multiply-add a coefficient instead of a Montgomery product
// and a modular addition (an output cost as much as ten of its program's operations). The
// generated pieces give their outputs of one kind four at a time (piececode).
MSL_FN uint pg_dot2(device const uint* w0, uint v0, device const uint* w1, uint v1, uint c) {
  return bb_redc_wide(bb_wide_mad(bb_wide_mul(w0[c], v0), w1[c], v1));
}
MSL_FN bb4 pg_emit2_inline(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1) {
  return bb4_make(bb_add(acc[0], pg_dot2(w0, v0, w1, v1, 0u)), bb_add(acc[1], pg_dot2(w0, v0, w1, v1, 1u)),
                  bb_add(acc[2], pg_dot2(w0, v0, w1, v1, 2u)), bb_add(acc[3], pg_dot2(w0, v0, w1, v1, 3u)));
}
MSL_FN uint pg_dot3(device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2, uint c) {
  return bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mul(w0[c], v0), w1[c], v1), w2[c], v2));
}
MSL_FN bb4 pg_emit3_inline(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2) {
  return bb4_make(bb_add(acc[0], pg_dot3(w0, v0, w1, v1, w2, v2, 0u)), bb_add(acc[1], pg_dot3(w0, v0, w1, v1, w2, v2, 1u)),
                  bb_add(acc[2], pg_dot3(w0, v0, w1, v1, w2, v2, 2u)), bb_add(acc[3], pg_dot3(w0, v0, w1, v1, w2, v2, 3u)));
}
MSL_FN uint pg_dot4(device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2,
                    device const uint* w3, uint v3, uint c) {
  return bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(w0[c], v0), w1[c], v1), w2[c], v2), w3[c], v3));
}
MSL_FN bb4 pg_emit4_inline(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2,
                           device const uint* w3, uint v3) {
  return bb4_make(bb_add(acc[0], pg_dot4(w0, v0, w1, v1, w2, v2, w3, v3, 0u)),
                  bb_add(acc[1], pg_dot4(w0, v0, w1, v1, w2, v2, w3, v3, 1u)),
                  bb_add(acc[2], pg_dot4(w0, v0, w1, v1, w2, v2, w3, v3, 2u)),
                  bb_add(acc[3], pg_dot4(w0, v0, w1, v1, w2, v2, w3, v3, 3u)));
}

#if defined(MSL_TARGET_HOST)
#define PIECE_OP static __attribute__((noinline, unused))
PIECE_OP uint pg_add(uint a, uint b) { return bb_add(a, b); }
PIECE_OP uint pg_sub(uint a, uint b) { return bb_sub(a, b); }
PIECE_OP uint pg_mul(uint a, uint b) { return bb_mul(a, b); }
PIECE_OP uint pg_neg(uint a) { return bb_neg(a); }
// acc + w·v for the Fp4 weight at w and a base value v.
PIECE_OP bb4 pg_emit(bb4 acc, device const uint* w, uint v) { return bb4_add(acc, bb4_mul_base(bb4_load(w, 0u), v)); }
PIECE_OP bb4 pg_emit2(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1) {
  return pg_emit2_inline(acc, w0, v0, w1, v1);
}
PIECE_OP bb4 pg_emit3(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2) {
  return pg_emit3_inline(acc, w0, v0, w1, v1, w2, v2);
}
PIECE_OP bb4 pg_emit4(bb4 acc, device const uint* w0, uint v0, device const uint* w1, uint v1, device const uint* w2, uint v2,
                      device const uint* w3, uint v3) {
  return pg_emit4_inline(acc, w0, v0, w1, v1, w2, v2, w3, v3);
}
#else
#define pg_add bb_add
#define pg_sub bb_sub
#define pg_mul bb_mul
#define pg_neg bb_neg
MSL_FN bb4 pg_emit(bb4 acc, device const uint* w, uint v) { return bb4_add(acc, bb4_mul_base(bb4_load(w, 0u), v)); }
#define pg_emit2 pg_emit2_inline
#define pg_emit3 pg_emit3_inline
#define pg_emit4 pg_emit4_inline
#endif

#endif  // PIECES_H
