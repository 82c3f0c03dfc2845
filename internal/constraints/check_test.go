package constraints

import (
	"fmt"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
)

// rowVal is an independent row valuation of a trace for DAG.EvalNodes: parts in DAG numbering
// (cached mains, then the common main).
type rowVal struct {
	pre    *air.Matrix
	parts  []air.Matrix
	public []field.Fp
	h, row int
}

func (v *rowVal) Var(x air.Var) field.Fp {
	r := (v.row + x.Offset) % v.h
	switch x.Entry {
	case air.EntryPreprocessed:
		return v.pre.At(r, x.Index)
	case air.EntryMain:
		return v.parts[x.PartIndex].At(r, x.Index)
	}
	return v.public[x.Index]
}
func (v *rowVal) IsFirstRow() field.Fp { return b2f(v.row == 0) }
func (v *rowVal) IsLastRow() field.Fp  { return b2f(v.row == v.h-1) }
func (v *rowVal) IsTransition() field.Fp {
	return b2f(v.row != v.h-1)
}

func b2f(b bool) field.Fp {
	if b {
		return field.One
	}
	return field.Zero
}

// referenceFailures evaluates the whole DAG row by row, constraints in assert order.
func referenceFailures(t *testing.T, a air.Air, in air.TraceInput) []air.Failure {
	t.Helper()
	sc, err := air.Symbolic(a)
	if err != nil {
		t.Fatal(err)
	}
	dag, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
	v := &rowVal{pre: in.Preprocessed, parts: append(append([]air.Matrix(nil), in.CachedMains...), in.CommonMain), public: in.Public}
	if a.Width().CommonMain == 0 {
		v.parts = in.CachedMains
	}
	if v.pre == nil && a.Width().HasPreprocessed() {
		m := a.(air.PreprocessedAir).PreprocessedTrace()
		v.pre = &m
	}
	v.h = v.parts[0].Height
	var out []air.Failure
	var vals []field.Fp
	for r := range v.h {
		v.row = r
		vals = dag.EvalNodes(v, vals)
		for ci, node := range raw {
			if !vals[node].IsZero() {
				out = append(out, air.Failure{Air: a.Name(), Row: r, Constraint: ci, Node: node, Value: vals[node], Expr: sc.Constraints[ci].Abbrev(maxReportedExprLen)})
			}
		}
	}
	return out
}

// TestCheckMatchesReference compares Check with a row-by-row DAG evaluation on corrupted traces,
// for several chunk sizes (the parallel split) and failure limits.
func TestCheckMatchesReference(t *testing.T) {
	saved := checkRowsPerChunk
	defer func() { checkRowsPerChunk = saved }()
	h, cols := keccakf.GenerateTrace(keccakf.RandomInputs(1, 3))
	kin := keccakf.TraceInput(h, cols)
	for _, rc := range [][2]int{{0, 0}, {5, 10}, {33, 100}, {90, keccakf.NumCols - 1}, {127, 700}} {
		kin.CommonMain.Set(rc[0], rc[1], kin.CommonMain.At(rc[0], rc[1]).Add(field.New(3)))
	}
	pc := testair.PreprocessedCached(2, 64)
	pc.Trace.CachedMains[1].Set(17, 0, field.New(5))
	fib := testair.Fibonacci(2, 3, 64)
	for r := 0; r < 64; r += 5 {
		fib.Trace.CommonMain.Set(r, 0, field.New(uint32(r)))
	}
	sel := testair.FibonacciSelector(7, 3, 32)
	sel.Trace.CommonMain.Set(31, 1, field.New(1))
	cases := []struct {
		a  air.Air
		in air.TraceInput
	}{{keccakf.Air{}, kin}, {pc.Air, pc.Trace}, {fib.Air, fib.Trace}, {sel.Air, sel.Trace}}
	for _, c := range cases {
		all := referenceFailures(t, c.a, c.in)
		if len(all) == 0 {
			t.Fatalf("%s: the corrupted trace has no failures", c.a.Name())
		}
		for _, chunk := range []int{1, 3, 16, 256} {
			checkRowsPerChunk = chunk
			for _, maxF := range []int{0, 1, 2, 7, 50} {
				want := all
				if maxF > 0 && len(want) > maxF {
					want = want[:maxF]
				}
				got, err := Check(c.a, c.in, maxF)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s chunk %d max %d: got %d failures %v\nwant %d %v", c.a.Name(), chunk, maxF, len(got), got, len(want), want)
				}
				// From the first failing row (a device's answer): the same failures. From a later
				// row: those of the rows from there.
				for _, start := range []int{all[0].Row, all[0].Row + 1, all[len(all)-1].Row, c.in.CommonMain.Height + 3} {
					var from []air.Failure
					for _, f := range all {
						if f.Row >= start && (maxF <= 0 || len(from) < maxF) {
							from = append(from, f)
						}
					}
					got, err := CheckFrom(c.a, c.in, maxF, start)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got) != fmt.Sprint(from) {
						t.Errorf("%s chunk %d max %d from row %d: got %v\nwant %v", c.a.Name(), chunk, maxF, start, got, from)
					}
				}
			}
		}
	}
}
