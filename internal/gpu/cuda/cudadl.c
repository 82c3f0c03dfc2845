//go:build linux && cgo

// cudadl.c - run-time binding of the CUDA driver API and NVRTC (see cudadl.h).
#include "cudadl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// Driver API entry points. Where cuda.h maps a name to a versioned symbol (#define cuMemAlloc
// cuMemAlloc_v2, ...), the versioned symbol is the one looked up.
struct mp_cu {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  // optional: launches with attributes, since CUDA 12.0
  CUresult (*cuLaunchKernelEx)(const mp_launch_config*, CUfunction, void**, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // optional: stream-ordered allocation, since CUDA 11.2
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, int, void*);
  CUresult (*cuMemPoolGetAttribute)(CUmemoryPool, int, void*);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
  // optional: the context's limits (cuda.h, enum CUlimit: CU_LIMIT_STACK_SIZE 0)
  CUresult (*cuCtxSetLimit)(int, size_t);
  CUresult (*cuCtxGetLimit)(size_t*, int);
  // optional: pinned staging of uploads
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  // optional: the linker of relocatable device code (cuda.h: CUlinkState is an opaque pointer,
  // CUjit_option and CUjitInputType are enums)
  CUresult (*cuLinkCreate)(unsigned, int*, void**, void**);
  CUresult (*cuLinkAddData)(void*, int, void*, size_t, const char*, unsigned, int*, void**);
  CUresult (*cuLinkComplete)(void*, void**, size_t*);
  CUresult (*cuLinkDestroy)(void*);
};

struct mp_rtc {
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcVersion)(int*, int*);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  // optional: CUBIN output since NVRTC 11.1, the list of architectures since 11.2
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
  nvrtcResult (*nvrtcGetSupportedArchs)(int*);
};

static struct mp_cu cu;
static struct mp_rtc rtc;

static void set_err(char* err, int errlen, const char* msg) {
  if (errlen <= 0) return;
  strncpy(err, msg ? msg : "unknown error", (size_t)errlen - 1);
  err[errlen - 1] = 0;
}

#define SYM(tbl, field, name)                         \
  do {                                                \
    *(void**)(&(tbl).field) = dlsym(h, name);         \
    if (!(tbl).field) {                               \
      set_err(err, errlen, name);                     \
      dlclose(h);                                     \
      return 2;                                       \
    }                                                 \
  } while (0)
#define OPT(tbl, field, name) (*(void**)(&(tbl).field) = dlsym(h, name))

