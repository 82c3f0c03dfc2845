package prover

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// ProveRequest are the inputs of Prove: what `metalprove prove` takes from its flags.
type ProveRequest struct {
	// Trace is the trace file to prove.
	Trace string
	// Output is the proof file to write ("": DefaultProofOutput of Trace).
	Output string
	// Key is a proving-key file (Keygen): the AIRs, their order and the parameters come from it
	// instead of the section names and the preset.
	Key string
	// KeyRead, when set, is the proving key Key names, read already (ReadKey): it is used as it
	// is, not read again (a service proving many traces with one key reads it once). With a
	// Resident its proving key is kept by the Key's identity: the caller keeps the same Key for
	// the same file.
	KeyRead *Key
	// Airs lists the key's AIRs the trace proves ("0,2,5"; "": all). Only with Key.
	Airs string
	// Preset is a preset name, or "" for the config file's params section (else DefaultPreset).
	// Not with Key.
	Preset        string
	AllowInsecure bool
	// NoCheck skips the host constraint checker.
	NoCheck bool
	// Reference proves on the CPU reference backend instead of the device backend.
	Reference bool
	// Ordinal is the GPU the device backend opens (a CUDA ordinal; 0 for the other kinds).
	Ordinal int
	// Resolved, when set, are the parameters resolved already (by the client of a resident
	// prover, from its own preset and config file): used instead of Preset and the settings'
	// config file, validated again. Not with Key.
	Resolved *Resolved
	// Resident, when set, is the open backend to prove on, with its kept proving keys
	// (metalprove serve): no device is opened or released, and Reference and Ordinal are not
	// used. The proof waits for the resident's proofs before it once the trace is read.
	Resident *Resident

	// Settings are the global settings (config file, device, device memory; nil: none).
	Settings *cmdutil.Settings
	// Logger receives the progress records (nil: none).
	Logger *zerolog.Logger
	// Progress draws the stages on a terminal (nil: nothing drawn).
	Progress *progress.Display
}

// ProveReport is what Prove did: what `metalprove prove --json` prints.
type ProveReport struct {
	Trace  string `json:"trace"`
	Output string `json:"output"`
	Params string `json:"params"`
	// ParamsDigest is the SHA-256 of the parameters' postcard bytes (hex), as in the proof file.
	ParamsDigest string `json:"params_digest"`
	// Backend is "cpuref" or "device (<device name>)".
	Backend string   `json:"backend"`
	AIRs    []AirRow `json:"airs"`
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
	// DriverUsedMemory is the device memory in use by every process when the proof is done, as
	// the driver counts it (CUDA; omitted where it does not say): the process's own on a GPU it
	// has alone, context, stacks and the memory pool's reserve included (the pool keeps what
	// the proof freed, so this is the process's peak).
	DriverUsedMemory uint64 `json:"driver_memory_used_bytes,omitempty"`
	// DriverPool is the driver's count of the memory pool's peaks over the proof (the trace's
	// load included).
	DriverPool
	*DeviceMemory
	// ConstraintKernels are the AIRs' generated round-0 kernels, built before the proof on a
	// device that compiles them (compiled on a first use, else from the cache; timed as
	// "constraint_kernels").
	ConstraintKernels []ConstraintKernels `json:"constraint_kernels,omitempty"`
	// Process accounts for the process around the command's own times.
	Process ProcessTimes `json:"process"`
}

