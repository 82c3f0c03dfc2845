package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// Benchmarks at the keccakf-1024 sizes: stacked matrix 2^21 × 42 (l_skip 4, n_stack 17), 2633
// slices of 2^11 blocks; tables 42 × 2^17 Fp4.

const (
	kfLSkip, kfNStack, kfWidth, kfSlices, kfNN = 4, 17, 42, 2633, 11
)

func benchFp4Table(b *testing.B, n int) *gpu.Array[Mont4] {
	b.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 1))
	v := make([]Mont4, n)
	for i := range v {
		for k := range v[i] {
			v[i][k] = MontOf(field.Fp(r.Uint32N(field.P)))
		}
	}
	a, err := gpu.UploadArray(testDev, "bench table", v)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Free)
	return a
}

func BenchmarkSumcheckRoundKeccakf(b *testing.B) {
	sc, _ := NewSumcheck(testDev)
	defer sc.Close()
	n := kfWidth << kfNStack
	t := ProductTables{F: benchFp4Table(b, n), W: benchFp4Table(b, n), Cols: kfWidth, LogRows: kfNStack, Stride: 1 << kfNStack}
	b.ResetTimer()
	for range b.N {
		bt := testDev.Batch()
		if err := sc.EncodeRound(bt, t); err != nil {
			b.Fatal(err)
		}
		if _, _, err := sc.ReadRound(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSumcheckFoldRoundKeccakf(b *testing.B) {
	sc, _ := NewSumcheck(testDev)
	defer sc.Close()
	n := kfWidth << kfNStack
	src := ProductTables{F: benchFp4Table(b, n), W: benchFp4Table(b, n), Cols: kfWidth, LogRows: kfNStack, Stride: 1 << kfNStack}
	dst := ProductTables{F: benchFp4Table(b, n/2), W: benchFp4Table(b, n/2), Cols: kfWidth, LogRows: kfNStack - 1, Stride: 1 << (kfNStack - 1)}
	alpha := fieldrand.Fp4(rand.New(rand.NewPCG(1, 1)))
	b.ResetTimer()
	for range b.N {
		bt := testDev.Batch()
		if err := sc.EncodeFoldRound(bt, src, dst, alpha); err != nil {
			b.Fatal(err)
		}
		if _, _, err := sc.ReadRound(); err != nil {
			b.Fatal(err)
		}
	}
}

// keccakfSlices packs 2633 slices of 2^11 blocks over the 42 stacked columns, half with a
// rotation weight, and uploads them with one random eq table.
func keccakfSlices(b *testing.B) (SliceRange, *gpu.Array[Mont4]) {
	r := rand.New(rand.NewPCG(2, 2))
	var ss []StackedSlice
	for i := range kfSlices {
		s := StackedSlice{QStart: i << (kfNN + kfLSkip), NN: kfNN, A: fieldrand.Fp4(r), WStart: i << kfNN}
		if i%2 == 0 {
			s.BW = fieldrand.Fp4(r)
		}
		ss = append(ss, s)
	}
	w, chunks, err := PackStackedSlices(ss, kfLSkip)
	if err != nil {
		b.Fatal(err)
	}
	sa, err := gpu.UploadArray(testDev, "bench slices", w)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sa.Free)
	return SliceRange{Slices: sa, First: 0, Count: kfSlices, Chunks: chunks}, benchFp4Table(b, 1<<kfNN)
}

func benchQ(b *testing.B) *gpu.Array[Mont] {
	r := rand.New(rand.NewPCG(3, 3))
	v := make([]Mont, kfWidth<<(kfLSkip+kfNStack))
	for i := range v {
		v[i] = Mont(r.Uint32N(field.P))
	}
	a, err := gpu.UploadArray(testDev, "bench Q", v)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Free)
	return a
}

func BenchmarkStackedUniKeccakf(b *testing.B) {
	rg, etab := keccakfSlices(b)
	q := benchQ(b)
	width := StackedUniWidth(kfLSkip)
	partials, _ := gpu.AllocArray[uint32](testDev, "partials", StackedUniMaxRows(testDev)*width)
	defer partials.Free()
	sums, _ := gpu.AllocArray[uint32](testDev, "chunk sums", (rg.FirstChunk+rg.Chunks)*StackedChunkWidth(kfLSkip))
	defer sums.Free()
	out, _ := gpu.AllocArray[uint32](testDev, "out", width)
	defer out.Free()
	b.ResetTimer()
	for range b.N {
		bt := testDev.Batch()
		if err := EncodeStackedUniChunks(bt, testDev, q, rg, etab, sums, kfLSkip); err != nil {
			b.Fatal(err)
		}
		g, err := EncodeStackedUniWeigh(bt, testDev, sums, rg, partials, 0, kfLSkip)
		if err != nil {
			b.Fatal(err)
		}
		if err := EncodeSumRows(bt, testDev, partials, out, g, width); err != nil {
			b.Fatal(err)
		}
		if err := bt.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStackedBindQKeccakf(b *testing.B) {
	q := benchQ(b)
	lag := benchFp4Table(b, 1<<kfLSkip)
	out := benchFp4Table(b, kfWidth<<kfNStack)
	b.ResetTimer()
	for range b.N {
		bt := testDev.Batch()
		if err := EncodeStackedBindQ(bt, testDev, q, lag, out, kfWidth<<kfNStack, kfLSkip, 0); err != nil {
			b.Fatal(err)
		}
		if err := bt.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStackedBindWKeccakf(b *testing.B) {
	rg, etab := keccakfSlices(b)
	weights := benchFp4Table(b, 2*kfSlices)
	out := benchFp4Table(b, kfWidth<<kfNStack)
	b.ResetTimer()
	for range b.N {
		bt := testDev.Batch()
		if err := EncodeStackedBindW(bt, testDev, rg, weights, etab, out, kfLSkip); err != nil {
			b.Fatal(err)
		}
		if err := bt.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}
