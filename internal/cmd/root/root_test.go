package root

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

// writeConfig writes a config file into a temporary directory and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metalprove.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type result struct {
	settings cmdutil.Settings
	// local is the value of the probe command's own --local-opt flag.
	local  string
	ran    bool
	err    error
	errOut *bytes.Buffer
	f      *cmdutil.Factory
}

// execute runs the root command with a probe subcommand ("probe", with a local flag
// --local-opt) and reports the settings the probe saw.
func execute(t *testing.T, args ...string) result {
	t.Helper()
	ios, _, _, errOut := cmdutil.TestStreams()
	f := cmdutil.NewFactory("test", ios)
	var r result
	probe := &cobra.Command{Use: "probe", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
		r.ran = true
		r.settings = *f.Settings
		f.Logger.Debug().Msg("probe debug")
		f.Logger.Info().Msg("probe info")
		return nil
	}}
	probe.Flags().StringVar(&r.local, "local-opt", "dflt", "a subcommand flag")
	probe.Flags().IntVar(new(int), "count", 1, "an integer flag")
	// other has a flag of the same name as probe's: a value set for one must not reach the other.
	other := &cobra.Command{Use: "other", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	other.Flags().StringVar(new(string), "local-opt", "", "the other command's flag")
	group := &cobra.Command{Use: "group"}
	group.AddCommand(&cobra.Command{Use: "sub", RunE: func(*cobra.Command, []string) error { return nil }})
	cmd := NewCmdRoot(f, probe, other, group)
	cmd.SetArgs(args)
	r.err = cmd.Execute()
	r.errOut = errOut
	r.f = f
	return r
}

