// bench.metal - kernels that measure device ceilings for `metalprove bench --kernels`.
#include "babybear.h"

struct BenchMulParams {
  uint n;      // threads doing work (output slots)
  uint iters;  // loop iterations; each does 4 dependent-chain Montgomery products
};

// out[i] = the end of four interleaved dependent chains of bb_mul (4·iters products per item):
// the BabyBear multiply rate of the device (the result is stored so nothing is optimised away).
// Lanes (prelude.h): every MSL_LANES-th work item runs the items i0 .. i0+MSL_LANES as one lane
// vector, with the vector product the host's lane kernels use (bb_mul_lanes), so that on the host
// device this is the SIMD multiply rate those kernels are measured against. On GPUs it is bb_mul.
kernel void bench_mul_chain(device uint* out [[buffer(0)]],
                            constant BenchMulParams& p [[buffer(1)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint n = p.n;
  uint iters = p.iters;
  uint lstride = lane_stride(stride);
  for (uint i0 = lane_first(gid, n); i0 < n; i0 += lstride) {
    uint x[4u * MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) {
      x[l] = bb_to_mont(i0 + l + 1u);
      x[MSL_LANES + l] = bb_to_mont(i0 + l + 2u);
      x[2u * MSL_LANES + l] = bb_to_mont(i0 + l + 3u);
      x[3u * MSL_LANES + l] = bb_to_mont(i0 + l + 5u);
    }
    lanes_uint a = lanes_ld_th(x);
    lanes_uint b = lanes_ld_th(x + MSL_LANES);
    lanes_uint c = lanes_ld_th(x + 2u * MSL_LANES);
    lanes_uint d = lanes_ld_th(x + 3u * MSL_LANES);
    lanes_uint m = lanes_splat(0x12345678u);
    for (uint k = 0u; k < iters; k++) {
      a = bb_mul_lanes(a, m);
      b = bb_mul_lanes(b, m);
      c = bb_mul_lanes(c, m);
      d = bb_mul_lanes(d, m);
    }
    lanes_uint r = bb_add_lanes(bb_add_lanes(a, b), bb_add_lanes(c, d));
    uint nl = min(MSL_LANES, n - i0);
    for (uint l = 0u; l < nl; l++) out[i0 + l] = lanes_get(r, l);
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
