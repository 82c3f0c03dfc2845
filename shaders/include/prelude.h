// prelude.h - lets one MSL source build for four targets.
//
//   __METAL_VERSION__  real Metal (xcrun metal, or the run-time compiler): the MSL standard
//                      library, nothing emulated.
//   __CUDACC__         CUDA (NVRTC, nvcc, or clang -x cuda): address spaces vanish, helpers are
//                      __device__. Must compile under NVRTC alone: no #include of any header.
//   MSL_CHECK          clang -fsyntax-only: device/constant/threadgroup become distinct clang
//                      address spaces, so mixing them is a compile error as in Metal.
//   (none)             host C++ (g++/clang): the CPU "host device" (internal/gpu/host).
//
// Kernel sources never reach the non-Metal compilers verbatim. scripts/mslgen emits a copy in
// which
//  - the [[...]] attributes of kernel parameters are blanked out (C++ compilers only warn about
//    them, but `threadgroup` cannot be both a qualifier macro and the [[threadgroup(0)]] name), and
//  - the MSL keywords device/constant/threadgroup/thread/kernel are rewritten to MSL_DEVICE, ...
//    (lower-case macros would also rewrite CUDA's own __device__/__constant__, which expand
//    through the tokens device/constant, and std::thread).
// The Metal copy (internal/gpu/metal/shaders.gen.metal) is the verbatim text with includes inlined.
#ifndef MSL_PRELUDE_H
#define MSL_PRELUDE_H

#if defined(__METAL_VERSION__)
// ------------------------------------------------------------------ Metal
#include <metal_stdlib>
using namespace metal;
#define MSL_TARGET_METAL 1
#define MSL_FN static inline  // free helper functions
#define MSL_METHOD            // member functions of helper structs
#define MSL_LANES 1u          // see "Lanes" below
#define MSL_LOG_LANES 0u
#define MSL_UNROLL
#define MSL_LANE_PRAGMA

#else
// ------------------------------------------------------------------ CUDA / check / host
#if defined(__CUDACC__)
#define MSL_TARGET_CUDA 1
#define MSL_FN static __device__ __forceinline__ __attribute__((unused))
#define MSL_METHOD __device__ __forceinline__
#elif defined(MSL_CHECK)
#define MSL_TARGET_CHECK 1
#define MSL_FN static inline __attribute__((unused))
#define MSL_METHOD inline
#else
#define MSL_TARGET_HOST 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 spends ~75 % of the host file's compile time in RTL GCSE/PRE on the large unrolled
// lane kernels (ntt_pass: 57 s → 15 s per copy without them) for no measured speed.
#pragma GCC optimize("no-gcse", "no-gcse-after-reload")
#endif
// always_inline: the whole kernel must land in each SIMD clone of its host trampoline (hd_glue.h);
// a helper left out of line (GCC declines large stack frames) would run baseline code.
#define MSL_FN static inline __attribute__((always_inline, unused))
#define MSL_METHOD inline
#endif

// Address spaces. Only the check mode gives them meaning. Metal's default (`thread`) is the
// default address space, and there is no generic space, so device->thread conversions are errors.
//   clang++ -DMSL_CHECK          : plain C++ with numbered clang address spaces
//   clang -x clcpp -DMSL_CHECK   : C++ for OpenCL 2021 without the generic address space
//                                  (also allows `uint f() device const` methods, rejects casts
//                                  between address spaces and non-constant program-scope data)
#if defined(MSL_TARGET_CHECK) && defined(__OPENCL_CPP_VERSION__)
#define MSL_DEVICE __global
#define MSL_CONSTANT __constant
#define MSL_THREADGROUP __local
#define MSL_THREAD __private
#define local msl_local  // OpenCL keywords that are ordinary identifiers in MSL
#define global msl_global
#elif defined(MSL_TARGET_CHECK)
#define MSL_DEVICE __attribute__((address_space(1)))
#define MSL_CONSTANT __attribute__((address_space(2)))
#define MSL_THREADGROUP __attribute__((address_space(3)))
#define MSL_THREAD
#else
#define MSL_DEVICE
#define MSL_CONSTANT const
#define MSL_THREADGROUP
#define MSL_THREAD
#endif
#if defined(MSL_TARGET_CHECK)
#define half _Float16  // MSL type name: using it as an identifier must fail as it does in Metal
#endif

// `kernel void f(...)` becomes an ordinary inline function; mslgen renames it msl_kernel_f and
// wraps it (host trampoline / CUDA __global__ mslk_f).
#define MSL_KERNEL MSL_FN

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;  // 64-bit on LP64 (Linux, macOS) host and CUDA device alike
static_assert(sizeof(uint) == 4, "MSL uint must be 32-bit");
static_assert(sizeof(ulong) == 8, "MSL ulong must be 64-bit");

