package bench

// bench --example NAME --concurrency N [--gpus LIST]: N independent proofs in flight. Each of the
// N workers has its own queue (gpu.Open: a CUDA stream on its GPU's primary context, a Metal
// command queue; host devices share the process's worker pool) and its own device backend, and
// proves its own copy of the trace. Shared read-only by all workers: the host trace data, the
// proving key's verifying key with its compiled constraint programs and the AIRs (stark.Keygen
// runs once), and the host-side program work of the device backends (device.Shared: programs
// compiled for some outputs, split into pieces). Per worker (its queue's device memory): the
// loaded trace, the preprocessed traces and their commitments (ProvingKey.Share), the uploaded
// programs and pieces, the kernel tables (Poseidon2 constants, NTT twiddles) and the proof's
// buffers. Workers go round-robin over the GPUs (--gpus, or every visible CUDA GPU).
//
// Memory is bounded before anything is loaded: each proof in flight needs about the single
// proof's estimate (its queue's key data included), so K workers on one GPU need K times it; a
// GPU where they do not fit refuses the run (exit 5) naming N, the need, the memory available and
// how many proofs in flight would fit.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// GPUUse is one GPU of a bench with proofs in flight: its CUDA ordinal (0 for other kinds), name,
// the workers (queues) on it and the timed proofs it made.
type GPUUse struct {
	Ordinal int    `json:"ordinal"`
	Name    string `json:"name"`
	Queues  int    `json:"queues"`
	Proofs  int    `json:"proofs"`
}

// concurrent reports whether the bench keeps proofs in flight (--concurrency or --gpus given):
// the timed part is then measured as a whole (proofs per second) and the proofs verified after it.
func (opts *Options) concurrent() bool { return opts.ConcurrencySet || opts.GPUs != "" }

// validateConcurrency checks --concurrency and --gpus before any work.
func (opts *Options) validateConcurrency() error {
	if opts.Concurrency < 1 {
		return cmdutil.Usagef("--concurrency %d: must be ≥ 1 (the number of proofs in flight)", opts.Concurrency)
	}
	if !opts.concurrent() {
		return nil
	}
	if opts.Reference {
		return cmdutil.Usagef("--concurrency and --gpus apply to the device backend, not --cpuref")
	}
	if opts.TraceOut != "" {
		return cmdutil.Usagef("--trace-out applies without --concurrency and --gpus (one proof at a time)")
	}
	if opts.GPUs != "" {
		gpus, err := prover.ParseGPUs(opts.GPUs)
		if err != nil {
			return cmdutil.Usagef("--gpus %q: %v", opts.GPUs, err)
		}
		if k := prover.DeviceKind(opts.Settings); k != gpu.KindCUDA && k != gpu.KindAuto {
			return cmdutil.Usagef("--gpus applies to --device cuda (the device is %s, which has one)", k)
		}
		opts.gpuList = gpus
	}
	return nil
}

// openFirst opens the backend of the first worker: --device as prove does, or with --gpus the
// first GPU listed (CUDA).
func (opts *Options) openFirst(log *zerolog.Logger) (*prover.Backend, error) {
	if !opts.concurrent() {
		return prover.OpenBackend(opts.Settings, opts.Reference, log)
	}
	opts.shared = device.NewShared()
	kind, ordinal := prover.DeviceKind(opts.Settings), 0
	if opts.gpuList != nil {
		kind, ordinal = gpu.KindCUDA, opts.gpuList[0]
	}
	return prover.OpenDeviceBackend(opts.Settings, kind, ordinal, opts.shared, log)
}

// worker is one proof stream: its backend (queue), key and loaded traces.
type worker struct {
	be      *prover.Backend
	ordinal int
	pk      *stark.ProvingKey
	traces  []stark.AirTraces
	owned   bool // be and pk are the worker's own (not the first worker's, closed by the caller)
	load    stark.StageReport
	check   stark.StageReport
	proofs  [][]byte
	prove   []float64
	reports [][]stark.StageReport
	err     error
}

func (w *worker) close() {
	if w.traces != nil {
		stark.FreeTraces(w.traces)
	}
	if w.owned {
		if w.pk != nil {
			w.pk.Free()
		}
		w.be.Close()
	}
}

// concurrentInput is what exampleRun has prepared when the bench keeps proofs in flight.
type concurrentInput struct {
	ctx     context.Context
	log     *zerolog.Logger
	be      *prover.Backend // the first worker's (keygen ran on it)
	pk      *stark.ProvingKey
	inputs  []stark.AirProvingInput
	params  sp.SystemParams
	rep     *ExampleReport
	limit   uint64
	capFrom string // what capped the device memory ("--device-memory"), "" when nothing
}

