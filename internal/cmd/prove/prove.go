// Package prove implements `metalprove prove`: it reads a trace file, finds each section's AIR
// (internal/examples), builds the proving key, proves all sections together as one multi-AIR
// proof and writes the proof file (stark.MarshalProofFileMeta, written atomically: the proof
// envelope preceded by metadata naming the AIRs, so that `metalprove verify` can rebuild the
// verifying key). What it shares with the other commands (parameter resolution, trace reading,
// backend opening, the per-stage reporting) is the app layer's, internal/prover.
package prove

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// Options are the inputs of the prove command.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *zerolog.Logger
	// Settings are the global settings (--config, --device).
	Settings *cmdutil.Settings

	Trace  string
	Output string
	// Key is a proving-key file (metalprove keygen): the AIRs, their order and the parameters
	// come from it instead of the section names and the preset.
	Key string
	// Airs lists the key's AIRs the trace proves (--airs 0,2,5; "": all).
	Airs string
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

// Report is what `metalprove prove --json` prints.
type Report struct {
	Trace  string `json:"trace"`
	Output string `json:"output"`
	Params string `json:"params"`
	// ParamsDigest is the SHA-256 of the parameters' postcard bytes (hex), as in the proof file.
	ParamsDigest string `json:"params_digest"`
	// Backend is "cpuref" or "device (<device name>)"; Fallbacks counts the device backend's
	// calls that ran on the CPU reference instead.
	Backend   string          `json:"backend"`
	Fallbacks int             `json:"fallbacks"`
	AIRs      []prover.AirRow `json:"airs"`
	// ProofBytes is the spec encoding of the proof; FileBytes the whole file (envelope, metadata).
	ProofBytes int `json:"proof_bytes"`
	FileBytes  int `json:"file_bytes"`
	// TimesMS are the stage times in milliseconds (read, keygen, check, commit, gkr, constraints,
	// openings, write) and TotalMS their sum.
	TimesMS map[string]float64 `json:"times_ms"`
	TotalMS float64            `json:"total_ms"`
	// Stages are the proving stages (load, check, commit, gkr, constraints, openings) with what
	// each cost on the device.
	Stages []prover.StageRow `json:"stages"`
	// PeakMemory is the largest of the stages' peak device memory; the memory estimate made
	// before the proof (device backend only) stands beside it.
	PeakMemory int64 `json:"peak_memory_bytes"`
	*prover.DeviceMemory
}

