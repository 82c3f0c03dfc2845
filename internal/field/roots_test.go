package field

import "testing"

func TestTwoAdicGeneratorOrder(t *testing.T) {
	for b := 0; b <= TwoAdicity; b++ {
		g := TwoAdicGenerator(b)
		checkCanon(t, "g", g)
		if g.Exp(1<<b) != One {
			t.Fatalf("g_%d^(2^%d) != 1", b, b)
		}
		if b > 0 && g.Exp(1<<(b-1)) == One {
			t.Fatalf("g_%d^(2^%d) = 1: order below 2^%d", b, b-1, b)
		}
		if b > 0 && g.Exp(1<<(b-1)) != Fp(P-1) {
			t.Fatalf("g_%d^(2^%d) != -1", b, b-1)
		}
	}
	// Independent of the table's chaining: an element of order 2^27 = the 2-part of p−1 is a
	// quadratic non-residue (Euler's criterion).
	g := TwoAdicGenerator(TwoAdicity)
	if g.Exp(uint64(P-1)>>1) == One {
		t.Fatal("g_27 is a quadratic residue, cannot have order 2^27")
	}
}

func TestRootsOfUnity(t *testing.T) {
	for b := 0; b <= 12; b++ {
		rs := RootsOfUnity(b)
		if len(rs) != 1<<b {
			t.Fatalf("len(RootsOfUnity(%d)) = %d", b, len(rs))
		}
		g := TwoAdicGenerator(b)
		seen := make(map[Fp]bool, len(rs))
		for i, x := range rs {
			if seen[x] {
				t.Fatalf("RootsOfUnity(%d) repeats %d at %d", b, x, i)
			}
			seen[x] = true
			if x.Exp(1<<b) != One {
				t.Fatalf("RootsOfUnity(%d)[%d] = %d is not a 2^%d-th root of unity", b, i, x, b)
			}
			if i > 0 && x != rs[i-1].Mul(g) {
				t.Fatalf("RootsOfUnity(%d)[%d] != previous·g", b, i)
			}
		}
		if rs[0] != One {
			t.Fatalf("RootsOfUnity(%d)[0] != 1", b)
		}
		// The subgroup of order 2^(b−1) is the even-indexed half.
		if b > 0 {
			half := RootsOfUnity(b - 1)
			for i := range half {
				if half[i] != rs[2*i] {
					t.Fatalf("RootsOfUnity(%d)[%d] != RootsOfUnity(%d)[%d]", b-1, i, b, 2*i)
				}
			}
		}
	}
}

func TestTwoAdicGeneratorPanics(t *testing.T) {
	mustPanic(t, "TwoAdicGenerator(28)", func() { TwoAdicGenerator(28) })
	mustPanic(t, "TwoAdicGenerator(-1)", func() { TwoAdicGenerator(-1) })
	mustPanic(t, "RootsOfUnity(28)", func() { RootsOfUnity(28) })
}
