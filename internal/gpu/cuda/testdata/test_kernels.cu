// test_kernels.cu - hand-written kernels in the shape of the generated kernels.gen.cu (no
// #include, extern "C" mslk_<name>, [[buffer]] slots then one tg_off_j per [[threadgroup(j)]]),
// used by the package's tests until and besides the real generated file.
#line 1 "testdata/test_kernels.metal"
struct MulParams {
  unsigned n;
  unsigned add;
};

extern __shared__ __align__(16) unsigned char msl_tg_mem[];

// out[i] = a[i] * b[i] + p.add (mod 2^32), grid-stride.
extern "C" __global__ void mslk_t_mul(const unsigned* a, const unsigned* b, unsigned* out, MulParams p) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x)
    out[i] = a[i] * b[i] + p.add;
}

// Two threadgroup arrays: vals (one word per thread) and tag (one word). out[g] = Σ in[group g]
// + 1000 * g, where the tag word carries 1000 * g across a barrier; offs[2g], offs[2g+1] record
// the offsets received, and the base address alignment of each array.
extern "C" __global__ void mslk_t_group_sum(const unsigned* in, unsigned* out, unsigned* offs, unsigned n,
                                            unsigned tg_off_0, unsigned tg_off_1) {
  unsigned* vals = (unsigned*)(msl_tg_mem + tg_off_0);
  unsigned* tag = (unsigned*)(msl_tg_mem + tg_off_1);
  unsigned t = threadIdx.x, g = blockIdx.x, i = g * blockDim.x + t;
  vals[t] = i < n ? in[i] : 0u;
  if (t == 0) tag[0] = 1000u * g;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) vals[t] += vals[t + s];
    __syncthreads();
  }
  if (t == 0) {
    out[g] = vals[0] + tag[0];
    offs[4 * g + 0] = tg_off_0;
    offs[4 * g + 1] = tg_off_1;
    offs[4 * g + 2] = (unsigned)((unsigned long long)vals % 16);
    offs[4 * g + 3] = (unsigned)((unsigned long long)tag % 16);
  }
}

// Uses `words` words of dynamic shared memory (more than the default 48 KiB in the test):
// out[g * words + k] = the word written by another thread, read back reversed.
extern "C" __global__ void mslk_t_big_tg(unsigned* out, unsigned words, unsigned tg_off_0) {
  unsigned* m = (unsigned*)(msl_tg_mem + tg_off_0);
  for (unsigned k = threadIdx.x; k < words; k += blockDim.x) m[k] = k * 3u + blockIdx.x;
  __syncthreads();
  for (unsigned k = threadIdx.x; k < words; k += blockDim.x)
    out[blockIdx.x * words + k] = m[words - 1 - k];
}
