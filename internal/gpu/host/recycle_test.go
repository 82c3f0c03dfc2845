package host_test

import (
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
