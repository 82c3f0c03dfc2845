//go:build linux && cgo

package cuda

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// piecesModule is the module of a's generated round-0 code, as internal/kernels makes it.
func piecesModule(t *testing.T, a air.Air, id string) driver.ModuleSource {
	t.Helper()
	vk, err := air.Keygen(a, 255, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := constraints.Split(vk, constraints.All, constraints.DevicePieces)
	if err != nil {
		t.Fatal(err)
	}
	us, err := piececode.Units(ps, a.Name())
	if err != nil {
		t.Fatal(err)
	}
	main, err := piececode.Main(us, len(ps), a.Name())
	if err != nil {
		t.Fatal(err)
	}
	m := driver.ModuleSource{ID: id, Template: "pieces", Code: main, What: a.Name()}
	for _, u := range us {
		m.Units = append(m.Units, u.Code)
	}
	return m
}

// Modules built from the pieces template, in linked units: compiled once, then from this
// process's memory, then from the disk cache by a new process; a corrupted cache file is detected
// by its digest and rebuilt; every build gives a kernel the driver resolves.
func TestGPUBuildModules(t *testing.T) {
	forgetImages()
	dir := t.TempDir()
	opts := Options{CacheDir: dir}
	b1 := openGPU(t, opts)
	mods := []driver.ModuleSource{piecesModule(t, testair.FibonacciAir{}, "fib"), piecesModule(t, keccakf.Air{}, "keccakf")}
	if len(mods[1].Units) < 2 {
		t.Fatalf("keccakf: %d units", len(mods[1].Units))
	}
	check := func(b *backend, cached bool) []driver.ModuleBuild {
		t.Helper()
		builds, err := b.BuildModules(mods)
		if err != nil {
			t.Fatal(err)
		}
		for i, bd := range builds {
			if bd.ID != mods[i].ID || bd.Cached != cached || bd.CachePath == "" {
				t.Fatalf("build %d: %+v, want cached %v", i, bd, cached)
			}
			k := *driver.Lookup("zc_uni_generated")
			k.Built = bd.ID
			if _, err := b.KernelLimits(&k); err != nil {
				t.Fatalf("module %s: %v", bd.ID, err)
			}
		}
		return builds
	}
	builds := check(b1, false)
	check(b1, true) // this process's images
	forgetImages()
	b2 := openGPU(t, opts)
	check(b2, true) // the disk cache
	// Corrupt the cached keccakf module: one byte flipped in its payload.
	p := builds[1].CachePath
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-10] ^= 0x40
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	forgetImages()
	b3 := openGPU(t, opts)
	got, err := b3.BuildModules(mods[1:])
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Cached {
		t.Fatal("a corrupted cache entry was used")
	}
	if _, _, err := readCache(dir, builds[1].CachePath[len(dir)+1:len(builds[1].CachePath)-len(".mpcuda")]); err != nil {
		t.Fatalf("the rebuilt entry does not decode: %v", err)
	}
	// A module whose code does not compile is an error naming it.
	bad := driver.ModuleSource{ID: "bad", Template: "pieces", Code: "this is not C++", What: "a broken module"}
	if _, err := b3.BuildModules([]driver.ModuleSource{bad}); err == nil {
		t.Fatal("a broken module built")
	} else {
		t.Logf("broken module: %v", err)
	}
}

