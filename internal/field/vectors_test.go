package field

import "testing"

// Vectors from the project spec's poseidon2_babybear16_vectors.txt, section E2
// (derived by the spec author's independent model; see testdata provenance in that file).
func TestFp4SpecVectors(t *testing.T) {
	a := Fp4{1, 2, 3, 4}
	if got, want := a.Mul(Fp4{5, 6, 7, 8}), (Fp4{676, 588, 386, 60}); got != want {
		t.Fatalf("mul = %v, want %v", got, want)
	}
	if got, want := a.Inverse(), (Fp4{1587469345, 920666518, 1160282443, 647153706}); got != want {
		t.Fatalf("inv = %v, want %v", got, want)
	}
}

func TestTwoAdicTableConsistent(t *testing.T) {
	for b := 1; b <= TwoAdicity; b++ {
		if TwoAdicGenerator(b).Square() != TwoAdicGenerator(b-1) {
			t.Fatalf("g_%d^2 != g_%d", b, b-1)
		}
	}
	if TwoAdicGenerator(0) != One || TwoAdicGenerator(1) != Fp(P-1) {
		t.Fatal("g_0 or g_1 wrong")
	}
}
