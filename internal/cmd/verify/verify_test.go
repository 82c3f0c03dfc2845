package verify_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmd"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

func run(t *testing.T, args ...string) (cmdutil.ExitCode, string, string) {
	t.Helper()
	cmdtest.ClearEnv(t)
	code, out, errOut, _ := cmdtest.Run(cmd.Run, "test", args...)
	return code, out.String(), errOut.String()
}

func mustRun(t *testing.T, want cmdutil.ExitCode, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != want {
		t.Fatalf("metalprove %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out + errOut
}

// TestTraceProveVerify is the acceptance path: trace → prove → verify, then a tampered and a
// truncated proof file.
func TestTraceProveVerify(t *testing.T) {
	dir := t.TempDir()
	for _, ex := range []string{"mixture", "keccakf"} {
		t.Run(ex, func(t *testing.T) {
			tr := filepath.Join(dir, ex+".trace")
			pf := filepath.Join(dir, ex+".proof")
			args := []string{"trace", "--example", ex, "-o", tr}
			if ex == "keccakf" {
				args = append(args, "--perms", "2")
			}
			mustRun(t, cmdutil.ExitOK, args...)
			for _, backend := range [][]string{{"--cpuref"}, {"--device", "host"}} {
				out := mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--trace", tr, "-o", pf, "--preset", "test", "--allow-insecure", "--json"}, backend...)...)
				var rep struct {
					ProofBytes int    `json:"proof_bytes"`
					Backend    string `json:"backend"`
				}
				if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); err != nil || rep.ProofBytes == 0 {
					t.Fatalf("prove --json: %v\n%s", err, out)
				}
				t.Logf("%s: %d proof bytes", rep.Backend, rep.ProofBytes)
				out = mustRun(t, cmdutil.ExitOK, "verify", pf, "--allow-insecure")
				if !strings.Contains(out, "valid proof") {
					t.Fatalf("verify output: %s", out)
				}
			}
			// The trace file names the AIRs as well.
			mustRun(t, cmdutil.ExitOK, "verify", pf, "--allow-insecure", "--trace", tr)
			b, err := os.ReadFile(pf)
			if err != nil {
				t.Fatal(err)
			}
			// Tampered: change one byte deep inside the proof and fix nothing: the envelope CRC
			// catches it (exit 3). A consistently re-enveloped tampering is exit 4, below.
			bad := filepath.Join(dir, ex+".bad")
			c := append([]byte(nil), b...)
			c[len(c)-100] ^= 1
			os.WriteFile(bad, c, 0o600)
			mustRun(t, cmdutil.ExitBadInput, "verify", bad, "--allow-insecure")
			os.WriteFile(bad, b[:len(b)/2], 0o600)
			mustRun(t, cmdutil.ExitBadInput, "verify", bad, "--allow-insecure")
			// Other parameters: rejected (exit 4).
			mustRun(t, cmdutil.ExitCheckFailed, "verify", pf, "--preset", "app-100bit")
			// Insecure parameters need --allow-insecure.
			mustRun(t, cmdutil.ExitUsage, "verify", pf)
		})
	}
}

// TestProveVerifyRejections: an invalid trace is refused by prove (exit 4), a consistently
// re-enveloped tampered proof is rejected by verify (exit 4), an unknown AIR is bad input.
func TestProveVerifyRejections(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, secs ...tracefile.Section) string {
		path := filepath.Join(dir, name)
		w, err := tracefile.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secs {
			if err := w.WriteSectionColumnMajor(s.SectionHeader, s.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	fib := testair.Fibonacci(0, 1, 8)
	sec := tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: "fibonacci", Width: 2, Height: 8, PublicValues: fib.Trace.Public}, Data: fib.MainCells()}
	good := write("good.trace", sec)
	badData := append([]field.Fp(nil), sec.Data...)
	badData[3] = badData[3].Add(field.One)
	bad := write("bad.trace", tracefile.Section{SectionHeader: sec.SectionHeader, Data: badData})
	out := mustRun(t, cmdutil.ExitCheckFailed, "prove", "--trace", bad, "-o", filepath.Join(dir, "bad.proof"), "--preset", "test", "--allow-insecure", "--cpuref")
	if !strings.Contains(out, "row 2") || !strings.Contains(out, "fibonacci") {
		t.Errorf("prove of an invalid trace: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.proof")); err == nil {
		t.Error("a proof file was written for an invalid trace")
	}
	// --no-check: the forged proof does not verify.
	forged := filepath.Join(dir, "forged.proof")
	mustRun(t, cmdutil.ExitOK, "prove", "--trace", bad, "-o", forged, "--preset", "test", "--allow-insecure", "--cpuref", "--no-check")
	mustRun(t, cmdutil.ExitCheckFailed, "verify", forged, "--allow-insecure")

	unknown := write("unknown.trace", tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: "no-such-air", Width: 2, Height: 8}, Data: make([]field.Fp, 16)})
	mustRun(t, cmdutil.ExitBadInput, "prove", "--trace", unknown, "-o", filepath.Join(dir, "u.proof"), "--preset", "test", "--allow-insecure")

	pf := filepath.Join(dir, "good.proof")
	mustRun(t, cmdutil.ExitOK, "prove", "--trace", good, "-o", pf, "--preset", "test", "--allow-insecure", "--cpuref")
	meta, env, err := stark.ReadProofFileRaw(pf)
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := params.Preset("test", 0)
	for name, tamper := range map[string]func(*stark.Proof){
		"public value": func(pr *stark.Proof) { pr.PublicValues[0][2] = pr.PublicValues[0][2].Add(field.One) },
		"gkr":          func(pr *stark.Proof) { pr.GKR.Q0Claim = pr.GKR.Q0Claim.Add(field.Fp4One) },
		"constraints":  func(pr *stark.Proof) { pr.BatchConstraint.ColumnOpenings[0][0][1] = field.Fp4{} },
		"whir":         func(pr *stark.Proof) { pr.Whir.FinalPoly[0] = pr.Whir.FinalPoly[0].Add(field.Fp4One) },
	} {
		proof, err := stark.UnmarshalProofFile(env, p)
		if err != nil {
			t.Fatal(err)
		}
		tamper(proof)
		tp := filepath.Join(dir, "tampered.proof")
		if _, err := stark.WriteProofFileMeta(tp, p, proof, meta); err != nil {
			t.Fatal(err)
		}
		out := mustRun(t, cmdutil.ExitCheckFailed, "verify", tp, "--allow-insecure")
		t.Logf("%s: %s", name, strings.TrimSpace(out))
	}
	// A meta block naming another AIR: the key differs, the proof is rejected.
	other := *meta
	other.AIRs = []stark.ProofMetaAir{{Name: "fibonacci-selector", Height: 8}}
	proof, _ := stark.UnmarshalProofFile(env, p)
	tp := filepath.Join(dir, "other.proof")
	if _, err := stark.WriteProofFileMeta(tp, p, proof, &other); err != nil {
		t.Fatal(err)
	}
	mustRun(t, cmdutil.ExitCheckFailed, "verify", tp, "--allow-insecure")
	// Missing file: bad input.
	mustRun(t, cmdutil.ExitBadInput, "verify", filepath.Join(dir, "missing.proof"))
}
