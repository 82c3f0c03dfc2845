package kernels

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

func newTestGrind(t *testing.T) *Grind {
	t.Helper()
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.NewGrind()
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		h.Close()
	})
	return g
}

func randomState(r *rand.Rand) [poseidon2.Width]field.Fp {
	var s [poseidon2.Width]field.Fp
	copy(s[:], fieldrand.Fps(r, poseidon2.Width))
	return s
}

// TestGrindSearchMatchesHostGrinder: the device search returns HostGrinder's witness for random
// states, every absorb index and bits 1..16, with the default slices and with small slices (so
// that the hit often lies beyond the first slice, and slices end inside lane groups).
func TestGrindSearchMatchesHostGrinder(t *testing.T) {
	g := newTestGrind(t)
	r := rand.New(rand.NewPCG(31, 32))
	ctx := context.Background()
	for bits := 1; bits <= 16; bits++ {
		states := 6
		if bits > 12 {
			states = 2
		}
		for i := range states {
			state := randomState(r)
			if i == 0 {
				state[0], state[15] = field.Fp(field.P-1), 1 // edge values
			}
			idx := r.IntN(8)
			want, err := transcript.HostGrinder{}.FindWitness(ctx, state, idx, bits)
			if err != nil {
				t.Fatal(err)
			}
			for _, slice := range []int{0, 1<<max(bits-3, 0) + 7} {
				g.slice = slice
				got, ok, err := g.Search(ctx, state, idx, bits)
				if err != nil {
					t.Fatal(err)
				}
				if !ok || got != want {
					t.Fatalf("bits %d, idx %d, slice %d: got %d (found %v), HostGrinder %d", bits, idx, slice, got, ok, want)
				}
			}
			g.slice = 0
		}
	}
}

// TestGrindSearchRanges checks EncodeSearch on single ranges against a scan in Go, including
// ranges ending just before a hit (the lanes past count must not report it), one-candidate
// ranges, ranges at the top of [0, p) and counts that are not multiples of the lane width.
func TestGrindSearchRanges(t *testing.T) {
	g := newTestGrind(t)
	r := rand.New(rand.NewPCG(33, 34))
	const bits = 4
	mask := uint32(1)<<bits - 1
	for i := range 20 {
		state := randomState(r)
		idx := i % 8
		if err := g.SetState(state); err != nil {
			t.Fatal(err)
		}
		scan := func(base, count uint32) (uint32, bool) {
			for w := base; w < base+count; w++ {
				if transcript.WitnessOK(&state, idx, mask, field.Fp(w)) {
					return w, true
				}
			}
			return 0, false
		}
		var ranges [][2]uint32
		top := uint32(field.P)
		ranges = append(ranges, [2]uint32{0, 1}, [2]uint32{top - 1, 1}, [2]uint32{top - 200, 200}, [2]uint32{r.Uint32N(top - 1000), 1 + r.Uint32N(999)})
		// The first hit at or after a random point, and ranges that stop 1..16 short of it.
		if w, ok := scan(r.Uint32N(1<<20), 1<<12); ok && w >= 40 {
			for short := uint32(1); short <= 16; short++ {
				ranges = append(ranges, [2]uint32{w - 37, 37 - short + 1})
			}
			ranges = append(ranges, [2]uint32{w - 37, 38}, [2]uint32{w, 1})
		}
		for _, rg := range ranges {
			b := testDev.Batch()
			if err := g.EncodeSearch(b, idx, bits, rg[0], rg[1]); err != nil {
				t.Fatal(err)
			}
			got, ok, err := g.ReadResult()
			if err != nil {
				t.Fatal(err)
			}
			want, wantOK := scan(rg[0], rg[1])
			if ok != wantOK || (ok && got != want) {
				t.Fatalf("state %d, range [%d, +%d): got %d (%v), want %d (%v)", i, rg[0], rg[1], got, ok, want, wantOK)
			}
		}
	}
}

// TestGrindSearchWitnessZero: a state whose smallest witness is 0.
func TestGrindSearchWitnessZero(t *testing.T) {
	g := newTestGrind(t)
	r := rand.New(rand.NewPCG(35, 36))
	const bits = 10
	for n := 0; ; n++ {
		state := randomState(r)
		idx := n % 8
		if !transcript.WitnessOK(&state, idx, 1<<bits-1, 0) {
			if n > 1<<16 {
				t.Fatal("no state with witness 0 found")
			}
			continue
		}
		got, ok, err := g.Search(context.Background(), state, idx, bits)
		if err != nil || !ok || got != 0 {
			t.Fatalf("got %d (%v, %v), want 0", got, ok, err)
		}
		return
	}
}

// cancelAfter is a context whose Err reports cancellation from its n-th call on.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

