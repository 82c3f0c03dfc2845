//go:build darwin && cgo

// bridge.m: the Objective-C side of the Metal backend. See bridge.h for the API and the ownership
// rules. Compiled with -fobjc-arc -Wall by cgo on macOS (no -Werror in shipped flags: a newer SDK's
// new warning must not break a user's build); checked with -Werror by
// scripts/check-metal.sh, against the macOS SDK on a Mac and the stub headers in stubs/ elsewhere.

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include <dispatch/dispatch.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

NS_ASSUME_NONNULL_BEGIN

@interface MPContext : NSObject {
@public
	id<MTLDevice> device;
	id<MTLCommandQueue> queue;
	id<MTLLibrary> _Nullable library;
	// The command buffer being encoded, with at most one open encoder (a blit encoder: every
	// dispatch has a compute encoder of its own, ended at once).
	id<MTLCommandBuffer> _Nullable cmd;
	id<MTLBlitCommandEncoder> _Nullable blit;
	// Committed since the last mp_sync, in commit order.
	NSMutableArray<id<MTLCommandBuffer>> *committed;
	// For labels: command buffers made, commands encoded into cmd.
	unsigned long long ncmdbufs, ncommands;
}
@end

@implementation MPContext
@end

NS_ASSUME_NONNULL_END

static char *mp_strdup(const char *s) {
	if (s == NULL) {
		s = "(no description)";
	}
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d != NULL) {
		memcpy(d, s, n);
	}
	return d;
}

// set_err stores "what: description" in *err (NSError's localizedDescription when there is one).
static void set_err(char **err, const char *what, NSError *_Nullable e) {
	if (err == NULL) {
		return;
	}
	if (e == nil) {
		*err = mp_strdup(what);
		return;
	}
	NSString *s = [NSString stringWithFormat:@"%s: %@ (%@ %ld)", what, e.localizedDescription, e.domain, (long)e.code];
	*err = mp_strdup(s.UTF8String);
}

static MPContext *ctx_of(mp_context *c) { return (__bridge MPContext *)(void *)c; }

// end_encoders ends the open encoder, if any.
static void end_encoders(MPContext *c) {
	if (c->blit != nil) {
		[c->blit endEncoding];
		c->blit = nil;
	}
}

static int ensure_cmd(MPContext *c, char **err) {
	if (c->cmd == nil) {
		MTLCommandBufferDescriptor *d = [[MTLCommandBufferDescriptor alloc] init];
		// Retained references (the default) make Free during a batch safe; the execution status of
		// every encoder lets a failure name the kernel that faulted.
		d.retainedReferences = YES;
		d.errorOptions = MTLCommandBufferErrorOptionEncoderExecutionStatus;
		c->cmd = [c->queue commandBufferWithDescriptor:d];
		if (c->cmd == nil) {
			set_err(err, "[MTLCommandQueue commandBufferWithDescriptor:] returned nil", nil);
			return -1;
		}
		c->ncmdbufs++;
		c->ncommands = 0;
		c->cmd.label = [NSString stringWithFormat:@"metalprove command buffer %llu", c->ncmdbufs];
	}
	return 0;
}

static const char *encoder_state(MTLCommandEncoderErrorState s) {
	switch (s) {
	case MTLCommandEncoderErrorStateCompleted:
		return "completed";
	case MTLCommandEncoderErrorStateAffected:
		return "affected";
	case MTLCommandEncoderErrorStatePending:
		return "not run";
	case MTLCommandEncoderErrorStateFaulted:
		return "FAULTED";
	default:
		return "unknown";
	}
}

// set_cb_err describes a command buffer that did not complete: its label, status and error, and
// the encoders (each labelled with its kernel) that faulted or were affected, from the
// MTLCommandBufferEncoderInfo records that MTLCommandBufferErrorOptionEncoderExecutionStatus asks for.
static void set_cb_err(char **err, id<MTLCommandBuffer> cb) {
	NSError *e = cb.error;
	NSString *s = [NSString stringWithFormat:@"%@ ended in status %ld", cb.label, (long)cb.status];
	if (e != nil) {
		s = [NSString stringWithFormat:@"%@: %@ (%@ %ld)", s, e.localizedDescription, e.domain, (long)e.code];
		id infos = e.userInfo[MTLCommandBufferEncoderInfoErrorKey];
		if ([infos isKindOfClass:[NSArray class]]) {
			NSArray *a = (NSArray *)infos;
			for (NSUInteger i = 0; i < a.count; i++) {
				id<MTLCommandBufferEncoderInfo> info = a[i];
				if (info.errorState == MTLCommandEncoderErrorStateFaulted ||
				    info.errorState == MTLCommandEncoderErrorStateAffected) {
					s = [NSString stringWithFormat:@"%@; %s: %@", s, encoder_state(info.errorState), info.label];
				}
			}
		}
	}
	*err = mp_strdup(s.UTF8String);
}

