package field

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// pairs calls f on every pair of edge values and on iterations() random pairs.
func pairs(t *testing.T, f func(a, b Fp)) {
	t.Helper()
	edges := edgeFps()
	for _, a := range edges {
		for _, b := range edges {
			f(a, b)
		}
	}
	r := newRand(t)
	for range iterations() {
		f(randFp(r), randFp(r))
	}
}

func TestFpBinaryOpsVsBig(t *testing.T) {
	pairs(t, func(a, b Fp) {
		A, B := bigOf(a), bigOf(b)
		check := func(name string, got Fp, want *big.Int) {
			t.Helper()
			checkCanon(t, name, got)
			if w := fpOfBig(t, modP(want)); got != w {
				t.Fatalf("%d %s %d = %d, want %d", a, name, b, got, w)
			}
		}
		check("+", a.Add(b), new(big.Int).Add(A, B))
		check("-", a.Sub(b), new(big.Int).Sub(A, B))
		check("*", a.Mul(b), new(big.Int).Mul(A, B))
	})
}

func TestFpUnaryOpsVsBig(t *testing.T) {
	r := newRand(t)
	inv2 := new(big.Int).ModInverse(big.NewInt(2), bigP)
	for _, a := range testFps(r, iterations()) {
		A := bigOf(a)
		check := func(name string, got Fp, want *big.Int) {
			t.Helper()
			checkCanon(t, name, got)
			if w := fpOfBig(t, modP(want)); got != w {
				t.Fatalf("%s(%d) = %d, want %d", name, a, got, w)
			}
		}
		check("Neg", a.Neg(), new(big.Int).Neg(A))
		check("Double", a.Double(), new(big.Int).Lsh(A, 1))
		check("Halve", a.Halve(), new(big.Int).Mul(A, inv2))
		check("Square", a.Square(), new(big.Int).Mul(A, A))
		if a == 0 {
			check("Inverse", a.Inverse(), big.NewInt(0))
		} else {
			check("Inverse", a.Inverse(), new(big.Int).ModInverse(A, bigP))
			if a.Mul(a.Inverse()) != One {
				t.Fatalf("%d·%d^-1 != 1", a, a)
			}
		}
		if a.IsZero() != (a == 0) {
			t.Fatalf("IsZero(%d) wrong", a)
		}
	}
}

func TestFpExpVsBig(t *testing.T) {
	r := newRand(t)
	exps := []uint64{0, 1, 2, 3, 7, 15, uint64(P) - 2, uint64(P) - 1, uint64(P), uint64(P) + 1,
		1 << 27, 1 << 32, math.MaxUint64, math.MaxUint64 - 1}
	n := iterations() / 10
	for i, a := range testFps(r, n) {
		es := exps
		if i >= len(edgeValues) {
			es = []uint64{r.Uint64(), r.Uint64N(1 << 20), exps[r.IntN(len(exps))]}
		}
		for _, e := range es {
			got := a.Exp(e)
			checkCanon(t, "Exp", got)
			want := new(big.Int).Exp(bigOf(a), new(big.Int).SetUint64(e), bigP) // 0^0 = 1 in big too
			if w := fpOfBig(t, want); got != w {
				t.Fatalf("%d^%d = %d, want %d", a, e, got, w)
			}
		}
	}
	if Zero.Exp(0) != One {
		t.Fatal("0^0 != 1")
	}
}

func TestFpConstants(t *testing.T) {
	if InvTwo.Mul(Two) != One || InvTwo != One.Halve() {
		t.Fatal("InvTwo wrong")
	}
	if P != 1<<31-1<<27+1 || (P-1)%(1<<TwoAdicity) != 0 || ((P-1)>>TwoAdicity)%2 == 0 {
		t.Fatal("P or TwoAdicity wrong")
	}
	// Generator generates F*: g^((p−1)/q) ≠ 1 for every prime q | p−1 = 2^27·3·5.
	for _, q := range []uint64{2, 3, 5} {
		if Generator.Exp(uint64(P-1)/q) == One {
			t.Fatalf("Generator^((p-1)/%d) = 1", q)
		}
	}
	if Generator.Exp(uint64(P-1)) != One {
		t.Fatal("Generator^(p-1) != 1")
	}
	if Fp(1234).String() != "1234" || Fp(P-1).Uint32() != P-1 {
		t.Fatal("String/Uint32 wrong")
	}
}

