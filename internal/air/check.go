package air

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/metalprove/metalprove/internal/field"
)

// TraceInput is one AIR's trace data for the host checker. Preprocessed == nil takes the AIR's own
// preprocessed trace when it implements PreprocessedAir. CachedMains are in DAG order.
type TraceInput struct {
	Preprocessed *Matrix
	CachedMains  []Matrix
	CommonMain   Matrix
	Public       []field.Fp
}

// maxReportedExprLen bounds the printed expression of a failure: constraints that reuse a
// subtree (limb folds) would otherwise print megabytes.
const maxReportedExprLen = 400

// Failure is one constraint that does not vanish on one row.
type Failure struct {
	Air        string
	Row        int
	Constraint int // index in assert order (Eval call order), not the DAG position
	Node       int // DAG node index of the constraint
	Value      field.Fp
	Expr       string
}

func (f Failure) String() string {
	return fmt.Sprintf("air %s: row %d: constraint %d (node %d) = %v: %s", f.Air, f.Row, f.Constraint, f.Node, f.Value, f.Expr)
}

// ErrShape reports a trace that does not fit the AIR's widths.
var ErrShape = errors.New("air: trace shape mismatch")

// prepared is one AIR ready for row evaluation.
type prepared struct {
	name   string
	sc     *SymbolicConstraints
	dag    *DAG
	rawIdx []int
	val    RowEval
}

// RowEval evaluates DAG variables on one row of a trace (DAG.EvalNodes): Row is the current
// row; a variable at offset o reads row (Row+o) mod Height. Parts are the main parts in DAG
// numbering (cached mains, then the common main), each column-major with Height rows. A variable
// it cannot evaluate (a challenge, or an index out of range) reads 0 and sets Err (the first such).
type RowEval struct {
	Pre    *Matrix // nil when the AIR has no preprocessed trace
	Parts  []Matrix
	Public []field.Fp
	Height int
	Row    int
	Err    error
}

func (v *RowEval) Var(x Var) field.Fp {
	r := (v.Row + x.Offset) % v.Height
	switch x.Entry {
	case EntryPreprocessed:
		if v.Pre != nil && x.Index >= 0 && x.Index < v.Pre.Width {
			return v.Pre.At(r, x.Index)
		}
	case EntryMain:
		if x.PartIndex >= 0 && x.PartIndex < len(v.Parts) && x.Index >= 0 && x.Index < v.Parts[x.PartIndex].Width {
			return v.Parts[x.PartIndex].At(r, x.Index)
		}
	case EntryPublic:
		if x.Index >= 0 && x.Index < len(v.Public) {
			return v.Public[x.Index]
		}
	}
	if v.Err == nil {
		v.Err = fmt.Errorf("air: variable %v cannot be evaluated on the host", x)
	}
	return 0
}

func (v *RowEval) IsFirstRow() field.Fp { return b2f(v.Row == 0) }
func (v *RowEval) IsLastRow() field.Fp  { return b2f(v.Row == v.Height-1) }

// IsTransition is 1 on every row but the last (OpenVM check_constraints; B §2.3 is_transition = 1 − is_last).
func (v *RowEval) IsTransition() field.Fp { return b2f(v.Row != v.Height-1) }

func b2f(b bool) field.Fp {
	if b {
		return field.One
	}
	return field.Zero
}

func prepare(a Air, in TraceInput) (*prepared, error) {
	w := a.Width()
	sc, err := Symbolic(a)
	if err != nil {
		return nil, err
	}
	dag, raw := BuildDAG(sc.Constraints, sc.Interactions)
	p := &prepared{name: a.Name(), sc: sc, dag: dag, rawIdx: raw}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: air %s: %s", ErrShape, a.Name(), fmt.Sprintf(format, args...))
	}
	if len(in.CachedMains) != len(w.CachedMains) {
		return nil, fail("%d cached mains given, AIR has %d", len(in.CachedMains), len(w.CachedMains))
	}
	parts := slices.Clone(in.CachedMains)
	if w.CommonMain != 0 {
		parts = append(parts, in.CommonMain)
	}
	widths := w.MainWidths()
	if len(parts) == 0 {
		return nil, fail("no main trace")
	}
	h := parts[0].Height
	if h < 1 {
		return nil, fail("trace height %d", h)
	}
	for i, m := range parts {
		if !m.valid() || m.Width != widths[i] || m.Height != h {
			return nil, fail("main part %d is %dx%d (%d values), want width %d height %d", i, m.Height, m.Width, len(m.Values), widths[i], h)
		}
	}
	pre := in.Preprocessed
	if pre == nil && w.HasPreprocessed() {
		pa, ok := a.(PreprocessedAir)
		if !ok {
			return nil, fail("preprocessed trace missing")
		}
		m := pa.PreprocessedTrace()
		pre = &m
	}
	if w.HasPreprocessed() {
		if !pre.valid() || pre.Width != w.Preprocessed || pre.Height != h {
			return nil, fail("preprocessed is %dx%d, want width %d height %d", pre.Height, pre.Width, w.Preprocessed, h)
		}
	} else if pre != nil {
		return nil, fail("preprocessed trace given to an AIR without one")
	}
	if len(in.Public) != a.NumPublicValues() {
		return nil, fail("%d public values, want %d", len(in.Public), a.NumPublicValues())
	}
	p.val = RowEval{Pre: pre, Parts: parts, Public: in.Public, Height: h}
	return p, nil
}