int mp_cu_load(const char* name, char* err, int errlen) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    set_err(err, errlen, dlerror());
    return 1;
  }
  struct mp_cu t;
  memset(&t, 0, sizeof t);
  SYM(t, cuInit, "cuInit");
  SYM(t, cuDriverGetVersion, "cuDriverGetVersion");
  SYM(t, cuDeviceGetCount, "cuDeviceGetCount");
  SYM(t, cuDeviceGet, "cuDeviceGet");
  SYM(t, cuDeviceGetName, "cuDeviceGetName");
  SYM(t, cuDeviceGetAttribute, "cuDeviceGetAttribute");
  SYM(t, cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  SYM(t, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(t, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  SYM(t, cuCtxSetCurrent, "cuCtxSetCurrent");
  SYM(t, cuModuleLoadData, "cuModuleLoadData");
  SYM(t, cuModuleUnload, "cuModuleUnload");
  SYM(t, cuModuleGetFunction, "cuModuleGetFunction");
  SYM(t, cuFuncSetAttribute, "cuFuncSetAttribute");
  SYM(t, cuFuncGetAttribute, "cuFuncGetAttribute");
  SYM(t, cuMemAlloc, "cuMemAlloc_v2");
  SYM(t, cuMemFree, "cuMemFree_v2");
  SYM(t, cuMemGetInfo, "cuMemGetInfo_v2");
  SYM(t, cuMemsetD8, "cuMemsetD8_v2");
  SYM(t, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  SYM(t, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  SYM(t, cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  SYM(t, cuStreamCreate, "cuStreamCreate");
  SYM(t, cuStreamDestroy, "cuStreamDestroy_v2");
  SYM(t, cuStreamSynchronize, "cuStreamSynchronize");
  SYM(t, cuLaunchKernel, "cuLaunchKernel");
  SYM(t, cuGetErrorName, "cuGetErrorName");
  SYM(t, cuGetErrorString, "cuGetErrorString");
  OPT(t, cuLaunchKernelEx, "cuLaunchKernelEx");
  OPT(t, cuMemAllocAsync, "cuMemAllocAsync");
  OPT(t, cuMemFreeAsync, "cuMemFreeAsync");
  OPT(t, cuMemsetD8Async, "cuMemsetD8Async");
  OPT(t, cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
  OPT(t, cuMemPoolSetAttribute, "cuMemPoolSetAttribute");
  OPT(t, cuMemPoolGetAttribute, "cuMemPoolGetAttribute");
  OPT(t, cuMemPoolTrimTo, "cuMemPoolTrimTo");
  OPT(t, cuCtxSetLimit, "cuCtxSetLimit");
  OPT(t, cuCtxGetLimit, "cuCtxGetLimit");
  OPT(t, cuMemHostAlloc, "cuMemHostAlloc");
  OPT(t, cuMemFreeHost, "cuMemFreeHost");
  OPT(t, cuEventCreate, "cuEventCreate");
  OPT(t, cuEventDestroy, "cuEventDestroy_v2");
  OPT(t, cuEventRecord, "cuEventRecord");
  OPT(t, cuEventSynchronize, "cuEventSynchronize");
  OPT(t, cuLinkCreate, "cuLinkCreate_v2");
  OPT(t, cuLinkAddData, "cuLinkAddData_v2");
  OPT(t, cuLinkComplete, "cuLinkComplete");
  OPT(t, cuLinkDestroy, "cuLinkDestroy");
  cu = t;  // the library stays loaded for the life of the process
  return 0;
}

int mp_rtc_load(const char* name, char* err, int errlen) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    set_err(err, errlen, dlerror());
    return 1;
  }
  struct mp_rtc t;
  memset(&t, 0, sizeof t);
  SYM(t, nvrtcGetErrorString, "nvrtcGetErrorString");
  SYM(t, nvrtcVersion, "nvrtcVersion");
  SYM(t, nvrtcCreateProgram, "nvrtcCreateProgram");
  SYM(t, nvrtcDestroyProgram, "nvrtcDestroyProgram");
  SYM(t, nvrtcCompileProgram, "nvrtcCompileProgram");
  SYM(t, nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  SYM(t, nvrtcGetProgramLog, "nvrtcGetProgramLog");
  SYM(t, nvrtcGetPTXSize, "nvrtcGetPTXSize");
  SYM(t, nvrtcGetPTX, "nvrtcGetPTX");
  OPT(t, nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  OPT(t, nvrtcGetCUBIN, "nvrtcGetCUBIN");
  OPT(t, nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  OPT(t, nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs");
  rtc = t;
  return 0;
}

int mp_rtc_has_cubin(void) { return rtc.nvrtcGetCUBIN != NULL && rtc.nvrtcGetCUBINSize != NULL; }
int mp_rtc_has_archs(void) {
  return rtc.nvrtcGetNumSupportedArchs != NULL && rtc.nvrtcGetSupportedArchs != NULL;
}

CUresult mp_cu_init(void) { return cu.cuInit(0); }
CUresult mp_cu_driver_version(int* v) { return cu.cuDriverGetVersion(v); }
CUresult mp_cu_device_count(int* n) { return cu.cuDeviceGetCount(n); }
CUresult mp_cu_device_get(CUdevice* d, int ordinal) { return cu.cuDeviceGet(d, ordinal); }
CUresult mp_cu_device_name(char* name, int len, CUdevice d) { return cu.cuDeviceGetName(name, len, d); }
CUresult mp_cu_device_attr(int* v, int attr, CUdevice d) { return cu.cuDeviceGetAttribute(v, attr, d); }
CUresult mp_cu_device_total_mem(size_t* bytes, CUdevice d) { return cu.cuDeviceTotalMem(bytes, d); }
CUresult mp_cu_primary_ctx_retain(CUcontext* ctx, CUdevice d) { return cu.cuDevicePrimaryCtxRetain(ctx, d); }
CUresult mp_cu_primary_ctx_release(CUdevice d) { return cu.cuDevicePrimaryCtxRelease(d); }

#define CTX(ctx)                            \
  do {                                      \
    CUresult r_ = cu.cuCtxSetCurrent(ctx);  \
    if (r_ != MP_CUDA_SUCCESS) return r_;   \
  } while (0)

CUresult mp_cu_stream_create(CUcontext ctx, CUstream* s) {
  CTX(ctx);
  return cu.cuStreamCreate(s, MP_CU_STREAM_DEFAULT);
}
CUresult mp_cu_stream_create_nonblocking(CUcontext ctx, CUstream* s) {
  CTX(ctx);
  return cu.cuStreamCreate(s, MP_CU_STREAM_NON_BLOCKING);
}
CUresult mp_cu_mem_get_info(CUcontext ctx, size_t* free_bytes, size_t* total_bytes) {
  CTX(ctx);
  return cu.cuMemGetInfo(free_bytes, total_bytes);
}
CUresult mp_cu_stream_destroy(CUcontext ctx, CUstream s) {
  CTX(ctx);
  return cu.cuStreamDestroy(s);
}
CUresult mp_cu_stream_sync(CUcontext ctx, CUstream s) {
  CTX(ctx);
  return cu.cuStreamSynchronize(s);
}
CUresult mp_cu_module_load(CUcontext ctx, CUmodule* m, const void* image) {
  CTX(ctx);
  return cu.cuModuleLoadData(m, image);
}
int mp_cu_has_link(void) {
  return cu.cuLinkCreate != NULL && cu.cuLinkAddData != NULL && cu.cuLinkComplete != NULL && cu.cuLinkDestroy != NULL;
}

// cuda.h, enum CUjit_option_enum: CU_JIT_ERROR_LOG_BUFFER 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6.
CUresult mp_cu_link(CUcontext ctx, int n, const void* const* images, const size_t* sizes, int ptx, void** out,
                    size_t* out_size, char* log, size_t loglen) {
  *out = NULL;
  *out_size = 0;
  if (loglen > 0) log[0] = 0;
  if (!mp_cu_has_link()) return MP_CUDA_ERROR_NOT_SUPPORTED;
  CTX(ctx);
  int opts[2] = {5, 6};
  void* vals[2] = {log, (void*)(size_t)loglen};
  void* state = NULL;
  CUresult r = cu.cuLinkCreate(loglen > 0 ? 2u : 0u, opts, vals, &state);
  if (r != MP_CUDA_SUCCESS) return r;
  for (int i = 0; i < n && r == MP_CUDA_SUCCESS; i++) {
    r = cu.cuLinkAddData(state, ptx ? 1 : 0, (void*)images[i], sizes[i], "unit", 0, NULL, NULL);
  }
  void* cubin = NULL;
  size_t size = 0;
  if (r == MP_CUDA_SUCCESS) r = cu.cuLinkComplete(state, &cubin, &size);
  if (r == MP_CUDA_SUCCESS) {
    *out = malloc(size);
    if (*out == NULL) {
      r = MP_CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      memcpy(*out, cubin, size);
      *out_size = size;
    }
  }
  cu.cuLinkDestroy(state);
  return r;
}

CUresult mp_cu_module_unload(CUcontext ctx, CUmodule m) {
  CTX(ctx);
  return cu.cuModuleUnload(m);
}
CUresult mp_cu_module_function(CUcontext ctx, CUfunction* f, CUmodule m, const char* name) {
  CTX(ctx);
  return cu.cuModuleGetFunction(f, m, name);
}
CUresult mp_cu_func_max_dyn_smem(CUcontext ctx, CUfunction f, int bytes) {
  CTX(ctx);
  return cu.cuFuncSetAttribute(f, MP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}
CUresult mp_cu_func_attr(CUcontext ctx, int* v, int attr, CUfunction f) {
  CTX(ctx);
  return cu.cuFuncGetAttribute(v, attr, f);
}
CUresult mp_cu_alloc_zeroed(CUcontext ctx, CUdeviceptr* p, size_t n, int zero, int* stage) {
  *stage = 0;
  CTX(ctx);
  CUresult r = cu.cuMemAlloc(p, n);
  if (r != MP_CUDA_SUCCESS || !zero) return r;
  *stage = 1;
  r = cu.cuMemsetD8(*p, 0, n);
  if (r != MP_CUDA_SUCCESS) {
    cu.cuMemFree(*p);
    *p = 0;
  }
  return r;
}
CUresult mp_cu_free(CUcontext ctx, CUdeviceptr p) {
  CTX(ctx);
  return cu.cuMemFree(p);
}
int mp_cu_has_pools(void) {
  return cu.cuMemAllocAsync && cu.cuMemFreeAsync && cu.cuMemsetD8Async &&
         cu.cuDeviceGetDefaultMemPool && cu.cuMemPoolSetAttribute && cu.cuMemPoolGetAttribute &&
         cu.cuMemPoolTrimTo;
}
CUresult mp_cu_pool_setup(CUcontext ctx, CUdevice d, CUmemoryPool* pool) {
  CTX(ctx);
  CUresult r = cu.cuDeviceGetDefaultMemPool(pool, d);
  if (r != MP_CUDA_SUCCESS) return r;
  unsigned long long keep = ~0ull;
  return cu.cuMemPoolSetAttribute(*pool, MP_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
}
CUresult mp_cu_stack_limit(CUcontext ctx, size_t want, size_t* got) {
  *got = 0;
  if (cu.cuCtxSetLimit == NULL || cu.cuCtxGetLimit == NULL) return MP_CUDA_ERROR_NOT_SUPPORTED;
  CTX(ctx);
  CUresult r = cu.cuCtxSetLimit(0, want);
  if (r != MP_CUDA_SUCCESS) return r;
  return cu.cuCtxGetLimit(got, 0);
}
CUresult mp_cu_pool_unused(CUcontext ctx, CUmemoryPool pool, unsigned long long* bytes) {
  CTX(ctx);
  unsigned long long reserved = 0, used = 0;
  CUresult r = cu.cuMemPoolGetAttribute(pool, MP_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
  if (r != MP_CUDA_SUCCESS) return r;
  r = cu.cuMemPoolGetAttribute(pool, MP_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
  if (r != MP_CUDA_SUCCESS) return r;
  *bytes = reserved > used ? reserved - used : 0;
  return MP_CUDA_SUCCESS;
}
CUresult mp_cu_pool_trim(CUcontext ctx, CUmemoryPool pool) {
  CTX(ctx);
  return cu.cuMemPoolTrimTo(pool, 0);
}
// The pool's high-water marks since its creation or their last reset: bytes handed out to
// allocations (used) and bytes the pool held from the driver (reserved).
CUresult mp_cu_pool_peak(CUcontext ctx, CUmemoryPool pool, unsigned long long* used, unsigned long long* reserved) {
  CTX(ctx);
  CUresult r = cu.cuMemPoolGetAttribute(pool, MP_CU_MEMPOOL_ATTR_USED_MEM_HIGH, used);
  if (r != MP_CUDA_SUCCESS) return r;
  return cu.cuMemPoolGetAttribute(pool, MP_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, reserved);
}
// Resets both high-water marks to the current values (the driver takes 0 only).
CUresult mp_cu_pool_peak_reset(CUcontext ctx, CUmemoryPool pool) {
  CTX(ctx);
  unsigned long long zero = 0;
  CUresult r = cu.cuMemPoolSetAttribute(pool, MP_CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero);
  if (r != MP_CUDA_SUCCESS) return r;
  return cu.cuMemPoolSetAttribute(pool, MP_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);
}
CUresult mp_cu_alloc_async_zeroed(CUcontext ctx, CUstream s, CUdeviceptr* p, size_t n, int zero, int* stage) {
  *stage = 0;
  CTX(ctx);
  CUresult r = cu.cuMemAllocAsync(p, n, s);
  if (r != MP_CUDA_SUCCESS || !zero) return r;
  *stage = 1;
  r = cu.cuMemsetD8Async(*p, 0, n, s);
  if (r != MP_CUDA_SUCCESS) {
    cu.cuMemFreeAsync(*p, s);
    *p = 0;
  }
  return r;
}
CUresult mp_cu_free_async(CUcontext ctx, CUstream s, CUdeviceptr p) {
  CTX(ctx);
  return cu.cuMemFreeAsync(p, s);
}
int mp_cu_has_staging(void) {
  return cu.cuMemHostAlloc && cu.cuMemFreeHost && cu.cuEventCreate && cu.cuEventDestroy &&
         cu.cuEventRecord && cu.cuEventSynchronize;
}
CUresult mp_cu_host_alloc(CUcontext ctx, void** p, size_t n) {
  CTX(ctx);
  return cu.cuMemHostAlloc(p, n, 0);
}
CUresult mp_cu_host_free(CUcontext ctx, void* p) {
  CTX(ctx);
  return cu.cuMemFreeHost(p);
}
CUresult mp_cu_event_create(CUcontext ctx, CUevent* e) {
  CTX(ctx);
  return cu.cuEventCreate(e, 2 /* CU_EVENT_DISABLE_TIMING */);
}
CUresult mp_cu_event_destroy(CUcontext ctx, CUevent e) {
  CTX(ctx);
  return cu.cuEventDestroy(e);
}
CUresult mp_cu_event_sync(CUcontext ctx, CUevent e) {
  CTX(ctx);
  return cu.cuEventSynchronize(e);
}
CUresult mp_cu_upload_record(CUcontext ctx, CUstream s, CUdeviceptr dst, const void* src, size_t n, CUevent e, int* stage) {
  *stage = 0;
  CTX(ctx);
  CUresult r = cu.cuMemcpyHtoDAsync(dst, src, n, s);
  if (r != MP_CUDA_SUCCESS) return r;
  *stage = 1;
  return cu.cuEventRecord(e, s);
}
// Upload and Download wait for the copy: the host memory is Go's, valid only during the call.
CUresult mp_cu_upload(CUcontext ctx, CUstream s, CUdeviceptr dst, const void* src, size_t n, int* stage) {
  *stage = 0;
  CTX(ctx);
  CUresult r = cu.cuMemcpyHtoDAsync(dst, src, n, s);
  if (r != MP_CUDA_SUCCESS) return r;
  *stage = 1;
  return cu.cuStreamSynchronize(s);
}
CUresult mp_cu_download(CUcontext ctx, CUstream s, void* dst, CUdeviceptr src, size_t n, int* stage) {
  *stage = 0;
  CTX(ctx);
  CUresult r = cu.cuMemcpyDtoHAsync(dst, src, n, s);
  if (r != MP_CUDA_SUCCESS) return r;
  *stage = 1;
  return cu.cuStreamSynchronize(s);
}
CUresult mp_cu_copy(CUcontext ctx, CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  CTX(ctx);
  return cu.cuMemcpyDtoDAsync(dst, src, n, s);
}
// The parameter values lie in blob at offs[i]; cuLaunchKernel copies them before returning.
// The layouts of cuda.h's CUlaunchAttribute and CUlaunchConfig on LP64 hosts.
_Static_assert(sizeof(mp_launch_attribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(offsetof(mp_launch_attribute, value) == 8, "CUlaunchAttribute.value at 8");
_Static_assert(offsetof(mp_launch_config, hStream) == 32, "CUlaunchConfig.hStream at 32");
_Static_assert(offsetof(mp_launch_config, attrs) == 40, "CUlaunchConfig.attrs at 40");
_Static_assert(offsetof(mp_launch_config, numAttrs) == 48, "CUlaunchConfig.numAttrs at 48");
int mp_cu_has_launch_ex(void) { return cu.cuLaunchKernelEx != NULL; }
CUresult mp_cu_launch(CUcontext ctx, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned tx, unsigned ty, unsigned tz, unsigned smem, CUstream s,
                      unsigned char* blob, const unsigned* offs, int nparams, int ordered) {
  void* params[MP_MAX_PARAMS + 1];
  if (nparams < 0 || nparams > MP_MAX_PARAMS) return MP_CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < nparams; i++) params[i] = blob + offs[i];
  params[nparams] = NULL;
  CTX(ctx);
  if (ordered && cu.cuLaunchKernelEx) {
    mp_launch_attribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = MP_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    mp_launch_config cfg = {gx, gy, gz, tx, ty, tz, smem, s, &attr, 1};
    return cu.cuLaunchKernelEx(&cfg, f, params, NULL);
  }
  return cu.cuLaunchKernel(f, gx, gy, gz, tx, ty, tz, smem, s, params, NULL);
}
const char* mp_cu_error_name(CUresult r) {
  const char* s = NULL;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(r, &s) != MP_CUDA_SUCCESS) return NULL;
  return s;
}
const char* mp_cu_error_string(CUresult r) {
  const char* s = NULL;
  if (!cu.cuGetErrorString || cu.cuGetErrorString(r, &s) != MP_CUDA_SUCCESS) return NULL;
  return s;
}

const char* mp_rtc_error_string(nvrtcResult r) { return rtc.nvrtcGetErrorString(r); }
nvrtcResult mp_rtc_version(int* major, int* minor) { return rtc.nvrtcVersion(major, minor); }
nvrtcResult mp_rtc_supported_archs(int* archs, int max, int* n) {
  *n = 0;
  if (!mp_rtc_has_archs()) return 0;
  int k = 0;
  nvrtcResult r = rtc.nvrtcGetNumSupportedArchs(&k);
  if (r != 0 || k <= 0) return r;
  int* all = (int*)malloc(sizeof(int) * (size_t)k);
  if (!all) return 0;
  r = rtc.nvrtcGetSupportedArchs(all);
  if (r == 0) {
    if (k > max) k = max;
    memcpy(archs, all, sizeof(int) * (size_t)k);
    *n = k;
  }
  free(all);
  return r;
}
nvrtcResult mp_rtc_compile(const char* src, const char* name, const char* const* opts, int nopts,
                           nvrtcProgram* prog, int* stage) {
  *stage = 0;
  nvrtcResult r = rtc.nvrtcCreateProgram(prog, src, name, 0, NULL, NULL);
  if (r != 0) return r;
  *stage = 1;
  return rtc.nvrtcCompileProgram(*prog, nopts, opts);
}
nvrtcResult mp_rtc_log(nvrtcProgram prog, char** log, size_t* n) {
  *log = NULL;
  *n = 0;
  size_t k = 0;
  nvrtcResult r = rtc.nvrtcGetProgramLogSize(prog, &k);
  if (r != 0) return r;
  char* buf = (char*)malloc(k + 1);
  if (!buf) return 0;
  r = rtc.nvrtcGetProgramLog(prog, buf);
  if (r != 0) {
    free(buf);
    return r;
  }
  buf[k] = 0;
  *log = buf;
  *n = strlen(buf);
  return 0;
}
nvrtcResult mp_rtc_output(nvrtcProgram prog, int cubin, char** out, size_t* n) {
  *out = NULL;
  *n = 0;
  size_t k = 0;
  nvrtcResult r = cubin ? rtc.nvrtcGetCUBINSize(prog, &k) : rtc.nvrtcGetPTXSize(prog, &k);
  if (r != 0) return r;
  char* buf = (char*)malloc(k ? k : 1);
  if (!buf) return 0;
  r = cubin ? rtc.nvrtcGetCUBIN(prog, buf) : rtc.nvrtcGetPTX(prog, buf);
  if (r != 0) {
    free(buf);
    return r;
  }
  *out = buf;
  *n = k;
  return 0;
}
void mp_rtc_destroy(nvrtcProgram prog) { rtc.nvrtcDestroyProgram(&prog); }
