package field

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// testFp4s returns structured edge elements (each edge value in each slot, all-edge vectors)
// followed by n random elements.
func testFp4s(r *rand.Rand, n int) []Fp4 {
	var out []Fp4
	for _, v := range edgeFps() {
		out = append(out, Fp4{v, 0, 0, 0}, Fp4{0, v, 0, 0}, Fp4{0, 0, v, 0}, Fp4{0, 0, 0, v}, Fp4{v, v, v, v})
	}
	out = append(out, Fp4{Fp(P - 1), Fp(P - 1), Fp(P - 1), Fp(P - 1)}, Fp4{1, 2, 3, 4})
	for range n {
		out = append(out, randFp4(r))
	}
	return out
}

// fp4Pairs calls f on pairs drawn from testFp4s: the structured elements crossed with each
// other (sampled) and random pairs.
func fp4Pairs(t *testing.T, f func(a, b Fp4)) {
	t.Helper()
	r := newRand(t)
	xs := testFp4s(r, 0)
	for _, a := range xs {
		for _, b := range xs {
			f(a, b)
		}
	}
	for range iterations() / 4 {
		a, b := randFp4(r), randFp4(r)
		if r.IntN(4) == 0 {
			b = xs[r.IntN(len(xs))]
		}
		f(a, b)
	}
}

func TestFp4MulVsBig(t *testing.T) {
	fp4Pairs(t, func(a, b Fp4) {
		got := a.Mul(b)
		checkCanon4(t, "Mul", got)
		if want := bigFp4Mul(a, b); got != want {
			t.Fatalf("%v · %v = %v, want %v", a, b, got, want)
		}
	})
}

func TestFp4CoefficientwiseVsBase(t *testing.T) {
	fp4Pairs(t, func(a, b Fp4) {
		add, sub, neg, half, dbl := a.Add(b), a.Sub(b), a.Neg(), a.Halve(), a.Double()
		mb, ab := a.MulBase(b[1]), a.AddBase(b[2])
		for _, x := range []Fp4{add, sub, neg, half, dbl, mb, ab} {
			checkCanon4(t, "op", x)
		}
		for i := range 4 {
			A, B := bigOf(a[i]), bigOf(b[i])
			eq := func(name string, got Fp, want *big.Int) {
				t.Helper()
				if w := fpOfBig(t, modP(want)); got != w {
					t.Fatalf("%s(%v, %v)[%d] = %d, want %d", name, a, b, i, got, w)
				}
			}
			eq("Add", add[i], new(big.Int).Add(A, B))
			eq("Sub", sub[i], new(big.Int).Sub(A, B))
			eq("Neg", neg[i], new(big.Int).Neg(A))
			eq("Double", dbl[i], new(big.Int).Add(A, A))
			eq("Halve", half[i], new(big.Int).Mul(A, big.NewInt(int64(InvTwo))))
			eq("MulBase", mb[i], new(big.Int).Mul(A, bigOf(b[1])))
			wantAB := new(big.Int).Set(A)
			if i == 0 {
				wantAB.Add(wantAB, bigOf(b[2]))
			}
			eq("AddBase", ab[i], wantAB)
		}
		// MulBase and AddBase agree with the embedded operation.
		if mb != a.Mul(Lift(b[1])) || ab != a.Add(Lift(b[2])) {
			t.Fatalf("MulBase/AddBase disagree with Lift for %v, %v", a, b)
		}
	})
}

func TestFp4SquareExp(t *testing.T) {
	r := newRand(t)
	for i, a := range testFp4s(r, iterations()/50) {
		if a.Square() != a.Mul(a) {
			t.Fatalf("Square(%v) != a·a", a)
		}
		// Exp vs repeated Mul for small exponents.
		acc := Fp4One
		for e := range uint64(20) {
			if got := a.Exp(e); got != acc {
				t.Fatalf("%v^%d = %v, want %v", a, e, got, acc)
			}
			acc = acc.Mul(a)
		}
		if i%8 != 0 {
			continue
		}
		// Larger exponents: a^(e1+e2) = a^e1 · a^e2, and Frobenius-free checks of the group order.
		e1, e2 := r.Uint64N(1<<40), r.Uint64N(1<<40)
		if a.Exp(e1+e2) != a.Exp(e1).Mul(a.Exp(e2)) {
			t.Fatalf("%v^(%d+%d) != product", a, e1, e2)
		}
		if !a.IsZero() {
			// |Fp4*| = p^4 − 1 = (p−1)(p+1)(p²+1); a^(p^4−1) = 1, computed as nested Exp.
			x := a.Exp(uint64(P) - 1).Exp(uint64(P) + 1).Exp(uint64(P)*uint64(P) + 1)
			if x != Fp4One {
				t.Fatalf("%v^(p^4-1) = %v", a, x)
			}
		}
	}
	if (Fp4{}).Exp(0) != Fp4One {
		t.Fatal("0^0 != 1")
	}
}

func TestFp4Inverse(t *testing.T) {
	if !(Fp4{}).Inverse().IsZero() {
		t.Fatal("0^-1 != 0")
	}
	r := newRand(t)
	for _, a := range testFp4s(r, iterations()/4) {
		inv := a.Inverse()
		checkCanon4(t, "Inverse", inv)
		if a.IsZero() {
			continue
		}
		if got := a.Mul(inv); got != Fp4One {
			t.Fatalf("%v · %v^-1 = %v", a, a, got)
		}
		if inv.Inverse() != a {
			t.Fatalf("(%v^-1)^-1 != a", a)
		}
		// Base-field elements invert as in Fp.
		if a[1] == 0 && a[2] == 0 && a[3] == 0 && inv != Lift(a[0].Inverse()) {
			t.Fatalf("Inverse(Lift(%d)) = %v", a[0], inv)
		}
	}
}

