// poseidon2.metal - batched Poseidon2 permutations (width 16, Montgomery form).
// Round constants: see include/poseidon2.h.
#include "poseidon2.h"

// states[16·i .. 16·i+16) ← Permute(states[16·i ..]) for i < n, in place.
// Lanes (prelude.h): every MSL_LANES-th work item permutes the states i0 .. i0+MSL_LANES (lane l:
// state i0 + l, skipped when ≥ n); the grid stride, rounded up to whole lanes, spreads those items
// over all threadgroups.
kernel void p2_permute_states(device uint* states [[buffer(0)]],
                              constant uint* rc [[buffer(1)]],
                              constant uint& n [[buffer(2)]],
                              uint gid [[thread_position_in_grid]],
                              uint stride [[threads_per_grid]]) {
  uint cnt = n;
  uint lstride = lane_stride(stride);
  uint s[P2_STATE];
  for (uint i0 = lane_first(gid, cnt); i0 < cnt; i0 += lstride) {
    uint nl = min(MSL_LANES, cnt - i0);
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint base = (i0 + l) * P2_WIDTH;
      for (uint k = 0u; k < P2_WIDTH; k++) s[k * MSL_LANES + l] = l < nl ? states[base + k] : 0u;
    }
    p2_permute(s, rc);
    for (uint l = 0u; l < nl; l++) {
      uint base = (i0 + l) * P2_WIDTH;
      for (uint k = 0u; k < P2_WIDTH; k++) states[base + k] = s[k * MSL_LANES + l];
    }
  }
}

// The host's transcript helpers below. HD_TRAMPOLINES_ONLY: the host's files of instruction-set
// copies of the trampolines (scripts/mslgen) compile the kernels again; the x86-64-v4 file
// (HD_LANE_COPY 4) also compiles the search's AVX-512 copy (hd_p2_search_v4), whose lane products
// are vpmuludq there (babybear.h), and the main file exports the helpers.
#if defined(__x86_64__) && !defined(HD_NO_CLONES)
#define P2_HOST_CLONES 1  // as hd_glue.h's HD_ISA_VARIANTS (included after the kernels)
#else
#define P2_HOST_CLONES 0
#endif
#if defined(MSL_TARGET_HOST) && (!defined(HD_TRAMPOLINES_ONLY) || (P2_HOST_CLONES && HD_LANE_COPY == 4))
// ------------------------------------------------------------------------------------------------
// The transcript's proof-of-work search for small bit counts (internal/gpu/host calls hd_p2_search;
// no GPU runs this): candidates w = from, from+1, … below to, MSL_LANES at a time, each in its own
// lane: the state with state[idx] = w, permuted, passes when the low bits (mask) of element 7 are
// zero (transcript.WitnessOK). A 5-bit search (WHIR's folding PoW, 12 a proof) needs 32 candidates
// on average: two vector permutations, where a search spread over goroutines spends more on waking
// them. Canonical values in; rc as p2_permute's. Returns the smallest passing w, or ~0u for none.
MSL_FN uint p2_search(const uint* state, uint idx, uint mask, uint from, uint to, const uint* rc) {
  uint base[P2_WIDTH];
  for (uint k = 0u; k < P2_WIDTH; k++) base[k] = bb_to_mont(state[k]);
  uint s[P2_STATE];
  for (uint w0 = from, nl = 0u; w0 < to; w0 += nl) {
    nl = min(MSL_LANES, to - w0);
    for (uint k = 0u; k < P2_WIDTH; k++)
      for (uint l = 0u; l < MSL_LANES; l++) s[k * MSL_LANES + l] = k == idx ? bb_to_mont(l < nl ? w0 + l : w0) : base[k];
    p2_permute(s, rc);
    for (uint l = 0u; l < nl; l++)
      if ((bb_mul(s[7u * MSL_LANES + l], 1u) & mask) == 0u) return w0 + l;
  }
  return ~0u;
}

