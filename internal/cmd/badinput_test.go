package cmd

// Command-level tests of issue 12's bad-input cases: each runs the whole command tree as the
// binary does (cmd.Run / RunContext) and checks the exit code, the message and that no output
// or temporary file is left behind. The acceptance tests in cmd/metalprove repeat the cases that
// need a real process (SIGINT, the real memory of the machine).

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// expect runs metalprove and checks the exit code and that stderr holds every want.
func expect(t *testing.T, code cmdutil.ExitCode, want []string, args ...string) (string, string) {
	t.Helper()
	got, out, errOut, _ := run(t, args...)
	if got != code {
		t.Fatalf("metalprove %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("metalprove %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, errOut)
		}
	}
	return out.String(), errOut.String()
}

// entries lists dir's entries (names).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// noTempFiles fails when dir holds a temporary file of an atomic write.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	for _, n := range entries(t, dir) {
		if strings.Contains(n, ".tmp-") {
			t.Errorf("temporary file left in %s: %s", dir, n)
		}
	}
}

// smallTrace writes a trace that proves in milliseconds (fibonacci, 8 rows) and returns its path
// and the prove flags for it.
func smallTrace(t *testing.T, dir string) (string, []string) {
	t.Helper()
	tr := filepath.Join(dir, "fib.bin")
	expect(t, cmdutil.ExitOK, nil, "trace", "--example", "fibonacci", "--rows", "8", "-o", tr)
	return tr, []string{"--preset", "test", "--allow-insecure", "--cpuref"}
}

// slowTrace writes a keccakf trace whose proof under app-100bit takes many seconds: a command that
// fails on it within a second failed before proving.
func slowTrace(t *testing.T, dir string) string {
	t.Helper()
	tr := filepath.Join(dir, "k2.bin")
	expect(t, cmdutil.ExitOK, nil, "trace", "--example", "keccakf", "--perms", "2", "-o", tr)
	return tr
}

func TestProveDefaultOutput(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr, flags := smallTrace(t, dir)
	out, _ := expect(t, cmdutil.ExitOK, nil, append([]string{"prove", "--trace", tr}, flags...)...)
	want := filepath.Join(dir, "fib.proof")
	if !strings.HasPrefix(out, want+": proof of") {
		t.Errorf("stdout %q does not start with the proof's path %s", out, want)
	}
	st, err := os.Stat(want)
	if err != nil {
		t.Fatalf("no proof beside the trace: %v", err)
	}
	// 0644 under the umask, as traces.
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	if perm := st.Mode().Perm(); perm != 0o644&^os.FileMode(umask) {
		t.Errorf("proof file mode %v, want %v (0644 under umask %03o)", perm, 0o644&^os.FileMode(umask), umask)
	}
	if tst, _ := os.Stat(tr); tst.Mode().Perm() != st.Mode().Perm() {
		t.Errorf("trace mode %v, proof mode %v: want the same", tst.Mode().Perm(), st.Mode().Perm())
	}
	expect(t, cmdutil.ExitOK, nil, "verify", want, "--allow-insecure")
	if got := prover.DefaultProofOutput("a/b.c/trace"); got != "a/b.c/trace.proof" {
		t.Errorf("DefaultOutput = %q", got)
	}
}

func TestProveOutputChecksBeforeProving(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr := slowTrace(t, dir)
	before, _ := os.ReadFile(tr)
	config := filepath.Join(dir, "m.yaml")
	os.WriteFile(config, []byte("device: host\n"), 0o644)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"output is the input", []string{"-o", tr}, []string{"-o " + tr, "is the input file"}},
		{"output is the input, spelled otherwise", []string{"-o", filepath.Join(dir, ".", "sub", "..", "k2.bin")}, []string{"is the input file"}},
		{"output is the config file", []string{"-o", config, "--config", config}, []string{"is the input file " + config}},
		{"output is a directory", []string{"-o", dir}, []string{"-o " + dir, "is a directory"}},
		{"missing directory", []string{"-o", filepath.Join(dir, "nope", "k.proof")}, []string{filepath.Join(dir, "nope", "k.proof"), "directory " + filepath.Join(dir, "nope") + " does not exist"}},
		{"read-only directory", []string{"-o", filepath.Join(ro, "k.proof")}, []string{filepath.Join(ro, "k.proof"), "not writable"}},
		{"--cpuref with --device", []string{"--cpuref", "--device", "host"}, []string{"--cpuref and --device host conflict"}},
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "read-only directory" && os.Geteuid() == 0 {
				t.Skip("running as root: a 0555 directory is writable")
			}
			start := time.Now()
			_, errOut := expect(t, cmdutil.ExitUsage, c.want, append([]string{"prove", "--trace", tr}, c.args...)...)
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v: the check must come before proving (which takes seconds here)", d)
			}
			if strings.Contains(errOut, ".tmp-") {
				t.Errorf("the message names the temporary file: %s", errOut)
			}
		})
	}
	if after, _ := os.ReadFile(tr); string(after) != string(before) {
		t.Error("the input trace changed")
	}
	noTempFiles(t, dir)
	for _, n := range entries(t, dir) {
		if strings.HasSuffix(n, ".proof") {
			t.Errorf("proof written: %s", n)
		}
	}
}

