// grind.metal - proof-of-work witness search: the smallest candidate w in a range whose
// Poseidon2 permutation passes, as transcript.WitnessOK: with s = state, s[absorb_idx] = w,
// accept iff canonical(Permute(s)[7]) & mask == 0 (mask = 2^bits − 1). No atomics: every thread
// keeps its smallest hit (its candidates ascend, so that is its first), a threadgroup minimum
// goes to a per-group slot, and grind_min reduces those slots. NONE = 0xffffffff (no hit; every
// candidate is < p < 2^31).
#include "poseidon2.h"

#define GRIND_NONE 0xffffffffu

struct GrindParams {
  uint absorb_idx;  // position of the witness in the state, < 8
  uint mask;        // 2^bits − 1
  uint base;        // first candidate
  uint count;       // candidates base .. base + count − 1 (base + count ≤ p)
  uint cont;        // 1: a continuation of the search before it (candidates below base), which
                    // it skips when that one's result (prev[0]) is a hit
};

// group_min[g] = the smallest passing candidate among those visited by group g, or GRIND_NONE.
// found[0] (GRIND_NONE before the dispatch: grind_min resets it) holds some passing candidate
// once a thread has one: a thread stops before a candidate above it (the smallest hit is not
// there), so a hit early in the range spares the groups that start after it.
// state: the 16 state elements in Montgomery form. Thread j (grid position) visits the candidate
// lane groups i0 = j·MSL_LANES, then steps by the whole grid (threads_per_grid · MSL_LANES), in
// ascending order, and stops at its first hit. Lanes (prelude.h): on the host one work item
// tests MSL_LANES consecutive candidates base + i0 + l with one lane-major permutation. The
// launcher keeps threads_per_grid · MSL_LANES + count below 2^32. scratch: 4 · tpg bytes.
kernel void grind_search(constant uint* state [[buffer(0)]],
                         constant uint* rc [[buffer(1)]],
                         device uint* group_min [[buffer(2)]],
                         device uint* found [[buffer(3)]],
                         constant GrindParams& p [[buffer(4)]],
                         device const uint* prev [[buffer(5)]],
                         threadgroup uint* scratch [[threadgroup(0)]],
                         uint gid [[thread_position_in_grid]],
                         uint stride [[threads_per_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint group [[threadgroup_position_in_grid]],
                         uint tpg [[threads_per_threadgroup]]) {
  // A continuation after the hit of the search before it: nothing to test, and grind_min skips
  // the group minima (uniform: every thread of every group returns here).
  if (p.cont != 0u && prev[0] != GRIND_NONE) return;
  uint idx = p.absorb_idx;
  uint mask = p.mask;
  uint base = p.base;
  uint count = p.count;
  uint st[P2_WIDTH];
  for (uint k = 0u; k < P2_WIDTH; k++) st[k] = state[k];
  uint best = GRIND_NONE;
  uint s[P2_STATE];
  uint lstride = stride * MSL_LANES;
  // Some passing candidate, written by whichever thread found one (a plain store: any hit will
  // do); read past the cache, so that threads started after a hit see it.
  volatile device uint* hit = found;
  for (uint i0 = gid * MSL_LANES; i0 < count; i0 += lstride) {
    // The minimum is at most a hit already found: candidates above it need no test.
    if (*hit < base + i0) break;
    // Lanes past count test candidates that are ignored below (at most MSL_LANES − 1 of them).
    uint w[MSL_LANES];
    MSL_FOR_LANES(l) w[l] = bb_to_mont(base + i0 + l);
    // A select rather than s[idx·MSL_LANES + l] = w[l]: with constant indices (k unrolled) the
    // state stays in registers on GPUs.
    MSL_UNROLL
    for (uint k = 0u; k < P2_WIDTH; k++) {
      uint v = st[k];
      bool here = k == idx;
      MSL_FOR_LANES(l) s[k * MSL_LANES + l] = here ? w[l] : v;
    }
    p2_permute(s, rc);
    uint nl = min(MSL_LANES, count - i0);
    for (uint l = 0u; l < nl; l++) {
      if ((bb_from_mont(s[7u * MSL_LANES + l]) & mask) == 0u) {
        best = base + i0 + l;
        break;
      }
    }
    if (best != GRIND_NONE) {
      if (best < *hit) *hit = best;
      break;
    }
  }
  scratch[tid] = best;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0u) {
    uint m = GRIND_NONE;
    for (uint t = 0u; t < tpg; t++) m = min(m, scratch[t]);
    group_min[group] = m;
  }
}

// out[0] = min(group_min[0 .. n)), by one threadgroup (scratch: 4 · tpg bytes); GRIND_NONE when
// n = 0 or no group had a hit. With cont (grind_search's continuation of the search before it)
// out[0] keeps that search's hit, which lies below every candidate of this one. found[0]
// (grind_search's hit, read by no one after it) goes back to GRIND_NONE for the next search.
// Dispatch exactly one group.
kernel void grind_min(device const uint* group_min [[buffer(0)]],
                      device uint* out [[buffer(1)]],
                      constant uint& n [[buffer(2)]],
                      device uint* found [[buffer(3)]],
                      constant uint& cont [[buffer(4)]],
                      threadgroup uint* scratch [[threadgroup(0)]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint tpg [[threads_per_threadgroup]]) {
  // A continuation after a hit (out[0], the search before's result, below every candidate of this
  // one): grind_search wrote neither the group minima nor found (reset by the search before's
  // grind_min), the result stands.
  if (cont != 0u && out[0] != GRIND_NONE) return;
  uint cnt = n;
  uint m = GRIND_NONE;
  for (uint i = tid; i < cnt; i += tpg) m = min(m, group_min[i]);
  scratch[tid] = m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0u) {
    uint r = GRIND_NONE;
    for (uint t = 0u; t < tpg; t++) r = min(r, scratch[t]);
    out[0] = cont != 0u ? min(out[0], r) : r;
    found[0] = GRIND_NONE;
  }
}