// Prebuild compiles modules before a backend is open: a backend's BuildModules then takes them
// from memory and reports them compiled (with the compile's time), a second one as cached; a
// BuildModules that comes while Prebuild still compiles waits for it (one compile, logged once);
// modules already in the disk cache are left there; a broken module's error names it.
func TestGPUPrebuild(t *testing.T) {
	forgetImages()
	dir := t.TempDir()
	var logBuf syncBuffer
	opts := Options{CacheDir: dir, Logger: zerolog.New(&logBuf)}
	b := openGPU(t, opts) // the main module first: only the prebuilt modules' compiles are counted
	compiles := func() int { return strings.Count(logBuf.String(), "compiling CUDA modules with NVRTC") }
	mods := []driver.ModuleSource{piecesModule(t, testair.FibonacciAir{}, "fib"), piecesModule(t, keccakf.Air{}, "keccakf")}
	builds, err := Prebuild(opts, mods)
	if err != nil {
		t.Fatal(err)
	}
	for i, bd := range builds {
		if bd.Cached || bd.Elapsed <= 0 || bd.ID != mods[i].ID {
			t.Fatalf("prebuild %d: %+v", i, bd)
		}
	}
	got, err := b.BuildModules(mods)
	if err != nil {
		t.Fatal(err)
	}
	for i, bd := range got {
		if bd.Cached || bd.Elapsed != builds[i].Elapsed {
			t.Errorf("first BuildModules of prebuilt module %d: %+v, want compiled in %v", i, bd, builds[i].Elapsed)
		}
		k := *driver.Lookup("zc_uni_generated")
		k.Built = bd.ID
		if _, err := b.KernelLimits(&k); err != nil {
			t.Fatalf("module %s: %v", bd.ID, err)
		}
	}
	b2 := openGPU(t, opts)
	if got, err = b2.BuildModules(mods); err != nil || !got[0].Cached || !got[1].Cached {
		t.Fatalf("second backend: %+v %v", got, err)
	}
	if n := compiles(); n != 1 {
		t.Errorf("%d compiles logged, want 1", n)
	}
	// In the disk cache (a new process): left there, and the backend loads it.
	forgetImages()
	if builds, err = Prebuild(opts, mods); err != nil || !builds[0].Cached || !builds[1].Cached {
		t.Fatalf("prebuild of cached modules: %+v %v", builds, err)
	}
	if n := compiles(); n != 1 {
		t.Errorf("cached modules compiled again (%d compiles logged)", n)
	}
	// At the same time: a new module (not cached), Prebuild and BuildModules together.
	forgetImages()
	fresh := []driver.ModuleSource{piecesModule(t, keccakf.Air{}, "keccakf")}
	fresh[0].Code += "\n// another source\n"
	done := make(chan error, 1)
	go func() { _, err := Prebuild(opts, fresh); done <- err }()
	time.Sleep(50 * time.Millisecond)
	b3 := openGPU(t, opts)
	if got, err = b3.BuildModules(fresh); err != nil || got[0].Cached {
		t.Fatalf("BuildModules beside Prebuild: %+v %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := compiles(); n != 2 {
		t.Errorf("%d compiles logged, want 2 (the module beside Prebuild compiled once)", n)
	}
	bad := driver.ModuleSource{ID: "bad", Template: "pieces", Code: "this is not C++", What: "a broken module"}
	if _, err := Prebuild(opts, []driver.ModuleSource{bad}); err == nil || !strings.Contains(err.Error(), "module bad (a broken module)") {
		t.Fatalf("broken module: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (the log of goroutines).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The NVRTC options of the module templates: --Ofast-compile=min where NVRTC has it, but for the
// templates compiled fully optimized (fullOptimize: the whole template); the pieces template's
// register cap and sign-bit field operations (BB_SIGNFIX); -rdc for a linked part.
func TestModuleOpts(t *testing.T) {
	has := func(opts []string, o string) bool { return slices.Contains(opts, o) }
	p := moduleOpts("pieces", "sm_90", true, true)
	if !has(p, "--Ofast-compile=min") || !has(p, "--maxrregcount=64") || !has(p, "--relocatable-device-code=true") || !has(p, "-DBB_SIGNFIX") {
		t.Errorf("pieces: %q", p)
	}
	w := moduleOpts("whole", "sm_90", true, false)
	if has(w, "--Ofast-compile=min") || has(w, "--relocatable-device-code=true") || !has(w, "--gpu-architecture=sm_90") || has(w, "-DBB_SIGNFIX") {
		t.Errorf("whole: %q", w)
	}
	if p := moduleOpts("pieces", "sm_90", false, false); has(p, "--Ofast-compile=min") {
		t.Errorf("pieces without fast compile: %q", p)
	}
}
