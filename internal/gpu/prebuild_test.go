package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Prebuild builds nothing for a backend that cannot build ahead (the host device, Metal), refuses
// a source whose template is not in the kernel table before asking the backend, hands the sources
// to the kind's prebuilder (auto: CUDA off macOS), and reports a CUDA machine without a device
// with an error matching ErrUnavailable.
func TestPrebuild(t *testing.T) {
	src := driver.ModuleSource{ID: "m1", Template: "pieces", Code: "int x;"}
	if !hasTemplate(t, "pieces") {
		t.Skip("no module template in the kernel table")
	}
	for _, k := range []Kind{KindHost, KindMetal} {
		if CanPrebuild(k, 0) {
			t.Errorf("CanPrebuild(%s)", k)
		}
		if b, err := Prebuild(k, Options{}, []driver.ModuleSource{src}); b != nil || err != nil {
			t.Errorf("Prebuild(%s) = %v, %v", k, b, err)
		}
	}
	// A fake CUDA prebuilder: what Prebuild hands it, and what it answers.
	saved := prebuilders[KindCUDA]
	defer func() { prebuilders[KindCUDA] = saved }()
	var got []driver.ModuleSource
	var ordinal int
	prebuilders[KindCUDA] = func(o Options, ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
		got, ordinal = ms, o.Ordinal
		return []driver.ModuleBuild{{ID: ms[0].ID}}, nil
	}
	if _, err := Prebuild(KindCUDA, Options{}, []driver.ModuleSource{{ID: "m2", Template: "no-such-template"}}); err == nil || got != nil {
		t.Fatalf("a source of an unknown template: %v (handed %v)", err, got)
	}
	kind := KindAuto
	if prebuildKind(KindAuto) != KindCUDA {
		kind = KindCUDA // macOS: auto is Metal
	}
	b, err := Prebuild(kind, Options{Ordinal: 3}, []driver.ModuleSource{src})
	if err != nil || len(b) != 1 || b[0].ID != "m1" || len(got) != 1 || got[0].ID != "m1" || ordinal != 3 {
		t.Fatalf("Prebuild(%s) = %v, %v; handed %v for device %d", kind, b, err, got, ordinal)
	}
	prebuilders[KindCUDA] = func(Options, []driver.ModuleSource) ([]driver.ModuleBuild, error) {
		return nil, errors.New("module m1 (code): nvrtc: error")
	}
	if _, err := Prebuild(KindCUDA, Options{}, []driver.ModuleSource{src}); err == nil || !strings.Contains(err.Error(), "prebuild modules: cuda: module m1") {
		t.Fatalf("a failing prebuilder: %v", err)
	}
	// The real CUDA prebuilder on this machine.
	prebuilders[KindCUDA] = saved
	if saved == nil {
		return
	}
	if _, err := Count(KindCUDA); err == nil {
		t.Skip("a CUDA device is present: the GPU tests of package cuda cover Prebuild there")
	}
	if CanPrebuild(KindCUDA, 0) {
		t.Error("CanPrebuild(cuda) without a CUDA device")
	}
	_, err = Prebuild(KindCUDA, Options{CacheDir: t.TempDir()}, []driver.ModuleSource{src})
	if !errors.Is(err, ErrUnavailable) && os.Getenv("METALPROVE_REQUIRE_CUDA") == "" {
		t.Errorf("Prebuild(cuda) without a device: %v, want ErrUnavailable", err)
	}
}

// hasTemplate says whether the kernel table has a module template named name.
func hasTemplate(t *testing.T, name string) bool {
	t.Helper()
	return checkModuleSource(driver.ModuleSource{ID: "x", Template: name}) == nil
}
