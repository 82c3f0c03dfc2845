// Package selftest owns the list of known-answer and consistency checks that `metalprove
// selftest` runs. Each area contributes its checks from its own file (field.go, poseidon2.go,
// ...); All lists them in a fixed order. A check is a real assertion against a known answer or an
// independent computation, never a smoke run.
package selftest

import (
	"fmt"
	"time"
)

// Check is one named self-check.
type Check struct {
	// Name is "area/what", e.g. "field/fp-mul-vs-big".
	Name string
	// Run returns nil when the check passes and an error saying what differed otherwise.
	Run func() error
}

// Result is the outcome of one check.
type Result struct {
	Name     string        `json:"name"`
	Passed   bool          `json:"passed"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// All returns every check, in the order they are reported.
func All() []Check {
	var all []Check
	for _, area := range [][]Check{
		fieldChecks(),
		keccakChecks(),
		poseidon2Checks(),
		transcriptChecks(),
		paramsChecks(),
		proveChecks(),
	} {
		all = append(all, area...)
	}
	return all
}

// RunChecks runs the checks in order; a panicking check is reported as a failure, not a crash.
// onResult (may be nil) is called after each check, for live output.
func RunChecks(checks []Check, onResult func(Result)) []Result {
	results := make([]Result, 0, len(checks))
	for _, c := range checks {
		r := runOne(c)
		if onResult != nil {
			onResult(r)
		}
		results = append(results, r)
	}
	return results
}

func runOne(c Check) (r Result) {
	r.Name = c.Name
	start := time.Now()
	defer func() {
		r.Duration = time.Since(start)
		if p := recover(); p != nil {
			r.Passed = false
			r.Error = fmt.Sprintf("panic: %v", p)
		}
	}()
	if err := c.Run(); err != nil {
		r.Error = err.Error()
		return r
	}
	r.Passed = true
	return r
}
