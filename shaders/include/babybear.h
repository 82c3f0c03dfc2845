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

#if defined(MSL_TARGET_CUDA) && defined(BB_SIGNFIX)
// BB_SIGNFIX (an NVRTC option of the generated round-0 constraint module only, cuda.moduleOptions):
// additions, subtractions and products end with r + p·(sign bit of r), r in (−p, p), the product
// an IMAD, instead of a compare and a conditional add. More instructions (the SASS of
// merkle_hash_rows: IMAD 711 → 1,105, SHF 23 → 441, ISETP 456 → 0), so slower where the ALU pipe
// was not the limit: everywhere on an H200 (keccakf-1024 kernels 26.75 → 29.03 ms) except
// zc_uni_generated, 2,446 → 2,190 µs.
MSL_FN uint bb_signfix(uint r) {
  uint out;
  asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(out) : "r"(r >> 31), "r"(BB_P), "r"(r));
  return out;
}
MSL_FN uint bb_add(uint a, uint b) { return bb_signfix(a + b - BB_P); }
MSL_FN uint bb_sub(uint a, uint b) { return bb_signfix(a - b); }
#else
MSL_FN uint bb_add(uint a, uint b) {
  uint r = a + b;  // < 2^32 as a, b < 2^31
  return r >= BB_P ? r - BB_P : r;
}

MSL_FN uint bb_sub(uint a, uint b) {
  uint r = a - b;
  return a < b ? r + BB_P : r;
}
#endif

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
#if defined(MSL_TARGET_CUDA) && defined(BB_SIGNFIX)
  return bb_signfix(r);
#else
  return hi < mp ? r + BB_P : r;
#endif
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
// HD_LANE_PARTS: how many native SIMD registers hold one lane vector. A lane vector is 64 bytes
// (16 uints); GCC has a register mode for that only with AVX-512: without it, GCC keeps such a
// vector in memory and lowers every operation piecewise through the stack, and a 64-bit lane
// product becomes a full 64×64-bit emulation (the AVX2 copy ran Poseidon2 at 0.77× pure Go:
// docs/perf-notes/host-simd.md). So where GCC compiles a copy of the lane kernels for a narrower
// instruction set (HD_LANE_COPY, set by the host's generated files of copies: 3 for AVX2, 1 for
// the baseline file), a lane vector is a struct of 2 (AVX2) or 4 (SSE2) native vectors and the
// helpers below work part by part; 64-bit products of 32-bit halves are pmuludq. clang splits wide
// vectors into registers on its own, and the AVX-512 copy has the mode: both keep one vector.
#if !defined(HD_LANE_PARTS)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
    !defined(HD_GENERIC_LANES) && defined(HD_LANE_COPY) && MSL_LANES == 16u
#if HD_LANE_COPY == 3 || (HD_LANE_COPY == 1 && defined(__AVX2__) && !defined(__AVX512F__))
#define HD_LANE_PARTS 2
#elif HD_LANE_COPY == 1 && !defined(__AVX2__)
#define HD_LANE_PARTS 4
#endif
#endif
#if !defined(HD_LANE_PARTS)
#define HD_LANE_PARTS 1
#endif
#endif
#if HD_LANE_PARTS == 1
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
#if defined(__x86_64__) && LANES_SHUFFLE && !defined(HD_GENERIC_LANES) && defined(__GNUC__) && !defined(__clang__) && \
    defined(HD_LANE_COPY) && HD_LANE_COPY == 4
// The AVX-512 copy (scripts/mslgen's file of x86-64-v4 trampolines): every 64-bit product of two
// 32-bit halves is one vpmuludq. GCC compiles the vector code of the general branch below into
// vpmullq (a full 64×64-bit product: 3 µops on Intel cores) and vpmulld. A product of 16 lanes,
// dependent chain / 8 independent chains: 18.3 → 9.7 ns / 5.9–7.4 → 2.8–3.1 ns on the H200
// machine's Intel host, 7.8 → 5.4 ns / 1.50 → 1.13 ns on the AMD Zen 5 VM
// (docs/perf-notes/host-device.md). The builtin is declared by the empty region below (as the
// AVX2 parts' pmuludq) and is compiled only inside the x86-64-v4 trampolines.
#pragma GCC push_options
#pragma GCC target("avx512f")
#pragma GCC pop_options
#define HD_AVX512_PMULUDQ 1
typedef int lanes_si512 __attribute__((vector_size(64)));
typedef long long lanes_sl512 __attribute__((vector_size(64)));
#define LANES_PMULUDQ512(a, b) \
  ((lanes_ulong)__builtin_ia32_pmuludq512_mask((lanes_si512)(a), (lanes_si512)(b), (lanes_sl512){}, (unsigned char)0xff))
