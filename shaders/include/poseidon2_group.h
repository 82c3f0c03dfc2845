// poseidon2_group.h - one Poseidon2 state (poseidon2.h) permuted by the threads of one group
// together, for kernels whose permutations follow one another (the device transcript: each
// permutation waits for the one before). Thread k holds element k & 15 of the state; the 16
// S-boxes of a full round run side by side. One thread would take the permutation's whole chain of
// ~8,700 dependent-ish instructions (≈ 13 µs on an H200); here the chain is one S-box a round plus
// the linear layers' exchanges.
//
// The exchanges: on GPUs SIMD-group shuffles (the 16 threads of a state are lanes (tid & 16) + k of
// one SIMD group of 32: SIMD width 32 and 1-D groups of whole SIMD groups, checked by the
// launchers, kernels.p2gGroup), no barrier; M_E's two sums
// by xor butterflies, a partial round's sum of elements 1..15 by a butterfly that runs beside
// element 0's S-box (every thread carries element 0: x0' = Σ_{i≥1} x_i − s0, V_0 = −2). On the
// host device (work items are fibers) each exchange goes through 16 words of threadgroup memory
// and one barrier: M_E two, a partial round one.
//
// The round constants come from threadgroup memory (p2g_load_constants): read from device memory,
// each round's constant would be one more dependent load from L2 on the permutation's chain (21 a
// permutation), which is what one GPU thread's permutation mostly waits for.
//
// Rules: every thread of the group calls these functions in uniform control flow with the same
// arguments (they contain shuffles or barriers); a group of at least 16 threads (threads ≥ 16
// mirror thread k & 15: they compute the same values). tid: the thread's index in its group; a
// kernel that permutes several states side by side gives each state its 16 consecutive threads.
// xs: 32 uints of threadgroup memory per state, used by nothing else meanwhile (the host device's
// exchanges alternate between its two halves, so one barrier each suffices: a thread writes a
// half again only after the next exchange's barrier, which every reader of the previous use of
// that half has passed).
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

// Signed Montgomery product: a, b in (−p, p) as signed words, the result ≡ a·b·2^−32 in (−p, p)
// with no correction step (m = lo·p^−1 taken signed: |a·b − m·p| < p² + 2^31·p < 2^32·p, and the
// low words agree, so hi(a·b) − hi(m·p) is exact). Four dependent steps instead of six.
MSL_FN int p2g_smul(int a, int b) {
  int m = (int)((uint)a * (uint)b * BB_PINV);  // the low words in unsigned: no signed overflow
  return mulhi(a, b) - mulhi(m, (int)BB_P);
}

// x^7 on signed products, reduced once at the end (the S-box chain is most of the permutation's
// latency).
MSL_FN uint p2g_sbox(uint x) {
  int xs = (int)x;
  int x2 = p2g_smul(xs, xs);
  int x3 = p2g_smul(x2, xs);
  int x4 = p2g_smul(x2, x2);
  uint r = (uint)p2g_smul(x3, x4);
  return min(r, r + BB_P);
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
};

#if !defined(MSL_TARGET_HOST)
// GPUs: shuffles within a state's 16 lanes.

// out_j = (x_0 + x_1 + x_2 + x_3) + x_j + 2·x_{j+1 mod 4} (p2_mat4_lane's circulant 2, 3, 1, 1)
// for the four elements of this thread's group of four; x_{j+1} is lane j ^ 1 for even j and
// j ^ 3 for odd j.
MSL_FN uint p2g_mat4(uint x, uint j) {
  uint a1 = simd_shuffle_xor(x, (ushort)1u);
  uint a2 = simd_shuffle_xor(x, (ushort)2u);
  uint a3 = simd_shuffle_xor(x, (ushort)3u);
  uint sum = p2g_add(p2g_add(x, a1), p2g_add(a2, a3));
  uint next = (j & 1u) == 0u ? a1 : a3;
  return p2g_add(sum, p2g_add(x, p2g_add(next, next)));
}

// M_E (poseidon2.h: p2_external): mat4 on each group of four elements, then each element plus
// the sum of the elements equal to it mod 4.
MSL_FN void p2g_external(thread p2g_sponge& st, uint tid, threadgroup uint* xs) {
  uint y = p2g_mat4(st.x, tid & 3u);
  uint s = p2g_add(y, simd_shuffle_xor(y, (ushort)4u));
  s = p2g_add(s, simd_shuffle_xor(s, (ushort)8u));
  st.x = p2g_add(y, s);
}

// The sum of the state's 16 values v, on every thread.
MSL_FN uint p2g_sum16(uint v) {
  v = p2g_add(v, simd_shuffle_xor(v, (ushort)1u));
  v = p2g_add(v, simd_shuffle_xor(v, (ushort)2u));
  v = p2g_add(v, simd_shuffle_xor(v, (ushort)4u));
  return p2g_add(v, simd_shuffle_xor(v, (ushort)8u));
}

