package bench

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/gpu"
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

// TestHostDefaults: on the host device, bench --example keccakf proves fewer permutations
// fewer times unless --perms, --warmup or --runs was chosen; on a GPU the defaults stay.
func TestHostDefaults(t *testing.T) {
	k, _ := examples.Lookup("keccakf")
	fib, _ := examples.Lookup("fibonacci")
	for _, c := range []struct {
		ex   *examples.Example
		kind gpu.Kind
		set  bool
		want bool
	}{
		{k, gpu.KindHost, false, true},
		{k, gpu.KindHost, true, false},
		{k, gpu.KindCUDA, false, false},
		{k, gpu.KindMetal, false, false},
		{k, "", false, false}, // --cpuref
		{fib, gpu.KindHost, false, false},
	} {
		o := &Options{Perms: DefaultPerms, Warmup: 1, Runs: 5, SizesSet: c.set}
		got := o.applyHostDefaults(c.ex, c.kind)
		if got != c.want || got && (o.Perms != HostPerms || o.Warmup != HostWarmup || o.Runs != HostRuns) ||
			!got && (o.Perms != DefaultPerms || o.Warmup != 1 || o.Runs != 5) {
			t.Errorf("%s on %q (set %v): applied %v, options %+v", c.ex.Name, c.kind, c.set, got, o)
		}
	}
}
