package constraints_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// checkLevels checks lc = ScheduleLevels(p) against p: levels partition the code, every level
// is non-empty, a register operand names a value instruction of an earlier level (SSA: the
// register is the instruction's own index) and an instruction of level l > 0 reads one of level
// l − 1 (ASAP); the outputs are emitted as often as p emits them; and on random Fp4 slots lc
// emits every output with the value p gives it. It returns the number of fused emits.
func checkLevels(t *testing.T, r *rand.Rand, name string, p *constraints.Program, lc *constraints.LevelCode) int {
	t.Helper()
	if lc.Start[0] != 0 || lc.Start[len(lc.Start)-1] != len(lc.Code) {
		t.Fatalf("%s: levels %v do not cover %d instructions", name, lc.Start, len(lc.Code))
	}
	levelOf := make([]int, len(lc.Code))
	for l := range lc.Levels() {
		if lc.Start[l+1] <= lc.Start[l] {
			t.Fatalf("%s: level %d empty (%v)", name, l, lc.Start)
		}
		for i := lc.Start[l]; i < lc.Start[l+1]; i++ {
			levelOf[i] = l
		}
	}
	fusedWant := 0
	emits := map[int]int{}
	for _, in := range p.Code {
		if in.Op == constraints.OpEmit {
			emits[int(in.Dst)]++
			if in.A.Kind() == constraints.KindReg {
				fusedWant++ // at most: a register emitted twice keeps one emit instruction
			}
		}
	}
	got := map[int]int{}
	fused := 0
	for i, in := range lc.Code {
		l := levelOf[i]
		ops := []constraints.Operand{in.A, in.B}
		if in.Op == constraints.OpNeg || in.Op == constraints.OpEmit {
			ops = ops[:1]
			if in.B != 0 {
				t.Fatalf("%s: instruction %d (%v) has an operand B %#x", name, i, in.Op, in.B)
			}
		}
		readsPrev := false
		for _, o := range ops {
			if o.Kind() != constraints.KindReg {
				continue
			}
			d := o.Index()
			if d >= len(lc.Code) || levelOf[d] >= l {
				t.Fatalf("%s: instruction %d of level %d reads register %d (level %d)", name, i, l, d, levelOf[min(d, len(lc.Code)-1)])
			}
			if lc.Code[d].Op == constraints.OpEmit {
				t.Fatalf("%s: instruction %d reads register %d, an emit", name, i, d)
			}
			readsPrev = readsPrev || levelOf[d] == l-1
		}
		if l > 0 && !readsPrev {
			t.Fatalf("%s: instruction %d of level %d reads nothing of level %d: not ASAP", name, i, l, l-1)
		}
		if in.Emit != constraints.NoEmit {
			got[in.Emit]++
			if in.Op != constraints.OpEmit {
				fused++
			}
		}
	}
	if fused > fusedWant || len(lc.Code) != len(p.Code)-fused {
		t.Fatalf("%s: %d instructions with %d fused emits, program %d (%d emits of registers)", name, len(lc.Code), fused, len(p.Code), fusedWant)
	}
	if fmt.Sprint(got) != fmt.Sprint(emits) {
		t.Fatalf("%s: emits %v, program %v", name, got, emits)
	}
	for range 2 {
		slots := make([]field.Fp4, p.NumSlots())
		for s := range slots {
			slots[s] = fieldrand.Fp4(r)
		}
		public := fieldrand.Fps(r, p.NumPublic)
		lift := func(x field.Fp) field.Fp4 { return field.Fp4{x} }
		want := map[int][]field.Fp4{}
		constraints.Eval(p, slots, public, lift, func(o int, v field.Fp4) { want[o] = append(want[o], v) }, nil)
		have := map[int][]field.Fp4{}
		constraints.EvalLevels(p, lc, slots, public, lift, func(o int, v field.Fp4) { have[o] = append(have[o], v) }, nil)
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Fatalf("%s: level code emits %v, program %v", name, have, want)
		}
	}
	return fused
}

