package air

import (
	"fmt"
	"slices"

	"github.com/metalprove/metalprove/internal/field"
)

// Node is one node of the constraint DAG (OpenVM `SymbolicExpressionNode`). Fields not used by Op
// are zero, so Node is comparable and is itself the interning key (degree_multiple included):
//
//	OpVariable: Var           OpConstant: C
//	OpAdd / OpSub / OpMul: L, R, Degree
//	OpNeg: L (the child), Degree
//	selectors: nothing
type Node struct {
	Op     Op
	Var    Var
	C      field.Fp
	L, R   int
	Degree int
}

func (n Node) String() string {
	switch n.Op {
	case OpVariable:
		return n.Var.String()
	case OpConstant:
		return "Const(" + n.C.String() + ")"
	case OpIsFirstRow, OpIsLastRow, OpIsTransition:
		return n.Op.String()
	case OpNeg:
		return fmt.Sprintf("Neg(%d; dm %d)", n.L, n.Degree)
	}
	return fmt.Sprintf("%s(%d, %d; dm %d)", n.Op, n.L, n.R, n.Degree)
}

// DAGInteraction is `Interaction<usize>`: node indices of the message fields and of the count.
type DAGInteraction struct {
	Message     []int
	Count       int
	Bus         uint16
	CountWeight uint32
}

// DAG is OpenVM's SymbolicConstraintsDag: nodes in topological order, the sorted and
// de-duplicated constraint node indices, and the interactions.
type DAG struct {
	Nodes         []Node
	ConstraintIdx []int
	Interactions  []DAGInteraction
}

// dagBuilder is SymbolicDagBuilder: a structural intern table plus a pointer memo (the memo only
// avoids re-walking shared subtrees; add is a pure function of the tree and the node table).
type dagBuilder struct {
	nodes  []Node
	intern map[Node]int
	memo   map[*Expr]int
}

func newDAGBuilder() *dagBuilder {
	return &dagBuilder{intern: map[Node]int{}, memo: map[*Expr]int{}}
}

func (d *dagBuilder) internNode(n Node) int {
	if i, ok := d.intern[n]; ok {
		return i
	}
	i := len(d.nodes)
	d.nodes = append(d.nodes, n)
	d.intern[n] = i
	return i
}

func (d *dagBuilder) constAt(i int) (field.Fp, bool) {
	if d.nodes[i].Op == OpConstant {
		return d.nodes[i].C, true
	}
	return 0, false
}

func (d *dagBuilder) isConst(i int, v field.Fp) bool {
	c, ok := d.constAt(i)
	return ok && c == v
}

func (d *dagBuilder) negChild(i int) (int, bool) {
	if d.nodes[i].Op == OpNeg {
		return d.nodes[i].L, true
	}
	return 0, false
}

