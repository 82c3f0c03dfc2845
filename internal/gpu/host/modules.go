package host

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "hd_runtime.h"

// RTLD_NOW: an unresolved symbol fails the load, not a kernel; RTLD_LOCAL: every module defines
// hd_module_kernels, which must not bind across modules.
static void* hd_mod_open(const char* path, char* err, int errlen) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		snprintf(err, (size_t)errlen, "%s", e ? e : "dlopen failed");
	}
	return h;
}
static const hd_kernel* hd_mod_table(void* h, int* n) {
	const hd_kernel* t = (const hd_kernel*)dlsym(h, "hd_module_kernels");
	const int* nk = (const int*)dlsym(h, "hd_module_nkernels");
	if (!t || !nk) return NULL;
	*n = *nk;
	return t;
}
static const hd_kernel* hd_mod_entry(const hd_kernel* t, int i) { return &t[i]; }
static void hd_mod_close(void* h) { dlclose(h); }
*/
import "C"

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Modules built at run time (driver.ModuleBuilder): a module template of modules/ (scripts/mslgen
// writes modules/NAME.gen.cpp per `// mslgen:module NAME` kernel file) completed with generated
// code, and its units, each after the template's preamble, compiled by the system's C++ compiler
// into objects side by side and linked into one shared library, cached on disk, loaded with
// dlopen; its table hd_module_kernels holds the kernels that Dispatch runs when KernelInfo.Built
// names the module. The template and the two headers it includes are embedded, so a compile
// needs nothing of the source tree.
//
//go:embed modules/*.gen.cpp hd_runtime.h hd_glue.h
var moduleFiles embed.FS

// moduleHeaders are the files a module template includes, by name.
var moduleHeaders = []string{"hd_runtime.h", "hd_glue.h"}

// moduleSources are the embedded templates by name and the headers by file name.
var moduleSources = sync.OnceValues(func() (map[string]string, map[string]string) {
	tmpls, headers := map[string]string{}, map[string]string{}
	names, _ := fs.Glob(moduleFiles, "modules/*.gen.cpp")
	for _, n := range names {
		b, _ := moduleFiles.ReadFile(n)
		tmpls[strings.TrimSuffix(path.Base(n), ".gen.cpp")] = string(b)
	}
	for _, n := range moduleHeaders {
		b, _ := moduleFiles.ReadFile(n)
		headers[n] = string(b)
	}
	return tmpls, headers
})

// compileFlags compile a module's sources into objects, linkFlags link them. -O1: the pieces'
// code serves tests on the host device (its interpreter is faster there), and 2,800 of Keccak-f's
// instructions compile in about a second at -O1. HD_NO_CLONES: template kernels are not lane
// kernels (zc_uni_generated runs its piece code per lane), so the AVX copies of hd_glue.h would
// triple the compile for nothing. -z defs (Linux): a module may not use the runtime's symbols
// (hd_threadgroup_barrier, ...), which a Go executable does not export to libraries it loads, and
// a unit's function missing is an error too: better a link error naming the symbol than a failed
// dlopen. macOS links dynamic libraries with -undefined error by default.
var (
	compileFlags = []string{"-std=c++17", "-O1", "-g0", "-fPIC", "-Wno-psabi", "-DHD_NO_CLONES"}
	linkFlags    = func() []string {
		f := []string{"-shared"}
		if runtime.GOOS == "linux" {
			f = append(f, "-Wl,-z,defs")
		}
		return f
	}()
)

// moduleLib is a loaded module library. Libraries stay loaded for the life of the process: any
// host backend may dispatch their kernels.
type moduleLib struct {
	handle  unsafe.Pointer
	kernels map[string]*C.hd_kernel
}

var (
	// libMu guards libs and pending.
	libMu sync.Mutex
	// libs are the libraries this process has loaded, by cache key: a second backend (or a
	// second build of the same code) takes them from here.
	libs = map[string]*moduleLib{}
	// pending are the builds in flight by cache key, so that backends building the same module
	// at the same time compile it once.
	pending = map[string]*libBuild{}
	// compileSlots bounds the compilers running at once, process-wide: one per core.
	compileSlots = make(chan struct{}, max(runtime.NumCPU(), 1))
)

type libBuild struct {
	done chan struct{}
	lib  *moduleLib
	err  error
}

// compiler is the system C++ compiler: argv (the program, resolved, and the arguments CXX may
// carry, as cgo allows) and the first line of its --version, which names it in the cache key.
type compiler struct {
	argv []string
	id   string
}

// findCompiler returns $CXX, else the first of c++, g++, clang++ on PATH.
func findCompiler() (compiler, error) {
	if env := strings.TrimSpace(os.Getenv("CXX")); env != "" {
		f := strings.Fields(env)
		p, err := exec.LookPath(f[0])
		if err != nil {
			return compiler{}, fmt.Errorf("host: building modules: the C++ compiler CXX=%q: %w", env, err)
		}
		return identify(append([]string{p}, f[1:]...))
	}
	for _, name := range []string{"c++", "g++", "clang++"} {
		if p, err := exec.LookPath(name); err == nil {
			return identify([]string{p})
		}
	}
	return compiler{}, errors.New("host: building modules needs a C++ compiler: none of CXX (unset), c++, g++, clang++ found on PATH")
}

func identify(argv []string) (compiler, error) {
	out, err := exec.Command(argv[0], append(argv[1:len(argv):len(argv)], "--version")...).Output()
	if err != nil {
		return compiler{}, fmt.Errorf("host: building modules: %s --version: %w", strings.Join(argv, " "), err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return compiler{argv: argv, id: strings.TrimSpace(line)}, nil
}

// moduleJob is one module of a BuildModules call.
type moduleJob struct {
	src      driver.ModuleSource
	sources  []string // the template with the generated code, then each unit after the preamble
	key      string
	template []*driver.KernelInfo
}

// BuildModules implements driver.ModuleBuilder: a module's main source is its template
// (modules/<template>.gen.cpp) with the generated code in place of the marker, and each unit is
// a source of its own after the template's preamble; the system's C++ compiler compiles them
// into objects side by side (one compiler per core, process-wide) and links them into a shared
// library, kept in the disk cache under its key. A library this process has loaded is reused as
// it is, else a cache entry whose digest holds is loaded, else (no entry, a corrupt one, or one
// that does not load) the module is compiled and the entry replaced. The compiler is needed even
// when everything is cached: its identity is part of the key.
func (h *Backend) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	tmpls, headers := moduleSources()
	jobs := make([]moduleJob, len(ms))
	for i, m := range ms {
		tmpl, ok := tmpls[m.Template]
		if !ok {
			return nil, fmt.Errorf("host: module %s: no module template %q", m.ID, m.Template)
		}
		code, err := driver.Instantiate(tmpl, m.Code)
		if err != nil {
			return nil, fmt.Errorf("host: module %s: %w", m.ID, err)
		}
		jobs[i] = moduleJob{src: m, sources: []string{code}}
		if len(m.Units) > 0 {
			pre, err := driver.Preamble(tmpl)
			if err != nil {
				return nil, fmt.Errorf("host: module %s: %w", m.ID, err)
			}
			for _, u := range m.Units {
				jobs[i].sources = append(jobs[i].sources, pre+u+"\n")
			}
		}
		for k := range driver.Kernels {
			if driver.Kernels[k].Module == m.Template {
				jobs[i].template = append(jobs[i].template, &driver.Kernels[k])
			}
		}
	}
	cxx, err := findCompiler()
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		jobs[i].key = cacheKey(jobs[i].sources, headers, cxx.id, slices.Concat(compileFlags, []string{"--"}, linkFlags), runtime.GOOS, runtime.GOARCH)
	}
	work, err := os.MkdirTemp("", "metalprove-host-modules-*")
	if err != nil {
		return nil, fmt.Errorf("host: building modules: %w", err)
	}
	defer os.RemoveAll(work)
	for name, text := range headers {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("host: building modules: %w", err)
		}
	}
	builds := make([]driver.ModuleBuild, len(ms))
	loaded := make([]*moduleLib, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := &jobs[i]
			lib, cached, elapsed, err := h.obtain(cxx, work, j)
			if err != nil {
				errs[i] = fmt.Errorf("host: module %s (%s): %w", j.src.ID, j.src.What, err)
				return
			}
			loaded[i] = lib
			builds[i] = driver.ModuleBuild{ID: j.src.ID, Cached: cached, Elapsed: elapsed, CachePath: cachePath(h.cacheDir, j.key)}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h.modMu.Lock()
	for i, m := range ms {
		h.built[m.ID] = loaded[i]
	}
	h.modMu.Unlock()
	return builds, nil
}

// obtain returns the library of j: this process's, or the one another goroutine is building,
// or one loaded from the cache or compiled now (cached false).
func (h *Backend) obtain(cxx compiler, work string, j *moduleJob) (lib *moduleLib, cached bool, elapsed time.Duration, err error) {
	libMu.Lock()
	if lib := libs[j.key]; lib != nil {
		libMu.Unlock()
		return lib, true, 0, nil
	}
	if p := pending[j.key]; p != nil {
		libMu.Unlock()
		<-p.done
		return p.lib, true, 0, p.err
	}
	p := &libBuild{done: make(chan struct{})}
	pending[j.key] = p
	libMu.Unlock()
	lib, cached, elapsed, err = h.loadOrCompile(cxx, work, j)
	libMu.Lock()
	delete(pending, j.key)
	if err == nil {
		libs[j.key] = lib
	}
	p.lib, p.err = lib, err
	libMu.Unlock()
	close(p.done)
	return lib, cached, elapsed, err
}

// loadOrCompile loads j's library from the cache, or compiles it and caches it.
func (h *Backend) loadOrCompile(cxx compiler, work string, j *moduleJob) (*moduleLib, bool, time.Duration, error) {
	file := cachePath(h.cacheDir, j.key)
	payload, err := readCache(h.cacheDir, j.key)
	if err == nil {
		lib, lerr := loadLibrary(payload, h.cacheDir, j.template)
		if lerr == nil {
			return lib, true, 0, nil
		}
		err = lerr
	}
	if !errors.Is(err, os.ErrNotExist) {
		// A corrupt entry, or one that does not load: never trusted, replaced below.
		os.Remove(file)
	}
	start := time.Now()
	payload, err = compileModule(cxx, work, j)
	elapsed := time.Since(start)
	if err != nil {
		return nil, false, 0, err
	}
	_ = writeCache(h.cacheDir, j.key, payload) // a failed write only costs a compile next time
	lib, err := loadLibrary(payload, h.cacheDir, j.template)
	if err != nil {
		return nil, false, 0, err
	}
	return lib, false, elapsed, nil
}

// compileModule compiles j's sources into objects side by side in the private directory work
// (which holds the headers), links them, and returns the library's bytes.
func compileModule(cxx compiler, work string, j *moduleJob) ([]byte, error) {
	base := filepath.Join(work, j.key)
	objs := make([]string, len(j.sources))
	errs := make([]error, len(j.sources))
	var wg sync.WaitGroup
	for i, text := range j.sources {
		src := fmt.Sprintf("%s.%d.cpp", base, i)
		objs[i] = fmt.Sprintf("%s.%d.o", base, i)
		defer os.Remove(src)
		defer os.Remove(objs[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			what := "the main source"
			if i > 0 {
				what = fmt.Sprintf("unit %d", i-1)
			}
			if err := os.WriteFile(src, []byte(text), 0o600); err != nil {
				errs[i] = err
				return
			}
			if err := runCompiler(cxx, work, slices.Concat(compileFlags, []string{"-c", "-o", objs[i], src})); err != nil {
				errs[i] = fmt.Errorf("compiling %s: %w", what, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lib := base + ".so"
	defer os.Remove(lib)
	if err := runCompiler(cxx, work, slices.Concat(linkFlags, []string{"-o", lib}, objs)); err != nil {
		return nil, fmt.Errorf("linking: %w", err)
	}
	return os.ReadFile(lib)
}

// runCompiler runs the compiler with args in dir when a compile slot is free; an error carries
// the start of its messages.
func runCompiler(cxx compiler, dir string, args []string) error {
	compileSlots <- struct{}{}
	defer func() { <-compileSlots }()
	cmd := exec.Command(cxx.argv[0], slices.Concat(cxx.argv[1:], args)...)
	cmd.Dir = dir
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		text := strings.TrimSpace(msg.String())
		if len(text) > 4000 {
			text = text[:4000] + "…"
		}
		return fmt.Errorf("%s (%s): %w\n%s", strings.Join(cxx.argv, " "), cxx.id, err, text)
	}
	return nil
}

// loadLibrary dlopens the library bytes lib, which the caller verified, from a file of its own
// in a private directory (removed once loaded: the mapping outlives it), so the bytes loaded are
// the bytes verified whatever happens to the cache meanwhile; under os.TempDir(), else under the
// cache directory (a temporary directory may be mounted noexec). The library's table must hold
// exactly the template's kernels, with the table's signatures.
func loadLibrary(lib []byte, cacheDir string, template []*driver.KernelInfo) (*moduleLib, error) {
	var errs []error
	for _, parent := range []string{"", cacheDir} {
		if parent != "" {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		m, err := loadFrom(parent, lib)
		if err == nil {
			if err = checkModule(m, template); err == nil {
				return m, nil
			}
			C.hd_mod_close(m.handle)
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("loading the module library: %w", errors.Join(errs...))
}

func loadFrom(parent string, lib []byte) (*moduleLib, error) {
	dir, err := os.MkdirTemp(parent, ".metalprove-load-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "module.so")
	if err := os.WriteFile(file, lib, 0o500); err != nil {
		return nil, err
	}
	cpath := C.CString(file)
	defer C.free(unsafe.Pointer(cpath))
	var errbuf [512]C.char
	h := C.hd_mod_open(cpath, &errbuf[0], C.int(len(errbuf)))
	if h == nil {
		return nil, fmt.Errorf("dlopen: %s", C.GoString(&errbuf[0]))
	}
	var n C.int
	t := C.hd_mod_table(h, &n)
	if t == nil || n < 0 || n > 1024 {
		C.hd_mod_close(h)
		return nil, errors.New("the library has no kernel table (hd_module_kernels, hd_module_nkernels)")
	}
	m := &moduleLib{handle: h, kernels: map[string]*C.hd_kernel{}}
	for i := 0; i < int(n); i++ {
		e := C.hd_mod_entry(t, C.int(i))
		m.kernels[C.GoString(e.name)] = e
	}
	return m, nil
}

// checkModule checks that m's kernels are the template's, as the Go table declares them.
func checkModule(m *moduleLib, template []*driver.KernelInfo) error {
	if len(m.kernels) != len(template) {
		return fmt.Errorf("the library has %d kernels, the template %d; rerun go generate", len(m.kernels), len(template))
	}
	for _, g := range template {
		e := m.kernels[g.Name]
		if e == nil {
			return fmt.Errorf("the library lacks kernel %s; rerun go generate", g.Name)
		}
		if err := sameKernel(cKernelOf(e), g); err != nil {
			return err
		}
	}
	return nil
}

// moduleKernel returns the compiled kernel k of the module k.Built built on this backend.
func (h *Backend) moduleKernel(k *driver.KernelInfo) (*C.hd_kernel, error) {
	h.modMu.RLock()
	lib := h.built[k.Built]
	h.modMu.RUnlock()
	if lib == nil {
		return nil, fmt.Errorf("host: module %s is not built on this device", k.Built)
	}
	e := lib.kernels[k.Name]
	if e == nil {
		return nil, fmt.Errorf("host: module %s has no kernel %s", k.Built, k.Name)
	}
	return e, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
