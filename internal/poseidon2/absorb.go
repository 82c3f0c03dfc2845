package poseidon2

import "github.com/metalprove/metalprove/internal/field"

// Absorber is an implementation of Absorb for long inputs (the host device's SIMD permutation of
// one state: internal/kernels.HostAbsorber). It must return exactly what Absorb does. It is
// passed explicitly to what may use it (HashSliceWith, transcript.NewWith); nothing here holds
// one, so the reference and the verifier stay pure Go unless given one.
type Absorber func(state *[Width]field.Fp, idx int, data []field.Fp) int

// Absorb is the duplex sponge's absorb of data (the transcript's observe, once per element):
// state[idx] ← x for each x in turn, and after the 8th pending element the state is permuted and
// idx is 0 again. idx must be in [0, Rate); Absorb returns the final idx.
func Absorb(state *[Width]field.Fp, idx int, data []field.Fp) int {
	for _, x := range data {
		state[idx] = x
		if idx++; idx == Rate {
			Permute(state)
			idx = 0
		}
	}
	return idx
}

// AbsorbMin is the shortest input worth a call of an Absorber (a cgo call costs about a tenth of
// a permutation).
const AbsorbMin = 2 * Rate

// AbsorbWith is Absorb through a (nil: Absorb itself) for inputs of at least AbsorbMin.
func AbsorbWith(a Absorber, state *[Width]field.Fp, idx int, data []field.Fp) int {
	if a != nil && len(data) >= AbsorbMin {
		return a(state, idx, data)
	}
	return Absorb(state, idx, data)
}

// simdAbsorber is set where this CPU runs the package's own SIMD absorb (absorb_amd64.go: AVX-512).
var simdAbsorber Absorber

// SIMDAbsorber returns Absorb on this package's SIMD permutation of one state (x86-64 with
// AVX-512: the 16 elements in one vector register, the partial rounds' S-box on a general
// register), or nil where the CPU has none. It returns exactly what Absorb does.
func SIMDAbsorber() Absorber { return simdAbsorber }
