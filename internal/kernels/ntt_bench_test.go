package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// BenchmarkRSEncodeKeccakf: the RS encoder on keccakf-1024's stacked matrix at a quarter of its
// height (2^20 × 42, l_skip 4, log blowup 1) on the test device, whole (the message kernel and the
// DFT passes) and the message's block transform alone (IDFTBlocks: the same ntt_block):
//
//	go test ./internal/kernels -run '^$' -bench RSEncodeKeccakf -benchtime 5x
func BenchmarkRSEncodeKeccakf(b *testing.B) {
	const logM, width, lSkip, logBlowup = 20, 42, 4, 1
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(41, 42))
	q, err := UploadMont(testDev, "bench", fieldrand.Fps(r, width<<logM))
	if err != nil {
		b.Fatal(err)
	}
	defer q.Free()
	b.Run("encode 2^20x42", func(b *testing.B) {
		for range b.N {
			out, err := ntt.RSEncodeMatrix("bench codeword", q, 1<<logM, width, lSkip, logBlowup, false)
			if err != nil {
				b.Fatal(err)
			}
			out.Free()
		}
	})
	b.Run("block idft 2^20x42", func(b *testing.B) {
		for range b.N {
			if err := ntt.IDFTBlocks(q, width<<logM, lSkip); err != nil {
				b.Fatal(err)
			}
		}
	})
}
