package piececode_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

func pieces(t *testing.T, a air.Air) ([]*constraints.Program, string) {
	t.Helper()
	vk, err := air.Keygen(a, 255, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := constraints.Split(vk, constraints.All, constraints.DevicePieces)
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := constraints.PiecesStamp(ps)
	if err != nil {
		t.Fatal(err)
	}
	return ps, stamp
}

// Any AIR's program, Keccak-f's included: the units cover every piece once, in order, each
// within UnitInstructions unless it is a single piece; one function per piece, every output
// emitted once, each unit's switch covering its pieces, the main code calling every unit; the
// same pieces give the same code.
func TestUnitsAndMain(t *testing.T) {
	for _, a := range []air.Air{keccakf.Air{}, testair.FibonacciAir{}, testair.SelfInteractionAir{W: 8, Bus: 5}} {
		ps, _ := pieces(t, a)
		us, err := piececode.Units(ps, a.Name())
		if err != nil {
			t.Fatal(err)
		}
		again, err := piececode.Units(ps, a.Name())
		if err != nil {
			t.Fatal(err)
		}
		main, err := piececode.Main(us, len(ps), a.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(main, "#define AIR_PIECE_FIRST 0u\n") || !strings.Contains(main, "#define AIR_PIECE_COUNT "+strconv.Itoa(len(ps))+"u\n") {
			t.Errorf("%s: main: range macros missing", a.Name())
		}
		next, emits, outputs := 0, 0, 0
		for i, u := range us {
			if u.First != next || u.Count < 1 {
				t.Fatalf("%s: unit %d covers pieces %d+%d, want from %d", a.Name(), i, u.First, u.Count, next)
			}
			next += u.Count
			if u.Count > 1 && u.Instructions > piececode.UnitInstructions {
				t.Errorf("%s: unit %d: %d instructions in %d pieces", a.Name(), i, u.Instructions, u.Count)
			}
			if u.Code != again[i].Code {
				t.Errorf("%s: unit %d: two runs differ", a.Name(), i)
			}
			fn := "air_piece_range_" + strconv.Itoa(u.First) + "("
			if !strings.Contains(u.Code, "AIR_UNIT_FN void "+fn) || !strings.Contains(main, "AIR_UNIT_DECL void "+fn) || strings.Count(main, fn) != 2 {
				t.Errorf("%s: unit %d: its function is not defined once and declared and called once", a.Name(), i)
			}
			for k := u.First; k < u.First+u.Count; k++ {
				if !strings.Contains(u.Code, "PIECE_FN void air_piece_"+strconv.Itoa(k)+"(") || !strings.Contains(u.Code, "case "+strconv.Itoa(k)+"u:") {
					t.Errorf("%s: piece %d missing from unit %d", a.Name(), k, i)
				}
			}
			emits += strings.Count(u.Code, "w + ") // each output's weights, given to one pg_emit
			if strings.Contains(u.Code, "pg_emit5") {
				t.Errorf("%s: unit %d gives more than four outputs at once", a.Name(), i)
			}
		}
		if next != len(ps) {
			t.Fatalf("%s: units cover %d pieces of %d", a.Name(), next, len(ps))
		}
		for _, p := range ps {
			for _, in := range p.Code {
				if in.Op == constraints.OpEmit {
					outputs++
				}
			}
		}
		if emits != outputs || outputs == 0 {
			t.Errorf("%s: %d emits for %d outputs", a.Name(), emits, outputs)
		}
		if a.Name() == "keccakf" && (len(us) < 8 || len(us) > 32) {
			t.Errorf("keccakf: %d units, want 8..32 for parallel compiles", len(us))
		}
	}
}

// A bad range, no pieces or units that do not cover the pieces are errors, not panics.
func TestBadInput(t *testing.T) {
	ps, _ := pieces(t, testair.SelfInteractionAir{W: 8, Bus: 5})
	for _, r := range [][2]int{{-1, 1}, {0, 0}, {0, len(ps) + 1}, {len(ps), 1}} {
		if _, err := piececode.UnitCode(ps, r[0], r[1], "x"); err == nil {
			t.Errorf("pieces %d+%d of %d accepted", r[0], r[1], len(ps))
		}
	}
	if _, err := piececode.Units(nil, "x"); err == nil {
		t.Error("no pieces accepted")
	}
	us, err := piececode.Units(ps, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := piececode.Main(us, len(ps)+1, "x"); err == nil {
		t.Error("units covering too few pieces accepted")
	}
	if _, err := piececode.Main(nil, 0, "x"); err == nil {
		t.Error("no units accepted")
	}
}
