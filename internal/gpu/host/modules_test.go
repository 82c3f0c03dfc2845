package host_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

// The modules of these tests complete the pieces template (zc_uni_generated) with an AIR of one
// piece that does nothing: a dispatch with p.zero set and no points zeroes the partial rows,
// which shows that the module's kernel ran. internal/kernels compares real AIRs' generated code
// with the interpreter. Every test's code carries a nonce, so that no test finds another's
// library among those this process has loaded.

// testSource is a module of the pieces template whose code is unique to this call.
func testSource(t *testing.T, extra string) driver.ModuleSource {
	t.Helper()
	nonce := fmt.Sprintf("%s-%016x", strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), rand.Uint64())
	code := fmt.Sprintf(`// module of %s
#define AIR_PIECE_FIRST 0u
#define AIR_PIECE_COUNT 1u
MSL_FN void air_piece(uint k, PG_DEVICE const uint* vals, uint P, uint pt, PG_DEVICE const uint* cp, PG_DEVICE const uint* w, PG_THREAD bb4* sums) {}
%s
`, nonce, extra)
	return driver.ModuleSource{ID: "pieces-" + nonce, Template: "pieces", Code: code, What: "test module " + nonce}
}

// openCached opens a host device whose modules are cached in dir.
func openCached(t *testing.T, dir string) *gpu.Device {
	t.Helper()
	be, err := host.OpenOptions(host.Options{CacheDir: dir})
	must(t, err)
	d, err := gpu.NewDevice(gpu.KindHost, be)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func buildOne(t *testing.T, d *gpu.Device, src driver.ModuleSource) *gpu.Module {
	t.Helper()
	ms, err := d.BuildModules([]driver.ModuleSource{src})
	must(t, err)
	if len(ms) != 1 || ms[0].ID() != src.ID {
		t.Fatalf("built %d modules", len(ms))
	}
	return ms[0]
}

// runZero dispatches m's zc_uni_generated over 3 groups of 5 threads with p.zero set and no
// points: every partial row of every thread must be zeroed.
func runZero(t *testing.T, d *gpu.Device, m *gpu.Module) {
	t.Helper()
	const groups, tpg, lanes = 3, 5, 16
	partials := make([]uint32, 12*lanes*groups*tpg)
	for i := range partials {
		partials[i] = 0xdeadbeef
	}
	out := upload(t, d, "partials", partials)
	words := alloc(t, d, "inputs", 64)
	// ZcUniPiecesParams: log_m x0 points width npieces nslots nregs has_den nout zero eq_off interleave lanes
	p := gpu.U32(0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, lanes)
	in := gpu.Buf(words.Buffer)
	must(t, d.Batch().DispatchIn(m, "zc_uni_generated", gpu.D1(groups), gpu.D1(tpg), []gpu.Arg{in, in, in, in, in, gpu.Buf(out.Buffer), p}).Wait())
	for i, v := range read(t, out) {
		if v != 0 {
			t.Fatalf("partials[%d] = %#x: the module's kernel did not run", i, v)
		}
	}
}

// TestBuildModulesCache: a first build compiles (Cached false, the compile's time, an entry in
// the cache directory) and the kernel runs; another device of this process reuses the loaded
// library (Cached true); with the process's libraries forgotten, a device loads the entry from
// disk (Cached true) and runs it.
func TestBuildModulesCache(t *testing.T) {
	dir := t.TempDir()
	src := testSource(t, "")
	d1 := openCached(t, dir)
	m := buildOne(t, d1, src)
	b := m.Build()
	if b.Cached || b.Elapsed <= 0 || filepath.Dir(b.CachePath) != dir {
		t.Fatalf("first build: %+v (cache %s)", b, dir)
	}
	t.Logf("compiled in %v: %s", b.Elapsed, b.CachePath)
	if _, err := os.Stat(b.CachePath); err != nil {
		t.Fatal(err)
	}
	runZero(t, d1, m)
	if again := buildOne(t, d1, src); again != m {
		t.Error("a second build on the same device made a new module")
	}

	d2 := openCached(t, dir)
	m2 := buildOne(t, d2, src)
	if b2 := m2.Build(); !b2.Cached || b2.Elapsed != 0 || b2.CachePath != b.CachePath {
		t.Errorf("second device: %+v", b2)
	}
	runZero(t, d2, m2)

	host.ForgetModules()
	d3 := openCached(t, dir)
	m3 := buildOne(t, d3, src)
	if b3 := m3.Build(); !b3.Cached || b3.CachePath != b.CachePath {
		t.Errorf("from disk: %+v", b3)
	}
	runZero(t, d3, m3)
	runZero(t, d1, m) // the first device's module still runs
}

// TestBuildModulesCorruptCache: a cache entry with a flipped byte (in the library, in the
// digest, in the magic) or cut short is detected by its digest, never loaded: the module is
// compiled again (Cached false), the entry replaced by a good one, and the kernel runs.
func TestBuildModulesCorruptCache(t *testing.T) {
	dir := t.TempDir()
	src := testSource(t, "")
	m := buildOne(t, openCached(t, dir), src)
	file := m.Build().CachePath
	good, err := os.ReadFile(file)
	must(t, err)
	if _, err := host.DecodeEntry(good); err != nil {
		t.Fatalf("fresh entry: %v", err)
	}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0x20; return b }
	}
	for _, c := range []struct {
		name    string
		corrupt func([]byte) []byte
	}{
		{"flipped byte in the library", flip(len(good) / 2)},
		{"flipped last byte", flip(len(good) - 1)},
		{"flipped byte in the digest", flip(20)},
		{"flipped byte in the magic", flip(0)},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"header only", func(b []byte) []byte { return b[:44] }},
		{"empty", func(b []byte) []byte { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := c.corrupt(append([]byte(nil), good...))
			if _, err := host.DecodeEntry(bad); err == nil {
				t.Fatal("the corrupted entry decodes")
			}
			must(t, os.WriteFile(file, bad, 0o644))
			host.ForgetModules()
			d := openCached(t, dir)
			m := buildOne(t, d, src)
			if b := m.Build(); b.Cached || b.CachePath != file {
				t.Fatalf("build over a corrupt entry: %+v", b)
			}
			runZero(t, d, m)
			now, err := os.ReadFile(file)
			must(t, err)
			if _, err := host.DecodeEntry(now); err != nil {
				t.Fatalf("rebuilt entry: %v", err)
			}
		})
	}
}