// TestScheduleLevelsAirs: every test AIR's program and its pieces, and Keccak-f's rounds' pieces
// (constraints.DeviceRoundPieces), whose depth is logged and bounded.
func TestScheduleLevelsAirs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, a := range airs(t) {
		vk := keygen(t, a)
		ks := []int{1, 7}
		if a.Name() == "keccakf" {
			ks = []int{constraints.DeviceRoundPieces}
		}
		for _, k := range ks {
			pieces, err := constraints.Split(vk, constraints.All, k)
			if err != nil {
				t.Fatal(err)
			}
			depth, longest, fused := 0, 0, 0
			for i, p := range pieces {
				lc, err := constraints.ScheduleLevels(p)
				if err != nil {
					t.Fatalf("%s piece %d: %v", a.Name(), i, err)
				}
				fused += checkLevels(t, r, fmt.Sprintf("%s/k%d/piece%d", a.Name(), k, i), p, lc)
				depth, longest = max(depth, lc.Levels()), max(longest, len(p.Code))
			}
			if a.Name() == "keccakf" {
				if fused == 0 {
					t.Errorf("keccakf: no emit fused")
				}
				t.Logf("keccakf in %d pieces: the longest %d instructions, the deepest %d levels", len(pieces), longest, depth)
				if depth > longest/3 {
					t.Errorf("keccakf: %d levels for pieces of up to %d instructions", depth, longest)
				}
			}
		}
	}
}

// randomProgram is straight-line code over slots, constants, public values and nr reused
// registers: every kind of operand, emits of registers (some twice, some never), of slots and of
// constants, dead values, and registers overwritten while their old values are still emitted.
func randomProgram(r *rand.Rand, n, nr int) *constraints.Program {
	p := &constraints.Program{NumRegs: nr, NumCols: 3, NumPublic: 2, Consts: fieldrand.Fps(r, 3)}
	written := []int{}
	operand := func() constraints.Operand {
		switch k := r.IntN(8); {
		case k < 4 && len(written) > 0:
			return constraints.KindReg | constraints.Operand(written[r.IntN(len(written))])
		case k < 6:
			return constraints.KindSlot | constraints.Operand(r.IntN(p.NumSlots()))
		case k < 7:
			return constraints.KindConst | constraints.Operand(r.IntN(len(p.Consts)))
		default:
			return constraints.KindPublic | constraints.Operand(r.IntN(p.NumPublic))
		}
	}
	outs := 0
	for range n {
		if r.IntN(5) == 0 {
			p.Code = append(p.Code, constraints.Instr{Op: constraints.OpEmit, Dst: uint32(outs), A: operand()})
			outs++
			continue
		}
		in := constraints.Instr{Op: constraints.Op(r.IntN(4)), Dst: uint32(r.IntN(nr)), A: operand(), B: operand()}
		if in.Op == constraints.OpNeg {
			in.B = 0
		}
		p.Code = append(p.Code, in)
		written = append(written, int(in.Dst))
	}
	for range outs {
		p.Outputs = append(p.Outputs, constraints.Output{Kind: constraints.OutConstraint})
	}
	p.NumConstraints = outs
	return p
}

func TestScheduleLevelsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 200 {
		p := randomProgram(r, 1+r.IntN(120), 1+r.IntN(12))
		lc, err := constraints.ScheduleLevels(p)
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		checkLevels(t, r, fmt.Sprint("random ", i), p, lc)
	}
}

