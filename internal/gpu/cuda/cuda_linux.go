//go:build linux && cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cudadl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// libcudaName is the driver library; it comes with the NVIDIA driver, not the toolkit.
const libcudaName = "libcuda.so.1"

var (
	loadMu      sync.Mutex
	cudaLoaded  bool
	rtcLoaded   bool
	rtcVersion  string // "13.0"
	rtcPath     string
	rtcArchs    []int
	rtcHasCubin bool
	// rtcFastCompile: NVRTC takes --Ofast-compile (CUDA 12.8 and later).
	rtcFastCompile bool
	// imagesByKey are the module images this process has loaded, by cache key (loadMu guards it): a
	// second backend (another stream for proofs in flight, another GPU of the same architecture)
	// loads the same image without reading the disk cache or compiling again.
	imagesByKey = map[string][]byte{}
)

// DeviceCount is the number of CUDA devices visible to this process (after CUDA_VISIBLE_DEVICES);
// an *UnavailableError when the driver is missing or has none.
func DeviceCount() (int, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if err := initDriver(); err != nil {
		return 0, err
	}
	var count C.int
	if r := C.mp_cu_device_count(&count); r != 0 {
		return 0, &UnavailableError{Reason: "no CUDA device", Err: cuErr("cuDeviceGetCount", "", r)}
	}
	if count == 0 {
		return 0, &UnavailableError{Reason: "no CUDA device"}
	}
	return int(count), nil
}

// checkOrdinal initialises the driver and checks that CUDA device ordinal exists.
func checkOrdinal(ordinal int) error {
	count, err := DeviceCount()
	if err != nil {
		return err
	}
	if ordinal < 0 || ordinal >= count {
		return &UnavailableError{Reason: fmt.Sprintf("no CUDA device %d (%d present)", ordinal, count)}
	}
	return nil
}

// initDriver loads libcuda and initialises it (loadMu held).
func initDriver() error {
	if !cudaLoaded {
		if err := loadCUDA(libcudaName); err != nil {
			return err
		}
		cudaLoaded = true
	}
	if r := C.mp_cu_init(); r != 0 {
		err := cuErr("cuInit", "", r)
		if r == C.MP_CUDA_ERROR_NO_DEVICE {
			return &UnavailableError{Reason: "no CUDA device", Err: err}
		}
		return &UnavailableError{Reason: "the CUDA driver cannot be initialised", Err: err}
	}
	return nil
}

// dlopenLib loads a library through load (mp_cu_load or mp_rtc_load), returning an
// UnavailableError naming what is missing.
func dlopenLib(name string, load func(*C.char, *C.char, C.int) C.int) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [512]C.char
	switch load(cname, &buf[0], C.int(len(buf))) {
	case 0:
		return nil
	case 1:
		return &UnavailableError{Reason: name + " not found", Err: errors.New(C.GoString(&buf[0]))}
	default:
		return &UnavailableError{Reason: name + " is unusable: symbol " + C.GoString(&buf[0]) + " missing (driver too old?)"}
	}
}

func loadCUDA(name string) error {
	return dlopenLib(name, func(n, e *C.char, l C.int) C.int { return C.mp_cu_load(n, e, l) })
}

func loadNVRTCFile(name string) error {
	return dlopenLib(name, func(n, e *C.char, l C.int) C.int { return C.mp_rtc_load(n, e, l) })
}

// nvrtcCandidates lists where NVRTC is looked for, in order: $METALPROVE_NVRTC (a file),
// $CUDA_HOME and $CUDA_PATH (lib64, lib), the loader's search path (libnvrtc.so, then versioned
// names), then /usr/local/cuda/lib64 and /usr/local/cuda-*/lib64, newest first.
func nvrtcCandidates() []string {
	var out []string
	if f := os.Getenv("METALPROVE_NVRTC"); f != "" {
		out = append(out, f)
	}
	inDir := func(dir string) {
		m, _ := filepath.Glob(filepath.Join(dir, "libnvrtc.so*"))
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		// libnvrtc.so (the development link) first when present, then the newest version
		for i, f := range m {
			if filepath.Base(f) == "libnvrtc.so" {
				m[0], m[i] = m[i], m[0]
			}
		}
		out = append(out, m...)
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(env); d != "" {
			inDir(filepath.Join(d, "lib64"))
			inDir(filepath.Join(d, "lib"))
		}
	}
	out = append(out, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2")
	inDir("/usr/local/cuda/lib64")
	dirs, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		inDir(d)
	}
	return out
}

// loadNVRTC loads NVRTC from the first candidate that opens.
func loadNVRTC(candidates []string) error {
	var tried []string
	var last error
	for _, c := range candidates {
		err := loadNVRTCFile(c)
		if err == nil {
			var major, minor C.int
			if r := C.mp_rtc_version(&major, &minor); r != 0 {
				return fmt.Errorf("nvrtcVersion: %s", C.GoString(C.mp_rtc_error_string(r)))
			}
			rtcVersion = fmt.Sprintf("%d.%d", major, minor)
			rtcFastCompile = major > 12 || major == 12 && minor >= 8
			rtcPath = c
			rtcHasCubin = C.mp_rtc_has_cubin() != 0
			var archs [128]C.int
			var n C.int
			if r := C.mp_rtc_supported_archs(&archs[0], C.int(len(archs)), &n); r == 0 {
				rtcArchs = nil
				for i := 0; i < int(n); i++ {
					rtcArchs = append(rtcArchs, int(archs[i]))
				}
			}
			rtcLoaded = true
			return nil
		}
		tried = append(tried, c)
		last = err
	}
	var cause error
	if u, ok := last.(*UnavailableError); ok && u.Err != nil {
		cause = u.Err
	}
	return &UnavailableError{Reason: "libnvrtc not found (tried " + strings.Join(tried, ", ") +
		"; install the CUDA toolkit's NVRTC or set CUDA_HOME or METALPROVE_NVRTC)", Err: cause}
}

