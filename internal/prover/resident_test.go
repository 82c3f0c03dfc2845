package prover

import (
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// TestCellBuffers: an arena takes the smallest kept buffer that fits, else a new one, and the
// pool keeps the cellBuffersKept largest of those given back.
func TestCellBuffers(t *testing.T) {
	var c cellBuffers
	a := c.arena()
	b100, b50, b10 := a.alloc(100), a.alloc(50), a.alloc(10)
	if len(b100) != 100 || len(b50) != 50 || len(b10) != 10 {
		t.Fatalf("lengths %d %d %d", len(b100), len(b50), len(b10))
	}
	a.release()
	if len(c.free) != cellBuffersKept || cap(c.free[0]) != 100 || cap(c.free[1]) != 50 {
		t.Fatalf("kept %d buffers (caps %v), want the largest %d", len(c.free), caps(c.free), cellBuffersKept)
	}
	a = c.arena()
	got := a.alloc(40) // the 50-cell buffer, not the 100
	if len(got) != 40 || cap(got) != 50 || &got[0] != &b50[0] {
		t.Errorf("alloc(40): len %d cap %d, want the kept 50-cell buffer", len(got), cap(got))
	}
	big := a.alloc(200) // none fits: a new one
	if len(big) != 200 || len(c.free) != 1 {
		t.Errorf("alloc(200): len %d, %d kept left", len(big), len(c.free))
	}
	a.release()
	if caps(c.free)[0] != 200 || caps(c.free)[1] != 100 {
		t.Errorf("kept caps %v, want [200 100]", caps(c.free))
	}
}

func caps(bs [][]field.Fp) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = cap(b)
	}
	return out
}
