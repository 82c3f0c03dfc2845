package selftest

import (
	"errors"
	"strings"
	"testing"
)

// Every registered check passes on a correct build, and names are unique and "area/what".
func TestAllChecksPass(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range RunChecks(All(), nil) {
		if !r.Passed {
			t.Errorf("%s failed: %s", r.Name, r.Error)
		}
		if seen[r.Name] {
			t.Errorf("duplicate check name %q", r.Name)
		}
		seen[r.Name] = true
		if area, what, ok := strings.Cut(r.Name, "/"); !ok || area == "" || what == "" {
			t.Errorf("check name %q is not area/what", r.Name)
		}
	}
	for _, area := range []string{"field/", "poseidon2/", "transcript/", "params/", "keccak/"} {
		found := false
		for name := range seen {
			found = found || strings.HasPrefix(name, area)
		}
		if !found {
			t.Errorf("no check for area %s", area)
		}
	}
}

// A failing check and a panicking check are reported as failures with their message, in order,
// and do not stop the run.
func TestRunChecksReportsFailures(t *testing.T) {
	var live []string
	results := RunChecks([]Check{
		{Name: "t/fails", Run: func() error { return errors.New("boom") }},
		{Name: "t/panics", Run: func() error { panic("kaboom") }},
		{Name: "t/passes", Run: func() error { return nil }},
	}, func(r Result) { live = append(live, r.Name) })
	if len(results) != 3 || strings.Join(live, ",") != "t/fails,t/panics,t/passes" {
		t.Fatalf("results %v, live %v", results, live)
	}
	if results[0].Passed || results[0].Error != "boom" {
		t.Errorf("failing check: %+v", results[0])
	}
	if results[1].Passed || !strings.Contains(results[1].Error, "kaboom") {
		t.Errorf("panicking check: %+v", results[1])
	}
	if !results[2].Passed || results[2].Error != "" {
		t.Errorf("passing check: %+v", results[2])
	}
}