func TestTraceOutputChecks(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "m.yaml")
	os.WriteFile(config, []byte("device: host\n"), 0o644)
	expect(t, cmdutil.ExitUsage, []string{"is the input file " + config}, "--config", config, "trace", "--example", "keccakf", "--perms", "2", "-o", config)
	expect(t, cmdutil.ExitUsage, []string{"does not exist"}, "trace", "--example", "keccakf", "--perms", "2", "-o", filepath.Join(dir, "no", "k.bin"))
	expect(t, cmdutil.ExitUsage, []string{"is a directory"}, "trace", "--example", "keccakf", "--perms", "2", "-o", dir+"/")
	// A directory given as the trace is a bad input (exit 3) for prove, as for trace info and
	// verify (prove exited 1).
	expect(t, cmdutil.ExitBadInput, []string{"--trace " + dir, "is a directory"}, "prove", "--trace", dir, "-o", filepath.Join(dir, "x.proof"))
	// A trace taller than the parameters' stacked height: exit 3 on every backend, named (the
	// device backend exited 1 with its memory estimate's words).
	tall := filepath.Join(dir, "tall.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "fibonacci", "--rows", "2048", "-o", tall)
	for _, dev := range [][]string{{"--device", "host"}, {"--cpuref"}} {
		expect(t, cmdutil.ExitBadInput, []string{`"fibonacci" has height 2048, above the stacked height 2^10 of preset test`},
			append([]string{"prove", "--trace", tall, "-o", filepath.Join(dir, "x.proof"), "--preset", "test", "--allow-insecure"}, dev...)...)
	}
	os.Remove(tall)
	if b, _ := os.ReadFile(config); string(b) != "device: host\n" {
		t.Error("config file overwritten")
	}
	noTempFiles(t, dir)
}

// TestHugePerms: a request that cannot fit is refused before anything is allocated, with the
// size it needs, whatever the machine (its memory is set to 8 GB here).
func TestHugePerms(t *testing.T) {
	cmdtest.ClearEnv(t)
	old := prover.MachineMemory
	prover.MachineMemory = func() sysinfo.Memory { return sysinfo.Memory{Total: 8e9, Available: 6e9} }
	defer func() { prover.MachineMemory = old }()
	dir := t.TempDir()
	start := time.Now()
	// 174762 permutations: 2^22 rows × 2633 columns × 4 bytes = 44.2 GB.
	expect(t, cmdutil.ExitUsage, []string{"--perms 174762", "44.2 GB", "6.0 GB is available", "at most 21845 permutations"},
		"trace", "--example", "keccakf", "--perms", "174762", "-o", filepath.Join(dir, "k.bin"))
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v", d)
	}
	if n := entries(t, dir); len(n) != 0 {
		t.Errorf("files left: %v", n)
	}
	// The format's own bound, above any memory.
	expect(t, cmdutil.ExitUsage, []string{"--perms 4194305", "must be in [1, 4194304]"}, "trace", "--example", "keccakf", "--perms", "4194305", "-o", filepath.Join(dir, "k.bin"))
	// bench: the stacked height of the parameters bounds it too.
	expect(t, cmdutil.ExitUsage, []string{"--perms 100000", "stacked height 2^21"}, "bench", "--example", "keccakf", "--perms", "100000", "--device", "host")
	// bench: the proof's memory.
	expect(t, cmdutil.ExitUsage, []string{"--perms 20000", "at most 1365 here"}, "bench", "--example", "keccakf", "--perms", "20000", "--device", "host")
	// The help states the limit of this machine.
	out, _ := expect(t, cmdutil.ExitOK, nil, "trace", "--help")
	if !strings.Contains(out, "1..21845 on this machine") || !strings.Contains(out, "6.0 GB of memory available") {
		t.Errorf("trace --help does not state the limit:\n%s", out)
	}
}

