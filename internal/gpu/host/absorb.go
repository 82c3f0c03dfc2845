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

// NewAbsorber returns poseidon2.Absorb on this package's SIMD permutation of one state,
// hd_p2_absorb (the transcript's long absorbs: a proof's column openings are ~2,700 permutations
// in sequence for keccakf-1024), for the round constants rc as the kernels take them
// (kernels.RoundConstants). It returns nil where this build has no such permutation (a compiler
// without vector shuffles).
func NewAbsorber(rc []uint32) func(state *[poseidon2.Width]field.Fp, idx int, data []field.Fp) int {
	rc = append([]uint32(nil), rc...) // a private copy: the caller may reuse its slice
	crc := (*C.uint)(unsafe.Pointer(&rc[0]))
	var probe [poseidon2.Width]uint32
	if uint32(C.hd_p2_absorb((*C.uint)(&probe[0]), nil, 0, 0, crc)) == ^uint32(0) {
		return nil
	}
	return func(state *[poseidon2.Width]field.Fp, idx int, data []field.Fp) int {
		var d *C.uint
		if len(data) > 0 {
			d = (*C.uint)(unsafe.Pointer(&data[0]))
		}
		return int(C.hd_p2_absorb((*C.uint)(unsafe.Pointer(&state[0])), d, C.ulong(len(data)), C.uint(idx), crc))
	}
}
