// Package constraints owns the constraint program: the flat, versioned bytecode an AIR's
// constraint DAG (air.VerifyingKey.DAG) is compiled into once, at keygen, and its one Go
// evaluator (generic over the base and the extension field). Every consumer evaluates the
// program — the reference backend's batch constraint sumcheck and LogUp leaves, the verifier at
// the opening point, the trace checkers — and the device backend uploads the same words once and
// runs them in its interpreter kernel, so the constraints exist in one form only.
//
// A program is straight-line code for a register machine: every instruction writes one
// register, registers are reused once their value is dead (so a device thread holds only the
// live values, not one per DAG node), and Emit instructions hand the program's outputs (the
// constraints in the DAG's sorted order, then each interaction's count and message fields) to
// the caller as soon as they are computed.
package constraints

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

// Version is the bytecode version: the first word of Encode, checked by every interpreter.
const Version = 1

// Op is an instruction's operation.
type Op uint8

const (
	OpAdd Op = iota // r[Dst] = A + B
	OpSub           // r[Dst] = A − B
	OpNeg           // r[Dst] = −A
	OpMul           // r[Dst] = A·B
	// OpEmit: output Dst is A.
	OpEmit
	numOps
)

var opNames = [...]string{"add", "sub", "neg", "mul", "emit"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// Operand is an instruction operand: a register, a slot (a trace value at the evaluation point),
// a constant (Program.Consts) or a public value, told apart by the top two bits. Leaves of the
// DAG are operands, not instructions, so registers hold only computed values.
type Operand uint32

// Operand kinds (the top two bits).
const (
	KindReg    Operand = 0 << 30
	KindSlot   Operand = 1 << 30
	KindConst  Operand = 2 << 30
	KindPublic Operand = 3 << 30
	kindMask   Operand = 3 << 30
)

// Kind is the operand's kind; Index its index within the kind.
func (o Operand) Kind() Operand { return o & kindMask }
func (o Operand) Index() int    { return int(o &^ kindMask) }

func reg(i uint32) Operand    { return KindReg | Operand(i) }
func slot(i int) Operand      { return KindSlot | Operand(i) }
func constant(i int) Operand  { return KindConst | Operand(i) }
func publicVal(i int) Operand { return KindPublic | Operand(i) }

// Instr is one instruction.
type Instr struct {
	Op   Op
	Dst  uint32
	A, B Operand
}

// OutputKind says what an output is.
type OutputKind uint8

const (
	// OutConstraint: constraint K of the DAG's sorted, de-duplicated list (weight λ^K).
	OutConstraint OutputKind = iota
	// OutCount: the count of interaction K.
	OutCount
	// OutMessage: field J of interaction K's message (weight β^J in the fingerprint).
	OutMessage
)

// Output describes one output of a program.
type Output struct {
	Kind OutputKind
	K, J int
}

// Outputs selects what a program computes.
type Outputs uint8

const (
	// Constraints: every constraint of the sorted list.
	Constraints Outputs = 1 << iota
	// Interactions: every interaction's count and message fields.
	Interactions
	// All is Constraints | Interactions.
	All = Constraints | Interactions
)

// Interaction is one interaction of the AIR (air.DAGInteraction): its outputs and bus.
type Interaction struct {
	// Count and Message are output indices.
	Count   int
	Message []int
	Bus     uint16
}

// Program is one AIR's compiled constraints. Slots (OpLoad operands): column c of opening part q
// (parts in the order [common main, preprocessed, cached 0, …]) is slot 2·(PartStart[q]+c) on the
// local row and 2·(PartStart[q]+c)+1 on the next row; then SlotIsFirst, SlotIsLast,
// SlotIsTransition.
type Program struct {
	Code   []Instr
	Consts []field.Fp
	// NumRegs is the number of registers the code uses (its largest live set).
	NumRegs int
	// Outputs lists the outputs by index; NumConstraints of them are constraints, in order.
	Outputs        []Output
	NumConstraints int
	// Interactions are the AIR's interactions (when compiled with Interactions), in DAG order.
	Interactions []Interaction
	MaxMsgLen    int
	NumPublic    int
	// PartWidths are the widths of the opening parts; PartStart their first column; NumCols the
	// columns over all parts.
	PartWidths, PartStart []int
	NumCols               int
	NeedRot               bool
	// Used[s] reports whether slot s is loaded.
	Used []bool
}

// NumSlots is 2·NumCols + 3.
func (p *Program) NumSlots() int { return 2*p.NumCols + 3 }

// SlotIsFirst, SlotIsLast and SlotIsTransition are the selector slots.
func (p *Program) SlotIsFirst() int      { return 2 * p.NumCols }
func (p *Program) SlotIsLast() int       { return 2*p.NumCols + 1 }
func (p *Program) SlotIsTransition() int { return 2*p.NumCols + 2 }

// ErrProgram is wrapped by compile and decode errors.
var ErrProgram = errors.New("constraints: invalid program")

// OpeningPartWidths returns the widths of the opening parts [common main, preprocessed (if any),
// cached 0, …] (spec B §1.1).
func OpeningPartWidths(w air.TraceWidth) []int {
	out := []int{w.CommonMain}
	if w.HasPreprocessed() {
		out = append(out, w.Preprocessed)
	}
	return append(out, w.CachedMains...)
}

// Compile compiles vk's DAG: only the nodes the selected outputs need, in DAG order, with
// registers allocated by liveness (a register is reused as soon as its last reader has run).
// It rejects a DAG that reads a variable outside the AIR's widths or a challenge, or that is not
// topologically ordered.
func Compile(vk *air.VerifyingKey, outs Outputs) (*Program, error) {
	return compile(vk, outs, nil)
}

// compile is Compile emitting only the outputs keep accepts (all when keep is nil); the outputs'
// numbering and the program's metadata are Compile's either way.
func compile(vk *air.VerifyingKey, outs Outputs, keep func(o int) bool) (*Program, error) {
	if vk == nil || vk.DAG == nil {
		return nil, fmt.Errorf("%w: missing verifying key", ErrProgram)
	}
	w := vk.Width
	if w.CommonMain < 0 {
		return nil, fmt.Errorf("%w: common main width %d", ErrProgram, w.CommonMain)
	}
	p := &Program{NeedRot: vk.NeedRot, PartWidths: OpeningPartWidths(w), NumPublic: vk.NumPublicValues}
	for _, pw := range p.PartWidths {
		if pw < 0 {
			return nil, fmt.Errorf("%w: negative width", ErrProgram)
		}
		p.PartStart = append(p.PartStart, p.NumCols)
		p.NumCols += pw
	}
	p.Used = make([]bool, p.NumSlots())
	g := vk.DAG
	n := len(g.Nodes)

	// Outputs, and the nodes they read.
	var outNode []int
	if outs&Constraints != 0 {
		for k, idx := range g.ConstraintIdx {
			p.Outputs = append(p.Outputs, Output{Kind: OutConstraint, K: k})
			outNode = append(outNode, idx)
		}
		p.NumConstraints = len(g.ConstraintIdx)
	}
	if outs&Interactions != 0 {
		for k, in := range g.Interactions {
			it := Interaction{Count: len(p.Outputs), Bus: in.Bus}
			p.Outputs = append(p.Outputs, Output{Kind: OutCount, K: k})
			outNode = append(outNode, in.Count)
			for j, m := range in.Message {
				it.Message = append(it.Message, len(p.Outputs))
				p.Outputs = append(p.Outputs, Output{Kind: OutMessage, K: k, J: j})
				outNode = append(outNode, m)
			}
			p.MaxMsgLen = max(p.MaxMsgLen, len(in.Message))
			p.Interactions = append(p.Interactions, it)
		}
	}
	for o, idx := range outNode {
		if idx < 0 || idx >= n {
			return nil, fmt.Errorf("%w: output %d reads node %d of %d", ErrProgram, o, idx, n)
		}
	}

	// Per node: its operands, validated, and whether an output needs it.
	operands := func(i int) []int {
		switch nd := g.Nodes[i]; nd.Op {
		case air.OpAdd, air.OpSub, air.OpMul:
			return []int{nd.L, nd.R}
		case air.OpNeg:
			return []int{nd.L}
		}
		return nil
	}
	if keep != nil {
		for o := range outNode {
			if !keep(o) {
				outNode[o] = -1
			}
		}
	}
	needed := make([]bool, n)
	for _, idx := range outNode {
		if idx >= 0 {
			needed[idx] = true
		}
	}
	for i := n - 1; i >= 0; i-- {
		if !needed[i] {
			continue
		}
		for _, c := range operands(i) {
			if c < 0 || c >= i {
				return nil, fmt.Errorf("%w: node %d is not topologically ordered", ErrProgram, i)
			}
			needed[c] = true
		}
	}
	// Leaves (trace values, selectors, constants, public values) become operands; every other
	// needed node is an instruction with a register, freed after its last reader (its emits
	// directly follow its definition).
	hasPre := w.HasPreprocessed()
	k := len(w.CachedMains)
	operand := make([]Operand, n)
	isLeaf := make([]bool, n)
	constIdx := map[field.Fp]int{}
	for i := range n {
		if !needed[i] {
			continue
		}
		nd := g.Nodes[i]
		switch nd.Op {
		case air.OpVariable:
			v := nd.Var
			isLeaf[i] = true
			if v.Entry == air.EntryPublic {
				if v.Index < 0 || v.Index >= vk.NumPublicValues {
					return nil, fmt.Errorf("%w: node %d reads public value %d of %d", ErrProgram, i, v.Index, vk.NumPublicValues)
				}
				operand[i] = publicVal(v.Index)
				continue
			}
			part := -1
			switch v.Entry {
			case air.EntryPreprocessed:
				if hasPre {
					part = 1
				}
			case air.EntryMain:
				switch {
				case v.PartIndex == k:
					part = 0
				case v.PartIndex >= 0 && v.PartIndex < k:
					part = 1 + b2i(hasPre) + v.PartIndex
				}
			}
			if part < 0 || v.Index < 0 || v.Index >= p.PartWidths[part] || v.Offset < 0 || v.Offset > 1 ||
				(v.Offset == 1 && !vk.NeedRot) {
				return nil, fmt.Errorf("%w: node %d reads unsupported variable %v", ErrProgram, i, v)
			}
			operand[i] = slot(2*(p.PartStart[part]+v.Index) + v.Offset)
		case air.OpIsFirstRow:
			isLeaf[i], operand[i] = true, slot(p.SlotIsFirst())
		case air.OpIsLastRow:
			isLeaf[i], operand[i] = true, slot(p.SlotIsLast())
		case air.OpIsTransition:
			isLeaf[i], operand[i] = true, slot(p.SlotIsTransition())
		case air.OpConstant:
			ci, ok := constIdx[nd.C]
			if !ok {
				ci = len(p.Consts)
				constIdx[nd.C] = ci
				p.Consts = append(p.Consts, nd.C)
			}
			isLeaf[i], operand[i] = true, constant(ci)
		case air.OpAdd, air.OpSub, air.OpMul, air.OpNeg:
		default:
			return nil, fmt.Errorf("%w: node %d has unknown kind %d", ErrProgram, i, nd.Op)
		}
		if isLeaf[i] && operand[i].Kind() == KindSlot {
			p.Used[operand[i].Index()] = true
		}
	}
	// The order the instructions run in (seq: positions of the needed nodes; a leaf appears where
	// its emits go), and for each computed node the position of its last reader.
	seq := scheduleNodes(n, outNode, needed, isLeaf, operands)
	pos := make([]int, n)
	for q, i := range seq {
		pos[i] = q
	}
	lastUse := make([]int, n)
	for _, i := range seq {
		lastUse[i] = max(lastUse[i], pos[i])
		if isLeaf[i] {
			continue
		}
		for _, c := range operands(i) {
			lastUse[c] = max(lastUse[c], pos[i])
		}
	}
	emits := make([][]int, n)
	for o, idx := range outNode {
		if idx >= 0 {
			emits[idx] = append(emits[idx], o)
		}
	}
	dying := make([][]int, len(seq)) // dying[q]: computed nodes whose last reader is at position q
	for _, i := range seq {
		if !isLeaf[i] && lastUse[i] > pos[i] {
			dying[lastUse[i]] = append(dying[lastUse[i]], i)
		}
	}
	var free []uint32
	alloc := func() uint32 {
		if len(free) > 0 {
			r := free[len(free)-1]
			free = free[:len(free)-1]
			return r
		}
		r := uint32(p.NumRegs)
		p.NumRegs++
		return r
	}
	for q, i := range seq {
		if !isLeaf[i] {
			nd := g.Nodes[i]
			in := Instr{A: operand[nd.L]}
			switch nd.Op {
			case air.OpAdd:
				in.Op, in.B = OpAdd, operand[nd.R]
			case air.OpSub:
				in.Op, in.B = OpSub, operand[nd.R]
			case air.OpMul:
				in.Op, in.B = OpMul, operand[nd.R]
			case air.OpNeg:
				in.Op = OpNeg
			}
			// Operands whose last reader is this node die now: the result may reuse a register.
			for _, d := range dying[q] {
				free = append(free, operand[d].regIndex())
			}
			in.Dst = alloc()
			operand[i] = reg(in.Dst)
			p.Code = append(p.Code, in)
		}
		for _, o := range emits[i] {
			p.Code = append(p.Code, Instr{Op: OpEmit, Dst: uint32(o), A: operand[i]})
		}
		if !isLeaf[i] && lastUse[i] == q { // read by no later node: only by its emits
			free = append(free, operand[i].regIndex())
		}
	}
	return p, nil
}

func (o Operand) regIndex() uint32 { return uint32(o.Index()) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CheckOpeningsShape checks one trace's column openings (proof layout: per part, with the
// rotation of each column after it when NeedRot) against the program.
func (p *Program) CheckOpeningsShape(openings [][]field.Fp4) error {
	if len(openings) != len(p.PartWidths) {
		return fmt.Errorf("%d parts, want %d", len(openings), len(p.PartWidths))
	}
	f := 1
	if p.NeedRot {
		f = 2
	}
	for q, pw := range p.PartWidths {
		if len(openings[q]) != pw*f {
			return fmt.Errorf("part %d has %d openings, want %d", q, len(openings[q]), pw*f)
		}
	}
	return nil
}

// OpeningSlots fills slot values from one trace's column openings in proof layout and the
// selector values (is_first, is_last); missing rotations read as zero. The layout must have been
// checked.
func (p *Program) OpeningSlots(openings [][]field.Fp4, isFirst, isLast field.Fp4) []field.Fp4 {
	slots := make([]field.Fp4, p.NumSlots())
	for q, pw := range p.PartWidths {
		for c := 0; c < pw; c++ {
			s := 2 * (p.PartStart[q] + c)
			if p.NeedRot {
				slots[s] = openings[q][2*c]
				slots[s+1] = openings[q][2*c+1]
			} else {
				slots[s] = openings[q][c]
			}
		}
	}
	slots[p.SlotIsFirst()] = isFirst
	slots[p.SlotIsLast()] = isLast
	slots[p.SlotIsTransition()] = field.Fp4One.Sub(isLast)
	return slots
}

// DevicePieces is the number of pieces devices split a key's program into (Split) where one
// point's walk of the whole program would leave them idle: Keccak-f's 39,536 instructions become
// 126 pieces of at most 388 instructions and 4 registers. The straight-line code generated for
// an AIR's round 0 at run time (internal/kernels/piececode) is generated from this split.
const DevicePieces = 128

// DeviceRoundPieces is the split of the constraint sumcheck's rounds j ≥ 1 on devices, finer than
// DevicePieces: a round's work items (piece, pair, X) walk their piece with its registers in
// threadgroup memory, so the longest piece bounds a round with few pairs and the most registers
// bound the threads per group. Keccak-f: 364 pieces of at most 196 instructions and 4
// registers (DevicePieces: 388 and 4), 42,750 instructions in all (42,743).
const DeviceRoundPieces = 512

// Split compiles the outputs of Compile(vk, outs) into at most k programs over contiguous ranges
// of outputs, of about equal code size: together they emit every output exactly once, under the
// same output numbering, so their emits add up to the one program's. A device evaluates the
// pieces side by side where one point's serial walk of the whole program would leave it idle (the
// last rounds of the constraint sumcheck have a handful of points). Subexpressions shared by two
// pieces are computed in both.
func Split(vk *air.VerifyingKey, outs Outputs, k int) ([]*Program, error) {
	whole, err := Compile(vk, outs)
	if err != nil {
		return nil, err
	}
	nOut := len(whole.Outputs)
	if k <= 1 || nOut <= 1 {
		return []*Program{whole}, nil
	}
	// The node each output reads, in output order (as compile numbers them).
	g := vk.DAG
	var outNode []int
	if outs&Constraints != 0 {
		outNode = append(outNode, g.ConstraintIdx...)
	}
	if outs&Interactions != 0 {
		for _, in := range g.Interactions {
			outNode = append(outNode, in.Count)
			outNode = append(outNode, in.Message...)
		}
	}
	// Greedy ranges: grow the current piece output by output, counting the computed nodes its
	// cone adds to the piece (leaves are operands, not code), and cut when it reaches its share.
	target := max(len(whole.Code)/k, 1)
	covered := make([]int, len(g.Nodes)) // piece+1 that computed the node, 0: none yet
	var bounds []int                     // first output of each piece after the first
	piece, size := 1, 0
	var stack []int
	for o, root := range outNode {
		if size >= target && len(bounds) < k-1 {
			bounds = append(bounds, o)
			piece, size = piece+1, 0
		}
		stack = append(stack[:0], root)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if covered[i] == piece {
				continue
			}
			covered[i] = piece
			switch nd := g.Nodes[i]; nd.Op {
			case air.OpAdd, air.OpSub, air.OpMul:
				size++
				stack = append(stack, nd.L, nd.R)
			case air.OpNeg:
				size++
				stack = append(stack, nd.L)
			}
		}
		size++ // the emit
	}
	// The pieces are compiled side by side (each compile walks the whole DAG: Keccak-f's 126
	// pieces take ~67 ms one after another).
	starts := append([]int{0}, bounds...)
	out := make([]*Program, len(starts))
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(runtime.GOMAXPROCS(0), len(starts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(starts); i = int(next.Add(1) - 1) {
				lo, hi := starts[i], nOut
				if i+1 < len(starts) {
					hi = starts[i+1]
				}
				out[i], errs[i] = compile(vk, outs, func(o int) bool { return o >= lo && o < hi })
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// scheduleNodes orders the needed nodes for compile: each output's cone depth first, outputs in
// output order, of a node's operands the one that needs more registers first (Sethi–Ullman
// numbers, counted as if the cone were a tree), each node once, after its operands. A leaf is
// listed (once) only where an output reads it directly: its emit goes there. Why: the DAG's own
// order computes many expressions side by side; depth first, a piece of a split program keeps few
// values live (Keccak-f's pieces of DeviceRoundPieces: 33 registers at most in the DAG's order, 4
// depth first), and the device keeps a piece's registers in group memory.
func scheduleNodes(n int, outNode []int, needed, isLeaf []bool, operands func(i int) []int) []int {
	need := make([]int, n)
	for i := range n {
		if !needed[i] || isLeaf[i] {
			continue
		}
		var ns []int
		for _, c := range operands(i) {
			ns = append(ns, need[c]) // 0 for a leaf: an operand, not a register
		}
		if len(ns) == 2 && ns[1] > ns[0] {
			ns[0], ns[1] = ns[1], ns[0]
		}
		m := 1
		for k, v := range ns {
			m = max(m, v+k)
		}
		need[i] = m
	}
	const (
		fresh = iota
		open
		done
	)
	state := make([]uint8, n)
	seq := make([]int, 0, n)
	var stack []int
	for _, root := range outNode {
		if root < 0 || state[root] == done {
			continue
		}
		if isLeaf[root] {
			state[root] = done
			seq = append(seq, root)
			continue
		}
		stack = append(stack[:0], root)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			switch state[i] {
			case fresh:
				state[i] = open
				ops := operands(i)
				// Pushed in reverse visiting order: the operand that needs more registers on top.
				first, second := -1, -1
				if len(ops) > 0 {
					first = ops[0]
				}
				if len(ops) > 1 {
					second = ops[1]
					if need[second] > need[first] {
						first, second = second, first
					}
				}
				for _, c := range []int{second, first} {
					if c >= 0 && !isLeaf[c] && state[c] == fresh {
						stack = append(stack, c)
					}
				}
			case open:
				state[i] = done
				seq = append(seq, i)
				stack = stack[:len(stack)-1]
			default:
				stack = stack[:len(stack)-1]
			}
		}
	}
	return seq
}
