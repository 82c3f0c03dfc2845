package host_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// absorb is the SIMD absorber with the kernels' constants (nil where the build has none).
var absorb = host.NewAbsorber(kernels.RoundConstantWords())

// goAbsorb is poseidon2.Absorb's own loop: Observe once per element.
func goAbsorb(state *[poseidon2.Width]field.Fp, idx int, data []field.Fp) int {
	for _, x := range data {
		state[idx] = x
		if idx++; idx == poseidon2.Rate {
			poseidon2.Permute(state)
			idx = 0
		}
	}
	return idx
}

// randomEdgeFp returns 0, 1, p−1 or a uniform element.
func randomEdgeFp(r *rand.Rand) field.Fp {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return field.Fp(field.P - 1)
	}
	return field.Fp(r.Uint32N(field.P))
}

// TestAbsorbMatchesGo: the SIMD absorb gives the Go loop's state and index for every start index,
// lengths 0 to 100 (no permutation, one, several, a partial block at either end) and random states
// and data with the edge values 0, 1 and p−1; and it is registered with poseidon2 where it exists
// (every x86-64 and arm64 build with GCC 12+ or clang).
func TestAbsorbMatchesGo(t *testing.T) {
	if absorb == nil {
		if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
			t.Fatal("hd_p2_absorb is not built: the C++ compiler lacks __builtin_shufflevector (GCC 12+ or clang needed)")
		}
		return
	}
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 100; n++ {
		for trial := 0; trial < 4; trial++ {
			var want [poseidon2.Width]field.Fp
			for i := range want {
				want[i] = randomEdgeFp(r)
			}
			if trial == 0 {
				for i := range want {
					want[i] = field.Fp(field.P - 1)
				}
			}
			data := make([]field.Fp, n)
			for i := range data {
				data[i] = randomEdgeFp(r)
			}
			idx := r.IntN(poseidon2.Rate)
			got := want
			wantIdx := goAbsorb(&want, idx, data)
			if gotIdx := absorb(&got, idx, data); gotIdx != wantIdx || got != want {
				t.Fatalf("n=%d idx=%d: got idx %d state %v, want idx %d state %v", n, idx, gotIdx, got, wantIdx, want)
			}
		}
	}
	// Registered: a long absorb through poseidon2 matches too.
	var a, b [poseidon2.Width]field.Fp
	data := make([]field.Fp, 1000)
	for i := range data {
		data[i] = randomEdgeFp(r)
	}
	if poseidon2.Absorb(&a, 3, data) != goAbsorb(&b, 3, data) || a != b {
		t.Fatal("poseidon2.Absorb differs from the Go loop")
	}
}

func BenchmarkAbsorb(b *testing.B) {
	data := make([]field.Fp, 8*1024)
	var s [poseidon2.Width]field.Fp
	for _, impl := range []struct {
		name string
		f    func(*[poseidon2.Width]field.Fp, int, []field.Fp) int
	}{{"simd", absorb}, {"go", goAbsorb}} {
		b.Run(impl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				impl.f(&s, 0, data)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/perm")
		})
	}
}

// TestHashSliceThroughAbsorber: poseidon2.HashSliceWith through this package's absorber gives the
// Go sponge's digest at every length around the block size.
func TestHashSliceThroughAbsorber(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := 0; n <= 70; n++ {
		v := make([]field.Fp, n)
		for i := range v {
			v[i] = randomEdgeFp(r)
		}
		var s [poseidon2.Width]field.Fp
		if goAbsorb(&s, 0, v) != 0 {
			poseidon2.Permute(&s)
		}
		if absorb == nil {
			t.Skip("this build has no SIMD absorber")
		}
		if got := poseidon2.HashSliceWith(absorb, v); got != poseidon2.Digest(s[:poseidon2.DigestSize]) {
			t.Fatalf("n=%d: HashSlice %v, want %v", n, got, s[:poseidon2.DigestSize])
		}
	}
}
