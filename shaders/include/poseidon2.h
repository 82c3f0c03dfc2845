// poseidon2.h - the Poseidon2 permutation over BabyBear, width 16 (Plonky3 v0.4.3
// default_babybear_poseidon2_16, spec A §2), on Montgomery-form elements. Mirrors
// internal/poseidon2.Permute: initial M_E, 4 full rounds, 13 partial rounds, 4 full rounds.
//
// Round constants come in a buffer `rc` of P2_RC_LEN uints, all in Montgomery form:
//   rc[P2_RC_EXT_INIT + 16·r + i]   r < 4: constants of the initial full rounds
//   rc[P2_RC_INTERNAL + r]          r < 13: constant of partial round r (added to element 0)
//   rc[P2_RC_EXT_FINAL + 16·r + i]  r < 4: constants of the final full rounds
//   rc[P2_RC_DIAG + i]              i < 16: the diagonal V of M_I = J + diag(V)
// (internal/kernels.Poseidon2Constants builds it from internal/poseidon2.)
//
// Lanes (prelude.h): the functions permute MSL_LANES states at once. A state array `s` holds
// P2_WIDTH·MSL_LANES uints, element k of lane l at s[k·MSL_LANES + l] (lane-major; declare it as
// `uint s[P2_STATE]`). Every step is a loop over elements (or groups of four) around an innermost
// loop over lanes, so that the host compiler vectorises across lanes; constants are read once and
// shared by all lanes. With MSL_LANES = 1 (GPUs) this is the plain scalar permutation.
#ifndef POSEIDON2_H
#define POSEIDON2_H
#include "babybear.h"

#define P2_WIDTH 16u
#define P2_RATE 8u
#define P2_STATE (16u * MSL_LANES)  // uints in a lane-major state array
#define P2_RC_EXT_INIT 0u
#define P2_RC_INTERNAL 64u
#define P2_RC_EXT_FINAL 77u
#define P2_RC_DIAG 141u
#define P2_RC_LEN 157u


// The permutation's additions, subtractions and products end with a minimum (of t and t ∓ p as
// unsigned values) instead of a comparison and a conditional correction; the same values as
// bb_add, bb_sub and bb_mul. poseidon2_group.h's permutation uses them too.
MSL_FN uint p2_add(uint a, uint b) {
  uint t = a + b;  // < 2p < 2^32
  return min(t, t - BB_P);
}

MSL_FN uint p2_sub(uint a, uint b) {
  uint t = a - b;  // wrapped when a < b
  return min(t, t + BB_P);
}

MSL_FN uint p2_mul(uint a, uint b) {
  uint lo = a * b;
  uint hi = mulhi(a, b);
  uint m = lo * BB_PINV;
  uint r = hi - bb_mulhi_p(m);  // hi − hi(m·p), wrapped when negative
  return min(r, r + BB_P);
}

MSL_FN uint p2_sbox(uint x) {  // x^7
  uint x2 = p2_mul(x, x);
  uint x3 = p2_mul(x2, x);
  uint x4 = p2_mul(x2, x2);
  return p2_mul(x3, x4);
}

// [2 3 1 1; 1 2 3 1; 1 1 2 3; 3 1 1 2] applied to elements g..g+4 of lane l.
MSL_FN void p2_mat4_lane(thread uint* s, uint g, uint l, uint x0, uint x1, uint x2, uint x3) {
  uint t01 = p2_add(x0, x1);
  uint t23 = p2_add(x2, x3);
  uint t0123 = p2_add(t01, t23);
  uint t01123 = p2_add(t0123, x1);
  uint t01233 = p2_add(t0123, x3);
  s[g * MSL_LANES + l] = p2_add(t01123, t01);
  s[(g + 1u) * MSL_LANES + l] = p2_add(t01123, p2_add(x2, x2));
  s[(g + 2u) * MSL_LANES + l] = p2_add(t01233, t23);
  s[(g + 3u) * MSL_LANES + l] = p2_add(t01233, p2_add(x0, x0));
}

