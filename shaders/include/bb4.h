// bb4.h - the quartic extension Fp4 = Fp[X]/(X^4 - 11) of BabyBear (internal/field.Fp4), on
// Montgomery limbs. An element c0 + c1 X + c2 X^2 + c3 X^3 is a thread value `bb4` (four uints,
// coefficient k is a[k]); in buffers it is four consecutive uints (Montgomery form), element i
// at [4i, 4i+4). Load and store with bb4_load / bb4_store (no whole-struct device loads).
//
// bb4 is Metal's uint4 on Metal, a clang ext_vector in the OpenCL check flavour (C++ for OpenCL
// without a generic address space cannot copy a class object: its implicit copy and move
// constructors take __generic references), and a small struct with operator[] elsewhere.
#ifndef BB4_H
#define BB4_H
#include "babybear.h"

// BB4_W (X^4 = W) and BB4_W_MONT come from field_consts.h (generated from internal/field).

#if defined(__METAL_VERSION__)
typedef uint4 bb4;
#elif defined(MSL_TARGET_CHECK) && defined(__OPENCL_CPP_VERSION__)
typedef uint bb4 __attribute__((ext_vector_type(4)));
#else
struct bb4 {
  uint c[4];
  MSL_METHOD uint& operator[](uint k) { return c[k]; }
  MSL_METHOD uint operator[](uint k) const { return c[k]; }
};
#endif

MSL_FN bb4 bb4_make(uint c0, uint c1, uint c2, uint c3) {
  bb4 r;
  r[0] = c0;
  r[1] = c1;
  r[2] = c2;
  r[3] = c3;
  return r;
}

MSL_FN bb4 bb4_zero() { return bb4_make(0u, 0u, 0u, 0u); }
MSL_FN bb4 bb4_one() { return bb4_make(BB_ONE, 0u, 0u, 0u); }
MSL_FN bb4 bb4_lift(uint a) { return bb4_make(a, 0u, 0u, 0u); }  // base element into Fp4

// Element i of a device buffer of Fp4 values (4 uints each).
MSL_FN bb4 bb4_load(device const uint* p, uint i) {
  return bb4_make(p[4u * i], p[4u * i + 1u], p[4u * i + 2u], p[4u * i + 3u]);
}

// Element i of a device buffer of Fp4 values (16-byte aligned) read and written as one 16-byte
// access on GPUs: neighbouring threads on neighbouring elements cover whole lines, and a thread's
// block of elements takes a quarter of the instructions.
#if defined(MSL_TARGET_CUDA)
MSL_FN bb4 bb4_load_aligned(device const uint* p, uint i) {
  uint4 q = reinterpret_cast<const uint4*>(p)[i];
  return bb4_make(q.x, q.y, q.z, q.w);
}
MSL_FN void bb4_store_aligned(device uint* p, uint i, bb4 v) {
  uint4 q;
  q.x = v[0];
  q.y = v[1];
  q.z = v[2];
  q.w = v[3];
  reinterpret_cast<uint4*>(p)[i] = q;
}
#elif defined(__METAL_VERSION__)
MSL_FN bb4 bb4_load_aligned(device const uint* p, uint i) { return ((device const uint4*)p)[i]; }
MSL_FN void bb4_store_aligned(device uint* p, uint i, bb4 v) { ((device uint4*)p)[i] = v; }
#else
#define bb4_load_aligned bb4_load
#define bb4_store_aligned bb4_store
#endif

MSL_FN void bb4_store(device uint* p, uint i, bb4 v) {
  p[4u * i] = v[0];
  p[4u * i + 1u] = v[1];
  p[4u * i + 2u] = v[2];
  p[4u * i + 3u] = v[3];
}

// The same for threadgroup memory (separate names: overloads that differ only by address space
// collapse on host and CUDA).
MSL_FN bb4 bb4_load_tg(threadgroup const uint* p, uint i) {
  return bb4_make(p[4u * i], p[4u * i + 1u], p[4u * i + 2u], p[4u * i + 3u]);
}

MSL_FN void bb4_store_tg(threadgroup uint* p, uint i, bb4 v) {
  p[4u * i] = v[0];
  p[4u * i + 1u] = v[1];
  p[4u * i + 2u] = v[2];
  p[4u * i + 3u] = v[3];
}

// Element i of a 16-byte aligned Fp4 array in threadgroup memory as one 16-byte access on GPUs
// (four word accesses elsewhere).
#if defined(MSL_TARGET_CUDA)
MSL_FN bb4 bb4_load_tg_aligned(threadgroup const uint* p, uint i) {
  uint4 q = reinterpret_cast<const uint4*>(p)[i];
  return bb4_make(q.x, q.y, q.z, q.w);
}
MSL_FN void bb4_store_tg_aligned(threadgroup uint* p, uint i, bb4 v) {
  uint4 q;
  q.x = v[0];
  q.y = v[1];
  q.z = v[2];
  q.w = v[3];
  reinterpret_cast<uint4*>(p)[i] = q;
}
#elif defined(__METAL_VERSION__)
MSL_FN bb4 bb4_load_tg_aligned(threadgroup const uint* p, uint i) { return ((threadgroup const uint4*)p)[i]; }
MSL_FN void bb4_store_tg_aligned(threadgroup uint* p, uint i, bb4 v) { ((threadgroup uint4*)p)[i] = v; }
#else
#define bb4_load_tg_aligned bb4_load_tg
#define bb4_store_tg_aligned bb4_store_tg
#endif

