package bench

// bench --example: the main job as users run it. Generate an example's trace, check it, build
// the proving key, load the traces onto the device once (stark.LoadInputs), then prove them
// --warmup + --runs times (stark.ProveTraces), verifying every proof, and report per stage the
// median / min / max wall time and the device counters of the same per-stage instrumentation as
// `prove --json` (stark.StageReport).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/gpu"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
	"github.com/metalprove/metalprove/internal/tracefile"
)

const (
	// DefaultPerms is the default --perms of bench --example keccakf.
	DefaultPerms = 1024
	// DefaultPreset is the parameters bench proves with: OpenVM's GPU Keccak-f example's, so that
	// figures compare side by side with that implementation.
	DefaultPreset = "openvm-keccakf"
	// HostPerms, HostWarmup and HostRuns are the defaults on the host device, where one keccakf
	// proof at stacked height 2^21 takes about 25 s on 2 cores (WHIR on the CPU reference
	// dominates, whatever the permutation count): the bench then finishes in about two minutes.
	HostPerms, HostWarmup, HostRuns = 16, 0, 3
)

// ExampleReport is what `bench --example NAME --json` prints (one object). Times are in
// milliseconds; a Spread is the median, minimum and maximum over the timed runs.
type ExampleReport struct {
	Example string `json:"example"`
	// Perms is the number of Keccak-f permutations (keccakf), Rows the trace height option of a
	// test AIR example (0: its default), Seed the inputs' seed.
	Perms int    `json:"perms,omitempty"`
	Rows  int    `json:"rows,omitempty"`
	Seed  uint64 `json:"seed"`
	// AIRs are the proven AIRs with their trace widths and heights.
	AIRs []prover.AirRow `json:"airs"`
	// Params names the parameters ("preset openvm-keccakf"); ParamsDigest is the SHA-256 of their
	// postcard bytes.
	Params       string `json:"params"`
	ParamsDigest string `json:"params_digest"`
	// Device is the device's name (GPU model and driver, or the host device's threads) and Kind
	// its backend (metal, cuda, host); Backend the prover backend ("device (…)" or "cpuref").
	Device  string `json:"device"`
	Kind    string `json:"kind"`
	Backend string `json:"backend"`
	Warmup  int    `json:"warmup"`
	Runs    int    `json:"runs"`
	// GenerateMS, CheckMS and KeygenMS are the one-off steps before proving: trace generation,
	// the host constraint and interaction check of the generated trace (pure Go), keygen
	// (preprocessed commitments on the device).
	GenerateMS float64 `json:"generate_ms"`
	CheckMS    float64 `json:"check_ms"`
	KeygenMS   float64 `json:"keygen_ms"`
	// ConstraintKernels are the AIRs' generated round-0 kernels built before the runs (on a
	// device that compiles them: on a first use, compiled; later, from the cache).
	ConstraintKernels []prover.ConstraintKernels `json:"constraint_kernels,omitempty"`
	// Load is the transport step, done once: the traces uploaded to the device.
	Load StageStats `json:"load"`
	// Check is the pre-proof trace check on the loaded traces (the backend's checker: every
	// constraint on every row, the interaction balance), run before each proof and timed apart.
	Check StageStats `json:"check"`
	// Stages are the proving stages of each run (commit, gkr, constraints, openings).
	Stages []StageStats `json:"stages"`
	// ProveMS is the wall time of a whole proof (stark.ProveTraces), VerifyMS of its verification
	// (CPU, pure Go).
	ProveMS  Spread `json:"prove_ms"`
	VerifyMS Spread `json:"verify_ms"`
	// PermsPerSecond is Perms over the median proof time (keccakf only; with proofs in flight,
	// Perms times ProofsPerSecond).
	PermsPerSecond float64 `json:"perms_per_second,omitempty"`
	// ProofBytes is the size of a proof (codec bytes, Proof::encode), ProofDigest the SHA-256 of
	// the first proof's bytes (every proof's when Identical).
	ProofBytes  int    `json:"proof_bytes"`
	ProofDigest string `json:"proof_digest"`
	// Concurrency is the number of proofs in flight (--concurrency; 1: one at a time), GPUs the
	// devices they ran on with their queues and timed proofs (with --concurrency or --gpus).
	Concurrency int      `json:"concurrency"`
	GPUs        []GPUUse `json:"gpus,omitempty"`
	// ProofsPerSecond is the timed proofs over the wall time of the timed part: with
	// --concurrency or --gpus every worker's --runs proofs, started together (TimedWallMS; the
	// proofs are verified after it); otherwise --runs over the sum of their proof times.
	ProofsPerSecond float64 `json:"proofs_per_second"`
	TimedWallMS     float64 `json:"timed_wall_ms,omitempty"`
	// Identical reports that every run gave the same proof bytes (deterministic proving).
	Identical bool `json:"identical_proofs"`
	// TraceOut is the Chrome trace events file written (--trace-out), "" when none.
	TraceOut string `json:"trace_out,omitempty"`
	// PeakMemory is the largest peak device memory of the load, the check and the stages (their
	// medians); the estimate made before the load stands beside it (device backend only).
	PeakMemory int64 `json:"peak_memory_bytes"`
	// DriverUsedMemory is the device memory in use by every process after the runs, as the
	// driver counts it (prover.Report's field of that name; the first device's).
	DriverUsedMemory uint64 `json:"driver_memory_used_bytes,omitempty"`
	// DriverPool is the driver's count of the memory pool's peaks over the timed proofs (the
	// largest of them; the resident trace included, the checks between them not).
	prover.DriverPool
	*prover.DeviceMemory
}

