// poseidon2_group.h - one Poseidon2 state (poseidon2.h) permuted by the threads of one group
// together, for kernels whose permutations follow one another (the device transcript: each
// permutation waits for the one before). Thread k holds element k & 15 of the state; the 16
// S-boxes of a full round run side by side, M_E and the partial rounds' sums go through 32 words
// of threadgroup memory. One thread would take the permutation's whole chain of ~8,700
// dependent-ish instructions (≈ 13 µs on an H200); here the chain is one S-box a round plus 31
// exchanges.
//
// The round constants come from threadgroup memory (p2g_load_constants): read from device memory,
// each round's constant would be one more dependent load from L2 on the permutation's chain (21 a
// permutation), which is what one GPU thread's permutation mostly waits for.
//
// Rules: every thread of the group calls these functions in uniform control flow with the same
// arguments (they contain barriers); a group of at least 16 threads (threads ≥ 16 mirror thread
// k & 15 and write nothing). xs: 32 uints of threadgroup memory, used by nothing else meanwhile.
// A kernel that permutes several states side by side passes each state's threads tid & 15 and
// their own xs; with `simd` set (the 16 threads of a state in one SIMD group of a GPU) the
// exchanges wait for the SIMD group only.
// Exchanges alternate between its two halves, so one barrier each suffices: a thread writes a
// half again only after the next exchange's barrier, which every reader of the previous use of
// that half has passed.
#ifndef POSEIDON2_GROUP_H
#define POSEIDON2_GROUP_H
#include "bb4.h"
#include "poseidon2.h"

// The permutation's additions and products end with a minimum (of t and t − p as unsigned
// values) instead of a comparison and a conditional addition: two dependent steps instead of three,
// and this permutation is one chain of latencies (H200 micro-benchmark: 10,387 → 8,353 cycles a
// permutation, M_E 436 → 318, the 21 S-boxes 3,417 → 3,046). Same values as bb_add and bb_mul.
MSL_FN uint p2g_add(uint a, uint b) {
  uint t = a + b;  // < 2p < 2^32
  return min(t, t - BB_P);
}

MSL_FN uint p2g_mul(uint a, uint b) {
  uint lo = a * b;
  uint hi = mulhi(a, b);
  uint m = lo * BB_PINV;
  uint r = hi - mulhi(m, BB_P);  // hi − hi(m·p), wrapped when negative
  return min(r, r + BB_P);
}

MSL_FN uint p2g_sbox(uint x) {  // x^7
  uint x2 = p2g_mul(x, x);
  uint x3 = p2g_mul(x2, x);
  uint x4 = p2g_mul(x2, x2);
  return p2g_mul(x3, x4);
}

