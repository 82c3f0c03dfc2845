package air_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
)

// Shorthands for hand-written golden node lists.
func nv(e air.Entry, part, off, idx int) air.Node {
	return air.Node{Op: air.OpVariable, Var: air.Var{Entry: e, PartIndex: part, Offset: off, Index: idx}}
}
func nm(off, idx int) air.Node   { return nv(air.EntryMain, 0, off, idx) }
func np(idx int) air.Node        { return nv(air.EntryPublic, 0, 0, idx) }
func nc(c uint32) air.Node       { return air.Node{Op: air.OpConstant, C: field.Fp(c)} }
func nAdd(l, r, dm int) air.Node { return air.Node{Op: air.OpAdd, L: l, R: r, Degree: dm} }
func nSub(l, r, dm int) air.Node { return air.Node{Op: air.OpSub, L: l, R: r, Degree: dm} }
func nMul(l, r, dm int) air.Node { return air.Node{Op: air.OpMul, L: l, R: r, Degree: dm} }
func nNeg(c, dm int) air.Node    { return air.Node{Op: air.OpNeg, L: c, Degree: dm} }
func nSel(o air.Op) air.Node     { return air.Node{Op: o} }
func dagOf(a air.Air, t *testing.T) *air.DAG {
	sc := symbolic(t, a)
	d, _ := air.BuildDAG(sc.Constraints, sc.Interactions)
	return d
}

func checkNodes(t *testing.T, name string, got, want []air.Node) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: nodes\n got  %v\n want %v", name, got, want)
	}
}

func TestDAGFibonacciGolden(t *testing.T) {
	d := dagOf(testair.FibonacciAir{}, t)
	want := []air.Node{
		nSel(air.OpIsFirstRow), nm(0, 0), np(0), nSub(1, 2, 1), nMul(0, 3, 2), // 0..4
		nm(0, 1), np(1), nSub(5, 6, 1), nMul(0, 7, 2), // 5..8
		nSel(air.OpIsTransition), nm(1, 0), nSub(5, 10, 1), nMul(9, 11, 2), // 9..12
		nAdd(1, 5, 1), nm(1, 1), nSub(13, 14, 1), nMul(9, 15, 2), // 13..16
		nSel(air.OpIsLastRow), np(2), nSub(5, 18, 1), nMul(17, 19, 2), // 17..20
	}
	checkNodes(t, "fib", d.Nodes, want)
	if !slices.Equal(d.ConstraintIdx, []int{4, 8, 12, 16, 20}) || len(d.Interactions) != 0 {
		t.Errorf("constraint_idx %v interactions %v", d.ConstraintIdx, d.Interactions)
	}
	if d.MaxRotation() != 1 {
		t.Errorf("max rotation %d", d.MaxRotation())
	}
}

func TestDAGFibSelectorLookupGolden(t *testing.T) {
	d := dagOf(testair.FibonacciSelectorAir{Sels: testair.AlternatingSels(4), Lookup: true}, t)
	pre := nv(air.EntryPreprocessed, 0, 0, 0)
	want := []air.Node{
		nSel(air.OpIsFirstRow), nm(0, 0), np(0), nSub(1, 2, 1), nMul(0, 3, 2), // 0..4
		nm(0, 1), np(1), nSub(5, 6, 1), nMul(0, 7, 2), // 5..8
		// IsTransition·(sel·(right − next.left))
		nSel(air.OpIsTransition), pre, nm(1, 0), nSub(5, 11, 1), nMul(10, 12, 2), nMul(9, 13, 3), // 9..14
		// IsTransition·((sel − 1)·(left − next.left))
		nc(1), nSub(10, 15, 1), nSub(1, 11, 1), nMul(16, 17, 2), nMul(9, 18, 3), // 15..19
		// IsTransition·(sel·((left+right) − next.right))
		nAdd(1, 5, 1), nm(1, 1), nSub(20, 21, 1), nMul(10, 22, 2), nMul(9, 23, 3), // 20..24
		// IsTransition·((sel − 1)·(right − next.right))
		nSub(5, 21, 1), nMul(16, 25, 2), nMul(9, 26, 3), // 25..27
		nSel(air.OpIsLastRow), np(2), nSub(5, 29, 1), nMul(28, 30, 2), // 28..31
		// interaction: message [left+right] = node 20, count Neg(sel)
		nNeg(10, 1), // 32
	}
	checkNodes(t, "fib selector", d.Nodes, want)
	if !slices.Equal(d.ConstraintIdx, []int{4, 8, 14, 19, 24, 27, 31}) {
		t.Errorf("constraint_idx %v", d.ConstraintIdx)
	}
	wantIt := []air.DAGInteraction{{Message: []int{20}, Count: 32, Bus: 0, CountWeight: 0}}
	if !reflect.DeepEqual(d.Interactions, wantIt) {
		t.Errorf("interactions %+v", d.Interactions)
	}
}

