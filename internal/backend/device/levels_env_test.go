package device_test

import (
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/gpu"
)

// TestLevelsEnv: the backend takes the level-scheduling switch's valid values and refuses the
// others with an error naming the variable.
func TestLevelsEnv(t *testing.T) {
	dev, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"", true}, {"off", true}, {"16/129", true}, {"/64", true}, {"8/", true}, {"0/0", true},
		{"on", false}, {"16", false}, {"12/64", false}, {"-2/64", false}, {"16/x", false}, {"16/-1", false},
	} {
		t.Setenv(device.LevelsEnv, c.v)
		be, err := device.New(dev, device.Options{})
		if err == nil {
			be.Close()
		}
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), device.LevelsEnv) {
			t.Errorf("%s=%q: %v", device.LevelsEnv, c.v, err)
		}
	}
}
