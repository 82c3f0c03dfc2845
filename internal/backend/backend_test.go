package backend_test

import (
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/backend"
	"github.com/metalprove/metalprove/internal/backend/backendtest"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/kernels"
)

func runChecks(t *testing.T, s backendtest.Subject) {
	for _, c := range backendtest.Checks(s) {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConformanceReference runs the suite on the reference backend itself (the harness, every
// fixture and the whole-proof comparison).
func TestConformanceReference(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite: long")
	}
	runChecks(t, backendtest.Subject{Backend: backend.Reference()})
}

func hostDevice(t *testing.T, wrap func(driver.Backend) driver.Backend) *gpu.Device {
	return hostDeviceISA(t, "", wrap)
}

// hostDeviceISA is hostDevice running the kernel copies for isa ("": the best the CPU runs).
func hostDeviceISA(t *testing.T, isa string, wrap func(driver.Backend) driver.Backend) *gpu.Device {
	t.Helper()
	hb, err := host.OpenOptions(host.Options{Threads: 2, ISA: isa})
	if err != nil {
		t.Fatal(err)
	}
	var be driver.Backend = hb
	if wrap != nil {
		be = wrap(be)
	}
	dev, err := gpu.NewDevice(gpu.KindHost, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestConformanceHostDevice runs the suite on the device backend on the host device; the stages
// the device claims (device.Backend.Stages) must not fall back.
func TestConformanceHostDevice(t *testing.T) {
	dev := hostDevice(t, nil)
	c, err := backend.Device(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runChecks(t, backendtest.Subject{Backend: c.Stages()})
}

// TestConformanceHostDeviceBaselineISA runs the whole-proof checks with the baseline copies of
// the kernels (SSE2 on x86-64), which CPUs without AVX2 run, on a CPU whose best copies
// TestConformanceHostDevice has already run (internal/kernels: TestISAVariantsAgree compares
// the copies kernel by kernel).
func TestConformanceHostDeviceBaselineISA(t *testing.T) {
	if isas := host.ISAs(); len(isas) == 1 {
		t.Skipf("only the %s kernels on this CPU: TestConformanceHostDevice ran them", isas[0])
	}
	dev := hostDeviceISA(t, host.BaselineISA, nil)
	c, err := backend.Device(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ch := range backendtest.Checks(backendtest.Subject{Backend: c.Stages()}) {
		if !strings.HasPrefix(ch.Name, "conformance/"+backendtest.StageProve+"/") {
			continue
		}
		t.Run(ch.Name, func(t *testing.T) {
			if err := ch.Run(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if !strings.Contains(dev.Name(), host.BaselineISA+" kernels") {
		t.Errorf("device %q", dev.Name())
	}
}

// TestConformanceHostDevicePieces runs the constraint and whole-proof checks with round 0 and
// every round j ≥ 1 in pieces, as GPUs run long programs: Keccak-f's pieces by their generated
// code (zc_uni_generated, built at run time by the host device's C++ compiler; every AIR in pieces), and again all by
// the interpreter (zc_uni_pieces). Each run must have used the kernel it names, and not the other.
// "whole" runs the short programs whole as GPUs do (a point per lane), by their generated
// whole-program code (zc_uni_whole, built at run time; Keccak-f, too long for it, interpreted).
// "levels" runs the rounds' pieces level-scheduled (zc_round_levels), four threads a lane group
// (the test AIRs; Keccak-f's registers exceed the host's group memory: its pieces are walked).
func TestConformanceHostDevicePieces(t *testing.T) {
	for _, tc := range []struct {
		name, kernel, not string
		opts              kernels.ZcOptions
	}{
		{"generated", "zc_uni_generated", "", kernels.ZcOptions{Pieces: true}},
		{"interpreted", "zc_uni_pieces", "zc_uni_generated", kernels.ZcOptions{Pieces: true, Interpreted: true}},
		{"whole", "zc_uni_whole", "zc_uni_generated", kernels.ZcOptions{GeneratedWhole: true, PointMode: true, UnitItems: true}},
		{"levels", "zc_round_levels", "", kernels.ZcOptions{Pieces: true, Levels: true, LevelThreads: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := hostDevice(t, nil)
			c, err := device.New(dev, device.Options{Zerocheck: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, ch := range backendtest.Checks(backendtest.Subject{Backend: c.Stages()}) {
				if !strings.HasPrefix(ch.Name, "conformance/"+backendtest.StageConstraints+"/") &&
					!strings.HasPrefix(ch.Name, "conformance/"+backendtest.StageProve+"/") {
					continue
				}
				t.Run(ch.Name, func(t *testing.T) {
					if err := ch.Run(); err != nil {
						t.Fatal(err)
					}
				})
			}
			if k := dev.Stats().PerKernel; k[tc.kernel] == 0 || tc.not != "" && k[tc.not] != 0 {
				t.Errorf("%s ran %d times, %s %d times", tc.kernel, k[tc.kernel], tc.not, k[tc.not])
			}
		})
	}
}

// faultyDriver corrupts the first value written by one kernel: it runs the kernel and then
// overwrites word 0 of the kernel's output buffer (buffer slot out).
type faultyDriver struct {
	driver.Backend
	kernel string
	out    int
}

// BuildModules forwards to the wrapped host backend, so that the device builds the generated
// code (zc_uni_generated) through the wrapper.
func (f faultyDriver) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	return f.Backend.(driver.ModuleBuilder).BuildModules(ms)
}

func (f faultyDriver) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	if err := f.Backend.Dispatch(k, groups, tpg, args, tgLen); err != nil {
		return err
	}
	if k.Name != f.kernel {
		return nil
	}
	var w [4]byte
	if err := f.Backend.Download(w[:], args[f.out].Buf, 0); err != nil {
		return err
	}
	w[0] ^= 1
	return f.Backend.Upload(args[f.out].Buf, 0, w[:])
}

// TestConformanceCatchesBrokenConstraintKernel: with a generated round-0 kernel made to write one
// wrong partial sum, the constraint check of the fixture that runs it fails: Keccak-f's pieces
// (zc_uni_generated), and the test AIRs' whole programs (zc_uni_whole, run as GPUs run them).
func TestConformanceCatchesBrokenConstraintKernel(t *testing.T) {
	for _, tc := range []struct {
		kernel, fixture string
		out             int
		opts            kernels.ZcOptions
	}{
		{"zc_uni_generated", "keccakf", 5, kernels.ZcOptions{Pieces: true}},
		{"zc_uni_whole", "test-airs", 13, kernels.ZcOptions{GeneratedWhole: true, PointMode: true, UnitItems: true}},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			dev := hostDevice(t, func(be driver.Backend) driver.Backend {
				return faultyDriver{Backend: be, kernel: tc.kernel, out: tc.out}
			})
			c, err := device.New(dev, device.Options{Zerocheck: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ran := false
			for _, ch := range backendtest.Checks(backendtest.Subject{Backend: c.Stages()}) {
				if !strings.HasPrefix(ch.Name, "conformance/"+backendtest.StageConstraints+"/"+tc.fixture) {
					continue
				}
				ran = true
				if err := ch.Run(); err == nil {
					t.Errorf("%s passed with a broken %s", ch.Name, tc.kernel)
				} else {
					t.Logf("%s: %v", ch.Name, err)
				}
			}
			if !ran || dev.Stats().PerKernel[tc.kernel] == 0 {
				t.Fatalf("no %s constraint check ran %s (ran: %v)", tc.fixture, tc.kernel, ran)
			}
		})
	}
}

// TestConformanceCatchesBrokenKernel: with the stacking kernel made to write one wrong value,
// the suite fails at the commitment, naming it.
func TestConformanceCatchesBrokenKernel(t *testing.T) {
	dev := hostDevice(t, func(be driver.Backend) driver.Backend {
		return faultyDriver{Backend: be, kernel: "stack_trace", out: 1}
	})
	c, err := backend.Device(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checks := backendtest.Checks(backendtest.Subject{Backend: c.Stages()})
	failed := 0
	for _, ch := range checks {
		if !strings.HasPrefix(ch.Name, "conformance/"+backendtest.StageCommitter+"/") {
			continue
		}
		err := ch.Run()
		if err == nil {
			t.Errorf("%s passed with a broken stacking kernel", ch.Name)
			continue
		}
		failed++
		if !strings.Contains(err.Error(), "root") && !strings.Contains(err.Error(), "commitment") {
			t.Errorf("%s: %v (want a root or commitment mismatch)", ch.Name, err)
		}
		t.Logf("%s: %v", ch.Name, err)
	}
	if failed == 0 {
		t.Fatal("no commit check ran")
	}
}