func TestDAGDummyReceiveGolden(t *testing.T) {
	d := dagOf(testair.DummyInteractionAir{FieldWidth: 2, Bus: 7, CountWeight: 3}, t)
	want := []air.Node{nm(0, 1), nm(0, 2), nc(field.P - 1), nm(0, 0), nMul(2, 3, 1)}
	checkNodes(t, "dummy receive", d.Nodes, want)
	wantIt := []air.DAGInteraction{{Message: []int{0, 1}, Count: 4, Bus: 7, CountWeight: 3}}
	if !reflect.DeepEqual(d.Interactions, wantIt) || len(d.ConstraintIdx) != 0 || d.ConstraintIdx == nil {
		t.Errorf("interactions %+v constraint_idx %#v", d.Interactions, d.ConstraintIdx)
	}
	// partitioned send: count is common main (part 1), fields are cached part 0.
	d = dagOf(testair.DummyInteractionAir{FieldWidth: 1, IsSend: true, Bus: 1, Partition: true}, t)
	checkNodes(t, "dummy send partitioned", d.Nodes, []air.Node{nv(air.EntryMain, 0, 0, 0), nv(air.EntryMain, 1, 0, 0)})
	if !reflect.DeepEqual(d.Interactions, []air.DAGInteraction{{Message: []int{0}, Count: 1, Bus: 1}}) {
		t.Errorf("interactions %+v", d.Interactions)
	}
}

func TestDAGSelfInteractionGolden(t *testing.T) {
	d := dagOf(testair.SelfInteractionAir{W: 2, Bus: 5}, t)
	want := []air.Node{
		nm(0, 0), nm(0, 1), nc(1), // I0: local, count 1
		nm(1, 0), nm(1, 1), nc(field.P - 1), // I1: next, count −1
		nc(0), nAdd(0, 1, 1), // I2: (0 + l0) → l0 (the 0 stays as a node), + l1
		nNeg(7, 1), // I3: −next_sum (= local sum)
		nNeg(3, 1), // I5: −next[0]
	}
	checkNodes(t, "self interaction", d.Nodes, want)
	wantIt := []air.DAGInteraction{
		{Message: []int{0, 1}, Count: 2, Bus: 5, CountWeight: 1},
		{Message: []int{3, 4}, Count: 5, Bus: 5, CountWeight: 1},
		{Message: []int{0, 1}, Count: 7, Bus: 5, CountWeight: 1},
		{Message: []int{3, 4}, Count: 8, Bus: 5, CountWeight: 1},
		{Message: []int{0, 1}, Count: 0, Bus: 5, CountWeight: 1},
		{Message: []int{3, 4}, Count: 9, Bus: 5, CountWeight: 1},
		{Message: []int{1, 0}, Count: 7, Bus: 5, CountWeight: 1},
		{Message: []int{4, 3}, Count: 8, Bus: 5, CountWeight: 1},
	}
	if !reflect.DeepEqual(d.Interactions, wantIt) {
		t.Errorf("interactions\n got  %+v\n want %+v", d.Interactions, wantIt)
	}
}

func TestDAGSumAirGolden(t *testing.T) {
	d := dagOf(testair.SumAir{W: 2}, t)
	// x − ((0 + y0) + y1): x = common (part 1), y = cached part 0.
	want := []air.Node{nv(air.EntryMain, 1, 0, 0), nc(0), nv(air.EntryMain, 0, 0, 0), nv(air.EntryMain, 0, 0, 1), nAdd(2, 3, 1), nSub(0, 4, 1)}
	checkNodes(t, "sum", d.Nodes, want)
	if !slices.Equal(d.ConstraintIdx, []int{5}) || d.MaxRotation() != 0 {
		t.Errorf("constraint_idx %v rotation %d", d.ConstraintIdx, d.MaxRotation())
	}
}

