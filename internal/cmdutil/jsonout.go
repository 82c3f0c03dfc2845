package cmdutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Failure is what a command's --json object says of a failure: the message printed on stderr
// (its flags explained) and the process's exit status.
type Failure struct {
	Error    string   `json:"error"`
	ExitCode ExitCode `json:"exit_code"`
}

// printedError is an error whose --json object has been printed (by PrintJSON).
type printedError struct{ error }

func (e *printedError) Unwrap() error { return e.error }

// PrintJSON prints a command's --json answer on w: one indented JSON object, v's fields (v is
// the command's report; nil, or a nil pointer, when it has none). When err is not nil, the
// object ends with Failure's fields: "error" (err's message with its flags explained by s, as
// on stderr) and "exit_code" (ExitCodeFor(err)). It returns err, still mapping to the same exit
// status and marked as printed (JSONOnFailure then prints nothing more); with err nil, the
// error of the write.
func PrintJSON(w io.Writer, s *Settings, v any, err error) error {
	b, jerr := jsonObject(v, s, err)
	if jerr == nil {
		var out bytes.Buffer
		if jerr = json.Indent(&out, b, "", "  "); jerr == nil {
			out.WriteByte('\n')
			_, jerr = w.Write(out.Bytes())
		}
	}
	if err != nil {
		return &printedError{err}
	}
	return jerr
}

// jsonObject is v's JSON object followed, when err is not nil, by Failure's fields.
func jsonObject(v any, s *Settings, err error) ([]byte, error) {
	b, jerr := json.Marshal(v)
	if jerr != nil || err == nil {
		return b, jerr
	}
	fail, jerr := json.Marshal(Failure{Error: s.Explain(err.Error()), ExitCode: ExitCodeFor(err)})
	switch {
	case jerr != nil:
		return nil, jerr
	case len(b) < 2 || b[0] != '{': // no report ("null")
		return fail, nil
	case len(b) == 2: // "{}"
		return fail, nil
	}
	return append(append(b[:len(b)-1:len(b)-1], ','), fail[1:]...), nil
}

// JSONOnFailure makes cmd, when *on (its --json flag) is set, print one JSON object on stdout
// whatever the outcome: when its RunE fails without having printed its object through
// PrintJSON, the object {"error", "exit_code"} is printed (an interrupted command's exit_code
// is ExitInterrupted, as the process's). Errors found before RunE runs (unknown flags, bad
// values, a bad config file) print nothing on stdout.
func (f *Factory) JSONOnFailure(cmd *cobra.Command, on *bool) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		err := run(c, args)
		var printed *printedError
		if err == nil || !*on || errors.As(err, &printed) {
			return err
		}
		if ctx := c.Context(); ctx != nil && ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
			err = fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		return PrintJSON(f.IO.Out, f.Settings, nil, err)
	}
}
