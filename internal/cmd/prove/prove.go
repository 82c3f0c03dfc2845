// Package prove implements `metalprove prove`: it reads a trace file, finds each section's AIR
// (internal/examples), builds the proving key, proves all sections together as one multi-AIR
// proof and writes the proof file (stark.MarshalProofFileMeta, written atomically: the proof
// envelope preceded by metadata naming the AIRs, so that `metalprove verify` can rebuild the
// verifying key). It also holds what `bench` shares with it: parameter resolution, trace
// loading, backend opening and the per-stage reporting (StageWatch).
package prove

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/gpu"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// DefaultPreset is the preset used when neither --preset nor a config params section is given.
const DefaultPreset = "app-100bit"

// Options are the inputs of the prove command.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *zerolog.Logger
	// Settings are the global settings (--config, --device).
	Settings *cmdutil.Settings

	Trace  string
	Output string
	// Preset is a preset name, or "" for the config file's params section (else app-100bit).
	Preset        string
	AllowInsecure bool
	// NoCheck skips the host constraint checker.
	NoCheck bool
	// Reference proves on the CPU reference backend instead of the device backend.
	Reference bool
	// DeviceExplicit reports that --device was given (on the command line or by
	// METALPROVE_DEVICE): it conflicts with --cpuref.
	DeviceExplicit bool
	JSON           bool

	// Context is cancelled on SIGINT (nil: never).
	Context context.Context
	// Progress draws the stages on a terminal.
	Progress *progress.Display
}

// DefaultOutput is the proof file written for trace when -o is not given: the trace's path with
// its extension replaced by ".proof" (keccakf.bin → keccakf.proof), beside the trace.
func DefaultOutput(trace string) string {
	ext := filepath.Ext(trace)
	if ext == trace || strings.ContainsRune(ext, filepath.Separator) {
		ext = ""
	}
	return strings.TrimSuffix(trace, ext) + ".proof"
}

// ProveMemoryFactor estimates the host (and, on a GPU, device) memory a proof takes as a
// multiple of its traces' size: measured 4.9 GB peak resident for a 345 MB keccakf trace (1024
// permutations, app-100bit) on the host device. A proof whose estimate exceeds the machine's
// total memory is refused before anything is allocated.
const ProveMemoryFactor = 16

// CheckMemory refuses a proof of traces of traceBytes whose estimate (ProveMemoryFactor ×
// traceBytes, plus 256 MiB) exceeds the machine's total memory; what names the traces.
func CheckMemory(what string, traceBytes uint64) error {
	need := ProveMemoryFactor*traceBytes + 256<<20
	mem := MachineMemory()
	if mem.Total > 0 && need > mem.Total {
		return fmt.Errorf("not enough memory: proving %s (%s of traces) needs about %s, this machine has %s",
			what, sysinfo.Bytes(traceBytes), sysinfo.Bytes(need), sysinfo.Bytes(mem.Total))
	}
	return nil
}

// MachineMemory reads the machine's memory (a variable for tests).
var MachineMemory = sysinfo.ReadMemory

// Report is what `metalprove prove --json` prints.
type Report struct {
	Trace  string `json:"trace"`
	Output string `json:"output"`
	Params string `json:"params"`
	// ParamsDigest is the SHA-256 of the parameters' postcard bytes (hex), as in the proof file.
	ParamsDigest string `json:"params_digest"`
	// Backend is "cpuref" or "device (<device name>)"; Fallbacks counts the device backend's
	// calls that ran on the CPU reference instead.
	Backend   string   `json:"backend"`
	Fallbacks int      `json:"fallbacks"`
	AIRs      []AirRow `json:"airs"`
	// ProofBytes is the spec encoding of the proof; FileBytes the whole file (envelope, metadata).
	ProofBytes int `json:"proof_bytes"`
	FileBytes  int `json:"file_bytes"`
	// TimesMS are the stage times in milliseconds (read, keygen, check, commit, gkr, constraints,
	// openings, write) and TotalMS their sum.
	TimesMS map[string]float64 `json:"times_ms"`
	TotalMS float64            `json:"total_ms"`
	// Stages are the proving stages (load, check, commit, gkr, constraints, openings) with what
	// each cost on the device.
	Stages []StageRow `json:"stages"`
	// PeakMemory is the largest of the stages' peak device memory; the memory estimate made
	// before the proof (device backend only) stands beside it.
	PeakMemory int64 `json:"peak_memory_bytes"`
	*DeviceMemory
}

