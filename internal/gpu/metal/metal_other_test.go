//go:build !darwin || !cgo

package metal

import (
	"errors"
	"testing"
)

func TestOpenUnavailable(t *testing.T) {
	be, err := Open(Options{})
	if be != nil || !errors.Is(err, ErrUnavailable) || err.Error() != "metal: only available on macOS with cgo" {
		t.Fatalf("Open() = %v, %v; want nil and the unavailable error", be, err)
	}
}
