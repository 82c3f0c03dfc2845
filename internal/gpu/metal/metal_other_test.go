//go:build !darwin || !cgo

package metal

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

func TestOpenUnavailable(t *testing.T) {
	be, err := Open(Options{})
	if be != nil || !errors.Is(err, driver.ErrUnavailable) || err.Error() != "metal: only available on macOS with cgo" {
		t.Fatalf("Open() = %v, %v; want nil and the unavailable error", be, err)
	}
}