// Element i of the state (the same i on every thread).
MSL_FN uint p2g_element(uint v, uint i, uint tid) { return simd_shuffle(v, (ushort)((tid & 16u) | i)); }

#else
// The host device: exchanges through threadgroup memory.

// Publishes every thread's value v and returns the 16 values' exchange half (after its barrier).
MSL_FN threadgroup uint* p2g_exchange(thread p2g_sponge& st, uint v, uint tid, threadgroup uint* xs) {
  threadgroup uint* buf = xs + 16u * st.buf;
  buf[tid & 15u] = v;  // mirrors write the same value (fibers: no race)
  st.buf ^= 1u;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return buf;
}

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
// The sum of 16 exchanged values, as a tree (depth 4).
MSL_FN uint p2g_sum16_tg(threadgroup const uint* b) {
  uint t0 = p2g_add(p2g_add(b[0], b[1]), p2g_add(b[2], b[3]));
  uint t1 = p2g_add(p2g_add(b[4], b[5]), p2g_add(b[6], b[7]));
  uint t2 = p2g_add(p2g_add(b[8], b[9]), p2g_add(b[10], b[11]));
  uint t3 = p2g_add(p2g_add(b[12], b[13]), p2g_add(b[14], b[15]));
  return p2g_add(p2g_add(t0, t1), p2g_add(t2, t3));
}
#endif

MSL_FN uint p2g_sub(uint a, uint b) {
  uint t = a - b;  // wrapped when negative
  return min(t, t + BB_P);
}

MSL_FN void p2g_full_round(thread p2g_sponge& st, threadgroup const uint* rc, uint off, uint tid, threadgroup uint* xs) {
  st.x = p2g_sbox(p2g_add(st.x, rc[off + (tid & 15u)]));
  p2g_external(st, tid, xs);
}

// The permutation of the group's state.
MSL_FN void p2g_permute(thread p2g_sponge& st, threadgroup const uint* rc, uint tid, threadgroup uint* xs) {
  uint k = tid & 15u;
  p2g_external(st, tid, xs);
  for (uint r = 0u; r < 4u; r++) p2g_full_round(st, rc, P2_RC_EXT_INIT + 16u * r, tid, xs);
  // Partial rounds: s0 = S(x_0 + c_r), then M_I = J + diag(V): x_k ← s0 + Σ_{i≥1} x_i + V_k·y_k
  // (y_0 = s0, y_k = x_k). Every thread carries x_0: with V_0 = −2, x_0 ← Σ_{i≥1} x_i − s0, so
  // the sum of elements 1..15 (the exchange) runs beside the S-box instead of after it.
  uint diag = rc[P2_RC_DIAG + k];
#if !defined(MSL_TARGET_HOST)
  uint x0 = p2g_element(st.x, 0u, tid);
#else
  uint x0 = p2g_exchange(st, st.x, tid, xs)[0];
#endif
  for (uint r = 0u; r < 13u; r++) {
    uint v = k == 0u ? 0u : st.x;  // elements 1..15: their sum is taken with element 0 as zero
    uint dv = p2g_mul(diag, v);
#if !defined(MSL_TARGET_HOST)
    uint rest = p2g_sum16(v);
#else
    uint rest = p2g_sum16_tg(p2g_exchange(st, v, tid, xs));  // element 0 contributes v = 0
#endif
    uint s0 = p2g_sbox(p2g_add(x0, rc[P2_RC_INTERNAL + r]));
    x0 = p2g_sub(rest, s0);
    st.x = k == 0u ? x0 : p2g_add(p2g_add(s0, rest), dv);
  }
  for (uint r = 0u; r < 4u; r++) p2g_full_round(st, rc, P2_RC_EXT_FINAL + 16u * r, tid, xs);
}

// The duplex sponge over the group's state. Samples are elements of the state after a
// permutation (a sample always follows one with no observe in between): on GPUs read by a
// shuffle (the sponge has no barrier there); on the host device from out[0..16) (threadgroup
// memory beside xs), where the state is left after each permutation.

MSL_FN void p2g_sponge_permute(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                               threadgroup uint* out) {
  p2g_permute(sp, rc, tid, xs);
#if defined(MSL_TARGET_HOST)
  if (tid < 16u) out[tid] = sp.x;
  threadgroup_barrier(mem_flags::mem_threadgroup);
#endif
  sp.absorb = 0u;
  sp.sample = P2_RATE;
}

// ts: the state (16 Montgomery words), the absorb index, the sample index (GkrTranscript).
MSL_FN void p2g_sponge_load(thread p2g_sponge& sp, device const uint* ts, uint tid) {
  sp.x = ts[tid & 15u];
  sp.buf = 0u;
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
#if defined(MSL_TARGET_HOST)
  return out[sp.sample];
#else
  return p2g_element(sp.x, sp.sample, tid);
#endif
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
