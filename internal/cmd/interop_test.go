package cmd

// Interoperability with OpenVM's own prover (stark-backend v2.0.1), through the commands a user
// runs: the vectors in testdata/openvm-v2.0.1 (made by the Rust prover; see its README) verify
// with `verify --openvm`, a flipped byte is rejected, `vk export` writes the same key bytes, and
// `prove` + `proof export` of the same inputs write the same proof bytes.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

const vectors = "testdata/openvm-v2.0.1/"

// fixture is one vector: how to make its trace, and the files.
type fixture struct {
	name      string
	trace     []string // trace command arguments (without -o)
	preset    []string // --preset (and --allow-insecure)
	proof     string   // bare codec bytes made by Rust
	vk        string   // postcard(MultiStarkVerifyingKey)
	slowProve bool     // proving it takes long on the reference backend
}

var fixtures = []fixture{
	{"fib", []string{"trace", "--example", "fibonacci", "--rows", "8"}, []string{"--preset", "test", "--allow-insecure"},
		"fib.proof", "fib.vk.postcard", false},
	// app_params_with_100_bits_security(21) = the openvm-keccakf preset (and app-100bit at 21).
	{"keccakf-16", []string{"trace", "--example", "keccakf", "--perms", "16"}, []string{"--preset", "openvm-keccakf"},
		"keccakf-16.proof", "keccakf.vk.postcard", true},
}

// mustRun runs metalprove and fails the test unless it exits with want.
func mustRun(t *testing.T, want cmdutil.ExitCode, args ...string) (string, string) {
	t.Helper()
	code, out, errOut, _ := run(t, args...)
	if code != want {
		t.Fatalf("metalprove %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out.String(), errOut.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenVMVectors(t *testing.T) {
	cmdtest.ClearEnv(t)
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := filepath.Join(dir, fx.name+".trace")
			mustRun(t, cmdutil.ExitOK, append(fx.trace, "-o", tr)...)

			// The Rust proof verifies, its AIRs and heights from the trace file.
			rust := vectors + fx.proof
			verify := append([]string{"verify", "--openvm", rust, "--trace", tr}, fx.preset...)
			out, _ := mustRun(t, cmdutil.ExitOK, verify...)
			if !strings.Contains(out, "valid proof of 1 AIR") {
				t.Errorf("verify --openvm: %s", out)
			}

			// A flipped byte anywhere is rejected: malformed (3) or rejected (4), never valid.
			good := readFile(t, rust)
			bad := filepath.Join(dir, "flipped.proof")
			for _, at := range []int{0, 4, 40, len(good) / 3, len(good) / 2, len(good) - 200, len(good) - 1} {
				b := bytes.Clone(good)
				b[at] ^= 0x01
				if err := os.WriteFile(bad, b, 0o644); err != nil {
					t.Fatal(err)
				}
				code, _, errOut, _ := run(t, append([]string{"verify", "--openvm", bad, "--trace", tr}, fx.preset...)...)
				if code != cmdutil.ExitBadInput && code != cmdutil.ExitCheckFailed {
					t.Errorf("byte %d flipped: exit %d, want 3 or 4; stderr %s", at, code, errOut)
				}
			}

			// vk export writes the Rust key's bytes.
			vk := filepath.Join(dir, "vk.postcard")
			mustRun(t, cmdutil.ExitOK, append([]string{"vk", "export", "--trace", tr, "-o", vk}, fx.preset...)...)
			if !bytes.Equal(readFile(t, vk), readFile(t, vectors+fx.vk)) {
				t.Errorf("vk export differs from %s", fx.vk)
			}

			// Proving the same inputs gives the same proof bytes.
			if fx.slowProve && testing.Short() {
				t.Skip("-short: proving keccakf-16 at stacked height 2^21 on the reference backend takes about 25 s on 2 cores")
			}
			pf := filepath.Join(dir, fx.name+".proof")
			mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--cpuref", "--trace", tr, "-o", pf}, fx.preset...)...)
			bare := filepath.Join(dir, fx.name+".bare")
			mustRun(t, cmdutil.ExitOK, "proof", "export", pf, "-o", bare)
			if mine := readFile(t, bare); !bytes.Equal(mine, good) {
				i := 0
				for i < min(len(mine), len(good)) && mine[i] == good[i] {
					i++
				}
				t.Errorf("proof differs from OpenVM's %s: %d vs %d bytes, first difference at byte %d", fx.proof, len(mine), len(good), i)
			}
			// And the exported bytes verify as an OpenVM proof.
			mustRun(t, cmdutil.ExitOK, append([]string{"verify", "--openvm", bare, "--trace", tr}, fx.preset...)...)
		})
	}
}
