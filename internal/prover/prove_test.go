package prover

import "testing"

func TestDefaultProofOutput(t *testing.T) {
	for in, want := range map[string]string{
		"keccakf.bin": "keccakf.proof", "dir/k16.trace": "dir/k16.proof", "noext": "noext.proof",
		"a.b/c": "a.b/c.proof", ".hidden": ".hidden.proof",
	} {
		if got := DefaultProofOutput(in); got != want {
			t.Errorf("DefaultProofOutput(%q) = %q, want %q", in, got, want)
		}
	}
}