mp_context *mp_context_create(char **err) {
	@autoreleasepool {
		id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
		if (dev == nil) {
			set_err(err, "MTLCreateSystemDefaultDevice returned nil: no Metal device", nil);
			return NULL;
		}
		id<MTLCommandQueue> q = [dev newCommandQueue];
		if (q == nil) {
			set_err(err, "[MTLDevice newCommandQueue] returned nil", nil);
			return NULL;
		}
		MPContext *c = [[MPContext alloc] init];
		c->device = dev;
		c->queue = q;
		c->committed = [NSMutableArray array];
		return (__bridge_retained void *)c;
	}
}

char *mp_device_name(mp_context *ctx) {
	@autoreleasepool {
		return mp_strdup(ctx_of(ctx)->device.name.UTF8String);
	}
}

void mp_device_limits(mp_context *ctx, mp_limits *out) {
	@autoreleasepool {
		id<MTLDevice> d = ctx_of(ctx)->device;
		out->max_threads_per_group = d.maxThreadsPerThreadgroup.width;
		out->max_threadgroup_memory = d.maxThreadgroupMemoryLength;
		out->working_set = d.recommendedMaxWorkingSetSize;
		out->max_buffer_length = d.maxBufferLength;
		out->unified_memory = d.hasUnifiedMemory ? 1 : 0;
	}
}

int mp_library_from_data(mp_context *ctx, const void *data, size_t len, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		// DISPATCH_DATA_DESTRUCTOR_DEFAULT copies the bytes: nothing refers to Go memory afterwards.
		dispatch_data_t dd = dispatch_data_create(data, len, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
		NSError *e = nil;
		id<MTLLibrary> lib = [c->device newLibraryWithData:dd error:&e];
		if (lib == nil) {
			set_err(err, "[MTLDevice newLibraryWithData:error:]", e);
			return -1;
		}
		c->library = lib;
		return 0;
	}
}

// compile_options are the MTLCompileOptions of every run-time compile: the main library's
// (mp_library_from_source) and the modules' (mp_modules_build).
static MTLCompileOptions *_Nullable compile_options(char **err) {
	MTLCompileOptions *opts = [[MTLCompileOptions alloc] init];
	// Pinned to the language scripts/build-metallib.sh compiles the metallib with
	// (-std=macos-metal2.4), so that the fallback compiles the kernels as the metallib does, on
	// every SDK (the default is the newest version the OS supports). A Go test checks that the
	// two agree.
	if (@available(macOS 12.0, *)) {
		opts.languageVersion = MTLLanguageVersion2_4;
	} else {
		set_err(err, "the kernels need Metal Shading Language 2.4 (macOS 12 or later)", nil);
		return nil;
	}
	return opts;
}

int mp_library_from_source(mp_context *ctx, const char *src, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		NSString *s = [NSString stringWithUTF8String:src];
		if (s == nil) {
			set_err(err, "kernel source is not valid UTF-8", nil);
			return -1;
		}
		MTLCompileOptions *opts = compile_options(err);
		if (opts == nil) {
			return -1;
		}
		NSError *e = nil;
		id<MTLLibrary> lib = [c->device newLibraryWithSource:s options:opts error:&e];
		if (lib == nil) {
			// e.localizedDescription carries the compiler's log (file:line: error: ...).
			set_err(err, "[MTLDevice newLibraryWithSource:options:error:]", e);
			return -1;
		}
		c->library = lib; // a non-nil e here holds warnings only
		return 0;
	}
}

// fill_info reads a pipeline's limits.
static void fill_info(id<MTLComputePipelineState> p, mp_pipeline_info *info) {
	info->max_threads = (uint32_t)p.maxTotalThreadsPerThreadgroup;
	info->simd_width = (uint32_t)p.threadExecutionWidth;
	info->static_tg_memory = (uint32_t)p.staticThreadgroupMemoryLength;
}

mp_pipeline *mp_pipeline_create(mp_context *ctx, const char *name, mp_pipeline_info *info, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		if (c->library == nil) {
			set_err(err, "no kernel library loaded", nil);
			return NULL;
		}
		NSString *n = [NSString stringWithUTF8String:name];
		id<MTLFunction> f = n == nil ? nil : [c->library newFunctionWithName:n];
		if (f == nil) {
			set_err(err, "[MTLLibrary newFunctionWithName:] found no such kernel (stale metallib? run make)", nil);
			return NULL;
		}
		NSError *e = nil;
		id<MTLComputePipelineState> p = [c->device newComputePipelineStateWithFunction:f error:&e];
		if (p == nil) {
			set_err(err, "[MTLDevice newComputePipelineStateWithFunction:error:]", e);
			return NULL;
		}
		fill_info(p, info);
		return (__bridge_retained void *)p;
	}
}

