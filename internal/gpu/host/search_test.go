package host_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

var search = host.NewWitnessSearch(kernels.RoundConstantWords())

// goSearch is the search by transcript.WitnessOK, one candidate at a time.
func goSearch(state *[poseidon2.Width]field.Fp, idx int, mask uint32, from, to uint32) (field.Fp, bool) {
	for w := from; w < to; w++ {
		if transcript.WitnessOK(state, idx, mask, field.Fp(w)) {
			return field.Fp(w), true
		}
	}
	return 0, false
}

// TestWitnessSearchMatchesGo: the lane search returns the smallest passing candidate, as the
// one-at-a-time search does, for 1 to 10 bits, every absorb index, random states with the edge
// values 0, 1 and p−1, ranges that start anywhere and end inside a lane block, the top of the
// field (to = p), and ranges with no passing candidate; bad arguments find nothing.
func TestWitnessSearchMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(state *[poseidon2.Width]field.Fp, idx int, mask, from, to uint32) {
		t.Helper()
		w, ok := search(state, idx, mask, from, to)
		ww, wok := goSearch(state, idx, mask, from, to)
		if w != ww || ok != wok {
			t.Fatalf("idx %d mask %#x [%d, %d): lanes (%d, %v), Go (%d, %v)", idx, mask, from, to, w, ok, ww, wok)
		}
	}
	for bits := 1; bits <= 10; bits++ {
		mask := uint32(1)<<bits - 1
		for trial := 0; trial < 6; trial++ {
			var st [poseidon2.Width]field.Fp
			for i := range st {
				st[i] = randomEdgeFp(r)
			}
			idx := r.IntN(poseidon2.Rate)
			check(&st, idx, mask, 0, 1<<(bits+4))
			from := r.Uint32N(1000)
			check(&st, idx, mask, from, from+1+r.Uint32N(40)) // often no hit; partial lane blocks
			check(&st, idx, mask, field.P-37, field.P)
		}
	}
	var st [poseidon2.Width]field.Fp
	for _, bad := range []struct {
		idx      int
		from, to uint32
	}{{-1, 0, 10}, {poseidon2.Width, 0, 10}, {0, 10, 10}, {0, 11, 10}, {0, 0, field.P + 1}} {
		if w, ok := search(&st, bad.idx, 1, bad.from, bad.to); ok {
			t.Errorf("idx %d [%d, %d): found %d, want nothing", bad.idx, bad.from, bad.to, w)
		}
	}
}

// BenchmarkWitnessSearch5: a 5-bit search (WHIR's folding PoW) from 0, as the device backend runs
// it, against transcript.HostGrinder (goroutines on every core).
func BenchmarkWitnessSearch5(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	states := make([][poseidon2.Width]field.Fp, 64)
	for i := range states {
		for k := range states[i] {
			states[i][k] = field.Fp(r.Uint32N(field.P))
		}
	}
	b.Run("lanes", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := search(&states[i%len(states)], 3, 31, 0, 1<<16); !ok {
				b.Fatal("no witness")
			}
		}
	})
	b.Run("HostGrinder", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := (transcript.HostGrinder{}).FindWitness(b.Context(), states[i%len(states)], 3, 5); err != nil {
				b.Fatal(err)
			}
		}
	})
}
