// Package submit implements `metalprove submit`: its flags and the printing of the job ids.
// Checking the key and the traces, storing them in the farm's object store and queueing one job
// per trace is the app layer's: farm.Farm.Submit.
package submit

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/farm"
)

// Options are the inputs of the submit command.
type Options struct {
	IO *cmdutil.IOStreams
	// NATS is the server URL (--nats); Replicas the replica count of what submit creates.
	NATS     string
	Replicas int
	// SubmitRequest holds --key, the traces, --airs and --allow-insecure.
	farm.SubmitRequest
	JSON     bool
	Settings *cmdutil.Settings

	Context context.Context
}

// Report is what submit --json prints: the jobs submitted, in the order of the traces.
type Report struct {
	Jobs []farm.Submitted `json:"jobs"`
}

// NewCmdSubmit returns the submit command. runF, when not nil, replaces submitRun (for tests).
func NewCmdSubmit(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "submit --nats URL --key PK TRACE...",
		Short: "Queue trace files on a proving farm (NATS JetStream): one job each; prints the job ids",
		Long: `Submit trace files to the proving farm at --nats: one job per trace, proved with the
proving key --key (metalprove keygen) by the farm's workers (metalprove worker). Prints one job id
per line, in the order of the traces; metalprove jobs shows where they stand and metalprove fetch
downloads their proofs.

Every input is checked before anything is queued, as prove checks it: the key is read (a key with
parameters below 100 bits needs --allow-insecure), and each trace's section headers are checked
against it (names, widths, heights, public value counts; --airs picks AIRs of the key). A trace
or a key larger than the farm's limits (` + fmt.Sprint(farm.MaxTraceBytes>>20) + ` MiB, ` + fmt.Sprint(farm.MaxKeyBytes>>20) + ` MiB) is refused. The key is
stored once under its SHA-256 (kept if it is there already), each trace under its job's id.

--json prints one object: jobs: [{id, trace, trace_bytes, trace_sha256, key_sha256}] (on failure
also error and exit_code, after the jobs submitted before it).

Exit status: 0 when every trace is queued; 1 when the server cannot be reached or refuses (the
queue full: ` + fmt.Sprint(farm.MaxQueuedJobs) + ` jobs); 2 for bad flags or insecure parameters without
--allow-insecure; 3 when the key or a trace is missing, malformed, over the limits or not of the
key.`,
		Example: `  metalprove submit --nats nats://farm.example:4222 --key keccakf.pk k1.trace k2.trace
  metalprove submit --nats nats://127.0.0.1:4222 --key fib.pk --allow-insecure fib.trace --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if opts.Key == "" {
				return cmdutil.Usagef("--key is required: the proving-key file the traces are proved with (metalprove keygen)")
			}
			opts.Traces = args
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts)
			}
			return submitRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NATS, "nats", "", "URL of the farm's NATS server, or the comma-separated URLs of a cluster's (required)")
	fl.StringVar(&opts.Key, "key", "", "proving-key file the traces are proved with (required)")
	fl.StringVar(&opts.Airs, "airs", "", "the AIRs of the key the traces prove, ascending indices (default: all)")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept a key whose parameters have a security target below 100 bits")
	fl.IntVar(&opts.Replicas, "replicas", 1, "replicas of the stream and buckets submit creates if they do not exist (3 in a three-node cluster)")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object (on failure also {error, exit_code})")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// submitRun connects, submits and prints the job ids.
func submitRun(opts *Options) error {
	ctx := opts.Context
	fm, err := farm.Dial(ctx, opts.NATS, "metalprove submit", opts.Replicas)
	if err != nil {
		return err
	}
	defer fm.Close()
	jobs, err := fm.Submit(ctx, opts.SubmitRequest)
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, Report{Jobs: jobs}, err)
	}
	for _, j := range jobs {
		if _, werr := fmt.Fprintln(opts.IO.Out, j.ID); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}
