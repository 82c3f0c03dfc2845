package poseidon2

import "github.com/metalprove/metalprove/internal/field"

// Absorb is the duplex sponge's absorb of data (the transcript's observe, once per element):
// state[idx] ← x for each x in turn, and after the 8th pending element the state is permuted and
// idx is 0 again. idx must be in [0, Rate); Absorb returns the final idx. Long inputs go to the
// absorber registered by RegisterAbsorber, if any (the host device's SIMD permutation).
func Absorb(state *[Width]field.Fp, idx int, data []field.Fp) int {
	if fastAbsorb != nil && len(data) >= fastAbsorbMin {
		return fastAbsorb(state, idx, data)
	}
	return absorbGo(state, idx, data)
}

func absorbGo(state *[Width]field.Fp, idx int, data []field.Fp) int {
	for _, x := range data {
		state[idx] = x
		if idx++; idx == Rate {
			Permute(state)
			idx = 0
		}
	}
	return idx
}

// fastAbsorbMin is the shortest input worth a call of the registered absorber (a cgo call costs
// about a tenth of a permutation).
const fastAbsorbMin = 2 * Rate

var fastAbsorb func(state *[Width]field.Fp, idx int, data []field.Fp) int

// RegisterAbsorber installs f as Absorb's implementation for long inputs. f must return exactly
// what Absorb's own loop would (internal/gpu/host checks its absorber against it). Call it from
// an init function only: Absorb reads the hook without synchronisation.
func RegisterAbsorber(f func(state *[Width]field.Fp, idx int, data []field.Fp) int) {
	fastAbsorb = f
}
