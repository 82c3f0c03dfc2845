package constraints

import (
	"fmt"
	"slices"

	"github.com/metalprove/metalprove/internal/field"
)

// Level scheduling: a program's code reordered so that several threads can evaluate one point
// together (the last rounds of the constraint sumcheck on GPUs, whose few points leave one thread
// walking a piece's whole code while the others idle). Instruction i's level is one more than the
// highest level of the instructions whose results it reads (0 when it reads none: slots, constants
// and public values only), so the instructions of one level depend only on earlier levels and can
// run side by side, with a barrier between levels. The reordered code is in SSA form: every value
// instruction writes a register of its own (its index in the reordered code), so no register is
// written while another instruction of its level may still read it.

// NoEmit is LevelInstr.Emit of an instruction that emits nothing.
const NoEmit = -1

// LevelInstr is one instruction of a LevelCode.
type LevelInstr struct {
	Op Op
	// A and B are the operands (B only for OpAdd, OpSub, OpMul): a register operand names the
	// instruction of the LevelCode that computes it, by its index in LevelCode.Code; slots,
	// constants and public values as in the program.
	A, B Operand
	// Emit is the output the instruction emits: for OpEmit the output A is; for a value
	// instruction its own result, as well (a program's emit of a register is fused into the
	// instruction that computes the register, so that it costs no level of its own), or NoEmit.
	Emit int
}

// LevelCode is a program's code ordered by dependency level (ScheduleLevels): level l is
// Code[Start[l]:Start[l+1]], in program order within a level. It evaluates the same outputs as
// the program (each emitted once, by the instruction that Emit names), to the same values.
type LevelCode struct {
	Code  []LevelInstr
	Start []int
}

// Levels is the number of levels (the depth of the program's dependency graph).
func (lc *LevelCode) Levels() int { return len(lc.Start) - 1 }

// Level returns level l's instructions.
func (lc *LevelCode) Level(l int) []LevelInstr { return lc.Code[lc.Start[l]:lc.Start[l+1]] }

// ScheduleLevels reorders p's code by ASAP dependency level into SSA form (LevelCode). A program's
// emit of a register is fused into the instruction that computes it (its Emit), the first emit of
// each register; other emits (of a register emitted twice, of a slot, a constant or a public
// value) stay instructions, one level above what they read. Dead instructions (results never read)
// are kept. It fails on malformed code: an unknown op, an operand index out of range, a register
// read before it is written.
func ScheduleLevels(p *Program) (*LevelCode, error) {
	n := len(p.Code)
	dep, err := codeDeps(p)
	if err != nil {
		return nil, err
	}
	level := make([]int, n)
	emit := make([]int, n)   // the output each instruction emits (NoEmit: none)
	fused := make([]bool, n) // an emit fused into the instruction that computes its operand
	for i, in := range p.Code {
		emit[i] = NoEmit
		for _, d := range dep[i] {
			if d >= 0 {
				level[i] = max(level[i], level[d]+1)
			}
		}
		if in.Op == OpEmit {
			if d := dep[i][0]; d >= 0 && emit[d] == NoEmit {
				emit[d], fused[i] = int(in.Dst), true
			} else {
				emit[i] = int(in.Dst)
			}
		}
	}
	// Order: by level, program order within a level (a stable sort of the kept instructions).
	var order []int
	depth := 0
	for i := range p.Code {
		if !fused[i] {
			order = append(order, i)
			depth = max(depth, level[i]+1)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return level[a] - level[b] })
	at := make([]int, n) // program instruction → its index in the level code
	lc := &LevelCode{Code: make([]LevelInstr, len(order)), Start: make([]int, depth+1)}
	for k, i := range order {
		at[i] = k
		lc.Start[level[i]+1] = k + 1
	}
	for l := 1; l <= depth; l++ { // levels are never empty, but keep Start monotone regardless
		lc.Start[l] = max(lc.Start[l], lc.Start[l-1])
	}
	for k, i := range order {
		in := p.Code[i]
		li := LevelInstr{Op: in.Op, A: in.A, Emit: emit[i]}
		if in.Op != OpNeg && in.Op != OpEmit {
			li.B = in.B
		}
		if d := dep[i][0]; d >= 0 {
			li.A = KindReg | Operand(at[d])
		}
		if d := dep[i][1]; d >= 0 {
			li.B = KindReg | Operand(at[d])
		}
		lc.Code[k] = li
	}
	return lc, nil
}

