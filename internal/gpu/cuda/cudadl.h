//go:build linux && cgo

// cudadl.h - the CUDA driver API and NVRTC, loaded at run time with dlopen, so that building
// metalprove needs no CUDA toolkit. Only the few types and functions the cuda backend calls are
// declared here; their values come from the CUDA 12/13 headers (cuda.h, nvrtc.h), as cited.
#ifndef METALPROVE_CUDADL_H
#define METALPROVE_CUDADL_H

#include <stddef.h>

// cuda.h: typedef enum cudaError_enum {...} CUresult; typedef int CUdevice (CUdevice_v1);
// opaque handles; typedef unsigned long long CUdeviceptr_v2 on 64-bit hosts.
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUevent_st* CUevent;

// cuda.h, enum cudaError_enum
#define MP_CUDA_SUCCESS 0
#define MP_CUDA_ERROR_INVALID_VALUE 1
#define MP_CUDA_ERROR_OUT_OF_MEMORY 2
#define MP_CUDA_ERROR_NO_DEVICE 100
#define MP_CUDA_ERROR_NOT_SUPPORTED 801
// cuda.h, enum CUdevice_attribute_enum
#define MP_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define MP_CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define MP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define MP_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define MP_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED 115
// cuda.h, enum CUmemPool_attribute_enum
#define MP_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define MP_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define MP_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define MP_CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#define MP_CU_MEMPOOL_ATTR_USED_MEM_HIGH 8
// cuda.h, enum CUfunction_attribute_enum
#define MP_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define MP_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define MP_CU_FUNC_ATTRIBUTE_PTX_VERSION 5
#define MP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
// cuda.h, enum CUstream_flags_enum: CU_STREAM_DEFAULT = 0x0 (synchronises with the legacy
// default stream, so cuMemsetD8 on it is ordered before later work on ours)
#define MP_CU_STREAM_DEFAULT 0
// CU_STREAM_NON_BLOCKING = 0x1: no synchronisation with the legacy default stream (the second
// stream of settled downloads, which must not wait for anything)
#define MP_CU_STREAM_NON_BLOCKING 1
// cuda.h, enum CUlaunchAttributeID_enum
#define MP_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

// cuda.h (CUDA 12.0+): CUlaunchAttribute_st (the ID, padding to 8 bytes, a 64-byte value union)
// and CUlaunchConfig_st, for cuLaunchKernelEx. Only the member used here is named in the union.
typedef struct {
  int id;
  char pad[4];
  union {
    char pad[64];
    int programmaticStreamSerializationAllowed;
  } value;
} mp_launch_attribute;
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  mp_launch_attribute* attrs;
  unsigned numAttrs;
} mp_launch_config;

// The most kernel parameters one launch may pass (buffer slots + threadgroup offsets).
#define MP_MAX_PARAMS 256

// nvrtc.h
typedef int nvrtcResult;  // enum nvrtcResult; NVRTC_SUCCESS = 0
typedef struct _nvrtcProgram* nvrtcProgram;

// Loading. Each returns 0 on success; 1 if the library cannot be opened, 2 if a required symbol
// is missing; err receives dlerror's text or the symbol's name. A failed load changes nothing.
int mp_cu_load(const char* name, char* err, int errlen);
int mp_rtc_load(const char* name, char* err, int errlen);
int mp_rtc_has_cubin(void);
int mp_rtc_has_archs(void);

// Driver API (each call first makes ctx current on the calling thread: goroutines move).
CUresult mp_cu_init(void);
CUresult mp_cu_driver_version(int* v);
CUresult mp_cu_device_count(int* n);
CUresult mp_cu_device_get(CUdevice* d, int ordinal);
CUresult mp_cu_device_name(char* name, int len, CUdevice d);
CUresult mp_cu_device_attr(int* v, int attr, CUdevice d);
CUresult mp_cu_device_total_mem(size_t* bytes, CUdevice d);
CUresult mp_cu_primary_ctx_retain(CUcontext* ctx, CUdevice d);
CUresult mp_cu_primary_ctx_release(CUdevice d);
CUresult mp_cu_mem_get_info(CUcontext ctx, size_t* free_bytes, size_t* total_bytes);
CUresult mp_cu_stream_create(CUcontext ctx, CUstream* s);
CUresult mp_cu_stream_create_nonblocking(CUcontext ctx, CUstream* s);
CUresult mp_cu_stream_destroy(CUcontext ctx, CUstream s);
CUresult mp_cu_stream_sync(CUcontext ctx, CUstream s);
CUresult mp_cu_module_load(CUcontext ctx, CUmodule* m, const void* image);
// Links n relocatable images (cubin, or PTX when ptx is set: cuda.h CUjitInputType
// CU_JIT_INPUT_CUBIN 0, CU_JIT_INPUT_PTX 1) into one cubin with the driver's linker
// (cuLinkCreate_v2, cuLinkAddData_v2, cuLinkComplete, cuLinkDestroy), copied to *out (malloc'd;
// the caller frees it). On failure the linker's error log is in log. Returns
// MP_CUDA_ERROR_NOT_SUPPORTED when this driver has no linker.
CUresult mp_cu_link(CUcontext ctx, int n, const void* const* images, const size_t* sizes, int ptx, void** out,
                    size_t* out_size, char* log, size_t loglen);