#endif
MSL_FN lanes_uint bb_mul_lanes(lanes_uint a, lanes_uint b) {
#if defined(HD_AVX512_PMULUDQ)
  // Montgomery: m = lo(a·b)·p^−1 from the low halves of the products, the result hi(a·b) − hi(m·p)
  // (+ p if negative). Even lanes in the products' low words, odd lanes shifted down first; the
  // high words come back into place by one masked blend each.
  lanes_ulong pc = {BB_P}, pinv = {BB_PINV};
  pc = __builtin_shufflevector(pc, pc, 0, 0, 0, 0, 0, 0, 0, 0);
  pinv = __builtin_shufflevector(pinv, pinv, 0, 0, 0, 0, 0, 0, 0, 0);
  lanes_ulong pe = LANES_PMULUDQ512(a, b);
  lanes_ulong po = LANES_PMULUDQ512((lanes_ulong)a >> 32, (lanes_ulong)b >> 32);
  lanes_ulong qe = LANES_PMULUDQ512(LANES_PMULUDQ512(pe, pinv), pc);
  lanes_ulong qo = LANES_PMULUDQ512(LANES_PMULUDQ512(po, pinv), pc);
  lanes_uint hi = __builtin_shufflevector((lanes_uint)(pe >> 32), (lanes_uint)po, 0, 17, 2, 19, 4, 21, 6, 23, 8, 25, 10, 27,
                                          12, 29, 14, 31);
  lanes_uint mp = __builtin_shufflevector((lanes_uint)(qe >> 32), (lanes_uint)qo, 0, 17, 2, 19, 4, 21, 6, 23, 8, 25, 10, 27,
                                          12, 29, 14, 31);
  lanes_uint r = hi - mp;
  lanes_uint s = r + BB_P;
  return r < s ? r : s;
#elif defined(__x86_64__) && LANES_SHUFFLE && !defined(HD_GENERIC_LANES)
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
#if LANES_SHUFFLE
// Named shuffles of the lane kernels (one implementation per representation, HD_LANE_PARTS).
// Every group of four lanes rotated by j toward higher lanes: lane 4q + i takes lane 4q + (i − j mod 4).
MSL_FN lanes_uint lanes_quad_rot1(lanes_uint v) {
  return __builtin_shufflevector(v, v, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
}
MSL_FN lanes_uint lanes_quad_rot2(lanes_uint v) {
  return __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
}
MSL_FN lanes_uint lanes_quad_rot3(lanes_uint v) {
  return __builtin_shufflevector(v, v, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
}
// The even (odd) groups of four lanes of a, then those of b.
MSL_FN lanes_uint lanes_quads_even(lanes_uint a, lanes_uint b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
}
MSL_FN lanes_uint lanes_quads_odd(lanes_uint a, lanes_uint b) {
  return __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
}
// Lanes 1 .. 15 of a, then lane 0 of b.
MSL_FN lanes_uint lanes_shift1(lanes_uint a, lanes_uint b) {
  return __builtin_shufflevector(a, b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
}
// 64-bit lanes (MSL_LANES / 2 of them): x in every one; v's words reinterpreted; products of values
// below 2^32 (lanes_mul32: callers pass such values only, so the AVX2 and SSE2 representation can
// use pmuludq); the low words of the 64-bit lanes of e (even uint lanes) and o (odd uint lanes).
MSL_FN lanes_ulong lanes_wsplat(ulong x) { return (lanes_ulong){} + x; }
MSL_FN lanes_ulong lanes_wide(lanes_uint v) { return (lanes_ulong)v; }
MSL_FN lanes_ulong lanes_mul32(lanes_ulong a, lanes_ulong b) { return a * b; }
MSL_FN lanes_uint lanes_join_lo(lanes_ulong e, lanes_ulong o) {
  return __builtin_shufflevector((lanes_uint)e, (lanes_uint)o, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
}
MSL_FN lanes_uint lanes_min(lanes_uint a, lanes_uint b) { return a < b ? a : b; }
#endif
typedef lanes_uint lanes_reg;
#define LANES_REG MSL_LANES
#define lanes_reg_splat lanes_splat
MSL_FN lanes_reg lanes_reg_of(lanes_uint v, uint k) { return v; }
MSL_FN uint lanes_reg_get(lanes_reg v, uint l) { return lanes_get(v, l); }
#else  // HD_LANE_PARTS > 1: a lane vector as HD_LANE_PARTS native vectors (see above)
#define LANES_SHUFFLE 1
#define LANES_PART (MSL_LANES / HD_LANE_PARTS)  // uints per part: 8 (AVX2) or 4 (SSE2)
typedef uint lanes_part __attribute__((vector_size(4 * LANES_PART)));
typedef ulong lanes_wpart __attribute__((vector_size(4 * LANES_PART)));
#if HD_LANE_PARTS == 2
// GCC declares an instruction set's builtins only once it has been enabled somewhere in the file
// (C++ is parsed before a target pragma could define __AVX2__); an empty region declares them. The
// code that calls them is compiled only inside the AVX2 trampolines (always inlined): a call left
// in baseline code would be a compile error ("needs isa option"), never an illegal instruction.
#pragma GCC push_options
#pragma GCC target("avx2")
#pragma GCC pop_options
typedef int lanes_si_part __attribute__((vector_size(32)));
#define LANES_PMULUDQ(a, b) ((lanes_wpart)__builtin_ia32_pmuludq256((lanes_si_part)(a), (lanes_si_part)(b)))
#else
typedef int lanes_si_part __attribute__((vector_size(16)));
#define LANES_PMULUDQ(a, b) ((lanes_wpart)__builtin_ia32_pmuludq128((lanes_si_part)(a), (lanes_si_part)(b)))
#endif
struct lanes_ulong {
  lanes_wpart p[HD_LANE_PARTS];
};
struct lanes_uint {
  lanes_part p[HD_LANE_PARTS];
};
#define LANES_EACH(q) MSL_UNROLL for (uint q = 0u; q < (uint)HD_LANE_PARTS; q++)
MSL_FN lanes_part lanes_part_splat(uint x) {
  lanes_part v = {x};
#if HD_LANE_PARTS == 2
  return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
#else
  return __builtin_shufflevector(v, v, 0, 0, 0, 0);
#endif
}
MSL_FN lanes_uint lanes_splat(uint x) {
  lanes_uint r;
  lanes_part v = lanes_part_splat(x);
  LANES_EACH(q) r.p[q] = v;
  return r;
}
MSL_FN uint lanes_get(lanes_uint v, uint l) { return v.p[l / LANES_PART][l % LANES_PART]; }
// Loads and stores part by part: one memcpy of the whole struct goes through the stack in 16-byte
// pieces, and reading a part back as one register then stalls on store forwarding.
#define LANES_PARTS_LD(p)                                                         \
  lanes_uint v;                                                                   \
  LANES_EACH(q) __builtin_memcpy(&v.p[q], p + q * LANES_PART, sizeof v.p[q]);     \
  return v
#define LANES_PARTS_ST(p, v) LANES_EACH(q) __builtin_memcpy(p + q * LANES_PART, &v.p[q], sizeof v.p[q])
MSL_FN lanes_uint lanes_ld_dev(device const uint* p) { LANES_PARTS_LD(p); }
MSL_FN lanes_uint lanes_ld_tg(threadgroup const uint* p) { LANES_PARTS_LD(p); }
MSL_FN lanes_uint lanes_ld_th(thread const uint* p) { LANES_PARTS_LD(p); }
MSL_FN void lanes_st_dev(device uint* p, lanes_uint v) { LANES_PARTS_ST(p, v); }
MSL_FN void lanes_st_tg(threadgroup uint* p, lanes_uint v) { LANES_PARTS_ST(p, v); }
MSL_FN void lanes_prefetch(device const uint* p) { __builtin_prefetch(p, 0, 2); }
// Field arithmetic on one part (also used whole by poseidon2.h: one permutation per part).
MSL_FN lanes_part bb_add_lanes(lanes_part a, lanes_part b) {
  lanes_part r = a + b;
  lanes_part s = r - BB_P;
  return r < s ? r : s;
}
MSL_FN lanes_part bb_sub_lanes(lanes_part a, lanes_part b) {
  lanes_part r = a - b;
  lanes_part s = r + BB_P;
  return r < s ? r : s;
}
#if HD_LANE_PARTS == 2
#define LANES_ODD_HI 1, 9, 3, 11, 5, 13, 7, 15
#define LANES_EVEN_LO 0, 8, 2, 10, 4, 12, 6, 14
#else
#define LANES_ODD_HI 1, 5, 3, 7
#define LANES_EVEN_LO 0, 4, 2, 6
#endif
// The x86 product of the native representation with pmuludq for the 64-bit products of the even
// and odd lanes.
MSL_FN lanes_part bb_mul_lanes(lanes_part x, lanes_part y) {
  lanes_part p = lanes_part_splat(BB_P);
  lanes_wpart pe = LANES_PMULUDQ(x, y);
  lanes_wpart po = LANES_PMULUDQ((lanes_wpart)x >> 32, (lanes_wpart)y >> 32);
#if HD_LANE_PARTS == 4
  // SSE2 has no pmulld (GCC builds (x·y)·p^−1 from shuffles and pmuludq): m = lo(x·y)·p^−1 from the
  // products' low words by pmuludq, which reads the low word of each 64-bit lane only (the
  // baseline copy's Merkle tree +15 %, its keccakf-1024 proof 26.8 → 22.6 s on the Zen 5 VM; the
  // AVX2 copy measured no gain there: docs/perf-notes/host-device.md).
  lanes_part pinv = lanes_part_splat(BB_PINV);
  lanes_wpart qe = LANES_PMULUDQ(LANES_PMULUDQ(pe, pinv), p);
  lanes_wpart qo = LANES_PMULUDQ(LANES_PMULUDQ(po, pinv), p);
#else
  lanes_part m = (x * y) * BB_PINV;
  lanes_wpart qe = LANES_PMULUDQ(m, p);
  lanes_wpart qo = LANES_PMULUDQ((lanes_wpart)m >> 32, p);
#endif
  lanes_part hi = __builtin_shufflevector((lanes_part)pe, (lanes_part)po, LANES_ODD_HI);
  lanes_part mp = __builtin_shufflevector((lanes_part)qe, (lanes_part)qo, LANES_ODD_HI);
  lanes_part r = hi - mp;
  lanes_part s = r + BB_P;
  return r < s ? r : s;
}
MSL_FN lanes_uint bb_add_lanes(lanes_uint a, lanes_uint b) {
  LANES_EACH(q) a.p[q] = bb_add_lanes(a.p[q], b.p[q]);
  return a;
}
MSL_FN lanes_uint bb_sub_lanes(lanes_uint a, lanes_uint b) {
  LANES_EACH(q) a.p[q] = bb_sub_lanes(a.p[q], b.p[q]);
  return a;
}
MSL_FN lanes_uint bb_mul_lanes(lanes_uint a, lanes_uint b) {
  LANES_EACH(q) a.p[q] = bb_mul_lanes(a.p[q], b.p[q]);
  return a;
}
// lanes_transpose (as above): a step k ≥ LANES_PART exchanges whole parts, a smaller one shuffles
// within the parts.
#if HD_LANE_PARTS == 2
#define LANES_PTR4A 0, 1, 2, 3, 8, 9, 10, 11
#define LANES_PTR4B 4, 5, 6, 7, 12, 13, 14, 15
#define LANES_PTR2A 0, 1, 8, 9, 4, 5, 12, 13
#define LANES_PTR2B 2, 3, 10, 11, 6, 7, 14, 15
#define LANES_PTR1A 0, 8, 2, 10, 4, 12, 6, 14
#define LANES_PTR1B 1, 9, 3, 11, 5, 13, 7, 15
#else
#define LANES_PTR2A 0, 1, 4, 5
#define LANES_PTR2B 2, 3, 6, 7
#define LANES_PTR1A 0, 4, 2, 6
#define LANES_PTR1B 1, 5, 3, 7
#endif
#define LANES_PTR_PARTS(k)                                                       \
  for (uint i = 0u; i < 16u; i++) {                                            \
    if ((i & k) == 0u) {                                                       \
      for (uint q = 0u; q < (uint)HD_LANE_PARTS; q++) {                        \
        if (((q * LANES_PART) & k) != 0u) {                                    \
          lanes_part t = v[i].p[q];                                            \
          v[i].p[q] = v[i + k].p[q - k / LANES_PART];                          \
          v[i + k].p[q - k / LANES_PART] = t;                                  \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }
#define LANES_PTR_STEP(k, ia, ib)                                                \
  for (uint i = 0u; i < 16u; i++) {                                            \
    if ((i & k) == 0u) {                                                       \
      for (uint q = 0u; q < (uint)HD_LANE_PARTS; q++) {                        \
        lanes_part a = v[i].p[q];                                              \
        lanes_part b = v[i + k].p[q];                                          \
        v[i].p[q] = __builtin_shufflevector(a, b, ia);                         \
        v[i + k].p[q] = __builtin_shufflevector(a, b, ib);                     \
      }                                                                        \
    }                                                                          \
  }
MSL_FN void lanes_transpose(thread lanes_uint* v) {
  MSL_UNROLL
  LANES_PTR_PARTS(8u)
#if HD_LANE_PARTS == 2
  MSL_UNROLL
  LANES_PTR_STEP(4u, LANES_PTR4A, LANES_PTR4B)
#else
  MSL_UNROLL
  LANES_PTR_PARTS(4u)
#endif
  MSL_UNROLL
  LANES_PTR_STEP(2u, LANES_PTR2A, LANES_PTR2B)
  MSL_UNROLL
  LANES_PTR_STEP(1u, LANES_PTR1A, LANES_PTR1B)
}
// The named shuffles (as above). A group of four lanes never straddles two parts.
#if HD_LANE_PARTS == 2
#define LANES_QROT1 3, 0, 1, 2, 7, 4, 5, 6
#define LANES_QROT2 2, 3, 0, 1, 6, 7, 4, 5
#define LANES_QROT3 1, 2, 3, 0, 5, 6, 7, 4
#else
#define LANES_QROT1 3, 0, 1, 2
#define LANES_QROT2 2, 3, 0, 1
#define LANES_QROT3 1, 2, 3, 0
#endif
MSL_FN lanes_uint lanes_quad_rot1(lanes_uint v) {
  LANES_EACH(q) v.p[q] = __builtin_shufflevector(v.p[q], v.p[q], LANES_QROT1);
  return v;
}
MSL_FN lanes_uint lanes_quad_rot2(lanes_uint v) {
  LANES_EACH(q) v.p[q] = __builtin_shufflevector(v.p[q], v.p[q], LANES_QROT2);
  return v;
}
MSL_FN lanes_uint lanes_quad_rot3(lanes_uint v) {
  LANES_EACH(q) v.p[q] = __builtin_shufflevector(v.p[q], v.p[q], LANES_QROT3);
  return v;
}
MSL_FN lanes_uint lanes_quads_even(lanes_uint a, lanes_uint b) {
  lanes_uint r;
#if HD_LANE_PARTS == 2
  r.p[0] = __builtin_shufflevector(a.p[0], a.p[1], 0, 1, 2, 3, 8, 9, 10, 11);
  r.p[1] = __builtin_shufflevector(b.p[0], b.p[1], 0, 1, 2, 3, 8, 9, 10, 11);
#else
  r.p[0] = a.p[0];
  r.p[1] = a.p[2];
  r.p[2] = b.p[0];
  r.p[3] = b.p[2];
#endif
  return r;
}
MSL_FN lanes_uint lanes_quads_odd(lanes_uint a, lanes_uint b) {
  lanes_uint r;
#if HD_LANE_PARTS == 2
  r.p[0] = __builtin_shufflevector(a.p[0], a.p[1], 4, 5, 6, 7, 12, 13, 14, 15);
  r.p[1] = __builtin_shufflevector(b.p[0], b.p[1], 4, 5, 6, 7, 12, 13, 14, 15);
#else
  r.p[0] = a.p[1];
  r.p[1] = a.p[3];
  r.p[2] = b.p[1];
  r.p[3] = b.p[3];
#endif
  return r;
}
MSL_FN lanes_uint lanes_shift1(lanes_uint a, lanes_uint b) {
  lanes_uint r;
  LANES_EACH(q) {
    lanes_part next = q + 1u < (uint)HD_LANE_PARTS ? a.p[q + 1u] : b.p[0];
#if HD_LANE_PARTS == 2
    r.p[q] = __builtin_shufflevector(a.p[q], next, 1, 2, 3, 4, 5, 6, 7, 8);
#else
    r.p[q] = __builtin_shufflevector(a.p[q], next, 1, 2, 3, 4);
#endif
  }
  return r;
}
// 64-bit lanes (as above). The operators are the ones the lane code uses on them.
MSL_FN lanes_ulong lanes_wsplat(ulong x) {
  lanes_wpart v = {x};
#if HD_LANE_PARTS == 2
  v = __builtin_shufflevector(v, v, 0, 0, 0, 0);
#else
  v = __builtin_shufflevector(v, v, 0, 0);
#endif
  lanes_ulong r;
  LANES_EACH(q) r.p[q] = v;
  return r;
}
MSL_FN lanes_ulong lanes_wide(lanes_uint v) {
  lanes_ulong r;
  LANES_EACH(q) r.p[q] = (lanes_wpart)v.p[q];
  return r;
}
MSL_FN lanes_ulong lanes_mul32(lanes_ulong a, lanes_ulong b) {
  LANES_EACH(q) a.p[q] = LANES_PMULUDQ(a.p[q], b.p[q]);
  return a;
}
MSL_FN lanes_uint lanes_join_lo(lanes_ulong e, lanes_ulong o) {
  lanes_uint r;
  LANES_EACH(q) r.p[q] = __builtin_shufflevector((lanes_part)e.p[q], (lanes_part)o.p[q], LANES_EVEN_LO);
  return r;
}
#define LANES_WIDE_OP(op)                                                        \
  MSL_FN lanes_ulong operator op(lanes_ulong a, lanes_ulong b) {                 \
    LANES_EACH(q) a.p[q] = a.p[q] op b.p[q];                                     \
    return a;                                                                    \
  }
LANES_WIDE_OP(+)
LANES_WIDE_OP(-)
LANES_WIDE_OP(&)
MSL_FN lanes_ulong operator>>(lanes_ulong a, uint s) {
  LANES_EACH(q) a.p[q] = a.p[q] >> s;
  return a;
}
MSL_FN lanes_ulong& operator+=(lanes_ulong& a, lanes_ulong b) { return a = a + b; }
MSL_FN lanes_uint operator-(lanes_uint a, uint x) {
  LANES_EACH(q) a.p[q] = a.p[q] - x;
  return a;
}
MSL_FN lanes_uint lanes_min(lanes_uint a, lanes_uint b) {
  LANES_EACH(q) a.p[q] = a.p[q] < b.p[q] ? a.p[q] : b.p[q];
  return a;
}
// lanes_reg: the vector one SIMD register holds (see the end of this file): here one part.
typedef lanes_part lanes_reg;
#define LANES_REG LANES_PART
#define lanes_reg_splat lanes_part_splat
MSL_FN lanes_reg lanes_reg_of(lanes_uint v, uint k) { return v.p[k]; }
MSL_FN uint lanes_reg_get(lanes_reg v, uint l) { return v[l]; }
#endif  // HD_LANE_PARTS
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
typedef uint lanes_reg;
#define LANES_REG 1u
#define lanes_reg_splat lanes_splat
MSL_FN lanes_reg lanes_reg_of(lanes_uint v, uint k) { return v; }
MSL_FN uint lanes_reg_get(lanes_reg v, uint l) { return lanes_get(v, l); }
#endif

// lanes_reg: the part of a lane vector that one SIMD register holds, LANES_REG lanes: the whole
// lane vector on GPUs (one uint), with AVX-512, NEON and clang; one part where HD_LANE_PARTS > 1.
// Code that keeps many vectors live (Poseidon2's 16-element state, the NTT's 16-point rounds) works
// on one register's lanes at a time, `for (uint k = 0u; k < MSL_LANES / LANES_REG; k++)`, so that
// its vectors fit the register file (AVX2 has 16 ymm registers: 16 lane vectors of two parts spill
// on every step). lanes_reg_of(v, k) is part k of v; loads and stores are these:
#if defined(MSL_TARGET_HOST)
#define LANES_REG_LD(p)      \
  lanes_reg v;               \
  __builtin_memcpy(&v, p, sizeof v); \
  return v
#define LANES_REG_ST(p, v) __builtin_memcpy(p, &v, sizeof v)
#else
#define LANES_REG_LD(p) return *p
#define LANES_REG_ST(p, v) *p = v
#endif
MSL_FN lanes_reg lanes_reg_ld_dev(device const uint* p) { LANES_REG_LD(p); }
MSL_FN lanes_reg lanes_reg_ld_tg(threadgroup const uint* p) { LANES_REG_LD(p); }
MSL_FN lanes_reg lanes_reg_ld_th(thread const uint* p) { LANES_REG_LD(p); }
MSL_FN void lanes_reg_st_dev(device uint* p, lanes_reg v) { LANES_REG_ST(p, v); }
MSL_FN void lanes_reg_st_tg(threadgroup uint* p, lanes_reg v) { LANES_REG_ST(p, v); }
MSL_FN void lanes_reg_st_th(thread uint* p, lanes_reg v) { LANES_REG_ST(p, v); }

#endif  // BABYBEAR_H
