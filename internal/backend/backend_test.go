package backend_test

import (
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/backend"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/stark/backendtest"
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
	t.Helper()
	hb, err := host.Open(2)
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

// faultyDriver corrupts the first value written by one kernel: it runs the kernel and then
// overwrites word 0 of the kernel's output buffer (buffer slot out).
type faultyDriver struct {
	driver.Backend
	kernel string
	out    int
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
