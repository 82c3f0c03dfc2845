package piececode_test

import (
	"os"
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

// The generator is the one scripts/piecegen ran: its Keccak-f output is the header in the tree,
// byte for byte.
func TestKeccakfHeaderIsTheTreesOne(t *testing.T) {
	want, err := os.ReadFile("../../../shaders/include/keccakf_pieces.h")
	if err != nil {
		t.Fatal(err)
	}
	ps, stamp := pieces(t, keccakf.Air{})
	got, err := piececode.Header("keccakf", "Keccak-f (examples/keccakf)", stamp, ps)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("generated %d bytes, the tree's header has %d", len(got), len(want))
	}
}

// Any AIR's program: one function per piece, every output emitted once, the switch covering
// every piece.
func TestAnyAirsPieces(t *testing.T) {
	for _, a := range []air.Air{testair.FibonacciAir{}, testair.SelfInteractionAir{W: 8, Bus: 5}} {
		ps, stamp := pieces(t, a)
		h, err := piececode.Header("t", a.Name(), stamp, ps)
		if err != nil {
			t.Fatal(err)
		}
		emits, outputs := strings.Count(h, "pg_emit("), 0
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
		for k := range ps {
			if !strings.Contains(h, "PIECE_FN void t_piece_"+strconv.Itoa(k)+"(") || !strings.Contains(h, "case "+strconv.Itoa(k)+"u:") {
				t.Errorf("%s: piece %d missing", a.Name(), k)
			}
		}
		if !strings.HasPrefix(h, piececode.Banner) || !strings.Contains(h, stamp) {
			t.Errorf("%s: banner or stamp missing", a.Name())
		}
	}
}
