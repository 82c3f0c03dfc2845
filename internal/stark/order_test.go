package stark

import (
	"slices"
	"testing"
)

func TestTraceOrder(t *testing.T) {
	got := TraceOrder([]int{3, 5, 3, 7, 5, 0})
	if !slices.Equal(got, []int{3, 1, 4, 0, 2, 5}) {
		t.Errorf("TraceOrder = %v", got)
	}
	got = TraceOrder([]int{4, -1, 8, 4, -1})
	if !slices.Equal(got, []int{2, 0, 3}) {
		t.Errorf("TraceOrder with absent AIRs = %v", got)
	}
}