// Minimal uint2/uint3: members, constructors, component-wise + - *. No swizzles, no bool vectors.
// Macro-renamed so they do not collide with CUDA's built-in (constructor-less) uint2/uint3,
// which NVRTC declares implicitly.
struct msl_uint2 {
  uint x, y;
  MSL_METHOD msl_uint2() : x(0), y(0) {}
  MSL_METHOD explicit msl_uint2(uint s) : x(s), y(s) {}
  MSL_METHOD msl_uint2(uint x_, uint y_) : x(x_), y(y_) {}
  MSL_METHOD msl_uint2 operator+(msl_uint2 o) const { return msl_uint2(x + o.x, y + o.y); }
  MSL_METHOD msl_uint2 operator-(msl_uint2 o) const { return msl_uint2(x - o.x, y - o.y); }
  MSL_METHOD msl_uint2 operator*(msl_uint2 o) const { return msl_uint2(x * o.x, y * o.y); }
};
struct msl_uint3 {
  uint x, y, z;
  MSL_METHOD msl_uint3() : x(0), y(0), z(0) {}
  MSL_METHOD explicit msl_uint3(uint s) : x(s), y(s), z(s) {}
  MSL_METHOD msl_uint3(uint x_, uint y_, uint z_) : x(x_), y(y_), z(z_) {}
  MSL_METHOD msl_uint3 operator+(msl_uint3 o) const { return msl_uint3(x + o.x, y + o.y, z + o.z); }
  MSL_METHOD msl_uint3 operator-(msl_uint3 o) const { return msl_uint3(x - o.x, y - o.y, z - o.z); }
  MSL_METHOD msl_uint3 operator*(msl_uint3 o) const { return msl_uint3(x * o.x, y * o.y, z * o.z); }
};
#define uint2 msl_uint2
#define uint3 msl_uint3

// mulhi: high half of the full product (MSL built-in); min/max.
#if defined(MSL_TARGET_CUDA)
MSL_FN uint mulhi(uint a, uint b) { return __umulhi(a, b); }
MSL_FN int mulhi(int a, int b) { return __mulhi(a, b); }
MSL_FN ulong mulhi(ulong a, ulong b) { return (ulong)__umul64hi(a, b); }
// Own min/max under other names: whether CUDA's overloads are visible depends on the compiler
// (NVRTC, nvcc, clang), and the same signature defined twice would not compile.
MSL_FN uint msl_min(uint a, uint b) { return a < b ? a : b; }
MSL_FN uint msl_max(uint a, uint b) { return a > b ? a : b; }
MSL_FN int msl_min(int a, int b) { return a < b ? a : b; }
MSL_FN int msl_max(int a, int b) { return a > b ? a : b; }
MSL_FN ulong msl_min(ulong a, ulong b) { return a < b ? a : b; }
MSL_FN ulong msl_max(ulong a, ulong b) { return a > b ? a : b; }
#define min msl_min
#define max msl_max
#elif defined(MSL_TARGET_CHECK)
uint mulhi(uint a, uint b);  // declarations are enough for -fsyntax-only
int mulhi(int a, int b);
ulong mulhi(ulong a, ulong b);
uint min(uint a, uint b);
uint max(uint a, uint b);
int min(int a, int b);
int max(int a, int b);
ulong min(ulong a, ulong b);
ulong max(ulong a, ulong b);
#else
MSL_FN uint mulhi(uint a, uint b) { return (uint)(((ulong)a * b) >> 32); }
MSL_FN int mulhi(int a, int b) { return (int)(((long)a * b) >> 32); }
MSL_FN ulong mulhi(ulong a, ulong b) { return (ulong)(((unsigned __int128)a * b) >> 64); }
MSL_FN uint min(uint a, uint b) { return a < b ? a : b; }
MSL_FN uint max(uint a, uint b) { return a > b ? a : b; }
MSL_FN int min(int a, int b) { return a < b ? a : b; }
MSL_FN int max(int a, int b) { return a > b ? a : b; }
MSL_FN ulong min(ulong a, ulong b) { return a < b ? a : b; }
MSL_FN ulong max(ulong a, ulong b) { return a > b ? a : b; }
#endif

