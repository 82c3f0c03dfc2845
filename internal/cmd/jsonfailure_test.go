package cmd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// jsonObject decodes stdout, which must be exactly one JSON object.
func jsonObject(t *testing.T, args []string, out string) map[string]any {
	t.Helper()
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&obj); err != nil || dec.More() {
		t.Fatalf("metalprove %s: stdout is not one JSON object (%v):\n%s", strings.Join(args, " "), err, out)
	}
	return obj
}

// jsonFailure runs metalprove with args (--json among them), wants exit status code, and one JSON
// object on stdout whose error is the message on stderr, naming each of want, and whose exit_code
// is code. It returns the object.
func jsonFailure(t *testing.T, code cmdutil.ExitCode, want []string, args ...string) map[string]any {
	t.Helper()
	out, errOut := expect(t, code, want, args...)
	obj := jsonObject(t, args, out)
	msg, _ := obj["error"].(string)
	if c, _ := obj["exit_code"].(float64); c != float64(code) || msg == "" || !strings.Contains(errOut, "metalprove: "+msg+"\n") {
		t.Errorf("metalprove %s: object %v, want exit_code %d and the error on stderr:\n%s", strings.Join(args, " "), obj, code, errOut)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("metalprove %s: error %q lacks %q", strings.Join(args, " "), msg, w)
		}
	}
	return obj
}

// TestJSONOnFailure: with --json, prove, trace info, trace check and bench print one object when
// they fail ({error, exit_code}, after the report where there is one), with the exit status
// unchanged; they printed nothing.
func TestJSONOnFailure(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr, flags := smallTrace(t, dir)
	missing := filepath.Join(dir, "missing.bin")
	proof := filepath.Join(dir, "x.proof")

	jsonFailure(t, cmdutil.ExitUsage, []string{"--trace is required"}, "prove", "--json")
	jsonFailure(t, cmdutil.ExitBadInput, []string{missing}, append([]string{"prove", "--json", "--trace", missing, "-o", proof}, flags...)...)
	jsonFailure(t, cmdutil.ExitUsage, []string{"-o " + tr, "is the input file"}, append([]string{"prove", "--json", "--trace", tr, "-o", tr}, flags...)...)
	// The error names the flag's source, as on stderr.
	t.Setenv("METALPROVE_DEVICE_MEMORY", "64KiB")
	jsonFailure(t, cmdutil.ExitDevice, []string{"not enough device memory", "METALPROVE_DEVICE_MEMORY"},
		"--device", "host", "prove", "--json", "--trace", tr, "-o", proof, "--preset", "test", "--allow-insecure")
	jsonFailure(t, cmdutil.ExitDevice, []string{"not enough device memory", "METALPROVE_DEVICE_MEMORY"},
		"--device", "host", "bench", "--json", "--example", "fibonacci", "--rows", "8", "--preset", "test", "--allow-insecure", "--warmup", "0", "--runs", "1")
	t.Setenv("METALPROVE_DEVICE_MEMORY", "")
	jsonFailure(t, cmdutil.ExitUsage, []string{"pass --example NAME"}, "bench", "--json")
	jsonFailure(t, cmdutil.ExitUsage, []string{"--perms 0"}, "bench", "--json", "--example", "keccakf", "--perms", "0")

	// keygen, params and trace (generating) too.
	jsonFailure(t, cmdutil.ExitBadInput, []string{missing}, "keygen", "--openvm-vk", missing, "-o", filepath.Join(dir, "k.pk"), "--json")
	jsonFailure(t, cmdutil.ExitUsage, []string{"--preset"}, "params", "--preset", "nope", "--json")
	jsonFailure(t, cmdutil.ExitUsage, []string{"-o"}, "trace", "--example", "fibonacci", "--json")
	jsonFailure(t, cmdutil.ExitBadInput, []string{missing}, "trace", "info", missing, "--json")
	jsonFailure(t, cmdutil.ExitBadInput, []string{dir, "directory"}, "trace", "info", dir, "--json")
	if obj := jsonFailure(t, cmdutil.ExitBadInput, []string{missing}, "trace", "check", missing, "--json"); len(obj) != 2 {
		t.Errorf("trace check of a missing file: %v, want error and exit_code only", obj)
	}
	// A trace that fails its constraints: the report, then error and exit_code.
	secs, err := tracefile.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	secs[0].Data[5] = secs[0].Data[5].Add(field.New(1))
	bad := filepath.Join(dir, "bad.bin")
	if err := tracefile.WriteAll(bad, secs); err != nil {
		t.Fatal(err)
	}
	obj := jsonFailure(t, cmdutil.ExitCheckFailed, []string{bad, "trace check failed"}, "--device", "host", "trace", "check", bad, "--json")
	if fails, _ := obj["failures"].([]any); obj["passed"] != false || obj["path"] != bad || len(fails) == 0 {
		t.Errorf("trace check of a failing trace: %v, want the report with its failures", obj)
	}

	// Success: the report alone.
	for _, args := range [][]string{
		{"trace", "info", tr, "--json"},
		{"--device", "host", "trace", "check", tr, "--json"},
	} {
		out, _ := expect(t, cmdutil.ExitOK, nil, args...)
		if obj := jsonObject(t, args, out); obj["error"] != nil || obj["exit_code"] != nil {
			t.Errorf("%v: %v, want no error or exit_code", args, obj)
		}
	}
}

