package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run executes metalprove with args and returns the exit code, stdout, stderr and the factory.
func run(t *testing.T, args ...string) (cmdutil.ExitCode, *bytes.Buffer, *bytes.Buffer, *cmdutil.Factory) {
	t.Helper()
	return cmdtest.Run(Run, "v9.9.9-test", args...)
}

func TestRunVersion(t *testing.T) {
	cmdtest.ClearEnv(t)
	code, out, errOut, _ := run(t, "version")
	if code != cmdutil.ExitOK || !strings.HasPrefix(out.String(), "metalprove v9.9.9-test\n") || errOut.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _, _ = run(t, "--version")
	if code != cmdutil.ExitOK || out.String() != "metalprove v9.9.9-test\n" {
		t.Errorf("--version: exit %d, stdout %q", code, out)
	}
}

func TestRunSelftest(t *testing.T) {
	cmdtest.ClearEnv(t)
	code, out, errOut, _ := run(t, "selftest")
	if code != cmdutil.ExitOK || !strings.HasSuffix(out.String(), " passed, 0 failed\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _, _ = run(t, "selftest", "--json")
	var rep struct{ Passed, Failed int }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != cmdutil.ExitOK || rep.Failed != 0 || rep.Passed == 0 {
		t.Errorf("--json: exit %d, err %v, report %+v, stdout %q", code, err, rep, out)
	}
	code, _, errOut, _ = run(t, "selftest", "--run", "^no-such-check$")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--run") {
		t.Errorf("--run matching nothing: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut, _ = run(t, "selftest", "--run", "(")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--run") {
		t.Errorf("--run invalid: exit %d, stderr %q", code, errOut)
	}
}

func TestRunPrecedence(t *testing.T) {
	cmdtest.ClearEnv(t)
	config := writeConfig(t, "device: metal\nlog_level: warn\n")
	check := func(name string, f *cmdutil.Factory, device, level string) {
		t.Helper()
		if f.Settings.Device != device || f.Settings.LogLevel != level {
			t.Errorf("%s: device %q level %q, want %q %q", name, f.Settings.Device, f.Settings.LogLevel, device, level)
		}
	}
	_, _, _, f := run(t, "version")
	check("default", f, "auto", "info")
	_, _, _, f = run(t, "--config", config, "version")
	check("config", f, "metal", "warn")
	t.Setenv("METALPROVE_DEVICE", "cuda")
	t.Setenv("METALPROVE_LOG_LEVEL", "error")
	_, _, _, f = run(t, "--config", config, "version")
	check("env", f, "cuda", "error")
	code, _, errOut, f := run(t, "--config", config, "--device", "host", "version", "--log-level", "debug")
	check("flag", f, "host", "debug")
	if code != cmdutil.ExitOK {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestRunConfigFromEnv(t *testing.T) {
	cmdtest.ClearEnv(t)
	t.Setenv("METALPROVE_CONFIG", writeConfig(t, "device: host\n"))
	_, _, _, f := run(t, "version")
	if f.Settings.Device != "host" {
		t.Errorf("device %q, want host from METALPROVE_CONFIG", f.Settings.Device)
	}
	t.Setenv("METALPROVE_CONFIG", writeConfig(t, "devices: host\n"))
	code, _, errOut, _ := run(t, "version")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), `"devices"`) {
		t.Errorf("unknown key through METALPROVE_CONFIG: exit %d, stderr %q", code, errOut)
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown config key", []string{"--config", "CONFIG", "selftest"}, `unknown key "bogus_key"`},
		{"missing config file", []string{"--config", "/nonexistent/metalprove.yaml", "selftest"}, "/nonexistent/metalprove.yaml"},
		{"invalid device", []string{"--device", "nope", "selftest"}, "--device"},
		{"invalid log level", []string{"--log-level", "chatty", "selftest"}, "--log-level"},
		{"invalid log format", []string{"--log-format", "xml", "selftest"}, "--log-format"},
		{"unknown flag", []string{"selftest", "--bogus"}, "--bogus"},
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"extra argument", []string{"version", "bogus"}, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmdtest.ClearEnv(t)
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if a == "CONFIG" {
					args[i] = writeConfig(t, "device: host\nbogus_key: 1\n")
				}
			}
			code, out, errOut, _ := run(t, args...)
			if code != cmdutil.ExitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, cmdutil.ExitUsage, errOut)
			}
			stderr := errOut.String()
			if !strings.HasPrefix(stderr, "metalprove: ") || !strings.Contains(stderr, tt.want) ||
				!strings.Contains(stderr, "Run 'metalprove --help' for usage.") {
				t.Errorf("stderr %q, want it to name %q", stderr, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

func TestRunJSONLogs(t *testing.T) {
	cmdtest.ClearEnv(t)
	code, _, errOut, _ := run(t, "--log-format", "json", "--log-level", "debug", "selftest")
	if code != cmdutil.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("want the selftest start and end log lines, got %q", errOut)
	}
	var messages []string
	for _, line := range lines {
		var entry struct {
			Level   string `json:"level"`
			Message string `json:"message"`
			Time    string `json:"time"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		if entry.Level == "" || entry.Time == "" {
			t.Errorf("log line %q lacks level or time", line)
		}
		messages = append(messages, entry.Message)
	}
	joined := strings.Join(messages, "|")
	if !strings.Contains(joined, "selftest start") || !strings.Contains(joined, "selftest end") {
		t.Errorf("messages %q", joined)
	}
}

func TestRunHelp(t *testing.T) {
	cmdtest.ClearEnv(t)
	for _, args := range [][]string{{"--help"}, {}, {"help"}} {
		code, out, _, _ := run(t, args...)
		if code != cmdutil.ExitOK || !strings.Contains(out.String(), "selftest") || !strings.Contains(out.String(), "version") {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
	}
}
