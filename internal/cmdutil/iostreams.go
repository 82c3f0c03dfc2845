package cmdutil

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams is where a command reads and writes. Results go to Out; logs, progress and
// diagnostics go to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrTTY reports whether ErrOut is a terminal (progress bars and colour only then).
	ErrTTY bool
}

// System returns the process streams.
func System() *IOStreams {
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// TestStreams returns streams backed by buffers, for tests.
func TestStreams() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}
