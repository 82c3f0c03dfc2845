package gpu

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Options configure Open.
type Options struct {
	// Logger receives the reason when auto falls back to the host device.
	Logger zerolog.Logger
	// HostThreads is the number of CPU threads of the host device (0: all cores).
	HostThreads int
	// HostISA caps the instruction set of the host device's kernels ("": the best the CPU runs;
	// see host.Options.ISA).
	HostISA string
	// CacheDir holds compiled kernels (CUDA cubins); "" means the user cache directory.
	CacheDir string
	// MemoryLimit, when positive, caps the device memory (Limits().MemoryBytes) below what the
	// device reports: allocations beyond it fail with ErrOutOfMemory and the memory preflight of
	// a proof counts with it (--device-memory; tests of the refusal on the host device).
	MemoryLimit uint64
	// Ordinal chooses the GPU of a machine with several (CUDA device ordinal, after
	// CUDA_VISIBLE_DEVICES); 0 on Metal and the host device, which have one.
	Ordinal int
}

// counters is filled by the open_<kind>.go files of backends that can have several devices.
var counters = map[Kind]func() (int, error){}

// Count is the number of devices of kind this machine has: CUDA's visible GPUs; 1 for the host
// device and Metal (the system default device). An error wraps ErrUnavailable when the backend
// cannot be used here.
func Count(kind Kind) (int, error) {
	if c, ok := counters[kind]; ok {
		n, err := c()
		if err != nil {
			return 0, &Error{Op: "open", Err: fmt.Errorf("%s: %w", kind, err)}
		}
		return n, nil
	}
	if _, ok := openers[kind]; !ok {
		return 0, &Error{Op: "open", Err: fmt.Errorf("%s: %w: the %s backend is not built into this binary for %s/%s", kind, ErrUnavailable, kind, runtime.GOOS, runtime.GOARCH)}
	}
	return 1, nil
}

// opener opens one backend; it returns an error wrapping ErrUnavailable when the backend cannot
// be used on this machine (no driver, no GPU, wrong OS).
type opener func(Options) (driver.Backend, error)

// openers is filled by the open_<kind>.go files, one per backend, so that this package compiles
// whichever backends a platform has.
var openers = map[Kind]opener{}

func register(k Kind, o opener) { openers[k] = o }

// ParseKind validates a --device value.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown device %q: must be one of %s", s, strings.Join(KindNames(), ", "))
}

// KindNames lists the accepted --device values as strings.
func KindNames() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}

// Open opens a device. KindAuto tries Metal on macOS, then CUDA, then falls back to the host
// device, logging why; it never fails because a GPU is missing. An explicit kind that cannot be
// opened is an error wrapping ErrUnavailable.
//
// Each Open gives an independent Device with its own queue (a CUDA stream on the device's primary
// context, a Metal command queue; host devices share the process's worker pool, which runs one
// dispatch at a time): several Devices of one GPU keep several proofs in flight.
func Open(kind Kind, opts Options) (*Device, error) {
	if opts.Ordinal != 0 && kind != KindCUDA {
		return nil, &Error{Op: "open", Err: fmt.Errorf("%s: device %d: only CUDA has several devices", kind, opts.Ordinal)}
	}
	if kind != KindAuto {
		be, err := openKind(kind, opts)
		if err != nil {
			return nil, &Error{Op: "open", Err: fmt.Errorf("%s: %w", kind, err)}
		}
		d, err := newDevice(kind, be, "")
		return withMemoryLimit(d, err, opts)
	}
	var reasons []string
	candidates := []Kind{KindCUDA}
	if runtime.GOOS == "darwin" {
		candidates = []Kind{KindMetal}
	}
	for _, k := range candidates {
		be, err := openKind(k, opts)
		if err == nil {
			var d *Device
			if d, err = newDevice(k, be, ""); err == nil {
				return withMemoryLimit(d, nil, opts)
			}
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", k, err))
	}
	reason := strings.Join(reasons, "; ")
	be, err := openKind(KindHost, opts)
	if err != nil {
		return nil, &Error{Op: "open", Err: fmt.Errorf("auto: no GPU (%s) and host: %w", reason, err)}
	}
	opts.Logger.Info().Str("reason", reason).Msg("no GPU device usable; using the host device")
	d, err := newDevice(KindHost, be, reason)
	return withMemoryLimit(d, err, opts)
}

// withMemoryLimit applies opts.MemoryLimit to a device newDevice returned (with its error).
func withMemoryLimit(d *Device, err error, opts Options) (*Device, error) {
	if err != nil {
		return nil, err
	}
	if l := opts.MemoryLimit; l > 0 && (d.limits.MemoryBytes == 0 || l < d.limits.MemoryBytes) {
		d.limits.MemoryBytes = l
	}
	return d, nil
}

func openKind(k Kind, opts Options) (driver.Backend, error) {
	o, ok := openers[k]
	if !ok {
		return nil, fmt.Errorf("%w: the %s backend is not built into this binary for %s/%s", ErrUnavailable, k, runtime.GOOS, runtime.GOARCH)
	}
	return o(opts)
}
