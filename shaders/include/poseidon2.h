// poseidon2.h - the Poseidon2 permutation over BabyBear, width 16 (Plonky3 v0.4.3
// default_babybear_poseidon2_16, spec A §2), on Montgomery-form lanes. Mirrors
// internal/poseidon2.Permute: initial M_E, 4 full rounds, 13 partial rounds, 4 full rounds.
//
// Round constants come in a buffer `rc` of P2_RC_LEN uints, all in Montgomery form:
//   rc[P2_RC_EXT_INIT + 16·r + i]   r < 4: constants of the initial full rounds
//   rc[P2_RC_INTERNAL + r]          r < 13: constant of partial round r (added to lane 0)
//   rc[P2_RC_EXT_FINAL + 16·r + i]  r < 4: constants of the final full rounds
//   rc[P2_RC_DIAG + i]              i < 16: the diagonal V of M_I = J + diag(V)
// (internal/kernels.Poseidon2Constants builds it from internal/poseidon2.)
#ifndef POSEIDON2_H
#define POSEIDON2_H
#include "babybear.h"

#define P2_WIDTH 16u
#define P2_RATE 8u
#define P2_RC_EXT_INIT 0u
#define P2_RC_INTERNAL 64u
#define P2_RC_EXT_FINAL 77u
#define P2_RC_DIAG 141u
#define P2_RC_LEN 157u

// [2 3 1 1; 1 2 3 1; 1 1 2 3; 3 1 1 2] applied to s[o..o+4).
MSL_FN void p2_mat4(thread uint* s, uint o) {
  uint x0 = s[o], x1 = s[o + 1u], x2 = s[o + 2u], x3 = s[o + 3u];
  uint t01 = bb_add(x0, x1);
  uint t23 = bb_add(x2, x3);
  uint t0123 = bb_add(t01, t23);
  uint t01123 = bb_add(t0123, x1);
  uint t01233 = bb_add(t0123, x3);
  s[o + 3u] = bb_add(t01233, bb_double(x0));
  s[o + 1u] = bb_add(t01123, bb_double(x2));
  s[o] = bb_add(t01123, t01);
  s[o + 2u] = bb_add(t01233, t23);
}

// M_E: mat4 on each group of four lanes, then add the sum of the lanes ≡ k (mod 4) to each.
MSL_FN void p2_external(thread uint* s) {
  p2_mat4(s, 0u);
  p2_mat4(s, 4u);
  p2_mat4(s, 8u);
  p2_mat4(s, 12u);
  for (uint k = 0u; k < 4u; k++) {
    uint sum = bb_add(bb_add(s[k], s[4u + k]), bb_add(s[8u + k], s[12u + k]));
    s[k] = bb_add(s[k], sum);
    s[4u + k] = bb_add(s[4u + k], sum);
    s[8u + k] = bb_add(s[8u + k], sum);
    s[12u + k] = bb_add(s[12u + k], sum);
  }
}

MSL_FN uint p2_sbox(uint x) {  // x^7
  uint x2 = bb_mul(x, x);
  uint x3 = bb_mul(x2, x);
  uint x4 = bb_mul(x2, x2);
  return bb_mul(x3, x4);
}

MSL_FN void p2_full_round(thread uint* s, constant uint* rc, uint off) {
  for (uint i = 0u; i < P2_WIDTH; i++) s[i] = p2_sbox(bb_add(s[i], rc[off + i]));
  p2_external(s);
}

// The permutation, in place, on 16 Montgomery lanes.
MSL_FN void p2_permute(thread uint* s, constant uint* rc) {
  p2_external(s);
  for (uint r = 0u; r < 4u; r++) p2_full_round(s, rc, P2_RC_EXT_INIT + 16u * r);
  for (uint r = 0u; r < 13u; r++) {
    uint s0 = p2_sbox(bb_add(s[0], rc[P2_RC_INTERNAL + r]));
    uint part = s[1];
    for (uint i = 2u; i < P2_WIDTH; i++) part = bb_add(part, s[i]);
    uint full = bb_add(part, s0);
    s[0] = bb_sub(part, s0);  // V[0] = -2
    for (uint i = 1u; i < P2_WIDTH; i++) s[i] = bb_add(full, bb_mul(rc[P2_RC_DIAG + i], s[i]));
  }
  for (uint r = 0u; r < 4u; r++) p2_full_round(s, rc, P2_RC_EXT_FINAL + 16u * r);
}

#endif  // POSEIDON2_H
