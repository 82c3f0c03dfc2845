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
// by xor butterflies, the partial rounds by moments (p2g_partial_rounds: one reduce-scatter, then
// two shuffles a round beside element 0's S-box). On the host device (work items are fibers) each
// exchange goes through 16 words of threadgroup memory and one barrier: M_E two, a partial round
// one.
//
// The round constants (P2G_RC_LEN words: poseidon2.h's and the moments' tables) come from
// threadgroup memory (p2g_load_constants): read from device memory,
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

// The constant buffer of the group kernels: poseidon2.h's P2_RC_LEN words, then the tables of
// p2g_partial_rounds (kernels.RoundConstants).
#define P2G_RC_POW P2_RC_LEN
#define P2G_RC_W (P2_RC_LEN + 192u)
#define P2G_RC_LEN (P2_RC_LEN + 208u)

// The permutation's additions and products are poseidon2.h's p2_add and p2_mul, which end with a
// minimum instead of a comparison and a conditional addition: two dependent steps instead of
// three, and this permutation is one chain of latencies (H200 micro-benchmark: 10,387 → 8,353
// cycles a permutation, M_E 436 → 318, the 21 S-boxes 3,417 → 3,046).

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

// Copies the P2G_RC_LEN constants to rcs (threadgroup memory), P2G_RC_BATCH loads in flight a
// thread: a group of 32 threads copying one word at a time waited for each load in turn (≈ 2 µs of
// a 13 µs transcript step on an H200), eight at a time for two loads in turn. A kernel with other
// loads to wait for issues them between p2g_constants_fetch and p2g_constants_put, so that all
// wait for one memory latency. The caller puts a barrier after it (p2g_load_constants).
#define P2G_RC_BATCH 12u  // one batch for a SIMD group of 32 (P2G_RC_LEN ≤ 12·32)
MSL_FN void p2g_constants_fetch(constant uint* rc, thread uint* v, uint tid, uint tpg) {
  for (uint j = 0u; j < P2G_RC_BATCH; j++) v[j] = rc[min(tid + j * tpg, P2G_RC_LEN - 1u)];
}
MSL_FN void p2g_constants_put(constant uint* rc, threadgroup uint* rcs, thread const uint* v, uint tid, uint tpg) {
  for (uint j = 0u; j < P2G_RC_BATCH; j++) {
    if (tid + j * tpg < P2G_RC_LEN) rcs[tid + j * tpg] = v[j];
  }
  for (uint i = tid + P2G_RC_BATCH * tpg; i < P2G_RC_LEN; i += tpg) rcs[i] = rc[i];  // groups of < 31 threads
}
MSL_FN void p2g_copy_constants(constant uint* rc, threadgroup uint* rcs, uint tid, uint tpg) {
  uint v[P2G_RC_BATCH];
  p2g_constants_fetch(rc, v, tid, tpg);
  p2g_constants_put(rc, rcs, v, tid, tpg);
}

// p2g_copy_constants, then a barrier.
MSL_FN void p2g_load_constants(constant uint* rc, threadgroup uint* rcs, uint tid, uint tpg) {
  p2g_copy_constants(rc, rcs, tid, tpg);
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
  uint sum = p2_add(p2_add(x, a1), p2_add(a2, a3));
  uint next = (j & 1u) == 0u ? a1 : a3;
  return p2_add(sum, p2_add(x, p2_add(next, next)));
}