// CheckConstraints evaluates every constraint of a on every row of the trace (next row wraps to
// row 0; IsFirstRow = [row 0], IsLastRow = [row h−1], IsTransition = 1 − IsLastRow) and returns
// the failures in (row, constraint) order, at most maxFailures of them (all when maxFailures ≤ 0).
// The error reports a trace that does not fit the AIR, not failing constraints.
func CheckConstraints(a Air, in TraceInput, maxFailures int) ([]Failure, error) {
	p, err := prepare(a, in)
	if err != nil {
		return nil, err
	}
	var out []Failure
	var vals []field.Fp
	for r := 0; r < p.val.Height; r++ {
		p.val.Row = r
		vals = p.dag.EvalNodes(&p.val, vals)
		if p.val.Err != nil {
			return nil, p.val.Err
		}
		for ci, node := range p.rawIdx {
			if !vals[node].IsZero() {
				out = append(out, Failure{Air: p.name, Row: r, Constraint: ci, Node: node, Value: vals[node], Expr: p.sc.Constraints[ci].Abbrev(maxReportedExprLen)})
				if maxFailures > 0 && len(out) >= maxFailures {
					return out, nil
				}
			}
		}
	}
	return out, nil
}

// BusContribution is the total count one AIR puts on one (bus, message).
type BusContribution struct {
	AirIndex int
	Air      string
	Count    field.Fp
}

// Imbalance is a (bus, message) whose counts over all AIRs and rows do not sum to zero.
type Imbalance struct {
	Bus           uint16
	Message       []field.Fp
	Sum           field.Fp
	Contributions []BusContribution
}

func (im Imbalance) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "bus %d message %v: counts sum to %v (", im.Bus, im.Message, im.Sum)
	for i, c := range im.Contributions {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s[%d]: %v", c.Air, c.AirIndex, c.Count)
	}
	sb.WriteString(")")
	return sb.String()
}

// CheckInteractions checks exact multiset balance (OpenVM `check_logup`): for every bus and every
// message value, the sum over all AIRs and rows of the interaction counts is 0 in F. Rows whose
// count is 0 are ignored. Imbalances are returned ordered by bus, then by first occurrence
// (AIR order, row, interaction order).
func CheckInteractions(airs []Air, inputs []TraceInput) ([]Imbalance, error) {
	if len(airs) != len(inputs) {
		return nil, fmt.Errorf("air: %d AIRs but %d trace inputs", len(airs), len(inputs))
	}
	type entry struct {
		bus   uint16
		msg   []field.Fp
		sum   field.Fp
		per   map[int]field.Fp
		order []int
	}
	table := map[string]*entry{}
	var keys []string
	var vals []field.Fp
	var kb []byte
	for ai, a := range airs {
		p, err := prepare(a, inputs[ai])
		if err != nil {
			return nil, err
		}
		if len(p.dag.Interactions) == 0 {
			continue
		}
		for r := 0; r < p.val.Height; r++ {
			p.val.Row = r
			vals = p.dag.EvalNodes(&p.val, vals)
			if p.val.Err != nil {
				return nil, p.val.Err
			}
			for _, it := range p.dag.Interactions {
				cnt := vals[it.Count]
				if cnt.IsZero() {
					continue
				}
				kb = kb[:0]
				kb = append(kb, byte(it.Bus), byte(it.Bus>>8))
				for _, m := range it.Message {
					kb = field.AppendFp(kb, vals[m])
				}
				e, ok := table[string(kb)]
				if !ok {
					msg := make([]field.Fp, len(it.Message))
					for j, m := range it.Message {
						msg[j] = vals[m]
					}
					e = &entry{bus: it.Bus, msg: msg, per: map[int]field.Fp{}}
					table[string(kb)] = e
					keys = append(keys, string(kb))
				}
				e.sum = e.sum.Add(cnt)
				if _, seen := e.per[ai]; !seen {
					e.order = append(e.order, ai)
				}
				e.per[ai] = e.per[ai].Add(cnt)
			}
		}
	}
	var out []Imbalance
	for _, k := range keys {
		e := table[k]
		if e.sum.IsZero() {
			continue
		}
		im := Imbalance{Bus: e.bus, Message: e.msg, Sum: e.sum}
		for _, ai := range e.order {
			im.Contributions = append(im.Contributions, BusContribution{AirIndex: ai, Air: airs[ai].Name(), Count: e.per[ai]})
		}
		out = append(out, im)
	}
	slices.SortStableFunc(out, func(x, y Imbalance) int { return int(x.Bus) - int(y.Bus) })
	return out, nil
}
