package bench

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

func TestBenchFlagsAndUsage(t *testing.T) {
	f := cmdtest.NewFactory("dev")
	ios := f.IO
	got, _ := cmdtest.Parse(t, f, NewCmdBench, []string{"--kernels", "--json", "--size-log", "12", "--runs", "3"}, false)
	if !got.Kernels || !got.JSON || got.SizeLog != 12 || got.Runs != 3 {
		t.Fatalf("options %+v", got)
	}
	log := zerolog.Nop()
	for _, o := range []*Options{
		{IO: ios, Logger: &log, Runs: 5},
		{IO: ios, Logger: &log, Kernels: true, Runs: 0},
		{IO: ios, Logger: &log, Kernels: true, Runs: 1, SizeLog: 40},
	} {
		if err := benchRun(o); cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}

func TestBenchRunsOnHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kernels")
	}
	ios, _, out, _ := cmdutil.TestStreams()
	log := zerolog.Nop()
	o := &Options{IO: ios, Logger: &log, Settings: &cmdutil.Settings{Device: "host"}, Kernels: true, JSON: true, SizeLog: 10, Runs: 1}
	if err := benchRun(o); err != nil {
		t.Fatal(err)
	}
	if out.Len() == 0 {
		t.Fatal("no output")
	}
}
