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

// The transcript's long absorbs (a proof's column openings: ~2,700 permutations in sequence for
// keccakf-1024) run on this package's SIMD permutation of one state, hd_p2_absorb, instead of the
// scalar Go one: registered with poseidon2 when this build has it.
func init() {
	if absorbAvailable() {
		poseidon2.RegisterAbsorber(absorb)
	}
}

// absorbRC holds the permutation's constants as the kernels take them (shaders/include/poseidon2.h:
// initial full rounds, partial rounds, final full rounds, diagonal; Montgomery form).
var absorbRC = func() (rc [157]uint32) {
	ext0, internal, ext1, diag := poseidon2.Constants()
	mont := func(x field.Fp) uint32 { return uint32((uint64(x) << 32) % uint64(field.P)) }
	for r := range ext0 {
		for i, c := range ext0[r] {
			rc[16*r+i] = mont(c)
		}
	}
	for r, c := range internal {
		rc[64+r] = mont(c)
	}
	for r := range ext1 {
		for i, c := range ext1[r] {
			rc[77+16*r+i] = mont(c)
		}
	}
	for i, c := range diag {
		rc[141+i] = mont(c)
	}
	return rc
}()

func absorbAvailable() bool {
	var s [poseidon2.Width]uint32
	return uint32(C.hd_p2_absorb((*C.uint)(&s[0]), nil, 0, 0, (*C.uint)(&absorbRC[0]))) != ^uint32(0)
}

// absorb is poseidon2.Absorb through hd_p2_absorb.
func absorb(state *[poseidon2.Width]field.Fp, idx int, data []field.Fp) int {
	var d *C.uint
	if len(data) > 0 {
		d = (*C.uint)(unsafe.Pointer(&data[0]))
	}
	return int(C.hd_p2_absorb((*C.uint)(unsafe.Pointer(&state[0])), d, C.ulong(len(data)), C.uint(idx), (*C.uint)(&absorbRC[0])))
}
