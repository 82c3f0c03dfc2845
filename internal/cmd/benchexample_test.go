package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmd/bench"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

// benchJSON runs bench --example … --json and decodes its one object.
func benchJSON(t *testing.T, args ...string) *bench.ExampleReport {
	t.Helper()
	out, _ := expect(t, cmdutil.ExitOK, nil, append([]string{"bench", "--json"}, args...)...)
	var rep bench.ExampleReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("bench --json printed more than one object:\n%s", out)
	}
	return &rep
}

// checkReport checks what every bench --example report holds.
func checkReport(t *testing.T, rep *bench.ExampleReport, runs int) {
	t.Helper()
	if rep.Runs != runs || rep.Device == "" || rep.Kind != "host" || rep.ProofBytes <= 0 || !rep.Identical ||
		rep.Params == "" || len(rep.ParamsDigest) != 64 || len(rep.AIRs) == 0 {
		t.Errorf("report %+v", rep)
	}
	var names []string
	for _, s := range rep.Stages {
		names = append(names, s.Stage)
		if s.WallMS.Min > s.WallMS.Median || s.WallMS.Median > s.WallMS.Max || s.WallMS.Max <= 0 {
			t.Errorf("stage %s: spread %+v", s.Stage, s.WallMS)
		}
	}
	if !slices.Equal(names, []string{"commit", "gkr", "constraints", "openings"}) {
		t.Errorf("stages %v", names)
	}
	if rep.Load.Stage != "load" || rep.Load.BytesToDevice <= 0 {
		t.Errorf("load %+v", rep.Load)
	}
	if c := rep.Stages[0]; c.Dispatches == 0 || c.Syncs == 0 || c.PeakMemory == 0 {
		t.Errorf("commit runs on the device: its counters %+v", c)
	}
	// The openings make round trips (a sync per sumcheck round): the host's work between them
	// leaves the device's queue empty for some time, and the host waits in the syncs.
	if o := rep.Stages[3]; o.Syncs < 2 || o.HostGapMS <= 0 || o.SyncWaitMS < 0 || o.HostGapMS > o.WallMS.Max {
		t.Errorf("openings: syncs %d, host gap %v ms, sync wait %v ms, wall %+v", o.Syncs, o.HostGapMS, o.SyncWaitMS, o.WallMS)
	}
	if rep.ProveMS.Median <= 0 || rep.VerifyMS.Median <= 0 {
		t.Errorf("prove %+v verify %+v", rep.ProveMS, rep.VerifyMS)
	}
}

