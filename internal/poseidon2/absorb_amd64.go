package poseidon2

import (
	"unsafe"

	"github.com/metalprove/metalprove/internal/field"
)

// absorbAVX512 absorbs blocks blocks of 8 canonical elements of data into state (canonical in and
// out): for each, lanes 0..7 are replaced and the state permuted. tables is absorbTables.
//
//go:noescape
func absorbAVX512(state *[Width]uint32, data *uint32, blocks int, tables *uint32)

func cpuidex(leaf, sub uint32) (a, b, c, d uint32)
func xgetbv0() (lo, hi uint32)

// hasAVX512 says whether the CPU and the OS run AVX-512F code (the ZMM and opmask state saved).
func hasAVX512() bool {
	maxLeaf, _, _, _ := cpuidex(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuidex(1, 0)
	const osxsave = 1 << 27
	if c1&osxsave == 0 {
		return false
	}
	// XCR0: SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM.
	if lo, _ := xgetbv0(); lo&0xe6 != 0xe6 {
		return false
	}
	_, b7, _, _ := cpuidex(7, 0)
	const avx512f = 1 << 16
	return b7&avx512f != 0
}

// absorbTables holds the permutation's constants for absorbAVX512 in Montgomery form (x·2³² mod
// p): the 4×16 initial full-round constants, the 13 partial-round constants, the 4×16 final
// full-round constants, the diagonal V of M_I, a zero.
var absorbTables = func() []uint32 {
	mont := func(x field.Fp) uint32 { return uint32(uint64(x) << 32 % p) }
	var t []uint32
	for _, r := range rcExternalInitial {
		for _, c := range r {
			t = append(t, mont(c))
		}
	}
	for _, c := range rcInternal {
		t = append(t, mont(c))
	}
	for _, r := range rcExternalFinal {
		for _, c := range r {
			t = append(t, mont(c))
		}
	}
	for _, c := range internalDiag {
		t = append(t, mont(c))
	}
	return append(t, 0) // the "next constant" of the last partial round
}()

func init() {
	if hasAVX512() {
		simdAbsorber = absorbSIMD
	}
}

// absorbSIMD is Absorb with the whole blocks on absorbAVX512.
func absorbSIMD(state *[Width]field.Fp, idx int, data []field.Fp) int {
	s := (*[Width]uint32)(unsafe.Pointer(state))
	if idx != 0 {
		// The pending block's rest: lanes idx..7 from data, then one permutation.
		n := Rate - idx
		if len(data) < n {
			return Absorb(state, idx, data)
		}
		var blk [Rate]uint32
		copy(blk[:idx], s[:idx])
		for i := idx; i < Rate; i++ {
			blk[i] = uint32(data[i-idx])
		}
		absorbAVX512(s, &blk[0], 1, &absorbTables[0])
		data = data[n:]
	}
	if k := len(data) / Rate; k > 0 {
		absorbAVX512(s, (*uint32)(&data[0]), k, &absorbTables[0])
		data = data[k*Rate:]
	}
	for i, x := range data { // a partial last block (fewer than 8 elements)
		state[i] = x
	}
	return len(data)
}
