// Package poseidon2 owns the Poseidon2 permutation over BabyBear with width 16 — exactly
// Plonky3 v0.4.3 default_babybear_poseidon2_16() (spec A §2) — and the hashing primitives the
// protocol builds on it: the padding-free leaf sponge HashSlice, the 2-to-1 compression Compress
// and TreeCompress. The transcript (internal/transcript) uses Permute directly.
//
// The round constants live in data/poseidon2_babybear16_constants.txt (copied from the project
// spec) and are turned into constants_gen.go by gen_constants.go; the tests check that the
// generated tables still match the data file.
package poseidon2

//go:generate go run gen_constants.go

import (
	"math/bits"

	"github.com/metalprove/metalprove/internal/field"
)

const (
	// Width is the permutation state size.
	Width = 16
	// Rate is the sponge rate (positions 0..7); the capacity is positions 8..15.
	Rate = 8
	// DigestSize is the number of field elements in a digest.
	DigestSize = 8

	p = uint64(field.P)
)

// Digest is a Poseidon2 hash output: 8 base field elements.
type Digest [DigestSize]field.Fp

// mat4 applies Plonky3's MDSMat4 [2 3 1 1; 1 2 3 1; 1 1 2 3; 3 1 1 2] to x (spec A §2.3).
// Inputs below 2^60 each keep the outputs below 2^63.
func mat4(x0, x1, x2, x3 uint64) (y0, y1, y2, y3 uint64) {
	t01 := x0 + x1
	t23 := x2 + x3
	t0123 := t01 + t23
	t01123 := t0123 + x1
	t01233 := t0123 + x3
	y3 = t01233 + 2*x0
	y1 = t01123 + 2*x2
	y0 = t01123 + t01
	y2 = t01233 + t23
	return
}

// externalLayer computes s ← M_E·s without reducing. With inputs < 2^31 the outputs are < 2^37.
func externalLayer(s *[Width]uint64) {
	s[0], s[1], s[2], s[3] = mat4(s[0], s[1], s[2], s[3])
	s[4], s[5], s[6], s[7] = mat4(s[4], s[5], s[6], s[7])
	s[8], s[9], s[10], s[11] = mat4(s[8], s[9], s[10], s[11])
	s[12], s[13], s[14], s[15] = mat4(s[12], s[13], s[14], s[15])
	for k := 0; k < 4; k++ {
		sum := s[k] + s[4+k] + s[8+k] + s[12+k]
		s[k] += sum
		s[4+k] += sum
		s[8+k] += sum
		s[12+k] += sum
	}
}

// reduceMagic is ceil(2^94 / p). For x < 2^63, floor(x·reduceMagic / 2^94) = floor(x / p)
// exactly: the error term x·(reduceMagic − 2^94/p)/2^94 is below 2^-31 < 1/p.
const reduceMagic = 0x8888888765432102

// reduce returns x mod p for x < 2^63 (one 64×64→128 multiply, no correction step; cheaper than
// the compiler's generic x % p, which must handle all of uint64).
func reduce(x uint64) uint64 {
	hi, _ := bits.Mul64(x, reduceMagic)
	return x - (hi>>30)*p
}

// sbox returns x^7 mod p for x < p.
func sbox(x uint64) uint64 {
	x2 := reduce(x * x)
	x3 := reduce(x2 * x)
	x4 := reduce(x2 * x2)
	return reduce(x3 * x4)
}

// fullRound adds rc, applies the S-box to every lane and then M_E. Inputs may be unreduced
// (< 2^63); outputs are < 2^37.
func fullRound(s *[Width]uint64, rc *[Width]field.Fp) {
	for i := range s {
		s[i] = sbox(reduce(s[i] + uint64(rc[i])))
	}
	externalLayer(s)
}

