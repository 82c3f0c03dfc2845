package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// generate writes the example's trace file with traceRun and returns its path.
func generate(t *testing.T, example string, perms int) string {
	t.Helper()
	opts, _, _ := newOpts(t)
	opts.Example, opts.Perms = example, perms
	if err := traceRun(opts); err != nil {
		t.Fatalf("%s: %v", example, err)
	}
	return opts.Output
}

// runCheck runs checkRun with --json and decodes the one object it prints whatever the outcome:
// the report (nil when the file could not be checked) and, on failure, the error and exit
// status, which must be err's.
func runCheck(t *testing.T, path string, maxFailures int) (*CheckReport, error) {
	t.Helper()
	ios, _, out, _ := cmdutil.TestStreams()
	err := checkRun(&CheckOptions{IO: ios, Path: path, JSON: true, MaxFailures: maxFailures})
	text := out.String()
	var obj struct {
		*CheckReport
		cmdutil.Failure
	}
	dec := json.NewDecoder(out)
	dec.DisallowUnknownFields()
	if derr := dec.Decode(&obj); derr != nil || dec.More() {
		t.Fatalf("stdout is not one CheckReport: %v\n%s", derr, text)
	}
	switch {
	case err == nil && strings.Contains(text, `"exit_code"`):
		t.Errorf("a passing check's report has an exit_code:\n%s", text)
	case err != nil && obj.Failure != cmdutil.Failure{Error: err.Error(), ExitCode: cmdutil.ExitCodeFor(err)}:
		t.Errorf("error %v (exit %d): the JSON object says %+v", err, cmdutil.ExitCodeFor(err), obj.Failure)
	}
	return obj.CheckReport, err
}

func runCheckText(t *testing.T, path string) (string, error) {
	t.Helper()
	ios, _, out, _ := cmdutil.TestStreams()
	err := checkRun(&CheckOptions{IO: ios, Path: path, MaxFailures: DefaultMaxFailures})
	return out.String(), err
}

func TestCheckRoundTripEveryExample(t *testing.T) {
	for _, name := range examples.Names() {
		perms := 0
		if name == "keccakf" {
			perms = 2
		}
		path := generate(t, name, perms)
		rep, err := runCheck(t, path, DefaultMaxFailures)
		if err != nil || rep == nil || !rep.Passed {
			t.Errorf("%s: error %v, report %+v", name, err, rep)
			continue
		}
		ex, _ := examples.Lookup(name)
		if len(rep.Sections) != len(ex.AIRs) {
			t.Errorf("%s: %d sections, want %d", name, len(rep.Sections), len(ex.AIRs))
		}
		for i, s := range rep.Sections {
			if s.Name != ex.AIRs[i] || !s.Passed || s.Failures != 0 {
				t.Errorf("%s: section %+v", name, s)
			}
		}
		if name == "keccakf" && (rep.Sections[0].Constraints != keccakf.NumConstraints || rep.Sections[0].Height != 64) {
			t.Errorf("keccakf: section %+v", rep.Sections[0])
		}
		text, err := runCheckText(t, path)
		if err != nil || !strings.HasSuffix(text, "PASS\n") || !strings.Contains(text, ex.AIRs[0]) {
			t.Errorf("%s: text output (%v):\n%s", name, err, text)
		}
	}
}