func cBool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

func cuErr(op, kernel string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Op: op, Kernel: kernel, Code: int(r)}
	if s := C.mp_cu_error_name(r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.mp_cu_error_string(r); s != nil {
		e.Desc = C.GoString(s)
	}
	return e
}

// buffer is a device allocation.
type buffer struct {
	ptr  C.CUdeviceptr
	size int
}

func (b *buffer) Size() int { return b.size }

type backend struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream
	// mods hold the kernels: the embedded fatbin's one module, or the main module's programs
	// (splitKernels), in which partOf finds each kernel's (by entry point; nil: mods[0]).
	mods   []C.CUmodule
	partOf map[string]int
	name   string
	limits driver.Limits
	// pool is the device's default memory pool when the driver has stream-ordered allocation
	// (usePool): buffers are allocated, zeroed and freed in stream order from it, and it keeps
	// freed memory for the next allocation.
	pool    C.CUmemoryPool
	usePool bool
	stage   staging
	bounce  bounce
	// settled is the second stream of DownloadSettled, created on its first call (nil: not
	// yet, or the driver refused one: settled downloads then wait as Download does).
	settled      C.CUstream
	settledTried bool
	queued       queuedArea

	// built are the modules built from templates (BuildModules), by ID; major, minor and
	// cacheDir are what building one needs. modMu guards built and funcs: modules are built
	// while other goroutines dispatch.
	modMu        sync.Mutex
	built        map[string]C.CUmodule
	major, minor int
	cacheDir     string
	log          zerolog.Logger
	loadTime     time.Duration // the main module's cuModuleLoadData calls (loadModule)
	rtcTime      time.Duration // loading NVRTC in loadModule (its version is in the cache keys)

	// ordered: launches may allow programmatic stream serialization (sm_90+, the driver's
	// cuLaunchKernelEx, a source whose kernels begin with griddepcontrol.wait, and per function
	// PTX for sm_90 or later: cuFunc): a kernel's
	// groups are made resident while the kernel before it drains, which hides most of the
	// launch latency between the proof's dependent kernels.
	// Only grids of at most orderedMaxGroups groups (an eighth of the SMs) are launched so: with
	// every launch ordered, keccakf-1024's constraint stage lost 0.8 ms (large grids made
	// resident early take whichever SMs the draining kernel frees, likely unevenly), with grids
	// of up to 132 groups nothing; the chains of small kernels are what gain
	// (docs/perf-notes/round-trips.md).
	ordered          bool
	orderedMaxGroups uint32

	funcs    map[string]cuFunc // by kernel name; "ID/name" for a built module's
	smemSet  map[string]uint32 // dynamic shared memory limit raised per kernel
	inFlight []string          // kernels launched since the last Sync (for fault reports)
	// orders are the kernels' parameter lists in launch order (kernel name → *paramOrder: a
	// built module's kernels are copies of their template's, names are unique in the kernel
	// table), launch the parameters of the launch being made: a launch allocates nothing
	// (Dispatch calls are serial: gpu.Device holds its lock around them).
	orders sync.Map
	launch launchParams

	// how the module was obtained (tests and diagnostics)
	target      string
	cacheFile   string
	cacheHit    bool
	compiled    bool
	precompiled bool  // from the embedded nvcc fatbin
	cacheErr    error // a cache write that failed (not fatal)
	closed      bool
}

var _ driver.KernelLimiter = (*backend)(nil)

