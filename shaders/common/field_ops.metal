// field_ops.metal - elementwise BabyBear vector operations and a sum reduction.
//
// Fp values are one uint each, Fp4 values four consecutive uints (c0..c3), all in Montgomery form
// except where a kernel converts. Every kernel takes the element count n and walks the grid with
// a stride loop (i += threads_per_grid), so a launcher may dispatch any number of full groups;
// n < 2^31. Output buffers may alias inputs element for element (in-place operation): each
// element is read before it is written, by the same thread.
#include "bb4.h"

// out[i] = canonical in[i] into Montgomery form (in may equal out).
kernel void fo_to_mont(device const uint* in [[buffer(0)]],
                       device uint* out [[buffer(1)]],
                       constant uint& n [[buffer(2)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_to_mont(in[i]);
}

// out[i] = Montgomery in[i] back to canonical (in may equal out).
kernel void fo_from_mont(device const uint* in [[buffer(0)]],
                         device uint* out [[buffer(1)]],
                         constant uint& n [[buffer(2)]],
                         uint gid [[thread_position_in_grid]],
                         uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_from_mont(in[i]);
}

// out[i] = a[i] + b[i].
kernel void fo_add(device const uint* a [[buffer(0)]],
                   device const uint* b [[buffer(1)]],
                   device uint* out [[buffer(2)]],
                   constant uint& n [[buffer(3)]],
                   uint gid [[thread_position_in_grid]],
                   uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_add(a[i], b[i]);
}

// out[i] = a[i] - b[i].
kernel void fo_sub(device const uint* a [[buffer(0)]],
                   device const uint* b [[buffer(1)]],
                   device uint* out [[buffer(2)]],
                   constant uint& n [[buffer(3)]],
                   uint gid [[thread_position_in_grid]],
                   uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_sub(a[i], b[i]);
}

// out[i] = a[i] * b[i] (Montgomery product: Montgomery inputs give a Montgomery output).
kernel void fo_mul(device const uint* a [[buffer(0)]],
                   device const uint* b [[buffer(1)]],
                   device uint* out [[buffer(2)]],
                   constant uint& n [[buffer(3)]],
                   uint gid [[thread_position_in_grid]],
                   uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_mul(a[i], b[i]);
}

struct FoScaleParams {
  uint n;  // element count
  uint c;  // the scalar, Montgomery form
};

// out[i] = c * in[i].
kernel void fo_scale(device const uint* in [[buffer(0)]],
                     device uint* out [[buffer(1)]],
                     constant FoScaleParams& p [[buffer(2)]],
                     uint gid [[thread_position_in_grid]],
                     uint stride [[threads_per_grid]]) {
  uint cnt = p.n;
  uint c = p.c;
  for (uint i = gid; i < cnt; i += stride) out[i] = bb_mul(in[i], c);
}

// Fp4: out[i] = a[i] + b[i] over n elements of 4 uints.
kernel void fo_ext_add(device const uint* a [[buffer(0)]],
                       device const uint* b [[buffer(1)]],
                       device uint* out [[buffer(2)]],
                       constant uint& n [[buffer(3)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) bb4_store(out, i, bb4_add(bb4_load(a, i), bb4_load(b, i)));
}

// Fp4: out[i] = a[i] * b[i] (X^4 = 11).
kernel void fo_ext_mul(device const uint* a [[buffer(0)]],
                       device const uint* b [[buffer(1)]],
                       device uint* out [[buffer(2)]],
                       constant uint& n [[buffer(3)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) bb4_store(out, i, bb4_mul(bb4_load(a, i), bb4_load(b, i)));
}

// Fp4 times Fp: out[i] = a[i] * b[i] with a in Fp4 (4 uints each) and b in Fp (1 uint each).
kernel void fo_ext_mul_base(device const uint* a [[buffer(0)]],
                            device const uint* b [[buffer(1)]],
                            device uint* out [[buffer(2)]],
                            constant uint& n [[buffer(3)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) bb4_store(out, i, bb4_mul_base(bb4_load(a, i), b[i]));
}

// partial[g] = sum of the elements visited by group g (grid-stride loop), tree-reduced in
// threadgroup memory (scratch: 4 * threads_per_threadgroup bytes). Works for any group size
// (not only powers of two). Summing all of in[0, n) takes repeated passes, or one pass with a
// single group.
kernel void fo_sum(device const uint* in [[buffer(0)]],
                   device uint* partial [[buffer(1)]],
                   constant uint& n [[buffer(2)]],
                   threadgroup uint* scratch [[threadgroup(0)]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint group [[threadgroup_position_in_grid]],
                   uint tpg [[threads_per_threadgroup]],
                   uint ngroups [[threadgroups_per_grid]]) {
  uint cnt = n;
  uint acc = 0u;
  for (uint i = group * tpg + tid; i < cnt; i += tpg * ngroups) acc = bb_add(acc, in[i]);
  scratch[tid] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Fold the upper part onto the lower: w is the active width, h = ceil(w/2).
  for (uint w = tpg; w > 1u;) {
    uint h = (w + 1u) / 2u;
    if (tid + h < w) scratch[tid] = bb_add(scratch[tid], scratch[tid + h]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    w = h;
  }
  if (tid == 0u) partial[group] = scratch[0];
}