#if P2_HOST_CLONES
extern "C" unsigned hd_p2_search_v4(const unsigned*, unsigned, unsigned, unsigned, unsigned, const unsigned*);
#if defined(HD_TRAMPOLINES_ONLY)
extern "C" __attribute__((target("arch=x86-64-v4"))) unsigned hd_p2_search_v4(const unsigned* st, unsigned i, unsigned m, unsigned f, unsigned t,
                                                 const unsigned* rc) {
  return p2_search(st, i, m, f, t, rc);
}
#else
__attribute__((target("arch=x86-64-v3"))) static uint p2_search_v3(const uint* st, uint i, uint m, uint f, uint t, const uint* rc) {
  return p2_search(st, i, m, f, t, rc);
}
#endif
#endif

#if !defined(HD_TRAMPOLINES_ONLY)
// The exported search (hd_runtime.h): the copy for the best instruction set this CPU runs.
extern "C" unsigned hd_p2_search(const unsigned* state, unsigned idx, unsigned mask, unsigned from, unsigned to,
                                 const unsigned* rc) {
  if (idx >= P2_WIDTH || from >= to || to > BB_P) return ~0u;
#if P2_HOST_CLONES
  int isa = hd_isa_supported();
  if (isa >= HD_ISA_X86_64_V4) return hd_p2_search_v4(state, idx, mask, from, to, rc);
  if (isa >= HD_ISA_X86_64_V3) return p2_search_v3(state, idx, mask, from, to, rc);
#endif
  return p2_search(state, idx, mask, from, to, rc);
}
#endif

#if LANES_SHUFFLE && !defined(HD_TRAMPOLINES_ONLY)
// ------------------------------------------------------------------------------------------------
// One state at a time, for the host's Fiat–Shamir transcript (internal/gpu/host calls
// hd_p2_absorb, below; no GPU runs this). A proof's transcript absorbs thousands of values in one sequence (keccakf-1024:
// ~2,700 permutations for its column openings), with no second state to put beside the first, so
// here the 16 lanes of one lanes_uint are the 16 elements of one state: a full round is one vector
// S-box and M_E by lane shuffles; a partial round's S-box is scalar and M_I = J + diag(V) a vector
// product plus the lane sum.

