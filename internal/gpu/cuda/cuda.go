// Package cuda is the NVIDIA backend of package gpu. It binds the CUDA driver API at run time
// (dlopen of libcuda.so.1, so building metalprove needs no CUDA toolkit), compiles the generated
// kernels.gen.cu with NVRTC (also loaded at run time) for the device's architecture, caches the
// result on disk, and implements driver.Backend: one primary context, one stream, asynchronous
// dispatches and device copies, a stream synchronisation per Sync.
//
// The generated source's contract (cmd/mslgen writes it): per kernel NAME of shaders/*.metal,
//
//	extern "C" __global__ void mslk_NAME(<[[buffer(i)]] slots in increasing i>, unsigned tg_off_j...)
//
// where a ParamBuffer slot is a device pointer, a ParamValue slot the struct by value (32-bit
// fields, Param.ValueSize bytes), and tg_off_j the byte offset of [[threadgroup(j)]] in the
// launch's dynamic shared memory (arrays 16-byte aligned, in increasing j). The file has no
// #include and compiles with NVRTC alone.
//
// Errors: Open returns an *UnavailableError, matching driver.ErrUnavailable, when this machine
// cannot run the backend (no libcuda.so.1, no device, no libnvrtc, not linux/cgo). Every failing driver call becomes an *Error naming the call and the kernel.
package cuda

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// gridOrderMarker is in a source whose kernels all begin with the glue's msl_grid_order
// (scripts/mslgen): only such kernels may be launched with programmatic stream serialization.
const gridOrderMarker = "griddepcontrol.wait"

// kernelsSource is the amalgamated CUDA translation of shaders/*.metal (generated).
//
//go:embed kernels.gen.cu
var kernelsSource string

// piecesSource is the module template of the generated piece kernels
// (shaders/constraints/zerocheck_pieces.metal): BuildModules completes it with an AIR's code.
//
//go:embed kernels_pieces.gen.cu
var piecesSource string

// wholeSource is the module template of the generated whole-program round-0 kernel
// (shaders/constraints/zerocheck_whole.metal): BuildModules completes it with an AIR's code.
//
//go:embed kernels_whole.gen.cu
var wholeSource string

// moduleSources are the module templates, by KernelInfo.Module.
var moduleSources = map[string]string{"pieces": piecesSource, "whole": wholeSource}

// KernelPrefix is prepended to a kernel's name to get its CUDA entry point.
const KernelPrefix = "mslk_"

// Options configure Open.
type Options struct {
	// CacheDir holds compiled modules; "" means os.UserCacheDir()/metalprove/cuda.
	CacheDir string
	// Device is the CUDA device ordinal (after CUDA_VISIBLE_DEVICES).
	Device int
	// Source replaces the embedded kernels.gen.cu (tests); SourceName is its name in
	// diagnostics ("kernels.gen.cu" when empty).
	Source     string
	SourceName string
	// Logger receives one record when a module is compiled (which module, for which
	// architecture, how long it took, where it was cached): a compile can take tens of seconds
	// and must not look like a stalled proof.
	Logger zerolog.Logger
}

// UnavailableError says what is missing ("libcuda.so.1 not found", "no CUDA device", ...).
type UnavailableError struct {
	Reason string
	Err    error // the underlying cause, if any
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

// Is makes errors.Is(err, driver.ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == driver.ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// CUDA_ERROR_OUT_OF_MEMORY (cuda.h, enum cudaError_enum).
const cudaErrorOutOfMemory = 2

// Error is a failed CUDA driver call.
type Error struct {
	Op     string // the driver call, e.g. "cuLaunchKernel"
	Kernel string // the CUDA entry point, when one is involved
	Code   int    // the CUresult
	Name   string // cuGetErrorName, e.g. "CUDA_ERROR_INVALID_VALUE"
	Desc   string // cuGetErrorString
	Detail string // extra context, e.g. the launch shape or the kernels in flight
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Kernel != "" {
		b.WriteString(" (kernel " + e.Kernel + ")")
	}
	b.WriteString(": ")
	if e.Name != "" {
		b.WriteString(e.Name)
	} else {
		fmt.Fprintf(&b, "CUresult %d", e.Code)
	}
	if e.Desc != "" {
		b.WriteString(": " + e.Desc)
	}
	if e.Detail != "" {
		b.WriteString(" [" + e.Detail + "]")
	}
	return b.String()
}

// Unwrap makes CUDA_ERROR_OUT_OF_MEMORY match driver.ErrOutOfMemory.
func (e *Error) Unwrap() error {
	if e.Code == cudaErrorOutOfMemory {
		return driver.ErrOutOfMemory
	}
	return nil
}

// CompileError is a failed NVRTC compilation; its text is the compiler log with positions written
// file:line (the generated source carries #line directives naming shaders/*.metal).
type CompileError struct {
	Source string // the translation unit, e.g. "kernels.gen.cu"
	Target string // e.g. "sm_90"
	Status string // nvrtcGetErrorString
	Log    string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("nvrtc: compiling %s for %s: %s:\n%s", e.Source, e.Target, e.Status, strings.TrimSpace(e.Log))
}

// nvrtcPos matches NVRTC's "file(line): " diagnostic prefix.
var nvrtcPos = regexp.MustCompile(`(?m)^(\S[^\n]*?)\((\d+)\): `)

// rewriteLog turns NVRTC's "file(12): error: ..." into "file:12: error: ...".
func rewriteLog(log string) string {
	return nvrtcPos.ReplaceAllString(strings.TrimRight(log, "\x00"), "$1:$2: ")
}

// chooseTarget picks NVRTC's --gpu-architecture for a device of compute capability
// major.minor. supported is nvrtcGetSupportedArchs (nil when unknown: NVRTC < 11.2); hasCubin
// says whether nvrtcGetCUBIN exists (NVRTC ≥ 11.1). A CUBIN for the device's own sm_XY is
// preferred; otherwise PTX (compute_XY, or the newest supported architecture below the device's,
// which the driver compiles forward).
func chooseTarget(major, minor int, supported []int, hasCubin bool) (target string, cubin bool, err error) {
	dev := major*10 + minor
	if len(supported) == 0 {
		if hasCubin {
			return fmt.Sprintf("sm_%d", dev), true, nil
		}
		return fmt.Sprintf("compute_%d", dev), false, nil
	}
	best := -1
	for _, a := range supported {
		if a == dev {
			if hasCubin {
				return fmt.Sprintf("sm_%d", dev), true, nil
			}
			return fmt.Sprintf("compute_%d", dev), false, nil
		}
		if a < dev && a > best {
			best = a
		}
	}
	if best < 0 {
		return "", false, fmt.Errorf("this NVRTC supports no architecture at or below the device's sm_%d (it supports %v)", dev, supported)
	}
	return fmt.Sprintf("compute_%d", best), false, nil
}
