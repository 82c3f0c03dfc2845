package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// Program is a constraint program (internal/constraints) on a device, for the interpreter of
// shaders/include/program.h: the encoded words, uploaded once (a device backend keeps one per
// verifying key), and its counts. The constants and public values an evaluation reads are a
// separate small buffer (ConstsAndPublic), since public values change with every proof.
type Program struct {
	Words                        *gpu.Array[uint32]
	NumRegs, NumSlots, NumOutput int
	NumConsts, NumPublic         int
	// NumCode is the number of instructions.
	NumCode int
	// Kinds[o] is output o's kind (PROG_OUT_* of program.h), on the device.
	Kinds  *gpu.Array[uint32]
	consts []field.Fp
	// Generated is the program's generated whole-program round-0 code (UseGenerated; nil: none),
	// which round 0 runs in place of the interpreter where the program runs whole.
	Generated *GeneratedWhole
}

// hostCode holds the host device's code of each program (DeviceCode), made once per program and
// dropped when the program is collected (a long-running worker sees a program per key it loads).
var hostCode sync.Map // weak.Pointer[constraints.Program] → *hostCodeEntry

type hostCodeEntry struct {
	once sync.Once
	p    *constraints.Program
	err  error
}

// DeviceCode is p as dev's interpreter runs it: on the host device its code grouped into runs of
// one operation (constraints.GroupedByOp, window constraints.HostOpWindow; made once per program),
// since that interpreter branches on every instruction's operation, which in Compile's order
// changes at four instructions of five; elsewhere p. Its NumRegs is the register scratch the
// device's kernels need: plans read it from here.
func DeviceCode(dev *gpu.Device, p *constraints.Program) (*constraints.Program, error) {
	if p == nil || !isHost(dev) {
		return p, nil
	}
	key := weak.Make(p)
	v, loaded := hostCode.LoadOrStore(key, &hostCodeEntry{})
	if !loaded {
		runtime.AddCleanup(p, func(k weak.Pointer[constraints.Program]) { hostCode.Delete(k) }, key)
	}
	e := v.(*hostCodeEntry)
	e.once.Do(func() { e.p, e.err = p.GroupedByOp(constraints.HostOpWindow) })
	return e.p, e.err
}

// UploadProgram encodes p as dev runs it (DeviceCode) and uploads it (two buffers named after
// name).
func UploadProgram(dev *gpu.Device, name string, p *constraints.Program) (*Program, error) {
	p, err := DeviceCode(dev, p)
	if err != nil {
		return nil, fmt.Errorf("kernels: program %s: %w", name, err)
	}
	words, err := p.Encode()
	if err != nil {
		return nil, err
	}
	if len(words) >= maxElems {
		return nil, fmt.Errorf("kernels: program %s: %d words", name, len(words))
	}
	dp := &Program{NumRegs: p.NumRegs, NumSlots: p.NumSlots(), NumOutput: len(p.Outputs), NumConsts: len(p.Consts),
		NumPublic: p.NumPublic, NumCode: len(p.Code), consts: p.Consts}
	if dp.Words, err = gpu.UploadArray(dev, "program "+name, words); err != nil {
		return nil, err
	}
	kinds := make([]uint32, max(len(p.Outputs), 1))
	for o, out := range p.Outputs {
		kinds[o] = uint32(out.Kind)
	}
	if dp.Kinds, err = gpu.UploadArray(dev, "program "+name+" output kinds", kinds); err != nil {
		dp.Free()
		return nil, err
	}
	return dp, nil
}

// Free releases the program's buffers.
func (p *Program) Free() {
	for _, a := range []*gpu.Array[uint32]{p.Words, p.Kinds} {
		if a != nil {
			a.Free()
		}
	}
	p.Words, p.Kinds = nil, nil
}

// ConstsAndPublic returns the cp buffer of program.h for these public values: the Montgomery
// constants, then the Montgomery public values (at least one word).
func (p *Program) ConstsAndPublic(public []field.Fp) ([]Mont, error) {
	if len(public) != p.NumPublic {
		return nil, fmt.Errorf("kernels: program: %d public values, want %d", len(public), p.NumPublic)
	}
	out := appendConstsAndPublic(nil, p.consts, public)
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out, nil
}

// appendConstsAndPublic appends the Montgomery forms of consts, then of public, to out.
func appendConstsAndPublic(out []Mont, consts, public []field.Fp) []Mont {
	for _, c := range consts {
		out = append(out, MontOf(c))
	}
	for _, v := range public {
		out = append(out, MontOf(v))
	}
	return out
}

