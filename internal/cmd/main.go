// Package cmd wires the command tree to the process: it builds the factory, runs the root
// command and turns the returned error into a message on stderr (a log record with --log-format
// json) and an exit code. It also owns the process's answer to SIGINT, SIGTERM, SIGHUP and
// SIGPIPE.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/atomicfile"
	"github.com/metalprove/metalprove/internal/cmd/root"
	"github.com/metalprove/metalprove/internal/cmdutil"
)

// InterruptGrace is how long a command has, after SIGINT or SIGTERM cancelled its context, to
// stop by itself (between proving stages, between rows) before the process removes the
// temporary files of writes in progress and exits anyway. A second signal exits at once.
const InterruptGrace = 2 * time.Second

// interrupted is what is printed on stderr when a command is interrupted: interruptedMsg, one
// line, on the console.
const (
	interrupted    = "interrupted; no output written"
	interruptedMsg = "metalprove: " + interrupted
)

// Main runs metalprove with os.Args and returns the exit code. SIGINT, SIGTERM, SIGHUP and SIGPIPE cancel the
// command's context; the command stops, removes its temporary files and Main returns
// ExitInterrupted with one line on stderr, whatever the command was doing.
func Main(version string) cmdutil.ExitCode {
	f := cmdutil.NewFactory(version, cmdutil.System())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	// SIGHUP (the terminal closed) and SIGPIPE (stdout or stderr piped into a reader that quit)
	// end the process as SIGINT does, cleanly: by default they killed it with its temporary
	// files left behind. With SIGPIPE caught, writes to the broken pipe return EPIPE instead.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigs)
	var exiting sync.Mutex
	go func() {
		<-sigs
		cancel()
		select {
		case <-sigs:
		case <-time.After(InterruptGrace):
		}
		// The command did not stop in time: remove what it was writing and exit. Holding the
		// lock keeps Main from returning (and exiting) meanwhile.
		exiting.Lock()
		atomicfile.Stop()
		printInterrupted(f)
		os.Exit(int(cmdutil.ExitInterrupted))
	}()
	stopProfile := startCPUProfile(f.IO.ErrOut)
	code := RunContext(ctx, f, nil)
	stopProfile()
	exiting.Lock()
	return code
}

// CPUProfileEnv names a file that receives a Go CPU profile (pprof) of the whole command: a
// developer's tool for finding the host work between a proof's device round trips
// (docs/PERFORMANCE.md). Waits inside the CUDA driver show as runtime.cgocall.
const CPUProfileEnv = "METALPROVE_CPUPROFILE"

func startCPUProfile(errOut io.Writer) (stop func()) {
	path := os.Getenv(CPUProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(errOut, "metalprove: %s: %v (no profile written)\n", CPUProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(errOut, "metalprove: %s: %v\n", CPUProfileEnv, err)
		}
	}
}

// interruptPrinted makes the interrupt message one line even when the watchdog and the command
// both report it.
var interruptPrinted atomic.Bool

func printInterrupted(f *cmdutil.Factory) {
	if interruptPrinted.CompareAndSwap(false, true) {
		printError(f, cmdutil.ExitInterrupted, interrupted)
	}
}

// printError prints the last word of a command that failed with code: "metalprove: MSG" on
// stderr, or with --log-format json one log record at level error, as the logger writes them,
// with the message and exit_code (whatever --log-level says).
func printError(f *cmdutil.Factory, code cmdutil.ExitCode, msg string) {
	// The last message starts on a clean line: the progress line (a terminal's) goes first; it
	// was overwritten by the interrupt line.
	f.Progress.Clear()
	if jsonLogs(f) {
		l := zerolog.New(f.IO.ErrOut).With().Timestamp().Logger()
		l.Error().Int("exit_code", int(code)).Msg(msg)
		return
	}
	fmt.Fprintf(f.IO.ErrOut, "metalprove: %s\n", msg)
}

// jsonLogs reports --log-format json.
func jsonLogs(f *cmdutil.Factory) bool { return f.Settings != nil && f.Settings.LogFormat == "json" }

// Run executes the command tree with args (nil: os.Args[1:]) and returns the exit code. Errors are
// printed once, on stderr, prefixed by "metalprove: " (printError: with --log-format json, a log
// record).
func Run(f *cmdutil.Factory, args []string) cmdutil.ExitCode {
	return RunContext(context.Background(), f, args)
}

// RunContext is Run with a context whose cancellation interrupts the command: the command
// stops, and RunContext prints one line and returns ExitInterrupted. A panic becomes an internal error (exit 1) with one message, not a
// stack dump (METALPROVE_TRACEBACK=1 prints the stack too).
func RunContext(ctx context.Context, f *cmdutil.Factory, args []string) (code cmdutil.ExitCode) {
	interruptPrinted.Store(false)
	// Once interrupted, no output file is committed any more, whichever command runs.
	atomicfile.Resume()
	if ctx.Err() != nil {
		atomicfile.Stop()
	}
	// The watcher ends before RunContext returns: a cancellation it saw late would otherwise stop
	// the atomic files of the next command run in this process (a test's).
	done, watched := make(chan struct{}), make(chan struct{})
	defer func() {
		close(done)
		<-watched
	}()
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			atomicfile.Stop()
		case <-done:
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			if ctx.Err() != nil {
				printInterrupted(f)
				code = cmdutil.ExitInterrupted
				return
			}
			printError(f, cmdutil.ExitError, fmt.Sprintf("internal error: %v", r))
			if os.Getenv("METALPROVE_TRACEBACK") != "" {
				f.IO.ErrOut.Write(debug.Stack())
			}
			code = cmdutil.ExitError
		}
	}()
	rootCmd := NewCommandTree(f)
	if args != nil {
		rootCmd.SetArgs(args)
	}
	err := rootCmd.ExecuteContext(ctx)
	if ctx.Err() != nil || errors.Is(err, cmdutil.ErrInterrupted) {
		// Whatever the command returned (its own message, a cancelled stage), the answer to an
		// interrupt is one line and one exit code.
		printInterrupted(f)
		return cmdutil.ExitInterrupted
	}
	code = cmdutil.ExitCodeFor(err)
	if err != nil {
		printError(f, code, f.Settings.Explain(err.Error()))
		if code == cmdutil.ExitUsage && !jsonLogs(f) {
			fmt.Fprintln(f.IO.ErrOut, "Run 'metalprove --help' for usage.")
		}
	}
	return code
}

// NewCommandTree builds the root command with every subcommand.
func NewCommandTree(f *cmdutil.Factory) *cobra.Command {
	return root.NewCmdRoot(f, subcommands(f)...)
}