// Lanes. On the host device one work item runs MSL_LANES consecutive "virtual threads" (lanes) so
// that the C++ compiler can turn a kernel's innermost `for (uint l = 0u; l < MSL_LANES; l++)` loops
// into SIMD instructions (AVX-512/AVX2 through the target clones of the host trampolines, NEON on
// aarch64): per-item state is an array indexed [k * MSL_LANES + l], and neighbouring lanes touch
// neighbouring addresses. On GPUs MSL_LANES is 1 and such loops vanish: lanes are the GPU's own
// SIMD threads. Launchers need not know the lane count (kernels loop with a grid stride).
// MSL_UNROLL before a loop with a constant trip count asks the host compiler to unroll it
// completely (so per-lane arrays indexed by its counter become registers); GPU compilers unroll
// such loops on their own.
#if defined(MSL_TARGET_HOST)
#define MSL_LANES 16u
#define MSL_LOG_LANES 4u
#define MSL_UNROLL _Pragma("GCC unroll 16")
#if defined(__clang__)
#define MSL_LANE_PRAGMA _Pragma("clang loop unroll(disable) vectorize(enable)")
#else
#define MSL_LANE_PRAGMA _Pragma("GCC unroll 1") _Pragma("GCC ivdep")
#endif
#else
#define MSL_LANE_PRAGMA
#define MSL_UNROLL
#define MSL_LANES 1u
#define MSL_LOG_LANES 0u
#endif
// MSL_NO_UNROLL before a loop keeps it a loop: for loops whose body inlines a Poseidon2
// permutation (the device transcript's observes), which unrolled would put a copy of the
// permutation's code in the kernel per iteration (measured slower: perf-notes/gkr.md).
#if defined(MSL_TARGET_CUDA)
#define MSL_NO_UNROLL _Pragma("unroll 1")
#elif defined(__clang__)
#define MSL_NO_UNROLL _Pragma("clang loop unroll(disable)")
#else
#define MSL_NO_UNROLL _Pragma("GCC unroll 1")
#endif


// threadgroup_barrier(mem_flags::...). Every flag means "full threadgroup barrier" here.
enum class mem_flags : uint { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
MSL_FN mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((uint)a | (uint)b); }
#if defined(MSL_TARGET_CUDA)
MSL_FN void threadgroup_barrier(mem_flags) { __syncthreads(); }
MSL_FN void simdgroup_barrier(mem_flags) { __syncwarp(); }
// Metal's SIMD-group shuffles (uint only), for kernels whose every SIMD group is whole and
// converged at the call (the full mask).
MSL_FN uint simd_shuffle_xor(uint v, ushort mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
MSL_FN uint simd_shuffle(uint v, ushort lane) { return __shfl_sync(0xffffffffu, v, lane); }
#elif defined(MSL_TARGET_CHECK)
void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);
uint simd_shuffle_xor(uint v, ushort mask);
uint simd_shuffle(uint v, ushort lane);
#else
extern "C" void hd_threadgroup_barrier(void);  // host device: switch to the next work item
MSL_FN void threadgroup_barrier(mem_flags) {
  __asm__ __volatile__("" ::: "memory");
  hd_threadgroup_barrier();
  __asm__ __volatile__("" ::: "memory");
}
// The host's SIMD groups are single work items; kernels that exchange values within a SIMD
// group of a GPU get a full barrier instead (stronger, so correct). No shuffles: kernels that use
// them on GPUs exchange through threadgroup memory here.
MSL_FN void simdgroup_barrier(mem_flags f) { threadgroup_barrier(f); }
#endif

#endif  // !__METAL_VERSION__

// MSL_HOST_ISA_COPIES, a statement at the start of a kernel's body: the host device compiles its
// group trampolines once per x86-64 instruction set (scripts/mslgen), as it does for every kernel
// that uses MSL_LANES. For kernels without lanes whose own loops the host compiler vectorises (a
// block of 16 rows, a small transform in registers): the baseline copy runs them on SSE2 only.
// Nothing on GPUs.
#define MSL_HOST_ISA_COPIES

// MSL_FOR_LANES(l) stmt: stmt for every lane l, as one SIMD loop on the host (kept rolled, so the
// vectoriser rather than the unroller takes it; iterations independent).
#define MSL_FOR_LANES(l) MSL_LANE_PRAGMA for (uint l = 0u; l < MSL_LANES; l++)

// Grid-stride loops over groups of MSL_LANES items: `for (uint i0 = lane_first(gid, n); i0 < n;
// i0 += lane_stride(stride))`. Every MSL_LANES-th work item starts at its own index (the others
// start at n and do nothing) and steps by the grid stride rounded up to whole lane groups, so the
// groups spread over all threadgroups. On GPUs (MSL_LANES = 1): gid and stride.
MSL_FN uint lane_first(uint gid, uint end) { return (gid & (MSL_LANES - 1u)) == 0u ? gid : end; }
MSL_FN uint lane_stride(uint stride) { return (stride + MSL_LANES - 1u) & ~(MSL_LANES - 1u); }
#endif  // MSL_PRELUDE_H
