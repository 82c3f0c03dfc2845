package cmd

// OpenVM's keys in, OpenVM's proofs out: `keygen --openvm-vk` of the keys in
// testdata/openvm-v2.0.1, then `prove --key` of the same statements gives the bytes of the
// proofs OpenVM's prover made there (cpuref and the host device; CUDA in selftest's GPU runs).

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/tracefile"
)

func TestOpenVMKeysProve(t *testing.T) {
	cmdtest.ClearEnv(t)
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := filepath.Join(dir, fx.name+".trace")
			mustRun(t, cmdutil.ExitOK, append(fx.trace, "-o", tr)...)
			name := "fibonacci"
			if strings.HasPrefix(fx.name, "keccakf") {
				name = "keccakf"
			}
			pk := filepath.Join(dir, fx.name+".pk")
			keygen := []string{"keygen", "--openvm-vk", vectors + fx.vk, "--names", name, "-o", pk}
			if fx.name == "fib" {
				// The key's parameters are the insecure test preset's.
				code, _, errOut, _ := run(t, keygen...)
				if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--allow-insecure") {
					t.Fatalf("keygen of an insecure key without --allow-insecure: exit %d, %s", code, errOut)
				}
				keygen = append(keygen, "--allow-insecure")
			}
			out, _ := mustRun(t, cmdutil.ExitOK, keygen...)
			if !strings.Contains(out, pk) {
				t.Errorf("keygen output: %s", out)
			}
			insecure := []string{}
			if fx.name == "fib" {
				insecure = []string{"--allow-insecure"}
			}
			// The key file gives OpenVM's key bytes back.
			vk := filepath.Join(dir, "again.vk")
			mustRun(t, cmdutil.ExitOK, append([]string{"vk", "export", "--key", pk, "-o", vk}, insecure...)...)
			if !bytes.Equal(readFile(t, vk), readFile(t, vectors+fx.vk)) {
				t.Fatal("vk export --key differs from the OpenVM key it was made from")
			}
			// OpenVM's proof verifies against the key.
			mustRun(t, cmdutil.ExitOK, append([]string{"verify", "--openvm", vectors + fx.proof, "--key", pk}, insecure...)...)

			devices := [][]string{{"--cpuref"}, {"--device", "host"}}
			if fx.slowProve {
				if testing.Short() {
					t.Skip("-short: proving keccakf-16 on cpuref takes about 25 s on 2 cores")
				}
			}
			for _, dev := range devices {
				pf := filepath.Join(dir, fx.name+dev[len(dev)-1]+".proof")
				args := append([]string{"prove", "--key", pk, "--trace", tr, "-o", pf}, insecure...)
				mustRun(t, cmdutil.ExitOK, append(args, dev...)...)
				mustRun(t, cmdutil.ExitOK, append([]string{"verify", "--key", pk, pf}, insecure...)...)
				bare := filepath.Join(dir, fx.name+".bare")
				mustRun(t, cmdutil.ExitOK, "proof", "export", pf, "-o", bare)
				if !bytes.Equal(readFile(t, bare), readFile(t, vectors+fx.proof)) {
					t.Errorf("%v: the proof from the imported key differs from OpenVM's %s", dev, fx.proof)
				}
			}
		})
	}
}