// NewCmdProve returns the prove command. runF, when not nil, replaces proveRun (for tests).
func NewCmdProve(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "prove --trace FILE [--key PK [--airs I,J,…]] [-o PROOF]",
		Short: "Prove a trace file: one multi-AIR SWIRL proof of all its sections",
		Long: `Read a trace file (metalprove trace), find each section's AIR by the section's name
(keccakf or a test AIR), build the proving key (AIRs in section order, all present), check every
trace against its AIR's constraints and the interactions for balance (skip with --no-check), prove
and write the proof file atomically. Without -o the proof goes beside the trace, its extension
replaced by .proof (keccakf.bin → keccakf.proof); the path is printed.

Before any proving work the output is checked: it must not be the trace or the config file, nor a
directory, and its directory must exist and be writable. The proof file appears only once complete
(mode 0644 under the umask); an error or an interrupt (Ctrl-C, exit status 130) leaves nothing.

With --key PK (a proving-key file: metalprove keygen, from a built-in example or from OpenVM's
verifying key) the AIRs, their order and the parameters are the key's: the trace file holds one
section per AIR of the key, in key order, each named as the key names its AIR, its columns the
AIR's cached main traces then its common main. --airs 0,2,5 proves only those AIRs of the key
(OpenVM lets a proof leave out AIRs not marked required): the file then holds their sections, in
that order. Names, widths, heights and public value counts are checked against the key before any
work; each mismatch is an exit-3 error naming the AIR index, its name and the field. A key whose
parameters have a security target below 100 bits needs --allow-insecure. The proof file records
the key's pre_hash; 'metalprove verify --key PK PROOF' verifies it. See docs/PROVING-KEYS.md.

Progress: each stage is logged at info level when it starts and ends (a long stage is logged
again every few seconds while it runs); on a terminal one line shows the stage and its elapsed
time instead (none with --quiet or --log-format json).

Parameters: --preset NAME (` + strings.Join(sp.PresetNames(), ", ") + `), else the --config file's
params section, else ` + prover.DefaultPreset + `. Presets and config files with a security target below 100
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
  metalprove keygen --example keccakf -o keccakf.pk && metalprove prove --key keccakf.pk --trace k16.trace
  metalprove prove --key app.pk --airs 0,2 --trace app.trace -o app.proof
  metalprove prove --trace fib.trace -o fib.proof --preset test --allow-insecure --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Trace == "" {
				return cmdutil.Usagef("--trace is required")
			}
			opts.Context = c.Context()
			opts.Progress = f.Progress
			opts.DeviceExplicit = cmdutil.DeviceExplicit(c, f.Settings)
			if opts.Reference && opts.DeviceExplicit {
				return cmdutil.Usagef("--cpuref and --device %s conflict: --cpuref proves on the CPU reference backend, without a device", f.Settings.Device)
			}
			if opts.Key != "" && opts.Preset != "" {
				return cmdutil.Usagef("--key and --preset conflict: the parameters are the key's")
			}
			if opts.Airs != "" && opts.Key == "" {
				return cmdutil.Usagef("--airs needs --key: it picks AIRs of a proving key")
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
	fl.StringVar(&opts.Key, "key", "", "proving-key file (metalprove keygen): AIRs, order and parameters from it")
	fl.StringVar(&opts.Airs, "airs", "", "with --key: the AIRs of the key the trace proves, ascending indices (default: all)")
	fl.StringVar(&opts.Preset, "preset", "", "preset: "+strings.Join(sp.PresetNames(), "|")+
		" (default: the config file's params section if any, else "+prover.DefaultPreset+")")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	fl.BoolVar(&opts.NoCheck, "no-check", false, "skip the host constraint and interaction checks (an invalid trace then gives a proof that does not verify)")
	fl.BoolVar(&opts.Reference, "cpuref", false, "prove on the CPU reference backend instead of the device backend (not with --device)")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON summary object")
	return cmd
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
	var key *prover.Key
	var present []int
	var res *prover.Resolved
	var err error
	if opts.Key != "" {
		if key, err = prover.ReadKey(opts.Key, opts.AllowInsecure); err != nil {
			return err
		}
		if present, err = prover.ParseAirs(opts.Airs, len(key.Airs)); err != nil {
			return err
		}
		res = &prover.Resolved{Params: key.Params(), Preset: key.Preset, Source: key.ParamsSource(), SecurityBits: key.SecurityBits}
	} else if res, err = prover.ResolveParams(opts.Preset, opts.Settings, "", opts.AllowInsecure); err != nil {
		return err
	}
	p := res.Params
	output := opts.Output
	if output == "" {
		output = DefaultOutput(opts.Trace)
	}
	if _, err := os.Stat(opts.Trace); err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("--trace %s: %w", opts.Trace, cmdutil.UnwrapPath(err))}
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
	// The section headers are read once: they size the proof and name the AIRs, so that the
	// device opens and the key is made (prover.Opening) while the cells are read. A file whose
	// headers cannot be read is named by the reading of its cells.
	headers, _ := prover.ReadHeaders(opts.Trace)
	if headers != nil {
		if key != nil {
			if err := prover.CheckKeySections(key, opts.Trace, headers.Sections, present); err != nil {
				return err
			}
		}
		if err := prover.CheckMemory(opts.Trace, headers.TraceCellBytes()); err != nil {
			return err
		}
	}
	var opening *prover.Opening
	if key != nil {
		opening = prover.StartOpeningKey(opts.Settings, opts.Reference, key, log)
	} else {
		opening = prover.StartOpening(opts.Settings, opts.Reference, p, headers, log)
	}
	start := time.Now()
	var st *prover.Statement
	if key != nil {
		st, err = prover.LoadKeyTrace(opts.Trace, headers, key, present)
	} else {
		st, err = prover.LoadTrace(opts.Trace, headers)
	}
	if err != nil {
		opening.Release()
		return err
	}
	timed("read", time.Since(start))
	log.Info().Str("trace", opts.Trace).Int("airs", len(st.Airs)).Str("bytes", sysinfo.Bytes(st.CellBytes)).
		Str("elapsed", time.Since(start).Round(time.Millisecond).String()).Msg("trace read")
	for i, a := range st.Airs {
		if st.Meta[i].Height > 0 { // AIRs of a key left out of the proof have none
			rep.AIRs = append(rep.AIRs, prover.AirRow{Name: a.Name(), Width: st.Widths[i], Height: st.Meta[i].Height})
		}
	}
	task.Step("opening the device")
	be, err := opening.Backend()
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		opening.Release()
		return cmdutil.ErrInterrupted
	}
	defer be.Close()
	rep.Backend = be.Name
	log.Info().Str("backend", be.Name).Str("params", res.Source).Int("airs", len(st.Airs)).Str("output", output).Msg("proving")

	task.Step("keygen")
	pk, keygen, err := opening.Key(st, opts.Trace)
	if err != nil {
		return err
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
	watch := prover.NewStageWatch(log, task, !opts.Progress.Enabled())
	defer watch.Close()
	po.OnStageStart = watch.Start
	po.OnStage = func(r stark.StageReport) {
		watch.Done(r)
		timed(r.Stage, r.Wall)
		rep.Stages = append(rep.Stages, prover.NewStageRow(r))
		rep.PeakMemory = max(rep.PeakMemory, r.MemoryPeak)
	}
	proof, err := stark.Prove(pk, st.Inputs, p, be.Backend, po)
	watch.Close()
	if err != nil {
		return prover.ProveError(ctx, opts.Trace, err)
	}
	rep.Fallbacks = be.Fallbacks()

	task.Step("writing the proof")
	start = time.Now()
	meta := st.ProofMeta(res)
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
		return fmt.Errorf("write proof file %s: %w", output, cmdutil.UnwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write proof file %s: %w", output, cmdutil.UnwrapPath(err))
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

func airList(airs []prover.AirRow) string {
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