// One constraint per case, on fresh leaves x = m0[0], y = m0[1].
func TestDAGSimplifications(t *testing.T) {
	x, y := mainVar(0, 0, 0), mainVar(0, 0, 1)
	X, Y := nm(0, 0), nm(0, 1)
	c := func(v uint32) *air.Expr { return air.Const(field.Fp(v)) }
	cases := []struct {
		name  string
		e     *air.Expr
		nodes []air.Node
		root  int
	}{
		{"const+const", air.Add(c(2), c(3)), []air.Node{nc(2), nc(3), nc(5)}, 2},
		{"const+const existing", air.Add(c(2), c(0)), []air.Node{nc(2), nc(0)}, 0},
		{"0+x", air.Add(c(0), x), []air.Node{nc(0), X}, 1},
		{"x+0", air.Add(x, c(0)), []air.Node{X, nc(0)}, 0},
		{"x+(-y)", air.Add(x, air.Neg(y)), []air.Node{X, Y, nNeg(1, 1), nSub(0, 1, 1)}, 3},
		{"(-x)+y not simplified", air.Add(air.Neg(x), y), []air.Node{X, nNeg(0, 1), Y, nAdd(1, 2, 1)}, 3},
		{"x+y", air.Add(x, y), []air.Node{X, Y, nAdd(0, 1, 1)}, 2},
		{"const-const", air.Sub(c(2), c(3)), []air.Node{nc(2), nc(3), nc(field.P - 1)}, 2},
		{"x-0", air.Sub(x, c(0)), []air.Node{X, nc(0)}, 0},
		{"0-x not simplified", air.Sub(c(0), x), []air.Node{nc(0), X, nSub(0, 1, 1)}, 2},
		{"x-(-y)", air.Sub(x, air.Neg(y)), []air.Node{X, Y, nNeg(1, 1), nAdd(0, 1, 1)}, 3},
		{"x-x not simplified", air.Sub(x, x), []air.Node{X, nSub(0, 0, 1)}, 1},
		{"-const", air.Neg(c(5)), []air.Node{nc(5), nc(field.P - 5)}, 1},
		{"-0", air.Neg(c(0)), []air.Node{nc(0)}, 0},
		{"-x", air.Neg(x), []air.Node{X, nNeg(0, 1)}, 1},
		{"--x not simplified", air.Neg(air.Neg(x)), []air.Node{X, nNeg(0, 1), nNeg(1, 1)}, 2},
		{"const*const", air.Mul(c(3), c(4)), []air.Node{nc(3), nc(4), nc(12)}, 2},
		{"0*x", air.Mul(c(0), x), []air.Node{nc(0), X}, 0},
		{"x*1", air.Mul(x, c(1)), []air.Node{X, nc(1)}, 0},
		{"x*0", air.Mul(x, c(0)), []air.Node{X, nc(0)}, 1},
		{"1*x", air.Mul(c(1), x), []air.Node{nc(1), X}, 1},
		{"(-1)*x is a Mul", air.Mul(air.NegOne(), x), []air.Node{nc(field.P - 1), X, nMul(0, 1, 1)}, 2},
		{"x*x", air.Mul(x, x), []air.Node{X, nMul(0, 0, 2)}, 1},
		{"x*y", air.Mul(x, y), []air.Node{X, Y, nMul(0, 1, 2)}, 2},
		// dm is the unsimplified one: x·((y·0)+3) → Mul(x, Const 3) with dm 2.
		{"dm of unsimplified tree", air.Mul(x, air.Add(air.Mul(y, c(0)), c(3))), []air.Node{X, Y, nc(0), nc(3), nMul(0, 3, 2)}, 4},
		// x + (−(y·y)) → Sub(x, y·y) with the Add's dm 2.
		{"rewrite keeps dm", air.Add(x, air.Neg(air.Mul(y, y))), []air.Node{X, Y, nMul(1, 1, 2), nNeg(2, 2), nSub(0, 2, 2)}, 4},
		// left child first, post-order.
		{"post-order", air.Mul(air.Add(x, c(7)), air.Sub(y, x)), []air.Node{X, nc(7), nAdd(0, 1, 1), Y, nSub(3, 0, 1), nMul(2, 4, 2)}, 5},
	}
	for _, cs := range cases {
		d, raw := air.BuildDAG([]*air.Expr{cs.e}, nil)
		checkNodes(t, cs.name, d.Nodes, cs.nodes)
		if raw[0] != cs.root || !slices.Equal(d.ConstraintIdx, []int{cs.root}) {
			t.Errorf("%s: root %d / %v, want %d", cs.name, raw[0], d.ConstraintIdx, cs.root)
		}
	}
}

