package prover

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/backend"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// Backend is an opened proving backend.
type Backend struct {
	*stark.Backend
	dev    *gpu.Device
	device *device.Backend
}

// Device is the opened device (nil for cpuref).
func (b *Backend) Device() *gpu.Device { return b.dev }

// DeviceBackend is the device backend itself, for what the stages do not cover (the trace
// check's first failing rows; nil for cpuref).
func (b *Backend) DeviceBackend() *device.Backend { return b.device }

// DriverUsedMemory is the device memory in use by every process, as the driver counts it
// (gpu.Device.DriverUsedMemory; 0 where it does not say, and for cpuref).
func (b *Backend) DriverUsedMemory() uint64 {
	if b.dev == nil {
		return 0
	}
	used, _ := b.dev.DriverUsedMemory()
	return used
}

// DriverPool is the driver's count of the device memory pool over a proof (CUDA's stream-ordered
// pool; omitted where the device does not keep one): Peak, the most bytes handed out to buffers
// at once (the driver's counterpart of the own count's peak_memory_bytes); ReservedPeak, the most
// the pool held from the device (Peak plus the pool's granularity and fragmentation). The
// process's own context, code and stacks are outside both.
type DriverPool struct {
	Peak         uint64 `json:"driver_pool_peak_bytes,omitempty"`
	ReservedPeak uint64 `json:"driver_pool_reserved_peak_bytes,omitempty"`
}

// ResetDriverPool starts the driver's high-water marks of DriverPool afresh.
func (b *Backend) ResetDriverPool() {
	if b.dev != nil {
		b.dev.ResetDriverPoolPeak()
	}
}

// DriverPool is the driver's high-water marks since ResetDriverPool (zero where it keeps none).
func (b *Backend) DriverPool() DriverPool {
	if b.dev == nil {
		return DriverPool{}
	}
	used, reserved, ok := b.dev.DriverPoolPeak()
	if !ok {
		return DriverPool{}
	}
	return DriverPool{Peak: used, ReservedPeak: reserved}
}

// Max is the larger of each mark of d and o.
func (d DriverPool) Max(o DriverPool) DriverPool {
	return DriverPool{Peak: max(d.Peak, o.Peak), ReservedPeak: max(d.ReservedPeak, o.ReservedPeak)}
}

// Close releases the backend and its device; a second Close does nothing.
func (b *Backend) Close() {
	if b.device != nil {
		b.device.Close()
		b.device = nil
	}
	if b.dev != nil {
		b.dev.Close()
		b.dev = nil
	}
}

// DeviceKind is the --device of the settings (auto when unset).
func DeviceKind(settings *cmdutil.Settings) gpu.Kind {
	if settings != nil && settings.Device != "" {
		return gpu.Kind(settings.Device)
	}
	return gpu.KindAuto
}

// OpenBackend opens the CPU reference backend (reference) or the device backend on the device
// kind of the settings (auto when unset).
func OpenBackend(settings *cmdutil.Settings, reference bool, log *zerolog.Logger) (*Backend, error) {
	if reference {
		return &Backend{Backend: backend.Reference()}, nil
	}
	return OpenDeviceBackend(settings, DeviceKind(settings), 0, nil, log)
}