// Second half of M_E: add to each element the sum of the elements ≡ k (mod 4).
MSL_FN void p2_external_sums(thread uint* s) {
  for (uint k = 0u; k < 4u; k++) {
    MSL_FOR_LANES(l) {
      uint a = s[k * MSL_LANES + l];
      uint b = s[(4u + k) * MSL_LANES + l];
      uint c = s[(8u + k) * MSL_LANES + l];
      uint d = s[(12u + k) * MSL_LANES + l];
      uint sum = p2_add(p2_add(a, b), p2_add(c, d));
      s[k * MSL_LANES + l] = p2_add(a, sum);
      s[(4u + k) * MSL_LANES + l] = p2_add(b, sum);
      s[(8u + k) * MSL_LANES + l] = p2_add(c, sum);
      s[(12u + k) * MSL_LANES + l] = p2_add(d, sum);
    }
  }
}

// M_E: mat4 on each group of four elements, then p2_external_sums.
MSL_FN void p2_external(thread uint* s) {
  for (uint g = 0u; g < P2_WIDTH; g += 4u) {
    MSL_FOR_LANES(l) {
      p2_mat4_lane(s, g, l, s[g * MSL_LANES + l], s[(g + 1u) * MSL_LANES + l],
                   s[(g + 2u) * MSL_LANES + l], s[(g + 3u) * MSL_LANES + l]);
    }
  }
  p2_external_sums(s);
}

// A full round: add the constants rc[off..off+16), S-box every element, M_E.
MSL_FN void p2_full_round(thread uint* s, constant uint* rc, uint off) {
  for (uint g = 0u; g < P2_WIDTH; g += 4u) {
    uint c0 = rc[off + g], c1 = rc[off + g + 1u], c2 = rc[off + g + 2u], c3 = rc[off + g + 3u];
    MSL_FOR_LANES(l) {
      p2_mat4_lane(s, g, l, p2_sbox(p2_add(s[g * MSL_LANES + l], c0)),
                   p2_sbox(p2_add(s[(g + 1u) * MSL_LANES + l], c1)),
                   p2_sbox(p2_add(s[(g + 2u) * MSL_LANES + l], c2)),
                   p2_sbox(p2_add(s[(g + 3u) * MSL_LANES + l], c3)));
    }
  }
  p2_external_sums(s);
}

// x·2^-k for x < p (1 ≤ k ≤ 27), fully reduced, by shifts: with m = −x mod 2^k, x + m·p is a
// multiple of 2^k (p ≡ 1 mod 2^27) below 2^k·p, and (x + m·p) / 2^k = (x + m) / 2^k + 15·m·2^(27−k).
// A product by a constant keeps the Montgomery form (c·xR = (cx)R), so this is the product of
// the state element by the field element 2^-k.
MSL_FN uint p2_mul_2exp_neg(uint x, uint k) {
  uint m = (0u - x) & ((1u << k) - 1u);
  return ((x + m) >> k) + ((m << (31u - k)) - (m << (27u - k)));
}