// corruptCell rewrites the file at path (through the Go API, so checksums are valid) with the
// cell (column c, row r) of section sec changed by +delta.
func corruptCell(t *testing.T, path string, sec, c, r int, delta uint32) string {
	t.Helper()
	secs, err := tracefile.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &secs[sec]
	s.Data[c*s.Height+r] = s.Data[c*s.Height+r].Add(field.New(delta))
	out := filepath.Join(t.TempDir(), "bad.bin")
	if err := tracefile.WriteAll(out, secs); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckCorruptedCell(t *testing.T) {
	// Fibonacci: right of row 5 changed breaks row 4 constraint 3 and row 5 constraints 2, 3.
	path := corruptCell(t, generate(t, "fibonacci", 0), 0, 1, 5, 1)
	rep, err := runCheck(t, path, DefaultMaxFailures)
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed || rep == nil || rep.Passed {
		t.Fatalf("error %v, report %+v; want exit 4", err, rep)
	}
	type rc struct{ row, c int }
	var got []rc
	for _, f := range rep.Failures {
		got = append(got, rc{f.Row, f.Constraint})
		if f.Section != 0 || f.Air != "fibonacci" || f.Expr == "" {
			t.Errorf("failure %+v", f)
		}
	}
	if want := []rc{{4, 3}, {5, 2}, {5, 3}}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	if rep.Failures[1].Expr != "(IsTransition * (m0[1] - m0[0]'))" {
		t.Errorf("expression %q", rep.Failures[1].Expr)
	}
	if !strings.Contains(err.Error(), "section 0 fibonacci row 4 constraint 3") {
		t.Errorf("error message %q", err)
	}
	text, err := runCheckText(t, path)
	for _, w := range []string{"section 0 fibonacci: row 5: constraint 2 = ", "(IsTransition * (m0[1] - m0[0]'))", "FAILED (3 failures found)", "FAIL\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed {
		t.Errorf("text: error %v", err)
	}

	// Keccak-f: one cell of row 30 changed (a bit of A' is no longer boolean, and more).
	kpath := corruptCell(t, generate(t, "keccakf", 2), 0, keccakf.ColAPrime(1, 2, 3), 30, 7)
	rep, err = runCheck(t, kpath, 3)
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed || rep == nil || len(rep.Failures) != 3 || !rep.Truncated {
		t.Fatalf("keccakf: error %v, report %+v", err, rep)
	}
	if f := rep.Failures[0]; f.Row != 29 && f.Row != 30 {
		t.Errorf("keccakf: first failure %+v, want row 29 or 30", f)
	}
}

func TestCheckImbalance(t *testing.T) {
	// The sender's count of row 2 raised by one: the bus no longer balances; no constraint fails.
	path := corruptCell(t, generate(t, "interaction-pair", 0), 0, 0, 2, 1)
	rep, err := runCheck(t, path, DefaultMaxFailures)
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed || rep == nil {
		t.Fatalf("error %v, report %+v", err, rep)
	}
	if len(rep.Failures) != 0 || len(rep.Imbalances) != 1 || rep.Imbalances[0].Sum != 1 || rep.Imbalances[0].Bus != 0 ||
		len(rep.Imbalances[0].Contributions) != 2 || rep.Imbalances[0].Contributions[1].Section != 1 {
		t.Errorf("report %+v", rep)
	}
	if !strings.Contains(err.Error(), "interactions do not balance") {
		t.Errorf("error %q", err)
	}
	text, _ := runCheckText(t, path)
	if !strings.Contains(text, "bus 0 message [") || !strings.Contains(text, "interaction balance: FAILED") {
		t.Errorf("text:\n%s", text)
	}
}

func writeSections(t *testing.T, secs []tracefile.Section) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.bin")
	if err := tracefile.WriteAll(p, secs); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckBadInput(t *testing.T) {
	fib := testair.Fibonacci(0, 1, 4)
	good := tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: "fibonacci", Width: 2, Height: 4, PublicValues: fib.Trace.Public}, Data: fib.MainCells()}
	mk := func(edit func(s *tracefile.Section)) []tracefile.Section {
		s := good
		s.Data = slices.Clone(good.Data)
		edit(&s)
		return []tracefile.Section{good, s}
	}
	tests := []struct {
		name string
		secs []tracefile.Section
		want []string
	}{
		{"unknown AIR", mk(func(s *tracefile.Section) { s.Name = "sha256" }), []string{`section 1 "sha256"`, `no AIR is named "sha256"`}},
		{"wrong width", mk(func(s *tracefile.Section) { s.Width = 3; s.Data = append(s.Data, 0, 0, 0, 0) }),
			[]string{`section 1 "fibonacci"`, "width 3", "has 2 main columns"}},
		{"public values", mk(func(s *tracefile.Section) { s.PublicValues = nil }), []string{`section 1 "fibonacci"`, "0 public values", "has 3"}},
	}
	for _, tt := range tests {
		p := writeSections(t, tt.secs)
		rep, err := runCheck(t, p, DefaultMaxFailures)
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || rep != nil {
			t.Errorf("%s: error %v, report %v; want exit 3 and no report", tt.name, err, rep)
			continue
		}
		for _, w := range append(tt.want, p) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}

	// Malformed files: exit 3 naming the section and the byte offset.
	data, err := os.ReadFile(writeSections(t, []tracefile.Section{good}))
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated":     data[:len(data)-3],
		"flipped cell":  func() []byte { b := bytes.Clone(data); b[len(b)-8] ^= 1; return b }(),
		"trailing byte": append(bytes.Clone(data), 0),
	} {
		p := filepath.Join(t.TempDir(), "m.bin")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := runCheck(t, p, DefaultMaxFailures)
		var fe *tracefile.FormatError
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !errors.As(err, &fe) || !strings.Contains(err.Error(), "byte offset") {
			t.Errorf("%s: error %v, want exit 3 with a byte offset", name, err)
		}
		if name != "trailing byte" && !strings.Contains(err.Error(), `section 0 "fibonacci"`) {
			t.Errorf("%s: error %q does not name the section", name, err)
		}
	}
	if _, err := runCheck(t, filepath.Join(t.TempDir(), "missing.bin"), 1); cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput {
		t.Errorf("missing file: %v", err)
	}
}

// TestCheckShapeErrors: a section that does not fit its AIR is a shape error (exit 3 upstream).
func TestCheckShapeErrors(t *testing.T) {
	fib := testair.Fibonacci(2, 3, 64)
	sel := testair.FibonacciSelector(7, 3, 32)
	// Shape errors wrap air.ErrShape.
	bad := fib.Trace
	bad.Public = bad.Public[:2]
	if _, err := checkConstraints(fib.Air, bad, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("public values: %v", err)
	}
	if _, err := checkConstraints(testair.FibonacciSelectorAir{Sels: testair.AlternatingSels(16)}, sel.Trace, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("preprocessed height: %v", err)
	}
}