// M_E: y = [2 3 1 1; 1 2 3 1; 1 1 2 3; 3 1 1 2]·x on each group of four, as
// y_i = 2x_i + 3x_{i+1} + x_{i+2} + x_{i+3} = (x_i + x_{i+1} + x_{i+2} + x_{i+3}) + x_i + 2x_{i+1}
// (indices within the group), then y_i + Σ_k y_{4k + i mod 4}.
MSL_FN lanes_uint p2_one_external(lanes_uint x) {
  lanes_uint r1 = __builtin_shufflevector(x, x, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
  lanes_uint r2 = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  lanes_uint r3 = __builtin_shufflevector(x, x, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
  lanes_uint sum4 = bb_add_lanes(bb_add_lanes(x, r1), bb_add_lanes(r2, r3));
  lanes_uint y = bb_add_lanes(bb_add_lanes(sum4, x), bb_add_lanes(r1, r1));
  lanes_uint c4 = __builtin_shufflevector(y, y, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3);
  lanes_uint c8 = __builtin_shufflevector(y, y, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  lanes_uint c12 = __builtin_shufflevector(y, y, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
  return bb_add_lanes(y, bb_add_lanes(bb_add_lanes(y, c4), bb_add_lanes(c8, c12)));
}

// Σ of the 16 lanes (mod p).
MSL_FN uint p2_one_sum(lanes_uint v) {
  v = bb_add_lanes(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = bb_add_lanes(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3));
  v = bb_add_lanes(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1));
  return bb_add(v[0], v[1]);
}

MSL_FN lanes_uint p2_one_full_round(lanes_uint v, const uint* rc) {
  return p2_one_external(p2_sbox_lanes(bb_add_lanes(v, lanes_ld_th(rc))));
}

// The permutation of one state, element k in lane k (Montgomery form, as p2_permute).
MSL_FN lanes_uint p2_one_permute(lanes_uint v, const uint* rc) {
  v = p2_one_external(v);
  for (uint r = 0u; r < 4u; r++) v = p2_one_full_round(v, rc + P2_RC_EXT_INIT + 16u * r);
  lanes_uint diag = lanes_ld_th(rc + P2_RC_DIAG);
  for (uint r = 0u; r < 13u; r++) {
    uint x0 = v[0];
    uint s0 = p2_sbox(bb_add(x0, rc[P2_RC_INTERNAL + r]));
    uint part = bb_sub(p2_one_sum(v), x0);  // Σ_{i≥1} s_i
    lanes_uint w = bb_add_lanes(lanes_splat(bb_add(part, s0)), bb_mul_lanes(diag, v));
    w[0] = bb_sub(part, s0);  // V[0] = −2: part + s0 − 2·s0
    v = w;
  }
  for (uint r = 0u; r < 4u; r++) v = p2_one_full_round(v, rc + P2_RC_EXT_FINAL + 16u * r);
  return v;
}

// The duplex sponge's absorb (transcript.Observe, n times): state[idx] ← data[i], permuting after
// every 8th. Canonical values in and out; rc as p2_permute's. Returns the final idx.
MSL_FN uint p2_one_absorb(uint* state, const uint* data, ulong n, uint idx, const uint* rc) {
  lanes_uint r2 = lanes_splat(BB_R2);
  lanes_uint v = bb_mul_lanes(lanes_ld_th(state), r2);
  ulong i = 0;
  for (; i < n && idx != 0u; i++) {  // the pending block's rest
    v[idx] = bb_to_mont(data[i]);
    if (++idx == P2_RATE) {
      v = p2_one_permute(v, rc);
      idx = 0u;
    }
  }
  for (; n - i >= P2_RATE; i += P2_RATE) {  // whole blocks: lanes 0..7 replaced at once
    lanes_uint d = lanes_splat(0u);
    __builtin_memcpy(&d, data + i, P2_RATE * sizeof(uint));
    d = bb_mul_lanes(d, r2);
    v = p2_one_permute(__builtin_shufflevector(d, v, 0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31), rc);
  }
  for (; i < n; i++) v[idx++] = bb_to_mont(data[i]);  // a partial last block (idx < 8 here)
  v = bb_mul_lanes(v, lanes_splat(1u));  // out of Montgomery form
  __builtin_memcpy(state, &v, sizeof v);
  return idx;
}

#if P2_HOST_CLONES
__attribute__((target("arch=x86-64-v4"))) static uint p2_one_absorb_v4(uint* s, const uint* d, ulong n, uint i, const uint* rc) {
  return p2_one_absorb(s, d, n, i, rc);
}
__attribute__((target("arch=x86-64-v3"))) static uint p2_one_absorb_v3(uint* s, const uint* d, ulong n, uint i, const uint* rc) {
  return p2_one_absorb(s, d, n, i, rc);
}
#endif

// The exported absorb (hd_runtime.h): the copy for the best instruction set this CPU runs.
extern "C" unsigned hd_p2_absorb(unsigned* state, const unsigned* data, unsigned long n, unsigned idx, const unsigned* rc) {
#if P2_HOST_CLONES
  int isa = hd_isa_supported();
  if (isa >= HD_ISA_X86_64_V4) return p2_one_absorb_v4(state, data, n, idx, rc);
  if (isa >= HD_ISA_X86_64_V3) return p2_one_absorb_v3(state, data, n, idx, rc);
#endif
  return p2_one_absorb(state, data, n, idx, rc);
}
#elif !defined(HD_TRAMPOLINES_ONLY)
// No vector shuffles in this compiler (GCC before 12): the caller keeps its own absorb.
extern "C" unsigned hd_p2_absorb(unsigned*, const unsigned*, unsigned long, unsigned, const unsigned*) { return ~0u; }
#endif  // LANES_SHUFFLE
#endif  // MSL_TARGET_HOST