int mp_cu_has_link(void);
CUresult mp_cu_module_unload(CUcontext ctx, CUmodule m);
CUresult mp_cu_module_function(CUcontext ctx, CUfunction* f, CUmodule m, const char* name);
CUresult mp_cu_func_max_dyn_smem(CUcontext ctx, CUfunction f, int bytes);
CUresult mp_cu_func_attr(CUcontext ctx, int* v, int attr, CUfunction f);
// zero: clear the buffer after allocating it (0: leave its contents unspecified).
CUresult mp_cu_alloc_zeroed(CUcontext ctx, CUdeviceptr* p, size_t n, int zero, int* stage);
CUresult mp_cu_free(CUcontext ctx, CUdeviceptr p);
// Stream-ordered allocation (driver API 11.2+; optional symbols): mp_cu_has_pools says whether
// the driver has them; mp_cu_pool_setup takes the device's default pool and makes it keep freed
// memory (release threshold: all), so that allocating and freeing inside a proof neither calls
// the OS nor synchronises the device, as cuMemAlloc/cuMemFree do.
// mp_cu_stack_limit sets the context's per-thread stack size (CU_LIMIT_STACK_SIZE) to want bytes
// and reads back the size set (got); MP_CUDA_ERROR_NOT_SUPPORTED without cuCtxSetLimit.
CUresult mp_cu_stack_limit(CUcontext ctx, size_t want, size_t* got);
int mp_cu_has_pools(void);
CUresult mp_cu_pool_setup(CUcontext ctx, CUdevice d, CUmemoryPool* pool);
CUresult mp_cu_pool_unused(CUcontext ctx, CUmemoryPool pool, unsigned long long* bytes);
CUresult mp_cu_pool_trim(CUcontext ctx, CUmemoryPool pool);
CUresult mp_cu_pool_peak(CUcontext ctx, CUmemoryPool pool, unsigned long long* used, unsigned long long* reserved);
CUresult mp_cu_pool_peak_reset(CUcontext ctx, CUmemoryPool pool);
CUresult mp_cu_alloc_async_zeroed(CUcontext ctx, CUstream s, CUdeviceptr* p, size_t n, int zero, int* stage);
CUresult mp_cu_free_async(CUcontext ctx, CUstream s, CUdeviceptr p);
// Pinned host memory and events (optional symbols), for uploads staged through pinned buffers:
// the driver copies pageable memory at a fraction of the bus's rate.
int mp_cu_has_staging(void);
CUresult mp_cu_host_alloc(CUcontext ctx, void** p, size_t n);
CUresult mp_cu_host_free(CUcontext ctx, void* p);
CUresult mp_cu_event_create(CUcontext ctx, CUevent* e);
CUresult mp_cu_event_destroy(CUcontext ctx, CUevent e);
CUresult mp_cu_event_sync(CUcontext ctx, CUevent e);
// mp_cu_upload_record enqueues the copy of n bytes of pinned src to dst and records e after it;
// it does not wait.
CUresult mp_cu_upload_record(CUcontext ctx, CUstream s, CUdeviceptr dst, const void* src, size_t n, CUevent e, int* stage);
CUresult mp_cu_upload(CUcontext ctx, CUstream s, CUdeviceptr dst, const void* src, size_t n, int* stage);
CUresult mp_cu_download(CUcontext ctx, CUstream s, void* dst, CUdeviceptr src, size_t n, int* stage);
CUresult mp_cu_copy(CUcontext ctx, CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n);
// mp_cu_launch launches f on s. With ordered set (and cuLaunchKernelEx present: mp_cu_has_launch_ex)
// the launch allows programmatic stream serialization (sm_90+): f's groups may become resident
// before the previous kernel on s has finished, so f must begin with griddepcontrol.wait (the
// CUDA glue's msl_grid_order). Without it, a plain cuLaunchKernel.
int mp_cu_has_launch_ex(void);
CUresult mp_cu_launch(CUcontext ctx, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned tx, unsigned ty, unsigned tz, unsigned smem, CUstream s,
                      unsigned char* blob, const unsigned* offs, int nparams, int ordered);
const char* mp_cu_error_name(CUresult r);
const char* mp_cu_error_string(CUresult r);

// NVRTC
const char* mp_rtc_error_string(nvrtcResult r);
nvrtcResult mp_rtc_version(int* major, int* minor);
nvrtcResult mp_rtc_supported_archs(int* archs, int max, int* n);
nvrtcResult mp_rtc_compile(const char* src, const char* name, const char* const* opts, int nopts,
                           nvrtcProgram* prog, int* stage);
nvrtcResult mp_rtc_log(nvrtcProgram prog, char** log, size_t* n);
nvrtcResult mp_rtc_output(nvrtcProgram prog, int cubin, char** out, size_t* n);
void mp_rtc_destroy(nvrtcProgram prog);

#endif