// Permute applies the Poseidon2-BabyBear-16 permutation in place (spec A §2.2–2.4): an initial
// M_E, 4 full rounds, 13 partial rounds, 4 full rounds.
func Permute(st *[Width]field.Fp) {
	var s [Width]uint64
	for i, v := range st {
		s[i] = uint64(v)
	}
	permute(&s)
	for i, v := range s {
		st[i] = field.Fp(v)
	}
}

// permute is Permute on lanes held as uint64; the input must be canonical and so is the output.
func permute(s *[Width]uint64) {
	externalLayer(s)
	for r := range rcExternalInitial {
		fullRound(s, &rcExternalInitial[r])
	}
	for i := range s {
		s[i] = reduce(s[i])
	}
	// Partial rounds. Lanes are canonical at the top of each round. M_I = J + diag(V):
	// y_0 = Σ_{j≥1} s_j − s_0 (V[0] = −2) and y_i = Σ_j s_j + V[i]·s_i.
	for _, rc := range rcInternal {
		s0 := sbox(reduce(s[0] + uint64(rc)))
		part := s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7] + s[8] +
			s[9] + s[10] + s[11] + s[12] + s[13] + s[14] + s[15] // < 15p
		full := part + s0
		s[0] = reduce(part + p - s0)
		for i := 1; i < Width; i++ {
			s[i] = reduce(full + uint64(internalDiag[i])*s[i]) // < p·p + 16p < 2^62
		}
	}
	for r := range rcExternalFinal {
		fullRound(s, &rcExternalFinal[r])
	}
	for i := range s {
		s[i] = reduce(s[i])
	}
}

// HashSlice is Plonky3's PaddingFreeSponge<Perm, 16, 8, 8> (spec A §2.7): starting from the zero
// state, each block of up to 8 elements overwrites s[0..len) and is followed by one permutation
// (a partial final block leaves s[len..8) as they are); the digest is s[0..8). There is no
// padding or length encoding, and an empty input hashes to the zero digest.
func HashSlice(v []field.Fp) Digest { return HashSliceWith(nil, v) }

// HashSliceWith is HashSlice with long inputs absorbed by a (nil: pure Go).
func HashSliceWith(a Absorber, v []field.Fp) Digest {
	if a != nil && len(v) >= AbsorbMin {
		// The same sponge as Absorb from the zero state, plus the permutation of a partial last block.
		var st [Width]field.Fp
		if a(&st, 0, v) != 0 {
			Permute(&st)
		}
		return Digest(st[:DigestSize])
	}
	var s [Width]uint64
	for len(v) > 0 {
		n := min(len(v), Rate)
		for i := 0; i < n; i++ {
			s[i] = uint64(v[i])
		}
		permute(&s)
		v = v[n:]
	}
	var d Digest
	for i := range d {
		d[i] = field.Fp(s[i])
	}
	return d
}

// Compress is Plonky3's TruncatedPermutation<Perm, 2, 8, 16>: Perm(l ‖ r)[0..8).
func Compress(l, r Digest) Digest {
	var s [Width]uint64
	for i := 0; i < DigestSize; i++ {
		s[i] = uint64(l[i])
		s[DigestSize+i] = uint64(r[i])
	}
	permute(&s)
	var d Digest
	for i := range d {
		d[i] = field.Fp(s[i])
	}
	return d
}

// TreeCompress repeatedly replaces the list by compress(h0,h1), compress(h2,h3), … until one
// digest remains (MerkleHasher::tree_compress). len(h) must be a power of two ≥ 1; otherwise it
// panics. h is not modified.
func TreeCompress(h []Digest) Digest {
	n := len(h)
	if n == 0 || n&(n-1) != 0 {
		panic("poseidon2: TreeCompress needs a power-of-two number of digests")
	}
	if n == 1 {
		return h[0]
	}
	level := make([]Digest, n/2)
	for i := range level {
		level[i] = Compress(h[2*i], h[2*i+1])
	}
	for len(level) > 1 {
		for i := 0; i < len(level)/2; i++ {
			level[i] = Compress(level[2*i], level[2*i+1])
		}
		level = level[:len(level)/2]
	}
	return level[0]
}