// M_E (poseidon2.h: p2_external): mat4 on each group of four elements, then each element plus
// the sum of the elements equal to it mod 4; plus add (the next round's constant, added beside the
// sums instead of after them).
MSL_FN void p2g_external(thread p2g_sponge& st, uint tid, threadgroup uint* xs, uint add) {
  uint y = p2g_mat4(st.x, tid & 3u);
  uint y4 = simd_shuffle_xor(y, (ushort)4u);  // three shuffles side by side: one latency, not two
  uint y8 = simd_shuffle_xor(y, (ushort)8u);
  uint y12 = simd_shuffle_xor(y, (ushort)12u);
  uint s = p2_add(p2_add(y, y4), p2_add(y8, y12));
  st.x = p2_add(p2_add(y, add), s);
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

MSL_FN void p2g_external(thread p2g_sponge& st, uint tid, threadgroup uint* xs, uint add) {
  uint k = tid & 15u;
  uint g = k & 12u, j = k & 3u;
  threadgroup uint* b = p2g_exchange(st, st.x, tid, xs);
  uint x0 = b[g], x1 = b[g + 1u], x2 = b[g + 2u], x3 = b[g + 3u];
  uint t01 = p2_add(x0, x1);
  uint t23 = p2_add(x2, x3);
  uint t0123 = p2_add(t01, t23);
  // p2_mat4_lane: out0 = t0123 + x1 + t01, out1 = t0123 + x1 + 2·x2, out2 = t0123 + x3 + t23,
  // out3 = t0123 + x3 + 2·x0.
  uint a = j < 2u ? x1 : x3;
  uint c = j == 0u ? t01 : (j == 1u ? p2_add(x2, x2) : (j == 2u ? t23 : p2_add(x0, x0)));
  uint y = p2_add(p2_add(t0123, a), c);
  b = p2g_exchange(st, y, tid, xs);
  uint sum = p2_add(p2_add(b[j], b[4u + j]), p2_add(b[8u + j], b[12u + j]));
  st.x = p2_add(p2_add(y, add), sum);
}
#endif

MSL_FN uint p2g_sub(uint a, uint b) {
  uint t = a - b;  // wrapped when negative
  return min(t, t + BB_P);
}

// Four full rounds whose constants start at rc[off]; st.x enters with the first round's constant
// added (by the M_E before).
MSL_FN void p2g_full_rounds(thread p2g_sponge& st, threadgroup const uint* rc, uint off, uint tid, threadgroup uint* xs) {
  for (uint r = 0u; r < 4u; r++) {
    st.x = p2g_sbox(st.x);
    p2g_external(st, tid, xs, r < 3u ? rc[off + 16u * (r + 1u) + (tid & 15u)] : 0u);
  }
}

// The partial rounds by moments. A partial round is s0 = S(x_0 + c_r), c = s0 + Σ_{i≥1} x_i,
// x_i ← c + V_i·x_i (i ≥ 1), x_0 ← Σ_{i≥1} x_i − s0 (M_I = J + diag(V), V_0 = −2). With the moments
// m_j = Σ_{i≥1} V_i^j·x_i the sum is m_0, and a round maps them to m_j ← c·W_j + m_{j+1}
// (W_j = Σ_{i≥1} V_i^j): after the first round's exchange the rounds need no sum of the state, only
// m_0 and the moment above, and the chain a round is element 0's S-box. Thread j holds m_j (13 of
// them are read: round r needs m_0 of round r, which goes back to m_r of the first); its own x_k
// follows beside the chain. Constants: V_k^j (j = 1..12) at P2G_RC_POW + 16(j − 1) + k, W_j at
// P2G_RC_W + j (kernels.RoundConstants).
MSL_FN void p2g_partial_rounds(thread p2g_sponge& st, threadgroup const uint* rc, uint tid, threadgroup uint* xs) {
  uint k = tid & 15u;
  uint diag = rc[P2_RC_DIAG + k];
  uint w = rc[P2G_RC_W + k];
#if !defined(MSL_TARGET_HOST)
  uint x0 = p2g_element(st.x, 0u, tid);
  // t[j] = V_k^j·x_k (element 0 contributes zero), then a reduce-scatter over the 16 lanes: lane k
  // keeps the sum of t[k].
  uint v = k == 0u ? 0u : st.x;
  uint t[16];
  t[0] = v;
  for (uint j = 1u; j < 13u; j++) t[j] = p2_mul(rc[P2G_RC_POW + 16u * (j - 1u) + k], v);
  for (uint j = 13u; j < 16u; j++) t[j] = 0u;
  for (uint h = 8u; h > 0u; h >>= 1u) {
    bool upper = (k & h) != 0u;
    for (uint i = 0u; i < h; i++) {
      uint keep = upper ? t[i + h] : t[i];
      uint send = upper ? t[i] : t[i + h];
      t[i] = p2_add(keep, simd_shuffle_xor(send, (ushort)h));
    }
  }
  uint m = t[0];
  ushort lane0 = (ushort)(tid & 16u);
  ushort above = (ushort)((tid & 16u) | ((k + 1u) & 15u));
#else
  threadgroup uint* b = p2g_exchange(st, st.x, tid, xs);
  uint x0 = b[0];
  uint m = 0u;  // threads 13..15 hold no moment that is read
  if (k < 13u) {
    for (uint i = 1u; i < 16u; i++) m = p2_add(m, k == 0u ? b[i] : p2_mul(rc[P2G_RC_POW + 16u * (k - 1u) + i], b[i]));
  }
#endif
  uint a = p2_add(x0, rc[P2_RC_INTERNAL]);  // the S-box's input: x_0 + c_r
  for (uint r = 0u; r < 13u; r++) {
#if !defined(MSL_TARGET_HOST)
    uint m0 = simd_shuffle(m, lane0);
    uint mn = simd_shuffle(m, above);
#else
    threadgroup uint* e = p2g_exchange(st, m, tid, xs);
    uint m0 = e[0];
    uint mn = e[(k + 1u) & 15u];
#endif
    uint s0 = p2g_sbox(a);
    uint c = p2_add(s0, m0);
    x0 = p2g_sub(m0, s0);
    if (r < 12u) a = p2g_sub(p2_add(m0, rc[P2_RC_INTERNAL + r + 1u]), s0);  // m_0 + c_{r+1} beside the S-box
    st.x = p2_add(c, p2_mul(diag, st.x));
    m = p2_add(p2_mul(c, w), mn);
  }
  if (k == 0u) st.x = x0;
}

// The permutation of the group's state.
MSL_FN void p2g_permute(thread p2g_sponge& st, threadgroup const uint* rc, uint tid, threadgroup uint* xs) {
  uint k = tid & 15u;
  p2g_external(st, tid, xs, rc[P2_RC_EXT_INIT + k]);
  p2g_full_rounds(st, rc, P2_RC_EXT_INIT, tid, xs);
  p2g_partial_rounds(st, rc, tid, xs);
  st.x = p2_add(st.x, rc[P2_RC_EXT_FINAL + k]);
  p2g_full_rounds(st, rc, P2_RC_EXT_FINAL, tid, xs);
}

#if !defined(MSL_TARGET_HOST)
// GPUs: the sponge's permutation (p2g_sponge_permute) as one function a kernel calls, on CUDA not
// inlined: a kernel that permutes from several places (a round's observes and sample, a layer's
// end) kept a ≈ 16 KB copy of the permutation at each, and the copies run once a launch waited for
// instruction fetch (ncu, H200: gkr_tr_small_rounds with its layer's end inlined 1,767 µs a proof,
// 1,643 µs with this function). Metal decides itself.
#if defined(MSL_TARGET_CUDA)
static __device__ __attribute__((noinline))
#else
MSL_FN
#endif
uint p2g_permute_word(uint x, threadgroup const uint* rc, uint tid, threadgroup uint* xs) {
  p2g_sponge st;
  st.x = x;
  st.buf = 0u;
  st.absorb = 0u;
  st.sample = 0u;
  p2g_permute(st, rc, tid, xs);
  return st.x;
}
#endif

// The duplex sponge over the group's state. Samples are elements of the state after a
// permutation (a sample always follows one with no observe in between): on GPUs read by a
// shuffle (the sponge has no barrier there); on the host device from out[0..16) (threadgroup
// memory beside xs), where the state is left after each permutation.

MSL_FN void p2g_sponge_permute(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                               threadgroup uint* out) {
#if !defined(MSL_TARGET_HOST)
  sp.x = p2g_permute_word(sp.x, rc, tid, xs);
#else
  p2g_permute(sp, rc, tid, xs);
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

// transcript.Sample: permute first if observes are pending or the outputs are used up; outputs
// are read backwards. On the host device through an exchange of the state (out[] holds a
// permutation's outputs only when this launch ran it). Call it in a loop kept rolled
// (MSL_NO_UNROLL): each call site holds a permutation.
MSL_FN uint p2g_sample(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                       threadgroup uint* out) {
  if (sp.absorb != 0u || sp.sample == 0u) p2g_sponge_permute(sp, rc, tid, xs, out);
  sp.sample--;
#if defined(MSL_TARGET_HOST)
  threadgroup uint* b = p2g_exchange(sp, sp.x, tid, xs);
  return b[sp.sample];
#else
  return p2g_element(sp.x, sp.sample, tid);
#endif
}

// Four p2g_observe in turn, with the one permutation they can trigger written once: a
// permutation inlined at each of them made the transcript kernels' code several times larger and
// the kernels slower (perf-notes/gkr.md).
MSL_FN void p2g_observe4(thread p2g_sponge& sp, bb4 v, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                         threadgroup uint* out) {
  uint k = tid & 15u;
  uint a = sp.absorb;  // word c goes to position a + c, or a + c − 8 after the permutation
  for (uint c = 0u; c < 4u; c++) {
    if (a + c < P2_RATE && k == a + c) sp.x = v[c];
  }
  if (a + 4u < P2_RATE) {
    sp.absorb = a + 4u;
    return;
  }
  p2g_sponge_permute(sp, rc, tid, xs, out);
  for (uint c = 0u; c < 4u; c++) {
    if (a + c >= P2_RATE && k == a + c - P2_RATE) sp.x = v[c];
  }
  sp.absorb = a + 4u - P2_RATE;
}

// Four transcript.Sample in turn, with their one permutation written once (p2g_observe4): the
// first n come from the outputs left (none with observes pending), the others after the
// permutation. Outputs are read backwards. On the host device the outputs left are read through
// an exchange of the state (out[] holds a permutation's outputs only when this launch ran it).
MSL_FN bb4 p2g_sample4(thread p2g_sponge& sp, threadgroup const uint* rc, uint tid, threadgroup uint* xs,
                       threadgroup uint* out) {
  uint s = sp.sample;
  uint n = sp.absorb != 0u ? 0u : min(s, 4u);
  bb4 r = bb4_zero();
#if defined(MSL_TARGET_HOST)
  if (n != 0u) {
    threadgroup uint* b = p2g_exchange(sp, sp.x, tid, xs);
    for (uint c = 0u; c < n; c++) r[c] = b[s - 1u - c];
  }
#else
  for (uint c = 0u; c < 4u; c++) {
    uint e = p2g_element(sp.x, c < n ? s - 1u - c : 0u, tid);
    if (c < n) r[c] = e;
  }
#endif
  if (n == 4u) {
    sp.sample = s - 4u;
    return r;
  }
  p2g_sponge_permute(sp, rc, tid, xs, out);
  for (uint c = 0u; c < 4u; c++) {
#if defined(MSL_TARGET_HOST)
    if (c >= n) r[c] = out[P2_RATE - 1u - (c - n)];
#else
    uint e = p2g_element(sp.x, c >= n ? P2_RATE - 1u - (c - n) : 0u, tid);
    if (c >= n) r[c] = e;
#endif
  }
  sp.sample = P2_RATE - (4u - n);
  return r;
}

#endif  // POSEIDON2_GROUP_H