// concurrentRun runs the workers: open, bound memory, share the key, load, check, warm up, then
// the timed part (all workers proving --runs proofs each), then verify every proof.
func (opts *Options) concurrentRun(in concurrentInput) error {
	rep, log := in.rep, in.log
	n := opts.Concurrency
	dev0 := in.be.Device()
	kind := dev0.Kind()
	gpus := opts.gpuList
	if gpus == nil {
		gpus = []int{0}
		if kind == gpu.KindCUDA {
			count, err := gpu.Count(gpu.KindCUDA)
			if err != nil {
				return &cmdutil.DeviceError{Err: fmt.Errorf("bench: %w", err)}
			}
			gpus = gpus[:0]
			for i := range count {
				gpus = append(gpus, i)
			}
		}
	}
	// Round-robin: worker i on gpus[i mod len(gpus)]; worker 0 is the backend already open.
	workers := make([]*worker, n)
	workers[0] = &worker{be: in.be, ordinal: gpus[0], pk: in.pk}
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.close()
			}
		}
	}()
	open := func(i int) error {
		ord := gpus[i%len(gpus)]
		be, err := prover.OpenDeviceBackend(opts.Settings, kind, ord, opts.shared, log)
		if err != nil {
			return err
		}
		workers[i] = &worker{be: be, ordinal: ord, owned: true}
		return nil
	}
	// One queue per GPU first: enough to bound the memory of all n before the other queues open
	// (--concurrency 100000 was refused only after 71 s of opening queues).
	for i := 1; i < min(n, len(gpus)); i++ {
		if err := open(i); err != nil {
			return err
		}
	}
	// Per GPU: the queues it will hold and the memory they may use.
	var uses []GPUUse
	first := map[int]*worker{}
	for i := range n {
		ord := gpus[i%len(gpus)]
		j := slices.IndexFunc(uses, func(u GPUUse) bool { return u.Ordinal == ord })
		if j < 0 {
			w := workers[i]
			uses = append(uses, GPUUse{Ordinal: ord, Name: w.be.Device().Name()})
			j = len(uses) - 1
			first[ord] = w
		}
		uses[j].Queues++
	}
	rep.Concurrency, rep.GPUs = n, uses
	if err := checkConcurrentMemory(rep, uses, first, opts.Concurrency, in.capFrom); err != nil {
		return err
	}
	for i := len(gpus); i < n; i++ {
		if err := open(i); err != nil {
			return err
		}
	}

	// Keys and traces, one worker at a time (the key's host data is shared, not copied).
	for i, w := range workers {
		if i > 0 {
			pk, err := in.pk.Share(w.be.Backend)
			if err != nil {
				return prover.ProveError(in.ctx, fmt.Sprintf("bench worker %d key", i), err)
			}
			w.pk = pk
		}
		var before stark.Counters
		if w.be.Meter != nil {
			w.be.Meter.ResetPeak()
			before = w.be.Meter.Counters()
		}
		start := time.Now()
		traces, err := stark.LoadInputs(w.be.Backend, w.pk, in.inputs)
		if err != nil {
			return prover.ProveError(in.ctx, fmt.Sprintf("bench worker %d load", i), err)
		}
		w.traces = traces
		w.load = stark.StageReport{Stage: stark.StageLoad, Wall: time.Since(start), Counters: countersSince(w.be.Backend, before)}
		// The pre-proof check, once per worker: the timed part measures proving.
		if w.check, err = timeCheck(w.be.Backend, w.pk, w.traces); err != nil {
			return prover.ProveError(in.ctx, fmt.Sprintf("bench worker %d check", i), err)
		}
	}
	log.Info().Int("concurrency", n).Int("gpus", len(uses)).Msg("bench: workers ready; warm-up")

	ctx, cancel := context.WithCancel(in.ctx)
	defer cancel()
	runAll := func(count int, timed bool) {
		var wg sync.WaitGroup
		for i, w := range workers {
			wg.Go(func() {
				for r := range count {
					var reports []stark.StageReport
					po := &stark.ProveOptions{Context: ctx, OnStage: func(sr stark.StageReport) { reports = append(reports, sr) }}
					start := time.Now()
					proof, err := stark.ProveTraces(w.pk, w.traces, in.params, w.be.Backend, po)
					wall := time.Since(start)
					if err == nil {
						var b []byte
						if b, err = proof.MarshalBinary(); err == nil {
							w.proofs = append(w.proofs, b)
						}
					}
					if err != nil {
						w.err = prover.ProveError(in.ctx, fmt.Sprintf("bench worker %d proof %d", i, r+1), err)
						cancel()
						return
					}
					if timed {
						w.prove = append(w.prove, ms(wall))
						w.reports = append(w.reports, reports)
					}
				}
			})
		}
		wg.Wait()
	}
	workerErr := func() error {
		if in.ctx.Err() != nil {
			return fmt.Errorf("bench: %w", cmdutil.ErrInterrupted)
		}
		for _, w := range workers {
			if w.err != nil {
				return w.err
			}
		}
		return nil
	}
	if opts.Warmup > 0 {
		runAll(opts.Warmup, false)
		if err := workerErr(); err != nil {
			return err
		}
	}
	log.Info().Int("concurrency", n).Int("runs", opts.Runs).Msg("bench: timed proofs in flight")
	start := time.Now()
	runAll(opts.Runs, true)
	wall := time.Since(start)
	if err := workerErr(); err != nil {
		return err
	}
	total := n * opts.Runs
	rep.TimedWallMS = ms(wall)
	rep.ProofsPerSecond = float64(total) / wall.Seconds()

	// Verify every proof (warm-up ones too), outside the timed part; all must be the same bytes.
	var first0 []byte
	var proveT, verifyT []float64
	var loads, checks []stark.StageReport
	perStage := map[string][]stark.StageReport{}
	var order []string
	rep.Identical = true
	for i, w := range workers {
		for k, b := range w.proofs {
			proof := new(stark.Proof)
			if err := proof.UnmarshalBinary(b); err != nil {
				return fmt.Errorf("bench worker %d proof %d: decode: %w", i, k+1, err)
			}
			vStart := time.Now()
			if err := stark.Verify(in.pk.VK, proof, in.params); err != nil {
				return &cmdutil.CheckFailedError{Err: fmt.Errorf("bench worker %d proof %d: the proof does not verify: %w", i, k+1, err)}
			}
			verifyT = append(verifyT, ms(time.Since(vStart)))
			if first0 == nil {
				first0 = b
			} else if !bytes.Equal(first0, b) {
				rep.Identical = false
			}
		}
		proveT = append(proveT, w.prove...)
		loads, checks = append(loads, w.load), append(checks, w.check)
		for _, rs := range w.reports {
			for _, r := range rs {
				if _, ok := perStage[r.Stage]; !ok {
					order = append(order, r.Stage)
				}
				perStage[r.Stage] = append(perStage[r.Stage], r)
			}
		}
		j := slices.IndexFunc(rep.GPUs, func(u GPUUse) bool { return u.Ordinal == w.ordinal })
		rep.GPUs[j].Proofs += len(w.prove)
	}
	rep.ProofBytes = len(first0)
	sum := sha256.Sum256(first0)
	rep.ProofDigest = hex.EncodeToString(sum[:])
	for _, name := range order {
		rep.Stages = append(rep.Stages, stats(name, perStage[name]))
	}
	rep.ProveMS, rep.VerifyMS = spread(proveT), spread(verifyT)
	rep.Load, rep.Check = stats(stark.StageLoad, loads), stats(stark.StageCheck, checks)
	rep.PeakMemory = max(rep.Load.PeakMemory, rep.Check.PeakMemory)
	for _, s := range rep.Stages {
		rep.PeakMemory = max(rep.PeakMemory, s.PeakMemory)
	}
	if opts.Perms > 0 {
		rep.PermsPerSecond = float64(opts.Perms) * rep.ProofsPerSecond
	}
	log.Info().Int("concurrency", n).Float64("proofs_per_second", rep.ProofsPerSecond).Float64("timed_wall_ms", rep.TimedWallMS).
		Msg("bench: every proof verified")
	return nil
}

