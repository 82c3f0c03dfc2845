package host

/*
#include "hd_runtime.h"
*/
import "C"

import (
	"unsafe"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// WitnessSearch finds the smallest w in [from, to) (to ≤ p) that passes the transcript's
// proof-of-work condition (transcript.WitnessOK with mask): ok is false when none does.
type WitnessSearch func(state *[poseidon2.Width]field.Fp, idx int, mask uint32, from, to uint32) (w field.Fp, ok bool)

// NewWitnessSearch returns a WitnessSearch on this package's SIMD permutation (hd_p2_search:
// candidates in the lanes of one vector permutation, on the calling thread), for the round
// constants rc as the kernels take them (kernels.RoundConstants). Small searches (WHIR's 5-bit
// folding PoW) finish in a few vector permutations, where goroutines would cost more to wake.
func NewWitnessSearch(rc []uint32) WitnessSearch {
	rc = append([]uint32(nil), rc...) // a private copy: the caller may reuse its slice
	crc := (*C.uint)(unsafe.Pointer(&rc[0]))
	return func(state *[poseidon2.Width]field.Fp, idx int, mask uint32, from, to uint32) (field.Fp, bool) {
		if idx < 0 || idx >= poseidon2.Width || from >= to || to > field.P {
			return 0, false
		}
		w := uint32(C.hd_p2_search((*C.uint)(unsafe.Pointer(&state[0])), C.uint(idx), C.uint(mask), C.uint(from), C.uint(to), crc))
		if w == ^uint32(0) {
			return 0, false
		}
		return field.Fp(w), true
	}
}