func TestDAGInternKeyIncludesDegree(t *testing.T) {
	x, y := mainVar(0, 0, 0), mainVar(0, 0, 1)
	a := air.Mul(x, air.Add(air.Mul(y, air.Const(0)), air.Const(3))) // Mul(x, 3) with dm 2
	b := air.Mul(x, air.Const(3))                                    // Mul(x, 3) with dm 1
	c := air.Mul(x, air.Add(air.Mul(y, air.Const(0)), air.Const(3))) // same as a, other pointers
	d, raw := air.BuildDAG([]*air.Expr{a, b, c}, nil)
	want := []air.Node{nm(0, 0), nm(0, 1), nc(0), nc(3), nMul(0, 3, 2), nMul(0, 3, 1)}
	checkNodes(t, "intern dm", d.Nodes, want)
	if !slices.Equal(raw, []int{4, 5, 4}) || !slices.Equal(d.ConstraintIdx, []int{4, 5}) {
		t.Errorf("raw %v constraint_idx %v", raw, d.ConstraintIdx)
	}
}

func TestDAGConstraintDedupAndSort(t *testing.T) {
	b := air.NewBuilder(air.TraceWidth{CommonMain: 2}, 0)
	m := b.Main(0)
	b.AssertEq(m[0], m[1])                             // node 2
	b.AssertEq(m[0], m[1])                             // same structure → dedup
	b.AssertZero(m[1])                                 // node 1: earlier node → sorted first
	b.WhenTransition().AssertEq(m[0], m[1])            // 3 IsTransition, 4 Mul(3,2)
	b.AssertZero(air.Add(m[0], air.Const(field.Zero))) // → node 0
	d, raw := air.BuildDAG(b.Constraints(), nil)
	want := []air.Node{nm(0, 0), nm(0, 1), nSub(0, 1, 1), nSel(air.OpIsTransition), nMul(3, 2, 2), nc(0)}
	checkNodes(t, "dedup", d.Nodes, want)
	if !slices.Equal(raw, []int{2, 2, 1, 4, 0}) || !slices.Equal(d.ConstraintIdx, []int{0, 1, 2, 4}) {
		t.Errorf("raw %v constraint_idx %v", raw, d.ConstraintIdx)
	}
}

func TestDAGOperandOrder(t *testing.T) {
	x, y := mainVar(0, 0, 0), mainVar(0, 0, 1)
	d, raw := air.BuildDAG([]*air.Expr{air.Add(x, y), air.Add(y, x), air.Mul(y, x), air.Mul(x, y), air.Sub(y, x)}, nil)
	want := []air.Node{nm(0, 0), nm(0, 1), nAdd(0, 1, 1), nAdd(1, 0, 1), nMul(1, 0, 2), nMul(0, 1, 2), nSub(1, 0, 1)}
	checkNodes(t, "order", d.Nodes, want)
	if !slices.Equal(raw, []int{2, 3, 4, 5, 6}) {
		t.Errorf("raw %v", raw)
	}
	// Interactions are added after all constraints: message fields in order, then the count.
	its := []air.Interaction{{Message: []*air.Expr{y, air.Add(x, y)}, Count: air.Neg(x), Bus: 2, CountWeight: 9}}
	d, _ = air.BuildDAG([]*air.Expr{air.Mul(x, x)}, its)
	want = []air.Node{nm(0, 0), nMul(0, 0, 2), nm(0, 1), nAdd(0, 2, 1), nNeg(0, 1)}
	checkNodes(t, "interaction order", d.Nodes, want)
	if !reflect.DeepEqual(d.Interactions, []air.DAGInteraction{{Message: []int{2, 3}, Count: 4, Bus: 2, CountWeight: 9}}) {
		t.Errorf("interactions %+v", d.Interactions)
	}
}

// randVal is a random assignment of all leaves.
type randVal struct {
	vars                  map[air.Var]field.Fp
	rng                   *rand.Rand
	first, last, transSel field.Fp
}

func (r *randVal) Var(v air.Var) field.Fp {
	if x, ok := r.vars[v]; ok {
		return x
	}
	x := field.NewU64(r.rng.Uint64())
	r.vars[v] = x
	return x
}
func (r *randVal) IsFirstRow() field.Fp   { return r.first }
func (r *randVal) IsLastRow() field.Fp    { return r.last }
func (r *randVal) IsTransition() field.Fp { return r.transSel }

