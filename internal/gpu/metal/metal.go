// Package metal is the Metal backend of package gpu: a driver.Backend for Apple GPUs, built on a
// thin Objective-C bridge (bridge.h, bridge.m) that cgo compiles on macOS only. Buffers use shared
// storage (unified memory: Upload and Download are memcpy), each batch is one command buffer, and
// compute pipelines are created once per kernel. The kernels come from metalprove.metallib when
// `make` built one (embedded from metallib/), else from the embedded shaders.gen.metal compiled at
// start-up.
//
// On other systems, or without cgo, Open returns an error matching driver.ErrUnavailable.
package metal

import "github.com/metalprove/metalprove/internal/gpu/driver"

// unavailableError is an error text that matches driver.ErrUnavailable: Metal cannot be used on
// this machine or by this binary (not macOS, built without cgo, or no Metal device).
type unavailableError string

func (e unavailableError) Error() string { return string(e) }

func (e unavailableError) Is(target error) bool { return target == driver.ErrUnavailable }