func TestGrindSearchCancel(t *testing.T) {
	g := newTestGrind(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := g.Search(ctx, [16]field.Fp{}, 0, 20); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	// 30 bits in slices of 2^10: practically never a hit within the two slices searched before
	// Err reports cancellation (Search checks once before the first slice, then before each).
	g.slice = 1 << 10
	before := testDev.Stats().Syncs
	w, ok, err := g.Search(&cancelAfter{context.Background(), 4}, [16]field.Fp{1, 2, 3}, 3, 30)
	if ok {
		t.Skipf("hit %d within 2·2^10 candidates at 30 bits", w)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := testDev.Stats().Syncs - before; n != 2 {
		t.Errorf("%d slices searched, want 2", n)
	}
}

func TestGrindSearchValidates(t *testing.T) {
	g := newTestGrind(t)
	for _, c := range []struct {
		idx, bits   int
		base, count uint32
	}{{8, 4, 0, 16}, {-1, 4, 0, 16}, {0, 31, 0, 16}, {0, 4, 0, 0}, {0, 4, uint32(field.P) - 3, 4}, {0, 4, 0, 1<<30 + 1}} {
		if err := g.EncodeSearch(testDev.Batch(), c.idx, c.bits, c.base, c.count); err == nil {
			t.Errorf("EncodeSearch(%v): no error", c)
		}
	}
}

func BenchmarkGrind(b *testing.B) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	g, err := h.NewGrind()
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	r := rand.New(rand.NewPCG(37, 38))
	for _, bits := range []int{16, 18, 20} {
		// The same states for both grinders; the candidates tested (the witnesses + 1) give
		// the permutation rates.
		states := make([][16]field.Fp, 8)
		for i := range states {
			states[i] = randomState(r)
		}
		for _, which := range []string{"device", "host"} {
			b.Run(fmt.Sprintf("%s/bits=%d", which, bits), func(b *testing.B) {
				var tested int64
				for i := 0; b.Loop(); i++ {
					s := states[i%len(states)]
					var w field.Fp
					if which == "device" {
						w, _, err = g.Search(context.Background(), s, 5, bits)
					} else {
						w, err = transcript.HostGrinder{}.FindWitness(context.Background(), s, 5, bits)
					}
					if err != nil {
						b.Fatal(err)
					}
					tested += int64(w) + 1
				}
				b.ReportMetric(float64(tested)/b.Elapsed().Seconds(), "candidates/s")
			})
		}
	}
}

// BenchmarkGrindRange measures grind_search's raw rate: 2^20 candidates at 30 bits (a hit, which
// would end threads early, is unlikely), in permutations per second.
func BenchmarkGrindRange(b *testing.B) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	g, err := h.NewGrind()
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	if err := g.SetState([16]field.Fp{7, 8, 9}); err != nil {
		b.Fatal(err)
	}
	const count = 1 << 20
	for b.Loop() {
		bt := testDev.Batch()
		if err := g.EncodeSearch(bt, 2, 30, 1<<24, count); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := g.ReadResult(); err != nil || ok {
			b.Fatalf("%v, hit %v", err, ok)
		}
	}
	b.ReportMetric(float64(count)*float64(b.N)/b.Elapsed().Seconds(), "perms/s")
}

// TestGrindContinuation: a search continued past a first slice (the GPU form of EncodeSearchAll)
// gives Search's witness: the first slice's hit kept when it has one (the continuation skipped),
// the rest's smallest when it has none.
func TestGrindContinuation(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.NewGrind()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var st [poseidon2.Width]field.Fp
	for i := range st {
		st[i] = field.Fp(31*i + 5)
	}
	const bits, absorb = 12, 2
	want, ok, err := g.Search(context.Background(), st, absorb, bits)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, slice := range []uint32{uint32(want) + 1 + uint32(want)%7, uint32(want), uint32(want) / 2} {
		if err := g.SetState(st); err != nil {
			t.Fatal(err)
		}
		b := testDev.Batch()
		if err := g.encodeSearch(b, g.state.Buffer, absorb, bits, 0, slice, false); err != nil {
			t.Fatal(err)
		}
		if err := g.encodeSearch(b, g.state.Buffer, absorb, bits, slice, 1<<20, true); err != nil {
			t.Fatal(err)
		}
		got, ok, err := g.ReadResult()
		if err != nil || !ok || field.Fp(got) != want {
			t.Errorf("first slice of %d (witness %d): %d, %t, %v", slice, want, got, ok, err)
		}
		// A continuation skipped after a hit leaves the next search as a fresh one (its hit
		// marker reset): a later state's witness is found as the host grinder finds it.
		st2 := st
		st2[0] += field.Fp(slice)
		w2, ok2, err := g.Search(context.Background(), st2, absorb, bits)
		if err != nil || !ok2 || w2 != hostWitness(t, st2, absorb, bits) {
			t.Errorf("the search after a first slice of %d: %d, %t, %v", slice, w2, ok2, err)
		}
	}
}

// hostWitness is the smallest witness for state at absorbIdx by the host grinder.
func hostWitness(t *testing.T, state [poseidon2.Width]field.Fp, absorbIdx, bits int) field.Fp {
	t.Helper()
	w, err := transcript.HostGrinder{}.FindWitness(context.Background(), state, absorbIdx, bits)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
