// babybear.h - BabyBear field, p = 2^31 - 2^27 + 1 = 0x78000001, in Montgomery form (R = 2^32).
// Written once in the subset of MSL that prelude.h provides for CUDA and the host: only uint
// arithmetic plus 32-bit mulhi (no 64-bit multiply, which Apple GPUs emulate slowly).
// Values are kept fully reduced, in [0, p). Buffers hold canonical values (internal/field) on the
// host side; kernels convert with bb_to_mont / bb_from_mont (field_ops: fo_to_mont, fo_from_mont).
#ifndef BABYBEAR_H
#define BABYBEAR_H
#include "prelude.h"

#include "field_consts.h"  // BB_P, BB_PINV, BB_ONE, BB_R2 (generated from internal/field)
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

// Sums of products, reduced once (bb4_mul): a 64-bit accumulator (two words on Metal) of up to
// four products of values < p (each < 2^61.82, the sum < 2^63.82), Montgomery-reduced by
// bb_redc_wide. One reduction for four products instead of four: an Fp4 product takes 16
// widening multiply-adds and 4 reductions rather than 16 Montgomery products and 12 additions.
// Metal: a widening product is mul + mulhi (what bb_mul does), the sum carries by hand, so no
// 64-bit multiply is asked of Apple's compiler; CUDA and the host: one multiply-add a product.
#if defined(MSL_TARGET_METAL) || defined(BB_WIDE_SPLIT)  // BB_WIDE_SPLIT: check-msl compiles this branch too
typedef uint2 bb_wide;  // (low word, high word)
#define BB_WIDE_LO(w) ((w).x)  // macros: no copy of a uint2 (the OpenCL check has no copy constructor)
#define BB_WIDE_HI(w) ((w).y)
MSL_FN bb_wide bb_wide_mul(uint a, uint b) { return uint2(a * b, mulhi(a, b)); }
MSL_FN bb_wide bb_wide_mad(bb_wide acc, uint a, uint b) {
  uint lo = a * b;
  uint sum = BB_WIDE_LO(acc) + lo;
  return uint2(sum, BB_WIDE_HI(acc) + mulhi(a, b) + (sum < lo ? 1u : 0u));
}
#else
typedef ulong bb_wide;
MSL_FN bb_wide bb_wide_mul(uint a, uint b) { return (ulong)a * b; }
MSL_FN bb_wide bb_wide_mad(bb_wide acc, uint a, uint b) { return acc + (ulong)a * b; }
#define BB_WIDE_LO(w) ((uint)(w))
#define BB_WIDE_HI(w) ((uint)((w) >> 32))
#endif

// x·2^−32 mod p, fully reduced, for x < 2p·2^32 (bb_mul's reduction: hi − hi(m·p) lies in
// (−p, hi], and hi < 2p here, so one more conditional subtraction).
MSL_FN uint bb_redc_wide(bb_wide x) {
  uint hi = BB_WIDE_HI(x);
  uint m = BB_WIDE_LO(x) * BB_PINV;
  uint mp = bb_mulhi_p(m);
  uint r = hi - mp;
  r = hi < mp ? r + BB_P : r;
  return r >= BB_P ? r - BB_P : r;
}

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