// EvalBuffers are the per-dispatch buffers of an evaluation at points points: cp (ConstsAndPublic),
// slots ([slot][point]) and regs (scratch, [reg][point]). Slots and registers are Mont words
// whether an entry is a base value or, with Ext, an Fp4 (four interleaved words): every word is
// a Montgomery coordinate, and sizes count words.
type EvalBuffers struct {
	CP, Slots, Regs *gpu.Array[Mont]
	Points          int
	Ext             bool
}

func (p *Program) check(op string, e *EvalBuffers) error {
	w := 1
	if e.Ext {
		w = 4
	}
	if e.Points <= 0 {
		return fmt.Errorf("kernels: %s: %d points", op, e.Points)
	}
	if err := checkArray(op, e.CP, max(p.NumConsts+p.NumPublic, 1)); err != nil {
		return err
	}
	if err := checkArray(op, e.Slots, w*p.NumSlots*e.Points); err != nil {
		return err
	}
	return checkArray(op, e.Regs, max(w*p.NumRegs*e.Points, 1))
}

// EncodeEvalOutputs encodes the evaluation of every output at every point (prog_eval_outputs, or
// prog_eval_outputs4 with e.Ext): out[o·Points + t] (an Fp4 per entry with e.Ext: four words, as
// in the slots).
func (p *Program) EncodeEvalOutputs(b *gpu.Batch, dev *gpu.Device, e *EvalBuffers, out *gpu.Array[Mont]) error {
	if err := p.check("EvalOutputs", e); err != nil {
		return err
	}
	w := 1
	if e.Ext {
		w = 4
	}
	if err := checkArray("EvalOutputs", out, max(w*p.NumOutput*e.Points, 1)); err != nil {
		return err
	}
	g, t := shapeFor(dev, "prog_eval_outputs4", e.Points)
	if e.Ext {
		dispatchProgEvalOutputs4(b, g, t, p.Words.Buffer, e.CP.Buffer, e.Slots.Buffer, e.Regs.Buffer, out.Buffer, progEvalParams{points: uint32(e.Points)})
	} else {
		dispatchProgEvalOutputs(b, g, t, p.Words.Buffer, e.CP.Buffer, e.Slots.Buffer, e.Regs.Buffer, out.Buffer, progEvalParams{points: uint32(e.Points)})
	}
	return b.Err()
}

// EncodeEvalCombine4 encodes the batched combination of every point over the extension field
// (prog_eval_combine4; e.Ext must be set): out[3t .. 3t+3) = (Zc, Num, Den) as Fp4, weights one
// Fp4 per output (constraints.Weights.Out), denConst one Fp4 (added when hasDen).
func (p *Program) EncodeEvalCombine4(b *gpu.Batch, dev *gpu.Device, e *EvalBuffers, weights, denConst, out *gpu.Array[Mont4], hasDen bool) error {
	if !e.Ext {
		return fmt.Errorf("kernels: EvalCombine4: extension slots needed")
	}
	if err := p.check("EvalCombine4", e); err != nil {
		return err
	}
	if err := checkArray("EvalCombine4", weights, p.NumOutput); err != nil {
		return err
	}
	if err := checkArray("EvalCombine4", denConst, 1); err != nil {
		return err
	}
	if err := checkArray("EvalCombine4", out, 3*e.Points); err != nil {
		return err
	}
	g, t := shapeFor(dev, "prog_eval_combine4", e.Points)
	dispatchProgEvalCombine4(b, g, t, p.Words.Buffer, e.CP.Buffer, p.Kinds.Buffer, weights.Buffer, denConst.Buffer,
		e.Slots.Buffer, e.Regs.Buffer, out.Buffer, progCombineParams{points: uint32(e.Points), hasDen: uint32(b2u(hasDen))})
	return b.Err()
}

func b2u(v bool) int {
	if v {
		return 1
	}
	return 0
}

// ProgramPieces is a program split into pieces (constraints.Split) on a device, for the kernels
// that spread one evaluation point's program over several threads (zc_round_pieces): every
// piece's words, one after the other, with its slot operands renumbered to the piece's own slots
// (0, 1, … in the order of Slots[k]), so that a thread's scratch holds only the slots its piece
// reads. The pieces keep the program's output numbering.
type ProgramPieces struct {
	Words *gpu.Array[uint32]
	// WordOff[k] is piece k's first word; Slots[k] its slots (the program's numbering) by local
	// index.
	WordOff []int
	Slots   [][]int
	// MaxSlots and MaxRegs are the largest piece's slots and registers.
	MaxSlots, MaxRegs int
	// Generated is the pieces' generated code, built on the device (UseGenerated; nil: kernels
	// interpret the pieces).
	Generated *GeneratedPieces
	// Stamp is constraints.PiecesStamp of the pieces.
	Stamp     string
	programs  []*constraints.Program
	consts    [][]field.Fp
	numPublic int
}

