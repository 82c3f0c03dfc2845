// Package stdrng reproduces Rust rand 0.9's StdRng bit for bit: rand_chacha's ChaCha12Rng
// (ChaCha with 12 rounds, djb layout: 64-bit block counter in words 12–13 starting at 0, 64-bit
// stream id 0 in words 14–15), seeded either with 32 key bytes (FromSeed) or through rand_core's
// PCG32 seed expansion (SeedFromU64). Outputs are read from the key stream as rand_core 0.9's
// BlockRng does: Uint32 takes one 32-bit word, Uint64 two consecutive words (low word first, also
// across a block boundary), FillBytes whole little-endian words (the tail of a partly used word
// is discarded).
//
// The point is input parity with OpenVM's Keccak examples, which draw their inputs with
// rand::rngs::StdRng (see keccak-air.md §9). This is not a general-purpose CSPRNG API.
package stdrng

import (
	"encoding/binary"
	"math/bits"
)

// Rounds is the number of ChaCha rounds StdRng uses (rand 0.9: ChaCha12).
const Rounds = 12

// StdRng is rand 0.9's StdRng. The zero value is not useful; use FromSeed or SeedFromU64.
type StdRng struct {
	key     [8]uint32
	counter uint64 // block number of the next block to generate
	buf     [16]uint32
	idx     int // next unread word in buf; 16 = exhausted
}

// FromSeed is StdRng::from_seed(seed): the seed is the ChaCha key (8 little-endian words).
func FromSeed(seed [32]byte) *StdRng {
	r := &StdRng{idx: 16}
	for i := range r.key {
		r.key[i] = binary.LittleEndian.Uint32(seed[4*i:])
	}
	return r
}

// SeedFromU64 is rand_core 0.9's SeedableRng::seed_from_u64(state): the 32-byte seed is eight
// PCG32 outputs, little-endian.
func SeedFromU64(state uint64) *StdRng {
	return FromSeed(PCG32Seed(state))
}

// PCG32Seed is the seed expansion used by rand_core 0.9's default seed_from_u64.
func PCG32Seed(state uint64) [32]byte {
	const (
		mul = 6364136223846793005
		inc = 11634580027462260723
	)
	var seed [32]byte
	for i := 0; i < 8; i++ {
		state = state*mul + inc
		x := uint32(((state >> 18) ^ state) >> 27)
		out := bits.RotateLeft32(x, -int(state>>59))
		binary.LittleEndian.PutUint32(seed[4*i:], out)
	}
	return seed
}

func (r *StdRng) refill() {
	Block(&r.buf, &r.key, r.counter, 0, Rounds)
	r.counter++
	r.idx = 0
}

// Uint32 is RngCore::next_u32: the next key-stream word.
func (r *StdRng) Uint32() uint32 {
	if r.idx >= 16 {
		r.refill()
	}
	v := r.buf[r.idx]
	r.idx++
	return v
}

// Uint64 is RngCore::next_u64: the next two key-stream words, the first one low.
func (r *StdRng) Uint64() uint64 {
	switch {
	case r.idx < 15:
		v := uint64(r.buf[r.idx]) | uint64(r.buf[r.idx+1])<<32
		r.idx += 2
		return v
	case r.idx >= 16:
		r.refill()
		r.idx = 2
		return uint64(r.buf[0]) | uint64(r.buf[1])<<32
	default: // idx == 15: low word is the last of this block, high word the first of the next
		lo := uint64(r.buf[15])
		r.refill()
		r.idx = 1
		return lo | uint64(r.buf[0])<<32
	}
}

// FillBytes is RngCore::fill_bytes: consecutive little-endian words; a word only partly used for
// the tail of dst is consumed entirely.
func (r *StdRng) FillBytes(dst []byte) {
	for len(dst) > 0 {
		w := r.Uint32()
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], w)
		dst = dst[copy(dst, b[:]):]
	}
}

// Lanes25 is rng.random::<[u64; 25]>(): 25 Uint64 draws in element order.
func (r *StdRng) Lanes25() [25]uint64 {
	var out [25]uint64
	for i := range out {
		out[i] = r.Uint64()
	}
	return out
}

// Block computes one ChaCha block with the given number of rounds (even) into out: key words
// 4–11, block counter words 12–13 (low, high), stream/nonce words 14–15 (low, high).
func Block(out *[16]uint32, key *[8]uint32, counter, stream uint64, rounds int) {
	const c0, c1, c2, c3 = 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574
	k0, k1, k2, k3, k4, k5, k6, k7 := key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7]
	n0, n1 := uint32(counter), uint32(counter>>32)
	n2, n3 := uint32(stream), uint32(stream>>32)
	x0, x1, x2, x3 := uint32(c0), uint32(c1), uint32(c2), uint32(c3)
	x4, x5, x6, x7, x8, x9, x10, x11 := k0, k1, k2, k3, k4, k5, k6, k7
	x12, x13, x14, x15 := n0, n1, n2, n3
	for i := 0; i < rounds; i += 2 {
		// column round
		x0, x4, x8, x12 = qr(x0, x4, x8, x12)
		x1, x5, x9, x13 = qr(x1, x5, x9, x13)
		x2, x6, x10, x14 = qr(x2, x6, x10, x14)
		x3, x7, x11, x15 = qr(x3, x7, x11, x15)
		// diagonal round
		x0, x5, x10, x15 = qr(x0, x5, x10, x15)
		x1, x6, x11, x12 = qr(x1, x6, x11, x12)
		x2, x7, x8, x13 = qr(x2, x7, x8, x13)
		x3, x4, x9, x14 = qr(x3, x4, x9, x14)
	}
	out[0], out[1], out[2], out[3] = x0+c0, x1+c1, x2+c2, x3+c3
	out[4], out[5], out[6], out[7] = x4+k0, x5+k1, x6+k2, x7+k3
	out[8], out[9], out[10], out[11] = x8+k4, x9+k5, x10+k6, x11+k7
	out[12], out[13], out[14], out[15] = x12+n0, x13+n1, x14+n2, x15+n3
}

func qr(a, b, c, d uint32) (uint32, uint32, uint32, uint32) {
	a += b
	d = bits.RotateLeft32(d^a, 16)
	c += d
	b = bits.RotateLeft32(b^c, 12)
	a += b
	d = bits.RotateLeft32(d^a, 8)
	c += d
	b = bits.RotateLeft32(b^c, 7)
	return a, b, c, d
}