func TestPrecedence(t *testing.T) {
	const config = "device: metal\nlog_level: warn\ncommands:\n  probe:\n    local_opt: from-config\n"
	tests := []struct {
		name               string
		config             bool
		env                map[string]string
		flags              []string
		device, level, opt string
	}{
		{name: "default", device: "auto", level: "info", opt: "dflt"},
		{name: "config", config: true, device: "metal", level: "warn", opt: "from-config"},
		{name: "env over config", config: true,
			env:    map[string]string{"METALPROVE_DEVICE": "cuda", "METALPROVE_LOG_LEVEL": "error", "METALPROVE_LOCAL_OPT": "from-env"},
			device: "cuda", level: "error", opt: "from-env"},
		{name: "env over default", env: map[string]string{"METALPROVE_DEVICE": "host"}, device: "host", level: "info", opt: "dflt"},
		{name: "flag over env and config", config: true,
			env:    map[string]string{"METALPROVE_DEVICE": "cuda", "METALPROVE_LOG_LEVEL": "error", "METALPROVE_LOCAL_OPT": "from-env"},
			flags:  []string{"--device", "host", "--log-level=debug", "--local-opt", "from-flag"},
			device: "host", level: "debug", opt: "from-flag"},
		{name: "flag over config", config: true, flags: []string{"--device=cuda"}, device: "cuda", level: "warn", opt: "from-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmdtest.ClearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := []string{"probe"}
			if tt.config {
				args = append(args, "--config", writeConfig(t, config))
			}
			r := execute(t, append(args, tt.flags...)...)
			if r.err != nil || !r.ran {
				t.Fatalf("err %v, ran %v", r.err, r.ran)
			}
			if r.settings.Device != tt.device || r.settings.LogLevel != tt.level || r.local != tt.opt {
				t.Errorf("device %q level %q local-opt %q; want %q %q %q",
					r.settings.Device, r.settings.LogLevel, r.local, tt.device, tt.level, tt.opt)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	cmdtest.ClearEnv(t)
	path := writeConfig(t, "device: host\n")
	t.Setenv("METALPROVE_CONFIG", path)
	r := execute(t, "probe")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.settings.Device != "host" || r.settings.ConfigFile != path {
		t.Errorf("settings %+v, want device host from %s", r.settings, path)
	}

	// --config wins over METALPROVE_CONFIG.
	other := writeConfig(t, "device: cuda\n")
	r = execute(t, "probe", "--config", other)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.settings.Device != "cuda" || r.settings.ConfigFile != other {
		t.Errorf("settings %+v, want device cuda from %s", r.settings, other)
	}
}

func TestConfigSections(t *testing.T) {
	cmdtest.ClearEnv(t)
	r := execute(t, "probe", "--config", writeConfig(t, "params:\n  anything: 1\nlog_format: json\n"))
	if r.err != nil {
		t.Fatalf("a params section and a known key must be accepted: %v", r.err)
	}
	if r.settings.LogFormat != "json" {
		t.Errorf("log format %q", r.settings.LogFormat)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string // written to a file and passed with --config when not empty
		env    map[string]string
		args   []string
		want   []string // substrings of the error
	}{
		{name: "unknown config key", config: "device: host\nfrobnicate: 3\n", args: []string{"probe"}, want: []string{`unknown key "frobnicate"`}},
		{name: "config key config", config: "config: other.yaml\n", args: []string{"probe"}, want: []string{`unknown key "config"`}},
		{name: "bad yaml", config: "device: [\n", args: []string{"probe"}, want: []string{"config file"}},
		{name: "missing config file", args: []string{"probe", "--config", "/nonexistent/metalprove.yaml"}, want: []string{"/nonexistent/metalprove.yaml"}},
		{name: "missing config file from env", env: map[string]string{"METALPROVE_CONFIG": "/nonexistent/env.yaml"}, args: []string{"probe"}, want: []string{"/nonexistent/env.yaml"}},
		{name: "bad device", args: []string{"--device", "nope", "probe"}, want: []string{"--device", "nope"}},
		{name: "bad device from env", env: map[string]string{"METALPROVE_DEVICE": "gpu"}, args: []string{"probe"}, want: []string{"METALPROVE_DEVICE (environment)", "gpu"}},
		{name: "bad device from config", config: "device: tpu\n", args: []string{"probe"}, want: []string{"key device of config file", "tpu"}},
		{name: "command flag at the top level", config: "local_opt: x\n", args: []string{"probe"}, want: []string{`key "local_opt" is a flag of other, probe`, "commands:"}},
		{name: "unknown command section", config: "commands:\n  prob:\n    local_opt: x\n", args: []string{"probe"}, want: []string{`commands.prob`, `unknown command "prob"`, "group sub"}},
		{name: "unknown key in a command section", config: "commands:\n  probe:\n    output: x\n", args: []string{"probe"}, want: []string{"unknown key commands.probe.output", "local_opt"}},
		{name: "bad value in a command section", config: "commands:\n  probe:\n    count: many\n", args: []string{"probe"}, want: []string{"key commands.probe.count", "many"}},
		{name: "bad value from env", env: map[string]string{"METALPROVE_COUNT": "many"}, args: []string{"probe"}, want: []string{"METALPROVE_COUNT", "many"}},
		{name: "bad log level", args: []string{"probe", "--log-level", "loud"}, want: []string{"--log-level", "loud"}},
		{name: "numeric log level", args: []string{"probe", "--log-level", "5"}, want: []string{"--log-level"}},
		{name: "empty log level", args: []string{"probe", "--log-level="}, want: []string{"--log-level"}},
		{name: "bad log format", args: []string{"probe", "--log-format", "xml"}, want: []string{"--log-format", "xml"}},
		{name: "unknown flag", args: []string{"probe", "--frobnicate"}, want: []string{"frobnicate"}},
		{name: "unknown root flag", args: []string{"--frobnicate", "probe"}, want: []string{"frobnicate"}},
		{name: "unknown command", args: []string{"prob"}, want: []string{`unknown command "prob"`, "probe"}},
		{name: "extra argument", args: []string{"probe", "extra"}, want: []string{"extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmdtest.ClearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := tt.args
			if tt.config != "" {
				args = append(args, "--config", writeConfig(t, tt.config))
			}
			r := execute(t, args...)
			if code := cmdutil.ExitCodeFor(r.err); code != cmdutil.ExitUsage {
				t.Fatalf("error %v: exit code %d, want %d", r.err, code, cmdutil.ExitUsage)
			}
			if r.ran {
				t.Error("the command ran despite the error")
			}
			// The message as cmd.Run prints it: flags set from a config file named by their key.
			msg := r.f.Settings.Explain(r.err.Error())
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLogger(t *testing.T) {
	cmdtest.ClearEnv(t)
	r := execute(t, "probe", "--log-format", "json", "--log-level", "debug")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.errOut.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"message":"probe debug"`) || !strings.HasPrefix(lines[1], "{") {
		t.Errorf("want two JSON log lines, got:\n%s", r.errOut)
	}

	r = execute(t, "probe", "--log-level", "warn")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.errOut.Len() != 0 {
		t.Errorf("--log-level warn logged: %s", r.errOut)
	}
}

// TestConfigScopedPerCommand: a key set for one command applies to it and to no other.
func TestConfigScopedPerCommand(t *testing.T) {
	cmdtest.ClearEnv(t)
	config := writeConfig(t, "commands:\n  other:\n    local_opt: for-other\n  group sub:\n")
	r := execute(t, "probe", "--config", config)
	if r.err != nil || r.local != "dflt" {
		t.Errorf("probe got local-opt %q (err %v) from the other command's section", r.local, r.err)
	}
	if _, ok := r.settings.Origins["local-opt"]; ok {
		t.Errorf("origins %v", r.settings.Origins)
	}
	config = writeConfig(t, "commands:\n  probe:\n    local_opt: mine\n")
	r = execute(t, "probe", "--config", config)
	if r.err != nil || r.local != "mine" || !strings.Contains(r.settings.Origins["local-opt"], "commands.probe.local_opt") {
		t.Errorf("probe: local-opt %q, origins %v, err %v", r.local, r.settings.Origins, r.err)
	}
}

func TestQuiet(t *testing.T) {
	cmdtest.ClearEnv(t)
	r := execute(t, "probe", "--quiet")
	if r.err != nil || r.errOut.Len() != 0 {
		t.Errorf("--quiet: err %v, stderr %q", r.err, r.errOut)
	}
	r = execute(t, "probe", "-q", "--log-level", "info")
	if r.err != nil || !strings.Contains(r.errOut.String(), "probe info") {
		t.Errorf("-q --log-level info: err %v, stderr %q", r.err, r.errOut)
	}
}