// Open opens CUDA device opts.Device: loads libcuda.so.1, retains the primary context, creates a
// stream and loads the kernels (the embedded nvcc fatbin, else the cache, else compiled by NVRTC,
// which is loaded then).
//
// The module's NVRTC compile holds no lock of the package: a Prebuild (constraint code) runs
// beside it, and backends opened at the same time compile the one source once (compileOnce).
func Open(opts Options) (driver.Backend, error) {
	t0 := time.Now()
	if err := checkOrdinal(opts.Device); err != nil {
		return nil, err
	}
	tInit := time.Since(t0)
	b := &backend{funcs: map[string]cuFunc{}, smemSet: map[string]uint32{}, built: map[string]C.CUmodule{}}
	if r := C.mp_cu_device_get(&b.dev, C.int(opts.Device)); r != 0 {
		return nil, cuErr("cuDeviceGet", "", r)
	}
	attr := func(a C.int, what string) (int, error) {
		var v C.int
		if r := C.mp_cu_device_attr(&v, a, b.dev); r != 0 {
			return 0, cuErr("cuDeviceGetAttribute("+what+")", "", r)
		}
		return int(v), nil
	}
	var vals [6]int
	for i, a := range []struct {
		id   C.int
		name string
	}{
		{C.MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major"},
		{C.MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor"},
		{C.MP_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
		{C.MP_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block opt-in"},
		{C.MP_CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"},
		{C.MP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"},
	} {
		v, err := attr(a.id, a.name)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	major, minor := vals[0], vals[1]
	var total C.size_t
	if r := C.mp_cu_device_total_mem(&total, b.dev); r != 0 {
		return nil, cuErr("cuDeviceTotalMem", "", r)
	}
	b.limits = driver.Limits{
		MaxThreadsPerGroup:   vals[2],
		MaxThreadgroupMemory: vals[3],
		SIMDWidth:            vals[4],
		MemoryBytes:          uint64(total),
		ComputeUnits:         vals[5],
	}
	var nameBuf [256]C.char
	if r := C.mp_cu_device_name(&nameBuf[0], C.int(len(nameBuf)), b.dev); r != 0 {
		return nil, cuErr("cuDeviceGetName", "", r)
	}
	var drv C.int
	if r := C.mp_cu_driver_version(&drv); r != 0 {
		return nil, cuErr("cuDriverGetVersion", "", r)
	}
	b.name = fmt.Sprintf("%s (sm_%d%d, CUDA %d.%d driver)", C.GoString(&nameBuf[0]), major, minor, drv/1000, drv%1000/10)

	t1 := time.Now()
	if r := C.mp_cu_primary_ctx_retain(&b.ctx, b.dev); r != 0 {
		return nil, cuErr("cuDevicePrimaryCtxRetain", "", r)
	}
	tCtx := time.Since(t1)
	if r := C.mp_cu_stream_create(b.ctx, &b.stream); r != 0 {
		C.mp_cu_primary_ctx_release(b.dev)
		return nil, cuErr("cuStreamCreate", "", r)
	}
	if C.mp_cu_has_pools() != 0 {
		if v, err := attr(C.MP_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools supported"); err == nil && v == 1 {
			b.usePool = C.mp_cu_pool_setup(b.ctx, b.dev, &b.pool) == 0
		}
	}
	// The driver reserves the per-thread stack size for every thread the device can hold
	// (1 KiB by default: 277 MB on an H200), and grows it at a launch that needs more. The
	// kernels' frames are at most a few hundred bytes, so the context starts with none and
	// holds what the largest launched so far needs. Memory only: a driver that refuses keeps
	// its default.
	var stack C.size_t
	stackErr := cuErr("cuCtxSetLimit", "", C.mp_cu_stack_limit(b.ctx, 0, &stack))
	src, srcName := kernelsSource, "kernels.gen.cu"
	if opts.Source != "" {
		src, srcName = opts.Source, opts.SourceName
		if srcName == "" {
			srcName = "kernels.gen.cu"
		}
	}
	dir := opts.CacheDir
	if dir == "" {
		dir = defaultCacheDir()
	}
	b.major, b.minor, b.cacheDir, b.log = int(major), int(minor), dir, opts.Logger
	t2 := time.Now()
	if err := b.loadModule(src, srcName, dir, major, minor); err != nil {
		C.mp_cu_stream_destroy(b.ctx, b.stream)
		C.mp_cu_primary_ctx_release(b.dev)
		return nil, err
	}
	// The built modules' templates carry the same glue as the generated main source.
	b.ordered = major >= 9 && C.mp_cu_has_launch_ex() != 0 && strings.Contains(src, gridOrderMarker)
	b.orderedMaxGroups = uint32(max(1, b.limits.ComputeUnits/8))
	// Where a process's device opening goes (issue 24: a one-shot prove in ≤ 250 ms).
	b.log.Debug().Dur("driver_init", tInit).Dur("context", tCtx).Dur("kernels", time.Since(t2)).
		Dur("kernels_nvrtc_load", b.rtcTime).Dur("kernels_load", b.loadTime).Dur("total", time.Since(t0)).Bool("cache_hit", b.cacheHit).
		Uint64("stack_limit_bytes", uint64(stack)).AnErr("stack_limit_error", stackErr).
		Msg("CUDA device opened")
	return b, nil
}

// loadModule loads the kernels from the fatbin that `make cuda` embedded (when it was built from
// this source and the driver accepts it for this device), else as mainParts() programs
// (splitKernels), each from this process's memory, else from the cache, else compiled with NVRTC
// (the programs left side by side) and cached, each loaded as a module of its own. NVRTC is
// loaded only when needed.
func (b *backend) loadModule(src, srcName, dir string, major, minor int) error {
	if len(precompiled) > 0 && precompiledSource == sourceHash(src) {
		if err := b.moduleLoad(precompiled); err == nil {
			b.precompiled = true
			b.name += ", kernels precompiled by nvcc"
			return nil
		}
		// no image for this architecture in the fatbin (and no PTX the driver can use): NVRTC
	}
	tRTC := time.Now()
	target, cubin, _, err := rtcTarget(major, minor)
	if err != nil {
		return err
	}
	b.rtcTime = time.Since(tRTC)
	b.target = target
	opts := []string{"--gpu-architecture=" + target, "-std=c++17", "-default-device"}
	parts, partOf := splitKernels(src, mainParts())
	keys := make([]string, len(parts))
	images := make([][]byte, len(parts))
	var todo []int
	hits := 0
	for i, p := range parts {
		keys[i] = cacheKey(p, target, rtcVersion, opts)
		if img := cachedImage(keys[i]); img != nil {
			images[i] = img
		} else if _, payload, err := readCache(dir, keys[i]); err == nil {
			images[i] = payload
		} else {
			todo = append(todo, i)
			continue
		}
		hits++
	}
	b.cacheFile = cachePath(dir, keys[0])
	mods := make([]C.CUmodule, len(parts))
	unload := func() {
		for _, m := range mods {
			if m != nil {
				C.mp_cu_module_unload(b.ctx, m)
			}
		}
	}
	tLoad := time.Now()
	defer func() { b.loadTime = time.Since(tLoad) }()
	for i, img := range images {
		if img == nil {
			continue
		}
		m, err := b.loadImage(img)
		if err != nil {
			// the driver rejected the cached image: recompile it and replace it
			todo = append(todo, i)
			hits--
			continue
		}
		mods[i] = m
		storeImage(keys[i], img)
	}
	if len(todo) > 0 {
		built, err := b.compileLogged(parts, todo, keys, src, srcName, target, opts, cubin, dir)
		if err != nil {
			unload()
			return err
		}
		kind := byte(kindPTX)
		if cubin {
			kind = kindCubin
		}
		for n, i := range todo {
			m, err := b.loadImage(built[n])
			if err != nil {
				unload()
				return fmt.Errorf("loading the module NVRTC %s built for %s: %w", rtcVersion, target, err)
			}
			mods[i] = m
			storeImage(keys[i], built[n])
			if err := writeCache(dir, keys[i], kind, built[n]); err != nil && b.cacheErr == nil {
				b.cacheErr = err
			}
		}
		b.compiled = true
	}
	b.cacheHit = hits == len(parts)
	b.setModules(mods, partOf)
	return nil
}

// setModules makes mods (partOf: each kernel's, nil: mods[0]) the backend's kernels, unloading
// those it had.
func (b *backend) setModules(mods []C.CUmodule, partOf map[string]int) {
	for _, m := range b.mods {
		C.mp_cu_module_unload(b.ctx, m)
	}
	b.mods, b.partOf = mods, partOf
	b.funcs = map[string]cuFunc{}
	b.smemSet = map[string]uint32{}
}

func (b *backend) moduleLoad(image []byte) error {
	m, err := b.loadImage(image)
	if err != nil {
		return err
	}
	b.setModules([]C.CUmodule{m}, nil)
	return nil
}

// loadImage loads a module image (cubin, fatbin or PTX).
func (b *backend) loadImage(image []byte) (C.CUmodule, error) {
	if len(image) == 0 {
		return nil, errors.New("empty module image")
	}
	if image[len(image)-1] != 0 { // PTX is text and must end in NUL; a cubin ignores the extra byte
		image = append(image[:len(image):len(image)], 0)
	}
	cimg := C.CBytes(image)
	defer C.free(cimg)
	var m C.CUmodule
	if r := C.mp_cu_module_load(b.ctx, &m, cimg); r != 0 {
		return nil, cuErr("cuModuleLoadData", "", r)
	}
	return m, nil
}

// compileLogged compiles the programs parts[i], i in todo, of the main module src (splitKernels)
// side by side, with a log record before (what is compiled, for which target, as how many
// programs) and one after (how long it took, where it is cached): a first compile takes seconds
// on a fresh machine, and the log must say so rather than look like a stalled stage. Backends
// opened at the same time compile each program once (compileOnce). A failed compile's error is
// that of the first program that failed (every program holds the same code but its kernels'
// wrappers, so they fail alike).
func (b *backend) compileLogged(parts []string, todo []int, keys []string, src, srcName, target string, opts []string, cubin bool, dir string) ([][]byte, error) {
	b.log.Info().Str("source", srcName).Str("what", "the kernels").Int("source_bytes", len(src)).Int("programs", len(todo)).
		Str("target", target).Str("nvrtc", rtcVersion).Msg("compiling CUDA kernels with NVRTC (once per machine and driver: the result is cached)")
	start := time.Now()
	out := make([][]byte, len(todo))
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for n, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[n], _, errs[n] = b.compileOnce(&compileJob{src: parts[i], name: srcName, key: keys[i], opts: opts}, target, cubin)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	b.log.Info().Str("source", srcName).Int("programs", len(todo)).Str("elapsed", time.Since(start).Round(time.Millisecond).String()).
		Str("cache", filepath.Dir(cachePath(dir, keys[todo[0]]))).Msg("CUDA kernels compiled")
	return out, nil
}

// compileNVRTC compiles src and returns the CUBIN (cubin) or NUL-terminated PTX.
func compileNVRTC(src, srcName, target string, opts []string, cubin bool) ([]byte, error) {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(srcName)
	defer C.free(unsafe.Pointer(cname))
	copts := C.malloc(C.size_t(len(opts)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(copts)
	optv := unsafe.Slice((**C.char)(copts), len(opts))
	for i, o := range opts {
		optv[i] = C.CString(o)
		defer C.free(unsafe.Pointer(optv[i]))
	}
	var prog C.nvrtcProgram
	var stage C.int
	r := C.mp_rtc_compile(csrc, cname, (**C.char)(copts), C.int(len(opts)), &prog, &stage)
	if stage == 0 && r != 0 {
		return nil, fmt.Errorf("nvrtcCreateProgram(%s): %s", srcName, C.GoString(C.mp_rtc_error_string(r)))
	}
	defer C.mp_rtc_destroy(prog)
	if r != 0 {
		var clog *C.char
		var n C.size_t
		text := ""
		if C.mp_rtc_log(prog, &clog, &n) == 0 && clog != nil {
			text = C.GoStringN(clog, C.int(n))
			C.free(unsafe.Pointer(clog))
		}
		return nil, &CompileError{Source: srcName, Target: target, Status: C.GoString(C.mp_rtc_error_string(r)), Log: rewriteLog(text)}
	}
	var out *C.char
	var n C.size_t
	cb := C.int(0)
	if cubin {
		cb = 1
	}
	if r := C.mp_rtc_output(prog, cb, &out, &n); r != 0 || out == nil {
		return nil, fmt.Errorf("nvrtc: reading the output of %s: %s", srcName, C.GoString(C.mp_rtc_error_string(r)))
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}

func (b *backend) Name() string          { return b.name }
func (b *backend) Limits() driver.Limits { return b.limits }

var _ driver.FreeMemoryReporter = (*backend)(nil)

// FreeMemory is cuMemGetInfo's free bytes (the device's memory less every process's
// allocations) plus what this process's memory pool holds unused, which the next allocations
// take first.
func (b *backend) FreeMemory() (uint64, error) {
	var free, total C.size_t
	if r := C.mp_cu_mem_get_info(b.ctx, &free, &total); r != 0 {
		return 0, cuErr("cuMemGetInfo", "", r)
	}
	n := uint64(free)
	if b.usePool {
		var unused C.ulonglong
		if r := C.mp_cu_pool_unused(b.ctx, b.pool, &unused); r != 0 {
			return 0, cuErr("cuMemPoolGetAttribute", "", r)
		}
		n += uint64(unused)
	}
	return n, nil
}

var _ driver.UsedMemoryReporter = (*backend)(nil)

// UsedMemory is cuMemGetInfo's total less free: every process's device memory, this one's
// context, code, stacks and pool reserve included.
func (b *backend) UsedMemory() (uint64, error) {
	var free, total C.size_t
	if r := C.mp_cu_mem_get_info(b.ctx, &free, &total); r != 0 {
		return 0, cuErr("cuMemGetInfo", "", r)
	}
	return uint64(total - free), nil
}

var _ driver.PoolPeakReporter = (*backend)(nil)

// PoolPeak is the stream-ordered pool's high-water marks since the last ResetPoolPeak: the
// bytes handed out to allocations and the bytes the pool held from the driver.
func (b *backend) PoolPeak() (used, reserved uint64, err error) {
	if !b.usePool {
		return 0, 0, driver.ErrNoPool
	}
	var u, r C.ulonglong
	if e := C.mp_cu_pool_peak(b.ctx, b.pool, &u, &r); e != 0 {
		return 0, 0, cuErr("cuMemPoolGetAttribute", "", e)
	}
	return uint64(u), uint64(r), nil
}

// ResetPoolPeak sets both of the pool's high-water marks to its current values.
func (b *backend) ResetPoolPeak() error {
	if !b.usePool {
		return driver.ErrNoPool
	}
	if e := C.mp_cu_pool_peak_reset(b.ctx, b.pool); e != 0 {
		return cuErr("cuMemPoolSetAttribute", "", e)
	}
	return nil
}

func (b *backend) Alloc(size int) (driver.Buffer, error) { return b.alloc(size, true) }

// AllocUninit implements driver.UninitAllocator: no memset after the allocation.
func (b *backend) AllocUninit(size int) (driver.Buffer, error) { return b.alloc(size, false) }

func (b *backend) alloc(size int, zero bool) (driver.Buffer, error) {
	z := C.int(0)
	if zero {
		z = 1
	}
	if size < 1 {
		return nil, fmt.Errorf("size %d must be positive", size)
	}
	var p C.CUdeviceptr
	var stage C.int
	if b.usePool {
		if r := C.mp_cu_alloc_async_zeroed(b.ctx, b.stream, &p, C.size_t(size), z, &stage); r != 0 {
			op := "cuMemAllocAsync"
			if stage == 1 {
				op = "cuMemsetD8Async"
			}
			return nil, cuErr(op, "", r)
		}
		return &buffer{ptr: p, size: size}, nil
	}
	if r := C.mp_cu_alloc_zeroed(b.ctx, &p, C.size_t(size), z, &stage); r != 0 {
		op := "cuMemAlloc"
		if stage == 1 {
			op = "cuMemsetD8"
		}
		return nil, cuErr(op, "", r)
	}
	return &buffer{ptr: p, size: size}, nil
}

func (b *backend) Free(buf driver.Buffer) {
	bb, ok := buf.(*buffer)
	if !ok || bb == nil || bb.ptr == 0 {
		return
	}
	if b.usePool && !b.closed {
		// in stream order: after every launch encoded so far that may still read it
		C.mp_cu_free_async(b.ctx, b.stream, bb.ptr)
	} else {
		C.mp_cu_free(b.ctx, bb.ptr)
	}
	bb.ptr = 0
}

func (b *backend) buf(x driver.Buffer) (*buffer, error) {
	bb, ok := x.(*buffer)
	if !ok || bb == nil {
		return nil, fmt.Errorf("buffer %T does not belong to the CUDA backend", x)
	}
	if bb.ptr == 0 {
		return nil, errors.New("buffer was freed")
	}
	return bb, nil
}

func checkRange(bb *buffer, off, n int) error { return driver.CheckRange(off, n, bb.size) }

func stageOp(stage C.int, first string) string {
	if stage == 1 {
		return "cuStreamSynchronize (after " + first + ")"
	}
	return first
}

func (b *backend) Upload(dst driver.Buffer, offset int, src []byte) error {
	bb, err := b.buf(dst)
	if err != nil {
		return err
	}
	if err := checkRange(bb, offset, len(src)); err != nil || len(src) == 0 {
		return err
	}
	if len(src) >= stagedUploadMin {
		if done, err := b.uploadStaged(bb, offset, src); done {
			return err
		}
	}
	from := unsafe.Pointer(&src[0])
	if len(src) <= bounceBytes && b.bounceReady() {
		copy(b.bounce.buf, src)
		from = b.bounce.ptr
	}
	var stage C.int
	r := C.mp_cu_upload(b.ctx, b.stream, bb.ptr+C.CUdeviceptr(offset), from, C.size_t(len(src)), &stage)
	return b.faultErr(cuErr(stageOp(stage, "cuMemcpyHtoDAsync"), "", r), stage == 1)
}

// Small transfers (a sumcheck round's sums, the column openings, weights and tables of a few KB)
// go through one pinned buffer, as a copy the driver makes from or to pinned memory directly: from
// pageable memory it stages each one itself. A proof makes about sixty of them, each waited for.
const bounceBytes = 1 << 20

// bounce is the pinned buffer of the small transfers, allocated on the first one (Upload and
// Download are serial: gpu.Device holds its lock around them, and each waits for its copy).
type bounce struct {
	tried bool
	ptr   unsafe.Pointer
	buf   []byte
}

// bounceReady allocates the bounce buffer once; false when the host cannot give pinned memory
// (transfers then go from and to pageable memory).
func (b *backend) bounceReady() bool {
	bn := &b.bounce
	if !bn.tried {
		bn.tried = true
		var p unsafe.Pointer
		if C.mp_cu_has_staging() != 0 && C.mp_cu_host_alloc(b.ctx, &p, bounceBytes) == 0 {
			bn.ptr, bn.buf = p, unsafe.Slice((*byte)(p), bounceBytes)
		}
	}
	return bn.ptr != nil
}

func (b *backend) freeBounce() {
	if b.bounce.ptr != nil {
		C.mp_cu_host_free(b.ctx, b.bounce.ptr)
	}
	b.bounce = bounce{}
}

// Large uploads go through pinned staging buffers: from pageable memory the driver copies at
// about 7 GB/s (a keccakf-1024 trace, 345 MB: 50 ms on an H200 host); here the host copies
// chunks into pinned buffers on several cores while the DMA engine sends the previous ones.
const (
	stagedUploadMin = 16 << 20
	stagingChunk    = 8 << 20
	stagingBuffers  = 4
)

// staging holds the pinned buffers, allocated on the first large upload.
type staging struct {
	tried  bool
	bufs   [][]byte // pinned memory (cuMemHostAlloc), stagingChunk bytes each
	ptrs   []unsafe.Pointer
	events []C.CUevent // recorded after the copy out of bufs[i]
	busy   []bool
}

// stagingReady allocates the staging buffers once; false when the driver or the host cannot
// give pinned memory (uploads then go from pageable memory).
func (b *backend) stagingReady() bool {
	st := &b.stage
	if st.tried {
		return len(st.bufs) > 0
	}
	st.tried = true
	if C.mp_cu_has_staging() == 0 {
		return false
	}
	for range stagingBuffers {
		var p unsafe.Pointer
		if C.mp_cu_host_alloc(b.ctx, &p, stagingChunk) != 0 {
			break
		}
		var e C.CUevent
		if C.mp_cu_event_create(b.ctx, &e) != 0 {
			C.mp_cu_host_free(b.ctx, p)
			break
		}
		st.bufs = append(st.bufs, unsafe.Slice((*byte)(p), stagingChunk))
		st.ptrs = append(st.ptrs, p)
		st.events = append(st.events, e)
		st.busy = append(st.busy, false)
	}
	if len(st.bufs) < 2 { // no overlap with one buffer: not worth it
		b.freeStaging()
		return false
	}
	return true
}

func (b *backend) freeStaging() {
	st := &b.stage
	for i := range st.bufs {
		C.mp_cu_event_destroy(b.ctx, st.events[i])
		C.mp_cu_host_free(b.ctx, st.ptrs[i])
	}
	st.bufs, st.ptrs, st.events, st.busy = nil, nil, nil, nil
}

// uploadStaged uploads src through the staging buffers and waits for it, as Upload does; done is
// false when there are no staging buffers (nothing was done).
func (b *backend) uploadStaged(bb *buffer, offset int, src []byte) (done bool, err error) {
	if !b.stagingReady() {
		return false, nil
	}
	st := &b.stage
	for i, pos := 0, 0; pos < len(src); i++ {
		k := i % len(st.bufs)
		if st.busy[k] {
			if r := C.mp_cu_event_sync(b.ctx, st.events[k]); r != 0 {
				return true, b.failStaged(cuErr("cuEventSynchronize (staged upload)", "", r))
			}
			st.busy[k] = false
		}
		n := min(stagingChunk, len(src)-pos)
		parallelCopy(st.bufs[k][:n], src[pos:pos+n])
		var stage C.int
		r := C.mp_cu_upload_record(b.ctx, b.stream, bb.ptr+C.CUdeviceptr(offset+pos), st.ptrs[k], C.size_t(n), st.events[k], &stage)
		if r != 0 {
			op := "cuMemcpyHtoDAsync"
			if stage == 1 {
				op = "cuEventRecord (after cuMemcpyHtoDAsync)"
			}
			return true, b.failStaged(cuErr(op, "", r))
		}
		st.busy[k] = true
		pos += n
	}
	r := C.mp_cu_stream_sync(b.ctx, b.stream)
	clear(st.busy)
	return true, b.faultErr(cuErr("cuStreamSynchronize (staged upload)", "", r), true)
}

// failStaged waits for what was enqueued (no copy may still read a staging buffer) and returns
// err.
func (b *backend) failStaged(err error) error {
	C.mp_cu_stream_sync(b.ctx, b.stream)
	clear(b.stage.busy)
	return b.faultErr(err, true)
}

// parallelCopy copies src into dst (same length) on up to 8 cores: one core's memmove does not
// keep up with the DMA engine.
func parallelCopy(dst, src []byte) {
	const minPart = 1 << 20
	w := min(8, runtime.GOMAXPROCS(0), len(src)/minPart)
	if w <= 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := len(src)*i/w, len(src)*(i+1)/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

func (b *backend) Download(dst []byte, src driver.Buffer, offset int) error {
	return b.download(b.stream, "cuMemcpyDtoHAsync", dst, src, offset)
}

// download copies from src on stream s and waits for the copy; small copies go through the
// bounce buffer.
func (b *backend) download(s C.CUstream, op string, dst []byte, src driver.Buffer, offset int) error {
	bb, err := b.buf(src)
	if err != nil {
		return err
	}
	if err := checkRange(bb, offset, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	to := unsafe.Pointer(&dst[0])
	bounced := len(dst) <= bounceBytes && b.bounceReady()
	if bounced {
		to = b.bounce.ptr
	}
	var stage C.int
	r := C.mp_cu_download(b.ctx, s, to, bb.ptr+C.CUdeviceptr(offset), C.size_t(len(dst)), &stage)
	if r == 0 && bounced {
		copy(dst, b.bounce.buf)
	}
	return b.faultErr(cuErr(stageOp(stage, op), "", r), stage == 1)
}

var _ driver.SettledDownloader = (*backend)(nil)

var _ driver.QueuedUploader = (*backend)(nil)

// queuedBytes bounds a queued upload; a larger one waits as Upload does.
const queuedBytes = 256 << 10

// queuedArea is the pinned buffer of the queued uploads, allocated on the first one, and the
// event recorded after the last copy out of it (busy until that event completes).
type queuedArea struct {
	tried bool
	ptr   unsafe.Pointer
	buf   []byte
	event C.CUevent
	busy  bool
}

// UploadQueued implements driver.QueuedUploader: src is copied into the pinned area and the copy
// enqueued with an event after it; the area is reused once that event has completed (a wait only
// when two queued uploads follow each other with no sync between).
func (b *backend) UploadQueued(dst driver.Buffer, offset int, src []byte) error {
	bb, err := b.buf(dst)
	if err != nil {
		return err
	}
	if err := checkRange(bb, offset, len(src)); err != nil || len(src) == 0 {
		return err
	}
	q := &b.queued
	if !q.tried {
		q.tried = true
		var p unsafe.Pointer
		if C.mp_cu_has_staging() != 0 && C.mp_cu_host_alloc(b.ctx, &p, queuedBytes) == 0 {
			if C.mp_cu_event_create(b.ctx, &q.event) == 0 {
				q.ptr, q.buf = p, unsafe.Slice((*byte)(p), queuedBytes)
			} else {
				C.mp_cu_host_free(b.ctx, p)
			}
		}
	}
	if q.ptr == nil || len(src) > queuedBytes {
		return b.Upload(dst, offset, src)
	}
	if q.busy {
		if r := C.mp_cu_event_sync(b.ctx, q.event); r != 0 {
			return b.faultErr(cuErr("cuEventSynchronize (queued upload)", "", r), true)
		}
		q.busy = false
	}
	copy(q.buf, src)
	var stage C.int
	r := C.mp_cu_upload_record(b.ctx, b.stream, bb.ptr+C.CUdeviceptr(offset), q.ptr, C.size_t(len(src)), q.event, &stage)
	if r != 0 {
		op := "cuMemcpyHtoDAsync (queued upload)"
		if stage == 1 {
			op = "cuEventRecord (after a queued upload)"
		}
		// Nothing may still read the area: wait for the stream before reporting.
		C.mp_cu_stream_sync(b.ctx, b.stream)
		return b.faultErr(cuErr(op, "", r), true)
	}
	q.busy = true
	return nil
}

func (b *backend) freeQueued() {
	q := &b.queued
	if q.ptr != nil {
		C.mp_cu_event_destroy(b.ctx, q.event)
		C.mp_cu_host_free(b.ctx, q.ptr)
	}
	*q = queuedArea{}
}

// DownloadSettled implements driver.SettledDownloader: the copy runs on a second stream, so it
// does not wait for the launches on the main stream (the caller guarantees that none of them
// writes the range). It goes through the bounce buffer as Download does (both are serialised by
// gpu.Device, and neither returns before its copy is done).
func (b *backend) DownloadSettled(dst []byte, src driver.Buffer, offset int) error {
	if !b.settledTried {
		b.settledTried = true
		if r := C.mp_cu_stream_create_nonblocking(b.ctx, &b.settled); r != 0 {
			b.settled = nil
			b.log.Debug().Str("error", cuErr("cuStreamCreate", "", r).Error()).Msg("no second CUDA stream: settled downloads wait for the main stream")
		}
	}
	if b.settled == nil {
		return b.Download(dst, src, offset)
	}
	return b.download(b.settled, "cuMemcpyDtoHAsync (second stream)", dst, src, offset)
}

func (b *backend) Copy(dst driver.Buffer, dstOffset int, src driver.Buffer, srcOffset int, n int) error {
	d, err := b.buf(dst)
	if err != nil {
		return err
	}
	s, err := b.buf(src)
	if err != nil {
		return err
	}
	if err := checkRange(d, dstOffset, n); err != nil {
		return err
	}
	if err := checkRange(s, srcOffset, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	r := C.mp_cu_copy(b.ctx, b.stream, d.ptr+C.CUdeviceptr(dstOffset), s.ptr+C.CUdeviceptr(srcOffset), C.size_t(n))
	return cuErr("cuMemcpyDtoDAsync", "", r)
}

// funcKey names kernel k's function in funcs and smemSet: its name, "ID/name" for a built
// module's.
func funcKey(k *driver.KernelInfo) string {
	if k.Built != "" {
		return k.Built + "/" + k.Name
	}
	return k.Name
}

// cuFunc is a kernel's function, and whether it may be launched with programmatic stream
// serialization: its PTX was made for sm_90 or later, so the glue's griddepcontrol.wait is in it
// (a module compiled for an older virtual architecture, by an older NVRTC or from a fatbin's
// PTX, has none).
type cuFunc struct {
	f       C.CUfunction
	ordered bool
}

// minOrderedPTX is the virtual architecture of griddepcontrol (CU_FUNC_ATTRIBUTE_PTX_VERSION).
const minOrderedPTX = 90

func (b *backend) function(k *driver.KernelInfo) (C.CUfunction, bool, error) {
	name := funcKey(k)
	b.modMu.Lock()
	defer b.modMu.Unlock()
	if f, ok := b.funcs[name]; ok {
		return f.f, f.ordered, nil
	}
	var mod C.CUmodule
	switch {
	case k.Built != "":
		m, ok := b.built[k.Built]
		if !ok {
			return nil, false, fmt.Errorf("cuda: module %s is not built on this device", k.Built)
		}
		mod = m
	case k.Module != "":
		return nil, false, fmt.Errorf("cuda: kernel %s of module template %q runs only from a module built from it", k.Name, k.Module)
	default:
		mod = b.mods[0]
		if j, ok := b.partOf[KernelPrefix+k.Name]; ok {
			mod = b.mods[j]
		}
	}
	cname := C.CString(KernelPrefix + k.Name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	if r := C.mp_cu_module_function(b.ctx, &f, mod, cname); r != 0 {
		return nil, false, cuErr("cuModuleGetFunction", KernelPrefix+k.Name, r)
	}
	var ptx C.int
	ordered := C.mp_cu_func_attr(b.ctx, &ptx, C.MP_CU_FUNC_ATTRIBUTE_PTX_VERSION, f) == 0 && ptx >= minOrderedPTX
	b.funcs[name] = cuFunc{f: f, ordered: ordered}
	return f, ordered, nil
}

// KernelLimits resolves the kernel's function (package gpu asks for every kernel when the device
// opens, so this happens then, with CUDA's lazy loading too) and reads its limits:
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (lower than the device's for kernels that need many
// registers) and static shared memory.
func (b *backend) KernelLimits(k *driver.KernelInfo) (driver.KernelLimits, error) {
	entry := KernelPrefix + k.Name
	f, _, err := b.function(k)
	if err != nil {
		return driver.KernelLimits{}, err
	}
	var maxThreads, static C.int
	if r := C.mp_cu_func_attr(b.ctx, &maxThreads, C.MP_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f); r != 0 {
		return driver.KernelLimits{}, cuErr("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)", entry, r)
	}
	if r := C.mp_cu_func_attr(b.ctx, &static, C.MP_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f); r != 0 {
		return driver.KernelLimits{}, cuErr("cuFuncGetAttribute(SHARED_SIZE_BYTES)", entry, r)
	}
	return driver.KernelLimits{MaxThreadsPerGroup: int(maxThreads), SIMDWidth: b.limits.SIMDWidth, StaticThreadgroupMemory: int(static)}, nil
}

func (b *backend) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	f, funcOrdered, err := b.function(k)
	if err != nil {
		return err
	}
	lp := &b.launch
	if err := b.packLaunch(lp, k, args, tgLen); err != nil {
		return fmt.Errorf("%s%s (%s): %w", KernelPrefix, k.Name, k.Pos, err)
	}
	if lp.smem > defaultDynSmem {
		// per function (a built module's kernel is a function of its own), under modMu: a module
		// rebuilt while others dispatch forgets its functions' settings
		fk := funcKey(k)
		b.modMu.Lock()
		set := b.smemSet[fk]
		b.modMu.Unlock()
		if lp.smem > set {
			if r := C.mp_cu_func_max_dyn_smem(b.ctx, f, C.int(lp.smem)); r != 0 {
				e := cuErr("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", KernelPrefix+k.Name, r).(*Error)
				e.Detail = fmt.Sprintf("%d bytes of threadgroup memory", lp.smem)
				return e
			}
			b.modMu.Lock()
			b.smemSet[fk] = lp.smem
			b.modMu.Unlock()
		}
	}
	var blob *C.uchar
	var offs *C.uint
	if len(lp.offs) > 0 {
		blob = (*C.uchar)(unsafe.Pointer(&lp.blob[0]))
		offs = (*C.uint)(unsafe.Pointer(&lp.offs[0]))
	}
	ordered := b.ordered && funcOrdered && groups.X*groups.Y*groups.Z <= b.orderedMaxGroups
	launch := func(ordered bool) C.CUresult {
		return C.mp_cu_launch(b.ctx, f, C.uint(groups.X), C.uint(groups.Y), C.uint(groups.Z),
			C.uint(tpg.X), C.uint(tpg.Y), C.uint(tpg.Z), C.uint(lp.smem), b.stream, blob, offs, C.int(len(lp.offs)), cBool(ordered))
	}
	r := launch(ordered)
	if r != 0 && ordered {
		// A driver that has cuLaunchKernelEx but refuses the attribute: plain launches from now
		// on. (An error of the launch itself fails the plain launch too, and is reported.)
		if r2 := launch(false); r2 == 0 {
			b.log.Debug().Str("kernel", k.Name).Str("error", cuErr("cuLaunchKernelEx", "", r).Error()).
				Msg("CUDA launches with programmatic stream serialization refused: plain launches")
			b.ordered = false
			r = 0
		} else {
			r = r2
		}
	}
	if r != 0 {
		e := cuErr("cuLaunchKernel", KernelPrefix+k.Name, r).(*Error)
		e.Detail = fmt.Sprintf("groups %d×%d×%d, threads %d×%d×%d, %d bytes shared", groups.X, groups.Y, groups.Z, tpg.X, tpg.Y, tpg.Z, lp.smem)
		return e
	}
	if len(b.inFlight) < 16 {
		b.inFlight = append(b.inFlight, k.Name)
	}
	return nil
}

// packLaunch writes k's launch parameters into lp, with k's parameter order checked and sorted
// on its first launch only.
func (b *backend) packLaunch(lp *launchParams, k *driver.KernelInfo, args []driver.Arg, tgLen []uint32) error {
	if err := checkArgCounts(k, args, tgLen); err != nil {
		return err
	}
	var o *paramOrder
	if v, ok := b.orders.Load(k.Name); ok {
		o = v.(*paramOrder)
	} else {
		var err error
		if o, err = orderParams(k); err != nil {
			return err
		}
		b.orders.Store(k.Name, o)
	}
	return o.pack(lp, args, tgLen, b.devPtr)
}

// devPtr is the device address of a buffer of this backend.
func (b *backend) devPtr(x driver.Buffer) (uint64, error) {
	bb, err := b.buf(x)
	if err != nil {
		return 0, err
	}
	return uint64(bb.ptr), nil
}

// faultErr adds the kernels launched since the last Sync to an error that a synchronisation
// reported (an asynchronous fault of one of them), and forgets them once synchronised.
func (b *backend) faultErr(err error, synced bool) error {
	if err != nil && synced && len(b.inFlight) > 0 {
		if e, ok := err.(*Error); ok {
			e.Detail = "kernels launched since the last sync: " + KernelPrefix + strings.Join(b.inFlight, ", "+KernelPrefix)
		}
	}
	if synced {
		b.inFlight = b.inFlight[:0]
	}
	return err
}

func (b *backend) Sync() error {
	return b.faultErr(cuErr("cuStreamSynchronize", "", C.mp_cu_stream_sync(b.ctx, b.stream)), true)
}

func (b *backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := cuErr("cuStreamSynchronize", "", C.mp_cu_stream_sync(b.ctx, b.stream))
	for _, m := range b.mods {
		C.mp_cu_module_unload(b.ctx, m)
	}
	b.mods = nil
	b.modMu.Lock()
	for id, m := range b.built {
		C.mp_cu_module_unload(b.ctx, m)
		delete(b.built, id)
	}
	b.modMu.Unlock()
	b.freeStaging()
	b.freeBounce()
	b.freeQueued()
	if b.settled != nil {
		C.mp_cu_stream_destroy(b.ctx, b.settled)
	}
	C.mp_cu_stream_destroy(b.ctx, b.stream)
	if b.usePool {
		// give the pool's unused memory back (buffers still allocated keep theirs)
		C.mp_cu_pool_trim(b.ctx, b.pool)
	}
	C.mp_cu_primary_ctx_release(b.dev)
	return err
}
