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

// Any AIR's program, Keccak-f's included: the modules cover every piece once, in order, each
// within ModuleInstructions unless it is a single piece; one function per piece, every output
// emitted once, the switch covering the module's pieces; the same pieces give the same code.
func TestModules(t *testing.T) {
	for _, a := range []air.Air{keccakf.Air{}, testair.FibonacciAir{}, testair.SelfInteractionAir{W: 8, Bus: 5}} {
		ps, _ := pieces(t, a)
		ms, err := piececode.Modules(ps, a.Name())
		if err != nil {
			t.Fatal(err)
		}
		again, err := piececode.Modules(ps, a.Name())
		if err != nil {
			t.Fatal(err)
		}
		next, emits, outputs := 0, 0, 0
		for i, m := range ms {
			if m.First != next || m.Count < 1 {
				t.Fatalf("%s: module %d covers pieces %d+%d, want from %d", a.Name(), i, m.First, m.Count, next)
			}
			next += m.Count
			if m.Count > 1 && m.Instructions > piececode.ModuleInstructions {
				t.Errorf("%s: module %d: %d instructions in %d pieces", a.Name(), i, m.Instructions, m.Count)
			}
			if m.Code != again[i].Code {
				t.Errorf("%s: module %d: two runs differ", a.Name(), i)
			}
			if !strings.Contains(m.Code, "#define AIR_PIECE_FIRST "+strconv.Itoa(m.First)+"u\n") ||
				!strings.Contains(m.Code, "#define AIR_PIECE_COUNT "+strconv.Itoa(m.Count)+"u\n") {
				t.Errorf("%s: module %d: range macros missing", a.Name(), i)
			}
			for k := m.First; k < m.First+m.Count; k++ {
				if !strings.Contains(m.Code, "PIECE_FN void air_piece_"+strconv.Itoa(k)+"(") || !strings.Contains(m.Code, "case "+strconv.Itoa(k)+"u:") {
					t.Errorf("%s: piece %d missing from module %d", a.Name(), k, i)
				}
			}
			emits += strings.Count(m.Code, "pg_emit(")
		}
		if next != len(ps) {
			t.Fatalf("%s: modules cover %d pieces of %d", a.Name(), next, len(ps))
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
		if a.Name() == "keccakf" && (len(ms) < 8 || len(ms) > 32) {
			t.Errorf("keccakf: %d modules, want 8..32 for parallel compiles", len(ms))
		}
	}
}

// A bad range or no pieces is an error, not a panic.
func TestCodeBadRange(t *testing.T) {
	ps, _ := pieces(t, testair.FibonacciAir{})
	for _, r := range [][2]int{{-1, 1}, {0, 0}, {0, len(ps) + 1}, {len(ps), 1}} {
		if _, err := piececode.Code(ps, r[0], r[1], "x"); err == nil {
			t.Errorf("pieces %d+%d of %d accepted", r[0], r[1], len(ps))
		}
	}
	if _, err := piececode.Modules(nil, "x"); err == nil {
		t.Error("no pieces accepted")
	}
}
