package selftest

import (
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu"
)

// The device-backend checks pass on the host device, are named "stark-device/… [host]" and free
// what they allocate.
func TestDeviceBackendChecksPassOnHost(t *testing.T) {
	dev, err := gpu.Open(gpu.KindHost, gpu.Options{HostThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	checks := DeviceBackendChecks(dev)
	if len(checks) == 0 {
		t.Fatal("no checks")
	}
	for _, r := range RunChecks(checks, nil) {
		if !r.Passed {
			t.Errorf("%s failed: %s", r.Name, r.Error)
		}
		if !strings.HasPrefix(r.Name, "stark-device/") || !strings.HasSuffix(r.Name, " [host]") {
			t.Errorf("check name %q", r.Name)
		}
	}
	if live := dev.LiveBuffers(); len(live) != 0 {
		t.Errorf("buffers left allocated: %v", live)
	}
}
