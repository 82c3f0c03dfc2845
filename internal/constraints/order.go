package constraints

// OrderBySharedSlots returns the pieces ps (Split's) in an order in which each piece shares as
// many slots as it can with the window pieces before it (greedy from ps[0]; ties to the lower
// index): a device that runs the pieces one after another over a table of slot values finds a
// piece's slots still in its cache when the pieces just before read them. The pieces themselves
// are unchanged, so their emits still add up to the whole program's.
func OrderBySharedSlots(ps []*Program, window int) []*Program {
	if len(ps) < 3 || window < 1 {
		return ps
	}
	slots := make([][]int, len(ps))
	n := 0
	for i, p := range ps {
		for s, u := range p.Used {
			if u {
				slots[i] = append(slots[i], s)
			}
		}
		n = max(n, len(p.Used))
	}
	// recent[s]: how many of the last window placed pieces read slot s.
	recent := make([]int, n)
	order := make([]int, 0, len(ps))
	placed := make([]bool, len(ps))
	place := func(k int) {
		placed[k] = true
		order = append(order, k)
		for _, s := range slots[k] {
			recent[s]++
		}
		if len(order) > window {
			for _, s := range slots[order[len(order)-1-window]] {
				recent[s]--
			}
		}
	}
	place(0)
	for len(order) < len(ps) {
		best, score := -1, -1
		for k := range ps {
			if placed[k] {
				continue
			}
			sc := 0
			for _, s := range slots[k] {
				if recent[s] > 0 {
					sc++
				}
			}
			if sc > score {
				best, score = k, sc
			}
		}
		place(best)
	}
	out := make([]*Program, len(ps))
	for i, k := range order {
		out[i] = ps[k]
	}
	return out
}
