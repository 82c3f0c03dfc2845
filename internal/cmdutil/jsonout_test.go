package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/spf13/cobra"
)

func TestPrintJSON(t *testing.T) {
	type report struct {
		Path   string `json:"path"`
		Passed bool   `json:"passed"`
	}
	var none *report
	s := &Settings{Origins: map[string]string{"runs": "key commands.bench.runs of config file m.yaml"}}
	failed := fmt.Errorf("x.bin: %w", &CheckFailedError{Err: errors.New("trace check failed")})
	tests := []struct {
		name string
		v    any
		err  error
		want string
	}{
		{"report", report{"x.bin", true}, nil, "{\n  \"path\": \"x.bin\",\n  \"passed\": true\n}\n"},
		{"report and failure", &report{"x.bin", false}, failed,
			"{\n  \"path\": \"x.bin\",\n  \"passed\": false,\n  \"error\": \"x.bin: trace check failed\",\n  \"exit_code\": 4\n}\n"},
		{"no report", nil, &BadInputError{Err: errors.New("a <b> & c")},
			"{\n  \"error\": \"a \\u003cb\\u003e \\u0026 c\",\n  \"exit_code\": 3\n}\n"},
		{"nil report", none, Usagef("--runs 0: must be ≥ 1"),
			"{\n  \"error\": \"key commands.bench.runs of config file m.yaml 0: must be ≥ 1\",\n  \"exit_code\": 2\n}\n"},
		{"empty report", struct{}{}, errors.New("boom"), "{\n  \"error\": \"boom\",\n  \"exit_code\": 1\n}\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := PrintJSON(&out, s, tt.v, tt.err)
		if out.String() != tt.want {
			t.Errorf("%s: printed\n%s\nwant\n%s", tt.name, out.String(), tt.want)
		}
		if !errors.Is(err, tt.err) || ExitCodeFor(err) != ExitCodeFor(tt.err) || (err != nil && err.Error() != tt.err.Error()) {
			t.Errorf("%s: returned %v (exit %d), want %v (exit %d)", tt.name, err, ExitCodeFor(err), tt.err, ExitCodeFor(tt.err))
		}
	}
}

// TestJSONOnFailure: a command with --json prints one object when it fails, once, with the exit
// status the process gets.
func TestJSONOnFailure(t *testing.T) {
	noDevice := &DeviceError{Err: errors.New("no device")}
	checkFailed := &CheckFailedError{Err: errors.New("failed")}
	tests := []struct {
		name     string
		json     bool
		run      func(w io.Writer) error
		canceled bool
		want     string
		code     ExitCode
	}{
		{"success", true, func(w io.Writer) error { return PrintJSON(w, nil, map[string]int{"n": 1}, nil) }, false,
			"{\n  \"n\": 1\n}\n", ExitOK},
		{"failure", true, func(io.Writer) error { return noDevice }, false,
			"{\n  \"error\": \"no device\",\n  \"exit_code\": 5\n}\n", ExitDevice},
		{"failure, text", false, func(io.Writer) error { return noDevice }, false, "", ExitDevice},
		{"printed by the command", true, func(w io.Writer) error { return PrintJSON(w, nil, map[string]bool{"passed": false}, checkFailed) }, false,
			"{\n  \"passed\": false,\n  \"error\": \"failed\",\n  \"exit_code\": 4\n}\n", ExitCheckFailed},
		{"interrupted", true, func(io.Writer) error { return errors.New("context canceled") }, true,
			"{\n  \"error\": \"interrupted: context canceled\",\n  \"exit_code\": 130\n}\n", ExitInterrupted},
	}
	for _, tt := range tests {
		ios, _, out, _ := TestStreams()
		f := NewFactory("test", ios)
		var on bool
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return tt.run(ios.Out) }}
		cmd.Flags().BoolVar(&on, "json", false, "")
		f.JSONOnFailure(cmd, &on)
		args := []string{}
		if tt.json {
			args = append(args, "--json")
		}
		cmd.SetArgs(args)
		ctx, cancel := context.WithCancel(context.Background())
		if tt.canceled {
			cancel()
		}
		err := cmd.ExecuteContext(ctx)
		cancel()
		if out.String() != tt.want || ExitCodeFor(err) != tt.code {
			t.Errorf("%s: exit %d, stdout\n%s\nwant exit %d,\n%s", tt.name, ExitCodeFor(err), out, tt.code, tt.want)
		}
	}
}