// UploadPieces encodes the pieces (their slots renumbered) and uploads them.
func UploadPieces(dev *gpu.Device, name string, pieces []*constraints.Program) (*ProgramPieces, error) {
	if len(pieces) == 0 {
		return nil, fmt.Errorf("kernels: pieces %s: none", name)
	}
	stamp, err := constraints.PiecesStamp(pieces)
	if err != nil {
		return nil, err
	}
	pp := &ProgramPieces{numPublic: pieces[0].NumPublic, Stamp: stamp, programs: pieces}
	var all []uint32
	for _, p := range pieces {
		words, err := p.Encode()
		if err != nil {
			return nil, err
		}
		local := map[uint32]uint32{}
		var slots []int
		code := words[constraints.HeaderWords : constraints.HeaderWords+3*len(p.Code)]
		for i := 0; i < len(code); i += 3 {
			op := code[i] >> 24
			for j, o := range code[i+1 : i+3] {
				if j == 1 && (op == uint32(constraints.OpNeg) || op == uint32(constraints.OpEmit)) {
					continue // B is not read
				}
				if constraints.Operand(o).Kind() != constraints.KindSlot {
					continue
				}
				s := uint32(constraints.Operand(o).Index())
				l, ok := local[s]
				if !ok {
					l = uint32(len(slots))
					local[s] = l
					slots = append(slots, int(s))
				}
				code[i+1+j] = uint32(constraints.KindSlot) | l
			}
		}
		words[5] = uint32(len(slots)) // NumSlots of the header: the piece's own
		pp.WordOff = append(pp.WordOff, len(all))
		pp.Slots = append(pp.Slots, slots)
		pp.MaxSlots = max(pp.MaxSlots, len(slots))
		pp.MaxRegs = max(pp.MaxRegs, p.NumRegs)
		pp.consts = append(pp.consts, p.Consts)
		all = append(all, words...)
	}
	if len(all) >= maxElems {
		return nil, fmt.Errorf("kernels: pieces %s: %d words", name, len(all))
	}
	if pp.Words, err = gpu.UploadArray(dev, "program pieces "+name, all); err != nil {
		return nil, err
	}
	return pp, nil
}

// LevelCode is the pieces' code level-scheduled (constraints.ScheduleLevels) in the words
// zc_round_levels reads (ProgramPieces.LevelWords).
type LevelCode struct {
	// Words: first 3 words per piece, its block's first word, the block's length and the piece's
	// constants; then the blocks: a header (levels, slots, constants, instructions, emits), the
	// level starts (levels + 1 instruction indices), 3 words per instruction (op<<24, operands A
	// and B), and 2 words per emit (output, operand). Operands are registers (slot l of the
	// piece's own slot list: register l; instruction i's result: register slots + i), constants
	// and public values (the piece's cp, as for its program words). The instructions compute
	// values only, level by level (no level empty); the emits, the piece's outputs in the order of
	// its level code, are read after the last level.
	Words []uint32
	// Regs is the most registers of a piece (its slots and instructions), BlockWords the longest
	// block, Consts the most constants of a piece.
	Regs, BlockWords, Consts int
}

// zcLevelHeader is ZC_LEVEL_HEADER of zerocheck.metal: a block's header words.
const zcLevelHeader = 5