func randExpr(rng *rand.Rand, depth int, leaves []*air.Expr) *air.Expr {
	if depth == 0 || rng.IntN(4) == 0 {
		switch rng.IntN(4) {
		case 0:
			return air.Const(field.Fp([]uint32{0, 1, 2, field.P - 1}[rng.IntN(4)]))
		case 1:
			return []*air.Expr{air.IsFirstRow(), air.IsLastRow(), air.IsTransition()}[rng.IntN(3)]
		default:
			return leaves[rng.IntN(len(leaves))]
		}
	}
	switch rng.IntN(4) {
	case 0:
		return air.Add(randExpr(rng, depth-1, leaves), randExpr(rng, depth-1, leaves))
	case 1:
		return air.Sub(randExpr(rng, depth-1, leaves), randExpr(rng, depth-1, leaves))
	case 2:
		return air.Neg(randExpr(rng, depth-1, leaves))
	}
	return air.Mul(randExpr(rng, depth-1, leaves), randExpr(rng, depth-1, leaves))
}

// The DAG evaluates to the same values as the trees it came from (simplifications are sound, indices
// are right), for random trees and for all test AIRs.
func TestDAGEvalMatchesTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	leaves := []*air.Expr{mainVar(0, 0, 0), mainVar(0, 1, 0), mainVar(1, 0, 2), pubVar(0),
		air.V(air.Var{Entry: air.EntryPreprocessed, Offset: 1, Index: 1})}
	var cons []*air.Expr
	for i := 0; i < 300; i++ {
		cons = append(cons, randExpr(rng, 6, leaves))
	}
	its := []air.Interaction{{Message: cons[:3], Count: cons[3]}, {Message: cons[4:5], Count: cons[5]}}
	airs := []air.Air{testair.FibonacciAir{}, testair.FibonacciSelectorAir{Lookup: true}, testair.SelfInteractionAir{W: 5, Bus: 1},
		testair.PreprocessedCachedAir{K: 3}, testair.SumAir{W: 4}, testair.DummyInteractionAir{FieldWidth: 3}}
	sets := []air.SymbolicConstraints{{Constraints: cons, Interactions: its}}
	for _, a := range airs {
		sets = append(sets, *symbolic(t, a))
	}
	for si, sc := range sets {
		d, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
		for trial := 0; trial < 5; trial++ {
			val := &randVal{vars: map[air.Var]field.Fp{}, rng: rng, first: field.NewU64(rng.Uint64()),
				last: field.NewU64(rng.Uint64()), transSel: field.NewU64(rng.Uint64())}
			vals := d.EvalNodes(val, nil)
			for i, c := range sc.Constraints {
				if got, want := vals[raw[i]], c.Eval(val); got != want {
					t.Fatalf("set %d constraint %d %v: dag %v tree %v", si, i, c, got, want)
				}
			}
			for i, it := range sc.Interactions {
				if vals[d.Interactions[i].Count] != it.Count.Eval(val) {
					t.Fatalf("set %d interaction %d count", si, i)
				}
				for j, m := range it.Message {
					if vals[d.Interactions[i].Message[j]] != m.Eval(val) {
						t.Fatalf("set %d interaction %d field %d", si, i, j)
					}
				}
			}
		}
		// Topological order and dedup invariants.
		seen := map[air.Node]bool{}
		for i, n := range d.Nodes {
			if seen[n] {
				t.Fatalf("set %d: duplicate node %v", si, n)
			}
			seen[n] = true
			if (n.Op == air.OpAdd || n.Op == air.OpSub || n.Op == air.OpMul) && (n.L >= i || n.R >= i) || n.Op == air.OpNeg && n.L >= i {
				t.Fatalf("set %d: node %d %v not topological", si, i, n)
			}
		}
		if !slices.IsSorted(d.ConstraintIdx) || len(slices.Compact(slices.Clone(d.ConstraintIdx))) != len(d.ConstraintIdx) {
			t.Fatalf("set %d: constraint_idx %v", si, d.ConstraintIdx)
		}
	}
}

// A deeply shared tree (repeated squaring) must not be walked exponentially.
func TestDAGSharedSubtrees(t *testing.T) {
	e := mainVar(0, 0, 0)
	for i := 0; i < 50; i++ {
		e = air.Mul(e, e)
	}
	d, raw := air.BuildDAG([]*air.Expr{e}, nil)
	if len(d.Nodes) != 51 || raw[0] != 50 {
		t.Fatalf("%d nodes root %d", len(d.Nodes), raw[0])
	}
}