// Elements 1..15 of lane l become full + V[i]·x_i, with the BabyBear width-16 diagonal (Plonky3's
// BABYBEAR_INTERNAL_DIAGONAL; rc[P2_RC_DIAG..] holds the same values)
//   V = [−2, 1, 2, 1/2, 3, 4, −1/2, −3, −4, 1/2^8, 1/4, 1/8, 1/2^27, −1/2^8, −1/16, −1/2^27]
// by additions and shifts instead of 15 Montgomery products (a quarter of a permutation's
// products); returns their sum, the next round's `part`, as a tree.
MSL_FN uint p2_internal_diag(thread uint* s, uint l, uint full) {
#define P2_E(i) s[(i) * MSL_LANES + l]
  uint x2 = p2_add(P2_E(2u), P2_E(2u));
  uint x4 = p2_add(P2_E(4u), P2_E(4u));
  uint x5 = p2_add(P2_E(5u), P2_E(5u));
  uint x7 = p2_add(P2_E(7u), P2_E(7u));
  uint x8 = p2_add(P2_E(8u), P2_E(8u));
  uint v1 = p2_add(full, P2_E(1u));
  uint v2 = p2_add(full, x2);
  uint v3 = p2_add(full, p2_mul_2exp_neg(P2_E(3u), 1u));
  uint v4 = p2_add(full, p2_add(x4, P2_E(4u)));
  uint v5 = p2_add(full, p2_add(x5, x5));
  uint v6 = p2_sub(full, p2_mul_2exp_neg(P2_E(6u), 1u));
  uint v7 = p2_sub(full, p2_add(x7, P2_E(7u)));
  uint v8 = p2_sub(full, p2_add(x8, x8));
  uint v9 = p2_add(full, p2_mul_2exp_neg(P2_E(9u), 8u));
  uint v10 = p2_add(full, p2_mul_2exp_neg(P2_E(10u), 2u));
  uint v11 = p2_add(full, p2_mul_2exp_neg(P2_E(11u), 3u));
  uint v12 = p2_add(full, p2_mul_2exp_neg(P2_E(12u), 27u));
  uint v13 = p2_sub(full, p2_mul_2exp_neg(P2_E(13u), 8u));
  uint v14 = p2_sub(full, p2_mul_2exp_neg(P2_E(14u), 4u));
  uint v15 = p2_sub(full, p2_mul_2exp_neg(P2_E(15u), 27u));
  P2_E(1u) = v1; P2_E(2u) = v2; P2_E(3u) = v3; P2_E(4u) = v4; P2_E(5u) = v5;
  P2_E(6u) = v6; P2_E(7u) = v7; P2_E(8u) = v8; P2_E(9u) = v9; P2_E(10u) = v10;
  P2_E(11u) = v11; P2_E(12u) = v12; P2_E(13u) = v13; P2_E(14u) = v14; P2_E(15u) = v15;
#undef P2_E
  uint a = p2_add(p2_add(v1, v2), p2_add(v3, v4));
  uint b = p2_add(p2_add(v5, v6), p2_add(v7, v8));
  uint c = p2_add(p2_add(v9, v10), p2_add(v11, v12));
  uint d = p2_add(p2_add(v13, v14), v15);
  return p2_add(p2_add(a, b), p2_add(c, d));
}

// The 13 partial rounds: S-box on element 0 only, then M_I = J + diag(V) (p2_internal_diag).
// `part` carries, per lane, the sum of elements 1..15 from one round to the next.
MSL_FN void p2_partial_rounds(thread uint* s, constant uint* rc) {
  uint part[MSL_LANES];
  MSL_FOR_LANES(l) part[l] = s[MSL_LANES + l];
  for (uint i = 2u; i < P2_WIDTH; i++) {
    MSL_FOR_LANES(l) part[l] = p2_add(part[l], s[i * MSL_LANES + l]);
  }
  for (uint r = 0u; r < 13u; r++) {
    uint c = rc[P2_RC_INTERNAL + r];
    MSL_FOR_LANES(l) {
      uint s0 = p2_sbox(p2_add(s[l], c));
      uint full = p2_add(part[l], s0);
      s[l] = p2_sub(part[l], s0);  // V[0] = -2
      part[l] = p2_internal_diag(s, l, full);
    }
  }
}

#if defined(MSL_TARGET_HOST)
// The host device's permutation: the same rounds on the lane vectors of babybear.h, one
// lanes_uint per element (16 registers of 16 lanes with AVX-512), so that every product is
// bb_mul_lanes (even/odd 64-bit products) instead of GCC's vectorisation of the scalar bb_mul
// (widen, 64-bit multiply, narrow: about twice the instructions), and the state stays in registers
// from round to round. The GPU version below is the specification; TestPermuteMatchesGo and
// TestISAVariantsAgree check this one against Go on every instruction-set copy.
//
// The rounds work on lanes_reg (babybear.h): one register's lanes at a time.
MSL_FN lanes_reg p2_sbox_lanes(lanes_reg x) {  // x^7
  lanes_reg x2 = bb_mul_lanes(x, x);
  lanes_reg x3 = bb_mul_lanes(x2, x);
  lanes_reg x4 = bb_mul_lanes(x2, x2);
  return bb_mul_lanes(x3, x4);
}

