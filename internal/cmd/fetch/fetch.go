// Package fetch implements `metalprove fetch`: its flags, the checks of the output directory and
// the printing of the proof files written. Reading a job's proof from the farm, checked against
// the digest its status records, is the app layer's: farm.Farm.ReadProof.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/farm"
)

// Options are the inputs of the fetch command.
type Options struct {
	IO   *cmdutil.IOStreams
	NATS string
	IDs  []string
	// Dir is the directory the proof files go to (-o; default the current directory).
	Dir      string
	JSON     bool
	Settings *cmdutil.Settings

	Context context.Context
}

// Fetched is one proof file written.
type Fetched struct {
	ID     string `json:"id"`
	Trace  string `json:"trace_name"`
	Output string `json:"output"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Report is what fetch --json prints.
type Report struct {
	Proofs []Fetched `json:"proofs"`
}

// NewCmdFetch returns the fetch command. runF, when not nil, replaces fetchRun (for tests).
func NewCmdFetch(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "fetch --nats URL ID... [-o DIR]",
		Short: "Download the proofs of finished jobs of a proving farm (NATS JetStream)",
		Long: `Download the proof of each job given by id (metalprove submit printed them) into DIR (-o,
default the current directory) as ID.proof, a proof file as prove writes it: metalprove verify
--key PK ID.proof verifies it. Each proof is checked against the SHA-256 its job's status records.

Every job must be done: one that is not (queued, proving, failed) is an error naming its state
(and why it failed), and then no file is written. The files are written atomically (mode 0644
under the umask); one standing at the path is replaced.

--json prints one object: proofs: [{id, trace_name, output, bytes, sha256}] (on failure: {error,
exit_code}).

Exit status: 0; 1 when the server cannot be reached or a job is not done yet; 2 for bad flags or
an output directory that does not exist or cannot be written; 3 for an id the farm does not know;
4 when a job failed.`,
		Example: `  metalprove fetch --nats nats://farm.example:4222 5f0c2a9e81d04b7aa613 -o proofs/
  metalprove verify --key keccakf.pk proofs/5f0c2a9e81d04b7aa613.proof`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := farm.CheckJobIDs(args); err != nil {
				return err
			}
			if st, err := os.Stat(opts.Dir); err != nil {
				return cmdutil.Usagef("-o %s: %v", opts.Dir, cmdutil.UnwrapPath(err))
			} else if !st.IsDir() {
				return cmdutil.Usagef("-o %s: is not a directory (fetch writes ID.proof files into it)", opts.Dir)
			}
			opts.IDs = args
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts)
			}
			return fetchRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NATS, "nats", "", "URL of the farm's NATS server, or the comma-separated URLs of a cluster's (required)")
	fl.StringVarP(&opts.Dir, "output", "o", ".", "directory the proof files (ID.proof) are written to")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object (on failure: {error, exit_code})")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// fetchRun connects, reads every proof (all must be done), then writes them.
func fetchRun(opts *Options) error {
	ctx := opts.Context
	fm, err := farm.Dial(ctx, opts.NATS, "metalprove fetch", 1)
	if err != nil {
		return err
	}
	defer fm.Close()
	proofs := make([][]byte, len(opts.IDs))
	statuses := make([]*farm.Status, len(opts.IDs))
	for i, id := range opts.IDs {
		if proofs[i], statuses[i], err = fm.ReadProof(ctx, id); err != nil {
			return readError(err, fm.URL)
		}
	}
	rep := &Report{}
	for i, id := range opts.IDs {
		path := filepath.Join(opts.Dir, id+".proof")
		if err := writeProof(path, proofs[i]); err != nil {
			return err
		}
		rep.Proofs = append(rep.Proofs, Fetched{ID: id, Trace: statuses[i].TraceName, Output: path, Bytes: len(proofs[i]), SHA256: statuses[i].Proof.SHA256})
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, nil)
	}
	for _, p := range rep.Proofs {
		if _, err := fmt.Fprintln(opts.IO.Out, p.Output); err != nil {
			return err
		}
	}
	return nil
}

// readError gives ReadProof's error its exit status: an unknown job 3, a failed one 4.
func readError(err error, url string) error {
	var nd *farm.NotDoneError
	switch {
	case errors.Is(err, farm.ErrNoSuchJob):
		return &cmdutil.BadInputError{Err: fmt.Errorf("%w on %s", err, url)}
	case errors.As(err, &nd) && nd.Status.State == farm.StateFailed:
		return &cmdutil.CheckFailedError{Err: err}
	}
	return err
}

// writeProof writes a proof file atomically.
func writeProof(path string, proof []byte) error {
	out, err := cmdutil.CreateOutput("-o", path)
	if err != nil {
		return err
	}
	defer out.Abort()
	if _, err := out.Write(proof); err != nil {
		return fmt.Errorf("write %s: %w", path, cmdutil.UnwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", path, cmdutil.UnwrapPath(err))
	}
	return nil
}
