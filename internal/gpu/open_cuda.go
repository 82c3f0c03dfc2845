package gpu

import (
	"errors"

	"github.com/metalprove/metalprove/internal/gpu/cuda"
	"github.com/metalprove/metalprove/internal/gpu/driver"
)

func init() { register(KindCUDA, openCUDA) }

// openCUDA opens the CUDA backend. Package cuda cannot import this package (this one imports
// it), so it reports "cannot be used here" with its own sentinel, cuda.ErrUnavailable; such
// errors are re-wrapped here so that they match ErrUnavailable too, keeping cuda's message
// ("libcuda.so.1 not found: ...", "no CUDA device", "libnvrtc not found ...").
func openCUDA(o Options) (driver.Backend, error) {
	be, err := cuda.Open(cuda.Options{CacheDir: o.CacheDir})
	if err != nil {
		if errors.Is(err, cuda.ErrUnavailable) {
			return nil, unavailableError{err}
		}
		return nil, err
	}
	return be, nil
}

// unavailableError matches both ErrUnavailable and the backend's own error.
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