NS_ASSUME_NONNULL_BEGIN

// MPModuleResult collects what the completion handlers of one module's compile report (Metal calls
// them on threads of its own). Each handler writes its fields (the library, or one kernel's slot)
// under @synchronized(result), then leaves the dispatch group; mp_modules_build reads them under
// the same lock after the group's wait (after a timeout, a late handler may still write: its
// block keeps the result alive, and nothing of the caller's is touched then).
@interface MPModuleResult : NSObject {
@public
	id<MTLLibrary> _Nullable library;
	NSError *_Nullable libraryError;
	NSMutableArray<id> *pipelines;    // per kernel: id<MTLComputePipelineState>, or NSNull
	NSMutableArray<id> *errors;       // per kernel: NSError, NSString, or NSNull
	double libraryDone, pipelinesDone; // seconds since the start of mp_modules_build
	BOOL libraryReported;             // the library's completion handler ran
}
@end

@implementation MPModuleResult
@end

NS_ASSUME_NONNULL_END

static double uptime(void) { return NSProcessInfo.processInfo.systemUptime; }

// wait_group waits for g until deadline (seconds of uptime()); 0 when every member left.
static long wait_group(dispatch_group_t g, double deadline) {
	double left = deadline - uptime();
	if (left < 0) {
		left = 0;
	}
	return (long)dispatch_group_wait(g, dispatch_time(DISPATCH_TIME_NOW, (int64_t)(left * (double)NSEC_PER_SEC)));
}

