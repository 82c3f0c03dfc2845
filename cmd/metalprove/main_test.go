package main

// Acceptance tests: build the real binary once and run it as a user would.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/sysinfo"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// binary is the metalprove executable built by TestMain.
var binary string

const testVersion = "v0.0.0-acceptance"

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "metalprove-acceptance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "metalprove")
	// The package directory is cmd/metalprove, so "." is ./cmd/metalprove from the repository root.
	build := exec.Command("go", "build", "-o", binary, "-ldflags", "-X main.version="+testVersion, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building metalprove: %v\n", err)
		return 1
	}
	return m.Run()
}

// metalprove runs the binary with args in an environment without METALPROVE_* variables and
// returns its exit code, stdout and stderr.
func metalprove(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "METALPROVE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("running %v: %v", args, err)
	return 0, "", ""
}

func TestVersion(t *testing.T) {
	code, out, errOut := metalprove(t, "version")
	if code != 0 || !strings.HasPrefix(out, "metalprove "+testVersion+"\ngo") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSelftest(t *testing.T) {
	code, out, errOut := metalprove(t, "selftest")
	if code != 0 || !strings.HasSuffix(out, " passed, 0 failed\n") || !strings.Contains(out, "PASS") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSelftestJSON(t *testing.T) {
	code, out, errOut := metalprove(t, "selftest", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep struct {
		Checks []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"checks"`
		Passed int `json:"passed"`
		Failed int `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if rep.Failed != 0 || rep.Passed == 0 || rep.Passed != len(rep.Checks) {
		t.Errorf("report %+v", rep)
	}
}

func TestBadDevice(t *testing.T) {
	code, out, errOut := metalprove(t, "--device", "nope", "selftest")
	if code != 2 || !strings.Contains(errOut, "--device") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming --device", code, out, errOut)
	}
}

func TestHelp(t *testing.T) {
	code, out, errOut := metalprove(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"Usage:", "selftest", "version", "--device", "--config", "--log-level", "--log-format"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestTraceGenerateAndInfo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.bin")
	code, out, errOut := metalprove(t, "trace", "--example", "keccakf", "--perms", "2", "-o", path)
	if code != 0 || out != "" || !strings.Contains(errOut, "trace file written") {
		t.Fatalf("trace: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, out, errOut = metalprove(t, "trace", "info", path, "--json")
	if code != 0 {
		t.Fatalf("trace info: exit %d, stderr %q", code, errOut)
	}
	var rep struct {
		Sections []struct {
			Name   string `json:"name"`
			Width  int    `json:"width"`
			Height int    `json:"height"`
			Digest string `json:"sha256_digest"`
		} `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("trace info stdout is not JSON: %v\n%s", err, out)
	}
	if len(rep.Sections) != 1 || rep.Sections[0].Name != "keccakf" || rep.Sections[0].Width != 2633 ||
		rep.Sections[0].Height != 64 || len(rep.Sections[0].Digest) != 64 {
		t.Errorf("trace info report %+v", rep)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	bad := filepath.Join(dir, "bad.bin")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = metalprove(t, "trace", "info", bad)
	if code != 3 || out != "" || !strings.Contains(errOut, "byte offset") {
		t.Errorf("corrupted file: exit %d, stdout %q, stderr %q; want exit 3 naming the byte offset", code, out, errOut)
	}

	code, _, errOut = metalprove(t, "trace", "--example", "nope", "--perms", "2", "-o", filepath.Join(dir, "x.bin"))
	if code != 2 || !strings.Contains(errOut, "keccakf") {
		t.Errorf("unknown example: exit %d, stderr %q", code, errOut)
	}
}

func TestTraceCheck(t *testing.T) {
	dir := t.TempDir()
	k := filepath.Join(dir, "k.bin")
	if code, _, errOut := metalprove(t, "trace", "--example", "keccakf", "--perms", "2", "-o", k); code != 0 {
		t.Fatalf("trace keccakf: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := metalprove(t, "trace", "check", k)
	if code != 0 || !strings.Contains(out, "keccakf") || !strings.Contains(out, "3182") || !strings.HasSuffix(out, "PASS\n") {
		t.Errorf("check keccakf: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	mix := filepath.Join(dir, "mix.bin")
	if code, _, errOut := metalprove(t, "trace", "--example", "mixture", "--rows", "32", "-o", mix); code != 0 {
		t.Fatalf("trace mixture: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut = metalprove(t, "trace", "check", mix, "--json")
	var rep struct {
		Passed   bool `json:"passed"`
		Sections []struct {
			Name string `json:"name"`
		} `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.Passed || len(rep.Sections) != 12 {
		t.Errorf("check mixture: exit %d, report %+v (%v), stderr %q", code, rep, err, errOut)
	}

	// One cell changed through the Go API (valid checksums): exit 4 naming the row and constraint.
	secs, err := tracefile.ReadAll(k)
	if err != nil {
		t.Fatal(err)
	}
	secs[0].Data[5*secs[0].Height+10] = secs[0].Data[5*secs[0].Height+10].Add(field.One)
	bad := filepath.Join(dir, "bad.bin")
	if err := tracefile.WriteAll(bad, secs); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = metalprove(t, "trace", "check", bad)
	if code != 4 || !strings.Contains(out, "row 10: constraint") || !strings.Contains(errOut, "keccakf row 9 constraint 28") || !strings.HasSuffix(out, "FAIL\n") {
		t.Errorf("check corrupted: exit %d, stdout %q, stderr %q; want exit 4 naming rows 9 and 10", code, out, errOut)
	}

	// A section naming no AIR: exit 3.
	secs[0].Name = "nope"
	if err := tracefile.WriteAll(bad, secs); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut = metalprove(t, "trace", "check", bad); code != 3 || out != "" || !strings.Contains(errOut, `section 0 "nope"`) {
		t.Errorf("check unknown AIR: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A flag that does not apply to the example: exit 2.
	if code, _, errOut = metalprove(t, "trace", "--example", "keccakf", "--perms", "2", "--rows", "8", "-o", bad); code != 2 || !strings.Contains(errOut, "--rows") {
		t.Errorf("--rows for keccakf: exit %d, stderr %q", code, errOut)
	}
}

// TestSIGINT sends SIGINT to long-running commands as a user presses Ctrl-C: exit 130, one line
// on stderr, no output and no temporary file left, within a few seconds (the process exits at
// the next stage boundary, or after cmd.InterruptGrace when a stage runs on).
func TestSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs proofs for seconds")
	}
	dir := t.TempDir()
	tr := filepath.Join(dir, "k2.bin")
	if code, _, errOut := metalprove(t, "trace", "--example", "keccakf", "--perms", "2", "-o", tr); code != 0 {
		t.Fatalf("trace: exit %d: %s", code, errOut)
	}
	prove := []string{"prove", "--trace", tr, "--device", "host", "-o", filepath.Join(dir, "k2.proof")}
	for _, c := range []struct {
		name string
		args []string
		// ready is a stderr line that says the work is under way.
		ready string
		sig   os.Signal
	}{
		{"prove", prove, "stage started", os.Interrupt},
		{"bench", []string{"bench", "--example", "keccakf", "--perms", "2", "--device", "host", "--log-level", "debug", "--trace-out", filepath.Join(dir, "t.json")}, "stage started", os.Interrupt},
		// The terminal closed, or the reader of a pipe quit: the same clean stop.
		{"prove SIGHUP", prove, "stage started", syscall.SIGHUP},
		{"prove SIGPIPE", prove, "stage started", syscall.SIGPIPE},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, c.args...)
			var out bytes.Buffer
			stderr := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = &out, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(stderr.String(), c.ready) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			sent := time.Now()
			cmd.Process.Signal(c.sig)
			err := cmd.Wait()
			took := time.Since(sent)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 130 {
				t.Fatalf("exit %v, want 130; stderr:\n%s", err, stderr)
			}
			if took > 5*time.Second {
				t.Errorf("took %v to stop", took)
			}
			if !strings.HasSuffix(stderr.String(), "metalprove: interrupted; no output written\n") || strings.Count(stderr.String(), "interrupted") != 1 {
				t.Errorf("stderr does not end with one interrupt line:\n%s", stderr)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "k2.bin" {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer written by a child process's stderr copier and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHugePermsRealMemory: on this machine's real memory, 174762 permutations (a 44.2 GB trace)
// are refused at once with the size needed, and nothing is written.
func TestHugePermsRealMemory(t *testing.T) {
	if m := sysinfo.ReadMemory(); m.Available == 0 || m.Available > 44e9 {
		t.Skipf("this machine has %d bytes available: a 44.2 GB trace fits", m.Available)
	}
	dir := t.TempDir()
	start := time.Now()
	code, out, errOut := metalprove(t, "trace", "--example", "keccakf", "--perms", "174762", "-o", filepath.Join(dir, "k.bin"))
	if code != 2 || out != "" || !strings.Contains(errOut, "44.2 GB") || !strings.Contains(errOut, "--perms 174762") ||
		strings.Contains(errOut, "fatal error") || strings.Contains(errOut, "goroutine") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestReadmeFlow is the README's main flow after `make install`: trace, prove without -o (the
// proof lands beside the trace and its path is printed), verify, bench --example.
func TestReadmeFlow(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "keccakf.bin")
	if code, _, errOut := metalprove(t, "trace", "--example", "keccakf", "--perms", "4", "-o", tr); code != 0 {
		t.Fatalf("trace: exit %d: %s", code, errOut)
	}
	code, out, errOut := metalprove(t, "prove", "--trace", tr, "--preset", "test", "--allow-insecure")
	pf := filepath.Join(dir, "keccakf.proof")
	if code != 0 || !strings.HasPrefix(out, pf+": ") || !strings.Contains(errOut, "stage started") {
		t.Fatalf("prove: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut = metalprove(t, "verify", pf, "--allow-insecure"); code != 0 || !strings.Contains(out, "keccakf (height 128)") {
		t.Fatalf("verify: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = metalprove(t, "bench", "--example", "keccakf", "--perms", "4", "--preset", "test", "--allow-insecure", "--runs", "2", "--device", "host")
	if code != 0 || !strings.Contains(out, "permutations/s") || !strings.Contains(out, "openings") {
		t.Fatalf("bench: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// corruptTrace writes a copy of the trace file at path with one cell of section sec changed (add
// d at column col, row row) and returns its path.
func corruptTrace(t *testing.T, path string, sec, col, row int, d uint32) string {
	t.Helper()
	secs, err := tracefile.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &secs[sec]
	s.Data[col*s.Height+row] = s.Data[col*s.Height+row].Add(field.New(d))
	bad := filepath.Join(t.TempDir(), "bad.trace")
	if err := tracefile.WriteAll(bad, secs); err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestProveRejectsInvalidTrace: prove checks the trace before proving, on the device (here the
// host device) as on --cpuref: one wrong cell is refused with exit 4 naming the AIR, row and
// constraint, an unbalanced bus naming the bus and message, and no proof file is written.
func TestProveRejectsInvalidTrace(t *testing.T) {
	dir := t.TempDir()
	fib := filepath.Join(dir, "fib.trace")
	if code, _, errOut := metalprove(t, "trace", "--example", "fibonacci", "--rows", "64", "-o", fib); code != 0 {
		t.Fatalf("trace fibonacci: exit %d, stderr %q", code, errOut)
	}
	pair := filepath.Join(dir, "pair.trace")
	if code, _, errOut := metalprove(t, "trace", "--example", "interaction-pair", "--rows", "64", "-o", pair); code != 0 {
		t.Fatalf("trace interaction-pair: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		// The right of row 20 changed: row 19's transition constraint 3 fails first.
		{"wrong cell", corruptTrace(t, fib, 0, 1, 20, 1), []string{"AIR 0 (fibonacci): row 19: constraint 3 = ", "AIR 0 (fibonacci): row 20: constraint 2 = "}},
		// The receiver's count of row 5 changed: no constraint fails, bus 0 does not balance.
		{"unbalanced bus", corruptTrace(t, pair, 1, 0, 5, 2), []string{"interactions do not balance: bus 0 message ["}},
	} {
		var msgs []string
		for _, backend := range [][]string{{"--device", "host"}, {"--cpuref"}} {
			out := filepath.Join(dir, "out.proof")
			args := append([]string{"prove", "--trace", tc.path, "--preset", "test", "--allow-insecure", "-o", out}, backend...)
			code, stdout, errOut := metalprove(t, args...)
			if code != 4 || stdout != "" {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 4", tc.name, backend, code, stdout, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s %v: stderr lacks %q:\n%s", tc.name, backend, w, errOut)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s %v: a proof file was written (%v)", tc.name, backend, err)
			}
			line := errOut[strings.Index(errOut, "stark: trace does not satisfy"):]
			msgs = append(msgs, line[:strings.IndexByte(line+"\n", '\n')])
		}
		if msgs[0] != msgs[1] {
			t.Errorf("%s: device and host checkers differ:\n%s\n%s", tc.name, msgs[0], msgs[1])
		}
	}
}

// TestReadmeUsageBlock runs every command of README.md's Usage section as written, in order,
// from a directory holding bin/metalprove (the binary under test) and the OpenVM vectors at
// their repository path: each must exit 0 (bash -e), and the proof made from OpenVM's key must be
// OpenVM's bytes (the block's own cmp). The device is the one `--device auto` picks here.
func TestReadmeUsageBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: proves and benchmarks for about a minute")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Usage\n")
	if start < 0 {
		t.Fatal("README.md has no Usage section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	blocks := strings.Split(section, "```")
	for i := 1; i < len(blocks); i += 2 {
		body, ok := strings.CutPrefix(blocks[i], "sh\n")
		if !ok {
			t.Fatalf("README.md: a code block of the Usage section is not sh: %.40q", blocks[i])
		}
		script.WriteString(body)
	}
	if n := strings.Count(script.String(), "bin/metalprove "); n < 10 {
		t.Fatalf("the Usage section runs metalprove %d times: the block was not found whole", n)
	}
	dir := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(os.Symlink(binary, filepath.Join(dir, "bin", "metalprove")))
	must(os.MkdirAll(filepath.Join(dir, "internal", "cmd", "testdata"), 0o755))
	must(os.Symlink(filepath.Join(repo, "internal", "cmd", "testdata", "openvm-v2.0.1"), filepath.Join(dir, "internal", "cmd", "testdata", "openvm-v2.0.1")))
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "METALPROVE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README usage block: %v\n%s", err, out)
	}
}
