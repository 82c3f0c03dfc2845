package prover

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/stark"
)

// ConstraintKernels is what BuildConstraintCode did for one AIR: the report of its generated
// round-0 code (kernels.GeneratedReport), as `prove --json` and `warm --json` print it.
type ConstraintKernels struct {
	AIR          string  `json:"air"`
	Units        int     `json:"units"`
	Compiled     bool    `json:"compiled"`
	Pieces       int     `json:"pieces"`
	Instructions int     `json:"instructions"`
	ElapsedMS    float64 `json:"elapsed_ms"`
	Cache        string  `json:"cache,omitempty"`
}

// BuildConstraintCode builds the generated round-0 code of every AIR of pk on the backend's
// device (device.Backend.BuildConstraintCode; nothing on cpuref or a device that interprets the
// programs): compiled on a first use, from the cache afterwards. task (may be nil) shows which
// AIR's kernels are being prepared; log gets one record per AIR compiled now, saying for which
// AIR, how many modules, how long and where they are cached.
func (b *Backend) BuildConstraintCode(pk *stark.ProvingKey, task *progress.Task, log *zerolog.Logger) ([]ConstraintKernels, error) {
	if b.device == nil {
		return nil, nil
	}
	log = nopLogger(log)
	ev := &device.GeneratedEvents{
		Start: func(air string, units, instructions int) {
			if task != nil {
				task.Step(fmt.Sprintf("constraint kernels of %s", air))
			}
			log.Debug().Str("air", air).Int("units", units).Int("instructions", instructions).Msg("preparing constraint kernels")
		},
		Done: func(r kernels.GeneratedReport) {
			if !r.Compiled {
				return
			}
			log.Info().Str("air", r.AIR).Int("units", r.Units).Int("pieces", r.Pieces).Int("instructions", r.Instructions).
				Str("elapsed", r.Elapsed.Round(time.Millisecond).String()).Str("cache", r.Cache).Msg("constraint kernels compiled")
		},
	}
	reps, err := b.device.BuildConstraintCode(pk, ev)
	if err != nil {
		return nil, &cmdutil.DeviceError{Err: fmt.Errorf("building the constraint kernels: %w", err)}
	}
	out := make([]ConstraintKernels, len(reps))
	for i, r := range reps {
		out[i] = ConstraintKernels{AIR: r.AIR, Units: r.Units, Compiled: r.Compiled, Pieces: r.Pieces,
			Instructions: r.Instructions, ElapsedMS: float64(r.Elapsed.Microseconds()) / 1e3, Cache: r.Cache}
	}
	return out, nil
}

// WarmRequest are the inputs of Warm: a proving key and the device to compile for.
type WarmRequest struct {
	// Key is the proving-key file (metalprove keygen).
	Key           string
	AllowInsecure bool
	// Ordinal is the GPU (CUDA) of the settings' device kind.
	Ordinal  int
	Settings *cmdutil.Settings
	Logger   *zerolog.Logger
	Progress *progress.Display
}

// WarmReport is what Warm built: what `metalprove warm --json` prints.
type WarmReport struct {
	Key       string              `json:"key"`
	Device    string              `json:"device"`
	AIRs      []ConstraintKernels `json:"airs"`
	ElapsedMS float64             `json:"elapsed_ms"`
	// Note says why nothing was built, when nothing was ("": something was).
	Note string `json:"note,omitempty"`
}

// Warm builds the constraint kernels of a proving key's AIRs on a device ahead of its first
// proof: the key read and made on the device (its preprocessed traces committed, as a proof
// does), then BuildConstraintCode, whose results the device backend caches on disk, so that a
// service pays the compile at deployment rather than in its first proof. On a device that
// interprets constraint programs (the host device) there is nothing to build; the report says so.
func Warm(req WarmRequest) (*WarmReport, error) {
	log := nopLogger(req.Logger)
	key, err := ReadKey(req.Key, req.AllowInsecure)
	if err != nil {
		return nil, err
	}
	task := req.Progress.Start("warm "+req.Key, 3, "steps")
	defer task.Done()
	task.Step("opening the device")
	start := time.Now()
	kind := DeviceKind(req.Settings)
	// The constraint kernels compile beside the device's own (PrebuildConstraintCode).
	shared := device.NewShared()
	go PrebuildConstraintCode(req.Settings, req.Ordinal, func() ([]string, []*air.VerifyingKey) { return keyVKs(key) }, shared, log)
	be, err := OpenDeviceBackend(req.Settings, kind, req.Ordinal, shared, log)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	rep := &WarmReport{Key: req.Key, Device: be.Name, AIRs: []ConstraintKernels{}}
	task.Step("keygen")
	pk, err := stark.KeygenFromKey(key.File.MVK, key.File.PreHash, key.Airs, be.Backend)
	if err != nil {
		return nil, keygenError(req.Key, err)
	}
	defer pk.Free()
	if rep.AIRs, err = be.BuildConstraintCode(pk, task, log); err != nil {
		return nil, err
	}
	if rep.AIRs == nil {
		rep.AIRs = []ConstraintKernels{}
	}
	if len(rep.AIRs) == 0 {
		rep.Note = be.Name + " interprets the constraint programs: nothing to compile"
	}
	rep.ElapsedMS = float64(time.Since(start).Microseconds()) / 1e3
	return rep, nil
}
