// Package metal is the Metal backend of package gpu: a driver.Backend for Apple GPUs, built on a
// thin Objective-C bridge (bridge.h, bridge.m) that cgo compiles on macOS only. Buffers use shared
// storage (unified memory: Upload and Download are memcpy), a batch is split into command buffers
// by a size budget against the GPU watchdog (policy.go) and waited for once, each dispatch has a
// compute encoder labelled with its kernel (a failed command buffer names it), and Open creates
// the compute pipeline of every kernel (never the first Dispatch). The kernels come from
// metalprove.metallib when `make` built one from the current shaders (embedded from metallib/ with
// a stamp of the source it was built from; policy.go), else from the embedded shaders.gen.metal
// compiled at start-up. The module templates' kernels (module_NAME.gen.metal, e.g. the constraint
// code generated per proving key) are compiled at run time by BuildModules, one library and
// pipeline set per module, side by side, kept in memory by source digest (modules.go,
// modules_darwin.go). None of it has run on Apple hardware: it is checked on Linux only
// (scripts/check-metal.sh).
//
// On other systems, or without cgo, Open returns an error matching driver.ErrUnavailable.
package metal

import (
	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Options configure Open.
type Options struct {
	// Logger receives where the kernels came from and why (a stale or unusable metallib is a
	// warning).
	Logger zerolog.Logger
}

// RequireEnv, when set to 1 (the macOS CI workflow sets it), turns the skips of the Metal tests
// for want of a Metal device into failures: a green run then means that the Metal tests ran.
const RequireEnv = "METALPROVE_REQUIRE_METAL"

// unavailableError is an error text that matches driver.ErrUnavailable: Metal cannot be used on
// this machine or by this binary (not macOS, built without cgo, or no Metal device).
type unavailableError string

func (e unavailableError) Error() string { return string(e) }

func (e unavailableError) Is(target error) bool { return target == driver.ErrUnavailable }
