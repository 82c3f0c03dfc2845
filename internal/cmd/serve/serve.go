// Package serve implements `metalprove serve`: its flags and the printing of what the resident
// prover did when it stops. Keeping the device open and answering the socket's requests is the
// app layer's: prover.Resident and resident.Server.
package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/resident"
)

// Options are the inputs of the serve command.
type Options struct {
	IO       *cmdutil.IOStreams
	Settings *cmdutil.Settings
	Logger   *zerolog.Logger
	Progress *progress.Display
	// Socket is the Unix socket's path; Ordinal the GPU (CUDA) kept open.
	Socket  string
	Ordinal int
	JSON    bool

	// Context is cancelled on SIGINT or SIGTERM: the server stops.
	Context context.Context
}

// Report is what `serve --json` prints when the server stops.
type Report struct {
	Socket string `json:"socket"`
	Device string `json:"device"`
	resident.Stats
	// DeviceOpenMS is how long the device took to open; Keys the proving keys kept at the end.
	DeviceOpenMS float64 `json:"device_open_ms"`
	Keys         int     `json:"keys"`
}

// NewCmdServe returns the serve command. runF, when not nil, replaces serveRun (for tests).
func NewCmdServe(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Settings: f.Settings, Logger: &f.Logger}
	cmd := &cobra.Command{
		Use:   "serve --socket PATH [--gpu N]",
		Short: "Keep the device open and prove the traces that 'prove --socket' hands over",
		Long: `Run a resident prover: open the device once (--device; CUDA: the GPU of --gpu), listen on the
Unix socket at --socket (mode 0600: the owner alone may connect), and prove each trace that
'metalprove prove --socket PATH' sends, one proof at a time in the order they come, until SIGINT
or SIGTERM. A process that opens a GPU pays for the driver and its context before any work (about
300 ms with CUDA); a proof handed to a resident prover pays only its trace's read, its upload and
its stages. Proving keys are kept (four at most, the oldest made going first): built-in AIRs by
their parameters, shapes and heights, key files by path, size and modification time, so the next
trace of the same AIRs skips keygen. The constraint kernels of a key are compiled on its first
proof, or ahead with 'metalprove warm'.

Each proof is the one 'metalprove prove' makes: the same checks, the same proof bytes, the proof
file written atomically by this process where the client asked, with this process's permissions;
the parameters are the client's (its --preset or config file). The server's --device-memory caps
each proof. A client that hangs up (Ctrl-C) cancels its proof, which leaves no file. A socket file
left by a server that is gone is replaced; a socket another server answers on is an error.

When it stops it prints what it did (--json: one object: socket, device, proved, failed,
device_open_ms, keys) and exits with status 130, as an interrupted command does.

Exit status: 2 for bad flags or a socket that cannot be made; 5 when the device cannot be opened;
130 when stopped.`,
		Example: `  metalprove --device cuda serve --socket /tmp/metalprove.sock &
  metalprove prove --socket /tmp/metalprove.sock --trace k1024.trace   # writes k1024.proof
  METALPROVE_SOCKET=/tmp/metalprove.sock metalprove prove --trace k16.trace --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Socket == "" {
				return cmdutil.Usagef("--socket is required: the path of the Unix socket to listen on")
			}
			if opts.Ordinal < 0 {
				return cmdutil.Usagef("--gpu %d: a GPU index is 0 or more", opts.Ordinal)
			}
			opts.Context = c.Context()
			opts.Progress = f.Progress
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Socket, "socket", "", "path of the Unix socket to listen on (required)")
	fl.IntVar(&opts.Ordinal, "gpu", 0, "with --device cuda: the GPU (CUDA ordinal) to keep open")
	fl.BoolVar(&opts.JSON, "json", false, "when the server stops, print its report as one JSON object")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// serveRun makes the socket, opens the device, serves until the context is done and prints the
// report.
func serveRun(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	log := opts.Logger
	ln, err := resident.Listen(opts.Socket)
	if err != nil {
		return err
	}
	defer ln.Close()
	task := opts.Progress.Start("serve "+opts.Socket, 0, "")
	task.Step("opening the device")
	t := time.Now()
	r, err := prover.OpenResident(opts.Settings, opts.Ordinal, log)
	task.Done()
	if err != nil {
		return err
	}
	defer r.Close()
	log.Info().Str("socket", opts.Socket).Str("backend", r.Name()).Str("device_open", time.Since(t).Round(time.Millisecond).String()).Msg("serving")
	srv := &resident.Server{Resident: r, Settings: opts.Settings, Log: log}
	serr := srv.Serve(ctx, ln)
	rep := Report{Socket: opts.Socket, Device: r.Name(), Stats: srv.Stats(), DeviceOpenMS: float64(r.OpenTime().Microseconds()) / 1e3, Keys: r.Keys()}
	if serr == nil && ctx.Err() != nil {
		serr = cmdutil.ErrInterrupted
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, serr)
	}
	if _, err := fmt.Fprintf(opts.IO.Out, "serve %s on %s: %d proved, %d failed\n", rep.Socket, rep.Device, rep.Proved, rep.Failed); err != nil {
		return err
	}
	return serr
}
