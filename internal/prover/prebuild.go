package prover

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// PrebuildConstraintCode compiles the generated constraint code of a statement's AIRs
// (device.GPUConstraintSources of the verifying keys vks gives) for the settings' device, GPU
// ordinal, without waiting for the device to open (gpu.Prebuild), where the device's backend
// builds modules ahead (CUDA; elsewhere it returns at once and vks is not called). A prover runs
// it in a goroutine beside opening its backend: the backend's Open compiles its own kernels on a
// first use (NVRTC: seconds on a freshly started machine, whose CUDA JIT cache is empty), and the
// constraint kernels compile at the same time rather than after it; the backend's
// BuildConstraintCode then takes them from memory, or waits for them. The compile is announced
// in the log by the backend (what, for which AIR, how long, where cached). It never fails the
// proof: a failure is logged at debug level, and BuildConstraintCode builds the kernels itself
// and reports its own error. Nothing else waits for it: a proof that fails before its constraint
// kernels leaves it to finish (its result goes to the disk cache). shared (nil: none) is the device.Shared of the backend, when its
// verifying keys are the ones vks gives.
func PrebuildConstraintCode(settings *cmdutil.Settings, ordinal int, vks func() ([]string, []*air.VerifyingKey), shared *device.Shared, log *zerolog.Logger) {
	log = nopLogger(log)
	kind := DeviceKind(settings)
	if !gpu.CanPrebuild(kind, ordinal) {
		return
	}
	names, keys := vks()
	srcs, err := device.GPUConstraintSources(names, keys, shared)
	if err != nil || len(srcs) == 0 {
		if err != nil {
			log.Debug().Err(err).Msg("constraint kernels not compiled ahead")
		}
		return
	}
	start := time.Now()
	builds, err := gpu.Prebuild(kind, gpu.Options{Ordinal: ordinal, Logger: *log}, srcs)
	if err != nil {
		log.Debug().Err(err).Msg("constraint kernels not compiled ahead (the constraint kernels' build before the stages compiles them)")
		return
	}
	compiled := 0
	for _, b := range builds {
		if !b.Cached {
			compiled++
		}
	}
	log.Debug().Int("modules", len(builds)).Int("compiled", compiled).Str("elapsed", time.Since(start).Round(time.Millisecond).String()).
		Msg("constraint kernels prepared ahead, beside opening the device")
}

// builtinVKs are the verifying keys of built-in AIRs for parameters p, as stark.Keygen makes
// them, written on the host alone; nil for an AIR with a preprocessed trace (its key needs the
// trace committed on the backend) or whose keygen fails (stark.Keygen then says why).
func builtinVKs(p sp.SystemParams, airs []air.Air) ([]string, []*air.VerifyingKey) {
	names := make([]string, len(airs))
	vks := make([]*air.VerifyingKey, len(airs))
	for i, a := range airs {
		if a == nil || a.Width().HasPreprocessed() {
			continue
		}
		names[i] = a.Name()
		vks[i], _ = air.Keygen(a, p.MaxConstraintDegree, false, nil)
	}
	return names, vks
}

// provingKeyVKs are the verifying keys of pk's AIRs, with their names.
func provingKeyVKs(pk *stark.ProvingKey) ([]string, []*air.VerifyingKey) {
	vks := pk.VK.MVK.PerAir
	names := make([]string, len(vks))
	for i := range vks {
		names[i] = pk.AirName(i)
	}
	return names, vks
}

// keyVKs are the verifying keys of a proving-key file's AIRs, with their names.
func keyVKs(k *Key) ([]string, []*air.VerifyingKey) {
	names := make([]string, len(k.Airs))
	for i, a := range k.Airs {
		if a != nil {
			names[i] = a.Name()
		} else {
			names[i] = fmt.Sprintf("AIR %d", i) // as stark.ProvingKey.AirName names it
		}
	}
	return names, k.File.MVK.PerAir
}

// openBackendShared is OpenBackendOn with the device backend sharing shared's host-side program
// work (nil: its own).
func openBackendShared(settings *cmdutil.Settings, reference bool, ordinal int, shared *device.Shared, log *zerolog.Logger) (*Backend, error) {
	if reference {
		return OpenBackend(settings, true, log)
	}
	return OpenDeviceBackend(settings, DeviceKind(settings), ordinal, shared, log)
}
