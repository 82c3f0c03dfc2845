package prove

import "testing"

func TestDefaultOutput(t *testing.T) {
	for in, want := range map[string]string{
		"keccakf.bin": "keccakf.proof", "dir/k16.trace": "dir/k16.proof", "noext": "noext.proof",
		"a.b/c": "a.b/c.proof", ".hidden": ".hidden.proof",
	} {
		if got := DefaultOutput(in); got != want {
			t.Errorf("DefaultOutput(%q) = %q, want %q", in, got, want)
		}
	}
}
