// poseidon2.metal - batched Poseidon2 permutations (width 16, Montgomery form).
// Round constants: see include/poseidon2.h.
#include "poseidon2.h"

// states[16·i .. 16·i+16) ← Permute(states[16·i ..]) for i < n, in place.
kernel void p2_permute_states(device uint* states [[buffer(0)]],
                              constant uint* rc [[buffer(1)]],
                              constant uint& n [[buffer(2)]],
                              uint gid [[thread_position_in_grid]],
                              uint stride [[threads_per_grid]]) {
  uint cnt = n;
  uint s[16];
  for (uint i = gid; i < cnt; i += stride) {
    uint base = i * P2_WIDTH;
    for (uint k = 0u; k < P2_WIDTH; k++) s[k] = states[base + k];
    p2_permute(s, rc);
    for (uint k = 0u; k < P2_WIDTH; k++) states[base + k] = s[k];
  }
}
