// Package backend opens the prover's backends: Reference is the pure-Go reference
// (internal/backend/cpuref), Device the device backend (internal/backend/device) on a
// gpu.Device, every stage on the device. It is the only package that imports both; they never
// import each other.
package backend

import (
	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

// Reference returns the reference backend: every stage in plain Go.
func Reference() *stark.Backend { return cpuref.New() }

// Device returns the device backend on dev (its stages: Backend.Stages()); Close frees its
// resources, not the device.
func Device(dev *gpu.Device, log *zerolog.Logger) (*device.Backend, error) {
	return device.New(dev, device.Options{Logger: log})
}

// DeviceShared is Device for one of several backends proving at once (one per queue or GPU):
// they share shared's host-side program work (device.Shared).
func DeviceShared(dev *gpu.Device, log *zerolog.Logger, shared *device.Shared) (*device.Backend, error) {
	return device.New(dev, device.Options{Logger: log, Shared: shared})
}
