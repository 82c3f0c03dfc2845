package keccakf

import "math/bits"

// roundVals are the intermediate values of one round that the trace stores besides the round
// input and output.
type roundVals struct {
	c, cp [5]uint64  // C, C' (θ)
	ap    [25]uint64 // A' (after θ), flat lane index x+5y
	app00 uint64     // A''[0][0] (after χ, before ι)
}

// round applies round r of Keccak-f[1600] to st (flat lanes, i = x+5y) in the step order of
// keccak-air.md §4, recording the intermediates in v.
func round(st *[25]uint64, r int, v *roundVals) {
	for x := 0; x < 5; x++ {
		v.c[x] = st[x] ^ st[x+5] ^ st[x+10] ^ st[x+15] ^ st[x+20]
	}
	for x := 0; x < 5; x++ {
		v.cp[x] = v.c[x] ^ v.c[(x+4)%5] ^ bits.RotateLeft64(v.c[(x+1)%5], 1)
	}
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			v.ap[x+5*y] = st[x+5*y] ^ v.c[x] ^ v.cp[x]
		}
	}
	// ρ+π: B[i][j] = ROTL(A'[(i+3j)%5][i], ROT[(i+3j)%5][i]).
	var b [25]uint64
	for j := 0; j < 5; j++ {
		for i := 0; i < 5; i++ {
			a := (i + 3*j) % 5
			b[i+5*j] = bits.RotateLeft64(v.ap[a+5*i], ROT[a][i])
		}
	}
	// χ
	for j := 0; j < 5; j++ {
		for i := 0; i < 5; i++ {
			st[i+5*j] = b[i+5*j] ^ (^b[(i+1)%5+5*j] & b[(i+2)%5+5*j])
		}
	}
	v.app00 = st[0]
	st[0] ^= RC[r] // ι
}

// Permute applies Keccak-f[1600] to the state in place (lane index x+5y, FIPS 202 order).
func Permute(st *[25]uint64) {
	var v roundVals
	for r := 0; r < NumRounds; r++ {
		round(st, r, &v)
	}
}