func TestNewVsBig(t *testing.T) {
	r := newRand(t)
	u32 := []uint32{0, 1, P - 1, P, P + 1, 2*P - 1, 2 * P, 2*P + 1, math.MaxUint32, math.MaxUint32 - 1}
	for range iterations() {
		u32 = append(u32, r.Uint32())
	}
	for _, v := range u32 {
		got := New(v)
		checkCanon(t, "New", got)
		if want := v % P; uint32(got) != want {
			t.Fatalf("New(%d) = %d, want %d", v, got, want)
		}
	}
	u64 := []uint64{0, 1, uint64(P) - 1, uint64(P), uint64(P) * uint64(P), math.MaxUint64, math.MaxUint64 - 1, 1 << 63}
	for range iterations() {
		u64 = append(u64, r.Uint64())
	}
	for _, v := range u64 {
		got := NewU64(v)
		checkCanon(t, "NewU64", got)
		want := fpOfBig(t, modP(new(big.Int).SetUint64(v)))
		if got != want {
			t.Fatalf("NewU64(%d) = %d, want %d", v, got, want)
		}
	}
	i64 := []int64{0, 1, -1, -2, int64(P), -int64(P), int64(P) + 1, -int64(P) - 1, int64(P) - 1, -int64(P) + 1,
		math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for range iterations() {
		i64 = append(i64, int64(r.Uint64()), -int64(r.Uint32()))
	}
	for _, v := range i64 {
		got := NewInt(v)
		checkCanon(t, "NewInt", got)
		want := fpOfBig(t, modP(big.NewInt(v))) // big.Int.Mod is Euclidean: result in [0, p)
		if got != want {
			t.Fatalf("NewInt(%d) = %d, want %d", v, got, want)
		}
	}
	if NewInt(-1) != Fp(P-1) || NewInt(-int64(P)) != 0 {
		t.Fatal("NewInt negative edge wrong")
	}
}

func TestFromCanonical(t *testing.T) {
	for _, v := range []uint32{0, 1, P - 1, (P - 1) / 2} {
		got, err := FromCanonical(v)
		if err != nil || uint32(got) != v {
			t.Fatalf("FromCanonical(%d) = %d, %v", v, got, err)
		}
	}
	for _, v := range []uint32{P, P + 1, 2 * P, math.MaxUint32} {
		got, err := FromCanonical(v)
		var re *RangeError
		if err == nil || !errors.As(err, &re) || re.Value != v || got != 0 {
			t.Fatalf("FromCanonical(%d) = %d, %v; want 0 and *RangeError{%d}", v, got, err, v)
		}
		if re.Error() == "" {
			t.Fatal("empty RangeError message")
		}
	}
}

func TestFpFieldLaws(t *testing.T) {
	r := newRand(t)
	edges := edgeFps()
	pick := func() Fp {
		if r.IntN(4) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return randFp(r)
	}
	for range iterations() {
		a, b, c := pick(), pick(), pick()
		if a.Add(b) != b.Add(a) || a.Mul(b) != b.Mul(a) {
			t.Fatalf("not commutative: %d, %d", a, b)
		}
		if a.Add(b).Add(c) != a.Add(b.Add(c)) || a.Mul(b).Mul(c) != a.Mul(b.Mul(c)) {
			t.Fatalf("not associative: %d, %d, %d", a, b, c)
		}
		if a.Mul(b.Add(c)) != a.Mul(b).Add(a.Mul(c)) {
			t.Fatalf("not distributive: %d, %d, %d", a, b, c)
		}
		if a.Sub(b).Add(b) != a || a.Add(a.Neg()) != 0 || a.Halve().Double() != a {
			t.Fatalf("inverse laws fail for %d, %d", a, b)
		}
	}
}

func TestBatchInverse(t *testing.T) {
	r := newRand(t)
	for _, n := range []int{0, 1, 2, 3, 17, 1000} {
		src := make([]Fp, n)
		for i := range src {
			src[i] = randFp(r)
			if r.IntN(5) == 0 {
				src[i] = 0 // zeros inside
			}
		}
		if n > 2 {
			src[0], src[n-1] = 0, 0
		}
		dst := make([]Fp, n)
		BatchInverse(dst, src)
		for i, x := range src {
			if dst[i] != x.Inverse() {
				t.Fatalf("n=%d: BatchInverse[%d] of %d = %d, want %d", n, i, x, dst[i], x.Inverse())
			}
		}
		// In place.
		inPlace := append([]Fp(nil), src...)
		BatchInverse(inPlace, inPlace)
		for i := range src {
			if inPlace[i] != dst[i] {
				t.Fatalf("n=%d: in-place BatchInverse differs at %d", n, i)
			}
		}
	}
	// All zeros.
	z := make([]Fp, 5)
	BatchInverse(z, z)
	for _, x := range z {
		if x != 0 {
			t.Fatal("BatchInverse of zeros not zero")
		}
	}
	mustPanic(t, "BatchInverse length mismatch", func() { BatchInverse(make([]Fp, 2), make([]Fp, 3)) })
}

func TestPowers(t *testing.T) {
	r := newRand(t)
	for _, a := range append(edgeFps(), randFp(r), randFp(r)) {
		for _, n := range []int{0, 1, 2, 50} {
			pw := Powers(a, n)
			if len(pw) != n {
				t.Fatalf("len(Powers(%d, %d)) = %d", a, n, len(pw))
			}
			for i, x := range pw {
				want := fpOfBig(t, new(big.Int).Exp(bigOf(a), big.NewInt(int64(i)), bigP))
				if x != want {
					t.Fatalf("Powers(%d)[%d] = %d, want %d", a, i, x, want)
				}
			}
		}
	}
}

func TestReduceBounds(t *testing.T) {
	// reduce is exact up to reduceMax; reduce4 for every uint64.
	r := newRand(t)
	big64 := func(x uint64) uint32 {
		return uint32(new(big.Int).SetUint64(x).Mod(new(big.Int).SetUint64(x), bigP).Uint64())
	}
	xs := []uint64{0, 1, uint64(P) - 1, uint64(P), reduceMax, reduceMax - 1, reduceMax - uint64(P),
		3 * uint64(P-1) * uint64(P-1), 3*uint64(P-1)*uint64(P-1) + 11*uint64(P-1), uint64(P-1) * uint64(P-1)}
	for range iterations() {
		xs = append(xs, r.Uint64N(reduceMax+1))
	}
	for _, x := range xs {
		if got, want := reduce(x), big64(x); got != want {
			t.Fatalf("reduce(%d) = %d, want %d", x, got, want)
		}
		if got, want := reduce4(x), big64(x); got != want {
			t.Fatalf("reduce4(%d) = %d, want %d", x, got, want)
		}
	}
	ys := []uint64{math.MaxUint64, math.MaxUint64 - 1, 4 * uint64(P-1) * uint64(P-1), reduceMax + 1, 1 << 63}
	for range iterations() {
		ys = append(ys, r.Uint64())
	}
	// Multiples of p and their neighbours near the top, where the quotient estimate is off.
	for k := uint64(math.MaxUint64) / uint64(P); k > uint64(math.MaxUint64)/uint64(P)-1000; k-- {
		ys = append(ys, k*uint64(P), k*uint64(P)-1, k*uint64(P)+uint64(P)-1)
	}
	for _, y := range ys {
		if got, want := reduce4(y), big64(y); got != want {
			t.Fatalf("reduce4(%d) = %d, want %d", y, got, want)
		}
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}
