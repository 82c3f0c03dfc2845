// Package cmdtest holds helpers for the command tests; only _test.go files import it.
package cmdtest

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
)

// NewFactory returns a factory of version writing to buffer-backed test streams (f.IO).
func NewFactory(version string) *cmdutil.Factory {
	ios, _, _, _ := cmdutil.TestStreams()
	return cmdutil.NewFactory(version, ios)
}

// Parse builds a command with newCmd, giving it a runF that records its options, executes it
// on args (usage and errors go to f.IO.ErrOut) and returns the recorded options. When wantErr
// is set it reports a missing error; otherwise an error stops the test. ok is true when the
// command ran and the options are there to check.
func Parse[O any](t *testing.T, f *cmdutil.Factory, newCmd func(*cmdutil.Factory, func(*O) error) *cobra.Command, args []string, wantErr bool) (got *O, ok bool) {
	t.Helper()
	cmd := newCmd(f, func(o *O) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(f.IO.ErrOut)
	cmd.SetErr(f.IO.ErrOut)
	err := cmd.Execute()
	if wantErr {
		if err == nil {
			t.Errorf("%v: want an error", args)
		}
		return nil, false
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return got, true
}

// ClearEnv removes every METALPROVE_* variable for the duration of the test.
func ClearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "METALPROVE_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// Run runs the whole command line args through run (cmd.Run) with a factory of version on
// test streams and returns the exit code, stdout, stderr and the factory.
func Run(run func(*cmdutil.Factory, []string) cmdutil.ExitCode, version string, args ...string) (cmdutil.ExitCode, *bytes.Buffer, *bytes.Buffer, *cmdutil.Factory) {
	ios, _, out, errOut := cmdutil.TestStreams()
	f := cmdutil.NewFactory(version, ios)
	return run(f, args), out, errOut, f
}
