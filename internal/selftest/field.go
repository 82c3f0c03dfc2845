package selftest

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/field"
)

func fieldChecks() []Check {
	return []Check{
		{Name: "field/fp4-kat", Run: checkFp4KAT},
		{Name: "field/fp-vs-big", Run: checkFpVsBig},
		{Name: "field/fp-laws", Run: checkFpLaws},
		{Name: "field/fp4-mul-vs-big", Run: checkFp4MulVsBig},
		{Name: "field/fp4-laws", Run: checkFp4Laws},
		{Name: "field/fp4-inverse", Run: checkFp4Inverse},
		{Name: "field/two-adic", Run: checkTwoAdic},
		{Name: "field/batch-inverse", Run: checkBatchInverse},
		{Name: "field/encoding", Run: checkFieldEncoding},
	}
}

// fieldSamples is the number of random cases per randomized field check.
const fieldSamples = 3000

var bigP = new(big.Int).SetUint64(uint64(field.P))

// fieldEdges are boundary values mixed into the random samples.
var fieldEdges = []field.Fp{0, 1, 2, field.Fp(field.P - 1), field.Fp(field.P - 2), field.Fp((field.P - 1) / 2),
	field.InvTwo, 1 << 27, 1<<27 - 1, 1<<27 + 1, 1 << 30, 15, 11, 31}

func fieldRand() *rand.Rand { return rand.New(rand.NewPCG(0x5e1f7e57, 0xf1e1d)) }

// randFp returns a uniform element, or (one time in eight) an edge value.
func randFp(r *rand.Rand) field.Fp {
	if r.IntN(8) == 0 {
		return fieldEdges[r.IntN(len(fieldEdges))]
	}
	return field.Fp(r.Uint32N(field.P))
}

func randFp4(r *rand.Rand) field.Fp4 {
	return field.Fp4{randFp(r), randFp(r), randFp(r), randFp(r)}
}

func toBig(a field.Fp) *big.Int { return new(big.Int).SetUint64(uint64(a)) }

// checkFp4KAT: extension multiplication and inverse against the spec's vectors
// (poseidon2_babybear16_vectors.txt §E2).
func checkFp4KAT() error {
	a := field.Fp4{1, 2, 3, 4}
	if got, want := a.Mul(field.Fp4{5, 6, 7, 8}), (field.Fp4{676, 588, 386, 60}); got != want {
		return fmt.Errorf("[1 2 3 4]·[5 6 7 8] = %v, want %v", got, want)
	}
	if got, want := a.Inverse(), (field.Fp4{1587469345, 920666518, 1160282443, 647153706}); got != want {
		return fmt.Errorf("[1 2 3 4]^-1 = %v, want %v", got, want)
	}
	return nil
}

// checkFpVsBig: Mul, Add, Sub and Inverse against math/big on random and edge values.
func checkFpVsBig() error {
	r := fieldRand()
	want, A, B := new(big.Int), new(big.Int), new(big.Int)
	for i := range fieldSamples {
		a, b := randFp(r), randFp(r)
		if i < len(fieldEdges)*len(fieldEdges) {
			a, b = fieldEdges[i/len(fieldEdges)], fieldEdges[i%len(fieldEdges)]
		}
		A.SetUint64(uint64(a))
		B.SetUint64(uint64(b))
		if got := a.Mul(b); uint64(got) != want.Mod(want.Mul(A, B), bigP).Uint64() {
			return fmt.Errorf("%d·%d = %d, want %v", a, b, got, want)
		}
		if got := a.Add(b); uint64(got) != want.Mod(want.Add(A, B), bigP).Uint64() {
			return fmt.Errorf("%d+%d = %d, want %v", a, b, got, want)
		}
		if got := a.Sub(b); uint64(got) != want.Mod(want.Sub(A, B), bigP).Uint64() {
			return fmt.Errorf("%d-%d = %d, want %v", a, b, got, want)
		}
		if i%4 == 0 { // inversion is the slow part; a quarter of the samples is plenty
			inv := a.Inverse()
			if a == 0 {
				if inv != 0 {
					return fmt.Errorf("0^-1 = %d, want 0", inv)
				}
			} else if uint64(inv) != want.ModInverse(A, bigP).Uint64() {
				return fmt.Errorf("%d^-1 = %d, want %v", a, inv, want)
			}
		}
	}
	return nil
}