// ParseGPUs parses a --gpus list (bench, worker): CUDA ordinals separated by commas ("0,1"), each at most once.
func ParseGPUs(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list: give CUDA device ordinals separated by commas, e.g. 0,1")
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a device ordinal (a number ≥ 0)", f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("device %d is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// OpenBackendOn is OpenBackend with the device backend on GPU ordinal (CUDA; the other kinds
// have one device and take 0).
func OpenBackendOn(settings *cmdutil.Settings, reference bool, ordinal int, log *zerolog.Logger) (*Backend, error) {
	if reference || ordinal == 0 {
		return OpenBackend(settings, reference, log)
	}
	return OpenDeviceBackend(settings, DeviceKind(settings), ordinal, nil, log)
}

// OpenDevice opens a device of kind (ordinal: which GPU, for CUDA) capped at the settings'
// --device-memory: the one way the commands open a device. Each call gives a new queue: several
// backends of one GPU prove at the same time. Its error is a DeviceError naming the device.
func OpenDevice(settings *cmdutil.Settings, kind gpu.Kind, ordinal int, log *zerolog.Logger) (*gpu.Device, error) {
	var limit uint64
	if settings != nil {
		limit = settings.DeviceMemoryBytes
	}
	opts := gpu.Options{MemoryLimit: limit, Ordinal: ordinal}
	if log != nil {
		opts.Logger = *log
	}
	dev, err := gpu.Open(kind, opts)
	if err != nil {
		return nil, deviceError(kind, ordinal, err)
	}
	return dev, nil
}

// OpenDeviceBackend opens a device (OpenDevice) and the device backend on it, sharing shared's
// host-side program work with the other backends given the same (nil: its own).
func OpenDeviceBackend(settings *cmdutil.Settings, kind gpu.Kind, ordinal int, shared *device.Shared, log *zerolog.Logger) (*Backend, error) {
	dev, err := OpenDevice(settings, kind, ordinal, log)
	if err != nil {
		return nil, err
	}
	db, err := backend.DeviceShared(dev, log, shared)
	if err != nil {
		dev.Close()
		return nil, deviceError(kind, ordinal, err)
	}
	return &Backend{Backend: db.Stages(), dev: dev, device: db}, nil
}

// deviceError is err of the device of kind and ordinal, as a DeviceError naming the device.
func deviceError(kind gpu.Kind, ordinal int, err error) error {
	what := string(kind)
	if ordinal != 0 {
		what = fmt.Sprintf("%s %d", kind, ordinal)
	}
	return &cmdutil.DeviceError{Err: fmt.Errorf("device %s: %w", what, err)}
}

// DeviceMemory is the device-memory preflight of a proof (CheckDeviceMemory).
type DeviceMemory struct {
	// EstimateBytes is the estimated peak device memory of the proof
	// (device.Backend.EstimateProofMemory; what was in use before it included), reached at step
	// EstimateStep.
	EstimateBytes int64  `json:"memory_estimate_bytes"`
	EstimateStep  string `json:"memory_estimate_step"`
	// EstimateSteps is each step's estimated peak, in proof order, to hold beside the stages'
	// measured peaks (peak_memory_bytes of each stage).
	EstimateSteps []device.StepMemory `json:"memory_estimate_steps,omitempty"`
	// AvailableBytes is the device memory available before the proof (Device.AvailableMemory;
	// 0 when the device does not say).
	AvailableBytes uint64 `json:"memory_available_bytes,omitempty"`
	// StackedKept says whether the proof's commitments keep their RS codewords until the
	// openings (device.Backend.KeepStacked: faster, when the proof fits with them) or rebuild
	// them there (less memory).
	StackedKept bool `json:"stacked_kept"`
}

// CheckDeviceMemory estimates the device memory of proving traces of the given heights
// (per AIR of pk, 0 for an absent AIR) with parameters p, the trace check included when check is
// set, and refuses a proof whose estimate exceeds the memory the device has available, before
// anything of it is allocated: the error (a DeviceError, exit status 5) names what the proof
// needs and what the device has. what names the proof in that error. It chooses the faster plan
// that fits: the commitments keep their codewords when the proof fits with them, else they
// rebuild them for the openings (device.Backend.KeepStacked). For the CPU reference backend it
// does nothing (nil, nil).
func (b *Backend) CheckDeviceMemory(pk *stark.ProvingKey, heights []int, p sp.SystemParams, check bool, what string, limit uint64, log *zerolog.Logger) (*DeviceMemory, error) {
	if b.device == nil {
		return nil, nil
	}
	avail, known := b.dev.AvailableMemory()
	b.device.KeepStacked(true)
	est, err := b.device.EstimateProofMemory(pk, heights, p, check, false)
	if err == nil && known && est.Peak-est.InUse > 0 && uint64(est.Peak-est.InUse) > avail {
		b.device.KeepStacked(false)
		est, err = b.device.EstimateProofMemory(pk, heights, p, check, false)
	}
	if err != nil {
		b.device.KeepStacked(false)
		return nil, err
	}
	dm := &DeviceMemory{EstimateBytes: est.Peak, EstimateStep: est.Step, EstimateSteps: est.Steps, StackedKept: b.device.StackedKept()}
	if known {
		dm.AvailableBytes = avail
	}
	need := est.Peak - est.InUse
	ev := log.Info().Int64("estimate_bytes", est.Peak).Str("step", est.Step).Int64("in_use_bytes", est.InUse).Bool("stacked_kept", dm.StackedKept)
	if known {
		ev = ev.Uint64("available_bytes", avail)
	}
	ev.Msg("device memory: estimated peak of the proof")
	if known && need > 0 && uint64(need) > avail {
		capped := ""
		if limit > 0 && limit == b.dev.Limits().MemoryBytes {
			capped = fmt.Sprintf(" (capped at %s by --device-memory)", sysinfo.Bytes(limit))
		}
		return dm, &cmdutil.DeviceError{Err: fmt.Errorf("not enough device memory: proving %s needs about %s (%d bytes) of device memory at its %s step, besides %s in use already; the device %s has %s (%d bytes) available%s",
			what, sysinfo.Bytes(uint64(need)), need, est.Step, sysinfo.Bytes(uint64(est.InUse)), b.dev.Name(), sysinfo.Bytes(avail), avail, capped)}
	}
	return dm, nil
}
