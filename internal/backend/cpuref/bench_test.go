package cpuref

import (
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

func BenchmarkDFT20(b *testing.B) {
	data := randVec(newRNG(40), 1<<20)
	_ = DFT(data) // warm the twiddle cache
	b.SetBytes(4 << 20)
	for b.Loop() {
		_ = DFT(data)
	}
}

// RS-encode of a 2^16 × 32 stacked matrix (l_skip = 4, log_blowup = 1): 32 codewords of 2^17.
func BenchmarkRSEncode16x32(b *testing.B) {
	q := randMatrix(newRNG(41), 32, 1<<16)
	for b.Loop() {
		if _, err := RSEncodeMatrix(4, 1, q); err != nil {
			b.Fatal(err)
		}
	}
}

// Merkle tree over 2^16 rows × 32 columns with 4 rows per query (k = 2).
func BenchmarkMerkle16x32(b *testing.B) {
	m := randMatrix(newRNG(42), 32, 1<<16)
	for b.Loop() {
		if _, err := NewMerkleTree(m, 4); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNaiveVsFast1024(b *testing.B) {
	data := randVec(newRNG(43), 1024)
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			_, _ = NaiveDFT(data)
		}
	})
	b.Run("fast", func(b *testing.B) {
		c := make([]field.Fp, len(data))
		for b.Loop() {
			copy(c, data)
			_ = DFT(c)
		}
	})
}
