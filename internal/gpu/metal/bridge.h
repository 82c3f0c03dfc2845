// bridge.h: the C API of the Objective-C Metal bridge (bridge.m), called from metal_darwin.go.
//
// The bridge is task-shaped, not a mirror of Metal: open a device, load the kernel library, make
// compute pipelines, allocate shared buffers, encode dispatches and copies into command buffers
// (a batch may span several, committed in order to one queue: see mp_commit), submit and wait. It
// is compiled with ARC (-fobjc-arc).
//
// Ownership. Objective-C objects cross into Go only as pointers to the opaque types below. Every
// function that returns one (mp_context_create, mp_pipeline_create, mp_buffer_create, and
// mp_modules_build in its jobs' pipelines) hands the caller one strong reference, made with
// __bridge_retained (CFBridgingRetain); the caller gives it back exactly once with mp_release,
// which balances it with CFBridgingRelease. Every other function only borrows its handle
// arguments (__bridge casts: no retain, no release). A command buffer retains the buffers and
// pipelines it uses, so releasing a buffer with work still pending is safe.
//
// Strings. Every char* the bridge returns (error texts, the device name) is malloc'd; the caller
// frees it with mp_free. Functions that can fail return 0 on success, or -1 (or NULL) with *err set
// to the error text (an NSError's localizedDescription, or the bridge's own message naming the call).
//
// Threads. Each function drains its own autorelease pool. A context is used by one thread at a time
// (Go serialises calls); Metal objects need no particular thread. The exception is
// mp_modules_build: it uses nothing of the context but its device (set by mp_context_create, never
// changed), so it may run while another thread encodes or syncs on the same context (package gpu
// builds modules without holding the device).
#ifndef METALPROVE_BRIDGE_H
#define METALPROVE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

// MPContext: an id<MTLDevice>, its command queue, the kernel library, the command buffer being
// encoded (with at most one open encoder) and those committed since the last mp_sync.
typedef struct mp_context mp_context;
// id<MTLComputePipelineState>.
typedef struct mp_pipeline mp_pipeline;
// id<MTLBuffer> in MTLResourceStorageModeShared (unified memory: CPU and GPU see the same bytes).
typedef struct mp_buffer mp_buffer;

typedef struct {
	uint64_t max_threads_per_group;  // device.maxThreadsPerThreadgroup.width
	uint64_t max_threadgroup_memory; // device.maxThreadgroupMemoryLength (32 KiB on Apple GPUs)
	uint64_t working_set;            // device.recommendedMaxWorkingSetSize
	uint64_t max_buffer_length;      // device.maxBufferLength
	int32_t unified_memory;          // device.hasUnifiedMemory
} mp_limits;

typedef struct {
	uint32_t max_threads;       // pipeline.maxTotalThreadsPerThreadgroup
	uint32_t simd_width;        // pipeline.threadExecutionWidth
	uint32_t static_tg_memory;  // pipeline.staticThreadgroupMemoryLength
} mp_pipeline_info;

// One [[buffer(i)]] slot of a dispatch: buf for a `device/constant T*` slot (bound at offset 0), or
// value_len bytes at value_off in the dispatch's values array for a `constant T&` slot (setBytes).
// An unused slot has buf == NULL and value_len == 0.
typedef struct {
	mp_buffer *buf;
	uint32_t value_off;
	uint32_t value_len;
} mp_slot;

// MTLCreateSystemDefaultDevice and a command queue. Returns NULL with *err when there is no device.
mp_context *mp_context_create(char **err);
// device.name (malloc'd).
char *mp_device_name(mp_context *ctx);
void mp_device_limits(mp_context *ctx, mp_limits *out);

// Load the kernel library from metallib bytes (newLibraryWithData:error:, the bytes are copied), or
// compile it from MSL source (newLibraryWithSource:options:error:; *err is the compiler's log).
int mp_library_from_data(mp_context *ctx, const void *data, size_t len, char **err);
int mp_library_from_source(mp_context *ctx, const char *src, char **err);

// A compute pipeline for the library's kernel function called name.
mp_pipeline *mp_pipeline_create(mp_context *ctx, const char *name, mp_pipeline_info *info, char **err);