func TestBenchExampleJSON(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	traceOut := filepath.Join(dir, "trace.json")
	rep := benchJSON(t, "--example", "fibonacci", "--rows", "64", "--preset", "test", "--allow-insecure",
		"--device", "host", "--runs", "3", "--trace-out", traceOut)
	checkReport(t, rep, 3)
	if rep.Example != "fibonacci" || rep.Warmup != 1 || rep.PermsPerSecond != 0 || rep.TraceOut != traceOut {
		t.Errorf("report %+v", rep)
	}

	// The Chrome trace events: one complete event per stage of one proof (and the load), with the
	// counters as args.
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			TS   int64          `json:"ts"`
			Dur  int64          `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	b, err := os.ReadFile(traceOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("--trace-out: %v", err)
	}
	var complete []string
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" {
			complete = append(complete, e.Name)
			if e.TS < 0 {
				t.Errorf("event %s at %d", e.Name, e.TS)
			}
			if e.Name != "verify" {
				if _, ok := e.Args["dispatches"]; !ok {
					t.Errorf("event %s lacks the counters: %v", e.Name, e.Args)
				}
			}
		}
	}
	if !slices.Equal(complete, []string{"load", "commit", "gkr", "constraints", "openings", "verify"}) {
		t.Errorf("complete events %v", complete)
	}
}

// TestBenchKeccakfJSON: the main job's JSON. Small parameters (the test preset) keep it fast;
// the default run (openvm-keccakf at stacked height 2^21) is what `make bench` does, and the host
// device's defaults are unit-tested in package bench (TestHostDefaults).
func TestBenchKeccakfJSON(t *testing.T) {
	cmdtest.ClearEnv(t)
	rep := benchJSON(t, "--example", "keccakf", "--perms", "4", "--preset", "test", "--allow-insecure",
		"--device", "host", "--warmup", "0", "--runs", "2")
	checkReport(t, rep, 2)
	if rep.Example != "keccakf" || rep.Perms != 4 || rep.PermsPerSecond <= 0 || rep.AIRs[0].Width != 2633 || rep.AIRs[0].Height != 128 {
		t.Errorf("report %+v", rep)
	}
}

// TestBenchConcurrency: --concurrency keeps several proofs in flight on the host device (one
// queue and backend each, the key shared): every proof verifies and is byte-identical to the
// proof of the same trace made one at a time; the report gives proofs/s and the queues.
func TestBenchConcurrency(t *testing.T) {
	cmdtest.ClearEnv(t)
	args := []string{"--example", "keccakf", "--perms", "2", "--preset", "test", "--allow-insecure", "--device", "host", "--warmup", "1", "--runs", "2"}
	serial := benchJSON(t, args...)
	if serial.Concurrency != 1 || serial.ProofsPerSecond <= 0 || len(serial.ProofDigest) != 64 || serial.GPUs != nil {
		t.Fatalf("serial report %+v", serial)
	}
	for _, n := range []int{2, 3} {
		rep := benchJSON(t, append(slices.Clone(args), "--concurrency", fmt.Sprint(n))...)
		checkReport(t, rep, 2)
		if rep.Concurrency != n || rep.ProofDigest != serial.ProofDigest || rep.ProofBytes != serial.ProofBytes {
			t.Errorf("--concurrency %d: concurrency %d, proof %s (%d bytes); serial proof %s (%d bytes)",
				n, rep.Concurrency, rep.ProofDigest, rep.ProofBytes, serial.ProofDigest, serial.ProofBytes)
		}
		if rep.ProofsPerSecond <= 0 || rep.TimedWallMS <= 0 || rep.PermsPerSecond != 2*rep.ProofsPerSecond {
			t.Errorf("--concurrency %d: %v proofs/s in %v ms, %v perms/s", n, rep.ProofsPerSecond, rep.TimedWallMS, rep.PermsPerSecond)
		}
		if len(rep.GPUs) != 1 || rep.GPUs[0].Queues != n || rep.GPUs[0].Proofs != 2*n {
			t.Errorf("--concurrency %d: gpus %+v", n, rep.GPUs)
		}
	}
	// An example with a preprocessed trace: each worker's key commits it again (ProvingKey.Share).
	pre := []string{"--example", "preprocessed-cached", "--preset", "test", "--allow-insecure", "--device", "host", "--warmup", "0", "--runs", "1"}
	one := benchJSON(t, pre...)
	two := benchJSON(t, append(slices.Clone(pre), "--concurrency", "2")...)
	if !two.Identical || two.ProofDigest != one.ProofDigest || two.GPUs[0].Proofs != 2 {
		t.Errorf("preprocessed-cached: --concurrency 2 %+v; serial proof %s", two, one.ProofDigest)
	}

	// The table.
	out, _ := expect(t, cmdutil.ExitOK, nil, append([]string{"bench"}, append(slices.Clone(args), "--concurrency", "2")...)...)
	for _, w := range []string{"2 proofs in flight, each on its own queue: 2 on GPU 0", "proofs/s: 4 proofs in", "load (once per queue)", "identical in every run"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}

// TestBenchConcurrencyRefusals: bad --concurrency and --gpus values are usage errors (exit 2)
// naming the flag; proofs in flight that do not fit in the device memory allowed are refused
// before anything is loaded (exit 5), naming N, the need, the memory available and how many fit.
func TestBenchConcurrencyRefusals(t *testing.T) {
	cmdtest.ClearEnv(t)
	args := []string{"bench", "--example", "interaction-pair", "--rows", "256", "--preset", "test", "--allow-insecure", "--device", "host", "--warmup", "0", "--runs", "1"}
	with := func(extra ...string) []string { return append(slices.Clone(args), extra...) }
	for _, tt := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency 0: must be ≥ 1"},
		{[]string{"--concurrency", "-3"}, "--concurrency -3: must be ≥ 1"},
		{[]string{"--gpus", "0,x"}, `"x" is not a device ordinal`},
		{[]string{"--gpus", "1,-1"}, `"-1" is not a device ordinal`},
		{[]string{"--gpus", "0,1,0"}, "device 0 is listed twice"},
		{[]string{"--gpus", ","}, `"" is not a device ordinal`},
		{[]string{"--gpus", "0"}, "--gpus applies to --device cuda"},
		{[]string{"--concurrency", "2", "--trace-out", filepath.Join(t.TempDir(), "t.json")}, "--trace-out applies without --concurrency"},
	} {
		expect(t, cmdutil.ExitUsage, []string{tt.want}, with(tt.extra...)...)
	}
	// A concurrency no device holds is refused before its queues are opened (it took 71 s and
	// 1.6 GB of opening queues).
	expect(t, cmdutil.ExitDevice, []string{"not enough device memory for --concurrency 100000"}, with("--concurrency", "100000")...)
	// --perms 0 was taken as "the default" and ran 1024 permutations.
	expect(t, cmdutil.ExitUsage, []string{"--perms 0: must be at least 1"}, "bench", "--example", "keccakf", "--perms", "0", "--device", "host")
	expect(t, cmdutil.ExitUsage, []string{"--concurrency and --gpus apply to the device backend"},
		"bench", "--example", "interaction-pair", "--rows", "256", "--preset", "test", "--allow-insecure", "--cpuref", "--concurrency", "2")

	// One proof's estimate, then a cap that holds one proof in flight but not three.
	b := benchJSON(t, with("--concurrency", "1")[1:]...)
	if b.DeviceMemory == nil || b.EstimateBytes <= 0 || b.Concurrency != 1 {
		t.Fatalf("bench --json --concurrency 1: %+v", b)
	}
	limit := fmt.Sprint(b.EstimateBytes * 3 / 2)
	_, errOut := expect(t, cmdutil.ExitDevice, []string{"not enough device memory for --concurrency 3", "3 proofs in flight on host",
		"room for 1", "(capped by --device-memory)", "at most 1 proofs fit in flight (--concurrency 1)"},
		append([]string{"--device-memory", limit}, with("--concurrency", "3")...)...)
	if strings.Contains(errOut, "workers ready") {
		t.Errorf("the refused run loaded its traces:\n%s", errOut)
	}
	// Two fit under twice the estimate (and a bit).
	limit = fmt.Sprint(b.EstimateBytes*2 + b.EstimateBytes/4)
	expect(t, cmdutil.ExitDevice, []string{"at most 2 proofs fit in flight (--concurrency 2)"}, append([]string{"--device-memory", limit}, with("--concurrency", "3")...)...)
	expect(t, cmdutil.ExitOK, nil, append([]string{"--device-memory", limit}, with("--concurrency", "2")...)...)
}