// (x + c)^7: the round constant's addition and the S-box. The AVX-512 and AVX2 copies follow
// Plonky3's packed x^7 for Monty-31 fields (monty-31/src/x86_64_avx512): x + c − p is a signed
// value in [−p, p); the even and the odd lanes are raised as signed 64-bit products (pmuldq)
// whose Montgomery reductions stay signed in (−p, p) (two products and a subtraction each, no
// correction), and the halves are recombined and reduced to [0, p) only after the last product.
// The same values as bb_mul_lanes' chain, in about 45 instructions a register instead of 62.
#if defined(HD_AVX512_PMULUDQ)
typedef lanes_ulong p2_wide;
#define P2_PMULDQ(a, b) \
  ((lanes_ulong)__builtin_ia32_pmuldq512_mask((lanes_si512)(a), (lanes_si512)(b), (lanes_sl512){}, (unsigned char)0xff))
#define P2_HIGH_WORDS 1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15
#define P2_HIGH_WORDS_OF(e, o) __builtin_shufflevector((lanes_reg)(e), (lanes_reg)(o), 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31)
#define P2_SIGNED_SBOX 1
#elif HD_LANE_PARTS == 2
typedef lanes_wpart p2_wide;
#define P2_PMULDQ(a, b) ((lanes_wpart)__builtin_ia32_pmuldq256((lanes_si_part)(a), (lanes_si_part)(b)))
#define P2_HIGH_WORDS 1, 1, 3, 3, 5, 5, 7, 7
#define P2_HIGH_WORDS_OF(e, o) __builtin_shufflevector((lanes_reg)(e), (lanes_reg)(o), LANES_ODD_HI)
#define P2_SIGNED_SBOX 1
#endif
#if defined(P2_SIGNED_SBOX)
// The high word of each 64-bit lane in both of its words (vmovshdup).
MSL_FN p2_wide p2_high_words(p2_wide x) {
  lanes_reg v = (lanes_reg)x;
  return (p2_wide)__builtin_shufflevector(v, v, P2_HIGH_WORDS);
}
// x·2^−32 mod p as a signed value in (−p, p), in both words of each 64-bit lane, for signed 64-bit
// x with |x| < 2^31·p: q = lo(x)·p^−1 (mod 2^32, signed) makes x − q·p a multiple of 2^32.
MSL_FN p2_wide p2_redc_signed(p2_wide x, p2_wide pinv, p2_wide pc) {
  return p2_high_words(x - P2_PMULDQ(P2_PMULDQ(x, pinv), pc));
}
// x^7·2^−96 unreduced (signed 64-bit, |·| < p²) for x signed in the low word of each 64-bit lane.
MSL_FN p2_wide p2_pow7_half(p2_wide x, p2_wide pinv, p2_wide pc) {
  p2_wide x2 = p2_redc_signed(P2_PMULDQ(x, x), pinv, pc);
  p2_wide x3 = p2_redc_signed(P2_PMULDQ(x2, x), pinv, pc);
  p2_wide x4 = p2_redc_signed(P2_PMULDQ(x2, x2), pinv, pc);
  return P2_PMULDQ(x3, x4);
}
MSL_FN lanes_reg p2_sbox_rc_lanes(lanes_reg v, uint c) {
  // pmuldq reads the low word of each 64-bit lane only: splats of 32-bit words serve as operands.
  p2_wide pc = (p2_wide)lanes_reg_splat(BB_P), pinv = (p2_wide)lanes_reg_splat(BB_PINV);
  p2_wide x = (p2_wide)(v + lanes_reg_splat(c - BB_P));
  p2_wide e = p2_pow7_half(x, pinv, pc);
  p2_wide o = p2_pow7_half(p2_high_words(x), pinv, pc);
  p2_wide qe = P2_PMULDQ(P2_PMULDQ(e, pinv), pc);
  p2_wide qo = P2_PMULDQ(P2_PMULDQ(o, pinv), pc);
  // The high words: (e − qe)/2^32 = hi(e) − hi(qe) exactly, as their low words are equal.
  lanes_reg hi = P2_HIGH_WORDS_OF(e, o);
  lanes_reg mp = P2_HIGH_WORDS_OF(qe, qo);
  lanes_reg r = hi - mp;
  lanes_reg s = r + BB_P;
  return r < s ? r : s;
}
#else
MSL_FN lanes_reg p2_sbox_rc_lanes(lanes_reg v, uint c) { return p2_sbox_lanes(bb_add_lanes(v, lanes_reg_splat(c))); }
#endif

