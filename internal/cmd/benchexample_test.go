package cmd

import (
	"encoding/json"
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
