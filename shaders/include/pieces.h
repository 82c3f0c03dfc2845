// pieces.h - what the generated piece code (scripts/piecegen: <air>_pieces.h) needs: the field
// operations it is written in, and PIECE_FN, the declaration of a piece's function. CUDA and the
// host keep each piece a function of its own (a few hundred operations: the compilers' time grows
// faster than linearly with a function's size); Metal decides for itself.
//
// On the host device the pieces serve tests only (its lane interpreter is faster there), so the
// operations stay calls (pg_* below, out of line): the ~43,000 operations of Keccak-f's pieces
// then compile in seconds, where inlined they took GCC 12 over 100 s at -O3. The same for the
// Fp4 operations (pg4_*) of the pieces over Fp4 (the rounds j ≥ 1).
#ifndef PIECES_H
#define PIECES_H
#include "bb4.h"

#if defined(MSL_TARGET_CUDA)
#define PIECE_FN static __device__ __attribute__((noinline))
#elif defined(MSL_TARGET_HOST)
#define PIECE_FN static __attribute__((noinline))
#else
#define PIECE_FN static
#endif

// a − b and a − b for an Fp4 a and a base b, then a base a and an Fp4 b.
MSL_FN bb4 pg4_sub_base_inline(bb4 a, uint b) { return bb4_make(bb_sub(a[0], b), a[1], a[2], a[3]); }
MSL_FN bb4 pg4_base_sub_inline(uint a, bb4 b) { return bb4_make(bb_sub(a, b[0]), bb_neg(b[1]), bb_neg(b[2]), bb_neg(b[3])); }
// A slot's value at X (xm: Montgomery form) from the Fp4 rows pr[0..3] = t[2y], pr[4..7] = t[2y+1]
// of its table: t[2y] + X·(t[2y+1] − t[2y]), as zc_round_fill computes it.
MSL_FN bb4 pg4_slot_inline(device const uint* pr, uint xm) {
  bb4 a = bb4_load(pr, 0u);
  return bb4_add(a, bb4_mul_base(bb4_sub(bb4_load(pr, 1u), a), xm));
}

#if defined(MSL_TARGET_HOST)
#define PIECE_OP static __attribute__((noinline, unused))
PIECE_OP uint pg_add(uint a, uint b) { return bb_add(a, b); }
PIECE_OP uint pg_sub(uint a, uint b) { return bb_sub(a, b); }
PIECE_OP uint pg_mul(uint a, uint b) { return bb_mul(a, b); }
PIECE_OP uint pg_neg(uint a) { return bb_neg(a); }
// acc + w·v for the Fp4 weight at w and a base value v.
PIECE_OP bb4 pg_emit(bb4 acc, device const uint* w, uint v) { return bb4_add(acc, bb4_mul_base(bb4_load(w, 0u), v)); }
PIECE_OP bb4 pg4_add(bb4 a, bb4 b) { return bb4_add(a, b); }
PIECE_OP bb4 pg4_sub(bb4 a, bb4 b) { return bb4_sub(a, b); }
PIECE_OP bb4 pg4_mul(bb4 a, bb4 b) { return bb4_mul(a, b); }
PIECE_OP bb4 pg4_neg(bb4 a) { return bb4_neg(a); }
PIECE_OP bb4 pg4_add_base(bb4 a, uint b) { return bb4_add_base(a, b); }
PIECE_OP bb4 pg4_sub_base(bb4 a, uint b) { return pg4_sub_base_inline(a, b); }
PIECE_OP bb4 pg4_base_sub(uint a, bb4 b) { return pg4_base_sub_inline(a, b); }
PIECE_OP bb4 pg4_mul_base(bb4 a, uint b) { return bb4_mul_base(a, b); }
PIECE_OP bb4 pg4_slot(device const uint* pr, uint xm) { return pg4_slot_inline(pr, xm); }
PIECE_OP bb4 pg4_emit(bb4 acc, device const uint* w, bb4 v) { return bb4_add(acc, bb4_mul(bb4_load(w, 0u), v)); }
#else
#define pg_add bb_add
#define pg_sub bb_sub
#define pg_mul bb_mul
#define pg_neg bb_neg
MSL_FN bb4 pg_emit(bb4 acc, device const uint* w, uint v) { return bb4_add(acc, bb4_mul_base(bb4_load(w, 0u), v)); }
#define pg4_add bb4_add
#define pg4_sub bb4_sub
#define pg4_neg bb4_neg
#define pg4_add_base bb4_add_base
#define pg4_sub_base pg4_sub_base_inline
#define pg4_base_sub pg4_base_sub_inline
#define pg4_mul_base bb4_mul_base
// The Fp4 product, a slot's value and an emit (~35, ~20 and ~40 base operations) are calls on
// CUDA: inlined, the 30,000 of them in the Fp4 pieces made clang's PTX of the pieces module 175 MB
// in 323 s (15 MB in 15 s without the Fp4 pieces); NVVM's time grows likewise.
#if defined(MSL_TARGET_CUDA)
#define PG4_CALL static __device__ __attribute__((noinline))
#else
#define PG4_CALL MSL_FN
#endif
PG4_CALL bb4 pg4_mul(bb4 a, bb4 b) { return bb4_mul(a, b); }
PG4_CALL bb4 pg4_slot(device const uint* pr, uint xm) { return pg4_slot_inline(pr, xm); }
PG4_CALL bb4 pg4_emit(bb4 acc, device const uint* w, bb4 v) { return bb4_add(acc, bb4_mul(bb4_load(w, 0u), v)); }
#endif

#endif  // PIECES_H