// M_E on the 16 element vectors: mat4 on each group of four, then the sums of equal residues mod 4.
MSL_FN void p2_external_lanes(thread lanes_reg* v) {
  MSL_UNROLL
  for (uint g = 0u; g < P2_WIDTH; g += 4u) {
    lanes_reg x0 = v[g], x1 = v[g + 1u], x2 = v[g + 2u], x3 = v[g + 3u];
    lanes_reg t01 = bb_add_lanes(x0, x1);
    lanes_reg t23 = bb_add_lanes(x2, x3);
    lanes_reg t0123 = bb_add_lanes(t01, t23);
    lanes_reg t01123 = bb_add_lanes(t0123, x1);
    lanes_reg t01233 = bb_add_lanes(t0123, x3);
    v[g] = bb_add_lanes(t01123, t01);
    v[g + 1u] = bb_add_lanes(t01123, bb_add_lanes(x2, x2));
    v[g + 2u] = bb_add_lanes(t01233, t23);
    v[g + 3u] = bb_add_lanes(t01233, bb_add_lanes(x0, x0));
  }
  MSL_UNROLL
  for (uint k = 0u; k < 4u; k++) {
    lanes_reg sum = bb_add_lanes(bb_add_lanes(v[k], v[4u + k]), bb_add_lanes(v[8u + k], v[12u + k]));
    v[k] = bb_add_lanes(v[k], sum);
    v[4u + k] = bb_add_lanes(v[4u + k], sum);
    v[8u + k] = bb_add_lanes(v[8u + k], sum);
    v[12u + k] = bb_add_lanes(v[12u + k], sum);
  }
}

MSL_FN void p2_full_round_lanes(thread lanes_reg* v, constant uint* rc, uint off) {
  MSL_UNROLL
  for (uint i = 0u; i < P2_WIDTH; i++) v[i] = p2_sbox_rc_lanes(v[i], rc[off + i]);
  p2_external_lanes(v);
}

// p2_mul_2exp_neg on lane vectors.
MSL_FN lanes_reg p2_mul_2exp_neg_lanes(lanes_reg x, uint k) {
  lanes_reg m = (lanes_reg_splat(0u) - x) & lanes_reg_splat((1u << k) - 1u);
  return ((x + m) >> k) + ((m << (31u - k)) - (m << (27u - k)));
}

// v[i] = full + V[i]·v[i] for i = 1..15: p2_internal_diag on lane vectors.
MSL_FN void p2_internal_diag_lanes(thread lanes_reg* v, lanes_reg full) {
  lanes_reg x2 = bb_add_lanes(v[2], v[2]);
  lanes_reg x4 = bb_add_lanes(v[4], v[4]);
  lanes_reg x5 = bb_add_lanes(v[5], v[5]);
  lanes_reg x7 = bb_add_lanes(v[7], v[7]);
  lanes_reg x8 = bb_add_lanes(v[8], v[8]);
  v[1] = bb_add_lanes(full, v[1]);
  v[2] = bb_add_lanes(full, x2);
  v[3] = bb_add_lanes(full, p2_mul_2exp_neg_lanes(v[3], 1u));
  v[4] = bb_add_lanes(full, bb_add_lanes(x4, v[4]));
  v[5] = bb_add_lanes(full, bb_add_lanes(x5, x5));
  v[6] = bb_sub_lanes(full, p2_mul_2exp_neg_lanes(v[6], 1u));
  v[7] = bb_sub_lanes(full, bb_add_lanes(x7, v[7]));
  v[8] = bb_sub_lanes(full, bb_add_lanes(x8, x8));
  v[9] = bb_add_lanes(full, p2_mul_2exp_neg_lanes(v[9], 8u));
  v[10] = bb_add_lanes(full, p2_mul_2exp_neg_lanes(v[10], 2u));
  v[11] = bb_add_lanes(full, p2_mul_2exp_neg_lanes(v[11], 3u));
  v[12] = bb_add_lanes(full, p2_mul_2exp_neg_lanes(v[12], 27u));
  v[13] = bb_sub_lanes(full, p2_mul_2exp_neg_lanes(v[13], 8u));
  v[14] = bb_sub_lanes(full, p2_mul_2exp_neg_lanes(v[14], 4u));
  v[15] = bb_sub_lanes(full, p2_mul_2exp_neg_lanes(v[15], 27u));
}

