package field

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

var bigP = new(big.Int).SetUint64(uint64(P))

// edgeValues are the boundary values every property is crossed with.
var edgeValues = []uint32{
	0, 1, 2, P - 1, P - 2, (P - 1) / 2, (P + 1) / 2,
	1 << 27, 1<<27 - 1, 1<<27 + 1, 1 << 30, 1<<31 - 1<<27, 15, 11, 31,
}

func edgeFps() []Fp {
	out := make([]Fp, len(edgeValues))
	for i, v := range edgeValues {
		out[i] = Fp(v)
	}
	return out
}

// iterations returns the random-case count: small under -short, larger otherwise.
func iterations() int {
	if testing.Short() {
		return 2_000
	}
	return 50_000
}

func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewPCG(0x6d65_74616c, 0x70726f7665))
}

// randFp returns a uniform element, or (one time in eight) an edge value.
func randFp(r *rand.Rand) Fp {
	if r.IntN(8) == 0 {
		return Fp(edgeValues[r.IntN(len(edgeValues))])
	}
	return Fp(r.Uint32N(P))
}

func randFp4(r *rand.Rand) Fp4 {
	return Fp4{randFp(r), randFp(r), randFp(r), randFp(r)}
}

// testFps returns the edge values followed by n random elements.
func testFps(r *rand.Rand, n int) []Fp {
	out := edgeFps()
	for range n {
		out = append(out, randFp(r))
	}
	return out
}

func bigOf(a Fp) *big.Int { return new(big.Int).SetUint64(uint64(a)) }

func modP(x *big.Int) *big.Int { return x.Mod(x, bigP) }

// fpOfBig converts a reduced big.Int back.
func fpOfBig(t testing.TB, x *big.Int) Fp {
	t.Helper()
	if x.Sign() < 0 || x.Cmp(bigP) >= 0 {
		t.Fatalf("big value %v not reduced", x)
	}
	return Fp(x.Uint64())
}

func checkCanon(t testing.TB, what string, a Fp) {
	t.Helper()
	if uint32(a) >= P {
		t.Fatalf("%s = %d is not canonical", what, uint32(a))
	}
}

func checkCanon4(t testing.TB, what string, a Fp4) {
	t.Helper()
	for i, c := range a {
		if uint32(c) >= P {
			t.Fatalf("%s coefficient %d = %d is not canonical", what, i, uint32(c))
		}
	}
}

// bigFp4Mul is the schoolbook product of two polynomials of degree ≤ 3, reduced mod X^4 − 11
// and mod p, entirely in big.Int.
func bigFp4Mul(a, b Fp4) Fp4 {
	var prod [7]*big.Int
	for i := range prod {
		prod[i] = new(big.Int)
	}
	for i := range 4 {
		for j := range 4 {
			prod[i+j].Add(prod[i+j], new(big.Int).Mul(bigOf(a[i]), bigOf(b[j])))
		}
	}
	// X^k = 11·X^(k−4) for k = 6, 5, 4.
	for k := 6; k >= 4; k-- {
		prod[k-4].Add(prod[k-4], new(big.Int).Mul(big.NewInt(11), prod[k]))
	}
	var r Fp4
	for i := range 4 {
		r[i] = Fp(modP(prod[i]).Uint64())
	}
	return r
}
