// Package bench implements `metalprove bench`: --example NAME proves a built-in example's trace
// on the device several times and reports per-stage figures (example.go); --kernels reports
// per-kernel throughput on a device next to two ceilings measured on the same device in the
// same run (device-to-device copy bandwidth and the BabyBear multiply rate), and, on the host
// device, the pure-Go reference for the same operations.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of the bench command.
type Options struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Kernels bool
	JSON    bool
	// SizeLog is log2 of the base size (0: 20 on a GPU, 16 on the host device).
	SizeLog int
	// MerkleLog is log2 of the Merkle bench's rows (0: SizeLog).
	MerkleLog int
	Runs      int

	// Example is the built-in example to prove (--example); Perms, Rows, Seed and SeedSet its
	// options, as for 'metalprove trace'.
	Example string
	Perms   int
	Rows    int
	Seed    uint64
	SeedSet bool
	// Warmup proofs precede the Runs timed ones.
	Warmup int
	// SizesSet reports that --perms, --warmup or --runs was given (on the command line, in the
	// environment or the config file): the host device's smaller defaults do not apply.
	SizesSet bool
	// Preset names the parameters ("" : the config file's params section, else DefaultPreset).
	Preset string
	// Key is a proving-key file the example is proved against (metalprove keygen): its AIRs must
	// be the example's; the parameters are the key's.
	Key           string
	AllowInsecure bool
	// Reference proves on the CPU reference backend; DeviceExplicit says --device was given.
	Reference      bool
	DeviceExplicit bool
	// TraceOut is a file to write Chrome trace events of one timed proof to ("" : none).
	TraceOut string
	// Concurrency is the number of proofs in flight (--concurrency; ConcurrencySet: given), GPUs
	// the --gpus list (CUDA ordinals, "" : every visible GPU); gpuList is GPUs parsed and shared
	// the host-side program work of the workers' backends (concurrent.go).
	Concurrency    int
	ConcurrencySet bool
	GPUs           string
	gpuList        []int
	shared         *device.Shared

	// Context is cancelled on SIGINT; Progress draws on a terminal.
	Context  context.Context
	Progress *progress.Display
}

// Result is one benchmarked operation.
type Result struct {
	Op        string  `json:"op"`
	Size      string  `json:"size"`
	MedianNS  int64   `json:"median_ns"`
	Items     float64 `json:"items_per_s"`
	ItemName  string  `json:"item"`
	GBps      float64 `json:"gb_per_s"`
	CopyRatio float64 `json:"of_copy_bw"`
	MulRatio  float64 `json:"of_mul_rate"`
	GoNS      int64   `json:"go_ns,omitempty"`
	GoRatio   float64 `json:"go_over_device,omitempty"`
}

// Report is what `bench --kernels --json` prints.
type Report struct {
	Device    string   `json:"device"`
	Kind      string   `json:"kind"`
	SizeLog   int      `json:"size_log"`
	Runs      int      `json:"runs"`
	CopyGBps  float64  `json:"copy_gb_per_s"`
	MulPerSec float64  `json:"bb_mul_per_s"`
	Results   []Result `json:"results"`
}

