//go:build linux && cgo

package cuda

/*
#include <stdlib.h>
#include "cudadl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// moduleOptions are NVRTC options of one module template beyond the common ones. The pieces
// template (zc_uni_generated, generated straight-line code) left to itself takes 254 registers a
// thread, so an SM holds 8 warps (12.5 % occupancy) and its issue slots are 15 % busy; capped at
// 64 registers it spills, but holds 45 % occupancy and ran 367 µs a launch instead of 713 µs on
// an H200 (128: 481 µs, no spills; 96: 480 µs), keccakf-1024 prove 68.7 → 63.6 ms
// (docs/perf-notes/keccakf-kernel.md). BB_SIGNFIX (babybear.h) ends its field operations with a
// product by the sign bit: zc_uni_generated 2,446 → 2,190 µs on an H200, every other kernel slower.
var moduleOptions = map[string][]string{
	"pieces": {"--maxrregcount=64", "-DBB_SIGNFIX"},
}

// compiles are the NVRTC compiles in flight in this process, by cache key (loadMu guards the
// map): backends that build the same module at the same time (proofs in flight on several
// streams) compile it once.
var compiles = map[string]*compileEntry{}

type compileEntry struct {
	done    chan struct{}
	image   []byte
	elapsed time.Duration
	err     error
}

// compileJob is one NVRTC compile of a BuildModules call: a module's whole source, or one of
// its parts (units and main code, compiled with -rdc and linked).
type compileJob struct {
	mod       int // index of the module in the call
	src, name string
	key       string
	opts      []string
	persist   bool // cached on disk (whole modules; parts only in this process)
	image     []byte
	elapsed   time.Duration
}

// BuildModules implements driver.ModuleBuilder. A module without units is its template
// (kernels_<template>.gen.cu) with the code in place of the marker, compiled whole; a module with
// units is compiled in parts, each unit after the template's preamble and the main code in the
// template, all with -rdc (relocatable device code), then linked by the driver's linker into one
// image. Compiles use the template's options and, where NVRTC has it, --Ofast-compile=min
// (generated straight-line code, which NVRTC's full optimisation takes minutes over). A module
// this process has already built (or Prebuild is building: it is waited for) is taken from
// memory, else from the disk cache (an entry that does not decode, or whose image the driver
// rejects, is built again and replaced); the compiles of all the modules left run side by side,
// one NVRTC program per host core (NVRTC is thread-safe), and each linked image is cached. Each
// backend loads its own CUmodule of every image.
func (b *backend) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	t0 := time.Now()
	target, cubin, fast, err := rtcTarget(b.major, b.minor)
	if err != nil {
		return nil, err
	}
	tRTC := time.Since(t0)
	p, err := b.planModules(ms, target, fast, false)
	if err != nil {
		return nil, err
	}
	tPlan := time.Since(t0) - tRTC
	if err := b.buildPlanned(ms, p, p.todo, target, fast, cubin, false); err != nil {
		return nil, err
	}
	t1 := time.Now()
	defer func() {
		b.log.Debug().Int("modules", len(ms)).Int("built", len(p.todo)).Dur("nvrtc_load", tRTC).Dur("plan", tPlan).
			Dur("load", time.Since(t1)).Dur("total", time.Since(t0)).Msg("CUDA modules built or loaded")
	}()
	for i, m := range ms {
		mod, err := b.loadImage(p.images[i])
		if err != nil && p.fromCache[i] {
			// A stale or damaged cache entry the driver rejects: build it again.
			b.log.Warn().Str("cache", p.builds[i].CachePath).Err(err).Msg("cached CUDA module rejected by the driver; building it again")
			os.Remove(p.builds[i].CachePath)
			if err = b.buildPlanned(ms, p, []int{i}, target, fast, cubin, false); err == nil {
				mod, err = b.loadImage(p.images[i])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("loading module %s (NVRTC %s, %s): %w", m.ID, rtcVersion, target, err)
		}
		storeImage(p.keys[i], p.images[i])
		b.modMu.Lock()
		if old, ok := b.built[m.ID]; ok {
			// the functions of the old module go with it
			C.mp_cu_module_unload(b.ctx, old)
			for name := range b.funcs {
				if strings.HasPrefix(name, m.ID+"/") {
					delete(b.funcs, name)
					delete(b.smemSet, name)
				}
			}
		}
		b.built[m.ID] = mod
		b.modMu.Unlock()
	}
	return p.builds, nil
}

// Prebuild builds modules for CUDA device opts.Device (opts.CacheDir, opts.Logger; Source is
// not used) without opening a backend: compiled as BuildModules compiles them, their images kept
// in this process's memory and written to the disk cache, so that a backend's BuildModules of
// the same sources later loads them, or waits for them while they are still compiling. A prover
// calls it as soon as it knows its statement's constraint code, beside the backend's Open, whose
// compile of the main module it overlaps: on a freshly started machine, whose CUDA JIT cache
// (~/.nv/ComputeCache, which NVRTC's output goes through) is empty, each takes seconds of code
// generation, at the same time rather than one after the other. Modules already in memory or in
// the disk cache are left as they are (cached, in the builds returned). The error of a failed
// compile names the module, as BuildModules's does.
func Prebuild(opts Options, ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if err := checkOrdinal(opts.Device); err != nil {
		return nil, err
	}
	b := &backend{log: opts.Logger, cacheDir: opts.CacheDir}
	if b.cacheDir == "" {
		b.cacheDir = defaultCacheDir()
	}
	if r := C.mp_cu_device_get(&b.dev, C.int(opts.Device)); r != 0 {
		return nil, cuErr("cuDeviceGet", "", r)
	}
	var major, minor C.int
	if r := C.mp_cu_device_attr(&major, C.MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, b.dev); r != 0 {
		return nil, cuErr("cuDeviceGetAttribute(compute capability major)", "", r)
	}
	if r := C.mp_cu_device_attr(&minor, C.MP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, b.dev); r != 0 {
		return nil, cuErr("cuDeviceGetAttribute(compute capability minor)", "", r)
	}
	b.major, b.minor = int(major), int(minor)
	target, cubin, fast, err := rtcTarget(b.major, b.minor)
	if err != nil {
		return nil, err
	}
	p, err := b.planModules(ms, target, fast, true)
	if err != nil {
		return nil, err
	}
	if len(p.todo) == 0 {
		return p.builds, nil
	}
	// The driver's linker needs a context of the device: its primary context, which the
	// backends of this device share.
	if r := C.mp_cu_primary_ctx_retain(&b.ctx, b.dev); r != 0 {
		return nil, cuErr("cuDevicePrimaryCtxRetain", "", r)
	}
	defer C.mp_cu_primary_ctx_release(b.dev)
	if err := b.buildPlanned(ms, p, p.todo, target, fast, cubin, true); err != nil {
		return nil, err
	}
	return p.builds, nil
}

// rtcTarget loads NVRTC (once) and chooses the target of a device of compute capability
// major.minor: the architecture, whether NVRTC gives a CUBIN for it, and whether it takes
// --Ofast-compile.
func rtcTarget(major, minor int) (target string, cubin, fast bool, err error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if !rtcLoaded {
		if err := loadNVRTC(nvrtcCandidates()); err != nil {
			return "", false, false, err
		}
	}
	target, cubin, err = chooseTarget(major, minor, rtcArchs, rtcHasCubin)
	if err != nil {
		return "", false, false, fmt.Errorf("nvrtc %s (%s): %w", rtcVersion, rtcPath, err)
	}
	return target, cubin, rtcFastCompile, nil
}

// modulePlan is where each module of a BuildModules or Prebuild call comes from: its cache key,
// its image (from memory or the disk cache; nil until built, or for Prebuild a module left in
// the disk cache) and the modules left to build (todo).
type modulePlan struct {
	builds    []driver.ModuleBuild
	keys      []string
	images    [][]byte
	fromCache []bool
	todo      []int
}

// planModules finds each module's image: in this process's memory (after waiting for a build of
// it running now), else in the disk cache (for Prebuild: only noted there), else it is to build.
// A module Prebuild built is reported to the first backend that takes it as compiled, with the
// compile's time (ahead: the plan of Prebuild itself, which takes nothing).
func (b *backend) planModules(ms []driver.ModuleSource, target string, fast, ahead bool) (*modulePlan, error) {
	p := &modulePlan{builds: make([]driver.ModuleBuild, len(ms)), keys: make([]string, len(ms)),
		images: make([][]byte, len(ms)), fromCache: make([]bool, len(ms))}
	for i, m := range ms {
		key, err := moduleKey(m, target, fast)
		if err != nil {
			return nil, err
		}
		p.keys[i] = key
		p.builds[i] = driver.ModuleBuild{ID: m.ID, Cached: true, CachePath: cachePath(b.cacheDir, key)}
		// A failed build in flight is no answer: this one compiles it, and its error says why.
		_ = modFlights.wait(key)
		if img := cachedImage(key); img != nil {
			p.images[i] = img
			if !ahead {
				if d, ok := modFlights.take(key); ok {
					p.builds[i].Cached, p.builds[i].Elapsed = false, d
				}
			}
			continue
		}
		if _, payload, err := readCache(b.cacheDir, key); err == nil {
			if !ahead {
				p.images[i], p.fromCache[i] = payload, true
			}
			continue
		}
		p.todo = append(p.todo, i)
	}
	return p, nil
}

// buildPlanned builds the modules which of plan p (buildImages), each registered as running
// while it builds, and puts their images in p and in this process's memory; ahead (Prebuild)
// records them as built ahead, for the backend that takes them.
func (b *backend) buildPlanned(ms []driver.ModuleSource, p *modulePlan, which []int, target string, fast, cubin, ahead bool) error {
	if len(which) == 0 {
		return nil
	}
	fl := make([]*flight, len(which))
	for n, i := range which {
		fl[n] = modFlights.start(p.keys[i])
	}
	imgs, elapsed, err := b.buildImages(ms, p.keys, which, target, fast, cubin)
	for n, i := range which {
		if err == nil {
			p.images[i], p.fromCache[i] = imgs[n], false
			p.builds[i].Cached, p.builds[i].Elapsed = false, elapsed
			storeImage(p.keys[i], imgs[n])
		}
		if fl[n] != nil {
			modFlights.finish(p.keys[i], fl[n], err, ahead, elapsed)
		}
	}
	return err
}

// storeImage keeps image as this process's image of key.
func storeImage(key string, image []byte) {
	loadMu.Lock()
	imagesByKey[key] = image
	loadMu.Unlock()
}

// cachedImage is the image this process built or loaded for key, or nil.
func cachedImage(key string) []byte {
	loadMu.Lock()
	defer loadMu.Unlock()
	return imagesByKey[key]
}

// moduleKey is the cache key of module m's image: its sources, target, NVRTC and options.
func moduleKey(m driver.ModuleSource, target string, fast bool) (string, error) {
	parts, err := moduleParts(m)
	if err != nil {
		return "", err
	}
	opts := moduleOpts(m.Template, target, fast, len(m.Units) > 0)
	if len(m.Units) > 0 {
		opts = append(opts, fmt.Sprintf("linked:%d", len(parts)))
	}
	return cacheKey(strings.Join(parts, "\x00"), target, rtcVersion, opts), nil
}

// moduleParts are the sources module m compiles: its whole source, or each unit after the
// template's preamble and then the template with the main code.
func moduleParts(m driver.ModuleSource) ([]string, error) {
	tmpl, ok := moduleSources[m.Template]
	if !ok {
		return nil, fmt.Errorf("cuda: module %s: no module template %q", m.ID, m.Template)
	}
	main, err := driver.Instantiate(tmpl, m.Code)
	if err != nil {
		return nil, fmt.Errorf("cuda: module %s: %w", m.ID, err)
	}
	if len(m.Units) == 0 {
		return []string{main}, nil
	}
	pre, err := driver.Preamble(tmpl)
	if err != nil {
		return nil, fmt.Errorf("cuda: module %s: %w", m.ID, err)
	}
	parts := make([]string, 0, len(m.Units)+1)
	for _, u := range m.Units {
		parts = append(parts, pre+u)
	}
	return append(parts, main), nil
}

// moduleOpts are the NVRTC options of a module of template (rdc: a part to link).
func moduleOpts(template, target string, fast, rdc bool) []string {
	opts := []string{"--gpu-architecture=" + target, "-std=c++17", "-default-device"}
	if fast && !fullOptimize[template] {
		opts = append(opts, "--Ofast-compile=min")
	}
	if rdc {
		opts = append(opts, "--relocatable-device-code=true")
	}
	return append(opts, moduleOptions[template]...)
}

// fullOptimize are the module templates compiled without --Ofast-compile (as the main module
// is): their modules are small (one AIR's short program). The whole template's kernel
// zc_uni_whole of interaction-pair 2^20 took 1,761 µs a proof with --Ofast-compile=min and
// 1,001 µs without, against 1,101 µs for the interpreter (zc_uni_eval) on an H200
// (docs/perf-notes/constraints.md).
var fullOptimize = map[string]bool{"whole": true}

// buildImages builds the images of the modules ms[i], i in which: every part of every one
// compiled side by side (at most one NVRTC program per host core), the parts of a module with
// units linked, each image written to the cache under keys[i]. One log record says what is
// compiled before, one how long it took after; elapsed is the whole build's wall time.
func (b *backend) buildImages(ms []driver.ModuleSource, keys []string, which []int, target string, fast, cubin bool) ([][]byte, time.Duration, error) {
	if len(which) == 0 {
		return nil, 0, nil
	}
	var jobs []*compileJob
	srcBytes := 0
	for _, i := range which {
		parts, err := moduleParts(ms[i])
		if err != nil {
			return nil, 0, err
		}
		linked := len(ms[i].Units) > 0
		opts := moduleOpts(ms[i].Template, target, fast, linked)
		for n, p := range parts {
			name := fmt.Sprintf("kernels_%s_%s.cu", ms[i].Template, ms[i].ID)
			if linked {
				name = fmt.Sprintf("kernels_%s_%s_part%d.cu", ms[i].Template, ms[i].ID, n)
			}
			jobs = append(jobs, &compileJob{mod: i, src: p, name: name, opts: opts, persist: !linked,
				key: cacheKey(p, target, rtcVersion, opts)})
			srcBytes += len(p)
		}
	}
	workers := min(len(jobs), max(runtime.NumCPU(), 1))
	b.log.Info().Int("compiles", len(jobs)).Int("threads", workers).Str("what", ms[which[0]].What).Int("source_bytes", srcBytes).
		Str("target", target).Str("nvrtc", rtcVersion).Msg("compiling CUDA modules with NVRTC (once per machine and driver: the results are cached)")
	start := time.Now()
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for n, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if j.image, j.elapsed, errs[n] = b.compileOnce(j, target, cubin); errs[n] != nil {
				errs[n] = fmt.Errorf("module %s (%s): %w", ms[j.mod].ID, ms[j.mod].What, errs[n])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	out := make([][]byte, len(which))
	for n, i := range which {
		var parts [][]byte
		for _, j := range jobs {
			if j.mod == i {
				parts = append(parts, j.image)
			}
		}
		if len(ms[i].Units) == 0 {
			out[n] = parts[0]
			continue
		}
		img, err := b.link(parts, !cubin)
		if err != nil {
			return nil, 0, fmt.Errorf("module %s (%s): %w", ms[i].ID, ms[i].What, err)
		}
		_ = writeCache(b.cacheDir, keys[i], kindCubin, img) // a failed write only costs a rebuild
		out[n] = img
	}
	elapsed := time.Since(start)
	b.log.Info().Int("modules", len(which)).Str("elapsed", elapsed.Round(time.Millisecond).String()).
		Str("cache", b.cacheDir).Msg("CUDA modules compiled")
	return out, elapsed, nil
}

// link links relocatable images (cubins; PTX when ptx) into one cubin.
func (b *backend) link(parts [][]byte, ptx bool) ([]byte, error) {
	n := len(parts)
	cimgs := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(cimgs)
	csizes := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.size_t(0))))
	defer C.free(csizes)
	imgv := unsafe.Slice((*unsafe.Pointer)(cimgs), n)
	sizev := unsafe.Slice((*C.size_t)(csizes), n)
	for i, p := range parts {
		imgv[i] = C.CBytes(p)
		defer C.free(imgv[i])
		sizev[i] = C.size_t(len(p))
	}
	var out unsafe.Pointer
	var size C.size_t
	var logBuf [4096]C.char
	cptx := C.int(0)
	if ptx {
		cptx = 1
	}
	r := C.mp_cu_link(b.ctx, C.int(n), (*unsafe.Pointer)(cimgs), (*C.size_t)(csizes), cptx, &out, &size, &logBuf[0], C.size_t(len(logBuf)))
	if r != 0 {
		err := cuErr("cuLinkComplete", "", r)
		if msg := strings.TrimSpace(C.GoString(&logBuf[0])); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, err
	}
	defer C.free(out)
	return C.GoBytes(out, C.int(size)), nil
}

// compileOnce compiles one source, or waits for the same compile in flight in this process; a
// persistent job's image is cached on disk.
func (b *backend) compileOnce(j *compileJob, target string, cubin bool) ([]byte, time.Duration, error) {
	loadMu.Lock()
	if img := imagesByKey[j.key]; img != nil {
		loadMu.Unlock()
		return img, 0, nil
	}
	if e := compiles[j.key]; e != nil {
		loadMu.Unlock()
		<-e.done
		if e.err == nil {
			return e.image, e.elapsed, nil
		}
		loadMu.Lock()
	}
	e := &compileEntry{done: make(chan struct{})}
	compiles[j.key] = e
	loadMu.Unlock()
	start := time.Now()
	e.image, e.err = compileNVRTC(j.src, j.name, target, j.opts, cubin)
	e.elapsed = time.Since(start)
	if e.err == nil && j.persist {
		kind := byte(kindPTX)
		if cubin {
			kind = kindCubin
		}
		_ = writeCache(b.cacheDir, j.key, kind, e.image) // a failed write only costs a recompile
	}
	loadMu.Lock()
	if e.err == nil && j.persist {
		imagesByKey[j.key] = e.image
	}
	if compiles[j.key] == e {
		delete(compiles, j.key) // done; a failed compile may be retried
	}
	loadMu.Unlock()
	close(e.done)
	return e.image, e.elapsed, e.err
}
