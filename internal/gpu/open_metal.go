package gpu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/metal"
)

// The Metal backend is registered on every platform: off macOS (or without cgo) metal.Open says
// so, and that error is wrapped with ErrUnavailable like every "cannot run here" error.
func init() {
	register(KindMetal, func(o Options) (driver.Backend, error) {
		be, err := metal.Open(metal.Options{Logger: o.Logger})
		if err != nil {
			if errors.Is(err, metal.ErrUnavailable) {
				return nil, fmt.Errorf("%w (%w)", metalError{err}, ErrUnavailable)
			}
			return nil, metalError{err}
		}
		return be, nil
	})
}

// metalError drops package metal's "metal: " prefix, which Open's "metal: " already gives.
type metalError struct{ err error }

func (e metalError) Error() string { return strings.TrimPrefix(e.err.Error(), "metal: ") }

func (e metalError) Unwrap() error { return e.err }