// logRecords decodes stderr, every line of which must be a JSON log record.
func logRecords(t *testing.T, errOut string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(errOut), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["time"] == nil {
			t.Fatalf("stderr line %q is not a JSON log record (%v):\n%s", line, err, errOut)
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestJSONLogsFinalError: with --log-format json the last word of a failed or interrupted command
// is a log record (level error, the message, exit_code), not a line of text; the console keeps
// "metalprove: …".
func TestJSONLogsFinalError(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.bin")
	for _, tt := range []struct {
		code cmdutil.ExitCode
		want string
		args []string
	}{
		{cmdutil.ExitBadInput, missing, []string{"trace", "info", missing}},
		{cmdutil.ExitBadInput, missing, []string{"prove", "--trace", missing, "--json"}},
		{cmdutil.ExitUsage, "pass --example NAME", []string{"bench"}},
		{cmdutil.ExitUsage, "--bogus", []string{"trace", "info", "--bogus"}},
	} {
		args := append([]string{"--log-format", "json"}, tt.args...)
		_, errOut := expect(t, tt.code, nil, args...)
		recs := logRecords(t, errOut)
		last := recs[len(recs)-1]
		if msg, _ := last["message"].(string); last["level"] != "error" || last["exit_code"] != float64(tt.code) || !strings.Contains(msg, tt.want) ||
			strings.HasPrefix(msg, "metalprove:") {
			t.Errorf("%v: last record %v, want level error, exit_code %d and a message naming %q", args, last, tt.code, tt.want)
		}
		// The console format is unchanged.
		_, errOut = expect(t, tt.code, nil, tt.args...)
		if !strings.HasPrefix(errOut, "metalprove: ") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: console stderr %q", tt.args, errOut)
		}
	}

	// Interrupted.
	tr, _ := smallTrace(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ios, _, _, errOut := cmdutil.TestStreams()
	if code := RunContext(ctx, cmdutil.NewFactory("test", ios), []string{"--log-format", "json", "--device", "host", "trace", "check", tr}); code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, cmdutil.ExitInterrupted, errOut)
	}
	recs := logRecords(t, errOut.String())
	if last := recs[len(recs)-1]; last["level"] != "error" || last["exit_code"] != float64(cmdutil.ExitInterrupted) || last["message"] != interrupted {
		t.Errorf("interrupted: last record %v", last)
	}
}
