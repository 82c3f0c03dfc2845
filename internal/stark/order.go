package stark

import "slices"

// TraceOrder returns the trace order (spec A §3.7, sort_for_stacking): the indices i with
// heights[i] >= 0 (a negative height marks an absent AIR), by height descending, ties by
// AIR index ascending. Heights may be heights or log heights: only their order matters.
func TraceOrder(heights []int) []int {
	var order []int
	for i, h := range heights {
		if h >= 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return heights[b] - heights[a] })
	return order
}