// checkFpLaws: associativity, commutativity, distributivity and inverse laws in Fp.
func checkFpLaws() error {
	r := fieldRand()
	for range fieldSamples {
		a, b, c := randFp(r), randFp(r), randFp(r)
		switch {
		case a.Add(b) != b.Add(a) || a.Mul(b) != b.Mul(a):
			return fmt.Errorf("commutativity fails for %d, %d", a, b)
		case a.Add(b).Add(c) != a.Add(b.Add(c)) || a.Mul(b).Mul(c) != a.Mul(b.Mul(c)):
			return fmt.Errorf("associativity fails for %d, %d, %d", a, b, c)
		case a.Mul(b.Add(c)) != a.Mul(b).Add(a.Mul(c)):
			return fmt.Errorf("distributivity fails for %d, %d, %d", a, b, c)
		case a.Sub(b).Add(b) != a || a.Add(a.Neg()) != 0 || a.Halve().Double() != a:
			return fmt.Errorf("additive inverse / halving fails for %d, %d", a, b)
		}
	}
	return nil
}

// checkFp4MulVsBig: Fp4 multiplication against the schoolbook product mod X^4 − 11 in math/big.
func checkFp4MulVsBig() error {
	r := fieldRand()
	var prod [7]big.Int
	t := new(big.Int)
	for i := range fieldSamples / 4 {
		a, b := randFp4(r), randFp4(r)
		m := field.Fp(field.P - 1)
		switch i {
		case 0:
			a, b = field.Fp4{m, m, m, m}, field.Fp4{m, m, m, m}
		case 1:
			// Coefficient 3 is a sum of four products above 1.38e19 and ≡ −1 mod p: the case where
			// a Barrett quotient estimate overshoots by one.
			a, b = field.Fp4{m, m, m, 2013265918}, field.Fp4{1342177282, m, m, m}
		}
		for k := range prod {
			prod[k].SetInt64(0)
		}
		for x := range 4 {
			for y := range 4 {
				prod[x+y].Add(&prod[x+y], t.Mul(toBig(a[x]), toBig(b[y])))
			}
		}
		for k := 6; k >= 4; k-- {
			prod[k-4].Add(&prod[k-4], t.Mul(big.NewInt(int64(field.W)), &prod[k]))
		}
		got := a.Mul(b)
		for k := range 4 {
			if uint64(got[k]) != t.Mod(&prod[k], bigP).Uint64() {
				return fmt.Errorf("%v·%v = %v: coefficient %d should be %v", a, b, got, k, t)
			}
		}
	}
	return nil
}

// checkFp4Laws: ring laws in Fp4, and X^4 = 11.
func checkFp4Laws() error {
	x := field.Fp4{0, 1, 0, 0}
	if got := x.Mul(x).Mul(x).Mul(x); got != field.Lift(field.W) {
		return fmt.Errorf("X^4 = %v, want [11 0 0 0]", got)
	}
	r := fieldRand()
	for range fieldSamples / 10 {
		a, b, c := randFp4(r), randFp4(r), randFp4(r)
		switch {
		case a.Mul(b) != b.Mul(a):
			return fmt.Errorf("commutativity fails for %v, %v", a, b)
		case a.Mul(b).Mul(c) != a.Mul(b.Mul(c)):
			return fmt.Errorf("associativity fails for %v, %v, %v", a, b, c)
		case a.Mul(b.Add(c)) != a.Mul(b).Add(a.Mul(c)):
			return fmt.Errorf("distributivity fails for %v, %v, %v", a, b, c)
		}
	}
	return nil
}

// checkFp4Inverse: a·a^−1 = 1 and (a^−1)^−1 = a for random non-zero a; 0 ↦ 0.
func checkFp4Inverse() error {
	if inv := (field.Fp4{}).Inverse(); !inv.IsZero() {
		return fmt.Errorf("0^-1 = %v, want 0", inv)
	}
	r := fieldRand()
	for range fieldSamples / 10 {
		a := randFp4(r)
		if a.IsZero() {
			continue
		}
		inv := a.Inverse()
		if got := a.Mul(inv); got != field.Fp4One {
			return fmt.Errorf("%v·%v^-1 = %v, want 1", a, a, got)
		}
		if inv.Inverse() != a {
			return fmt.Errorf("(%v^-1)^-1 = %v", a, inv.Inverse())
		}
	}
	return nil
}

