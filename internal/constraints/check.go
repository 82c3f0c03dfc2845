package constraints

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

// The host trace checks: the program evaluated on every row of host traces (next row wrapping to
// row 0; is_first = [row 0], is_last = [row h−1], is_transition = 1 − is_last), in parallel over
// the CPU's cores. Devices run the same program in their own check.

// maxReportedExprLen bounds the printed expression of a failure: constraints that reuse a subtree
// (limb folds) would otherwise print megabytes.
const maxReportedExprLen = 400

// checked is one AIR ready for row evaluation.
type checked struct {
	name   string
	sc     *air.SymbolicConstraints
	dag    *air.DAG
	rawIdx []int // node of each constraint in assert order
	prog   *Program
	rows   *Rows
}

// Rows evaluates a program on the rows of host traces.
type Rows struct {
	p      *Program
	cols   [][]field.Fp // per slot: the column it reads (nil for selectors and unused slots)
	rot    []bool       // per slot: the next row
	public []field.Fp
	height int
}

// NewRows binds p to host traces: parts in opening-part order ([common main, preprocessed,
// cached 0, …], each with the trace height) and the public values.
func NewRows(p *Program, parts []*air.Matrix, public []field.Fp) (*Rows, error) {
	if len(parts) != len(p.PartWidths) {
		return nil, fmt.Errorf("%w: %d parts, the program has %d", air.ErrShape, len(parts), len(p.PartWidths))
	}
	if len(public) != p.NumPublic {
		return nil, fmt.Errorf("%w: %d public values, want %d", air.ErrShape, len(public), p.NumPublic)
	}
	h := 0
	for _, m := range parts {
		h = max(h, m.Height)
	}
	r := &Rows{p: p, cols: make([][]field.Fp, p.NumSlots()), rot: make([]bool, p.NumSlots()), public: public, height: h}
	for q, m := range parts {
		if m.Check() != nil || m.Width != p.PartWidths[q] || m.Height != h {
			return nil, fmt.Errorf("%w: part %d is %d×%d (%d values), want width %d height %d", air.ErrShape, q, m.Height, m.Width, len(m.Values), p.PartWidths[q], h)
		}
		for c := 0; c < m.Width; c++ {
			s := 2 * (p.PartStart[q] + c)
			r.cols[s], r.cols[s+1], r.rot[s+1] = m.Column(c), m.Column(c), true
		}
	}
	if h < 1 {
		return nil, fmt.Errorf("%w: trace height %d", air.ErrShape, h)
	}
	return r, nil
}

// Height is the trace height.
func (r *Rows) Height() int { return r.height }

// Eval evaluates the program on row i; slots and regs are scratch (returned grown).
func (r *Rows) Eval(i int, slots, regs []field.Fp, emit func(o int, v field.Fp)) ([]field.Fp, []field.Fp) {
	p := r.p
	if len(slots) < p.NumSlots() {
		slots = make([]field.Fp, p.NumSlots())
	}
	next := i + 1
	if next == r.height {
		next = 0
	}
	for s, used := range p.Used {
		if !used || r.cols[s] == nil {
			continue
		}
		if r.rot[s] {
			slots[s] = r.cols[s][next]
		} else {
			slots[s] = r.cols[s][i]
		}
	}
	last := field.Zero
	if i == r.height-1 {
		last = field.One
	}
	slots[p.SlotIsFirst()] = field.Zero
	if i == 0 {
		slots[p.SlotIsFirst()] = field.One
	}
	slots[p.SlotIsLast()] = last
	slots[p.SlotIsTransition()] = field.One.Sub(last)
	return slots, Eval(p, slots, r.public, liftBase, emit, regs)
}

// CheckKey returns the part of a's verifying key that its constraint programs need — widths,
// public values, rotation and the DAG — as the checks build it (no parameters, no preprocessed
// commitment), with the DAG's node of each constraint in assert order. A device that checks
// traces compiles its programs from it.
func CheckKey(a air.Air) (*air.VerifyingKey, error) {
	vk, _, _, err := checkKey(a)
	return vk, err
}

