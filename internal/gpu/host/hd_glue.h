// hd_glue.h - helpers for the generated host trampolines of kernels_host.gen.cpp (included
// after the kernel sources, so the MSL types from prelude.h are visible).
#ifndef HD_GLUE_H
#define HD_GLUE_H

template <class T> inline T hd_cvt(hd_u3 v);
template <> inline uint hd_cvt<uint>(hd_u3 v) { return v.x; }
template <> inline ushort hd_cvt<ushort>(hd_u3 v) { return (ushort)v.x; }
template <> inline uint2 hd_cvt<uint2>(hd_u3 v) { return uint2(v.x, v.y); }
template <> inline uint3 hd_cvt<uint3>(hd_u3 v) { return uint3(v.x, v.y, v.z); }

// Metal built-ins, for Metal's dispatchThreadgroups model (uniform threadgroups).
static inline hd_u3 hd_bi_thread_position_in_grid(const hd_launch* L, hd_u3 gp, hd_u3 lp) {
  return hd_u3{gp.x * L->tpg.x + lp.x, gp.y * L->tpg.y + lp.y, gp.z * L->tpg.z + lp.z};
}
static inline hd_u3 hd_bi_thread_position_in_threadgroup(const hd_launch*, hd_u3, hd_u3 lp) { return lp; }
static inline hd_u3 hd_bi_threadgroup_position_in_grid(const hd_launch*, hd_u3 gp, hd_u3) { return gp; }
static inline hd_u3 hd_bi_threads_per_threadgroup(const hd_launch* L, hd_u3, hd_u3) { return L->tpg; }
static inline hd_u3 hd_bi_threadgroups_per_grid(const hd_launch* L, hd_u3, hd_u3) { return L->groups; }
static inline hd_u3 hd_bi_threads_per_grid(const hd_launch* L, hd_u3, hd_u3) {
  return hd_u3{L->groups.x * L->tpg.x, L->groups.y * L->tpg.y, L->groups.z * L->tpg.z};
}
static inline hd_u3 hd_bi_thread_index_in_threadgroup(const hd_launch* L, hd_u3, hd_u3 lp) {
  return hd_u3{lp.x + L->tpg.x * (lp.y + L->tpg.y * lp.z), 0, 0};
}

// On x86-64 (GCC, Clang) the group trampoline of every kernel written with lanes is compiled
// three times: for x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and the baseline (SSE2); the runtime
// picks one per dispatch from what the CPU and the OS support (hd_runtime.cpp: hd_isa_supported)
// unless the backend asks for a lower level. The kernel code inlined into each copy is vectorised
// for that instruction set: this is where the lane loops of prelude.h turn into SIMD. Kernel
// helpers are always_inline on the host (prelude.h), so each copy holds the whole kernel. Other
// targets (aarch64: NEON is the baseline) compile once; so does a build with HD_NO_CLONES
// (scripts/host-isa-check.sh builds that way with -march to test each code path).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(HD_NO_CLONES)
#define HD_ISA_VARIANTS 1
#define HD_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define HD_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define HD_ISA_GROUPS(v3, v4) {v3, v4}
#else
#define HD_ISA_VARIANTS 0
#define HD_ISA_GROUPS(v3, v4) {nullptr, nullptr}
#endif

#define HD_FOR_EACH_ITEM(L, lp)                                \
  for (unsigned hd_z = 0; hd_z < (L)->tpg.z; hd_z++)           \
    for (unsigned hd_y = 0; hd_y < (L)->tpg.y; hd_y++)         \
      for (unsigned hd_x = 0; hd_x < (L)->tpg.x; hd_x++)       \
        if (hd_u3 lp = {hd_x, hd_y, hd_z}; true)

#endif
