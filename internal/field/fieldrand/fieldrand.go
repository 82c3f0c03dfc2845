// Package fieldrand draws random field elements with the edge values mixed in, for the
// self-test's checks and for tests that compare an implementation with a reference.
package fieldrand

import (
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/field"
)

// Edges are the values Fp mixes in: 0, 1 and p−1.
var Edges = []field.Fp{0, 1, field.Fp(field.P - 1)}

// Fp returns an edge value one time in eight for each of them (0, 1, p−1), else a uniform
// element of [0, p).
func Fp(r *rand.Rand) field.Fp {
	if i := r.IntN(8); i < len(Edges) {
		return Edges[i]
	}
	return field.Fp(r.Uint32N(field.P))
}

// Fps returns n elements drawn with Fp.
func Fps(r *rand.Rand, n int) []field.Fp {
	out := make([]field.Fp, n)
	for i := range out {
		out[i] = Fp(r)
	}
	return out
}

// Fp4 returns an extension element whose four coefficients are drawn with Fp.
func Fp4(r *rand.Rand) field.Fp4 {
	return field.Fp4{Fp(r), Fp(r), Fp(r), Fp(r)}
}
