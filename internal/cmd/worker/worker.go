// Package worker implements `metalprove worker`: its flags and the printing of what the worker
// did when it stops. Pulling jobs from the farm's JetStream queue, proving them and storing the
// proofs is the app layer's: farm.Worker.
package worker

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/farm"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of the worker command.
type Options struct {
	IO *cmdutil.IOStreams
	// NATS is the server URL (--nats); Replicas the replica count of what the worker creates.
	NATS     string
	Replicas int
	// Config holds --concurrency, --name, the GPUs (--gpus parsed), the settings and the logger.
	farm.WorkerConfig
	GPUs string
	JSON bool

	// Context is cancelled on SIGINT or SIGTERM: the worker drains.
	Context context.Context
}

// NewCmdWorker returns the worker command. runF, when not nil, replaces workerRun (for tests).
func NewCmdWorker(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, WorkerConfig: farm.WorkerConfig{Settings: f.Settings, Logger: &f.Logger}}
	cmd := &cobra.Command{
		Use:   "worker --nats URL [--concurrency N] [--gpus LIST] [--name NAME]",
		Short: "Prove the jobs of a proving farm (NATS JetStream) until stopped",
		Long: `Join a proving farm: pull jobs from the NATS JetStream server at --nats (metalprove submit
queues them), prove each on --device with the job's proving key, store the proof in the farm's
object store, and acknowledge the job only once its proof is stored. --concurrency N proves N jobs
at once, each on its own device queue; with --device cuda, --gpus 0,1 spreads them over those GPUs.
Each queue's device is opened by its first job and kept open until the worker stops, with the
proving keys made on it. Proving keys are fetched once per worker (by their SHA-256) and cached.

A proof that takes longer than the ack wait (` + farm.AckWait.String() + `) is kept by in-progress
acknowledgements every ` + farm.Heartbeat.String() + `. A worker that dies leaves its jobs to be
redelivered to another worker after the ack wait; proofs are deterministic, so a job proved twice
stores the same bytes under the same name. A job that cannot succeed (a malformed trace, a key that
does not fit it or is not in the store, a payload over the limits, constraints that fail) is
terminated with its reason recorded (metalprove jobs shows it); a job delivered more than
` + fmt.Sprint(farm.MaxAttempts) + ` times is given up, so no job stalls the queue.

SIGINT or SIGTERM drains the worker: it gives its jobs in flight back at once (they go to another
worker without waiting for the ack wait), prints its report and exits with status 130. The
JetStream stream, consumer and buckets are created on first use (names and limits in
docs/SCALE-OUT.md); --replicas sets the replica count of those it creates (3 in a three-node
cluster).

--json prints, when the worker stops, one object: worker, proved, failed, released, already_done.`,
		Example: `  metalprove worker --nats nats://farm.example:4222 --device host
  metalprove --device cuda worker --nats nats://n1:4222,nats://n2:4222,nats://n3:4222 --gpus 0,1 --concurrency 4`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Concurrency < 1 {
				return cmdutil.Usagef("--concurrency %d: must be ≥ 1 (the jobs proved at once)", opts.Concurrency)
			}
			if opts.GPUs != "" {
				gpus, err := prover.ParseGPUs(opts.GPUs)
				if err != nil {
					return cmdutil.Usagef("--gpus %q: %v", opts.GPUs, err)
				}
				if k := prover.DeviceKind(f.Settings); k != gpu.KindCUDA && k != gpu.KindAuto {
					return cmdutil.Usagef("--gpus applies to --device cuda (the device is %s, which has one)", k)
				}
				opts.WorkerConfig.GPUs = gpus
			}
			if opts.Name == "" {
				opts.Name = farm.DefaultWorkerName()
			}
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts)
			}
			return workerRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NATS, "nats", "", "URL of the farm's NATS server, or the comma-separated URLs of a cluster's (required)")
	fl.IntVar(&opts.Concurrency, "concurrency", 1, "jobs proved at once, each on its own device queue")
	fl.StringVar(&opts.GPUs, "gpus", "", "with --device cuda: the GPUs to spread the jobs over, CUDA ordinals such as 0,1 (default: the first)")
	fl.StringVar(&opts.Name, "name", "", "the worker's name in the jobs' statuses (default: HOST-PID)")
	fl.IntVar(&opts.Replicas, "replicas", 1, "replicas of the stream and buckets the worker creates if they do not exist (3 in a three-node cluster)")
	fl.BoolVar(&opts.JSON, "json", false, "when the worker stops, print its report as one JSON object")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// workerRun connects, runs the worker until the context is done, and prints its report.
func workerRun(opts *Options) error {
	ctx := opts.Context
	fm, err := farm.Dial(ctx, opts.NATS, "metalprove worker "+opts.Name, opts.Replicas)
	if err != nil {
		return err
	}
	defer fm.Close()
	rep, err := farm.NewWorker(fm, opts.WorkerConfig).Run(ctx)
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, err)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "worker %s: %d proved, %d failed, %d given back, %d found proved already\n",
		rep.Worker, rep.Proved, rep.Failed, rep.Released, rep.AlreadyDone)
	return err
}
