package constraints

import (
	"slices"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
)

func usedSlots(n int, s ...int) *Program {
	p := &Program{Used: make([]bool, n)}
	for _, i := range s {
		p.Used[i] = true
	}
	return p
}

func TestOrderBySharedSlots(t *testing.T) {
	// Piece 0 reads slots 0, 1; piece 3 shares both, piece 1 one of them, piece 2 none.
	ps := []*Program{usedSlots(8, 0, 1), usedSlots(8, 1, 5), usedSlots(8, 6, 7), usedSlots(8, 0, 1, 2)}
	got := OrderBySharedSlots(ps, 1)
	want := []*Program{ps[0], ps[3], ps[1], ps[2]}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want pieces 0, 3, 1, 2", indexes(ps, got))
	}
	// Window one: piece 2 shares slot 0 with piece 0, then piece 1 shares slot 4 with piece 2
	// alone; ties go to the lower index.
	ps = []*Program{usedSlots(8, 0), usedSlots(8, 4), usedSlots(8, 0, 4), usedSlots(8, 5)}
	if got := indexes(ps, OrderBySharedSlots(ps, 1)); !slices.Equal(got, []int{0, 2, 1, 3}) {
		t.Fatalf("order %v, want 0, 2, 1, 3", got)
	}
	if got := OrderBySharedSlots(ps[:2], 3); !slices.Equal(got, ps[:2]) {
		t.Fatalf("two pieces reordered")
	}
}

// indexes is the position in ps of each piece of got.
func indexes(ps, got []*Program) []int {
	out := make([]int, len(got))
	for i, g := range got {
		out[i] = slices.Index(ps, g)
	}
	return out
}

// Keccak-f's device pieces in the shared-slot order are the same pieces, each once, and a window
// of three reads fewer slot rows anew than Split's order does.
func TestOrderBySharedSlotsKeccakf(t *testing.T) {
	vk, err := air.Keygen(keccakf.Air{}, 3, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Split(vk, All, DevicePieces)
	if err != nil {
		t.Fatal(err)
	}
	got := OrderBySharedSlots(ps, 3)
	idx := indexes(ps, got)
	sorted := slices.Clone(idx)
	slices.Sort(sorted)
	for i, k := range sorted {
		if k != i {
			t.Fatalf("not a permutation of the %d pieces: %v", len(ps), idx)
		}
	}
	if idx[0] != 0 {
		t.Fatalf("order starts at piece %d", idx[0])
	}
	// Slot rows read anew: not among the slots of the three pieces before.
	fresh := func(order []*Program) int {
		n := 0
		for i, p := range order {
			for s, u := range p.Used {
				if !u {
					continue
				}
				seen := false
				for _, q := range order[max(i-3, 0):i] {
					seen = seen || q.Used[s]
				}
				if !seen {
					n++
				}
			}
		}
		return n
	}
	if a, b := fresh(ps), fresh(got); b >= a {
		t.Fatalf("shared-slot order reads %d slot rows anew, Split's %d", b, a)
	} else {
		t.Logf("slot rows read anew: %d in Split's order, %d in the shared-slot order", a, b)
	}
}