// Every built-in test AIR survives vk export → keygen --openvm-vk → prove --key with the bytes
// of the built-in path, and bad keys and traces give clear errors.
func TestKeyRoundTripAndErrors(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr := filepath.Join(dir, "mixture.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "mixture", "--rows", "16", "-o", tr)
	test := []string{"--preset", "test", "--allow-insecure"}
	builtin := filepath.Join(dir, "builtin.proof")
	mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--cpuref", "--trace", tr, "-o", builtin}, test...)...)

	vk := filepath.Join(dir, "mixture.vk")
	mustRun(t, cmdutil.ExitOK, append([]string{"vk", "export", "--trace", tr, "-o", vk}, test...)...)
	// keygen --trace writes the same key, with the names and preprocessed traces.
	pk := filepath.Join(dir, "mixture.pk")
	mustRun(t, cmdutil.ExitOK, append([]string{"keygen", "--trace", tr, "-o", pk}, test...)...)
	// The OpenVM key alone needs the preprocessed traces (FibonacciSelector has one).
	code, _, errOut, _ := run(t, "keygen", "--openvm-vk", vk, "-o", filepath.Join(dir, "x.pk"), "--allow-insecure")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--preprocessed") {
		t.Fatalf("keygen without --preprocessed: exit %d, %s", code, errOut)
	}
	// vk export writes what keygen --openvm-vk needs: the key, and the preprocessed traces.
	pre := filepath.Join(dir, "mixture.pre.trace")
	vk2 := filepath.Join(dir, "mixture2.vk")
	mustRun(t, cmdutil.ExitOK, "vk", "export", "--key", pk, "-o", vk2, "--preprocessed-out", pre, "--allow-insecure")
	if !bytes.Equal(readFile(t, vk), readFile(t, vk2)) {
		t.Fatal("vk export --key differs from vk export --trace")
	}
	imported := filepath.Join(dir, "imported.pk")
	out, _ := mustRun(t, cmdutil.ExitOK, "keygen", "--openvm-vk", vk, "--preprocessed", pre, "--names", namesOf(t, tr), "-o", imported, "--allow-insecure", "--json")
	if !strings.Contains(out, `"pre_hash"`) {
		t.Errorf("keygen --json: %s", out)
	}
	for _, dev := range [][]string{{"--cpuref"}, {"--device", "host"}} {
		pf := filepath.Join(dir, "imported.proof")
		mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--key", imported, "--trace", tr, "-o", pf, "--allow-insecure"}, dev...)...)
		a, b := filepath.Join(dir, "a.bare"), filepath.Join(dir, "b.bare")
		mustRun(t, cmdutil.ExitOK, "proof", "export", pf, "-o", a)
		mustRun(t, cmdutil.ExitOK, "proof", "export", builtin, "-o", b)
		if !bytes.Equal(readFile(t, a), readFile(t, b)) {
			t.Fatalf("%v: proof from the imported key differs from the built-in path's", dev)
		}
		mustRun(t, cmdutil.ExitOK, "verify", "--key", imported, pf, "--allow-insecure")
		// The built-in proof file names no key: verify --key refuses it before verifying.
		code, _, errOut, _ = run(t, "verify", "--key", imported, builtin, "--allow-insecure")
		if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), "not made with a proving key") {
			t.Fatalf("verify --key of a built-in proof: exit %d, %s", code, errOut)
		}
	}

	// A damaged key file is named, never a panic.
	b := readFile(t, imported)
	for _, at := range []int{0, 9, 30, len(b) / 2, len(b) - 1} {
		c := bytes.Clone(b)
		c[at] ^= 0x20
		bad := filepath.Join(dir, "bad.pk")
		if err := os.WriteFile(bad, c, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut, _ := run(t, "prove", "--key", bad, "--trace", tr, "--cpuref", "-o", filepath.Join(dir, "y.proof"), "--allow-insecure")
		if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), "bad.pk") {
			t.Fatalf("byte %d of the key flipped: exit %d, %s", at, code, errOut)
		}
	}
	// A trace that does not fit the key names the AIR and the field.
	fib := filepath.Join(dir, "fib.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "fibonacci", "--rows", "16", "-o", fib)
	code, _, errOut, _ = run(t, "prove", "--key", imported, "--trace", fib, "--cpuref", "-o", filepath.Join(dir, "z.proof"), "--allow-insecure")
	if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), "sections") {
		t.Fatalf("trace with too few sections: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "prove", "--key", imported, "--airs", "0", "--trace", fib, "--cpuref", "-o", filepath.Join(dir, "z.proof"), "--allow-insecure")
	if code != cmdutil.ExitOK {
		t.Fatalf("--airs 0 with the fibonacci section: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "y.proof")); !os.IsNotExist(err) {
		t.Fatal("a failed prove left a proof file")
	}
}

// namesOf lists a trace file's section names, comma-separated.
func namesOf(t *testing.T, tr string) string {
	t.Helper()
	secs, err := tracefile.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// Malformed, truncated, altered and unsupported OpenVM keys, and preprocessed traces that do
// not commit to the key's commitment, are refused with exit 3 and an error naming what is
// wrong; bad flags with exit 2.
func TestKeygenRejectsBadKeys(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	good := readFile(t, vectors+"fib.vk.postcard")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, _, err := air.DecodeMultiVerifyingKey(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.PerAir[0].DAG.Nodes {
		if n := &m.PerAir[0].DAG.Nodes[i]; n.Op == air.OpVariable && n.Var.Entry == air.EntryMain {
			n.Var = air.Var{Entry: air.EntryChallenge}
			break
		}
	}
	challenge := m.AppendKeyPostcard(nil, m.PreHash())
	flipped := bytes.Clone(good)
	flipped[len(good)/2] ^= 0x04
	for _, tc := range []struct {
		name, file, want string
	}{
		{"missing", filepath.Join(dir, "none.vk"), "no such file"},
		{"truncated", write("trunc.vk", good[:100]), "unexpected end of input"},
		{"trailing", write("trail.vk", append(bytes.Clone(good), 0)), "trailing"},
		{"altered", write("flip.vk", flipped), "OpenVM verifying key"},
		{"challenge", write("chal.vk", challenge), "challenge"},
		{"not a key", write("junk.vk", []byte("hello")), "OpenVM verifying key"},
	} {
		code, _, errOut, _ := run(t, "keygen", "--openvm-vk", tc.file, "-o", filepath.Join(dir, "out.pk"), "--allow-insecure")
		if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), "panic") {
			t.Errorf("%s: exit %d, stderr %s; want exit 3 naming %q", tc.name, code, errOut, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.pk")); !os.IsNotExist(err) {
		t.Error("a refused key left a key file")
	}
	code, _, errOut, _ := run(t, "keygen", "--openvm-vk", vectors+"fib.vk.postcard", "--names", "a,b", "-o", filepath.Join(dir, "out.pk"), "--allow-insecure")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--names") {
		t.Errorf("two names for one AIR: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "keygen", "--openvm-vk", vectors+"fib.vk.postcard", "--preset", "test", "-o", filepath.Join(dir, "out.pk"))
	if code != cmdutil.ExitUsage {
		t.Errorf("--openvm-vk with --preset: exit %d, %s", code, errOut)
	}

	// A preprocessed trace that is not the key's: named by its AIR.
	tr := filepath.Join(dir, "sel.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "fibonacci-selector", "--rows", "16", "-o", tr)
	vk, pre := filepath.Join(dir, "sel.vk"), filepath.Join(dir, "sel.pre")
	mustRun(t, cmdutil.ExitOK, "vk", "export", "--trace", tr, "-o", vk, "--preprocessed-out", pre, "--preset", "test", "--allow-insecure")
	secs, err := tracefile.ReadAll(pre)
	if err != nil {
		t.Fatal(err)
	}
	secs[0].Data[0] = 1 - secs[0].Data[0]
	if err := tracefile.WriteAll(pre, secs); err != nil {
		t.Fatal(err)
	}
	code, _, errOut, _ = run(t, "keygen", "--openvm-vk", vk, "--preprocessed", pre, "-o", filepath.Join(dir, "out.pk"), "--allow-insecure")
	if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), "AIR 0 (fibonacci-selector") || !strings.Contains(errOut.String(), "commits to") {
		t.Errorf("altered preprocessed trace: exit %d, %s", code, errOut)
	}

	// A trace section that does not fit its AIR names the AIR, its name and the field.
	pk := filepath.Join(dir, "sel.pk")
	mustRun(t, cmdutil.ExitOK, "keygen", "--trace", tr, "--preset", "test", "--allow-insecure", "-o", pk)
	fib := filepath.Join(dir, "fib.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "fibonacci", "--rows", "16", "-o", fib)
	code, _, errOut, _ = run(t, "prove", "--key", pk, "--trace", fib, "--cpuref", "--allow-insecure", "-o", filepath.Join(dir, "x.proof"))
	if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), `named "fibonacci", AIR 0 of the key is "fibonacci-selector"`) {
		t.Errorf("section of another AIR: exit %d, %s", code, errOut)
	}
	for _, tc := range []struct{ airs, want string }{{"1", "AIR 1, the key has AIRs 0 to 0"}, {"x", "not an AIR index"}} {
		code, _, errOut, _ = run(t, "prove", "--key", pk, "--airs", tc.airs, "--trace", tr, "--cpuref", "--allow-insecure", "-o", filepath.Join(dir, "x.proof"))
		if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("--airs %s: exit %d, %s", tc.airs, code, errOut)
		}
	}
	code, _, errOut, _ = run(t, "prove", "--key", pk, "--trace", tr, "--cpuref", "-o", filepath.Join(dir, "x.proof"))
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--allow-insecure") {
		t.Errorf("insecure key without --allow-insecure: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.proof")); !os.IsNotExist(err) {
		t.Error("a refused proof left a proof file")
	}
}

// Every built-in test example: vk export → keygen --openvm-vk → prove --key gives the built-in
// path's proof bytes on cpuref and the host device, and it verifies with the key.
func TestKeyRoundTripEveryExample(t *testing.T) {
	cmdtest.ClearEnv(t)
	test := []string{"--preset", "test", "--allow-insecure"}
	for _, ex := range []struct {
		name string
		args []string
	}{
		{"fibonacci", []string{"--rows", "32"}},
		{"fibonacci-selector", []string{"--rows", "16"}},
		{"preprocessed-cached", []string{"--rows", "16"}},
		{"interaction-pair", []string{"--rows", "8", "--seed", "3"}},
		{"short-traces", nil},
		{"mixture", []string{"--rows", "8"}},
	} {
		t.Run(ex.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := filepath.Join(dir, "t.trace")
			mustRun(t, cmdutil.ExitOK, append([]string{"trace", "--example", ex.name, "-o", tr}, ex.args...)...)
			builtin := filepath.Join(dir, "builtin.proof")
			mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--cpuref", "--trace", tr, "-o", builtin}, test...)...)
			want := filepath.Join(dir, "builtin.bare")
			mustRun(t, cmdutil.ExitOK, "proof", "export", builtin, "-o", want)

			vk, pre := filepath.Join(dir, "t.vk"), filepath.Join(dir, "t.pre")
			export := append([]string{"vk", "export", "--trace", tr, "-o", vk}, test...)
			keygen := []string{"keygen", "--openvm-vk", vk, "--names", namesOf(t, tr), "-o", filepath.Join(dir, "t.pk"), "--allow-insecure"}
			if ex.name != "fibonacci" && ex.name != "interaction-pair" { // these have no preprocessed trace
				export = append(export, "--preprocessed-out", pre)
				keygen = append(keygen, "--preprocessed", pre)
			}
			mustRun(t, cmdutil.ExitOK, export...)
			mustRun(t, cmdutil.ExitOK, keygen...)
			for _, dev := range [][]string{{"--cpuref"}, {"--device", "host"}} {
				pf, bare := filepath.Join(dir, "k.proof"), filepath.Join(dir, "k.bare")
				mustRun(t, cmdutil.ExitOK, append([]string{"prove", "--key", filepath.Join(dir, "t.pk"), "--trace", tr, "-o", pf, "--allow-insecure"}, dev...)...)
				mustRun(t, cmdutil.ExitOK, "verify", "--key", filepath.Join(dir, "t.pk"), pf, "--allow-insecure")
				mustRun(t, cmdutil.ExitOK, "proof", "export", pf, "-o", bare)
				if !bytes.Equal(readFile(t, bare), readFile(t, want)) {
					t.Errorf("%v: the proof from the imported key differs from the built-in path's", dev)
				}
			}
		})
	}
}