// Lane vectors (see "Lanes" in prelude.h): `lanes_uint` holds one uint per lane. On the host it is
// a GCC/clang vector of MSL_LANES uints, so lane code keeps its values in SIMD registers and its
// field arithmetic is written once per vector (bb_mul_lanes: the x86-64 version multiplies even
// and odd lanes as 64-bit products, half the instructions of GCC's vectorisation of bb_mul). On
// GPUs (MSL_LANES = 1) it is a plain uint and every helper is the scalar one.
#if defined(MSL_TARGET_HOST)
// Vector arguments of these always-inline helpers cross no ABI: GCC's -Wpsabi warnings about
// them (for the baseline clone) are noise (the "changed in GCC 4.6" note needs -Wno-psabi, host.go).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef uint lanes_uint __attribute__((vector_size(4 * MSL_LANES)));
typedef ulong lanes_ulong __attribute__((vector_size(4 * MSL_LANES)));  // MSL_LANES / 2 ulongs
#if MSL_LANES == 16u && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define LANES_SHUFFLE 1  // __builtin_shufflevector (GCC 12+, clang): the x86 bb_mul_lanes, transposes
#else
#define LANES_SHUFFLE 0
#endif
// Splats through a shuffle: GCC 12 turns `(lanes_uint){} + x` in a baseline-compiled helper into
// 16 masked inserts in the AVX-512 clone of its caller (and made the NTT 35 % slower).
MSL_FN lanes_uint lanes_splat(uint x) {
#if LANES_SHUFFLE
  lanes_uint v = {x};
  return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#else
  return (lanes_uint){} + x;
#endif
}
MSL_FN uint lanes_get(lanes_uint v, uint l) { return v[l]; }
MSL_FN lanes_uint lanes_ld_dev(device const uint* p) {
  lanes_uint v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MSL_FN lanes_uint lanes_ld_tg(threadgroup const uint* p) {
  lanes_uint v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MSL_FN lanes_uint lanes_ld_th(thread const uint* p) {
  lanes_uint v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MSL_FN void lanes_st_dev(device uint* p, lanes_uint v) { __builtin_memcpy(p, &v, sizeof v); }
MSL_FN void lanes_st_tg(threadgroup uint* p, lanes_uint v) { __builtin_memcpy(p, &v, sizeof v); }
// A hint that *p will be read soon (into L2 on x86); nothing on GPUs.
MSL_FN void lanes_prefetch(device const uint* p) { __builtin_prefetch(p, 0, 2); }
// Fully reduced sums and differences: min(r, r ∓ p) picks the reduced one (the other wrapped).
MSL_FN lanes_uint bb_add_lanes(lanes_uint a, lanes_uint b) {
  lanes_uint r = a + b;
  lanes_uint s = r - BB_P;
  return r < s ? r : s;
}
MSL_FN lanes_uint bb_sub_lanes(lanes_uint a, lanes_uint b) {
  lanes_uint r = a - b;
  lanes_uint s = r + BB_P;
  return r < s ? r : s;
}
MSL_FN lanes_uint bb_mul_lanes(lanes_uint a, lanes_uint b) {
#if defined(__x86_64__) && LANES_SHUFFLE && !defined(HD_GENERIC_LANES)
  // hi(a·b) and hi(m·p) from 64-bit products of the even lanes (low halves) and the odd lanes
  // (shifted down); p reaches the multiplies through an empty asm so that GCC keeps one vpmullq
  // rather than expanding the constant into shifts.
  uint pc = BB_P;
  __asm__("" : "+r"(pc));
  lanes_ulong p = {pc};
  p = __builtin_shufflevector(p, p, 0, 0, 0, 0, 0, 0, 0, 0);
  lanes_ulong lo32 = (lanes_ulong){} + 0xffffffffuL;
  lanes_ulong pe = ((lanes_ulong)a & lo32) * ((lanes_ulong)b & lo32);
  lanes_ulong po = ((lanes_ulong)a >> 32) * ((lanes_ulong)b >> 32);
  lanes_uint m = (a * b) * BB_PINV;
  lanes_ulong qe = ((lanes_ulong)m & lo32) * p;
  lanes_ulong qo = ((lanes_ulong)m >> 32) * p;
  lanes_uint hi = __builtin_shufflevector((lanes_uint)pe, (lanes_uint)po, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27,
                                          13, 29, 15, 31);
  lanes_uint mp = __builtin_shufflevector((lanes_uint)qe, (lanes_uint)qo, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27,
                                          13, 29, 15, 31);
  lanes_uint r = hi - mp;
  lanes_uint s = r + BB_P;
  return r < s ? r : s;
#else
  // Other hosts (aarch64: NEON's umull/umull2 widen natively): 64-bit products of the lanes
  // converted up, their high halves converted down. scripts/host-isa-check.sh runs this code on
  // x86-64 too (HD_GENERIC_LANES).
  typedef ulong lanes_wide __attribute__((vector_size(8 * MSL_LANES)));
  lanes_wide ab = __builtin_convertvector(a, lanes_wide) * __builtin_convertvector(b, lanes_wide);
  lanes_uint m = (a * b) * BB_PINV;
  lanes_wide mp64 = __builtin_convertvector(m, lanes_wide) * (ulong)BB_P;
  lanes_uint hi = __builtin_convertvector(ab >> 32, lanes_uint);
  lanes_uint mp = __builtin_convertvector(mp64 >> 32, lanes_uint);
  lanes_uint r = hi - mp;
  lanes_uint s = r + BB_P;
  return r < s ? r : s;
#endif
}
// lanes_transpose: v[i][l] ↔ v[l][i] for the MSL_LANES × MSL_LANES uints of v[0 .. MSL_LANES).
#if LANES_SHUFFLE
// Four steps exchange the off-diagonal k × k blocks (k = 8, 4, 2, 1) of the pairs (v[i], v[i + k]).
#define LANES_TR_STEP(k, ia, ib)                                                 \
  for (uint i = 0u; i < 16u; i++) {                                            \
    if ((i & k) == 0u) {                                                       \
      lanes_uint a = v[i];                                                     \
      lanes_uint b = v[i + k];                                                 \
      v[i] = __builtin_shufflevector(a, b, ia);                                \
      v[i + k] = __builtin_shufflevector(a, b, ib);                            \
    }                                                                          \
  }
#define LANES_TR8A 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define LANES_TR8B 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define LANES_TR4A 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define LANES_TR4B 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define LANES_TR2A 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define LANES_TR2B 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LANES_TR1A 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define LANES_TR1B 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
MSL_FN void lanes_transpose(thread lanes_uint* v) {
  MSL_UNROLL
  LANES_TR_STEP(8u, LANES_TR8A, LANES_TR8B)
  MSL_UNROLL
  LANES_TR_STEP(4u, LANES_TR4A, LANES_TR4B)
  MSL_UNROLL
  LANES_TR_STEP(2u, LANES_TR2A, LANES_TR2B)
  MSL_UNROLL
  LANES_TR_STEP(1u, LANES_TR1A, LANES_TR1B)
}
#else
MSL_FN void lanes_transpose(thread lanes_uint* v) {
  for (uint i = 0u; i < MSL_LANES; i++) {
    for (uint l = i + 1u; l < MSL_LANES; l++) {
      uint x = v[i][l];
      v[i][l] = v[l][i];
      v[l][i] = x;
    }
  }
}
#endif
#else
typedef uint lanes_uint;
MSL_FN lanes_uint lanes_splat(uint x) { return x; }
MSL_FN uint lanes_get(lanes_uint v, uint l) { return v; }
MSL_FN lanes_uint lanes_ld_dev(device const uint* p) { return *p; }
MSL_FN lanes_uint lanes_ld_tg(threadgroup const uint* p) { return *p; }
MSL_FN lanes_uint lanes_ld_th(thread const uint* p) { return *p; }
MSL_FN void lanes_st_dev(device uint* p, lanes_uint v) { *p = v; }
MSL_FN void lanes_st_tg(threadgroup uint* p, lanes_uint v) { *p = v; }
MSL_FN void lanes_prefetch(device const uint* p) {}
MSL_FN lanes_uint bb_add_lanes(lanes_uint a, lanes_uint b) { return bb_add(a, b); }
MSL_FN lanes_uint bb_sub_lanes(lanes_uint a, lanes_uint b) { return bb_sub(a, b); }
MSL_FN lanes_uint bb_mul_lanes(lanes_uint a, lanes_uint b) { return bb_mul(a, b); }
MSL_FN void lanes_transpose(thread lanes_uint* v) {}
#endif

#endif  // BABYBEAR_H