// TestScheduleLevelsExample: a small program's levels, written out.
func TestScheduleLevelsExample(t *testing.T) {
	s := func(i int) constraints.Operand { return constraints.KindSlot | constraints.Operand(i) }
	reg := func(i int) constraints.Operand { return constraints.KindReg | constraints.Operand(i) }
	p := &constraints.Program{NumRegs: 2, NumCols: 2, Outputs: make([]constraints.Output, 3), Code: []constraints.Instr{
		{Op: constraints.OpMul, Dst: 0, A: s(0), B: s(1)},     // 0: level 0
		{Op: constraints.OpAdd, Dst: 1, A: reg(0), B: s(2)},   // 1: level 1
		{Op: constraints.OpEmit, Dst: 2, A: reg(1)},           // fused into 1
		{Op: constraints.OpSub, Dst: 0, A: s(3), B: s(0)},     // 3: level 0 (register 0 rewritten)
		{Op: constraints.OpMul, Dst: 1, A: reg(1), B: reg(0)}, // 4: level 2, reads 1 and 3
		{Op: constraints.OpEmit, Dst: 0, A: reg(1)},           // fused into 4
		{Op: constraints.OpEmit, Dst: 1, A: reg(1)},           // 4 emitted twice: level 3
	}}
	lc, err := constraints.ScheduleLevels(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &constraints.LevelCode{Start: []int{0, 2, 3, 4, 5}, Code: []constraints.LevelInstr{
		{Op: constraints.OpMul, A: s(0), B: s(1), Emit: constraints.NoEmit},
		{Op: constraints.OpSub, A: s(3), B: s(0), Emit: constraints.NoEmit},
		{Op: constraints.OpAdd, A: reg(0), B: s(2), Emit: 2},
		{Op: constraints.OpMul, A: reg(2), B: reg(1), Emit: 0},
		{Op: constraints.OpEmit, A: reg(3), Emit: 1},
	}}
	if fmt.Sprint(lc) != fmt.Sprint(want) {
		t.Fatalf("levels\n%v\nwant\n%v", lc, want)
	}
}

// TestScheduleLevelsMalformed: code that reads a register before writing it, or names an op,
// operand or output out of range, is refused.
func TestScheduleLevelsMalformed(t *testing.T) {
	s0 := constraints.KindSlot
	for _, c := range []struct {
		name string
		in   constraints.Instr
	}{
		{"unwritten register", constraints.Instr{Op: constraints.OpAdd, Dst: 0, A: constraints.KindReg | 1, B: s0}},
		{"register out of range", constraints.Instr{Op: constraints.OpNeg, Dst: 0, A: constraints.KindReg | 5}},
		{"op", constraints.Instr{Op: 9, Dst: 0, A: s0, B: s0}},
		{"slot", constraints.Instr{Op: constraints.OpMul, Dst: 0, A: s0 | 99, B: s0}},
		{"constant", constraints.Instr{Op: constraints.OpMul, Dst: 0, A: constraints.KindConst | 1, B: s0}},
		{"public value", constraints.Instr{Op: constraints.OpMul, Dst: 0, A: constraints.KindPublic, B: s0}},
		{"output", constraints.Instr{Op: constraints.OpEmit, Dst: 1, A: s0}},
		{"destination", constraints.Instr{Op: constraints.OpAdd, Dst: 2, A: s0, B: s0}},
	} {
		p := &constraints.Program{NumRegs: 2, NumCols: 1, Consts: []field.Fp{3}, Outputs: make([]constraints.Output, 1),
			Code: []constraints.Instr{c.in}}
		if _, err := constraints.ScheduleLevels(p); !errors.Is(err, constraints.ErrProgram) {
			t.Errorf("%s: err %v, want ErrProgram", c.name, err)
		}
	}
}

// BenchmarkScheduleLevels: Keccak-f's rounds' pieces, as a device backend schedules them once
// per key.
func BenchmarkScheduleLevels(b *testing.B) {
	vk := keygen(b, keccakf.Air{})
	pieces, err := constraints.Split(vk, constraints.All, constraints.DeviceRoundPieces)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, p := range pieces {
			if _, err := constraints.ScheduleLevels(p); err != nil {
				b.Fatal(err)
			}
		}
	}
}
