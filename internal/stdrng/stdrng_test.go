package stdrng

import (
	"encoding/binary"
	"encoding/hex"
	"testing"
)

// keccak-air.md §9: PCG32 expansion of seed 0, first 8 bytes as LE u64.
func TestPCG32SeedZero(t *testing.T) {
	s := PCG32Seed(0)
	if got := binary.LittleEndian.Uint64(s[:8]); got != 5029875928683246316 {
		t.Fatalf("PCG32Seed(0)[0:8] = %d, want 5029875928683246316", got)
	}
}

// rand 0.9 src/rngs/std.rs test_stdrng_construction: from_seed, then from_rng (which fills a
// 32-byte seed with fill_bytes from the first generator).
func TestStdRngConstruction(t *testing.T) {
	seed := [32]byte{1, 0, 0, 0, 23, 0, 0, 0, 200, 1, 0, 0, 210, 30, 0, 0}
	r0 := FromSeed(seed)
	if got := r0.Uint64(); got != 10719222850664546238 {
		t.Fatalf("from_seed first u64 = %d, want 10719222850664546238", got)
	}
	var s1 [32]byte
	r0.FillBytes(s1[:])
	if got := FromSeed(s1).Uint64(); got != 14064965282130556830 {
		t.Fatalf("from_rng first u64 = %d, want 14064965282130556830", got)
	}
}

// keccak-air.md §9: OpenVM CPU example inputs (seed_from_u64(42), random::<[u64;25]>()) and the
// CUDA example's per-task seed derivation.
func TestOpenVMKeccakInputs(t *testing.T) {
	in := SeedFromU64(42).Lanes25()
	want := [3]uint64{0x86cc7763222724a2, 0x8af00a133fad517d, 0xa2ef6071de5134d1}
	for i, w := range want {
		if in[i] != w {
			t.Fatalf("seed 42 input[0] lane %d = %016x, want %016x", i, in[i], w)
		}
	}
	base := SeedFromU64(42).Uint64()
	if base != 0x86cc7763222724a2 {
		t.Fatalf("CUDA base_seed = %#x, want 0x86cc7763222724a2", base)
	}
	const task = uint64(0)
	if got := SeedFromU64(base ^ task*0x9E3779B97F4A7C15).Lanes25()[0]; got != 0xa5db6ba9d6298ff1 {
		t.Fatalf("CUDA task 0 input[0] lane 0 = %016x, want a5db6ba9d6298ff1", got)
	}
}

// Mixed-width reads follow rand_core 0.9 BlockRng: u64 = two consecutive words, also across a
// block boundary (word 15 low, next block's word 0 high).
func TestWordStreamSemantics(t *testing.T) {
	seed := PCG32Seed(7)
	var words []uint32
	r := FromSeed(seed)
	for i := 0; i < 64; i++ {
		words = append(words, r.Uint32())
	}
	r = FromSeed(seed)
	pos := 0
	// 1 u32, then 7 u64 (ends at word 15), then a u64 straddling words 15/16, ...
	pattern := []int{32, 64, 64, 64, 64, 64, 64, 64, 64, 32, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 32, 64}
	for k, w := range pattern {
		if w == 32 {
			if got := r.Uint32(); got != words[pos] {
				t.Fatalf("read %d: u32 %#x, want word %d %#x", k, got, pos, words[pos])
			}
			pos++
		} else {
			want := uint64(words[pos]) | uint64(words[pos+1])<<32
			if got := r.Uint64(); got != want {
				t.Fatalf("read %d: u64 %#x, want words %d,%d %#x", k, got, pos, pos+1, want)
			}
			pos += 2
		}
	}
	var b [7]byte
	r.FillBytes(b[:]) // consumes 2 words
	if binary.LittleEndian.Uint32(b[:4]) != words[pos] || b[4] != byte(words[pos+1]) {
		t.Fatalf("FillBytes mismatch")
	}
	pos += 2
	if got := r.Uint32(); got != words[pos] {
		t.Fatalf("after FillBytes: %#x, want word %d %#x", got, pos, words[pos])
	}
}

// ChaCha12 known answer: all-zero 256-bit key, zero IV, block 0 — test case TC1 (12 rounds) of
// draft-strombergson-chacha-test-vectors-01; the same 32 leading bytes appear as the secret key
// that reth's test utilities derive from rand's StdRng::from_seed([0; 32]).
func TestChaCha12ZeroKey(t *testing.T) {
	const want = "9bf49a6a0755f953811fce125f2683d50429c3bb49e074147e0089a52eae155f" +
		"0564f879d27ae3c02ce82834acfa8c793a629f2ca0de6919610be82f411326be"
	var out [16]uint32
	Block(&out, &[8]uint32{}, 0, 0, 12)
	var got [64]byte
	for i, w := range out {
		binary.LittleEndian.PutUint32(got[4*i:], w)
	}
	if hex.EncodeToString(got[:]) != want {
		t.Fatalf("ChaCha12(0) block 0 = %x\nwant %s", got, want)
	}
	r := FromSeed([32]byte{})
	var b [64]byte
	r.FillBytes(b[:])
	if b != got {
		t.Fatalf("StdRng::from_seed([0;32]) stream differs from Block")
	}
}

