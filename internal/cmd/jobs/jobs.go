// Package jobs implements `metalprove jobs`: its flags and the printing of the jobs' statuses and
// of the queue (a table, or --json). Reading them from the farm is the app layer's: farm.Farm's
// Status, Statuses and Queue.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/farm"
)

// Options are the inputs of the jobs command.
type Options struct {
	IO   *cmdutil.IOStreams
	NATS string
	// IDs are the jobs to show (none: every job).
	IDs []string
	// Wait waits until every job shown has ended.
	Wait     bool
	JSON     bool
	Settings *cmdutil.Settings
	Logger   *zerolog.Logger

	Context context.Context
}

// Report is what jobs --json prints.
type Report struct {
	Jobs  []*farm.Status  `json:"jobs"`
	Queue *farm.QueueInfo `json:"queue"`
}

// waitPoll is how often --wait reads the statuses again.
const waitPoll = 500 * time.Millisecond

// NewCmdJobs returns the jobs command. runF, when not nil, replaces jobsRun (for tests).
func NewCmdJobs(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Settings: f.Settings, Logger: &f.Logger}
	cmd := &cobra.Command{
		Use:   "jobs --nats URL [ID...]",
		Short: "Show the jobs of a proving farm (NATS JetStream) and its queue",
		Long: `Show the status of the jobs given by id (metalprove submit printed them), or of every job,
oldest first: its state (queued, proving, done, failed), the attempts workers made, the last
worker, the trace, the proof's size and time when done, and why it failed (with the exit status
prove gives for that error) or why its last attempt did not succeed. Then the queue: the jobs no
worker has taken yet, those in flight, those delivered more than once, and the idle workers
waiting for a job.

--wait waits until every job shown has ended (done or failed) before printing; it exits 4 when
any of them failed.

--json prints one object: jobs: [{id, state, trace_name, key_sha256, attempts, worker, proof:
{name, sha256, bytes}, prove_ms, error, exit_code, submitted_at, updated_at}], queue: {messages,
waiting, in_flight, redelivered, pulling, consumer}.

Exit status: 0; 1 when the server cannot be reached; 3 for an id the farm does not know; 4 with
--wait when a job failed.`,
		Example: `  metalprove jobs --nats nats://farm.example:4222
  metalprove jobs --nats nats://127.0.0.1:4222 --wait --json 5f0c2a9e81d04b7aa613 0b1d52c7e9f3a4d6e8c1`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := farm.CheckJobIDs(args); err != nil {
				return err
			}
			opts.IDs = args
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts)
			}
			return jobsRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NATS, "nats", "", "URL of the farm's NATS server, or the comma-separated URLs of a cluster's (required)")
	fl.BoolVar(&opts.Wait, "wait", false, "wait until every job shown has ended; exit 4 if any failed")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object (on failure: {error, exit_code})")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// jobsRun connects, reads the statuses (waiting with --wait) and the queue, and prints them.
func jobsRun(opts *Options) error {
	ctx := opts.Context
	fm, err := farm.Dial(ctx, opts.NATS, "metalprove jobs", 1)
	if err != nil {
		return err
	}
	defer fm.Close()
	rep := &Report{}
	for {
		rep.Jobs, err = statuses(ctx, fm, opts.IDs)
		if err == nil && (!opts.Wait || allEnded(rep.Jobs)) {
			break
		}
		if err != nil {
			var bad *cmdutil.BadInputError
			if !opts.Wait || errors.As(err, &bad) || ctx.Err() != nil {
				return err
			}
			// --wait outlasts a server that is slow to answer or restarting.
			opts.Logger.Warn().Err(err).Msg("reading the jobs' statuses; trying again")
		}
		select {
		case <-ctx.Done():
			return cmdutil.ErrInterrupted
		case <-time.After(waitPoll):
		}
	}
	if rep.Queue, err = fm.Queue(ctx); err != nil {
		return err
	}
	if opts.Wait {
		if n := countFailed(rep.Jobs); n > 0 {
			err = &cmdutil.CheckFailedError{Err: fmt.Errorf("%d of %d jobs failed", n, len(rep.Jobs))}
		}
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, err)
	}
	if werr := printReport(opts.IO.Out, rep); werr != nil {
		return werr
	}
	return err
}

// statuses reads the statuses of ids, or of every job when there are none. An unknown id is a
// BadInputError.
func statuses(ctx context.Context, fm *farm.Farm, ids []string) ([]*farm.Status, error) {
	if len(ids) == 0 {
		return fm.Statuses(ctx)
	}
	out := make([]*farm.Status, 0, len(ids))
	for _, id := range ids {
		st, err := fm.Status(ctx, id)
		if errors.Is(err, farm.ErrNoSuchJob) {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%w on %s", err, fm.URL)}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func allEnded(sts []*farm.Status) bool {
	for _, s := range sts {
		if !s.Ended() {
			return false
		}
	}
	return true
}

func countFailed(sts []*farm.Status) int {
	n := 0
	for _, s := range sts {
		if s.State == farm.StateFailed {
			n++
		}
	}
	return n
}

// printReport prints the jobs as a table, then the queue.
func printReport(out io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tATTEMPTS\tWORKER\tTRACE\tRESULT")
	for _, s := range rep.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.State, s.Attempts, orDash(s.Worker), s.TraceName, result(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	q := rep.Queue
	_, err := fmt.Fprintf(out, "queue: %d waiting, %d in flight (%d delivered more than once); %d idle workers pulling\n",
		q.Waiting, q.InFlight, q.Redelivered, q.Pulling)
	return err
}

// result is a job's outcome in a word or a line.
func result(s *farm.Status) string {
	switch {
	case s.State == farm.StateDone && s.Proof != nil:
		return fmt.Sprintf("proof %d bytes in %.0f ms", s.Proof.Bytes, s.ProveMS)
	case s.State == farm.StateFailed:
		return fmt.Sprintf("exit %d: %s", s.ExitCode, oneLine(s.Error))
	case s.Error != "":
		return "last attempt: " + oneLine(s.Error)
	}
	return "-"
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