// Copies the P2_RC_LEN round constants to rcs (threadgroup memory); a barrier follows.
MSL_FN void p2g_load_constants(constant uint* rc, threadgroup uint* rcs, uint tid, uint tpg) {
  for (uint i = tid; i < P2_RC_LEN; i += tpg) rcs[i] = rc[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// The group's sponge (transcript.Transcript): x is this thread's element of the state, buf the
// exchange half to write next (0 or 1), absorb and sample the sponge's indices (every thread keeps
// the same copies). One flat struct, filled in place (p2g_sponge_load): the OpenCL check of MSL
// refuses nested structs without constructors and structs returned by value.
struct p2g_sponge {
  uint x;
  uint buf;
  uint absorb;
  uint sample;
  uint simd;  // 1: the 16 threads of each state lie in one SIMD group (exchanges wait for it alone)
};

// Publishes every thread's value v and returns the 16 values' exchange half (after its barrier).
MSL_FN threadgroup uint* p2g_exchange(thread p2g_sponge& st, uint v, uint tid, threadgroup uint* xs) {
  threadgroup uint* buf = xs + 16u * st.buf;
  if (tid < 16u) buf[tid] = v;
  st.buf ^= 1u;
  if (st.simd != 0u) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
  } else {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  return buf;
}

// M_E (poseidon2.h: p2_external): mat4 on each group of four elements, then the sums of the
// elements equal mod 4. (Reading all 16 inputs once and computing the result directly, one
// exchange instead of two, measured 2.6× slower on an H200: 1,104 against 427 cycles.)
MSL_FN void p2g_external(thread p2g_sponge& st, uint tid, threadgroup uint* xs) {
  uint k = tid & 15u;
  uint g = k & 12u, j = k & 3u;
  threadgroup uint* b = p2g_exchange(st, st.x, tid, xs);
  uint x0 = b[g], x1 = b[g + 1u], x2 = b[g + 2u], x3 = b[g + 3u];
  uint t01 = p2g_add(x0, x1);
  uint t23 = p2g_add(x2, x3);
  uint t0123 = p2g_add(t01, t23);
  // p2_mat4_lane: out0 = t0123 + x1 + t01, out1 = t0123 + x1 + 2·x2, out2 = t0123 + x3 + t23,
  // out3 = t0123 + x3 + 2·x0.
  uint a = j < 2u ? x1 : x3;
  uint c = j == 0u ? t01 : (j == 1u ? p2g_add(x2, x2) : (j == 2u ? t23 : p2g_add(x0, x0)));
  uint y = p2g_add(p2g_add(t0123, a), c);
  b = p2g_exchange(st, y, tid, xs);
  uint sum = p2g_add(p2g_add(b[j], b[4u + j]), p2g_add(b[8u + j], b[12u + j]));
  st.x = p2g_add(y, sum);
}

MSL_FN void p2g_full_round(thread p2g_sponge& st, threadgroup const uint* rc, uint off, uint tid, threadgroup uint* xs) {
  st.x = p2g_sbox(p2g_add(st.x, rc[off + (tid & 15u)]));
  p2g_external(st, tid, xs);
}

// The sum of 16 exchanged values, as a tree (depth 4).
MSL_FN uint p2g_sum16(threadgroup const uint* b) {
  uint t0 = p2g_add(p2g_add(b[0], b[1]), p2g_add(b[2], b[3]));
  uint t1 = p2g_add(p2g_add(b[4], b[5]), p2g_add(b[6], b[7]));
  uint t2 = p2g_add(p2g_add(b[8], b[9]), p2g_add(b[10], b[11]));
  uint t3 = p2g_add(p2g_add(b[12], b[13]), p2g_add(b[14], b[15]));
  return p2g_add(p2g_add(t0, t1), p2g_add(t2, t3));
}

// The permutation of the group's state.
MSL_FN void p2g_permute(thread p2g_sponge& st, threadgroup const uint* rc, uint tid, threadgroup uint* xs) {
  uint k = tid & 15u;
  p2g_external(st, tid, xs);
  for (uint r = 0u; r < 4u; r++) p2g_full_round(st, rc, P2_RC_EXT_INIT + 16u * r, tid, xs);
  // Partial rounds: element 0 through the S-box (every thread computes it, thread 0's counts), then
  // M_I = J + diag(V): x_k ← Σ_i x_i + V_k·x_k.
  uint diag = rc[P2_RC_DIAG + k];
  for (uint r = 0u; r < 13u; r++) {
    uint s0 = p2g_sbox(p2g_add(st.x, rc[P2_RC_INTERNAL + r]));
    uint y = k == 0u ? s0 : st.x;
    threadgroup uint* b = p2g_exchange(st, y, tid, xs);
    st.x = p2g_add(p2g_sum16(b), p2g_mul(diag, y));
  }
  for (uint r = 0u; r < 4u; r++) p2g_full_round(st, rc, P2_RC_EXT_FINAL + 16u * r, tid, xs);
}

// The duplex sponge over the group's state. After each permutation the state is also left in
// out[0..16) (threadgroup memory beside xs), from which samples are read: a sample always follows
// a permutation with no observe in between.

MSL_FN void p2g_sponge_permute(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                               threadgroup uint* out) {
  p2g_permute(sp, rc, tid, xs);
  if (tid < 16u) out[tid] = sp.x;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  sp.absorb = 0u;
  sp.sample = P2_RATE;
}

// ts: the state (16 Montgomery words), the absorb index, the sample index (GkrTranscript).
MSL_FN void p2g_sponge_load(thread p2g_sponge& sp, device const uint* ts, uint tid) {
  sp.x = ts[tid & 15u];
  sp.buf = 0u;
  sp.simd = 0u;
  sp.absorb = ts[16];
  sp.sample = ts[17];
}

// Stores the sponge (the caller has its other threads' writes to ts ordered before this).
MSL_FN void p2g_sponge_store(device uint* ts, thread const p2g_sponge& sp, uint tid) {
  if (tid < 16u) ts[tid] = sp.x;
  if (tid == 0u) {
    ts[16] = sp.absorb;
    ts[17] = sp.sample;
  }
}

// transcript.Observe of v (the same on every thread): overwrite position absorb; after the 8th,
// permute.
MSL_FN void p2g_observe(thread p2g_sponge& sp, uint v, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                        threadgroup uint* out) {
  if ((tid & 15u) == sp.absorb) sp.x = v;
  sp.absorb++;
  if (sp.absorb == P2_RATE) p2g_sponge_permute(sp, rc, tid, xs, out);
}

MSL_FN void p2g_observe4(thread p2g_sponge& sp, bb4 v, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                         threadgroup uint* out) {
  for (uint c = 0u; c < 4u; c++) p2g_observe(sp, v[c], rc, tid, xs, out);
}

// transcript.Sample: permute first if observes are pending or the outputs are used up; outputs
// are read backwards.
MSL_FN uint p2g_sample(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                       threadgroup uint* out) {
  if (sp.absorb != 0u || sp.sample == 0u) p2g_sponge_permute(sp, rc, tid, xs, out);
  sp.sample--;
  return out[sp.sample];
}

MSL_FN bb4 p2g_sample4(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                       threadgroup uint* out) {
  uint c0 = p2g_sample(sp, rc, tid, xs, out);
  uint c1 = p2g_sample(sp, rc, tid, xs, out);
  uint c2 = p2g_sample(sp, rc, tid, xs, out);
  uint c3 = p2g_sample(sp, rc, tid, xs, out);
  return bb4_make(c0, c1, c2, c3);
}

#endif  // POSEIDON2_GROUP_H
