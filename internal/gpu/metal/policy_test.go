package metal

// These tests run on every OS: they check the backend's decisions (policy.go).

import (
	"strings"
	"testing"
)

func TestCheckSpan(t *testing.T) {
	for _, c := range []struct {
		off, n, size int
		ok           bool
	}{
		{0, 0, 0, true}, {0, 16, 16, true}, {8, 8, 16, true}, {16, 0, 16, true},
		{8, 9, 16, false}, {-1, 4, 16, false}, {0, -1, 16, false}, {17, 0, 16, false},
	} {
		err := checkSpan("upload", c.off, c.n, c.size)
		if (err == nil) != c.ok {
			t.Errorf("checkSpan(%d, %d, %d) = %v, want ok %v", c.off, c.n, c.size, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "metal: upload: range [") {
			t.Errorf("error %q does not name the operation and the range", err)
		}
	}
}

func TestCanBlit(t *testing.T) {
	for _, c := range []struct {
		dst, src, n int
		same, ok    bool
	}{
		{0, 0, 16, false, true},
		{8, 0, 16, false, true},
		{33, 1, 5, false, false}, // unaligned
		{0, 4, 6, false, false},  // size not a multiple of 4
		{0, 16, 16, true, true},  // one buffer, disjoint
		{0, 8, 16, true, false},  // one buffer, overlapping
		{8, 0, 16, true, false},
		{8, 8, 4, true, false}, // onto itself
	} {
		if got := canBlit(c.dst, c.src, c.n, c.same); got != c.ok {
			t.Errorf("canBlit(%d, %d, %d, same %v) = %v, want %v", c.dst, c.src, c.n, c.same, got, c.ok)
		}
	}
}