// ProcessTimes cut a prove process's life into consecutive parts, in milliseconds (the command's
// own times, times_ms, name what runs inside them; keygen and the device's opening overlap the
// read).
type ProcessTimes struct {
	// StartMS: from the process's start (exec) to the command's (loading, the Go runtime, flags
	// and configuration); 0 where the system does not give the process's start
	// (sysinfo.ProcessStart), and TotalMS is then 0 too.
	StartMS float64 `json:"start_ms"`
	// SetupMS: the command's checks before the read (parameters, the output file, the trace's
	// headers) and the start of the device's opening.
	SetupMS float64 `json:"setup_ms"`
	// ReadMS: the trace read (times_ms.read).
	ReadMS float64 `json:"read_ms"`
	// WaitMS: after the read, the wait for the device and the proving key (what of the
	// device's opening and of keygen the read did not hide), and the report's AIR rows.
	WaitMS float64 `json:"wait_ms"`
	// ProveMS: from the key to the written proof file: the memory estimate, the constraint
	// kernels, the stages and the write (times_ms), and the set-up between them.
	ProveMS float64 `json:"prove_ms"`
	// CloseMS: the proving key and the device released.
	CloseMS float64 `json:"close_ms"`
	// TotalMS: from the process's start to the report, the sum of the parts above.
	TotalMS float64 `json:"total_ms"`
	// DeviceOpenMS: the device's opening (driver, context, kernel modules), beside the read.
	DeviceOpenMS float64 `json:"device_open_ms"`
	// A proof by a resident prover (prove --socket): QueueMS, inside WaitMS, is the wait for its
	// proofs before this one; ServiceMS the request's round trip as the client saw it less the
	// resident's setup, read, wait and prove (the socket, the report's transfer); SocketPath
	// names the resident. StartMS, SetupMS and TotalMS are then the client's process.
	QueueMS    float64 `json:"queue_ms,omitempty"`
	ServiceMS  float64 `json:"service_ms,omitempty"`
	SocketPath string  `json:"socket,omitempty"`
}

// timed records a stage's time in the report and adds it to the total.
func (rep *ProveReport) timed(name string, d time.Duration) {
	rep.TimesMS[name] = ms(d)
	rep.TotalMS += ms(d)
}

// DefaultProofOutput is the proof file written for trace when no output is given: the trace's
// path with its extension replaced by ".proof" (keccakf.bin → keccakf.proof), beside the trace.
func DefaultProofOutput(trace string) string {
	ext := filepath.Ext(trace)
	if ext == trace || strings.ContainsRune(ext, filepath.Separator) {
		ext = ""
	}
	return strings.TrimSuffix(trace, ext) + ".proof"
}

// nopLogger is l, or a logger that writes nothing when l is nil.
func nopLogger(l *zerolog.Logger) *zerolog.Logger {
	if l == nil {
		n := zerolog.Nop()
		return &n
	}
	return l
}

