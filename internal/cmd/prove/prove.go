// Package prove implements `metalprove prove`: its flags, their conflicts, and the printing of
// the report (text, or --json). The proving itself (parameters or a proving key, the trace read
// while the backend opens and the key is made, the memory checks, the multi-AIR proof and the
// proof file written atomically, with metadata naming the AIRs so that `metalprove verify` can
// rebuild the verifying key) is the app layer's: prover.Prove.
package prove

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/resident"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// Options are the inputs of the prove command: the request its flags make, and how to print.
type Options struct {
	IO *cmdutil.IOStreams
	// ProveRequest holds the flags (--trace, -o, --key, …), the settings, logger and progress.
	prover.ProveRequest
	// DeviceExplicit reports that --device was given (on the command line or by
	// METALPROVE_DEVICE): it conflicts with --cpuref.
	DeviceExplicit bool
	JSON           bool
	// Socket, when set, hands the proof to the resident prover listening there (metalprove
	// serve) instead of opening a device here.
	Socket string

	// Context is cancelled on SIGINT (nil: never).
	Context context.Context
}

// NewCmdProve returns the prove command. runF, when not nil, replaces proveRun (for tests).
func NewCmdProve(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, ProveRequest: prover.ProveRequest{Logger: &f.Logger, Settings: f.Settings}}
	cmd := &cobra.Command{
		Use:   "prove --trace FILE [--key PK [--airs I,J,…]] [-o PROOF] [--socket PATH]",
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
else the host device); every stage runs on the device. --cpuref proves on the CPU reference
backend alone; it cannot be combined with --device.

Resident prover: --socket PATH (or METALPROVE_SOCKET) hands the proof to 'metalprove serve'
listening on that Unix socket, which keeps its device open and the keys it made: the proof skips
the device's opening (about 300 ms with CUDA) and, for AIRs it proved before, keygen. The proof
file is the same, written atomically by the server at the output's absolute path; the parameters
are resolved here (--preset, the config file); the device and its memory cap are the server's.
Ctrl-C hangs up, which cancels the proof (no file). No server at PATH is an exit-5 error.

The proof file holds the proof (spec encoding) in an envelope with the parameters' digest, preceded
by metadata naming the AIRs and their heights and the preset: 'metalprove verify PROOF' rebuilds the
verifying key from them.

Device memory: before the proof starts (after keygen), its peak device memory is estimated from
the trace shapes and the parameters; a proof whose estimate exceeds the memory the device has
available (its memory less what is allocated; on CUDA at most what the driver reports free; at
most --device-memory) is refused, naming both. --json reports the estimate
(memory_estimate_bytes, memory_estimate_step, and each step's in memory_estimate_steps) beside the
measured peak (peak_memory_bytes), and on CUDA the device memory in use when the proof is done as
the driver counts it (driver_memory_used_bytes: every process's; on a GPU the process has alone,
its own peak, context, stacks and the memory pool's reserve included), and the driver's
high-water marks of the memory pool over the proof (driver_pool_peak_bytes: the most bytes handed
to buffers at once, the counterpart of peak_memory_bytes; driver_pool_reserved_peak_bytes: the
most the pool held).

--json prints one object whatever the outcome: on failure {error, exit_code}, the message printed
on stderr and the exit status. On success its process object cuts the process's life into consecutive parts (ms): start_ms
(process start to the command's), setup_ms, read_ms, wait_ms (the device and the key after the
read), prove_ms (the key to the written file: times_ms' stages inside), close_ms, and total_ms,
their sum; device_open_ms is the device's opening beside the read. The process start is read on
Linux only (elsewhere start_ms and total_ms are 0). Through a resident prover, read_ms, wait_ms
and prove_ms are the server's (queue_ms, inside wait_ms, the wait for its proofs before this
one), service_ms is the request's round trip less them (the socket, the report), close_ms is 0,
and socket names the server; start_ms, setup_ms and total_ms are this process's.

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
			if opts.Socket != "" && opts.Reference {
				return cmdutil.Usagef("--socket and --cpuref conflict: a resident prover proves on its device")
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
	fl.BoolVar(&opts.NoCheck, "no-check", false, "skip the host constraint and interaction checks (an invalid trace then gives a proof that does not verify, or, on the device backend when no AIR has interactions, an error from the constraint stage)")
	fl.BoolVar(&opts.Reference, "cpuref", false, "prove on the CPU reference backend instead of the device backend (not with --device)")
	fl.StringVar(&opts.Socket, "socket", "", "hand the proof to the resident prover listening on this Unix socket (metalprove serve) instead of opening a device here")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON summary object (on failure: {error, exit_code})")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// proveRun proves through prover.Prove, or the resident prover at --socket, and prints the
// report.
func proveRun(opts *Options) error {
	var rep *prover.ProveReport
	var err error
	if opts.Socket != "" {
		rep, err = resident.Prove(opts.Context, opts.Socket, opts.ProveRequest)
	} else {
		rep, err = prover.Prove(opts.Context, opts.ProveRequest)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, nil)
	}
	return printReport(opts.IO.Out, rep)
}

// printReport prints the text report of a proof.
func printReport(out io.Writer, rep *prover.ProveReport) error {
	fmt.Fprintf(out, "%s: proof of %d AIRs (%s) with %s on %s\n", rep.Output, len(rep.AIRs), airList(rep.AIRs), rep.Params, rep.Backend)
	fmt.Fprintf(out, "  proof %d bytes (file %d bytes), params digest %s\n", rep.ProofBytes, rep.FileBytes, rep.ParamsDigest)
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

// airList names the proof's AIRs with their shapes, the first few of them.
func airList(airs []prover.AirRow) string {
	return cmdutil.ShortList(len(airs), 6, func(i int) string {
		return fmt.Sprintf("%s %d×%d", airs[i].Name, airs[i].Height, airs[i].Width)
	})
}