// DeviceMemory is the device-memory preflight of a proof (CheckDeviceMemory).
type DeviceMemory struct {
	// EstimateBytes is the estimated peak device memory of the proof
	// (device.Backend.EstimateProofMemory; what was in use before it included), reached at step
	// EstimateStep.
	EstimateBytes int64  `json:"memory_estimate_bytes"`
	EstimateStep  string `json:"memory_estimate_step"`
	// AvailableBytes is the device memory available before the proof (Device.AvailableMemory;
	// 0 when the device does not say).
	AvailableBytes uint64 `json:"memory_available_bytes,omitempty"`
}

// CheckDeviceMemory estimates the device memory of proving traces of the given heights
// (per AIR of pk, 0 for an absent AIR) with parameters p, the trace check included when check is
// set, and refuses a proof whose estimate exceeds the memory the device has available, before
// anything of it is allocated: the error (a DeviceError, exit status 5) names what the proof
// needs and what the device has. what names the proof in that error. For the CPU reference
// backend it does nothing (nil, nil).
func (b *Backend) CheckDeviceMemory(pk *stark.ProvingKey, heights []int, p sp.SystemParams, check bool, what string, limit uint64, log *zerolog.Logger) (*DeviceMemory, error) {
	if b.device == nil {
		return nil, nil
	}
	est, err := b.device.EstimateProofMemory(pk, heights, p, check, false)
	if err != nil {
		return nil, err
	}
	dm := &DeviceMemory{EstimateBytes: est.Peak, EstimateStep: est.Step}
	avail, known := b.dev.AvailableMemory()
	if known {
		dm.AvailableBytes = avail
	}
	need := est.Peak - est.InUse
	ev := log.Info().Int64("estimate_bytes", est.Peak).Str("step", est.Step).Int64("in_use_bytes", est.InUse)
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

// StageRow is one proving stage of the report: wall time and the stage's counters.
type StageRow struct {
	Stage  string  `json:"stage"`
	WallMS float64 `json:"wall_ms"`
	StageCounters
	// Parts break the stage down (openings: stacking, whir).
	Parts []StageRow `json:"parts,omitempty"`
}

// StageCounters are a stage's device counters as reported (prove --json; bench --json gives
// their medians over the runs): kernel dispatches, host syncs, the host's wait in them, the
// device queue's gaps waiting on the host (stark.Counters), host↔device bytes, peak device
// memory during the stage and reference fallbacks.
type StageCounters struct {
	Dispatches      int     `json:"dispatches"`
	Syncs           int     `json:"syncs"`
	SyncWaitMS      float64 `json:"sync_wait_ms"`
	HostGapMS       float64 `json:"host_gap_ms"`
	BytesToDevice   int64   `json:"bytes_to_device"`
	BytesFromDevice int64   `json:"bytes_from_device"`
	PeakMemory      int64   `json:"peak_memory_bytes"`
	Fallbacks       int     `json:"fallbacks"`
}

func stageRow(r stark.StageReport) StageRow {
	row := StageRow{Stage: r.Stage, WallMS: ms(r.Wall), StageCounters: StageCounters{Dispatches: r.Dispatches, Syncs: r.Syncs,
		SyncWaitMS: ms(r.SyncWait), HostGapMS: ms(r.HostGap), BytesToDevice: r.BytesToDevice, BytesFromDevice: r.BytesFromDevice,
		PeakMemory: r.MemoryPeak, Fallbacks: r.Fallbacks}}
	for _, p := range r.Parts {
		row.Parts = append(row.Parts, stageRow(p))
	}
	return row
}

// AirRow is one AIR of the proof.
type AirRow struct {
	Name   string `json:"name"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// NewCmdProve returns the prove command. runF, when not nil, replaces proveRun (for tests).
func NewCmdProve(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "prove --trace FILE [-o PROOF]",
		Short: "Prove a trace file: one multi-AIR SWIRL proof of all its sections",
		Long: `Read a trace file (metalprove trace), find each section's AIR by the section's name
(keccakf or a test AIR), build the proving key (AIRs in section order, all present), check every
trace against its AIR's constraints and the interactions for balance (skip with --no-check), prove
and write the proof file atomically. Without -o the proof goes beside the trace, its extension
replaced by .proof (keccakf.bin → keccakf.proof); the path is printed.

Before any proving work the output is checked: it must not be the trace or the config file, nor a
directory, and its directory must exist and be writable. The proof file appears only once complete
(mode 0644 under the umask); an error or an interrupt (Ctrl-C, exit status 130) leaves nothing.

Progress: each stage is logged at info level when it starts and ends (a long stage is logged
again every few seconds while it runs); on a terminal one line shows the stage and its elapsed
time instead (none with --quiet or --log-format json).

Parameters: --preset NAME (` + strings.Join(sp.PresetNames(), ", ") + `), else the --config file's
params section, else ` + DefaultPreset + `. Presets and config files with a security target below 100
bits (the test preset) need --allow-insecure.

Backend: the device backend (internal/backend/device) on --device (auto: a GPU if one is usable,
else the host device); operations without device kernels run on the CPU reference and are counted
as fallbacks (one summary line in the log, and the --json report). --cpuref proves on the CPU
reference backend alone; it cannot be combined with --device.

The proof file holds the proof (spec encoding) in an envelope with the parameters' digest, preceded
by metadata naming the AIRs and their heights and the preset: 'metalprove verify PROOF' rebuilds the
verifying key from them.

Device memory: before the proof starts (after keygen), its peak device memory is estimated from
the trace shapes and the parameters; a proof whose estimate exceeds the memory the device has
available (its memory less what is allocated; on CUDA at most what the driver reports free; at
most --device-memory) is refused, naming both. --json reports the estimate
(memory_estimate_bytes, memory_estimate_step) beside the measured peak (peak_memory_bytes).

Exit status: 0 on success; 1 on an I/O error or when the proof cannot fit in memory; 2 for bad
flags or an output that cannot be written; 3 when the trace file is malformed or names an unknown
AIR; 4 when a trace fails its constraints or interactions; 5 when the device is unavailable or out
of memory, or when the proof would not fit in the device's memory; 130 when interrupted.`,
		Example: `  metalprove trace --example keccakf --perms 16 -o k16.trace
  metalprove prove --trace k16.trace                 # writes k16.proof
  metalprove prove --trace fib.trace -o fib.proof --preset test --allow-insecure --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Trace == "" {
				return cmdutil.Usagef("--trace is required")
			}
			opts.Context = c.Context()
			opts.Progress = f.Progress
			opts.DeviceExplicit = DeviceExplicit(c, f.Settings)
			if opts.Reference && opts.DeviceExplicit {
				return cmdutil.Usagef("--cpuref and --device %s conflict: --cpuref proves on the CPU reference backend, without a device", f.Settings.Device)
			}
			if runF != nil {
				return runF(opts)
			}
			return proveRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Trace, "trace", "", "trace file to prove (required)")
	fl.StringVarP(&opts.Output, "output", "o", "", "proof file to write (default: the trace's path with the extension .proof)")
	fl.StringVar(&opts.Preset, "preset", "", "preset: "+strings.Join(sp.PresetNames(), "|")+
		" (default: the config file's params section if any, else "+DefaultPreset+")")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	fl.BoolVar(&opts.NoCheck, "no-check", false, "skip the host constraint and interaction checks (an invalid trace then gives a proof that does not verify)")
	fl.BoolVar(&opts.Reference, "cpuref", false, "prove on the CPU reference backend instead of the device backend (not with --device)")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON summary object")
	return cmd
}

// DeviceExplicit reports whether --device was chosen for this run: on the command line or by
// METALPROVE_DEVICE (a config file's device is a default that --cpuref overrides).
func DeviceExplicit(c *cobra.Command, s *cmdutil.Settings) bool {
	if fl := c.Flags().Lookup("device"); fl != nil && fl.Changed {
		return true
	}
	return s != nil && strings.HasPrefix(s.Origins["device"], "METALPROVE_DEVICE")
}

// Resolved are the parameters a command runs with.
type Resolved struct {
	Params sp.SystemParams
	// Preset is the preset name ("" for config-file parameters).
	Preset string
	// Source describes them: "preset test", "params section of cfg.yaml".
	Source       string
	SecurityBits int
}

// ResolveParams picks the parameters: preset, else the params section of configFile, else
// fallback (a preset name; "" means DefaultPreset). Targets below 100 bits need allowInsecure.
func ResolveParams(preset, configFile, fallback string, allowInsecure bool) (*Resolved, error) {
	var r *Resolved
	if preset == "" && configFile != "" {
		p, spec, err := sp.LoadFile(configFile)
		switch {
		case err == nil:
			r = &Resolved{Params: p, Source: "params section of " + configFile, SecurityBits: spec.SecurityBits}
		case !errors.Is(err, sp.ErrNoParams):
			return nil, &cmdutil.UsageError{Err: err}
		}
	}
	if r == nil {
		if preset == "" {
			preset = fallback
		}
		if preset == "" {
			preset = DefaultPreset
		}
		p, info, err := sp.Preset(preset, sp.DefaultAppLogStackedHeight)
		if err != nil {
			return nil, cmdutil.Usagef("--preset: %v", err)
		}
		r = &Resolved{Params: p, Preset: preset, Source: "preset " + preset, SecurityBits: info.SecurityBits}
	}
	if err := r.Params.Validate(); err != nil {
		return nil, cmdutil.Usagef("%s: %v", r.Source, err)
	}
	if r.SecurityBits < sp.SecurityBitsTarget && !allowInsecure {
		return nil, cmdutil.Usagef("%s has a %d-bit security target (INSECURE); pass --allow-insecure to use it", r.Source, r.SecurityBits)
	}
	return r, nil
}

// Statement is what a trace file proves: the AIRs (key order) and their inputs.
type Statement struct {
	Airs   []air.Air
	Inputs []stark.AirProvingInput
	Meta   []stark.ProofMetaAir
	Widths []int
	// CellBytes is the size of all traces (4 bytes a cell).
	CellBytes uint64
}

// TraceCellBytes reads the section headers of a trace file (not its cells) and returns the size
// of all its cells.
func TraceCellBytes(path string) (uint64, error) {
	hs, err := traceHeaders(path)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, h := range hs {
		n += 4 * uint64(h.Width) * uint64(h.Height)
	}
	return n, nil
}

// traceHeaders returns the section headers of a trace file, seeking past the cells (LoadTrace
// checks them when it reads them).
func traceHeaders(path string) ([]tracefile.SectionHeader, error) {
	r, err := tracefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var hs []tracefile.SectionHeader
	for {
		h, err := r.Next()
		if err == io.EOF {
			return hs, nil
		}
		if err == nil {
			err = r.SkipCellsUnchecked()
		}
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
}

// LoadTrace reads a trace file and resolves each section's AIR. File problems and sections that
// do not fit their AIR are BadInputErrors; a file whose cells do not fit in the memory available
// is refused before they are read.
func LoadTrace(path string) (*Statement, error) {
	if n, err := TraceCellBytes(path); err == nil {
		if mem := MachineMemory(); mem.Available > 0 && n > mem.Available {
			return nil, fmt.Errorf("%s: not enough memory: its cells need %s, %s is available", path, sysinfo.Bytes(n), sysinfo.Bytes(mem.Available))
		}
	}
	secs, err := tracefile.ReadAll(path)
	if err != nil {
		var fe *tracefile.FormatError
		if errors.As(err, &fe) || errors.Is(err, os.ErrNotExist) {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(secs) == 0 {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: no sections", path)}
	}
	st := &Statement{}
	for i := range secs {
		s := &secs[i]
		bad := func(format string, args ...any) error {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d %q: %s", path, i, s.Name, fmt.Sprintf(format, args...))}
		}
		a, err := examples.AirForHeight(s.Name, s.Height)
		if err != nil {
			return nil, bad("%v", err)
		}
		if s.Width != a.Width().MainWidth() {
			return nil, bad("width %d, but AIR %s has %d main columns", s.Width, a.Name(), a.Width().MainWidth())
		}
		if len(s.PublicValues) != a.NumPublicValues() {
			return nil, bad("%d public values, but AIR %s has %d", len(s.PublicValues), a.Name(), a.NumPublicValues())
		}
		ti, err := testair.SplitMain(a, s.Height, s.Data, s.PublicValues)
		if err != nil {
			return nil, bad("%v", err)
		}
		in := stark.AirProvingInput{
			Common: air.Matrix{Values: ti.CommonMain.Values, Width: ti.CommonMain.Width, Height: s.Height},
			Public: ti.Public,
		}
		for _, c := range ti.CachedMains {
			in.Cached = append(in.Cached, air.Matrix{Values: c.Values, Width: c.Width, Height: c.Height})
		}
		st.Airs = append(st.Airs, a)
		st.Inputs = append(st.Inputs, in)
		st.Meta = append(st.Meta, stark.ProofMetaAir{Name: s.Name, Height: s.Height})
		st.Widths = append(st.Widths, s.Width)
		st.CellBytes += 4 * uint64(len(s.Data))
	}
	return st, nil
}

// ScanAirs resolves the AIR of every section of a trace file from its headers alone (name,
// height, width, public value count), without reading the cells: what keygen needs.
func ScanAirs(path string) ([]air.Air, []int, error) {
	hs, err := traceHeaders(path)
	if err != nil {
		return nil, nil, err
	}
	if len(hs) == 0 {
		return nil, nil, errors.New("no sections")
	}
	airs := make([]air.Air, len(hs))
	heights := make([]int, len(hs))
	for i, h := range hs {
		a, err := examples.AirForHeight(h.Name, h.Height)
		if err != nil {
			return nil, nil, err
		}
		if h.Width != a.Width().MainWidth() || len(h.PublicValues) != a.NumPublicValues() {
			return nil, nil, fmt.Errorf("section %q does not fit AIR %s", h.Name, a.Name())
		}
		airs[i], heights[i] = a, h.Height
	}
	return airs, heights, nil
}

// sameStatement says whether the AIRs and heights ScanAirs found are those of the statement
// LoadTrace read (the file may change between the two).
func sameStatement(airs []air.Air, heights []int, st *Statement) bool {
	if len(airs) != len(st.Airs) || len(heights) != len(st.Meta) {
		return false
	}
	for i, a := range airs {
		b := st.Airs[i]
		if a.Name() != b.Name() || a.Width().MainWidth() != b.Width().MainWidth() ||
			a.NumPublicValues() != b.NumPublicValues() || heights[i] != st.Meta[i].Height {
			return false
		}
	}
	return true
}

// Backend is an opened proving backend.
type Backend struct {
	*stark.Backend
	dev    *gpu.Device
	device *device.Backend
}

// Fallbacks is the number of calls that ran on another backend than the one claimed for their
// stage (the Meter's counter: 0 now that every stage runs on the device; 0 for cpuref).
func (b *Backend) Fallbacks() int {
	if b.Meter == nil {
		return 0
	}
	return b.Meter.Counters().Fallbacks
}

// Device is the opened device (nil for cpuref).
func (b *Backend) Device() *gpu.Device { return b.dev }

// Close releases the backend and its device.
func (b *Backend) Close() {
	if b.device != nil {
		b.device.Close()
	}
	if b.dev != nil {
		b.dev.Close()
	}
}

// OpenBackend opens the CPU reference backend (reference) or the device backend on the device
// kind of the settings (auto when unset).
func OpenBackend(settings *cmdutil.Settings, reference bool, log *zerolog.Logger) (*Backend, error) {
	if reference {
		return &Backend{Backend: backend.Reference()}, nil
	}
	kind := gpu.KindAuto
	if settings != nil && settings.Device != "" {
		kind = gpu.Kind(settings.Device)
	}
	return OpenDeviceBackend(settings, kind, 0, nil, log)
}

// OpenDeviceBackend opens a device of kind (ordinal: which GPU, for CUDA) with the settings'
// memory cap and the device backend on it, sharing shared's host-side program work with the
// other backends given the same (nil: its own). Each call gives a new queue (gpu.Open): several
// backends of one GPU prove at the same time.
func OpenDeviceBackend(settings *cmdutil.Settings, kind gpu.Kind, ordinal int, shared *device.Shared, log *zerolog.Logger) (*Backend, error) {
	var limit uint64
	if settings != nil {
		limit = settings.DeviceMemoryBytes
	}
	what := string(kind)
	if ordinal != 0 {
		what = fmt.Sprintf("%s %d", kind, ordinal)
	}
	dev, err := gpu.Open(kind, gpu.Options{Logger: *log, MemoryLimit: limit, Ordinal: ordinal})
	if err != nil {
		return nil, &cmdutil.DeviceError{Err: fmt.Errorf("device %s: %w", what, err)}
	}
	db, err := backend.DeviceShared(dev, log, shared)
	if err != nil {
		dev.Close()
		return nil, &cmdutil.DeviceError{Err: fmt.Errorf("device %s: %w", what, err)}
	}
	return &Backend{Backend: db.Stages(), dev: dev, device: db}, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ProveError classifies an error of stark.Prove or ProveTraces for the exit status: a trace that
// fails its checks (4), an input that does not fit the key (3), the device out of memory or
// failing (5), an interrupt (130).
func ProveError(ctx context.Context, what string, err error) error {
	var tce *stark.TraceCheckError
	switch {
	case ctx != nil && ctx.Err() != nil, errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, cmdutil.ErrInterrupted)
	case errors.As(err, &tce):
		return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, stark.ErrProveInput):
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, stark.ErrGkrRootNumerator):
		return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: interactions do not balance: %w", what, err)}
	case errors.Is(err, gpu.ErrOutOfMemory):
		return &cmdutil.DeviceError{Err: fmt.Errorf("prove %s: %w", what, err)}
	}
	var ge *gpu.Error
	if errors.As(err, &ge) {
		return &cmdutil.DeviceError{Err: fmt.Errorf("prove %s: %w", what, err)}
	}
	return fmt.Errorf("prove %s: %w", what, err)
}

func proveRun(opts *Options) error {
	log := opts.Logger
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	if opts.Reference && opts.DeviceExplicit {
		return cmdutil.Usagef("--cpuref and --device conflict: --cpuref proves on the CPU reference backend, without a device")
	}
	res, err := ResolveParams(opts.Preset, cfg, "", opts.AllowInsecure)
	if err != nil {
		return err
	}
	p := res.Params
	output := opts.Output
	if output == "" {
		output = DefaultOutput(opts.Trace)
	}
	if _, err := os.Stat(opts.Trace); err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("--trace %s: %w", opts.Trace, unwrapPath(err))}
	}
	// The output is checked (and its temporary file created) before any proving work.
	out, err := cmdutil.CreateOutput("-o", output, opts.Trace, cfg)
	if err != nil {
		return err
	}
	defer out.Abort()

	rep := &Report{Trace: opts.Trace, Output: output, Params: res.Source, TimesMS: map[string]float64{}}
	dg := stark.ParamsDigest(p)
	rep.ParamsDigest = hex.EncodeToString(dg[:])
	timed := func(name string, d time.Duration) {
		rep.TimesMS[name] = ms(d)
		rep.TotalMS += ms(d)
	}

	nStages := 5 // load, commit, gkr, constraints, openings
	if !opts.NoCheck {
		nStages++
	}
	task := opts.Progress.Start("prove "+opts.Trace, int64(nStages), "stages")
	defer task.Done()
	task.Step("reading the trace")
	if n, err := TraceCellBytes(opts.Trace); err == nil {
		if err := CheckMemory(opts.Trace, n); err != nil {
			return err
		}
	}
	// The device opens, and the key is made, while the trace's cells are read: a CUDA driver's
	// first initialisation takes about 100 ms and Keccak-f's keygen about 100 ms, as long as
	// reading a keccakf-1024 trace. The AIRs come from the section headers (ScanAirs); when they
	// cannot be had there, keygen waits for the trace, whose reading then names the problem.
	type opened struct {
		be     *Backend
		err    error
		pk     *stark.ProvingKey
		keyErr error
		keygen time.Duration
	}
	scanned, scannedHeights, scanErr := ScanAirs(opts.Trace)
	openc := make(chan opened, 1)
	go func() {
		be, err := OpenBackend(opts.Settings, opts.Reference, log)
		o := opened{be: be, err: err}
		if err == nil && scanErr == nil {
			t := time.Now()
			o.pk, o.keyErr = stark.Keygen(p, scanned, nil, be.Backend)
			o.keygen = time.Since(t)
		}
		openc <- o
	}()
	release := func(o opened) {
		if o.pk != nil {
			o.pk.Free()
		}
		if o.err == nil {
			o.be.Close()
		}
	}
	start := time.Now()
	st, err := LoadTrace(opts.Trace)
	if err != nil {
		release(<-openc)
		return err
	}
	timed("read", time.Since(start))
	log.Info().Str("trace", opts.Trace).Int("airs", len(st.Airs)).Str("bytes", sysinfo.Bytes(st.CellBytes)).
		Str("elapsed", time.Since(start).Round(time.Millisecond).String()).Msg("trace read")
	for i, a := range st.Airs {
		rep.AIRs = append(rep.AIRs, AirRow{Name: a.Name(), Width: st.Widths[i], Height: st.Meta[i].Height})
	}
	task.Step("opening the device")
	o := <-openc
	if o.err != nil {
		return o.err
	}
	if ctx.Err() != nil {
		release(o)
		return cmdutil.ErrInterrupted
	}
	be := o.be
	defer be.Close()
	rep.Backend = be.Name
	log.Info().Str("backend", be.Name).Str("params", res.Source).Int("airs", len(st.Airs)).Str("output", output).Msg("proving")

	task.Step("keygen")
	pk, keyErr, keygen := o.pk, o.keyErr, o.keygen
	if pk != nil && !sameStatement(scanned, scannedHeights, st) { // the file changed in between
		pk.Free()
		pk = nil
	}
	if pk == nil && (keyErr == nil || scanErr != nil) {
		start = time.Now()
		pk, keyErr = stark.Keygen(p, st.Airs, nil, be.Backend)
		keygen = time.Since(start)
	}
	if keyErr != nil {
		if errors.Is(keyErr, gpu.ErrOutOfMemory) {
			return &cmdutil.DeviceError{Err: fmt.Errorf("keygen: %w", keyErr)}
		}
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Trace, keyErr)}
	}
	defer pk.Free()
	timed("keygen", keygen)
	heights := make([]int, len(st.Meta))
	for i, m := range st.Meta {
		heights[i] = m.Height
	}
	var limit uint64
	if opts.Settings != nil {
		limit = opts.Settings.DeviceMemoryBytes
	}
	if rep.DeviceMemory, err = be.CheckDeviceMemory(pk, heights, p, !opts.NoCheck, opts.Trace, limit, log); err != nil {
		return err
	}

	po := stark.DefaultProveOptions()
	po.CheckConstraints = !opts.NoCheck
	po.Context = ctx
	watch := NewStageWatch(log, task, !opts.Progress.Enabled())
	defer watch.Close()
	po.OnStageStart = watch.Start
	po.OnStage = func(r stark.StageReport) {
		watch.Done(r)
		timed(r.Stage, r.Wall)
		rep.Stages = append(rep.Stages, stageRow(r))
		rep.PeakMemory = max(rep.PeakMemory, r.MemoryPeak)
	}
	proof, err := stark.Prove(pk, st.Inputs, p, be.Backend, po)
	watch.Close()
	if err != nil {
		return ProveError(ctx, opts.Trace, err)
	}
	rep.Fallbacks = be.Fallbacks()

	task.Step("writing the proof")
	start = time.Now()
	meta := &stark.ProofMeta{Params: "preset", Preset: res.Preset, AIRs: st.Meta}
	if res.Preset == "" {
		meta.Params = "config"
	}
	// Encode once: the proof's size is read off the envelope of the file's bytes.
	file, err := stark.MarshalProofFileMeta(p, proof, meta)
	if err != nil {
		return fmt.Errorf("encode proof: %w", err)
	}
	_, env, err := stark.SplitProofFile(file)
	if err != nil {
		return fmt.Errorf("encode proof: %w", err)
	}
	rep.ProofBytes = len(env) - stark.EnvelopeOverhead
	if _, err := out.Write(file); err != nil {
		return fmt.Errorf("write proof file %s: %w", output, unwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write proof file %s: %w", output, unwrapPath(err))
	}
	task.Done()
	rep.FileBytes = len(file)
	timed("write", time.Since(start))
	log.Info().Str("proof", output).Int("proof_bytes", rep.ProofBytes).Int("file_bytes", rep.FileBytes).
		Str("total", time.Duration(rep.TotalMS*float64(time.Millisecond)).Round(time.Millisecond).String()).Msg("proof written")
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printReport(opts.IO.Out, rep)
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// StageWatch reports the stages of proofs as they run: a log record at info level when each
// starts and ends, the stage on the progress line, and, when heartbeat is set (no progress line),
// a record every HeartbeatEvery while a stage runs, so that the log never stays silent for long.
type StageWatch struct {
	log       *zerolog.Logger
	task      *progress.Task
	heartbeat bool
	// Prefix is added to the stage names shown and logged ("run 2/5").
	Prefix string
	// Level is the level of the stage start and done records (info by default; the heartbeat
	// of a long stage is always at info).
	Level zerolog.Level

	mu    sync.Mutex
	stage string
	start time.Time
	// last is when the running stage was last logged.
	last time.Time
	stop chan struct{}
}

// HeartbeatEvery is the interval of "still running" records of a long stage.
const HeartbeatEvery = 5 * time.Second

// NewStageWatch returns a watch logging to log and drawing on task (either may be nil).
func NewStageWatch(log *zerolog.Logger, task *progress.Task, heartbeat bool) *StageWatch {
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	w := &StageWatch{log: log, task: task, heartbeat: heartbeat, Level: zerolog.InfoLevel}
	if heartbeat {
		w.stop = make(chan struct{})
		go w.beat(w.stop)
	}
	return w
}

// beat logs the heartbeat until stop closes (passed in: Close sets w.stop to nil under the lock).
func (w *StageWatch) beat(stop <-chan struct{}) {
	t := time.NewTicker(HeartbeatEvery / 5)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.mu.Lock()
			if w.stage != "" && now.Sub(w.last) >= HeartbeatEvery {
				w.last = now
				ev := w.log.Info().Str("stage", w.stage).Str("elapsed", now.Sub(w.start).Round(time.Second).String())
				if w.Prefix != "" {
					ev = ev.Str("run", w.Prefix)
				}
				ev.Msg("stage still running")
			}
			w.mu.Unlock()
		}
	}
}

// Start is ProveOptions.OnStageStart.
func (w *StageWatch) Start(stage string) {
	w.mu.Lock()
	w.stage, w.start = stage, time.Now()
	w.last = w.start
	w.mu.Unlock()
	ev := w.log.WithLevel(w.Level).Str("stage", stage)
	if w.Prefix != "" {
		ev = ev.Str("run", w.Prefix)
	}
	ev.Msg("stage started")
	name := stage
	if w.Prefix != "" {
		name = w.Prefix + " " + stage
	}
	w.task.Step(name)
}

// Done is ProveOptions.OnStage.
func (w *StageWatch) Done(r stark.StageReport) {
	w.mu.Lock()
	w.stage = ""
	w.mu.Unlock()
	ev := w.log.WithLevel(w.Level).Str("stage", r.Stage).Str("elapsed", r.Wall.Round(time.Microsecond).String())
	if w.Prefix != "" {
		ev = ev.Str("run", w.Prefix)
	}
	if r.Fallbacks > 0 {
		ev = ev.Int("fallbacks", r.Fallbacks)
	}
	ev.Msg("stage done")
	w.task.Add(1)
}

// Close stops the heartbeat; it may be called more than once.
func (w *StageWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stage = ""
	if w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
}

func printReport(out io.Writer, rep *Report) error {
	fmt.Fprintf(out, "%s: proof of %d AIRs (%s) with %s on %s\n", rep.Output, len(rep.AIRs), airList(rep.AIRs), rep.Params, rep.Backend)
	fmt.Fprintf(out, "  proof %d bytes (file %d bytes), params digest %s\n", rep.ProofBytes, rep.FileBytes, rep.ParamsDigest)
	if rep.Fallbacks > 0 {
		fmt.Fprintf(out, "  device fallbacks to the CPU reference: %d calls\n", rep.Fallbacks)
	}
	if dm := rep.DeviceMemory; dm != nil {
		fmt.Fprintf(out, "  device memory: peak %s, estimated %s (%s step)\n", sysinfo.Bytes(uint64(rep.PeakMemory)), sysinfo.Bytes(uint64(dm.EstimateBytes)), dm.EstimateStep)
	}
	var parts []string
	for _, s := range []string{"read", "keygen", stark.StageLoad, stark.StageCheck, stark.StageCommit, stark.StageGkr, stark.StageConstraints, stark.StageOpenings, "write"} {
		if v, ok := rep.TimesMS[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", s, v))
		}
	}
	_, err := fmt.Fprintf(out, "  times: %s; total %.1f ms\n", strings.Join(parts, ", "), rep.TotalMS)
	return err
}

func airList(airs []AirRow) string {
	const maxShown = 6
	var names []string
	for i, a := range airs {
		if i == maxShown {
			names = append(names, fmt.Sprintf("… %d more", len(airs)-maxShown))
			break
		}
		names = append(names, fmt.Sprintf("%s %d×%d", a.Name, a.Height, a.Width))
	}
	return strings.Join(names, ", ")
}
