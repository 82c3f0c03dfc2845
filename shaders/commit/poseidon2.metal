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