int mp_modules_build(mp_context *ctx, mp_module_job *jobs, int njobs, double timeout_seconds) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		double start = uptime();
		double deadline = start + timeout_seconds;
		int failed = 0;
		for (int i = 0; i < njobs; i++) {
			jobs[i].err = NULL;
			jobs[i].seconds = 0;
			for (int k = 0; k < jobs[i].nkernels; k++) {
				jobs[i].pipelines[k] = NULL;
			}
		}
		char *optErr = NULL;
		MTLCompileOptions *opts = compile_options(&optErr);
		if (opts == nil) {
			for (int i = 0; i < njobs; i++) {
				jobs[i].err = mp_strdup(optErr);
			}
			free(optErr);
			return njobs;
		}
		NSMutableArray<MPModuleResult *> *results = [NSMutableArray array];
		for (int i = 0; i < njobs; i++) {
			MPModuleResult *r = [[MPModuleResult alloc] init];
			r->pipelines = [NSMutableArray array];
			r->errors = [NSMutableArray array];
			for (int k = 0; k < jobs[i].nkernels; k++) {
				[r->pipelines addObject:[NSNull null]];
				[r->errors addObject:[NSNull null]];
			}
			[results addObject:r];
		}

		// 1. Every library, requested at once: Metal compiles them side by side.
		dispatch_group_t libs = dispatch_group_create();
		for (int i = 0; i < njobs; i++) {
			NSString *src = [NSString stringWithUTF8String:jobs[i].source];
			if (src == nil) {
				jobs[i].err = mp_strdup("the module's source is not valid UTF-8");
				continue;
			}
			MPModuleResult *r = results[(NSUInteger)i];
			dispatch_group_enter(libs);
			[c->device newLibraryWithSource:src
			                        options:opts
			              completionHandler:^(id<MTLLibrary> _Nullable lib, NSError *_Nullable e) {
				                @synchronized(r) {
					                r->library = lib;
					                r->libraryError = e;
					                r->libraryDone = uptime() - start;
					                r->libraryReported = YES;
				                }
				                dispatch_group_leave(libs);
			                }];
		}
		wait_group(libs, deadline);

		// 2. Every pipeline of every module whose library compiled, requested at once.
		dispatch_group_t pipes = dispatch_group_create();
		for (int i = 0; i < njobs; i++) {
			MPModuleResult *r = results[(NSUInteger)i];
			if (jobs[i].err != NULL) {
				continue;
			}
			// Read under the lock: after a timeout, a late handler may still write.
			BOOL reported;
			id<MTLLibrary> lib;
			NSError *libErr;
			@synchronized(r) {
				reported = r->libraryReported;
				lib = r->library;
				libErr = r->libraryError;
			}
			if (!reported) {
				jobs[i].err = mp_strdup([NSString stringWithFormat:@"[MTLDevice newLibraryWithSource:options:completionHandler:] "
				                                                   @"did not complete within %.0f s",
				                                                   timeout_seconds]
				                            .UTF8String);
				continue;
			}
			if (lib == nil) {
				// The error's localizedDescription carries the compiler's log (file:line: error: ...).
				set_err(&jobs[i].err, "[MTLDevice newLibraryWithSource:options:completionHandler:]", libErr);
				continue;
			}
			for (int k = 0; k < jobs[i].nkernels; k++) {
				NSString *n = [NSString stringWithUTF8String:jobs[i].kernels[k]];
				id<MTLFunction> f = n == nil ? nil : [lib newFunctionWithName:n];
				if (f == nil) {
					@synchronized(r) {
						r->errors[(NSUInteger)k] = [NSString
						    stringWithFormat:@"[MTLLibrary newFunctionWithName:] found no kernel %s in the module", jobs[i].kernels[k]];
					}
					continue;
				}
				NSUInteger slot = (NSUInteger)k;
				dispatch_group_enter(pipes);
				[c->device newComputePipelineStateWithFunction:f
				                             completionHandler:^(id<MTLComputePipelineState> _Nullable p, NSError *_Nullable e) {
					                             @synchronized(r) {
						                             if (p != nil) {
							                             r->pipelines[slot] = p;
						                             } else if (e != nil) {
							                             r->errors[slot] = e;
						                             } else {
							                             r->errors[slot] = @"no pipeline and no error";
						                             }
						                             r->pipelinesDone = uptime() - start;
					                             }
					                             dispatch_group_leave(pipes);
				                             }];
			}
		}
		BOOL pipesTimedOut = wait_group(pipes, deadline) != 0;

		// 3. Hand the pipelines over, or say what failed (the first failure of each module).
		for (int i = 0; i < njobs; i++) {
			MPModuleResult *r = results[(NSUInteger)i];
			if (jobs[i].err == NULL) {
				@synchronized(r) {
					jobs[i].seconds = r->pipelinesDone > r->libraryDone ? r->pipelinesDone : r->libraryDone;
					for (int k = 0; k < jobs[i].nkernels && jobs[i].err == NULL; k++) {
						id p = r->pipelines[(NSUInteger)k];
						id e = r->errors[(NSUInteger)k];
						NSString *what = [NSString stringWithFormat:@"pipeline of kernel %s: [MTLDevice newComputePipelineStateWithFunction:completionHandler:]",
						                                            jobs[i].kernels[k]];
						if ([e isKindOfClass:[NSError class]]) {
							set_err(&jobs[i].err, what.UTF8String, (NSError *)e);
						} else if ([e isKindOfClass:[NSString class]]) {
							jobs[i].err = mp_strdup(((NSString *)e).UTF8String);
						} else if ([p isKindOfClass:[NSNull class]]) {
							NSString *m = pipesTimedOut ? [NSString stringWithFormat:@"%@ did not complete within %.0f s", what, timeout_seconds]
							                            : [NSString stringWithFormat:@"%@ gave no pipeline", what];
							jobs[i].err = mp_strdup(m.UTF8String);
						}
					}
					if (jobs[i].err == NULL) {
						for (int k = 0; k < jobs[i].nkernels; k++) {
							id<MTLComputePipelineState> p = r->pipelines[(NSUInteger)k];
							fill_info(p, &jobs[i].infos[k]);
							jobs[i].pipelines[k] = (__bridge_retained void *)p;
						}
					}
				}
			}
			if (jobs[i].err != NULL) {
				jobs[i].seconds = uptime() - start;
				failed++;
			}
		}
		// The libraries go with results (or with the last late handler's block): the pipelines need
		// no library.
		return failed;
	}
}

mp_buffer *mp_buffer_create(mp_context *ctx, size_t len, void **contents, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		id<MTLBuffer> b = [c->device newBufferWithLength:len options:MTLResourceStorageModeShared];
		if (b == nil) {
			set_err(err, "[MTLDevice newBufferWithLength:options:] returned nil", nil);
			return NULL;
		}
		*contents = [b contents];
		return (__bridge_retained void *)b;
	}
}