MSL_FN bb4 bb4_add(bb4 a, bb4 b) {
  return bb4_make(bb_add(a[0], b[0]), bb_add(a[1], b[1]), bb_add(a[2], b[2]),
                  bb_add(a[3], b[3]));
}

MSL_FN bb4 bb4_sub(bb4 a, bb4 b) {
  return bb4_make(bb_sub(a[0], b[0]), bb_sub(a[1], b[1]), bb_sub(a[2], b[2]),
                  bb_sub(a[3], b[3]));
}

MSL_FN bb4 bb4_neg(bb4 a) { return bb4_make(bb_neg(a[0]), bb_neg(a[1]), bb_neg(a[2]), bb_neg(a[3])); }

MSL_FN bb4 bb4_mul_base(bb4 a, uint b) {
  return bb4_make(bb_mul(a[0], b), bb_mul(a[1], b), bb_mul(a[2], b), bb_mul(a[3], b));
}

MSL_FN bb4 bb4_add_base(bb4 a, uint b) { return bb4_make(bb_add(a[0], b), a[1], a[2], a[3]); }

// Schoolbook product reduced with X^4 = W: b1, b2, b3 times W first (3 Montgomery products), then
// each coefficient as one sum of four products reduced once (bb_redc_wide).
MSL_FN bb4 bb4_mul(bb4 a, bb4 b) {
  uint a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
  uint b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
  uint w1 = bb_mul(b1, BB4_W_MONT), w2 = bb_mul(b2, BB4_W_MONT), w3 = bb_mul(b3, BB4_W_MONT);
  uint r0 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(a0, b0), a1, w3), a2, w2), a3, w1));
  uint r1 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(a0, b1), a1, b0), a2, w3), a3, w2));
  uint r2 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(a0, b2), a1, b1), a2, b0), a3, w3));
  uint r3 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(a0, b3), a1, b2), a2, b1), a3, b0));
  return bb4_make(r0, r1, r2, r3);
}

MSL_FN bb4 bb4_square(bb4 a) { return bb4_mul(a, a); }

MSL_FN bb4 bb4_pow(bb4 a, uint e) {
  bb4 r = bb4_one();
  while (e != 0u) {
    if ((e & 1u) != 0u) r = bb4_mul(r, a);
    a = bb4_mul(a, a);
    e >>= 1;
  }
  return r;
}

MSL_FN bool bb4_is_zero(bb4 a) { return (a[0] | a[1] | a[2] | a[3]) == 0u; }

// The group's sum of each thread's v[0..N) (word by word, modular), left in scratch[0..N) for every
// thread after the barrier it ends with; v is clobbered. scratch: N·tpg words. Called in uniform
// control flow. On GPUs with groups of whole SIMD groups of 32: xor shuffles within each SIMD
// group, then one barrier and the N words of the SIMD groups' sums added by N threads. Otherwise
// (the host device, or any other group size) a tree in scratch, each step's N loads issued before
// its stores (written word by word, the compiler could not tell a store from the next load's
// word and waited for each in turn).
template <uint N>
MSL_FN void group_sum_words(thread uint* v, threadgroup uint* scratch, uint tid, uint tpg) {
#if !defined(MSL_TARGET_HOST)
  if ((tpg & 31u) == 0u) {
    for (uint off = 16u; off > 0u; off >>= 1u) {
      for (uint k = 0u; k < N; k++) v[k] = bb_add(v[k], simd_shuffle_xor(v[k], (ushort)off));
    }
    if ((tid & 31u) == 0u) {
      for (uint k = 0u; k < N; k++) scratch[N * (tid >> 5u) + k] = v[k];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = tid; k < N; k += tpg) {  // word k of every SIMD group's sum, by one thread
      uint acc = scratch[k];
      for (uint g = 1u; g < (tpg >> 5u); g++) acc = bb_add(acc, scratch[N * g + k]);
      scratch[k] = acc;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return;
  }
#endif
  for (uint k = 0u; k < N; k++) scratch[N * tid + k] = v[k];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint w = tpg; w > 1u;) {
    uint h = (w + 1u) / 2u;
    if (tid + h < w) {
      uint o[N];
      for (uint k = 0u; k < N; k++) o[k] = scratch[N * (tid + h) + k];
      for (uint k = 0u; k < N; k++) {
        v[k] = bb_add(v[k], o[k]);
        scratch[N * tid + k] = v[k];
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    w = h;
  }
}

#endif  // BB4_H