// One module built at run time (mp_modules_build): its MSL source and the kernels to make
// pipelines of in, the pipelines out. Every pointer is the caller's (C memory); the bridge writes
// pipelines[0..nkernels), infos[0..nkernels), seconds and err.
typedef struct {
	const char *source;          // in: the module's MSL (UTF-8)
	const char *const *kernels;  // in: names of its kernel functions
	int nkernels;                // in
	mp_pipeline **pipelines;     // out: one reference each for the caller (mp_release); all NULL when err is set
	mp_pipeline_info *infos;     // out
	double seconds;              // out: from the start of the call to this module's last pipeline (or its failure)
	char *err;                   // out: NULL, or what failed (malloc'd, mp_free): the compiler's log, or the kernel
	                             // whose pipeline failed and why
} mp_module_job;

// Build njobs modules side by side: each source is compiled into a library of its own with the
// MTLCompileOptions of mp_library_from_source (newLibraryWithSource:options:completionHandler:, all
// requested at once), then each kernel's compute pipeline is made
// (newComputePipelineStateWithFunction:completionHandler:, all requested at once). The call waits
// for every completion handler, at most timeout_seconds in all (then the jobs not done fail with
// a timeout; their late results are dropped). The libraries are released once the pipelines exist
// (a pipeline needs no library). Returns the number of jobs with err set.
int mp_modules_build(mp_context *ctx, mp_module_job *jobs, int njobs, double timeout_seconds);

// A new shared buffer of len bytes; *contents is its CPU address (stable for its lifetime).
mp_buffer *mp_buffer_create(mp_context *ctx, size_t len, void **contents, char **err);

// Encode into the current command buffer (creating it when needed: with
// MTLCommandBufferErrorOptionEncoderExecutionStatus, so that a failure says which encoder faulted,
// and labelled "metalprove command buffer N").
// mp_dispatch: a compute encoder of its own labelled "<kernel> (dispatch K of command buffer N)",
// setComputePipelineState, one setBuffer/setBytes per slot, setThreadgroupMemoryLength for each of
// tg_len[0..ntg) (rounded up to a multiple of 16), dispatchThreadgroups, endEncoding. One encoder
// per dispatch costs a little encoding time and lets a failed command buffer name its kernel.
int mp_dispatch(mp_context *ctx, mp_pipeline *p, const char *kernel, const mp_slot *slots, int nslots,
                const uint8_t *values, const uint32_t *tg_len, int ntg, const uint32_t groups[3],
                const uint32_t tpg[3], char **err);
// A blit copy of n bytes (offsets and n must be multiples of 4 on macOS); consecutive copies share
// one blit encoder.
int mp_copy(mp_context *ctx, mp_buffer *dst, size_t dst_off, mp_buffer *src, size_t src_off, size_t n, char **err);
// Commit the command buffer being encoded, if any, without waiting: the next command starts a new
// one. One queue runs its command buffers in commit order, and resources are tracked, so later
// work sees the writes of earlier work. Splitting a long batch this way keeps each command buffer
// short (macOS stops command buffers that run too long on a GPU that drives a display).
void mp_commit(mp_context *ctx);
// 1 when work has been encoded or committed since the last mp_sync.
int mp_pending(mp_context *ctx);
// Commit, wait for the last command buffer, then check every committed one in order: the first
// that failed becomes *err (its label, the NSError, and the labels of the encoders that faulted or
// were affected). *max_gpu_seconds receives the longest GPUEndTime - GPUStartTime among them.
int mp_sync(mp_context *ctx, double *max_gpu_seconds, char **err);
// 1 when the device supports MTLGPUFamily family ([MTLDevice supportsFamily:]).
int mp_device_supports_family(mp_context *ctx, int64_t family);

// Give back a reference returned by mp_context_create, mp_pipeline_create, mp_buffer_create or
// mp_modules_build (a job's pipeline).
// NULL is ignored.
void mp_release(void *obj);
// Free a string returned by the bridge. NULL is ignored.
void mp_free(void *p);

#endif