// add is SymbolicDagBuilder::add_expr (B §1.5): children left first, then the simplifications.
func (d *dagBuilder) add(e *Expr) int {
	if i, ok := d.memo[e]; ok {
		return i
	}
	var idx int
	switch e.op {
	case OpVariable:
		idx = d.internNode(Node{Op: OpVariable, Var: e.v})
	case OpIsFirstRow, OpIsLastRow, OpIsTransition:
		idx = d.internNode(Node{Op: e.op})
	case OpConstant:
		idx = d.internNode(Node{Op: OpConstant, C: e.c})
	case OpAdd:
		l, r := d.add(e.x), d.add(e.y)
		a, aok := d.constAt(l)
		b, bok := d.constAt(r)
		if aok && bok {
			idx = d.internNode(Node{Op: OpConstant, C: a.Add(b)})
		} else if d.isConst(l, field.Zero) {
			idx = r
		} else if d.isConst(r, field.Zero) {
			idx = l
		} else if c, ok := d.negChild(r); ok {
			idx = d.internNode(Node{Op: OpSub, L: l, R: c, Degree: e.dm})
		} else {
			idx = d.internNode(Node{Op: OpAdd, L: l, R: r, Degree: e.dm})
		}
	case OpSub:
		l, r := d.add(e.x), d.add(e.y)
		a, aok := d.constAt(l)
		b, bok := d.constAt(r)
		if aok && bok {
			idx = d.internNode(Node{Op: OpConstant, C: a.Sub(b)})
		} else if d.isConst(r, field.Zero) {
			idx = l
		} else if c, ok := d.negChild(r); ok {
			idx = d.internNode(Node{Op: OpAdd, L: l, R: c, Degree: e.dm})
		} else {
			idx = d.internNode(Node{Op: OpSub, L: l, R: r, Degree: e.dm})
		}
	case OpNeg:
		ch := d.add(e.x)
		if a, ok := d.constAt(ch); ok {
			idx = d.internNode(Node{Op: OpConstant, C: a.Neg()})
		} else {
			idx = d.internNode(Node{Op: OpNeg, L: ch, Degree: e.dm})
		}
	case OpMul:
		l, r := d.add(e.x), d.add(e.y)
		a, aok := d.constAt(l)
		b, bok := d.constAt(r)
		if aok && bok {
			idx = d.internNode(Node{Op: OpConstant, C: a.Mul(b)})
		} else if d.isConst(l, field.Zero) || d.isConst(r, field.One) {
			idx = l
		} else if d.isConst(r, field.Zero) || d.isConst(l, field.One) {
			idx = r
		} else {
			idx = d.internNode(Node{Op: OpMul, L: l, R: r, Degree: e.dm})
		}
	default:
		panic(fmt.Sprintf("air: invalid expression op %d", e.op))
	}
	d.memo[e] = idx
	return idx
}

// BuildDAG is `build_symbolic_constraints_dag` (B §1.5). It also returns rawIdx: the node index of
// each constraint tree in assert order (before sorting / de-duplication), for diagnostics.
func BuildDAG(constraints []*Expr, interactions []Interaction) (dag *DAG, rawIdx []int) {
	d := newDAGBuilder()
	rawIdx = make([]int, len(constraints))
	for i, c := range constraints {
		rawIdx[i] = d.add(c)
	}
	cidx := slices.Clone(rawIdx)
	slices.Sort(cidx)
	cidx = slices.Compact(cidx)
	its := make([]DAGInteraction, len(interactions))
	for i, it := range interactions {
		msg := make([]int, len(it.Message))
		for j, m := range it.Message {
			msg[j] = d.add(m)
		}
		its[i] = DAGInteraction{Message: msg, Count: d.add(it.Count), Bus: it.Bus, CountWeight: it.CountWeight}
	}
	if cidx == nil {
		cidx = []int{}
	}
	return &DAG{Nodes: d.nodes, ConstraintIdx: cidx, Interactions: its}, rawIdx
}

// MaxRotation is the max offset over all Variable nodes (0 or 1).
func (g *DAG) MaxRotation() int {
	r := 0
	for _, n := range g.Nodes {
		if n.Op == OpVariable && (n.Var.Entry == EntryMain || n.Var.Entry == EntryPreprocessed) {
			r = max(r, n.Var.Offset)
		}
	}
	return r
}

// EvalNodes evaluates every node in order over F (`eval_nodes`), writing into dst (resized).
func (g *DAG) EvalNodes(val Valuation, dst []field.Fp) []field.Fp {
	dst = slices.Grow(dst[:0], len(g.Nodes))[:len(g.Nodes)]
	for i, n := range g.Nodes {
		var v field.Fp
		switch n.Op {
		case OpVariable:
			v = val.Var(n.Var)
		case OpConstant:
			v = n.C
		case OpIsFirstRow:
			v = val.IsFirstRow()
		case OpIsLastRow:
			v = val.IsLastRow()
		case OpIsTransition:
			v = val.IsTransition()
		case OpAdd:
			v = dst[n.L].Add(dst[n.R])
		case OpSub:
			v = dst[n.L].Sub(dst[n.R])
		case OpNeg:
			v = dst[n.L].Neg()
		case OpMul:
			v = dst[n.L].Mul(dst[n.R])
		}
		dst[i] = v
	}
	return dst
}