// v[1] + … + v[15] as a tree: the partial rounds wait on this sum (a chain of 14 additions
// took longer than the products it waits for).
MSL_FN lanes_reg p2_sum15_lanes(thread const lanes_reg* v) {
  lanes_reg a = bb_add_lanes(bb_add_lanes(v[1], v[2]), bb_add_lanes(v[3], v[4]));
  lanes_reg b = bb_add_lanes(bb_add_lanes(v[5], v[6]), bb_add_lanes(v[7], v[8]));
  lanes_reg c = bb_add_lanes(bb_add_lanes(v[9], v[10]), bb_add_lanes(v[11], v[12]));
  lanes_reg d = bb_add_lanes(bb_add_lanes(v[13], v[14]), v[15]);
  return bb_add_lanes(bb_add_lanes(a, b), bb_add_lanes(c, d));
}

// The permutation of the LANES_REG states of lanes [l0, l0 + LANES_REG) of a lane-major
// state array, in place.
MSL_FN void p2_permute_vec(thread uint* s, constant uint* rc, uint l0) {
  lanes_reg v[P2_WIDTH];
  MSL_UNROLL
  for (uint i = 0u; i < P2_WIDTH; i++) v[i] = lanes_reg_ld_th(s + i * MSL_LANES + l0);
  p2_external_lanes(v);
#pragma GCC unroll 1
  for (uint r = 0u; r < 4u; r++) p2_full_round_lanes(v, rc, P2_RC_EXT_INIT + 16u * r);
  // Partial rounds: S-box on element 0, then M_I = J + diag(V) with V[0] = −2; `part` carries the
  // sum of elements 1..15 from one round to the next.
  lanes_reg part = p2_sum15_lanes(v);
#pragma GCC unroll 1
  for (uint r = 0u; r < 13u; r++) {
    lanes_reg s0 = p2_sbox_rc_lanes(v[0], rc[P2_RC_INTERNAL + r]);
    lanes_reg full = bb_add_lanes(part, s0);
    v[0] = bb_sub_lanes(part, s0);
    p2_internal_diag_lanes(v, full);
    part = p2_sum15_lanes(v);
  }
#pragma GCC unroll 1
  for (uint r = 0u; r < 4u; r++) p2_full_round_lanes(v, rc, P2_RC_EXT_FINAL + 16u * r);
  MSL_UNROLL
  for (uint i = 0u; i < P2_WIDTH; i++) lanes_reg_st_th(s + i * MSL_LANES + l0, v[i]);
}

// The permutation, in place, on MSL_LANES lane-major states: one register's lanes after the other,
// so that the 16 state vectors stay in registers (AVX2: 16 ymm; 16 lane vectors of two parts
// would take 32 and spill on every round).
MSL_FN void p2_permute(thread uint* s, constant uint* rc) {
#pragma GCC unroll 1
  for (uint l0 = 0u; l0 < MSL_LANES; l0 += LANES_REG) p2_permute_vec(s, rc, l0);
}
#else
// The permutation, in place, on MSL_LANES lane-major states.
MSL_FN void p2_permute(thread uint* s, constant uint* rc) {
  p2_external(s);
  for (uint r = 0u; r < 4u; r++) p2_full_round(s, rc, P2_RC_EXT_INIT + 16u * r);
  p2_partial_rounds(s, rc);
  for (uint r = 0u; r < 4u; r++) p2_full_round(s, rc, P2_RC_EXT_FINAL + 16u * r);
}
#endif

#endif  // POSEIDON2_H