func keyFromBytes(b [32]byte) *[8]uint32 {
	var k [8]uint32
	for i := range k {
		k[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return &k
}

// The same core with 20 rounds against the ChaCha20 vectors in rand_chacha 0.9's tests
// (test_chacha_true_values_a/b/c, test_chacha_multiple_blocks, test_chacha_construction;
// originally draft-nir-cfrg-chacha20-poly1305-04) and RFC 7539 §2.3.2.
func TestChaCha20Vectors(t *testing.T) {
	check := func(name string, key [32]byte, counter, stream uint64, want [16]uint32) {
		t.Helper()
		var out [16]uint32
		Block(&out, keyFromBytes(key), counter, stream, 20)
		if out != want {
			t.Errorf("%s: got %08x\nwant %08x", name, out, want)
		}
	}
	check("true_values_a block 0", [32]byte{}, 0, 0, [16]uint32{
		0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653, 0xb819d2bd, 0x1aed8da0, 0xccef36a8,
		0xc70d778b, 0x7c5941da, 0x8d485751, 0x3fe02477, 0x374ad8b8, 0xf4b8436a, 0x1ca11815,
		0x69b687c3, 0x8665eeb2})
	check("true_values_a block 1", [32]byte{}, 1, 0, [16]uint32{
		0xbee7079f, 0x7a385155, 0x7c97ba98, 0x0d082d73, 0xa0290fcb, 0x6965e348, 0x3e53c612,
		0xed7aee32, 0x7621b729, 0x434ee69c, 0xb03371d5, 0xd539d874, 0x281fed31, 0x45fb0a51,
		0x1f0ae1ac, 0x6f4d794b})
	check("true_values_b", [32]byte{31: 1}, 1, 0, [16]uint32{
		0x2452eb3a, 0x9249f8ec, 0x8d829d9b, 0xddd4ceb1, 0xe8252083, 0x60818b01, 0xf38422b8,
		0x5aaa49c9, 0xbb00ca8e, 0xda3ba7b4, 0xc4b592d1, 0xfdf2732f, 0x4436274e, 0x2561b3c8,
		0xebdd4aa6, 0xa0136c00})
	check("true_values_c", [32]byte{1: 0xff}, 2, 0, [16]uint32{
		0xfb4dd572, 0x4bc42ef1, 0xdf922636, 0x327f1394, 0xa78dea8f, 0x5e269039, 0xa1bebbc1,
		0xcaf09aae, 0xa25ab213, 0x48a6b46c, 0x1b9d9bcb, 0x092c5be6, 0x546ca624, 0x1bec45d5,
		0x87f47473, 0x96f0992e})
	// RFC 7539 §2.3.2: key 00..1f, 96-bit nonce 00:00:00:09:00:00:00:4a:00:00:00:00, block
	// counter 1. In the djb layout used here, word 13 (high counter word) holds the first nonce
	// word and words 14–15 the other two.
	var rfcKey [32]byte
	for i := range rfcKey {
		rfcKey[i] = byte(i)
	}
	check("rfc7539 2.3.2", rfcKey, 1|0x09000000<<32, 0x4a000000, [16]uint32{
		0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204,
		0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de,
		0xe883d0cb, 0x4e3c50a2})

	// test_chacha_multiple_blocks: word i of block i.
	mbKey := [32]byte{0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0}
	mbWant := [16]uint32{0xf225c81a, 0x6ab1be57, 0x04d42951, 0x70858036, 0x49884684, 0x64efec72,
		0x4be2d186, 0x3615b384, 0x11cfa18e, 0xd3c50049, 0x75c775f6, 0x434c6530, 0x2c5bad8f,
		0x898881dc, 0x5f1c86d9, 0xc1f8e7f4}
	for i := 0; i < 16; i++ {
		var out [16]uint32
		Block(&out, keyFromBytes(mbKey), uint64(i), 0, 20)
		if out[i] != mbWant[i] {
			t.Errorf("multiple_blocks word %d of block %d = %#x, want %#x", i, i, out[i], mbWant[i])
		}
	}
	// test_chacha_construction: first next_u32.
	var out [16]uint32
	Block(&out, keyFromBytes([32]byte{8: 1, 16: 2, 24: 3}), 0, 0, 20)
	if out[0] != 137206642 {
		t.Errorf("construction: first word %d, want 137206642", out[0])
	}
}

func BenchmarkUint64(b *testing.B) {
	r := SeedFromU64(42)
	var acc uint64
	b.SetBytes(8)
	for i := 0; i < b.N; i++ {
		acc ^= r.Uint64()
	}
	sink = acc
}

func BenchmarkLanes25(b *testing.B) {
	r := SeedFromU64(42)
	b.SetBytes(200)
	for i := 0; i < b.N; i++ {
		l := r.Lanes25()
		sink ^= l[0]
	}
}

var sink uint64
