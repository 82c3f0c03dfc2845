package gpu

import (
	"strings"

	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/metal"
)

// The Metal backend is registered on every platform: off macOS (or without cgo) metal.Open says
// so with an error matching ErrUnavailable.
func init() {
	register(KindMetal, func(o Options) (driver.Backend, error) {
		be, err := metal.Open(metal.Options{Logger: o.Logger})
		if err != nil {
			return nil, metalError{err}
		}
		return be, nil
	})
}

// metalError drops package metal's "metal: " prefix, which Open's "metal: " already gives.
type metalError struct{ err error }

func (e metalError) Error() string { return strings.TrimPrefix(e.err.Error(), "metal: ") }

func (e metalError) Unwrap() error { return e.err }
