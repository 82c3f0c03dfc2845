package gpu

import (
	"fmt"
	"runtime"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// prebuilder builds module sources for a device of its kind without opening it (see Prebuild).
type prebuilder func(Options, []driver.ModuleSource) ([]driver.ModuleBuild, error)

// prebuilders is filled by the open_<kind>.go files of backends that can build modules before
// their device is open (CUDA).
var prebuilders = map[Kind]prebuilder{}

// prebuildKind is the kind Prebuild builds for when asked for kind: auto is the GPU Open would
// try (CUDA off macOS, Metal on it).
func prebuildKind(kind Kind) Kind {
	if kind != KindAuto {
		return kind
	}
	if runtime.GOOS == "darwin" {
		return KindMetal
	}
	return KindCUDA
}

// CanPrebuild says whether Prebuild builds modules for the device of kind and ordinal on this
// machine: its backend builds modules ahead (CUDA) and has that device. It asks the driver (CUDA:
// loads it and counts the devices), so it costs what opening the device begins with.
func CanPrebuild(kind Kind, ordinal int) bool {
	k := prebuildKind(kind)
	if prebuilders[k] == nil {
		return false
	}
	n, err := Count(k)
	return err == nil && ordinal >= 0 && ordinal < n
}

// Prebuild builds module sources (as Device.BuildModules builds them) for the device of kind
// (opts.Ordinal; auto as Open would choose its GPU) without opening it, into the backend's
// caches: a Device.BuildModules of the same sources on a device of this process, opened before,
// during or after the call, then loads them rather than compiling them, or waits for them while
// they compile. A caller that knows its modules before its device is open (a prover, from its
// statement) overlaps their compile with the device's Open, which compiles the kernels of its
// own on a first use (CUDA: seconds each on a freshly started machine): the two then run at the
// same time rather than one after the other. For a kind whose backend cannot build ahead (the
// host device, Metal) it does nothing and returns (nil, nil). An error of a CUDA machine without
// a usable device wraps ErrUnavailable; a failed compile names the module.
func Prebuild(kind Kind, opts Options, srcs []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	k := prebuildKind(kind)
	pb := prebuilders[k]
	if pb == nil || len(srcs) == 0 {
		return nil, nil
	}
	for _, s := range srcs {
		if err := checkModuleSource(s); err != nil {
			return nil, &Error{Op: "prebuild modules", Err: err}
		}
	}
	builds, err := pb(opts, srcs)
	if err != nil {
		return nil, &Error{Op: "prebuild modules", Err: fmt.Errorf("%s: %w", k, err)}
	}
	return builds, nil
}
