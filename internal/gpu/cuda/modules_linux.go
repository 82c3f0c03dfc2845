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
	"sync"
	"time"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// moduleOptions are NVRTC options of one module template beyond the common ones. The pieces
// template (zc_uni_generated, generated straight-line code) left to itself takes 254 registers a
// thread, so an SM holds 8 warps (12.5 % occupancy) and its issue slots are 15 % busy; capped at
// 64 registers it spills, but holds 45 % occupancy and ran 367 µs a launch instead of 713 µs on
// an H200 (128: 481 µs, no spills; 96: 480 µs), keccakf-1024 prove 68.7 → 63.6 ms
// (docs/perf-notes/keccakf-kernel.md).
var moduleOptions = map[string][]string{
	"pieces": {"--maxrregcount=64"},
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

// moduleJob is one module of a BuildModules call.
type moduleJob struct {
	src, name, key string
	image          []byte
	fromCache      bool
}

// BuildModules implements driver.ModuleBuilder. A module's source is its template
// (kernels_<template>.gen.cu) with the generated code in place of the marker, compiled with the
// template's options and, where NVRTC has it, --Ofast-compile=min (generated straight-line
// code, which NVRTC's full optimisation takes minutes over). A module this process has already
// built is taken from memory, else from the disk cache (an entry that does not decode, or whose
// image the driver rejects, is compiled again and replaced); the rest are compiled side by side,
// one NVRTC program per host core (NVRTC is thread-safe), and cached. Each backend loads its own
// CUmodule of every image.
func (b *backend) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	loadMu.Lock()
	if !rtcLoaded {
		if err := loadNVRTC(nvrtcCandidates()); err != nil {
			loadMu.Unlock()
			return nil, err
		}
	}
	target, cubin, err := chooseTarget(b.major, b.minor, rtcArchs, rtcHasCubin)
	fast := rtcFastCompile
	loadMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("nvrtc %s (%s): %w", rtcVersion, rtcPath, err)
	}
	builds := make([]driver.ModuleBuild, len(ms))
	jobs := make([]moduleJob, len(ms))
	var todo []int
	for i, m := range ms {
		tmpl, ok := moduleSources[m.Template]
		if !ok {
			return nil, fmt.Errorf("cuda: module %s: no module template %q", m.ID, m.Template)
		}
		src, err := driver.Instantiate(tmpl, m.Code)
		if err != nil {
			return nil, fmt.Errorf("cuda: module %s: %w", m.ID, err)
		}
		key := cacheKey(src, target, rtcVersion, moduleOpts(m.Template, target, fast))
		jobs[i] = moduleJob{src: src, name: "kernels_" + m.Template + "_" + m.ID + ".cu", key: key}
		builds[i] = driver.ModuleBuild{ID: m.ID, Cached: true, CachePath: cachePath(b.cacheDir, key)}
		loadMu.Lock()
		img := images[key]
		loadMu.Unlock()
		if img != nil {
			jobs[i].image = img
			continue
		}
		if _, payload, err := readCache(b.cacheDir, key); err == nil {
			jobs[i].image, jobs[i].fromCache = payload, true
			continue
		}
		todo = append(todo, i)
	}
	if err := b.compileModules(ms, jobs, builds, todo, target, fast, cubin); err != nil {
		return nil, err
	}
	for i, m := range ms {
		mod, err := b.loadImage(jobs[i].image)
		if err != nil && jobs[i].fromCache {
			// A stale or damaged cache entry the driver rejects: compile it again.
			b.log.Warn().Str("cache", builds[i].CachePath).Err(err).Msg("cached CUDA module rejected by the driver; compiling it again")
			os.Remove(builds[i].CachePath)
			if err = b.compileModules(ms, jobs, builds, []int{i}, target, fast, cubin); err == nil {
				mod, err = b.loadImage(jobs[i].image)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("loading module %s (NVRTC %s, %s): %w", m.ID, rtcVersion, target, err)
		}
		loadMu.Lock()
		images[jobs[i].key] = jobs[i].image
		loadMu.Unlock()
		b.modMu.Lock()
		if old, ok := b.built[m.ID]; ok {
			C.mp_cu_module_unload(b.ctx, old)
		}
		b.built[m.ID] = mod
		b.modMu.Unlock()
	}
	return builds, nil
}

// moduleOpts are the NVRTC options of a module of template.
func moduleOpts(template, target string, fast bool) []string {
	opts := []string{"--gpu-architecture=" + target, "-std=c++17", "-default-device"}
	if fast {
		opts = append(opts, "--Ofast-compile=min")
	}
	return append(opts, moduleOptions[template]...)
}

// compileModules compiles the modules ms[i] for i in todo side by side (at most one NVRTC
// program per host core), writes each to the cache and sets jobs[i] and builds[i]. One log
// record says what is compiled before, one how long it took after.
func (b *backend) compileModules(ms []driver.ModuleSource, jobs []moduleJob, builds []driver.ModuleBuild, todo []int, target string, fast, cubin bool) error {
	if len(todo) == 0 {
		return nil
	}
	workers := min(len(todo), max(runtime.NumCPU(), 1))
	srcBytes := 0
	for _, i := range todo {
		srcBytes += len(jobs[i].src)
	}
	b.log.Info().Int("modules", len(todo)).Int("threads", workers).Str("what", ms[todo[0]].What).Int("source_bytes", srcBytes).
		Str("target", target).Str("nvrtc", rtcVersion).Msg("compiling CUDA modules with NVRTC (once per machine and driver: the results are cached)")
	start := time.Now()
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	errs := make([]error, len(todo))
	for n, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			img, elapsed, err := b.compileOnce(jobs[i], moduleOpts(ms[i].Template, target, fast), target, cubin)
			if err != nil {
				errs[n] = fmt.Errorf("module %s (%s): %w", ms[i].ID, ms[i].What, err)
				return
			}
			jobs[i].image, jobs[i].fromCache = img, false
			builds[i].Cached, builds[i].Elapsed = false, elapsed
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.log.Info().Int("modules", len(todo)).Str("elapsed", time.Since(start).Round(time.Millisecond).String()).
		Str("cache", b.cacheDir).Msg("CUDA modules compiled")
	return nil
}

// compileOnce compiles one module, or waits for the same compile in flight in this process, and
// caches the image.
func (b *backend) compileOnce(j moduleJob, opts []string, target string, cubin bool) ([]byte, time.Duration, error) {
	loadMu.Lock()
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
	e.image, e.err = compileNVRTC(j.src, j.name, target, opts, cubin)
	e.elapsed = time.Since(start)
	if e.err == nil {
		kind := byte(kindPTX)
		if cubin {
			kind = kindCubin
		}
		_ = writeCache(b.cacheDir, j.key, kind, e.image) // a failed write only costs a recompile
	}
	loadMu.Lock()
	if e.err == nil {
		images[j.key] = e.image
	}
	if compiles[j.key] == e {
		delete(compiles, j.key) // done: images holds the result; a failed compile may be retried
	}
	loadMu.Unlock()
	close(e.done)
	return e.image, e.elapsed, e.err
}