// LevelWords returns the pieces' level code.
func (pp *ProgramPieces) LevelWords() (*LevelCode, error) {
	n := len(pp.programs)
	lc := &LevelCode{Words: make([]uint32, 3*n, 3*n+16*n)}
	for k, p := range pp.programs {
		sc, err := constraints.ScheduleLevels(p)
		if err != nil {
			return nil, fmt.Errorf("kernels: pieces: piece %d: %w", k, err)
		}
		slots := pp.Slots[k]
		local := make(map[int]uint32, len(slots))
		for l, s := range slots {
			local[s] = uint32(l)
		}
		ns := uint32(len(slots))
		// The value instructions, renumbered (emit instructions leave the code), and the levels
		// that keep some.
		reg := make([]uint32, len(sc.Code))
		var code []constraints.LevelInstr
		start := []int{0}
		for l := range sc.Levels() {
			for i := sc.Start[l]; i < sc.Start[l+1]; i++ {
				if in := sc.Code[i]; in.Op != constraints.OpEmit {
					reg[i] = ns + uint32(len(code))
					code = append(code, in)
				}
			}
			if len(code) > start[len(start)-1] {
				start = append(start, len(code))
			}
		}
		if len(start) == 1 {
			start = append(start, 0) // one level at least
		}
		operand := func(o constraints.Operand) (uint32, error) {
			switch o.Kind() {
			case constraints.KindReg:
				return uint32(constraints.KindReg) | reg[o.Index()], nil
			case constraints.KindSlot:
				l, ok := local[o.Index()]
				if !ok {
					return 0, fmt.Errorf("kernels: pieces: piece %d reads slot %d, not in its slot list", k, o.Index())
				}
				return uint32(constraints.KindReg) | l, nil
			}
			return uint32(o), nil
		}
		var emits []uint32
		for i, in := range sc.Code {
			if in.Emit == constraints.NoEmit {
				continue
			}
			o := constraints.KindReg | constraints.Operand(i) // a value instruction's own result
			if in.Op == constraints.OpEmit {
				o = in.A
			}
			x, err := operand(o)
			if err != nil {
				return nil, err
			}
			emits = append(emits, uint32(in.Emit), x)
		}
		first := len(lc.Words)
		lc.Words = append(lc.Words, uint32(len(start)-1), ns, uint32(len(p.Consts)), uint32(len(code)), uint32(len(emits)/2))
		for _, x := range start {
			lc.Words = append(lc.Words, uint32(x))
		}
		for _, in := range code {
			a, err := operand(in.A)
			if err != nil {
				return nil, err
			}
			var b uint32
			if in.Op != constraints.OpNeg {
				if b, err = operand(in.B); err != nil {
					return nil, err
				}
			}
			lc.Words = append(lc.Words, uint32(in.Op)<<24, a, b)
		}
		lc.Words = append(lc.Words, emits...)
		words := len(lc.Words) - first
		lc.Words[3*k], lc.Words[3*k+1], lc.Words[3*k+2] = uint32(first), uint32(words), uint32(len(p.Consts))
		lc.Regs = max(lc.Regs, len(slots)+len(code))
		lc.BlockWords = max(lc.BlockWords, words)
		lc.Consts = max(lc.Consts, len(p.Consts))
	}
	if len(lc.Words) >= maxElems {
		return nil, fmt.Errorf("kernels: pieces: %d words of level code", len(lc.Words))
	}
	return lc, nil
}

// NumPieces is the number of pieces.
func (pp *ProgramPieces) NumPieces() int { return len(pp.WordOff) }

// Free releases the words.
func (pp *ProgramPieces) Free() {
	if pp.Words != nil {
		pp.Words.Free()
		pp.Words = nil
	}
}

// Bind returns the buffers of kernels that run the pieces with these public values: cp, every
// piece's constants and public values one after the other; table, 4 words per piece (its first
// word, its first cp word, its first slots entry, its slot count); slots, 2 words per entry (the
// piece's slot, the program's slot), piece after piece (at least one word each).
func (pp *ProgramPieces) Bind(public []field.Fp) (cp []Mont, table, slots []uint32, err error) {
	cp, cpOff, err := pp.ConstsAndPublic(public)
	if err != nil {
		return nil, nil, nil, err
	}
	for k, ss := range pp.Slots {
		table = append(table, uint32(pp.WordOff[k]), uint32(cpOff[k]), uint32(len(slots)/2), uint32(len(ss)))
		for l, s := range ss {
			slots = append(slots, uint32(l), uint32(s))
		}
	}
	if len(slots) == 0 {
		slots = []uint32{0}
	}
	return cp, table, slots, nil
}

// ConstsAndPublic returns every piece's cp buffer (as Program.ConstsAndPublic, plus a zero word)
// one after the other, and each one's first word.
func (pp *ProgramPieces) ConstsAndPublic(public []field.Fp) ([]Mont, []int, error) {
	if len(public) != pp.numPublic {
		return nil, nil, fmt.Errorf("kernels: program pieces: %d public values, want %d", len(public), pp.numPublic)
	}
	var out []Mont
	offs := make([]int, 0, len(pp.consts))
	for _, cs := range pp.consts {
		offs = append(offs, len(out))
		out = append(appendConstsAndPublic(out, cs, public), 0) // a word per piece at least (negation reads constant 0)
	}
	return out, offs, nil
}
