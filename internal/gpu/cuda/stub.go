//go:build !linux || !cgo

package cuda

import "github.com/metalprove/metalprove/internal/gpu/driver"

// Open reports that this build has no CUDA backend (it needs linux and cgo).
func Open(opts Options) (driver.Backend, error) {
	_ = kernelsSource
	return nil, &UnavailableError{Reason: "the CUDA backend needs linux and cgo (this binary was built without)"}
}

// DeviceCount reports that this build has no CUDA backend.
func DeviceCount() (int, error) {
	return 0, &UnavailableError{Reason: "the CUDA backend needs linux and cgo (this binary was built without)"}
}

// Prebuild reports that this build has no CUDA backend.
func Prebuild(opts Options, ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	_ = modFlights
	return nil, &UnavailableError{Reason: "the CUDA backend needs linux and cgo (this binary was built without)"}
}