func TestVerifyBadInput(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr, flags := smallTrace(t, dir)
	pf := filepath.Join(dir, "fib.proof")
	expect(t, cmdutil.ExitOK, nil, append([]string{"prove", "--trace", tr, "-o", pf}, flags...)...)

	// A file that is not a proof: exit 3, named, in text and in JSON.
	expect(t, cmdutil.ExitBadInput, []string{tr + ": not a metalprove proof file: bad magic"}, "verify", tr)
	out, _ := expect(t, cmdutil.ExitBadInput, nil, "verify", tr, "--json")
	var rep struct {
		Valid    bool   `json:"valid"`
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Valid || rep.ExitCode != 3 || !strings.Contains(rep.Error, "bad magic") {
		t.Errorf("verify --json of a trace: %+v (%v)\n%s", rep, err, out)
	}
	// Bare OpenVM bytes given as a proof file: named as such.
	expect(t, cmdutil.ExitBadInput, []string{"bad magic", "--openvm"}, "verify", vectors+"fib.proof")
	// A missing file, with --json: one object, exit 3.
	out, _ = expect(t, cmdutil.ExitBadInput, nil, "verify", filepath.Join(dir, "none.proof"), "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.ExitCode != 3 {
		t.Errorf("verify --json of a missing file: %+v (%v)", rep, err)
	}
	// Rejected (exit 4) with --json: one object.
	out, _ = expect(t, cmdutil.ExitCheckFailed, nil, "verify", pf, "--preset", "app-100bit", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.ExitCode != 4 || rep.Valid {
		t.Errorf("verify --json of a rejected proof: %+v (%v)", rep, err)
	}
	// Valid: the text names the AIRs and heights.
	out, _ = expect(t, cmdutil.ExitOK, nil, "verify", pf, "--allow-insecure")
	if !strings.Contains(out, "valid proof of 1 AIR: fibonacci (height 8)") {
		t.Errorf("verify text: %s", out)
	}
	// --openvm needs --trace.
	expect(t, cmdutil.ExitUsage, []string{"--openvm needs --trace"}, "verify", "--openvm", vectors+"fib.proof")
}

func TestConfigScopedPerCommand(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "m.yaml")
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	// output: set for prove does not redirect trace.
	cfg := write("commands:\n  prove:\n    output: " + filepath.Join(dir, "from-config.proof") + "\n")
	expect(t, cmdutil.ExitUsage, []string{"-o/--output is required"}, "--config", cfg, "trace", "--example", "fibonacci", "--rows", "8")
	tr := filepath.Join(dir, "fib.bin")
	expect(t, cmdutil.ExitOK, nil, "--config", cfg, "trace", "--example", "fibonacci", "--rows", "8", "-o", tr)
	expect(t, cmdutil.ExitOK, nil, "--config", cfg, "prove", "--trace", tr, "--preset", "test", "--allow-insecure", "--cpuref")
	if _, err := os.Stat(filepath.Join(dir, "from-config.proof")); err != nil {
		t.Errorf("prove's output from its config section: %v", err)
	}
	// A command flag at the top level is refused, naming the key and the file.
	cfg = write("output: x.proof\n")
	expect(t, cmdutil.ExitUsage, []string{"config file " + cfg, `key "output" is a flag of`, "commands:"}, "--config", cfg, "version")
	// A bad value in a command section names the key and the file, not a flag.
	cfg = write("commands:\n  trace:\n    perms: 0\n")
	_, errOut := expect(t, cmdutil.ExitUsage, []string{"key commands.trace.perms of config file " + cfg}, "--config", cfg, "trace", "--example", "keccakf", "-o", filepath.Join(dir, "k.bin"))
	if strings.Contains(errOut, "--perms") {
		t.Errorf("the message names a flag the user did not type: %s", errOut)
	}
	cfg = write("commands:\n  bench:\n    runs: many\n")
	expect(t, cmdutil.ExitUsage, []string{"config file " + cfg, "key commands.bench.runs", "many"}, "--config", cfg, "bench", "--kernels")
}

// TestInterruptEveryCommand: an interrupt gives exit 130 and one line in every command, and
// leaves no output or temporary file.
func TestInterruptEveryCommand(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr, _ := smallTrace(t, dir)
	pf := filepath.Join(dir, "fib.proof")
	expect(t, cmdutil.ExitOK, nil, "prove", "--trace", tr, "-o", pf, "--preset", "test", "--allow-insecure", "--cpuref")
	out := t.TempDir()
	for _, args := range [][]string{
		{"trace", "--example", "keccakf", "--perms", "64", "-o", filepath.Join(out, "k.bin")},
		{"trace", "info", tr},
		{"trace", "check", tr},
		{"prove", "--trace", tr, "-o", filepath.Join(out, "p.proof"), "--preset", "test", "--allow-insecure"},
		{"verify", pf, "--allow-insecure"},
		{"proof", "export", pf, "-o", filepath.Join(out, "bare")},
		{"vk", "export", "--trace", tr, "--preset", "test", "--allow-insecure", "-o", filepath.Join(out, "vk")},
		{"bench", "--example", "fibonacci", "--preset", "test", "--allow-insecure", "--runs", "1", "--trace-out", filepath.Join(out, "t.json")},
		{"bench", "--kernels", "--size-log", "10", "--runs", "1"},
		{"params", "--preset", "test", "--allow-insecure"},
		{"selftest", "--run", "^field/"},
		{"version"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ios, _, _, errOut := cmdutil.TestStreams()
		f := cmdutil.NewFactory("test", ios)
		if code := RunContext(ctx, f, append([]string{"--device", "host"}, args...)); code != cmdutil.ExitInterrupted {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, cmdutil.ExitInterrupted, errOut)
		}
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		if last := lines[len(lines)-1]; last != interruptedMsg || strings.Count(errOut.String(), "interrupted") != 1 {
			t.Errorf("%v: stderr %q, want one line %q at the end", args, errOut, interruptedMsg)
		}
	}
	if n := entries(t, out); len(n) != 0 {
		t.Errorf("interrupted commands left files: %v", n)
	}
}

// TestInterruptWhileProving cancels a proof in the middle: exit 130, no proof, no temporary file.
func TestInterruptWhileProving(t *testing.T) {
	if testing.Short() {
		t.Skip("proves for a second")
	}
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr := slowTrace(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	ios, _, _, errOut := cmdutil.TestStreams()
	f := cmdutil.NewFactory("test", ios)
	go func() {
		// Cancel once the proof is under way (the temporary output exists).
		for range 200 {
			time.Sleep(20 * time.Millisecond)
			for _, n := range entries(t, dir) {
				if strings.Contains(n, ".tmp-") {
					time.Sleep(200 * time.Millisecond)
					cancel()
					return
				}
			}
		}
		cancel()
	}()
	code := RunContext(ctx, f, []string{"prove", "--trace", tr, "--device", "host"})
	if code != cmdutil.ExitInterrupted || !strings.HasSuffix(errOut.String(), interruptedMsg+"\n") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	for _, n := range entries(t, dir) {
		if n != "k2.bin" {
			t.Errorf("left behind: %s", n)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	cmdtest.ClearEnv(t)
	expect(t, cmdutil.ExitUsage, []string{"--example NAME", "--kernels"}, "bench")
	expect(t, cmdutil.ExitUsage, []string{"--example \"nope\"", "keccakf"}, "bench", "--example", "nope")
	expect(t, cmdutil.ExitUsage, []string{"choose one"}, "bench", "--example", "keccakf", "--kernels")
	expect(t, cmdutil.ExitUsage, []string{"--rows does not apply to example keccakf"}, "bench", "--example", "keccakf", "--rows", "8")
	expect(t, cmdutil.ExitUsage, []string{"--runs 0"}, "bench", "--example", "fibonacci", "--runs", "0")
	expect(t, cmdutil.ExitUsage, []string{"--cpuref and --device"}, "bench", "--example", "fibonacci", "--cpuref", "--device", "host")
	expect(t, cmdutil.ExitUsage, []string{"apply to --example only"}, "bench", "--kernels", "--perms", "4")
	expect(t, cmdutil.ExitUsage, []string{"height 4096, above the stacked height 2^10 of preset test"}, "bench", "--example", "fibonacci", "--rows", "4096", "--preset", "test", "--allow-insecure", "--device", "host")
	dir := t.TempDir()
	expect(t, cmdutil.ExitUsage, []string{"--trace-out " + dir, "is a directory"}, "bench", "--example", "fibonacci", "--trace-out", dir)
}
