package host_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

// A recycled buffer comes back zeroed from Alloc and as it was left from AllocUninit (the memset
// skipped); a small one is zeroed either way.
func TestAllocUninitSkipsTheZeroing(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n := 3 << 20
	fill := make([]byte, n)
	for i := range fill {
		fill[i] = byte(i%251 + 1)
	}
	got := make([]byte, n)
	for _, c := range []struct {
		uninit bool
		size   int
		stale  bool
	}{{false, n, false}, {true, n, true}, {true, host.RecycleMin - 64, false}} {
		a, err := h.Alloc(c.size)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Upload(a, 0, fill[:c.size]); err != nil {
			t.Fatal(err)
		}
		h.Free(a)
		var b driver.Buffer
		if c.uninit {
			b, err = h.AllocUninit(c.size)
		} else {
			b, err = h.Alloc(c.size)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Download(got[:c.size], b, 0); err != nil {
			t.Fatal(err)
		}
		h.Free(b)
		stale := got[0] == fill[0] && got[c.size-1] == fill[c.size-1]
		zero := got[0] == 0 && got[c.size-1] == 0
		if c.stale && !stale || !c.stale && !zero {
			t.Errorf("uninit %v, %d bytes: first and last bytes %d, %d (stale values wanted: %v)", c.uninit, c.size, got[0], got[c.size-1], c.stale)
		}
	}
}

// fillBuffer uploads n bytes of v to b.
func fillBuffer(t *testing.T, h *host.Backend, b driver.Buffer, n int, v byte) {
	t.Helper()
	if err := h.Upload(b, 0, bytes.Repeat([]byte{v}, n)); err != nil {
		t.Fatal(err)
	}
}

// allBytes reports whether the n bytes of b all equal v.
func allBytes(t *testing.T, h *host.Backend, b driver.Buffer, n int, v byte) bool {
	t.Helper()
	got := make([]byte, n)
	if err := h.Download(got, b, 0); err != nil {
		t.Fatal(err)
	}
	return bytes.Count(got, []byte{v}) == n
}

// A freed buffer serves a smaller request with its first pages (the rest stays cached for the
// next), without a fresh mapping; the pieces merge again when both are freed.
func TestRecyclerSplitsALargerBuffer(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const mib = 1 << 20
	big, err := h.Alloc(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	start, _, _ := host.BufferMapping(big)
	fillBuffer(t, h, big, 64*mib, 7)
	h.Free(big)
	_, _, _, _, _, fresh0 := host.RecyclerStats(h)
	a, err := h.AllocUninit(16*mib - 100)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.AllocUninit(40 * mib)
	if err != nil {
		t.Fatal(err)
	}
	sa, _, _ := host.BufferMapping(a)
	sb, _, _ := host.BufferMapping(b)
	if sa != start || sb != start+16*mib {
		t.Errorf("buffers of 16 and 40 MiB at %#x and %#x, want %#x and %#x (the freed 64 MiB split)", sa, sb, start, start+16*mib)
	}
	if !allBytes(t, h, a, 16*mib-100, 7) || !allBytes(t, h, b, 40*mib, 7) {
		t.Error("the split buffers do not hold the freed buffer's bytes")
	}
	live, cached, peak, _, _, fresh := host.RecyclerStats(h)
	if fresh != fresh0 || live != 56*mib || cached != 8*mib || peak != 64*mib {
		t.Errorf("live %d, cached %d, peak %d, fresh %d → %d; want 56 MiB, 8 MiB, 64 MiB, no fresh bytes", live, cached, peak, fresh0, fresh)
	}
	h.Free(a)
	h.Free(b)
	if _, cached, _, pieces, _, _ := host.RecyclerStats(h); pieces != 1 || cached != 64*mib {
		t.Errorf("after both frees: %d free pieces of %d bytes, want one of 64 MiB", pieces, cached)
	}
}

// Random allocations and frees: live buffers never share memory, Alloc's bytes are zero, and the
// recycler never holds more than the most bytes live at once (in whole granules).
func TestRecyclerNeverHoldsMoreThanThePeak(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	type live struct {
		b driver.Buffer
		n int
		v byte
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var bufs []live
	held, peak := 0, 0
	granules := func(n int) int {
		return (n + host.RecycleGranule - 1) / host.RecycleGranule * host.RecycleGranule
	}
	for step := range 300 {
		if len(bufs) > 0 && (rng.IntN(2) == 0 || held > 160<<20) {
			i := rng.IntN(len(bufs))
			l := bufs[i]
			if !allBytes(t, h, l.b, l.n, l.v) {
				t.Fatalf("step %d: a %d-byte buffer lost its bytes (%d): overwritten by another", step, l.n, l.v)
			}
			h.Free(l.b)
			held -= granules(l.n)
			bufs = append(bufs[:i], bufs[i+1:]...)
		} else {
			n := host.RecycleMin + rng.IntN(24<<20)
			var b driver.Buffer
			if rng.IntN(2) == 0 {
				b, err = h.Alloc(n)
				if err == nil && !allBytes(t, h, b, n, 0) {
					t.Fatalf("step %d: Alloc(%d) is not zero", step, n)
				}
			} else {
				b, err = h.AllocUninit(n)
			}
			if err != nil {
				t.Fatal(err)
			}
			v := byte(step%250 + 1)
			fillBuffer(t, h, b, n, v)
			bufs = append(bufs, live{b, n, v})
			held += granules(n)
			peak = max(peak, held)
		}
		l, cached, p, _, _, _ := host.RecyclerStats(h)
		if l != held || l+cached > peak || p > peak {
			t.Fatalf("step %d: live %d (test: %d), cached %d, recycler's peak %d; the most live was %d", step, l, held, cached, p, peak)
		}
	}
	for _, l := range bufs {
		h.Free(l.b)
	}
}