func checkKey(a air.Air) (*air.VerifyingKey, *air.SymbolicConstraints, []int, error) {
	sc, err := air.Symbolic(a)
	if err != nil {
		return nil, nil, nil, err
	}
	dag, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
	vk := &air.VerifyingKey{Width: a.Width(), NumPublicValues: a.NumPublicValues(), NeedRot: dag.MaxRotation() == 1, DAG: dag}
	return vk, sc, raw, nil
}

// CheckParts returns the opening parts of a trace of a as the checks evaluate them: the common
// main (of the trace height when a has no common main columns), the preprocessed trace (a's own
// when in has none) and the cached mains. It checks the number of parts and of public values;
// errors wrap air.ErrShape.
func CheckParts(a air.Air, in air.TraceInput) ([]*air.Matrix, error) {
	w := a.Width()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: air %s: %s", air.ErrShape, a.Name(), fmt.Sprintf(format, args...))
	}
	if len(in.CachedMains) != len(w.CachedMains) {
		return nil, fail("%d cached mains given, AIR has %d", len(in.CachedMains), len(w.CachedMains))
	}
	h := in.CommonMain.Height
	if w.CommonMain == 0 && len(in.CachedMains) > 0 {
		h = in.CachedMains[0].Height
	}
	common := in.CommonMain
	if w.CommonMain == 0 {
		common = air.Matrix{Height: h}
	}
	parts := []*air.Matrix{&common}
	pre := in.Preprocessed
	if pre == nil && w.HasPreprocessed() {
		pa, ok := a.(air.PreprocessedAir)
		if !ok {
			return nil, fail("preprocessed trace missing")
		}
		m := pa.PreprocessedTrace()
		pre = &m
	}
	if w.HasPreprocessed() {
		parts = append(parts, pre)
	} else if pre != nil {
		return nil, fail("preprocessed trace given to an AIR without one")
	}
	for j := range in.CachedMains {
		parts = append(parts, &in.CachedMains[j])
	}
	if len(in.Public) != a.NumPublicValues() {
		return nil, fail("%d public values, want %d", len(in.Public), a.NumPublicValues())
	}
	return parts, nil
}

// prepareCheck compiles a's constraints and binds them to its trace.
func prepareCheck(a air.Air, in air.TraceInput, outs Outputs) (*checked, error) {
	vk, sc, raw, err := checkKey(a)
	if err != nil {
		return nil, err
	}
	prog, err := Compile(vk, outs)
	if err != nil {
		return nil, fmt.Errorf("air %s: %w", a.Name(), err)
	}
	parts, err := CheckParts(a, in)
	if err != nil {
		return nil, err
	}
	rows, err := NewRows(prog, parts, in.Public)
	if err != nil {
		return nil, fmt.Errorf("air %s: %w", a.Name(), err)
	}
	return &checked{name: a.Name(), sc: sc, dag: vk.DAG, rawIdx: raw, prog: prog, rows: rows}, nil
}

// checkRowsPerChunk is the number of rows a worker takes at a time (a variable for tests).
var checkRowsPerChunk = 256

// Check evaluates every constraint of a on every row of the trace and returns the failures in
// (row, constraint) order — constraints in assert order, duplicates included — at most
// maxFailures of them (all when maxFailures ≤ 0). Rows are evaluated in parallel. The error
// reports a trace that does not fit the AIR (wrapping air.ErrShape), not failing constraints.
func Check(a air.Air, in air.TraceInput, maxFailures int) ([]air.Failure, error) {
	return CheckFrom(a, in, maxFailures, 0)
}

