package params

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfigs(t *testing.T) {
	for _, c := range []struct{ file, preset string }{
		{"../../configs/app-100bit.yaml", "app-100bit"},
		{"../../configs/test.yaml", "test"},
	} {
		got, spec, err := LoadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		want, info, _ := Preset(c.preset, DefaultAppLogStackedHeight)
		if !got.Equal(want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, want)
		}
		if spec.SecurityBits != info.SecurityBits {
			t.Errorf("%s: security_bits %d, preset %d", c.file, spec.SecurityBits, info.SecurityBits)
		}
	}
}

const appYAML = `log_level: debug
params:
  security_bits: 100
  l_skip: 4
  n_stack: 17
  w_stack: 2048
  log_blowup: 1
  max_constraint_degree: 3
  whir:
    k: 4
    max_log_final_poly_len: 10
    mu_pow_bits: 15
    folding_pow_bits: 5
    query_phase_pow_bits: 20
    proximity:
      kind: unique_decoding
  logup:
    max_interaction_count: 2013265921
    log_max_message_length: 7
    pow_bits: 18
`

func parseBuild(doc string) (SystemParams, error) {
	s, err := ParseSection([]byte(doc))
	if err != nil {
		return SystemParams{}, err
	}
	return s.Build()
}

func TestYAMLExplicitRounds(t *testing.T) {
	p, err := parseBuild(strings.Replace(appYAML, "    proximity:", "    rounds: [{num_queries: 193}, {num_queries: 88}, {num_queries: 81}]\n    proximity:", 1))
	if err != nil || !p.Equal(mustApp(t, 21)) {
		t.Fatalf("%v %+v", err, p)
	}
	// Explicit rounds that are too weak still build (structurally valid) but fail the security check.
	p, err = parseBuild(strings.Replace(appYAML, "    proximity:", "    rounds:\n      - num_queries: 100\n      - num_queries: 88\n      - num_queries: 81\n    proximity:", 1))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Calculate(p, AppVMBounds.Inputs(p))
	if err := CheckSecurity(s, 100, false); err == nil || !strings.Contains(err.Error(), "whir round 0") {
		t.Fatalf("weak rounds: %v", err)
	}
}

func TestYAMLErrors(t *testing.T) {
	rep := func(old, new string) string {
		if !strings.Contains(appYAML, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(appYAML, old, new, 1)
	}
	cases := []struct{ doc, want string }{
		{rep("  l_skip: 4", "  l_skip: -1"), "line 4: params.l_skip must be ≥ 0"},
		{rep("    k: 4", "    k: -3"), "params.whir.k must be ≥ 1"},
		{rep("    k: 4", "    k: 0"), "params.whir.k must be ≥ 1"},
		{rep("    pow_bits: 18", "    pow_bits: -1"), "params.logup.pow_bits must be ≥ 0"},
		{rep("  l_skip: 4", "  l_skip: four"), `params.l_skip must be an integer, got "four"`},
		{rep("  l_skip: 4", "  l_skip: [4]"), `params.l_skip must be an integer, got a list`},
		{rep("  l_skip: 4", "  l_skip: 99999999999"), `params.l_skip must be ≤ 4294967295`},
		{rep("  l_skip: 4\n", ""), "params.l_skip is required"},
		{rep("  l_skip: 4", "  l_skip:"), "params.l_skip is required"},
		{rep("  l_skip: 4", "  lskip: 4"), "line 4: unknown key params.lskip"},
		{rep("    k: 4", "    k: 4\n    kk: 4"), "line 11: unknown key params.whir.kk"},
		{rep("      kind: unique_decoding", "      kind: unique_decoding\n      extra: 1"), "unknown key params.whir.proximity.extra"},
		{rep("    pow_bits: 18", "    pow_bits: 18\n    foo: 1"), "unknown key params.logup.foo"},
		{rep("    proximity:", "    rounds: [{num_queries: 1, x: 2}]\n    proximity:"), "unknown key params.whir.rounds[].x"},
		{rep("    proximity:", "    rounds: [{num_queries: 0}]\n    proximity:"), "params.whir.rounds[0].num_queries must be ≥ 1"},
		{rep("    proximity:", "    rounds: []\n    proximity:"), "whir.rounds must have at least one round"},
		{rep("    proximity:", "    rounds: 3\n    proximity:"), "params.whir.rounds must be a list"},
		{rep("      kind: unique_decoding", "      kind: best"), `params.whir.proximity.kind "best": must be unique_decoding, split_unique_list or list_decoding`},
		{rep("      kind: unique_decoding", "      kind: [x]"), `params.whir.proximity.kind must be a string`},
		{rep("      kind: unique_decoding", "      kind: list_decoding"), "params.whir.proximity.m is required"},
		{rep("      kind: unique_decoding", "      kind: unique_decoding\n      m: 2"), "params.whir.proximity.m is not used by proximity kind unique_decoding"},
		{rep("      kind: unique_decoding", "      kind: list_decoding\n      m: 2\n      list_start_round: 1"), "list_start_round is not used"},
		{rep("  whir:\n", "  whir: 5\n  w:\n"), "params.whir must be a mapping"},
		{rep("  n_stack: 17", "  n_stack: 30"), "l_skip + n_stack + log_blowup must be ≤ 27 (two-adicity)"},
		{rep("    max_log_final_poly_len: 10", "    max_log_final_poly_len: 21"), "the builder makes no WHIR round"},
		{rep("    mu_pow_bits: 15", "    mu_pow_bits: 31"), "whir.mu_pow_bits must be ≤ 30"},
		{rep("  security_bits: 100", "  security_bits: 1000"), "security_bits must be ≤ 256"},
		{rep("  l_skip: 4", "  l_skip: 4\n  l_skip: 5"), "already defined"},
		{"params: 3\n", "params must be a mapping"},
		{"- a\n", "must be a mapping"},
	}
	for _, c := range cases {
		_, err := parseBuild(c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	for _, doc := range []string{"", "log_level: info\n", "# nothing\n"} {
		if _, err := ParseSection([]byte(doc)); !errors.Is(err, ErrNoParams) {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.yaml")
	os.WriteFile(f, []byte("device: host\n"), 0o600)
	if _, _, err := LoadFile(f); !errors.Is(err, ErrNoParams) {
		t.Errorf("no params: %v", err)
	}
	os.WriteFile(f, []byte(strings.Replace(appYAML, "  w_stack: 2048", "  w_stack: 0", 1)), 0o600)
	if _, _, err := LoadFile(f); err == nil || !strings.Contains(err.Error(), "c.yaml") || !strings.Contains(err.Error(), "params.w_stack must be ≥ 1") {
		t.Errorf("w_stack 0: %v", err)
	}
	if _, _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzParseSection(f *testing.F) {
	f.Add([]byte(appYAML))
	f.Add([]byte("params:\n  whir: {rounds: [{num_queries: 1}], proximity: {kind: list_decoding, m: 1}}\n"))
	f.Add([]byte("params: &a [*a]\n"))
	f.Add([]byte("params:\n  l_skip: !!float 1.5\n  ? [a]\n  : b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSection(data)
		if err != nil {
			return
		}
		p, err := s.Build()
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Build returned invalid params: %v", err)
		}
		_ = p.AppendPostcard(nil)
		_, _ = Calculate(p, AppVMBounds.Inputs(p))
	})
}
