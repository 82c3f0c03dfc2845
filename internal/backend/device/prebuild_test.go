package device_test

import (
	"errors"
	"reflect"
	"strings"
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
// GPU builds for the same key (BuildConstraintCode): Keccak-f's program is long enough for pieces
// (units of generated code), Fibonacci's and Sum's run whole (a module of the whole template
// each, built together).
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
	if len(rec.srcs) != 1 || len(want) != 2 || want[0].Template != "whole" || len(want[0].Units) != 0 || len(want[1].Units) < 2 {
		t.Fatalf("the backend built %d modules, GPUConstraintSources gives %d", len(rec.srcs), len(want))
	}
	if !reflect.DeepEqual(rec.srcs[0], want[1]) {
		t.Fatalf("GPUConstraintSources %s (%s) differs from the backend's %s (%s)", want[1].ID, want[1].What, rec.srcs[0].ID, rec.srcs[0].What)
	}
	// Short programs only: the backend builds them whole in one build.
	pk2, err := stark.Keygen(p, []air.Air{testair.FibonacciAir{}, testair.SumAir{W: 3}}, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	defer pk2.Free()
	rec.srcs = nil
	if _, err := be.BuildConstraintCode(pk2, nil); !errors.Is(err, errRecorded) {
		t.Fatalf("BuildConstraintCode: %v, want the recorder's error", err)
	}
	want2, err := device.GPUConstraintSources([]string{pk2.AirName(0), pk2.AirName(1)}, pk2.VK.MVK.PerAir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want2) != 2 || !reflect.DeepEqual(rec.srcs, want2) || want2[0].ID != want[0].ID || want2[1].ID == want[0].ID {
		t.Fatalf("short programs: the backend built %d modules, GPUConstraintSources gives %d", len(rec.srcs), len(want2))
	}
	// A shared split gives the same; nil keys are skipped; names and keys must pair.
	shared := device.NewShared()
	again, err := device.GPUConstraintSources([]string{"", names[1]}, []*air.VerifyingKey{nil, pk.VK.MVK.PerAir[1]}, shared)
	if err != nil || !reflect.DeepEqual(again, want[1:]) {
		t.Fatalf("with a Shared and a nil key: %v", err)
	}
	// The interpreter asked for by the environment: nothing to build.
	t.Setenv(device.ConstraintCodeEnv, "interpreted")
	if none, err := device.GPUConstraintSources(names, pk.VK.MVK.PerAir, nil); err != nil || len(none) != 0 {
		t.Fatalf("%s=interpreted: %d sources, %v", device.ConstraintCodeEnv, len(none), err)
	}
	if _, err := device.GPUConstraintSources(names[:1], pk.VK.MVK.PerAir, nil); err == nil {
		t.Fatal("one name for two keys accepted")
	}
	// An unknown value is refused by name, here and where a backend is made.
	t.Setenv(device.ConstraintCodeEnv, "interpretted")
	if _, err := device.GPUConstraintSources(names, pk.VK.MVK.PerAir, nil); err == nil || !strings.Contains(err.Error(), device.ConstraintCodeEnv) {
		t.Fatalf("%s=interpretted: GPUConstraintSources: %v, want an error naming the variable", device.ConstraintCodeEnv, err)
	}
	if _, err := device.New(testDev, device.Options{}); err == nil || !strings.Contains(err.Error(), device.ConstraintCodeEnv) {
		t.Fatalf("%s=interpretted: New: %v, want an error naming the variable", device.ConstraintCodeEnv, err)
	}
}