func TestCheckMaxFailures(t *testing.T) {
	// Many broken rows.
	fib := testair.Fibonacci(0, 1, 64)
	for r := 1; r < 64; r++ {
		fib.Trace.CommonMain.Set(r, 0, field.Zero)
	}
	p := writeSections(t, []tracefile.Section{
		{SectionHeader: tracefile.SectionHeader{Name: "fibonacci", Width: 2, Height: 64, PublicValues: fib.Trace.Public}, Data: fib.MainCells()},
		{SectionHeader: tracefile.SectionHeader{Name: "fibonacci", Width: 2, Height: 64, PublicValues: fib.Trace.Public}, Data: fib.MainCells()},
	})
	all, _ := constraints.Check(fib.Air, fib.Trace, 0)
	for _, maxF := range []int{1, 4, 10, 0} {
		rep, err := runCheck(t, p, maxF)
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitCheckFailed {
			t.Fatalf("max %d: %v", maxF, err)
		}
		want := maxF
		if maxF == 0 {
			want = 2 * len(all)
		}
		if len(rep.Failures) != want || rep.Truncated != (maxF != 0) {
			t.Errorf("max %d: %d failures, truncated %v", maxF, len(rep.Failures), rep.Truncated)
		}
		// Both sections are known to fail, even when the first used up the limit.
		if rep.Sections[0].Passed || rep.Sections[1].Passed {
			t.Errorf("max %d: sections %+v", maxF, rep.Sections)
		}
	}
}

func TestNewCmdCheck(t *testing.T) {
	tests := []struct {
		args    []string
		want    CheckOptions
		wantErr bool
	}{
		{args: []string{"a.bin"}, want: CheckOptions{Path: "a.bin", MaxFailures: DefaultMaxFailures}},
		{args: []string{"--json", "--max-failures", "3", "b.bin"}, want: CheckOptions{Path: "b.bin", JSON: true, MaxFailures: 3}},
		{args: []string{"--max-failures", "0", "b.bin"}, want: CheckOptions{Path: "b.bin", MaxFailures: 0}},
		{args: []string{"--max-failures", "-1", "b.bin"}, wantErr: true},
		{args: []string{}, wantErr: true},
		{args: []string{"a", "b"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("dev")
		got, ok := cmdtest.Parse(t, f, NewCmdCheck, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		if got.Path != tt.want.Path || got.JSON != tt.want.JSON || got.MaxFailures != tt.want.MaxFailures || got.Logger != &f.Logger {
			t.Errorf("%v: options %+v", tt.args, *got)
		}
	}
	ios, _, _, _ := cmdutil.TestStreams()
	cmd := NewCmdTrace(cmdutil.NewFactory("dev", ios), nil)
	if sub, _, err := cmd.Find([]string{"check", "x"}); err != nil || sub.Name() != "check" {
		t.Errorf("trace check not found: %v", err)
	}
}

// TestCheckDeviceMatchesHost: the reports of the device check (the device finds the first failing
// rows and the LogUp balance, the host reports from there) equal those of the host alone, for
// valid files, corrupted cells in several sections and imbalances, under several limits.
func TestCheckDeviceMatchesHost(t *testing.T) {
	mix := generate(t, "mixture", 0)
	pair := generate(t, "interaction-pair", 0)
	paths := map[string]string{
		"mixture":          mix,
		"pair":             pair,
		"keccakf":          corruptCell(t, generate(t, "keccakf", 2), 0, keccakf.ColAPrime(0, 1, 2), 41, 3),
		"fibonacci":        corruptCell(t, corruptCell(t, mix, 0, 1, 7, 1), 0, 0, 12, 2),
		"two sections":     corruptCell(t, corruptCell(t, mix, 0, 1, 9, 1), 5, 1, 3, 1),
		"pair imbalance":   corruptCell(t, pair, 1, 0, 5, 2),
		"mixed imbalance":  corruptCell(t, corruptCell(t, mix, 1, 0, 2, 1), 0, 0, 3, 1),
		"self-interaction": corruptCell(t, mix, 7, 3, 6, 1),
	}
	for name, path := range paths {
		for _, maxF := range []int{0, 1, DefaultMaxFailures} {
			dev, derr := runCheck(t, path, maxF)
			hostOnlyCheck = true
			host, herr := runCheck(t, path, maxF)
			hostOnlyCheck = false
			if valid := name == "mixture" || name == "pair"; dev == nil || (dev.Passed != valid && name != "self-interaction") {
				t.Fatalf("%s: report %+v, want passed = %v", name, dev, valid)
			}
			dj, _ := json.Marshal(dev)
			hj, _ := json.Marshal(host)
			if string(dj) != string(hj) || cmdutil.ExitCodeFor(derr) != cmdutil.ExitCodeFor(herr) || fmt.Sprint(derr) != fmt.Sprint(herr) {
				t.Errorf("%s max %d: device %s (%v)\nhost %s (%v)", name, maxF, dj, derr, hj, herr)
			}
		}
	}
}
