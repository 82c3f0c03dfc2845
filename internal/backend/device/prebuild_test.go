package device_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// gpuRecorder is the host device dressed as a GPU (a SIMD width of 32: the kernels plan for a
// GPU) whose module builds record their sources instead of compiling them.
type gpuRecorder struct {
	*host.Backend
	srcs []driver.ModuleSource
}

var errRecorded = errors.New("recorded, not built")

func (r *gpuRecorder) Limits() driver.Limits {
	l := r.Backend.Limits()
	l.SIMDWidth = 32
	return l
}

func (r *gpuRecorder) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	r.srcs = append(r.srcs, ms...)
	return nil, errRecorded
}

// GPUConstraintSources, written from the verifying keys alone, are the sources the backend of a
// GPU builds for the same key (BuildConstraintCode): Keccak-f's program is long enough for
// generated code, Fibonacci's is not.
func TestGPUConstraintSources(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	rec := &gpuRecorder{Backend: h}
	dev, err := gpu.NewDevice(gpu.KindCUDA, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	be, err := device.New(dev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := stark.Keygen(p, []air.Air{testair.FibonacciAir{}, keccakf.Air{}}, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Free()
	if _, err := be.BuildConstraintCode(pk, nil); !errors.Is(err, errRecorded) {
		t.Fatalf("BuildConstraintCode: %v, want the recorder's error", err)
	}
	names := []string{pk.AirName(0), pk.AirName(1)}
	want, err := device.GPUConstraintSources(names, pk.VK.MVK.PerAir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.srcs) != 1 || len(want) != 1 || len(want[0].Units) < 2 {
		t.Fatalf("the backend built %d modules, GPUConstraintSources gives %d (units %d)", len(rec.srcs), len(want), len(want[0].Units))
	}
	if !reflect.DeepEqual(rec.srcs[0], want[0]) {
		t.Fatalf("GPUConstraintSources %s (%s) differs from the backend's %s (%s)", want[0].ID, want[0].What, rec.srcs[0].ID, rec.srcs[0].What)
	}
	// A shared split gives the same; nil keys are skipped; names and keys must pair.
	shared := device.NewShared()
	again, err := device.GPUConstraintSources([]string{"", names[1]}, []*air.VerifyingKey{nil, pk.VK.MVK.PerAir[1]}, shared)
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("with a Shared and a nil key: %v", err)
	}
	if _, err := device.GPUConstraintSources(names[:1], pk.VK.MVK.PerAir, nil); err == nil {
		t.Fatal("one name for two keys accepted")
	}
}