// CheckFrom is Check on the rows from start on (0 ≤ start; none when start ≥ the height). When no
// constraint fails on the rows before start — a device found the first failing row — it returns
// exactly what Check returns, evaluating only the rows from there.
func CheckFrom(a air.Air, in air.TraceInput, maxFailures, start int) ([]air.Failure, error) {
	if start < 0 {
		return nil, fmt.Errorf("constraints: check from row %d", start)
	}
	c, err := prepareCheck(a, in, Constraints)
	if err != nil {
		return nil, err
	}
	if len(c.rawIdx) == 0 || start >= c.rows.Height() {
		return nil, nil
	}
	// Assert indices of each sorted constraint (several asserts may share a node).
	asserts := make([][]int, c.prog.NumConstraints)
	for ai, node := range c.rawIdx {
		k, ok := slices.BinarySearch(c.dag.ConstraintIdx, node)
		if !ok {
			return nil, fmt.Errorf("air %s: constraint %d is not in the DAG's list", a.Name(), ai)
		}
		asserts[k] = append(asserts[k], ai)
	}
	h := c.rows.Height()
	chunk := checkRowsPerChunk
	nChunks := (h - start + chunk - 1) / chunk
	found := make([][]air.Failure, nChunks)
	var next atomic.Int64
	// stop: chunks from this index on need not be evaluated (an earlier chunk already holds
	// maxFailures failures on its own).
	var stop atomic.Int64
	stop.Store(int64(nChunks))
	workers := min(runtime.GOMAXPROCS(0), nChunks)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var slots, regs []field.Fp
			for {
				ch := int(next.Add(1) - 1)
				if ch >= nChunks || int64(ch) >= stop.Load() {
					return
				}
				var fs []air.Failure
				for r := start + ch*chunk; r < min(start+(ch+1)*chunk, h); r++ {
					var row []air.Failure
					slots, regs = c.rows.Eval(r, slots, regs, func(o int, v field.Fp) {
						if v.IsZero() {
							return
						}
						for _, ai := range asserts[o] {
							row = append(row, air.Failure{Air: c.name, Row: r, Constraint: ai, Node: c.rawIdx[ai], Value: v})
						}
					})
					slices.SortFunc(row, func(x, y air.Failure) int { return x.Constraint - y.Constraint })
					fs = append(fs, row...)
					if maxFailures > 0 && len(fs) >= maxFailures {
						fs = fs[:maxFailures]
						for {
							s := stop.Load()
							if int64(ch) >= s || stop.CompareAndSwap(s, int64(ch)) {
								break
							}
						}
						break
					}
				}
				found[ch] = fs
			}
		})
	}
	wg.Wait()
	var out []air.Failure
	for _, fs := range found {
		for _, f := range fs {
			if maxFailures > 0 && len(out) >= maxFailures {
				return out, nil
			}
			f.Expr = c.sc.Constraints[f.Constraint].Abbrev(maxReportedExprLen)
			out = append(out, f)
		}
	}
	return out, nil
}

// CheckInteractions checks exact multiset balance (OpenVM `check_logup`): for every bus and every
// message value, the sum over all AIRs and rows of the interaction counts is 0 in F. Rows whose
// count is 0 are ignored. Imbalances are returned ordered by bus, then by first occurrence
// (AIR order, row, interaction order).
func CheckInteractions(airs []air.Air, inputs []air.TraceInput) ([]air.Imbalance, error) {
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
	var kb []byte
	var slots, regs []field.Fp
	for ai, a := range airs {
		c, err := prepareCheck(a, inputs[ai], Interactions)
		if err != nil {
			return nil, err
		}
		p := c.prog
		if len(p.Interactions) == 0 {
			continue
		}
		vals := make([]field.Fp, len(p.Outputs))
		for r := 0; r < c.rows.Height(); r++ {
			slots, regs = c.rows.Eval(r, slots, regs, func(o int, v field.Fp) { vals[o] = v })
			for _, it := range p.Interactions {
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
	var out []air.Imbalance
	for _, k := range keys {
		e := table[k]
		if e.sum.IsZero() {
			continue
		}
		im := air.Imbalance{Bus: e.bus, Message: e.msg, Sum: e.sum}
		for _, ai := range e.order {
			im.Contributions = append(im.Contributions, air.BusContribution{AirIndex: ai, Air: airs[ai].Name(), Count: e.per[ai]})
		}
		out = append(out, im)
	}
	slices.SortStableFunc(out, func(x, y air.Imbalance) int { return int(x.Bus) - int(y.Bus) })
	return out, nil
}
