// bad_kernel.cu - a kernel that does not compile; the error must name testdata/bad.metal:4.
#line 1 "testdata/bad.metal"
extern "C" __global__ void mslk_t_bad(unsigned* out) {
  unsigned x = 1;

  out[0] = x + undefined_symbol;
}
