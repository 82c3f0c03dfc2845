// cuda_stub.h - just enough of what NVRTC declares implicitly for `clang -x cuda -nocudainc
// -nocudalib` to check internal/gpu/cuda/kernels.gen.cu without a CUDA installation
// (scripts/check-msl.sh). NVRTC and nvcc builds never see this file.
#pragma once
#define __CUDACC__ 1  // as NVRTC and nvcc define it (clang does only in its own wrapper header)
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#include "__clang_cuda_builtin_vars.h"  // threadIdx, blockIdx, blockDim, gridDim (clang resource dir)

// device intrinsics used by prelude.h
__device__ inline unsigned __umulhi(unsigned a, unsigned b) { return __nvvm_mulhi_ui(a, b); }
__device__ inline int __mulhi(int a, int b) { return __nvvm_mulhi_i(a, b); }
__device__ inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return __nvvm_mulhi_ull(a, b); }
__device__ inline void __syncwarp(unsigned mask = 0xffffffffu) { asm volatile("bar.warp.sync %0;" ::"r"(mask) : "memory"); }
__device__ inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask) {
  unsigned r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(lane_mask), "r"(mask));
  return r;
}
__device__ inline unsigned __shfl_sync(unsigned mask, unsigned v, int lane) {
  unsigned r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(lane), "r"(mask));
  return r;
}
// NVRTC also declares min/max; prelude.h must not collide with them.
__host__ __device__ inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
__host__ __device__ inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
// and uint2/uint3/uint4 as plain structs (prelude.h renames its own uint2/uint3; uint4 is the
// built-in 16-byte vector of bb4_store_aligned).
struct uint2 { unsigned x, y; };
struct uint3 { unsigned x, y, z; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