// Spread is the median, minimum and maximum of a measurement over the timed runs.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// StageStats is one stage over the timed runs: wall time spread, and the medians of its device
// counters per proof.
type StageStats struct {
	Stage  string `json:"stage"`
	WallMS Spread `json:"wall_ms"`
	prover.StageCounters
	// Parts break a stage down where it has parts (openings: stacking, whir), aggregated the same
	// way.
	Parts []StageStats `json:"parts,omitempty"`
}

func spread(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Spread{Median: median(s), Min: s[0], Max: s[len(s)-1]}
}

// median of sorted s (the mean of the two middle values for an even count).
func median[T int | int64 | float64](s []T) T {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianOf[T int | int64 | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// stats aggregates the reports of one stage over the runs.
func stats(name string, rs []stark.StageReport) StageStats {
	st := StageStats{Stage: name}
	var wall []float64
	var disp, syncs []int
	var to, from, peak []int64
	var syncWait, hostGap []float64
	for _, r := range rs {
		wall = append(wall, ms(r.Wall))
		syncWait, hostGap = append(syncWait, ms(r.SyncWait)), append(hostGap, ms(r.HostGap))
		disp, syncs = append(disp, r.Dispatches), append(syncs, r.Syncs)
		to, from, peak = append(to, r.BytesToDevice), append(from, r.BytesFromDevice), append(peak, r.MemoryPeak)
	}
	st.WallMS = spread(wall)
	st.Dispatches, st.Syncs = medianOf(disp), medianOf(syncs)
	st.SyncWaitMS, st.HostGapMS = medianOf(syncWait), medianOf(hostGap)
	st.BytesToDevice, st.BytesFromDevice, st.PeakMemory = medianOf(to), medianOf(from), medianOf(peak)
	var partNames []string
	parts := map[string][]stark.StageReport{}
	for _, r := range rs {
		for _, pr := range r.Parts {
			if _, ok := parts[pr.Stage]; !ok {
				partNames = append(partNames, pr.Stage)
			}
			parts[pr.Stage] = append(parts[pr.Stage], pr)
		}
	}
	for _, n := range partNames {
		st.Parts = append(st.Parts, stats(n, parts[n]))
	}
	return st
}

// validateExample checks the --example options before any work and returns the example.
func (opts *Options) validateExample() (*examples.Example, error) {
	if opts.Kernels {
		return nil, cmdutil.Usagef("--kernels and --example %s: choose one", opts.Example)
	}
	ex, err := examples.Lookup(opts.Example)
	if err != nil {
		return nil, cmdutil.Usagef("--example %q: unknown example; known: %s", opts.Example, strings.Join(examples.Names(), ", "))
	}
	eo := opts.exampleOptions()
	if ex.Takes(examples.FlagPerms) && eo.Perms == 0 {
		eo.Perms = DefaultPerms // the default, decided once the device is known
	}
	if err := ex.Validate(eo); err != nil {
		return nil, &cmdutil.UsageError{Err: err}
	}
	if opts.Runs < 1 {
		return nil, cmdutil.Usagef("--runs %d: must be ≥ 1", opts.Runs)
	}
	if err := opts.validateConcurrency(); err != nil {
		return nil, err
	}
	if opts.Warmup < 0 {
		return nil, cmdutil.Usagef("--warmup %d: must be ≥ 0", opts.Warmup)
	}
	if opts.SizeLog != 0 || opts.MerkleLog != 0 {
		return nil, cmdutil.Usagef("--size-log and --merkle-log apply to --kernels only")
	}
	if opts.Reference && opts.DeviceExplicit {
		return nil, cmdutil.Usagef("--cpuref and --device conflict: --cpuref proves on the CPU reference backend, without a device")
	}
	return ex, nil
}

func (opts *Options) exampleOptions() examples.Options {
	return examples.Options{Perms: opts.Perms, Rows: opts.Rows, Seed: opts.Seed, SeedSet: opts.SeedSet}
}

// PermsLimit is the largest --perms bench can prove with parameters p on a machine with memory
// mem: the trace height may not exceed the stacked height, and the trace and its proof must fit
// in memory (prover.ProveMemoryFactor).
func PermsLimit(p sp.SystemParams, mem sysinfo.Memory) int {
	budget := uint64(1) << 62
	if mem.Total > 0 {
		budget = mem.Total / (prover.ProveMemoryFactor + 1)
	}
	return examples.PermsLimit(budget, 1<<p.LogStackedHeight())
}

// applyHostDefaults sets the host device's smaller --perms, --warmup and --runs when the bench
// runs on the host device (kind) and none of them was chosen; it reports whether it did.
func (opts *Options) applyHostDefaults(ex *examples.Example, kind gpu.Kind) bool {
	if kind != gpu.KindHost || opts.SizesSet || !ex.Takes(examples.FlagPerms) {
		return false
	}
	opts.Perms, opts.Warmup, opts.Runs = HostPerms, HostWarmup, HostRuns
	return true
}

// checkPerms refuses, before anything is allocated, a --perms that the parameters' stacked
// height or the machine's memory cannot take.
func checkPerms(ex *examples.Example, opts *Options, p sp.SystemParams, source string) error {
	if !ex.Takes(examples.FlagPerms) {
		return nil
	}
	if lim := PermsLimit(p, prover.MachineMemory()); opts.Perms > lim {
		h := 1 << p.LogStackedHeight()
		return cmdutil.Usagef("--perms %d: at most %d here: the trace height may not exceed the stacked height 2^%d of %s (%d permutations), and the trace (%s) and its proof (about %d× that) must fit in memory (%s)",
			opts.Perms, lim, p.LogStackedHeight(), source, h/24, sysinfo.Bytes(examples.KeccakfTraceBytes(opts.Perms)),
			prover.ProveMemoryFactor, sysinfo.Bytes(prover.MachineMemory().Total))
	}
	return prover.CheckKeccakfFits(opts.Perms, prover.ProveMemoryFactor+1, "")
}

func exampleRun(opts *Options) error {
	ex, err := opts.validateExample()
	if err != nil {
		return err
	}
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
	// With --key the example's sections are proved against a proving-key file (its AIRs must be
	// the example's, in order), its parameters instead of a preset's.
	var key *prover.Key
	var res *prover.Resolved
	if opts.Key != "" {
		if key, err = prover.ReadKey(opts.Key, opts.AllowInsecure); err != nil {
			return err
		}
		res = &prover.Resolved{Params: key.Params(), Preset: key.Preset, Source: key.ParamsSource(), SecurityBits: key.SecurityBits}
	} else if res, err = prover.ResolveParams(opts.Preset, opts.Settings, DefaultPreset, opts.AllowInsecure); err != nil {
		return err
	}
	p := res.Params
	if ex.Takes(examples.FlagPerms) && opts.Perms == 0 {
		opts.Perms = DefaultPerms
	}
	if err := checkPerms(ex, opts, p, res.Source); err != nil {
		return err
	}
	var traceOut interface {
		io.Writer
		Commit() error
		Abort()
	}
	if opts.TraceOut != "" {
		f, err := cmdutil.CreateOutput("--trace-out", opts.TraceOut, cfg)
		if err != nil {
			return err
		}
		defer f.Abort()
		traceOut = f
	}
	be, err := opts.openFirst(log)
	if err != nil {
		return err
	}
	defer be.Close()
	kind := gpu.Kind("")
	if dev := be.Device(); dev != nil {
		kind = dev.Kind()
	}
	if opts.applyHostDefaults(ex, kind) {
		if err := checkPerms(ex, opts, p, res.Source); err != nil {
			return err
		}
		log.Info().Int("perms", opts.Perms).Int("warmup", opts.Warmup).Int("runs", opts.Runs).
			Msgf("host device (the CPU emulating a GPU): bench uses --perms %d --warmup %d --runs %d so that it finishes in about two minutes on 2 cores; a GPU runs %d permutations (pass --perms, --warmup or --runs to choose)",
				HostPerms, HostWarmup, HostRuns, DefaultPerms)
	}
	rep := &ExampleReport{Example: ex.Name, Perms: opts.Perms, Rows: opts.Rows, Seed: opts.Seed, Params: res.Source,
		Backend: be.Name, Warmup: opts.Warmup, Runs: opts.Runs, TraceOut: opts.TraceOut, Concurrency: 1}
	dg := stark.ParamsDigest(p)
	rep.ParamsDigest = hex.EncodeToString(dg[:])
	if dev := be.Device(); dev != nil {
		rep.Device, rep.Kind = dev.Name(), string(dev.Kind())
	} else {
		rep.Device, rep.Kind = "CPU (pure Go reference)", "cpuref"
	}
	interrupted := func() error { return fmt.Errorf("bench: %w", cmdutil.ErrInterrupted) }

	// The trace.
	ev := log.Info().Str("example", ex.Name)
	if ex.Takes(examples.FlagPerms) {
		ev = ev.Int("perms", opts.Perms)
	}
	ev.Str("device", rep.Device).Str("params", res.Source).Int("warmup", opts.Warmup).Int("runs", opts.Runs).Msg("bench: generating the trace")
	task := opts.Progress.Start("bench "+ex.Name, 0, "")
	task.Step("generating the trace")
	start := time.Now()
	secs, err := ex.Generate(opts.exampleOptions())
	if err != nil {
		task.Done()
		return &cmdutil.UsageError{Err: err}
	}
	rep.GenerateMS = ms(time.Since(start))
	if ctx.Err() != nil {
		task.Done()
		return interrupted()
	}

	// The host check, once (bench measures proving, not checking).
	task.Step("checking the trace")
	start = time.Now()
	airs := make([]air.Air, len(secs))
	inputs := make([]stark.AirProvingInput, len(secs))
	tis := make([]air.TraceInput, len(secs))
	for i, s := range secs {
		airs[i] = s.Air
		ti, err := s.TraceInput()
		if err != nil {
			task.Done()
			return fmt.Errorf("bench: %s: %w", s.Name, err)
		}
		if fs, err := constraints.Check(s.Air, ti, 1); err != nil || len(fs) > 0 {
			task.Done()
			if err == nil {
				err = fmt.Errorf("row %d: constraint %d: %s", fs[0].Row, fs[0].Constraint, fs[0].Expr)
			}
			return &cmdutil.CheckFailedError{Err: fmt.Errorf("bench: the generated %s trace fails its constraints: %w", s.Name, err)}
		}
		if s.Height > 1<<p.LogStackedHeight() {
			task.Done()
			return cmdutil.Usagef("--example %s: the %s trace has height %d, above the stacked height 2^%d of %s: choose fewer rows or other parameters",
				ex.Name, s.Name, s.Height, p.LogStackedHeight(), res.Source)
		}
		tis[i] = ti
		in := stark.AirProvingInput{Common: ti.CommonMain, Public: ti.Public}
		in.Common.Height = s.Height
		in.Cached = ti.CachedMains
		inputs[i] = in
		rep.AIRs = append(rep.AIRs, prover.AirRow{Name: s.Name, Width: s.Width(), Height: s.Height})
	}
	{
		if ims, err := constraints.CheckInteractions(airs, tis); err != nil || len(ims) > 0 {
			task.Done()
			if err == nil {
				err = errors.New(ims[0].String())
			}
			return &cmdutil.CheckFailedError{Err: fmt.Errorf("bench: the generated %s interactions do not balance: %w", ex.Name, err)}
		}
	}
	rep.CheckMS = ms(time.Since(start))

	task.Step("keygen")
	start = time.Now()
	var pk *stark.ProvingKey
	if key != nil {
		hs := make([]tracefile.SectionHeader, len(secs))
		all := make([]int, len(secs))
		for i, s := range secs {
			hs[i], all[i] = tracefile.SectionHeader{Name: s.Name, Width: s.Width(), Height: s.Height, PublicValues: s.Public}, i
		}
		if err := prover.CheckKeySections(key, "--example "+ex.Name, hs, all); err != nil {
			task.Done()
			return err
		}
		pk, err = stark.KeygenFromKey(key.File.MVK, key.File.PreHash, key.Airs, be.Backend)
	} else {
		pk, err = stark.Keygen(p, airs, nil, be.Backend)
	}
	if err != nil {
		task.Done()
		return prover.ProveError(ctx, "bench keygen", err)
	}
	defer pk.Free()
	rep.KeygenMS = ms(time.Since(start))
	heights := make([]int, len(secs))
	for i, s := range secs {
		heights[i] = s.Height
	}
	var limit uint64
	if opts.Settings != nil {
		limit = opts.Settings.DeviceMemoryBytes
	}
	what := ex.Name
	if opts.Perms > 0 {
		what = fmt.Sprintf("%s with %d permutations", ex.Name, opts.Perms)
	}
	if rep.DeviceMemory, err = be.CheckDeviceMemory(pk, heights, p, true, what, limit, log); err != nil {
		task.Done()
		return err
	}
	// Compiled (or loaded from the cache) before the warm-up run, so that no run times it.
	if rep.ConstraintKernels, err = be.BuildConstraintCode(pk, task, log); err != nil {
		task.Done()
		return err
	}
	log.Info().Float64("generate_ms", rep.GenerateMS).Float64("check_ms", rep.CheckMS).Float64("keygen_ms", rep.KeygenMS).
		Msg("bench: trace generated and checked, key built")
	if opts.concurrent() {
		task.Done()
		capFrom := ""
		if limit > 0 {
			capFrom = "--device-memory"
			if opts.Settings != nil {
				capFrom = opts.Settings.Explain(capFrom)
			}
		}
		if err := opts.concurrentRun(concurrentInput{ctx: ctx, log: log, be: be, pk: pk, inputs: inputs, params: p, rep: rep, limit: limit, capFrom: capFrom}); err != nil {
			return err
		}
		return opts.writeReport(rep)
	}

	// Load once.
	task.Step("loading the trace onto the device")
	var before stark.Counters
	if be.Meter != nil {
		be.Meter.ResetPeak()
		before = be.Meter.Counters()
	}
	start = time.Now()
	traces, err := stark.LoadInputs(be.Backend, pk, inputs)
	if err != nil {
		task.Done()
		return prover.ProveError(ctx, "bench load", err)
	}
	defer stark.FreeTraces(traces)
	load := stark.StageReport{Stage: stark.StageLoad, Wall: time.Since(start), Counters: countersSince(be.Backend, before)}
	rep.Load = stats(stark.StageLoad, []stark.StageReport{load})
	task.Done()

	// Warm-up and timed runs, each proof verified.
	total := opts.Warmup + opts.Runs
	task = opts.Progress.Start("bench "+ex.Name, int64(total), "proofs")
	defer task.Done()
	watch := prover.NewStageWatch(log, task, !opts.Progress.Enabled())
	watch.Level = zerolog.DebugLevel
	defer watch.Close()
	perStage := map[string][]stark.StageReport{}
	var order []string
	var proveT, verifyT []float64
	var checks []stark.StageReport
	var first []byte
	var events []traceEvent
	rep.Identical = true
	for i := range total {
		warm := i < opts.Warmup
		name := fmt.Sprintf("run %d/%d", i-opts.Warmup+1, opts.Runs)
		if warm {
			name = fmt.Sprintf("warm-up %d/%d", i+1, opts.Warmup)
		}
		watch.Prefix = name
		var reports []stark.StageReport
		var runStart time.Time
		po := &stark.ProveOptions{Context: ctx, OnStageStart: watch.Start, OnStage: func(r stark.StageReport) {
			watch.Done(r)
			reports = append(reports, r)
			if !warm && i == opts.Warmup && opts.TraceOut != "" {
				events = append(events, stageEvent(r, time.Since(runStart)-r.Wall))
			}
		}}
		// The pre-proof check (prove runs it unless --no-check), on the loaded traces, timed apart
		// from the proof.
		task.Step(name + " check")
		check, err := timeCheck(be.Backend, pk, traces)
		if err != nil {
			return prover.ProveError(ctx, "bench "+name+" check", err)
		}
		// A CPU profile of the command (METALPROVE_CPUPROFILE) tells the proofs from the rest by
		// the label phase=prove (go tool pprof -tagfocus=phase=prove).
		var proof *stark.Proof
		be.ResetDriverPool()
		runStart = time.Now()
		pprof.Do(ctx, pprof.Labels("phase", "prove"), func(context.Context) {
			proof, err = stark.ProveTraces(pk, traces, p, be.Backend, po)
		})
		proveWall := time.Since(runStart)
		if err != nil {
			return prover.ProveError(ctx, "bench "+name, err)
		}
		if !warm {
			rep.DriverPool = rep.DriverPool.Max(be.DriverPool())
		}
		task.Step(name + " verify")
		vStart := time.Now()
		pprof.Do(ctx, pprof.Labels("phase", "verify"), func(context.Context) { err = stark.Verify(pk.VK, proof, p) })
		if err != nil {
			return &cmdutil.CheckFailedError{Err: fmt.Errorf("bench %s: the proof does not verify: %w", name, err)}
		}
		verifyWall := time.Since(vStart)
		b, err := proof.MarshalBinary()
		if err != nil {
			return fmt.Errorf("bench %s: encode proof: %w", name, err)
		}
		if first == nil {
			first = b
			rep.ProofBytes = len(b)
		} else if !bytes.Equal(first, b) {
			rep.Identical = false
		}
		log.Info().Str("run", name).Str("prove", proveWall.Round(time.Millisecond).String()).
			Str("verify", verifyWall.Round(time.Millisecond).String()).Int("proof_bytes", len(b)).Msg("bench: proof verified")
		task.Add(1)
		if ctx.Err() != nil {
			return interrupted()
		}
		if warm {
			continue
		}
		proveT = append(proveT, ms(proveWall))
		checks = append(checks, check)
		verifyT = append(verifyT, ms(verifyWall))
		for _, r := range reports {
			if _, ok := perStage[r.Stage]; !ok {
				order = append(order, r.Stage)
			}
			perStage[r.Stage] = append(perStage[r.Stage], r)
		}
		if i == opts.Warmup && opts.TraceOut != "" {
			events = append(events, traceEvent{Name: "verify", Cat: "verify", Ph: "X", TS: us(proveWall), Dur: us(verifyWall), PID: 1, TID: 1,
				Args: map[string]any{"valid": true}})
		}
	}
	watch.Close()
	task.Done()
	for _, name := range order {
		rep.Stages = append(rep.Stages, stats(name, perStage[name]))
	}
	rep.ProveMS, rep.VerifyMS = spread(proveT), spread(verifyT)
	rep.Check = stats(stark.StageCheck, checks)
	rep.PeakMemory = max(rep.Load.PeakMemory, rep.Check.PeakMemory)
	for _, s := range rep.Stages {
		rep.PeakMemory = max(rep.PeakMemory, s.PeakMemory)
	}
	rep.DriverUsedMemory = be.DriverUsedMemory()
	if opts.Perms > 0 && rep.ProveMS.Median > 0 {
		rep.PermsPerSecond = float64(opts.Perms) / (rep.ProveMS.Median / 1000)
	}
	if sum := sumOf(proveT); sum > 0 {
		rep.ProofsPerSecond = float64(len(proveT)) / (sum / 1000)
	}
	digest := sha256.Sum256(first)
	rep.ProofDigest = hex.EncodeToString(digest[:])

	if traceOut != nil {
		if err := writeTraceEvents(traceOut, rep, load, events); err != nil {
			return fmt.Errorf("--trace-out %s: %w", opts.TraceOut, err)
		}
		if err := traceOut.Commit(); err != nil {
			return fmt.Errorf("--trace-out %s: %w", opts.TraceOut, err)
		}
		log.Info().Str("path", opts.TraceOut).Msg("bench: Chrome trace events written (open in Perfetto or chrome://tracing)")
	}
	return opts.writeReport(rep)
}

// writeReport prints the report: JSON or the table.
func (opts *Options) writeReport(rep *ExampleReport) error {
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, nil)
	}
	return writeExampleTable(opts.IO.Out, rep)
}