// NewCmdBench returns the bench command. runF, when not nil, replaces benchRun (for tests).
func NewCmdBench(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "bench --example NAME [--perms N] | bench --kernels",
		Short: "Benchmark proving a built-in example on the device, or the kernels alone",
		Long: `--example NAME: the main job. Generate the example's trace (as 'metalprove trace' does:
--perms, default ` + fmt.Sprint(DefaultPerms) + ` for keccakf, --rows, --seed), check it once, build the key, load
the traces onto the --device once, then prove them --warmup times (default 1) and --runs times
(default 5), verifying every proof. Printed: per stage (load once; commit, gkr, constraints,
openings per proof) the median / min / max wall time, kernel dispatches, host syncs, the host
gap (the time the device's queue stood empty after a sync until the host queued more work: the
cost of the round trips), bytes to and from the device and peak device memory; the median /
min / max of the whole proof and of its verification; permutations per second (keccakf); the proof size; the
device name and driver. The figures come from the per-stage instrumentation of 'prove --json'.
Parameters: --preset (default ` + DefaultPreset + `, the parameters of OpenVM's GPU Keccak-f example,
so figures compare side by side), else the config file's params section.

--concurrency N keeps N independent proofs in flight: N workers, each with its own device queue
(a CUDA stream; a Metal command queue; host devices share the process's worker pool) and device
backend, each proving its own copy of the trace: --warmup proofs each, then --runs proofs each,
all started together; proofs_per_second is the N × --runs timed proofs over the wall time of that
part, prove_ms the per-proof latency (the pre-proof trace check runs once per queue, after its
load, outside the timed part). Shared read-only: the trace's host data, the key's verifying key
and compiled constraint programs, the host-side program splits; per queue: the loaded trace,
preprocessed commitments, uploaded programs and tables. Every proof (warm-up ones too) is
verified after the timed part (a failure: exit 4) and compared byte for byte with the others
(identical_proofs; proof_digest is the SHA-256 of the first). Before anything
is loaded, N times the proof's estimated device memory must fit in what each GPU has available
(at most --device-memory per GPU), else the run is refused (exit 5) saying how many fit.
With --device cuda the workers go round-robin over every visible GPU (CUDA_VISIBLE_DEVICES
narrows them), or over the GPUs --gpus lists (CUDA ordinals: --gpus 0,1); gpus in --json gives
per GPU its queues and timed proofs. --concurrency 1 (given) measures one proof at a time the
same way, for comparison. Without either flag bench runs as before (proofs_per_second: --runs
over the sum of the proof times).

--json prints one object instead of the table (on failure: {error, exit_code}, the message
printed on stderr and the exit status):
  {example, perms, rows, seed, airs: [{name, width, height}], params, params_digest, device, kind,
   backend, warmup, runs, generate_ms, check_ms, keygen_ms,
   load: STAGE, stages: [STAGE], prove_ms: SPREAD, verify_ms: SPREAD, perms_per_second,
   proof_bytes, proof_digest, concurrency, gpus: [{ordinal, name, queues, proofs}],
   proofs_per_second, timed_wall_ms, identical_proofs, trace_out, peak_memory_bytes,
   driver_memory_used_bytes (CUDA: the device memory in use after the runs, as the driver
   counts it), driver_pool_peak_bytes and driver_pool_reserved_peak_bytes (CUDA: the
   driver's high-water marks of the memory pool over each timed proof, the largest: bytes
   handed to buffers, bytes the pool held), memory_estimate_bytes, memory_estimate_step,
   memory_estimate_steps: [{step, peak_bytes}], memory_available_bytes}
  STAGE = {stage, wall_ms: SPREAD, dispatches, syncs, sync_wait_ms, host_gap_ms,
           bytes_to_device, bytes_from_device, peak_memory_bytes} (counters: medians
           per proof; sync_wait_ms: the host blocked in syncs)
  SPREAD = {median, min, max} (milliseconds, over the timed runs)
--trace-out FILE writes Chrome trace events (the "traceEvents" JSON that Perfetto and
chrome://tracing open) of the load and of the first timed proof: one complete event per stage
with its counters as args, and the verification.

--perms is bounded by the stacked height of the parameters (2^21 rows: 87381 permutations for
openvm-keccakf) and by memory: a request that cannot fit is refused before anything is allocated.
After keygen the proof's peak device memory is estimated (as prove does: memory_estimate_bytes
beside the measured peak_memory_bytes in --json) and a proof that would not fit in the memory the
device has available (at most --device-memory) is refused before the traces are loaded.
On the host device (a CPU emulating the GPU, where one keccakf proof takes tens of seconds) the
defaults are --perms ` + fmt.Sprint(HostPerms) + `, --warmup ` + fmt.Sprint(HostWarmup) + ` and --runs ` + fmt.Sprint(HostRuns) + `, so that the bench finishes in about two
minutes on 2 cores; the log says so, and any of the three flags given restores the others' defaults.

--kernels: every kernel family (NTT columns, Poseidon2 permutations, Merkle trees) reported as
throughput and as a fraction of two ceilings measured in the same run on the same device: copy
bandwidth (Batch.Copy, 2 bytes moved per byte copied) and the BabyBear Montgomery multiply rate
(dependent bb_mul chains over many threads). Each figure is the median of --runs runs after one
warm-up, one device sync per run included. Sizes (S = --size-log): NTT 2^S and 2^(S+2) rows × 16
columns, 2^S Poseidon2 permutations, Merkle tree over 2^M rows × 42 columns with 2^4 rows per
query (M = --merkle-log, default S). NTT GB/s counts one read and one write of the matrix per pass
the launcher makes (kernels.NTT.Passes), so "of copy" is the bandwidth each pass achieves over
Batch.Copy's. The default S is 20 on a GPU and 16 on the host device (a CPU emulating the GPU:
full sizes take minutes). On the host device the pure-Go reference (internal/backend/cpuref) runs
the same operations and the Go/device time ratio is printed.

Exit status: 0 on success; 2 for bad flags or a request that cannot fit; 4 when a proof does not
verify; 5 when the device is unavailable or out of memory, or when the proof would not fit in the
device's memory; 130 when interrupted.`,
		Example: `  metalprove bench --example keccakf
  metalprove bench --example keccakf --perms 4096 --runs 10 --json
  metalprove bench --example keccakf --perms 64 --trace-out keccakf-trace.json
  metalprove --device cuda bench --example keccakf --preset app-100bit --concurrency 8 --json
  metalprove --device cuda bench --example keccakf --concurrency 8 --gpus 0,1
  metalprove bench --kernels --device host
  metalprove bench --kernels --device cuda --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("perms") && opts.Perms < 1 {
				return cmdutil.Usagef("--perms %d: must be at least 1 (leave it out for the default, %d)", opts.Perms, DefaultPerms)
			}
			opts.SeedSet = c.Flags().Changed("seed")
			opts.ConcurrencySet = c.Flags().Changed("concurrency") || !f.Settings.FromCommandLine("concurrency")
			for _, name := range []string{"perms", "warmup", "runs"} {
				opts.SizesSet = opts.SizesSet || c.Flags().Changed(name) || !f.Settings.FromCommandLine(name)
			}
			opts.Context = c.Context()
			opts.Progress = f.Progress
			opts.DeviceExplicit = cmdutil.DeviceExplicit(c, f.Settings)
			if runF != nil {
				return runF(opts)
			}
			return benchRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Example, "example", "", "prove this built-in example: "+strings.Join(examples.Names(), "|"))
	fl.IntVar(&opts.Perms, "perms", 0, fmt.Sprintf("keccakf: number of permutations (default %d, %d on the host device; at most %d on this machine with %s)",
		DefaultPerms, HostPerms, PermsLimit(sp.OpenVMKeccakfParams(), prover.MachineMemory()), DefaultPreset))
	fl.IntVar(&opts.Rows, "rows", 0, "test AIRs: trace height, a power of two (default: the example's)")
	fl.Uint64Var(&opts.Seed, "seed", prover.DefaultSeed, "seed of the random inputs (keccakf, interaction-pair)")
	fl.IntVar(&opts.Warmup, "warmup", 1, "--example: untimed proofs before the timed runs")
	fl.StringVar(&opts.Preset, "preset", "", "--example: preset: "+strings.Join(sp.PresetNames(), "|")+" (default: the config file's params section, else "+DefaultPreset+")")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "--example: accept parameters with a security target below 100 bits")
	fl.StringVar(&opts.Key, "key", "", "--example: prove against this proving-key file (metalprove keygen; its AIRs must be the example's) with its parameters")
	fl.BoolVar(&opts.Reference, "cpuref", false, "--example: prove on the CPU reference backend (not with --device)")
	fl.IntVar(&opts.Concurrency, "concurrency", 1, "--example: proofs in flight at once, each on its own device queue (CUDA stream), spread over the GPUs; reports proofs/s")
	fl.StringVar(&opts.GPUs, "gpus", "", "--example with --device cuda: the GPUs to spread proofs over, CUDA ordinals such as 0,1 (default: every visible GPU)")
	fl.StringVar(&opts.TraceOut, "trace-out", "", "--example: write Chrome trace events (Perfetto) of one timed proof to this file")
	fl.BoolVar(&opts.Kernels, "kernels", false, "benchmark the kernels against the device's ceilings")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object instead of a table")
	fl.IntVar(&opts.SizeLog, "size-log", 0, "--kernels: log2 of the base size (default 20 on a GPU, 16 on the host device)")
	fl.IntVar(&opts.MerkleLog, "merkle-log", 0, "--kernels: log2 of the rows of the Merkle bench (default: --size-log), e.g. 22")
	fl.IntVar(&opts.Runs, "runs", 5, "timed runs (median reported), after the warm-up")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

func benchRun(opts *Options) error {
	if opts.Key != "" && opts.Preset != "" {
		return cmdutil.Usagef("--key and --preset conflict: the parameters are the key's")
	}
	if opts.Example != "" {
		return exampleRun(opts)
	}
	if !opts.Kernels {
		return cmdutil.Usagef("bench: pass --example NAME (%s) or --kernels", strings.Join(examples.Names(), ", "))
	}
	if opts.Perms != 0 || opts.Rows != 0 || opts.SeedSet || opts.TraceOut != "" || opts.Reference || opts.Preset != "" || opts.Key != "" {
		return cmdutil.Usagef("--perms, --rows, --seed, --preset, --key, --cpuref and --trace-out apply to --example only")
	}
	if opts.Runs < 1 {
		return cmdutil.Usagef("--runs %d: must be ≥ 1", opts.Runs)
	}
	if opts.SizeLog < 0 || opts.SizeLog > 24 {
		return cmdutil.Usagef("--size-log %d: must be in [1, 24]", opts.SizeLog)
	}
	if opts.MerkleLog < 0 || opts.MerkleLog > 24 {
		return cmdutil.Usagef("--merkle-log %d: must be in [4, 24]", opts.MerkleLog)
	}
	dev, err := prover.OpenDevice(opts.Settings, prover.DeviceKind(opts.Settings), 0, opts.Logger)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer dev.Close()
	host := dev.Limits().SIMDWidth <= 1
	s := opts.SizeLog
	if s == 0 {
		s = 20
		if host {
			s = 16
			opts.Logger.Info().Msg("host device: default --size-log 16 (GPU default 20)")
		}
	}
	b := &bencher{dev: dev, runs: opts.Runs, host: host, rep: Report{Device: dev.Name(), Kind: string(dev.Kind()), SizeLog: s, Runs: opts.Runs}}
	ml := opts.MerkleLog
	if ml == 0 {
		ml = s
	}
	if ml < 4 {
		return cmdutil.Usagef("--merkle-log %d: must be in [4, 24]", ml)
	}
	if err := b.run(s, ml); err != nil {
		if cmdutil.ExitCodeFor(err) == cmdutil.ExitDevice {
			return err
		}
		return &cmdutil.DeviceError{Err: err}
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, b.rep, nil)
	}
	writeTable(opts, &b.rep)
	return nil
}

type bencher struct {
	dev  *gpu.Device
	runs int
	host bool
	rep  Report
}

// median times f (one warm-up, then runs timed calls).
func (b *bencher) median(f func() error) (time.Duration, error) {
	if err := f(); err != nil {
		return 0, err
	}
	ts := make([]time.Duration, b.runs)
	for i := range ts {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ts[i] = time.Since(t0)
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

func randomFp(r *rand.Rand, n int) []field.Fp {
	out := make([]field.Fp, n)
	for i := range out {
		out[i] = field.Fp(r.Uint32N(field.P))
	}
	return out
}

// add records a result: items of what per run, bytes moved and BabyBear products per run.
func (b *bencher) add(op, size, item string, t time.Duration, items, bytes, muls float64, goT time.Duration) {
	sec := t.Seconds()
	r := Result{Op: op, Size: size, MedianNS: t.Nanoseconds(), Items: items / sec, ItemName: item, GBps: bytes / sec / 1e9}
	if b.rep.CopyGBps > 0 {
		r.CopyRatio = r.GBps / b.rep.CopyGBps
	}
	if b.rep.MulPerSec > 0 {
		r.MulRatio = muls / sec / b.rep.MulPerSec
	}
	if goT > 0 {
		r.GoNS = goT.Nanoseconds()
		r.GoRatio = goT.Seconds() / sec
	}
	b.rep.Results = append(b.rep.Results, r)
}

func (b *bencher) run(s, ml int) error {
	dev := b.dev
	r := rand.New(rand.NewPCG(1, 2))

	// Ceiling 1: copy bandwidth, Batch.Copy of at least 64 MiB (past the CPU caches; bytes read
	// + written).
	logCopy := max(s+4, 24)
	n := 1 << logCopy
	src, err := kernels.UploadMont(dev, "bench copy src", randomFp(r, n))
	if err != nil {
		return err
	}
	defer src.Free()
	dst, err := gpu.AllocArray[kernels.Mont](dev, "bench copy dst", n)
	if err != nil {
		return err
	}
	defer dst.Free()
	t, err := b.median(func() error { return dev.Batch().Copy(dst.Buffer, 0, src.Buffer, 0, 4*n).Wait() })
	if err != nil {
		return err
	}
	b.rep.CopyGBps = float64(8*n) / t.Seconds() / 1e9
	b.add("copy (Batch.Copy)", fmt.Sprintf("2^%d u32", logCopy), "elem", t, float64(n), float64(8*n), 0, 0)
	t, err = b.median(func() error {
		bt := dev.Batch()
		if err := kernels.EncodeCopy(bt, dev, dst, src, n); err != nil {
			return err
		}
		return bt.Wait()
	})
	if err != nil {
		return err
	}
	b.add("copy (bench_copy kernel)", fmt.Sprintf("2^%d u32", logCopy), "elem", t, float64(n), float64(8*n), 0, 0)

	// Ceiling 2: BabyBear multiply rate.
	threads, iters := 1<<(s-2), 256
	if !b.host {
		threads, iters = 1<<20, 4096
	}
	t, err = b.median(func() error {
		bt := dev.Batch()
		if err := kernels.EncodeMulChain(bt, dev, dst, threads, iters); err != nil {
			return err
		}
		return bt.Wait()
	})
	if err != nil {
		return err
	}
	muls := float64(kernels.MulChainProducts(threads, iters))
	b.rep.MulPerSec = muls / t.Seconds()
	b.add("bb_mul chain", fmt.Sprintf("%d×%d", threads, 4*iters), "mul", t, muls, 0, muls, 0)

	// NTT columns.
	ntt := kernels.NewNTT(dev)
	defer ntt.Close()
	for _, logH := range []int{s, s + 2} {
		h, w := 1<<logH, 16
		v := randomFp(r, h*w)
		a, err := kernels.UploadMont(dev, "bench ntt", v)
		if err != nil {
			return err
		}
		t, err := b.median(func() error { return ntt.DFTColumns(a, h, w, false) })
		if err != nil {
			a.Free()
			return err
		}
		var goT time.Duration
		if b.host {
			if goT, err = b.median(func() error { return cpuref.DFTColumns(v, h) }); err != nil {
				return err
			}
		}
		// Bytes: every pass reads and writes the whole matrix once, so GB/s is the bandwidth each
		// pass achieves and "of copy" compares it with Batch.Copy.
		elems := float64(h * w)
		passes := ntt.Passes(h)
		b.add(fmt.Sprintf("ntt dft columns (%d pass)", passes), fmt.Sprintf("2^%d×%d", logH, w), "elem", t, elems, 8*elems*float64(passes), elems/2*float64(logH), goT)
		// Each pass alone (one batch, one sync each): which pass falls short of copy.
		if passes > 1 {
			for i, lr := range ntt.PassLogs(h) {
				t, err := b.median(func() error {
					bt := dev.Batch()
					if err := ntt.EncodePass(bt, a, h, w, i); err != nil {
						return err
					}
					return bt.Wait()
				})
				if err != nil {
					a.Free()
					return err
				}
				b.add(fmt.Sprintf("  ntt pass %d/%d (2^%d)", i+1, passes, lr), fmt.Sprintf("2^%d×%d", logH, w), "elem", t, elems, 8*elems, elems/2*float64(lr), 0)
			}
		}
		a.Free()
	}

	// Poseidon2 permutations.
	h2, err := kernels.NewPoseidon2(dev)
	if err != nil {
		return err
	}
	defer h2.Close()
	np := 1 << s
	states := randomFp(r, 16*np)
	sa, err := kernels.UploadMont(dev, "bench states", states)
	if err != nil {
		return err
	}
	t, err = b.median(func() error { return h2.Permute(sa, np) })
	sa.Free()
	if err != nil {
		return err
	}
	const mulsPerPerm = 8*16*4 + 13*(4+15)
	var goT time.Duration
	if b.host {
		goT, _ = b.median(func() error {
			for i := 0; i < np; i++ {
				st := (*[16]field.Fp)(states[16*i : 16*i+16])
				poseidon2.Permute(st)
			}
			return nil
		})
	}
	b.add("poseidon2 permute", fmt.Sprintf("2^%d", s), "perm", t, float64(np), float64(128*np), float64(mulsPerPerm*np), goT)

	// Merkle tree over 2^ml rows × 42 columns, 2^4 rows per query.
	rows, width, k := 1<<ml, 42, 4
	m := air.NewMatrix(width, rows)
	copy(m.Values, randomFp(r, len(m.Values)))
	ma, err := kernels.UploadMont(dev, "bench matrix", m.Values)
	if err != nil {
		return err
	}
	defer ma.Free()
	t, err = b.median(func() error {
		tree, err := h2.MerkleTree(ma, rows, width, k)
		if err == nil {
			tree.Free()
		}
		return err
	})
	if err != nil {
		return err
	}
	goT = 0
	if b.host {
		if goT, err = b.median(func() error { _, err := cpuref.NewMerkleTree(m, 1<<k); return err }); err != nil {
			return err
		}
	}
	perms := float64(rows*((width+7)/8) + rows) // row sponges + all compressions (≈ rows)
	bytes := float64(4*rows*width + 2*32*rows)
	b.add("merkle tree (k=4)", fmt.Sprintf("2^%d×%d", ml, width), "row", t, float64(rows), bytes, perms*mulsPerPerm, goT)
	return nil
}

func writeTable(opts *Options, rep *Report) {
	w := opts.IO.Out
	fmt.Fprintf(w, "device: %s (%s); size-log %d; median of %d runs after a warm-up\n", rep.Device, rep.Kind, rep.SizeLog, rep.Runs)
	fmt.Fprintf(w, "ceilings: copy %.2f GB/s (Batch.Copy, read+write), bb_mul %.3g /s\n\n", rep.CopyGBps, rep.MulPerSec)
	fmt.Fprintf(w, "%-26s %-14s %10s %16s %9s %8s %8s", "op", "size", "median", "throughput", "GB/s", "of copy", "of mul")
	hasGo := false
	for _, r := range rep.Results {
		hasGo = hasGo || r.GoNS > 0
	}
	if hasGo {
		fmt.Fprintf(w, " %10s %9s", "Go", "Go/dev")
	}
	fmt.Fprintln(w)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%-26s %-14s %10s %11.3g %-4s %9.2f %7.1f%% %7.1f%%", r.Op, r.Size,
			time.Duration(r.MedianNS).Round(time.Microsecond), r.Items, r.ItemName+"/s", r.GBps, 100*r.CopyRatio, 100*r.MulRatio)
		if hasGo {
			if r.GoNS > 0 {
				fmt.Fprintf(w, " %10s %8.2f×", time.Duration(r.GoNS).Round(time.Microsecond), r.GoRatio)
			} else {
				fmt.Fprintf(w, " %10s %9s", "", "")
			}
		}
		fmt.Fprintln(w)
	}
}
