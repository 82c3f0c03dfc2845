//go:build !darwin || !cgo

package metal

import "github.com/metalprove/metalprove/internal/gpu/driver"

// Open fails: the Metal backend needs macOS and cgo.
func Open(Options) (driver.Backend, error) {
	return nil, unavailableError("metal: only available on macOS with cgo")
}