func sumOf(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// countersSince returns the backend's device counters since before (the peak since the last
// ResetPeak); zero without a meter.
func countersSince(be *stark.Backend, before stark.Counters) stark.Counters {
	if be.Meter == nil {
		return stark.Counters{}
	}
	return be.Meter.Counters().Since(before)
}

// timeCheck runs the backend's trace check (the host checker when it has none) on the loaded
// traces and reports it as a stage; a failing check is an error.
func timeCheck(be *stark.Backend, pk *stark.ProvingKey, traces []stark.AirTraces) (stark.StageReport, error) {
	checker := be.Checker
	if checker == nil {
		checker = stark.HostChecker{}
	}
	var before stark.Counters
	if be.Meter != nil {
		be.Meter.ResetPeak()
		before = be.Meter.Counters()
	}
	start := time.Now()
	err := checker.CheckTraces(pk, traces, 1)
	return stark.StageReport{Stage: stark.StageCheck, Wall: time.Since(start), Counters: countersSince(be, before)}, err
}

// traceEvent is one Chrome trace event ("traceEvents" format; complete events, ph "X", times in
// microseconds), which Perfetto and chrome://tracing open.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   int64          `json:"ts"`
	Dur  int64          `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

func us(d time.Duration) int64 { return d.Microseconds() }

// stageEvent is the complete event of a stage that started at offset into its run.
func stageEvent(r stark.StageReport, offset time.Duration) traceEvent {
	return traceEvent{Name: r.Stage, Cat: "stage", Ph: "X", TS: us(offset), Dur: us(r.Wall), PID: 1, TID: 1,
		Args: map[string]any{
			"dispatches": r.Dispatches, "syncs": r.Syncs, "sync_wait_ms": ms(r.SyncWait), "host_gap_ms": ms(r.HostGap),
			"bytes_to_device":   r.BytesToDevice,
			"bytes_from_device": r.BytesFromDevice, "peak_memory_bytes": r.MemoryPeak,
		}}
}

// writeTraceEvents writes the first timed run (and the load before it) as Chrome trace events.
func writeTraceEvents(w io.Writer, rep *ExampleReport, load stark.StageReport, run []traceEvent) error {
	process := fmt.Sprintf("metalprove bench %s on %s", rep.Example, rep.Device)
	evs := []traceEvent{
		{Name: "process_name", Ph: "M", PID: 1, Args: map[string]any{"name": process}},
		{Name: "thread_name", Ph: "M", PID: 1, TID: 0, Args: map[string]any{"name": "load (once)"}},
		{Name: "thread_name", Ph: "M", PID: 1, TID: 1, Args: map[string]any{"name": "first timed proof"}},
	}
	// The load first (at 0), then the proof's stages, shifted after it.
	le := stageEvent(load, 0)
	le.TID = 0
	evs = append(evs, le)
	for _, e := range run {
		e.TS += us(load.Wall)
		evs = append(evs, e)
	}
	doc := struct {
		TraceEvents     []traceEvent   `json:"traceEvents"`
		DisplayTimeUnit string         `json:"displayTimeUnit"`
		OtherData       map[string]any `json:"otherData"`
	}{evs, "ms", map[string]any{"example": rep.Example, "perms": rep.Perms, "params": rep.Params, "device": rep.Device, "backend": rep.Backend}}
	enc := json.NewEncoder(w)
	return enc.Encode(doc)
}

func fmtBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	return sysinfo.Bytes(uint64(n))
}

func writeExampleTable(out io.Writer, rep *ExampleReport) error {
	what := rep.Example
	if rep.Perms > 0 {
		what = fmt.Sprintf("%s, %d permutations", rep.Example, rep.Perms)
	}
	var airs []string
	for _, a := range rep.AIRs {
		airs = append(airs, fmt.Sprintf("%s %d×%d", a.Name, a.Height, a.Width))
	}
	fmt.Fprintf(out, "bench %s (%s) under %s\n", what, strings.Join(airs, ", "), rep.Params)
	fmt.Fprintf(out, "device: %s (%s); backend %s\n", rep.Device, rep.Kind, rep.Backend)
	if len(rep.GPUs) > 0 {
		var gs []string
		for _, g := range rep.GPUs {
			gs = append(gs, fmt.Sprintf("%d on GPU %d (%s): %d timed proofs", g.Queues, g.Ordinal, g.Name, g.Proofs))
		}
		fmt.Fprintf(out, "%d proofs in flight, each on its own queue: %s\n", rep.Concurrency, strings.Join(gs, "; "))
		fmt.Fprintf(out, "per queue %d warm-up + %d timed proofs, all verified after the timed part; trace generated in %.0f ms, checked in %.0f ms, keygen %.0f ms\n\n",
			rep.Warmup, rep.Runs, rep.GenerateMS, rep.CheckMS, rep.KeygenMS)
	} else {
		fmt.Fprintf(out, "%d warm-up + %d timed proofs, each verified; trace generated in %.0f ms, checked in %.0f ms, keygen %.0f ms\n\n",
			rep.Warmup, rep.Runs, rep.GenerateMS, rep.CheckMS, rep.KeygenMS)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "stage\tmedian ms\tmin ms\tmax ms\tdispatches\tsyncs\thost gap ms\tto device\tfrom device\tpeak memory\t\n")
	row := func(s StageStats, note string) {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%d\t%d\t%.2f\t%s\t%s\t%s\t\n", s.Stage+note, s.WallMS.Median, s.WallMS.Min, s.WallMS.Max,
			s.Dispatches, s.Syncs, s.HostGapMS, fmtBytes(s.BytesToDevice), fmtBytes(s.BytesFromDevice), fmtBytes(s.PeakMemory))
	}
	if len(rep.GPUs) > 0 {
		row(rep.Load, " (once per queue)")
		row(rep.Check, " (once per queue)")
	} else {
		row(rep.Load, " (once)")
		row(rep.Check, " (before each proof)")
	}
	for _, s := range rep.Stages {
		row(s, "")
		for _, pt := range s.Parts {
			pt.Stage = "· " + pt.Stage
			row(pt, "")
		}
	}
	fmt.Fprintf(w, "prove (total)\t%.1f\t%.1f\t%.1f\t\t\t\t\t\t\t\n", rep.ProveMS.Median, rep.ProveMS.Min, rep.ProveMS.Max)
	fmt.Fprintf(w, "verify (CPU)\t%.1f\t%.1f\t%.1f\t\t\t\t\t\t\t\n", rep.VerifyMS.Median, rep.VerifyMS.Min, rep.VerifyMS.Max)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if len(rep.GPUs) > 0 {
		fmt.Fprintf(out, "%.2f proofs/s: %d proofs in %.1f ms with %d in flight (per-proof latency median %.1f ms)",
			rep.ProofsPerSecond, rep.Concurrency*rep.Runs, rep.TimedWallMS, rep.Concurrency, rep.ProveMS.Median)
		if rep.PermsPerSecond > 0 {
			fmt.Fprintf(out, ", %.1f permutations/s", rep.PermsPerSecond)
		}
		fmt.Fprintln(out)
	} else if rep.PermsPerSecond > 0 {
		fmt.Fprintf(out, "%.1f permutations/s (median proof); ", rep.PermsPerSecond)
	}
	same := "identical in every run"
	if !rep.Identical {
		same = "NOT identical across runs"
	}
	fmt.Fprintf(out, "proof %d bytes, %s\n", rep.ProofBytes, same)
	if dm := rep.DeviceMemory; dm != nil {
		fmt.Fprintf(out, "device memory: peak %s measured, %s estimated before the load (%s step)", fmtBytes(rep.PeakMemory), fmtBytes(dm.EstimateBytes), dm.EstimateStep)
		if dm.AvailableBytes > 0 {
			fmt.Fprintf(out, ", %s available", fmtBytes(int64(dm.AvailableBytes)))
		}
		fmt.Fprintln(out)
	}
	if rep.TraceOut != "" {
		fmt.Fprintf(out, "Chrome trace events of the first timed proof: %s (open in https://ui.perfetto.dev)\n", rep.TraceOut)
	}
	return nil
}