// checkConcurrentMemory refuses proofs in flight that do not fit: on each GPU, its queues times
// the single proof's estimated peak (each queue's key data and tables included) against what the
// GPU has available (what its first queue sees, plus what that queue holds already).
func checkConcurrentMemory(rep *ExampleReport, uses []GPUUse, first map[int]*worker, n int, capFrom string) error {
	dm := rep.DeviceMemory
	if dm == nil || dm.EstimateBytes <= 0 {
		return nil
	}
	per := dm.EstimateBytes
	room := make([]int, len(uses))
	var short []string
	for j, u := range uses {
		dev := first[u.Ordinal].be.Device()
		avail, known := dev.AvailableMemory()
		if !known {
			return nil
		}
		avail += uint64(dev.Stats().MemoryInUse)
		room[j] = int(avail / uint64(per))
		if need := uint64(u.Queues) * uint64(per); need > avail {
			capped := ""
			if capFrom != "" && avail >= dev.Limits().MemoryBytes {
				capped = " (capped by " + capFrom + ")"
			}
			short = append(short, fmt.Sprintf("%d proofs in flight on %s need about %s (%d bytes: %d × %s per proof at its %s step, each queue's key data included); it has %s (%d bytes) available%s, room for %d",
				u.Queues, dev.Name(), sysinfo.Bytes(need), need, u.Queues, sysinfo.Bytes(uint64(per)), dm.EstimateStep, sysinfo.Bytes(avail), avail, capped, room[j]))
		}
	}
	// The most proofs in flight that fit when spread round-robin over these GPUs.
	fit := 0
	for m := 1; m <= n; m++ {
		ok := true
		for j := range room {
			if m/len(room)+btoi(j < m%len(room)) > room[j] {
				ok = false
			}
		}
		if !ok {
			break
		}
		fit = m
	}
	if len(short) == 0 {
		return nil
	}
	return &cmdutil.DeviceError{Err: fmt.Errorf("not enough device memory for --concurrency %d: %s; at most %d proofs fit in flight (--concurrency %d)",
		n, strings.Join(short, "; "), fit, max(fit, 1))}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