// checkTwoAdic: g_b has order exactly 2^b, g_b² = g_{b−1}, and RootsOfUnity is the subgroup.
func checkTwoAdic() error {
	for b := 0; b <= field.TwoAdicity; b++ {
		g := field.TwoAdicGenerator(b)
		if g.Exp(1<<b) != field.One {
			return fmt.Errorf("g_%d^(2^%d) = %d, want 1", b, b, g.Exp(1<<b))
		}
		if b > 0 {
			if h := g.Exp(1 << (b - 1)); h != field.Fp(field.P-1) {
				return fmt.Errorf("g_%d^(2^%d) = %d, want p-1 (order not exactly 2^%d)", b, b-1, h, b)
			}
			if g.Square() != field.TwoAdicGenerator(b-1) {
				return fmt.Errorf("g_%d^2 != g_%d", b, b-1)
			}
		}
	}
	const bits = 10
	rs := field.RootsOfUnity(bits)
	if len(rs) != 1<<bits {
		return fmt.Errorf("len(RootsOfUnity(%d)) = %d", bits, len(rs))
	}
	seen := make(map[field.Fp]bool, len(rs))
	for i, x := range rs {
		if seen[x] || x.Exp(1<<bits) != field.One {
			return fmt.Errorf("RootsOfUnity(%d)[%d] = %d is repeated or not a root of unity", bits, i, x)
		}
		seen[x] = true
	}
	return nil
}

// checkBatchInverse: BatchInverse and BatchInverseFp4 (with zeros inside) agree with single inverses.
func checkBatchInverse() error {
	r := fieldRand()
	src := make([]field.Fp, 1000)
	src4 := make([]field.Fp4, 200)
	for i := range src {
		if i%7 != 3 {
			src[i] = randFp(r)
		}
	}
	for i := range src4 {
		if i%7 != 3 {
			src4[i] = randFp4(r)
		}
	}
	dst := make([]field.Fp, len(src))
	field.BatchInverse(dst, src)
	for i, x := range src {
		if dst[i] != x.Inverse() {
			return fmt.Errorf("BatchInverse[%d] of %d = %d, want %d", i, x, dst[i], x.Inverse())
		}
	}
	dst4 := make([]field.Fp4, len(src4))
	field.BatchInverseFp4(dst4, src4)
	for i, x := range src4 {
		if dst4[i] != x.Inverse() {
			return fmt.Errorf("BatchInverseFp4[%d] of %v = %v, want %v", i, x, dst4[i], x.Inverse())
		}
	}
	return nil
}

// checkFieldEncoding: round trips, and values ≥ p are rejected with a *RangeError.
func checkFieldEncoding() error {
	r := fieldRand()
	for range 100 {
		a := randFp4(r)
		buf := field.AppendFp4(nil, a)
		if got, err := field.DecodeFp4(buf); err != nil || got != a {
			return fmt.Errorf("DecodeFp4(AppendFp4(%v)) = %v, %v", a, got, err)
		}
		if got, err := field.DecodeFpSlice(buf); err != nil || len(got) != 4 || got[3] != a[3] {
			return fmt.Errorf("DecodeFpSlice(AppendFp4(%v)) = %v, %v", a, got, err)
		}
	}
	for _, v := range []uint32{field.P, field.P + 1, 0xFFFFFFFF} {
		b := []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
		var re *field.RangeError
		if _, err := field.DecodeFp(b); !errors.As(err, &re) || re.Value != v {
			return fmt.Errorf("DecodeFp(%d): error %v, want *RangeError", v, err)
		}
		if _, err := field.DecodeFp4(append(b, make([]byte, 12)...)); !errors.As(err, &re) {
			return fmt.Errorf("DecodeFp4 with coefficient %d: error %v, want *RangeError", v, err)
		}
		if _, err := field.DecodeFpSlice(append(make([]byte, 8), b...)); !errors.As(err, &re) {
			return fmt.Errorf("DecodeFpSlice with element %d: error %v, want *RangeError", v, err)
		}
	}
	if _, err := field.DecodeFp([]byte{1, 2, 3}); err == nil {
		return errors.New("DecodeFp of 3 bytes: no error")
	}
	return nil
}
