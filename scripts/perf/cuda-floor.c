// cuda-floor.c - the least a process that opens a CUDA device pays (issue 24, target 5): dlopen
// libcuda, cuInit, the primary context, one allocation, the release (argument 0: none), exit.
// Prints each step's milliseconds to stderr; the process's wall comes from the shell. Built and
// run on a GPU machine (not by CI):
//   gcc -O2 -o /tmp/cuda-floor scripts/perf/cuda-floor.c -ldl
//   for i in 1 2 3 4 5; do s=$(date +%s%N); /tmp/cuda-floor; e=$(date +%s%N); echo "wall $(( (e-s)/1000000 )) ms"; done
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  int release_ctx = argc > 1 ? atoi(argv[1]) : 1;
  double t0 = now_ms();
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cuda-floor: dlopen libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  double t1 = now_ms();
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
  CUresult (*device_get)(CUdevice*, int) = (CUresult(*)(CUdevice*, int))dlsym(h, "cuDeviceGet");
  CUresult (*retain)(CUcontext*, CUdevice) = (CUresult(*)(CUcontext*, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
  CUresult (*release)(CUdevice) = (CUresult(*)(CUdevice))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
  CUresult (*set_current)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = (CUresult(*)(CUdeviceptr*, size_t))dlsym(h, "cuMemAlloc_v2");
  CUresult (*mem_free)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))dlsym(h, "cuMemFree_v2");
  if (!init || !device_get || !retain || !release || !set_current || !mem_alloc || !mem_free) {
    fprintf(stderr, "cuda-floor: a driver entry point is missing\n");
    return 1;
  }
  if (init(0) != 0) {
    fprintf(stderr, "cuda-floor: cuInit failed\n");
    return 1;
  }
  double t2 = now_ms();
  CUdevice dev;
  CUcontext ctx;
  if (device_get(&dev, 0) != 0 || retain(&ctx, dev) != 0 || set_current(ctx) != 0) {
    fprintf(stderr, "cuda-floor: no context on device 0\n");
    return 1;
  }
  double t3 = now_ms();
  CUdeviceptr p;
  if (mem_alloc(&p, 1 << 20) != 0 || mem_free(p) != 0) {
    fprintf(stderr, "cuda-floor: allocation failed\n");
    return 1;
  }
  double t4 = now_ms();
  if (release_ctx) release(dev);
  double t5 = now_ms();
  fprintf(stderr, "dlopen %.1f cuInit %.1f context %.1f alloc %.1f release %.1f total %.1f ms\n", t1 - t0, t2 - t1,
          t3 - t2, t4 - t3, t5 - t4, t5 - t0);
  return 0;
}