// codeDeps is, for each instruction of p, the instructions whose results its operands A and B are
// (−1: not a register; B is −1 for OpNeg and OpEmit): the code in SSA form. It fails on malformed
// code: an unknown op, an operand, output or destination index out of range, a register read
// before it is written.
func codeDeps(p *Program) ([][2]int, error) {
	def := make([]int, p.NumRegs) // register → the instruction that last wrote it (−1: none yet)
	for r := range def {
		def[r] = -1
	}
	dep := make([][2]int, len(p.Code))
	for i, in := range p.Code {
		dep[i] = [2]int{-1, -1}
		if in.Op >= numOps {
			return nil, fmt.Errorf("%w: instruction %d: op %d", ErrProgram, i, in.Op)
		}
		ops := []Operand{in.A, in.B}
		if in.Op == OpNeg || in.Op == OpEmit {
			ops = ops[:1]
		}
		for j, o := range ops {
			switch o.Kind() {
			case KindReg:
				r := o.Index()
				if r >= p.NumRegs || def[r] < 0 {
					return nil, fmt.Errorf("%w: instruction %d reads register %d before it is written", ErrProgram, i, r)
				}
				dep[i][j] = def[r]
			case KindSlot:
				if o.Index() >= p.NumSlots() {
					return nil, fmt.Errorf("%w: instruction %d reads slot %d of %d", ErrProgram, i, o.Index(), p.NumSlots())
				}
			case KindConst:
				if o.Index() >= len(p.Consts) {
					return nil, fmt.Errorf("%w: instruction %d reads constant %d of %d", ErrProgram, i, o.Index(), len(p.Consts))
				}
			case KindPublic:
				if o.Index() >= p.NumPublic {
					return nil, fmt.Errorf("%w: instruction %d reads public value %d of %d", ErrProgram, i, o.Index(), p.NumPublic)
				}
			}
		}
		if in.Op == OpEmit {
			if int(in.Dst) >= len(p.Outputs) {
				return nil, fmt.Errorf("%w: instruction %d emits output %d of %d", ErrProgram, i, in.Dst, len(p.Outputs))
			}
			continue
		}
		if int(in.Dst) >= p.NumRegs {
			return nil, fmt.Errorf("%w: instruction %d writes register %d of %d", ErrProgram, i, in.Dst, p.NumRegs)
		}
		def[in.Dst] = i
	}
	return dep, nil
}

// EvalLevels runs lc (ScheduleLevels of p) at one point, as Eval runs p: slots, public, lift and
// emit alike; regs is scratch (one entry per instruction of lc), reused when large enough.
func EvalLevels[T Elem[T]](p *Program, lc *LevelCode, slots []T, public []field.Fp, lift func(field.Fp) T, emit func(out int, v T), regs []T) []T {
	if cap(regs) < len(lc.Code) {
		regs = make([]T, len(lc.Code))
	}
	regs = regs[:len(lc.Code)]
	val := func(o Operand) T { return operandValue(o, p, regs, slots, public, lift) }
	for i, in := range lc.Code {
		var v T
		switch in.Op {
		case OpAdd:
			v = val(in.A).Add(val(in.B))
		case OpSub:
			v = val(in.A).Sub(val(in.B))
		case OpNeg:
			v = val(in.A).Neg()
		case OpMul:
			v = val(in.A).Mul(val(in.B))
		case OpEmit:
			emit(in.Emit, val(in.A))
			continue
		}
		regs[i] = v
		if in.Emit != NoEmit {
			emit(in.Emit, v)
		}
	}
	return regs
}
