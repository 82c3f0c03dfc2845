// babybear.h - BabyBear field, p = 2^31 - 2^27 + 1 = 0x78000001, in Montgomery form (R = 2^32).
// Written once in the subset of MSL that prelude.h provides for CUDA and the host: only uint
// arithmetic plus 32-bit mulhi (no 64-bit multiply, which Apple GPUs emulate slowly).
// Values are kept fully reduced, in [0, p). Buffers hold canonical values (internal/field) on the
// host side; kernels convert with bb_to_mont / bb_from_mont (field_ops: fo_to_mont, fo_from_mont).
#ifndef BABYBEAR_H
#define BABYBEAR_H
#include "prelude.h"

#define BB_P 0x78000001u     // modulus
#define BB_PINV 0x88000001u  // p^-1 mod 2^32
#define BB_ONE 0x0ffffffeu   // 1 in Montgomery form: 2^32 mod p
#define BB_R2 0x45dddde3u    // 2^64 mod p: bb_mul(x, BB_R2) converts x into Montgomery form
#define BB_ZERO 0u

MSL_FN uint bb_add(uint a, uint b) {
  uint r = a + b;  // < 2^32 as a, b < 2^31
  return r >= BB_P ? r - BB_P : r;
}

MSL_FN uint bb_sub(uint a, uint b) {
  uint r = a - b;
  return a < b ? r + BB_P : r;
}

MSL_FN uint bb_neg(uint a) { return a == 0u ? 0u : BB_P - a; }

MSL_FN uint bb_double(uint a) { return bb_add(a, a); }

// Montgomery product a*b/2^32 mod p, from four 32-bit multiplies:
// with m = lo(ab)*p^-1 mod 2^32, ab - m*p is divisible by 2^32 and equals
// 2^32*(hi(ab) - hi(m*p)) exactly (the low halves cancel).
// bb_mulhi_p(m) = mulhi(m, BB_P) on the x86-64 host device, from 32-bit operations only: with
// p = 2^31 − 2^27 + 1, m·p = 2^32·(m/2 − m/32) + (m mod 2)·2^31 − (m mod 32)·2^27 + m (integer
// halves), and that low remainder lies in (−2^32, 2^32 + 2^31): one carry, one borrow. GCC's
// vector code for a 32×32→64-bit product is long (widen, 64-bit multiply, narrow), so this makes
// the vectorised lane loops about 16 % faster; GPUs (and NEON) have a native mulhi.
MSL_FN uint bb_mulhi_p(uint m) {
#if defined(MSL_TARGET_HOST) && defined(__x86_64__)
  uint x = m + ((m & 1u) << 31);
  uint carry = x < m ? 1u : 0u;
  uint borrow = x < ((m & 31u) << 27) ? 1u : 0u;
  return (m >> 1) - (m >> 5) + carry - borrow;
#else
  return mulhi(m, BB_P);
#endif
}

MSL_FN uint bb_mul(uint a, uint b) {
  uint lo = a * b;
  uint hi = mulhi(a, b);
  uint m = lo * BB_PINV;
  uint mp = bb_mulhi_p(m);
  uint r = hi - mp;
  return hi < mp ? r + BB_P : r;
}

MSL_FN uint bb_square(uint a) { return bb_mul(a, a); }

MSL_FN uint bb_to_mont(uint x) { return bb_mul(x, BB_R2); }  // x < p (canonical)
MSL_FN uint bb_from_mont(uint x) { return bb_mul(x, 1u); }   // back to canonical

MSL_FN uint bb_pow(uint a, uint e) {  // a in Montgomery form
  uint r = BB_ONE;
  while (e != 0u) {
    if ((e & 1u) != 0u) r = bb_mul(r, a);
    a = bb_mul(a, a);
    e >>= 1;
  }
  return r;
}

MSL_FN uint bb_inv(uint a) { return bb_pow(a, BB_P - 2u); }  // inv(0) = 0

#endif  // BABYBEAR_H
