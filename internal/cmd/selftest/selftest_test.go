package selftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/selftest"
)

func TestNewCmdSelftest(t *testing.T) {
	tests := []struct {
		args     []string
		wantJSON bool
		wantRun  string
		wantErr  bool
	}{
		{args: []string{}},
		{args: []string{"--json"}, wantJSON: true},
		{args: []string{"--run", "^field/"}, wantRun: "^field/"},
		{args: []string{"--json", "--run=fp4"}, wantJSON: true, wantRun: "fp4"},
		{args: []string{"extra"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("dev")
		got, ok := cmdtest.Parse(t, f, NewCmdSelftest, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		if got.JSON != tt.wantJSON || got.Run != tt.wantRun {
			t.Errorf("%v: options JSON=%v Run=%q", tt.args, got.JSON, got.Run)
		}
	}
}

func fakeChecks() []selftest.Check {
	return []selftest.Check{
		{Name: "area/ok", Run: func() error { return nil }},
		{Name: "area/bad", Run: func() error { return errors.New("1 != 2") }},
		{Name: "other/ok-too", Run: func() error { return nil }},
		{Name: "other/panics", Run: func() error { panic("boom") }},
	}
}

func newOpts(checks func() []selftest.Check) (*Options, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := cmdutil.TestStreams()
	logger := zerolog.New(errOut).Level(zerolog.DebugLevel)
	return &Options{IO: ios, Logger: &logger, Checks: checks}, out, errOut
}

func Test_selftestRun_realChecksPass(t *testing.T) {
	opts, out, _ := newOpts(selftest.All)
	if err := selftestRun(opts); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	n := len(selftest.All())
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != n+2 {
		t.Fatalf("want header, %d rows and a summary, got:\n%s", n, out)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "name result time" {
		t.Errorf("header %q", lines[0])
	}
	for i, c := range selftest.All() {
		f := strings.Fields(lines[i+1])
		if len(f) != 3 || f[0] != c.Name || f[1] != "PASS" {
			t.Errorf("row %q, want %s PASS <time>", lines[i+1], c.Name)
		}
	}
	if want := fmt.Sprintf("%d passed, 0 failed", n); lines[n+1] != want {
		t.Errorf("summary %q, want %q", lines[n+1], want)
	}
}

func Test_selftestRun_failures(t *testing.T) {
	opts, out, errOut := newOpts(fakeChecks)
	err := selftestRun(opts)
	var cf *cmdutil.CheckFailedError
	if !errors.As(err, &cf) || cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed {
		t.Fatalf("error %v (%T), want a CheckFailedError", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "area/bad") || !strings.Contains(msg, "other/panics") || strings.Contains(msg, "area/ok") {
		t.Errorf("error %q should name exactly the failed checks", msg)
	}
	text := out.String()
	for _, want := range []string{"area/ok", "area/bad", "FAIL", "1 != 2", "panic: boom", "2 passed, 2 failed\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	logs := errOut.String()
	if !strings.Contains(logs, `"message":"selftest start"`) || !strings.Contains(logs, `"message":"selftest end"`) ||
		!strings.Contains(logs, `"level":"debug"`) {
		t.Errorf("want debug start/end log lines, got:\n%s", logs)
	}
}

func Test_selftestRun_JSON(t *testing.T) {
	opts, out, _ := newOpts(fakeChecks)
	opts.JSON = true
	if err := selftestRun(opts); cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed {
		t.Fatalf("error %v, want exit 4", err)
	}
	var rep struct {
		Checks []struct {
			Name       string `json:"name"`
			Passed     bool   `json:"passed"`
			Error      string `json:"error"`
			DurationNS *int64 `json:"duration_ns"`
		} `json:"checks"`
		Passed *int `json:"passed"`
		Failed *int `json:"failed"`
	}
	dec := json.NewDecoder(out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not the JSON report: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one JSON value on stdout")
	}
	if rep.Passed == nil || rep.Failed == nil || *rep.Passed != 2 || *rep.Failed != 2 || len(rep.Checks) != 4 {
		t.Fatalf("report %+v", rep)
	}
	for i, c := range fakeChecks() {
		got := rep.Checks[i]
		wantPass := !strings.Contains(c.Name, "bad") && !strings.Contains(c.Name, "panics")
		if got.Name != c.Name || got.Passed != wantPass || (got.Error == "") != wantPass || got.DurationNS == nil || *got.DurationNS < 0 {
			t.Errorf("check %d: %+v", i, got)
		}
	}
}

func Test_selftestRun_filter(t *testing.T) {
	opts, out, _ := newOpts(fakeChecks)
	opts.Run = "ok"
	if err := selftestRun(opts); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "other/ok-too") || strings.Contains(text, "area/bad") || !strings.HasSuffix(text, "2 passed, 0 failed\n") {
		t.Errorf("filtered output:\n%s", text)
	}

	for _, pattern := range []string{"(", "no-such-check"} {
		opts, out, _ := newOpts(fakeChecks)
		opts.Run = pattern
		err := selftestRun(opts)
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--run") {
			t.Errorf("--run %q: error %v, want a usage error naming --run", pattern, err)
		}
		if out.Len() != 0 {
			t.Errorf("--run %q: wrote %q", pattern, out)
		}
	}
}

func Test_selftestRun_deviceKernels(t *testing.T) {
	var opened []gpu.Kind
	fakeOpen := func(_ *cmdutil.Settings, k gpu.Kind, _ int, _ *zerolog.Logger) (*gpu.Device, error) {
		opened = append(opened, k)
		if k == gpu.KindCUDA {
			return nil, fmt.Errorf("no driver: %w", gpu.ErrUnavailable)
		}
		return gpu.Open(gpu.KindHost, gpu.Options{})
	}
	kchecks := func(*gpu.Device) []selftest.Check {
		return []selftest.Check{{Name: "kernels/fake [host]", Run: func() error { return nil }}}
	}
	for _, tc := range []struct {
		device      string
		kernels     bool
		wantKernels bool
		wantExit    cmdutil.ExitCode
	}{
		{"auto", false, false, cmdutil.ExitOK},
		{"auto", true, true, cmdutil.ExitOK},
		{"host", false, true, cmdutil.ExitOK},
		{"cuda", false, false, cmdutil.ExitDevice},
	} {
		opened = nil
		opts, out, _ := newOpts(func() []selftest.Check { return []selftest.Check{{Name: "area/ok", Run: func() error { return nil }}} })
		opts.Settings = &cmdutil.Settings{Device: tc.device}
		opts.Kernels = tc.kernels
		opts.OpenDevice = fakeOpen
		opts.KernelChecks = kchecks
		err := selftestRun(opts)
		if got := cmdutil.ExitCodeFor(err); got != tc.wantExit {
			t.Fatalf("%+v: exit %d (%v), want %d", tc, got, err, tc.wantExit)
		}
		if has := strings.Contains(out.String(), "kernels/fake [host]"); has != tc.wantKernels {
			t.Errorf("%+v: kernel rows present=%v:\n%s", tc, has, out)
		}
		if tc.wantExit == cmdutil.ExitDevice && !strings.Contains(err.Error(), "no driver") {
			t.Errorf("device error %q does not name the reason", err)
		}
		if !tc.wantKernels && tc.wantExit == cmdutil.ExitOK && len(opened) != 0 {
			t.Errorf("%+v: opened a device", tc)
		}
	}
}
