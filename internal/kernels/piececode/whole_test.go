package piececode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// The whole-program code of any short AIR's program: one evaluator, every output emitted once, in
// the program's order, every slot the program reads loaded once, every instruction a value of
// its own; the same program gives the same code. (What the code computes is tested against the
// interpreter and the plain-Go model in internal/kernels: TestZerocheckWholeMatches.)
func TestWhole(t *testing.T) {
	for _, a := range []air.Air{testair.FibonacciAir{}, testair.SelfInteractionAir{W: 8, Bus: 5}, testair.PreprocessedCachedAir{K: 2}} {
		var pre *air.PreprocessedVK
		if a.Width().HasPreprocessed() {
			pre = &air.PreprocessedVK{HypercubeDim: 2, StackingWidth: 1}
		}
		vk, err := air.Keygen(a, 255, false, pre)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := constraints.Compile(vk, constraints.All)
		if err != nil {
			t.Fatal(err)
		}
		code, err := piececode.Whole(pg, a.Name())
		if err != nil {
			t.Fatal(err)
		}
		again, _ := piececode.Whole(pg, a.Name())
		if code != again || !strings.Contains(code, "struct AirWhole {") || strings.Count(code, "PROG_LANES_METHOD void base(") != 1 {
			t.Fatalf("%s: code", a.Name())
		}
		at, prev := 0, -1
		for _, in := range pg.Code { // the emits in the program's order, as the interpreter makes them
			if in.Op != constraints.OpEmit {
				continue
			}
			i := strings.Index(code[at:], fmt.Sprintf("emit.put(%du, ", in.Dst))
			if i < 0 {
				t.Fatalf("%s: output %d not emitted after output %d", a.Name(), in.Dst, prev)
			}
			at, prev = at+i+1, int(in.Dst)
		}
		if n := strings.Count(code, "emit.put("); n != len(pg.Outputs) {
			t.Errorf("%s: %d emits for %d outputs", a.Name(), n, len(pg.Outputs))
		}
		for s, used := range pg.Used {
			load := fmt.Sprintf("lanes_uint s%d = lanes_ld_dev(slots + %du * T + t);", s, s)
			if n := strings.Count(code, load); used && n != 1 || !used && n != 0 {
				t.Errorf("%s: slot %d (read: %v) loaded %d times", a.Name(), s, used, n)
			}
		}
		values := 0
		for _, in := range pg.Code {
			if in.Op != constraints.OpEmit {
				values++
			}
		}
		if n := strings.Count(code, "lanes_uint v"); n != values {
			t.Errorf("%s: %d values for %d instructions", a.Name(), n, values)
		}
	}
}

// Programs the generator cannot write are refused: none, a register read before it is written, an
// unknown operation, an output or a constant out of range.
func TestWholeRefuses(t *testing.T) {
	ok := &constraints.Program{NumRegs: 1, Consts: []field.Fp{3}, Outputs: []constraints.Output{{}}, Code: []constraints.Instr{
		{Op: constraints.OpAdd, Dst: 0, A: constraints.KindConst, B: constraints.KindConst},
		{Op: constraints.OpEmit, Dst: 0, A: constraints.KindReg},
	}}
	if code, err := piececode.Whole(ok, "ok"); err != nil || !strings.Contains(code, "bb_add_lanes(lanes_splat(0x") {
		t.Fatalf("a valid program: %v", err)
	}
	bad := func(name string, edit func(p *constraints.Program)) {
		p := *ok
		p.Code = append([]constraints.Instr(nil), ok.Code...)
		edit(&p)
		if _, err := piececode.Whole(&p, name); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad("register read first", func(p *constraints.Program) { p.Code[0].A = constraints.KindReg })
	bad("unknown op", func(p *constraints.Program) { p.Code[0].Op = 9 })
	bad("output out of range", func(p *constraints.Program) { p.Code[1].Dst = 1 })
	bad("constant out of range", func(p *constraints.Program) { p.Code[0].B = constraints.KindConst | 1 })
	bad("register out of range", func(p *constraints.Program) { p.Code[0].Dst = 1 })
	bad("public value out of range", func(p *constraints.Program) { p.Code[0].B = constraints.KindPublic })
	if _, err := piececode.Whole(&constraints.Program{}, "empty"); err == nil {
		t.Error("an empty program accepted")
	}
}