// TestBuildModulesConcurrent: devices building the same new module at the same time compile it
// once; the others take the library compiled meanwhile (Cached true). Several modules in one
// call are built side by side.
func TestBuildModulesConcurrent(t *testing.T) {
	dir := t.TempDir()
	srcs := []driver.ModuleSource{testSource(t, "// a"), testSource(t, "// b"), testSource(t, "// c")}
	const devices = 3
	devs := make([]*gpu.Device, devices)
	for i := range devs {
		devs[i] = openCached(t, dir)
	}
	mods := make([][]*gpu.Module, devices)
	errs := make([]error, devices)
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mods[i], errs[i] = d.BuildModules(srcs)
		}()
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	for s := range srcs {
		compiled := 0
		for i := range devs {
			if !mods[i][s].Build().Cached {
				compiled++
			}
			runZero(t, devs[i], mods[i][s])
		}
		if compiled != 1 {
			t.Errorf("module %d compiled %d times", s, compiled)
		}
	}
}

// TestBuildModulesUnits: a module whose code calls functions of its units (compiled on their own
// after the template's preamble, linked into the module's library) builds, is cached as one
// entry and runs; a call to a function no unit defines fails at the link, naming it.
func TestBuildModulesUnits(t *testing.T) {
	const hidden = `__attribute__((visibility("hidden")))`
	unit := func(i int) string {
		return fmt.Sprintf("%s uint hd_test_unit_%d(uint x) { return bb_add(x, %du); }\n", hidden, i, i+1)
	}
	calls := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "extern %s uint hd_test_unit_%d(uint x);\nuint hd_test_call_%d(uint x) { return hd_test_unit_%d(x); }\n", hidden, i, i, i)
		}
		return b.String()
	}
	dir := t.TempDir()
	src := testSource(t, calls(3))
	src.Units = []string{unit(0), unit(1), unit(2)}
	d := openCached(t, dir)
	m := buildOne(t, d, src)
	if b := m.Build(); b.Cached || filepath.Dir(b.CachePath) != dir {
		t.Fatalf("build: %+v", b)
	}
	runZero(t, d, m)
	entries, err := filepath.Glob(filepath.Join(dir, "*.mphost"))
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("cache entries %v, want one for the module", entries)
	}

	missing := testSource(t, calls(3))
	missing.Units = []string{unit(0), unit(2)}
	_, err = d.BuildModules([]driver.ModuleSource{missing})
	if err == nil || !strings.Contains(err.Error(), "linking") || !strings.Contains(err.Error(), "hd_test_unit_1") {
		t.Errorf("unit missing: %v", err)
	}
	broken := testSource(t, "")
	broken.Units = []string{unit(0), "not C++ either"}
	_, err = d.BuildModules([]driver.ModuleSource{broken})
	if err == nil || !strings.Contains(err.Error(), "unit 1") {
		t.Errorf("unit that does not compile: %v", err)
	}
}

// TestBuildModulesErrors: a module that does not compile fails with the compiler's message; no
// C++ compiler (CXX naming a missing program, or none on PATH) fails saying what is missing; a
// template kernel cannot run from the main table.
func TestBuildModulesErrors(t *testing.T) {
	d := openCached(t, t.TempDir())
	bad := testSource(t, "this is not C++;")
	_, err := d.BuildModules([]driver.ModuleSource{bad})
	if err == nil || !strings.Contains(err.Error(), bad.ID) || !strings.Contains(err.Error(), "error") {
		t.Errorf("bad code: %v", err)
	}

	t.Setenv("CXX", "/nonexistent/c++")
	_, err = d.BuildModules([]driver.ModuleSource{testSource(t, "")})
	if err == nil || !strings.Contains(err.Error(), "CXX") || !strings.Contains(err.Error(), "/nonexistent/c++") {
		t.Errorf("CXX missing: %v", err)
	}
	t.Setenv("CXX", "")
	t.Setenv("PATH", t.TempDir())
	_, err = d.BuildModules([]driver.ModuleSource{testSource(t, "")})
	if err == nil || !strings.Contains(err.Error(), "c++, g++, clang++") {
		t.Errorf("no compiler: %v", err)
	}

	be, err := host.Open(0)
	must(t, err)
	defer be.Close()
	for i := range driver.Kernels {
		if k := driver.Kernels[i]; k.Module != "" {
			if err := be.Dispatch(&k, gpu.D1(1), gpu.D1(1), make([]driver.Arg, k.NBuf), make([]uint32, k.NTG)); err == nil || !strings.Contains(err.Error(), "module") {
				t.Errorf("%s from the main table: %v", k.Name, err)
			}
			k.Built = "pieces-not-built"
			if _, err := be.KernelLimits(&k); err == nil || !strings.Contains(err.Error(), "not built") {
				t.Errorf("%s of a module not built: %v", k.Name, err)
			}
		}
	}
}
