//go:build linux && cgo

package cuda

import (
	"os"
	"testing"

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
