package constraints_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// opSequence is the code's operations and emitted outputs in order.
func opSequence(code []constraints.Instr) string {
	s := make([]string, len(code))
	for i, in := range code {
		s[i] = in.Op.String()
		if in.Op == constraints.OpEmit {
			s[i] += fmt.Sprint(in.Dst)
		}
	}
	return fmt.Sprint(s)
}

// opChanges counts the instructions whose operation differs from the previous one's.
func opChanges(code []constraints.Instr) int {
	n := 0
	for i := 1; i < len(code); i++ {
		if code[i].Op != code[i-1].Op {
			n++
		}
	}
	return n
}

// TestGroupedByOp: for every test AIR's programs (constraints, interactions, both) and windows
// from 1 to the whole code, the grouped program is a permutation of the program's instructions
// that writes no register before its last reader has read it (checked by running both on random
// Fp4 slots: every output emitted as often and with the same values), keeps everything but the
// code and the register count, and with the host's window changes the operation far less often
// than Compile's order while its registers grow little (Keccak-f: bounded). Window 1 keeps
// Compile's order and registers.
func TestGroupedByOp(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, a := range airs(t) {
		vk := keygen(t, a)
		for _, outs := range []constraints.Outputs{constraints.Constraints, constraints.Interactions, constraints.All} {
			p, err := constraints.Compile(vk, outs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []int{1, 7, constraints.HostOpWindow, len(p.Code) + 1} {
				name := fmt.Sprintf("%s/%d/window %d", a.Name(), outs, w)
				g, err := p.GroupedByOp(w)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(g.Code) != len(p.Code) || len(g.Outputs) != len(p.Outputs) || g.NumSlots() != p.NumSlots() || len(g.Consts) != len(p.Consts) {
					t.Fatalf("%s: %d instructions, %d outputs; program %d, %d", name, len(g.Code), len(g.Outputs), len(p.Code), len(p.Outputs))
				}
				count := func(code []constraints.Instr) string {
					c := map[constraints.Op]int{}
					for _, in := range code {
						c[in.Op]++
					}
					return fmt.Sprint(c)
				}
				if count(g.Code) != count(p.Code) {
					t.Fatalf("%s: operations %s, program %s", name, count(g.Code), count(p.Code))
				}
				for _, in := range g.Code {
					for _, o := range []constraints.Operand{in.A, in.B} {
						if o.Kind() == constraints.KindReg && o.Index() >= g.NumRegs && !(o == 0 && g.NumRegs == 0) {
							t.Fatalf("%s: operand register %d of %d", name, o.Index(), g.NumRegs)
						}
					}
				}
				slots := make([]field.Fp4, p.NumSlots())
				for s := range slots {
					slots[s] = fieldrand.Fp4(r)
					if r.IntN(8) == 0 {
						slots[s] = field.Fp4{field.New(uint32(r.IntN(2)))} // 0 and 1 too
					}
				}
				public := fieldrand.Fps(r, p.NumPublic)
				lift := func(x field.Fp) field.Fp4 { return field.Fp4{x} }
				want := map[int][]field.Fp4{}
				constraints.Eval(p, slots, public, lift, func(o int, v field.Fp4) { want[o] = append(want[o], v) }, nil)
				have := map[int][]field.Fp4{}
				constraints.Eval(g, slots, public, lift, func(o int, v field.Fp4) { have[o] = append(have[o], v) }, nil)
				if fmt.Sprint(have) != fmt.Sprint(want) {
					t.Fatalf("%s: the grouped program's outputs differ from the program's", name)
				}
				if w == 1 && (g.NumRegs != p.NumRegs || opSequence(g.Code) != opSequence(p.Code)) {
					t.Fatalf("%s: window 1 changed the order or the registers (%d, program %d)", name, g.NumRegs, p.NumRegs)
				}
				if a.Name() == "keccakf" && outs == constraints.Constraints && w == constraints.HostOpWindow {
					t.Logf("%s: %d instructions, operation changes %d → %d, registers %d → %d", name, len(p.Code), opChanges(p.Code), opChanges(g.Code), p.NumRegs, g.NumRegs)
					if opChanges(g.Code)*4 > opChanges(p.Code) || g.NumRegs*4 > p.NumRegs*5 {
						t.Errorf("%s: operation changes %d → %d, registers %d → %d: want under a quarter of the changes and at most 1.25 times the registers", name, opChanges(p.Code), opChanges(g.Code), p.NumRegs, g.NumRegs)
					}
				}
			}
		}
	}
	if _, err := (&constraints.Program{}).GroupedByOp(0); !errors.Is(err, constraints.ErrProgram) {
		t.Errorf("window 0: %v", err)
	}
	for name, bad := range map[string]*constraints.Program{
		"a register read before its write": {NumRegs: 1, Code: []constraints.Instr{{Op: constraints.OpEmit, A: constraints.KindReg}}},
		"an unknown operation":             {Code: []constraints.Instr{{Op: 9, A: constraints.KindSlot}}},
		"a register beyond NumRegs":        {NumRegs: 1, Code: []constraints.Instr{{Op: constraints.OpNeg, Dst: 1, A: constraints.KindSlot}}},
	} {
		if _, err := bad.GroupedByOp(4); !errors.Is(err, constraints.ErrProgram) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