func TestFp4FieldLaws(t *testing.T) {
	r := newRand(t)
	xs := testFp4s(r, 0)
	pick := func() Fp4 {
		if r.IntN(4) == 0 {
			return xs[r.IntN(len(xs))]
		}
		return randFp4(r)
	}
	for range iterations() / 4 {
		a, b, c := pick(), pick(), pick()
		if a.Add(b) != b.Add(a) || a.Mul(b) != b.Mul(a) {
			t.Fatalf("not commutative: %v, %v", a, b)
		}
		if a.Add(b).Add(c) != a.Add(b.Add(c)) || a.Mul(b).Mul(c) != a.Mul(b.Mul(c)) {
			t.Fatalf("not associative: %v, %v, %v", a, b, c)
		}
		if a.Mul(b.Add(c)) != a.Mul(b).Add(a.Mul(c)) {
			t.Fatalf("not distributive: %v, %v, %v", a, b, c)
		}
		if a.Sub(b).Add(b) != a || !a.Add(a.Neg()).IsZero() || a.Halve().Double() != a {
			t.Fatalf("additive inverse laws fail for %v, %v", a, b)
		}
		if a.Mul(Fp4One) != a || !a.Mul(Fp4Zero).IsZero() {
			t.Fatalf("identity laws fail for %v", a)
		}
	}
	// X^4 = 11.
	x := Fp4{0, 1, 0, 0}
	if got := x.Mul(x).Mul(x).Mul(x); got != Lift(W) {
		t.Fatalf("X^4 = %v, want 11", got)
	}
}

func TestBatchInverseFp4(t *testing.T) {
	r := newRand(t)
	for _, n := range []int{0, 1, 2, 5, 300} {
		src := make([]Fp4, n)
		for i := range src {
			if r.IntN(5) != 0 {
				src[i] = randFp4(r)
			}
		}
		if n > 2 {
			src[0], src[n-1] = Fp4{}, Fp4{}
		}
		dst := make([]Fp4, n)
		BatchInverseFp4(dst, src)
		for i, x := range src {
			if dst[i] != x.Inverse() {
				t.Fatalf("n=%d: BatchInverseFp4[%d] of %v = %v, want %v", n, i, x, dst[i], x.Inverse())
			}
		}
		inPlace := append([]Fp4(nil), src...)
		BatchInverseFp4(inPlace, inPlace)
		for i := range src {
			if inPlace[i] != dst[i] {
				t.Fatalf("n=%d: in-place BatchInverseFp4 differs at %d", n, i)
			}
		}
	}
	mustPanic(t, "BatchInverseFp4 length mismatch", func() { BatchInverseFp4(make([]Fp4, 1), nil) })
}

func TestPowersFp4(t *testing.T) {
	r := newRand(t)
	for _, a := range append(testFp4s(r, 3)[:10], randFp4(r)) {
		for _, n := range []int{0, 1, 2, 40, 127, 128, 129, 135, 1000, 3182} { // the chained form from 128 on
			pw := PowersFp4(a, n)
			if len(pw) != n {
				t.Fatalf("len(PowersFp4(%v, %d)) = %d", a, n, len(pw))
			}
			acc := Fp4One
			for i, x := range pw {
				if x != acc || x != a.Exp(uint64(i)) {
					t.Fatalf("PowersFp4(%v)[%d] = %v, want %v", a, i, x, acc)
				}
				acc = bigFp4Mul(acc, a)
			}
		}
	}
}

func TestFp4Misc(t *testing.T) {
	if s := (Fp4{1, 2, 3, Fp(P - 1)}).String(); s != "[1 2 3 2013265920]" {
		t.Fatalf("String = %q", s)
	}
	if Lift(5) != (Fp4{5, 0, 0, 0}) || !Fp4Zero.IsZero() || Fp4One.IsZero() || (Fp4{0, 0, 0, 1}).IsZero() {
		t.Fatal("Lift/IsZero wrong")
	}
}

// fp4HardCases returns pairs whose coefficient r3 = a0b3 + a1b2 + a2b1 + a3b0 (four products,
// above reduceMax) is ≡ −1 mod p: exactly where a plain Barrett quotient estimate overshoots.
// Random inputs essentially never hit this.
func fp4HardCases(t testing.TB) [][2]Fp4 {
	m1 := Fp(P - 1)
	var out [][2]Fp4
	for a3 := Fp(P - 1); len(out) < 8; a3-- {
		// a0b3 + a1b2 + a2b1 = 3(p−1)² ≡ 3, so we need a3·b0 ≡ −4.
		b0 := NewInt(-4).Mul(a3.Inverse())
		if x := 3*uint64(m1)*uint64(m1) + uint64(a3)*uint64(b0); x > reduceMax && x%uint64(P) == uint64(P-1) {
			out = append(out, [2]Fp4{{m1, m1, m1, a3}, {b0, m1, m1, m1}})
		}
	}
	return out
}

func TestFp4MulHardCases(t *testing.T) {
	for _, c := range fp4HardCases(t) {
		a, b := c[0], c[1]
		if got, want := a.Mul(b), bigFp4Mul(a, b); got != want {
			t.Fatalf("%v · %v = %v, want %v", a, b, got, want)
		}
		if got, want := b.Mul(a), bigFp4Mul(a, b); got != want {
			t.Fatalf("%v · %v = %v, want %v", b, a, got, want)
		}
	}
}
