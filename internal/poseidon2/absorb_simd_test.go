package poseidon2_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// TestSIMDAbsorberMatchesAbsorb: the package's SIMD absorb gives Absorb's state and index for
// every start index and input lengths around the block boundaries, on random states and data,
// edge values (0, p − 1) included.
func TestSIMDAbsorberMatchesAbsorb(t *testing.T) {
	a := poseidon2.SIMDAbsorber()
	if a == nil {
		t.Skip("no SIMD absorber on this CPU")
	}
	r := rand.New(rand.NewPCG(7, 8))
	elem := func() field.Fp {
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return field.Fp(field.P - 1)
		}
		return field.Fp(r.Uint32N(field.P))
	}
	for trial := 0; trial < 200; trial++ {
		for idx := 0; idx < poseidon2.Rate; idx++ {
			n := r.IntN(40)
			if trial%20 == 0 {
				n = 2000 + r.IntN(100)
			}
			data := make([]field.Fp, n)
			for i := range data {
				data[i] = elem()
			}
			var want, got [poseidon2.Width]field.Fp
			for i := range want {
				want[i] = elem()
			}
			got = want
			wi := poseidon2.Absorb(&want, idx, data)
			gi := a(&got, idx, data)
			if wi != gi || want != got {
				t.Fatalf("trial %d idx %d n %d: got idx %d state %v, want idx %d state %v", trial, idx, n, gi, got, wi, want)
			}
		}
	}
}

// BenchmarkSIMDAbsorb: the openings of a keccakf-1024 proof (21,064 elements).
func BenchmarkSIMDAbsorb(b *testing.B) {
	data := make([]field.Fp, 21064)
	for i := range data {
		data[i] = field.Fp(uint32(i*7919) % field.P)
	}
	for _, c := range []struct {
		name string
		a    poseidon2.Absorber
	}{{"simd", poseidon2.SIMDAbsorber()}, {"go", poseidon2.Absorb}} {
		if c.a == nil {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			var s [poseidon2.Width]field.Fp
			for range b.N {
				c.a(&s, 0, data)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(data)/poseidon2.Rate), "ns/perm")
		})
	}
}