int mp_dispatch(mp_context *ctx, mp_pipeline *p, const char *kernel, const mp_slot *slots, int nslots,
                const uint8_t *values, const uint32_t *tg_len, int ntg, const uint32_t groups[3],
                const uint32_t tpg[3], char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		end_encoders(c);
		if (ensure_cmd(c, err) != 0) {
			return -1;
		}
		// An encoder per dispatch, labelled with its kernel: encoders run in order, and tracked
		// resources make each see the writes of the ones before it, as dispatches of one serial
		// encoder do.
		id<MTLComputeCommandEncoder> enc = [c->cmd computeCommandEncoder];
		if (enc == nil) {
			set_err(err, "[MTLCommandBuffer computeCommandEncoder] returned nil", nil);
			return -1;
		}
		c->ncommands++;
		enc.label = [NSString stringWithFormat:@"%s (dispatch %llu of command buffer %llu)", kernel, c->ncommands, c->ncmdbufs];
		[enc setComputePipelineState:(__bridge id<MTLComputePipelineState>)(void *)p];
		for (int i = 0; i < nslots; i++) {
			if (slots[i].buf != NULL) {
				[enc setBuffer:(__bridge id<MTLBuffer>)(void *)slots[i].buf offset:0 atIndex:(NSUInteger)i];
			} else if (slots[i].value_len > 0) {
				[enc setBytes:values + slots[i].value_off length:slots[i].value_len atIndex:(NSUInteger)i];
			}
		}
		for (int i = 0; i < ntg; i++) {
			NSUInteger l = ((NSUInteger)tg_len[i] + 15) & ~(NSUInteger)15;
			[enc setThreadgroupMemoryLength:(l == 0 ? 16 : l) atIndex:(NSUInteger)i];
		}
		[enc dispatchThreadgroups:MTLSizeMake(groups[0], groups[1], groups[2])
		    threadsPerThreadgroup:MTLSizeMake(tpg[0], tpg[1], tpg[2])];
		[enc endEncoding];
		return 0;
	}
}

int mp_copy(mp_context *ctx, mp_buffer *dst, size_t dst_off, mp_buffer *src, size_t src_off, size_t n, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		if (ensure_cmd(c, err) != 0) {
			return -1;
		}
		if (c->blit == nil) {
			c->blit = [c->cmd blitCommandEncoder];
			if (c->blit == nil) {
				set_err(err, "[MTLCommandBuffer blitCommandEncoder] returned nil", nil);
				return -1;
			}
			c->ncommands++;
			c->blit.label = [NSString stringWithFormat:@"copies (command %llu of command buffer %llu)", c->ncommands, c->ncmdbufs];
		}
		[c->blit copyFromBuffer:(__bridge id<MTLBuffer>)(void *)src
		           sourceOffset:src_off
		               toBuffer:(__bridge id<MTLBuffer>)(void *)dst
		      destinationOffset:dst_off
		                   size:n];
		return 0;
	}
}

void mp_commit(mp_context *ctx) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		if (c->cmd == nil) {
			return;
		}
		end_encoders(c);
		id<MTLCommandBuffer> cb = c->cmd;
		c->cmd = nil;
		[cb commit];
		[c->committed addObject:cb];
	}
}

int mp_pending(mp_context *ctx) {
	MPContext *c = ctx_of(ctx);
	return c->cmd != nil || c->committed.count > 0 ? 1 : 0;
}

int mp_sync(mp_context *ctx, double *max_gpu_seconds, char **err) {
	@autoreleasepool {
		MPContext *c = ctx_of(ctx);
		*max_gpu_seconds = 0;
		mp_commit(ctx);
		NSUInteger n = c->committed.count;
		if (n == 0) {
			return 0;
		}
		// The queue runs them in order: once the last has completed, so have the others (their
		// waitUntilCompleted returns at once; it is called so that no status is read early).
		[c->committed[n - 1] waitUntilCompleted];
		int rc = 0;
		for (NSUInteger i = 0; i < n; i++) {
			id<MTLCommandBuffer> cb = c->committed[i];
			[cb waitUntilCompleted];
			if (rc == 0 && cb.status != MTLCommandBufferStatusCompleted) {
				set_cb_err(err, cb);
				rc = -1;
			}
			double t = cb.GPUEndTime - cb.GPUStartTime;
			if (t > *max_gpu_seconds) {
				*max_gpu_seconds = t;
			}
		}
		[c->committed removeAllObjects];
		return rc;
	}
}

int mp_device_supports_family(mp_context *ctx, int64_t family) {
	@autoreleasepool {
		return [ctx_of(ctx)->device supportsFamily:(MTLGPUFamily)family] ? 1 : 0;
	}
}

void mp_release(void *obj) {
	if (obj == NULL) {
		return;
	}
	@autoreleasepool {
		// Takes back the reference made by __bridge_retained; ARC releases it here.
		id o = CFBridgingRelease(obj);
		(void)o;
	}
}

void mp_free(void *p) { free(p); }
