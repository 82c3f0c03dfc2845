package field

import (
	"math/rand/v2"
	"testing"
)

// Benchmark sinks so the compiler cannot discard results.
var (
	sinkFp  Fp
	sinkFp4 Fp4
)

func benchFps(n int) []Fp {
	r := rand.New(rand.NewPCG(7, 11))
	out := make([]Fp, n)
	for i := range out {
		out[i] = Fp(r.Uint32N(P-1) + 1)
	}
	return out
}

func benchFp4s(n int) []Fp4 {
	xs := benchFps(4 * n)
	out := make([]Fp4, n)
	for i := range out {
		out[i] = Fp4{xs[4*i], xs[4*i+1], xs[4*i+2], xs[4*i+3]}
	}
	return out
}

// Each loop feeds its previous result into the next operation (a dependency chain), so the work
// cannot be hoisted or vectorised away; the reported time is the latency of one operation.

func BenchmarkFpMul(b *testing.B) {
	xs := benchFps(1024)
	acc := Fp(3)
	i := 0
	for b.Loop() {
		acc = acc.Mul(xs[i&1023])
		i++
	}
	sinkFp = acc
}

func BenchmarkFpAdd(b *testing.B) {
	xs := benchFps(1024)
	acc := Fp(3)
	i := 0
	for b.Loop() {
		acc = acc.Add(xs[i&1023])
		i++
	}
	sinkFp = acc
}

func BenchmarkFpInverse(b *testing.B) {
	acc := Fp(12345)
	for b.Loop() {
		acc = acc.Inverse().Add(One)
	}
	sinkFp = acc
}

func BenchmarkFp4Mul(b *testing.B) {
	xs := benchFp4s(1024)
	acc := Fp4{1, 2, 3, 4}
	i := 0
	for b.Loop() {
		acc = acc.Mul(xs[i&1023])
		i++
	}
	sinkFp4 = acc
}

func BenchmarkFp4Inverse(b *testing.B) {
	acc := Fp4{1, 2, 3, 4}
	for b.Loop() {
		acc = acc.Inverse().AddBase(One)
	}
	sinkFp4 = acc
}

func BenchmarkBatchInverse(b *testing.B) {
	const n = 1 << 16
	src := benchFps(n)
	dst := make([]Fp, n)
	for b.Loop() {
		BatchInverse(dst, src)
		src[0] = dst[n-1] | 1 // data dependency between iterations
	}
	sinkFp = dst[0]
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/element")
}

// BenchmarkFp4MulIndependent measures throughput: the products are independent of each other.
func BenchmarkFp4MulIndependent(b *testing.B) {
	xs := benchFp4s(1024)
	var acc Fp4
	i := 0
	for b.Loop() {
		acc = acc.Add(xs[i&1023].Mul(xs[(i+1)&1023]))
		i++
	}
	sinkFp4 = acc
}