// Prove proves a trace file and writes the proof file: the parameters resolved (or the proving
// key read, its sections checked against the trace's headers), the output checked and its
// temporary file created before any proving work, the backend opened and the key made while the
// cells are read (Opening), the device memory checked, every section proved together as one
// multi-AIR proof (stark.Prove, its stages reported through a StageWatch on req.Logger and
// req.Progress) and the proof file (stark.MarshalProofFileMeta: metadata naming the AIRs, then
// the envelope) written atomically. An error leaves no file; errors carry the cmdutil types of
// the exit status (ProveError), and a cancelled ctx is cmdutil.ErrInterrupted.
func Prove(ctx context.Context, req ProveRequest) (*ProveReport, error) {
	log := nopLogger(req.Logger)
	if ctx == nil {
		ctx = context.Background()
	}
	var key *Key
	var keyID string // the key file's identity among a resident's kept keys
	var present []int
	var res *Resolved
	var err error
	switch {
	case req.KeyRead != nil:
		key = req.KeyRead
		if req.Resident != nil { // the caller keeps this Key for all its proofs with it
			keyID = fmt.Sprintf("read %p %t", key, req.AllowInsecure)
		}
	case req.Key != "" && req.Resident != nil:
		if key, keyID, err = req.Resident.fileKey(req.Key, req.AllowInsecure); err != nil {
			return nil, err
		}
	case req.Key != "":
		if key, err = ReadKey(req.Key, req.AllowInsecure); err != nil {
			return nil, err
		}
	}
	switch {
	case key != nil:
		if present, err = ParseAirs(req.Airs, len(key.Airs)); err != nil {
			return nil, err
		}
		res = key.Resolved()
	case req.Resolved != nil:
		if res, err = req.Resolved.check(req.AllowInsecure); err != nil {
			return nil, err
		}
	default:
		if res, err = ResolveParams(req.Preset, req.Settings, "", req.AllowInsecure); err != nil {
			return nil, err
		}
	}
	p := res.Params
	output := req.Output
	if output == "" {
		output = DefaultProofOutput(req.Trace)
	}
	if st, err := os.Stat(req.Trace); err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("--trace %s: %w", req.Trace, cmdutil.UnwrapPath(err))}
	} else if st.IsDir() {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("--trace %s: is a directory, not a trace file", req.Trace)}
	}
	// The output is checked (and its temporary file created) before any proving work.
	out, err := cmdutil.CreateOutput("-o", output, req.Trace, configFile(req.Settings))
	if err != nil {
		return nil, err
	}
	defer out.Abort()

	rep := &ProveReport{Trace: req.Trace, Output: output, Params: res.Source, TimesMS: map[string]float64{}}
	began := time.Now()
	procStart, procKnown := sysinfo.ProcessStart()
	dg := stark.ParamsDigest(p)
	rep.ParamsDigest = hex.EncodeToString(dg[:])

	nStages := 5 // load, commit, gkr, constraints, openings
	if !req.NoCheck {
		nStages++
	}
	task := req.Progress.Start("prove "+req.Trace, int64(nStages), "stages")
	defer task.Done()
	task.Step("reading the trace")
	// The section headers are read once: they size the proof and name the AIRs, so that the
	// device opens and the key is made (Opening) while the cells are read. A file whose headers
	// cannot be read is named by the reading of its cells.
	headers, _ := ReadHeaders(req.Trace)
	if headers != nil {
		if key != nil {
			if err := CheckKeySections(key, req.Trace, headers.Sections, present); err != nil {
				return nil, err
			}
		} else if err := headers.CheckHeights(p, res.Source); err != nil {
			return nil, err
		}
		if err := CheckMemory(req.Trace, headers.TraceCellBytes()); err != nil {
			return nil, err
		}
	}
	// A resident's opening waits for its turn (below): its keygen, when the key is not kept,
	// must not run on the device beside another proof.
	var opening *Opening
	switch {
	case req.Resident != nil:
	case key != nil:
		opening = StartOpeningKey(req.Settings, req.Reference, req.Ordinal, key, log)
	default:
		opening = StartOpening(req.Settings, req.Reference, req.Ordinal, p, headers, log)
	}
	start := time.Now()
	readStart := start
	// A resident reads into the buffers of its earlier proofs.
	var alloc func(n int) []field.Fp
	if req.Resident != nil {
		cells := req.Resident.cells.arena()
		defer cells.release()
		alloc = cells.alloc
	}
	var st *Statement
	if key != nil {
		st, err = loadKeyTrace(req.Trace, headers, key, present, alloc)
	} else {
		st, err = loadTrace(req.Trace, headers, alloc)
	}
	readEnd := time.Now()
	if err != nil {
		if opening != nil {
			opening.Release()
		}
		return nil, err
	}
	rep.timed("read", readEnd.Sub(start))
	log.Info().Str("trace", req.Trace).Int("airs", len(st.Airs)).Str("bytes", sysinfo.Bytes(st.CellBytes)).
		Str("elapsed", time.Since(start).Round(time.Millisecond).String()).Msg("trace read")
	for i, a := range st.Airs {
		if st.Meta[i].Height > 0 { // AIRs of a key left out of the proof have none
			rep.AIRs = append(rep.AIRs, AirRow{Name: a.Name(), Width: st.Widths[i], Height: st.Meta[i].Height})
		}
	}
	if req.Resident != nil {
		task.Step("waiting for the proofs before this one")
		queued, unlock := req.Resident.lock()
		defer unlock()
		rep.Process.QueueMS = ms(queued)
		opening = req.Resident.startOpening(p, headers, key, keyID)
	}
	task.Step("opening the device")
	be, err := opening.Backend()
	if err != nil {
		return nil, err
	}
	rep.Process.DeviceOpenMS = ms(opening.OpenTime())
	if ctx.Err() != nil {
		opening.Release()
		return nil, cmdutil.ErrInterrupted
	}
	closeBackend := func() {}
	if opening.Owned() {
		closeBackend = be.Close
	}
	defer closeBackend()
	rep.Backend = be.Name
	log.Info().Str("backend", be.Name).Str("params", res.Source).Int("airs", len(st.Airs)).Str("output", output).Msg("proving")

	task.Step("keygen")
	pk, keygen, err := opening.Key(st, req.Trace)
	if err != nil {
		return nil, err
	}
	keyReady := time.Now()
	defer opening.ReleaseKey(pk)
	rep.timed("keygen", keygen)
	heights := st.Heights()
	var limit uint64
	if req.Settings != nil {
		limit = req.Settings.DeviceMemoryBytes
	}
	if rep.DeviceMemory, err = be.CheckDeviceMemory(pk, heights, p, !req.NoCheck, req.Trace, limit, log); err != nil {
		return nil, err
	}
	// The AIRs' constraint kernels before the stages: a first use compiles them (seconds), which
	// the progress line and the log say, rather than a stage that seems to stall.
	start = time.Now()
	if rep.ConstraintKernels, err = be.BuildConstraintCode(pk, task, log); err != nil {
		return nil, err
	}
	if rep.ConstraintKernels != nil {
		rep.timed("constraint_kernels", time.Since(start))
	}

	po := stark.DefaultProveOptions()
	po.CheckConstraints = !req.NoCheck
	po.Context = ctx
	watch := NewStageWatch(log, task, !req.Progress.Enabled())
	defer watch.Close()
	po.OnStageStart = watch.Start
	po.OnStage = func(r stark.StageReport) {
		watch.Done(r)
		rep.timed(r.Stage, r.Wall)
		rep.Stages = append(rep.Stages, NewStageRow(r))
		rep.PeakMemory = max(rep.PeakMemory, r.MemoryPeak)
	}
	be.ResetDriverPool()
	proof, err := stark.Prove(pk, st.Inputs, p, be.Backend, po)
	watch.Close()
	if err != nil {
		return nil, ProveError(ctx, req.Trace, err)
	}
	rep.DriverUsedMemory = be.DriverUsedMemory()
	rep.DriverPool = be.DriverPool()

	task.Step("writing the proof")
	start = time.Now()
	meta := st.ProofMeta(res)
	// Encode once: the proof's size is read off the envelope of the file's bytes.
	file, err := stark.MarshalProofFileMeta(p, proof, meta)
	if err != nil {
		return nil, fmt.Errorf("encode proof: %w", err)
	}
	_, env, err := stark.SplitProofFile(file)
	if err != nil {
		return nil, fmt.Errorf("encode proof: %w", err)
	}
	rep.ProofBytes = len(env) - stark.EnvelopeOverhead
	if _, err := out.Write(file); err != nil {
		return nil, fmt.Errorf("write proof file %s: %w", output, cmdutil.UnwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("write proof file %s: %w", output, cmdutil.UnwrapPath(err))
	}
	task.Done()
	rep.FileBytes = len(file)
	rep.timed("write", time.Since(start))
	// Released here rather than by the deferred calls (which then do nothing), to be timed.
	written := time.Now()
	opening.ReleaseKey(pk)
	closeBackend()
	end := time.Now()
	rep.Process.SetupMS = ms(readStart.Sub(began))
	rep.Process.ReadMS = ms(readEnd.Sub(readStart))
	rep.Process.WaitMS = ms(keyReady.Sub(readEnd))
	rep.Process.ProveMS = ms(written.Sub(keyReady))
	rep.Process.CloseMS = ms(end.Sub(written))
	if procKnown && req.Resident == nil { // a resident's process started long before
		rep.Process.StartMS = ms(began.Sub(procStart))
		rep.Process.TotalMS = ms(end.Sub(procStart))
	}
	log.Info().Str("proof", output).Int("proof_bytes", rep.ProofBytes).Int("file_bytes", rep.FileBytes).
		Str("total", time.Duration(rep.TotalMS*float64(time.Millisecond)).Round(time.Millisecond).String()).Msg("proof written")
	return rep, nil
}
