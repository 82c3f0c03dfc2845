package cpuref

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6d65_74616c)) }

func randFp(r *rand.Rand) field.Fp { return field.Fp(r.Uint32N(field.P)) }

func randVec(r *rand.Rand, n int) []field.Fp {
	v := make([]field.Fp, n)
	for i := range v {
		v[i] = randFp(r)
	}
	return v
}

func randMatrix(r *rand.Rand, width, height int) air.Matrix {
	return air.Matrix{Values: randVec(r, width*height), Width: width, Height: height}
}

func eqVec(t *testing.T, what string, got, want []field.Fp) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: [%d] = %d, want %d", what, i, got[i], want[i])
		}
	}
}

func fps(vs ...uint32) []field.Fp {
	out := make([]field.Fp, len(vs))
	for i, v := range vs {
		out[i] = field.Fp(v)
	}
	return out
}
