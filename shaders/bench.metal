// bench.metal - kernels that measure device ceilings for `metalprove bench --kernels`.
#include "babybear.h"

struct BenchMulParams {
  uint n;      // threads doing work (output slots)
  uint iters;  // loop iterations; each does 4 dependent-chain Montgomery products
};

// out[i] = the end of four interleaved dependent chains of bb_mul (4·iters products per item):
// the BabyBear multiply rate of the device (the result is stored so nothing is optimised away).
kernel void bench_mul_chain(device uint* out [[buffer(0)]],
                            constant BenchMulParams& p [[buffer(1)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint n = p.n;
  uint iters = p.iters;
  for (uint i = gid; i < n; i += stride) {
    uint a = bb_to_mont(i + 1u), b = bb_to_mont(i + 2u), c = bb_to_mont(i + 3u), d = bb_to_mont(i + 5u);
    uint m = 0x12345678u;
    for (uint k = 0u; k < iters; k++) {
      a = bb_mul(a, m);
      b = bb_mul(b, m);
      c = bb_mul(c, m);
      d = bb_mul(d, m);
    }
    out[i] = bb_add(bb_add(a, b), bb_add(c, d));
  }
}

// dst[i] = src[i] for i < n: the device's copy bandwidth through a kernel (8 bytes per element).
kernel void bench_copy(device const uint* src [[buffer(0)]],
                       device uint* dst [[buffer(1)]],
                       constant uint& n [[buffer(2)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint cnt = n;
  for (uint i = gid; i < cnt; i += stride) dst[i] = src[i];
}
