package air

import (
	"errors"
	"fmt"
)

// TraceWidth is OpenVM's TraceWidth. Preprocessed == 0 means "no preprocessed trace" (OpenVM's
// `None`; a preprocessed trace of width 0 is not representable here). CachedMains are the cached
// main parts in DAG order (part_index 0..k−1); the common main is part k when CommonMain > 0.
type TraceWidth struct {
	Preprocessed int
	CachedMains  []int
	CommonMain   int
}

// HasPreprocessed reports whether the AIR has a preprocessed trace.
func (w TraceWidth) HasPreprocessed() bool { return w.Preprocessed > 0 }

// MainWidths returns the widths of the main parts in DAG numbering: cached parts, then the common
// main if its width is non-zero (as `SymbolicRapBuilder::new` builds `partitioned_main`).
func (w TraceWidth) MainWidths() []int {
	out := append([]int(nil), w.CachedMains...)
	if w.CommonMain != 0 {
		out = append(out, w.CommonMain)
	}
	return out
}

// MainWidth is Σ cached + common.
func (w TraceWidth) MainWidth() int {
	s := w.CommonMain
	for _, c := range w.CachedMains {
		s += c
	}
	return s
}

// Air is an AIR written in Go. Eval must describe the constraints and interactions with the
// builder in the same order, and with the same tree shapes, as the Rust AIR it mirrors.
type Air interface {
	Name() string
	Width() TraceWidth
	NumPublicValues() int
	Eval(b *Builder)
}

// PreprocessedAir is implemented by AIRs with a preprocessed trace (column-major, see Matrix).
type PreprocessedAir interface {
	Air
	PreprocessedTrace() Matrix
}

// Interaction is a symbolic interaction `push_interaction(bus, message, count, count_weight)`.
type Interaction struct {
	Message     []*Expr
	Count       *Expr
	Bus         uint16
	CountWeight uint32
}

// asserts holds the assert_* helpers shared by Builder and Filtered; zero pushes one constraint
// (already wrapped in the conditions of a filtered builder).
type asserts struct {
	zero func(x *Expr)
}

// AssertZero pushes x (under the builder's conditions).
func (a asserts) AssertZero(x *Expr) { a.zero(x) }

// AssertZeros pushes each x in order.
func (a asserts) AssertZeros(xs ...*Expr) {
	for _, x := range xs {
		a.zero(x)
	}
}

// AssertEq pushes Sub(x, y).
func (a asserts) AssertEq(x, y *Expr) { a.zero(Sub(x, y)) }

// AssertOne pushes Sub(x, Constant(1)).
func (a asserts) AssertOne(x *Expr) { a.zero(Sub(x, One())) }

// AssertBool pushes Mul(x, Sub(x, Constant(1))) (Plonky3 0.4.3 `assert_bool`).
func (a asserts) AssertBool(x *Expr) { a.zero(Mul(x, Sub(x, One()))) }

// AssertBools pushes AssertBool(x) for each x in order.
func (a asserts) AssertBools(xs ...*Expr) {
	for _, x := range xs {
		a.AssertBool(x)
	}
}

// AssertTern pushes Mul(Mul(x, Sub(x, 1)), Sub(x, 2)) (OpenVM `InteractionBuilder::assert_tern`).
func (a asserts) AssertTern(x *Expr) { a.zero(Mul(Mul(x, Sub(x, One())), Sub(x, ConstInt(2)))) }

// When returns a builder whose constraints are multiplied by c on the LEFT: its AssertZero(x)
// pushes Mul(c, x) through this builder, so When(a).When(b).AssertZero(x) = Mul(a, Mul(b, x)).
func (a asserts) When(c *Expr) *Filtered {
	parent := a.zero
	return &Filtered{asserts: asserts{zero: func(x *Expr) { parent(Mul(c, x)) }}, cond: c}
}

// WhenNe is When(Sub(x, y)).
func (a asserts) WhenNe(x, y *Expr) *Filtered { return a.When(Sub(x, y)) }

// WhenFirstRow is When(IsFirstRow).
func (a asserts) WhenFirstRow() *Filtered { return a.When(IsFirstRow()) }

// WhenLastRow is When(IsLastRow).
func (a asserts) WhenLastRow() *Filtered { return a.When(IsLastRow()) }

// WhenTransition is When(IsTransition) (`is_transition_window(2)`).
func (a asserts) WhenTransition() *Filtered { return a.When(IsTransition()) }

// Filtered is Plonky3's FilteredAirBuilder: constraints only, no interactions (OpenVM implements
// InteractionBuilder for none of its filtered builders).
type Filtered struct {
	asserts
	cond *Expr
}

// Condition returns the condition this builder multiplies by (the innermost one).
func (f *Filtered) Condition() *Expr { return f.cond }

// Builder is the symbolic builder (OpenVM SymbolicRapBuilder) an Air's Eval writes into.
type Builder struct {
	asserts
	width        TraceWidth
	parts        []int // main part widths, DAG numbering
	numPublic    int
	pre          [2][]*Expr
	main         [][2][]*Expr
	public       []*Expr
	constraints  []*Expr
	interactions []Interaction
}

// NewBuilder returns an empty symbolic builder for the given widths and number of public values.
func NewBuilder(w TraceWidth, numPublic int) *Builder {
	b := &Builder{width: w, parts: w.MainWidths(), numPublic: numPublic}
	b.asserts.zero = func(x *Expr) {
		if x == nil {
			panic("air: nil constraint")
		}
		b.constraints = append(b.constraints, x)
	}
	for off := 0; off < 2; off++ {
		for i := 0; i < w.Preprocessed; i++ {
			b.pre[off] = append(b.pre[off], V(Var{Entry: EntryPreprocessed, Offset: off, Index: i}))
		}
	}
	b.main = make([][2][]*Expr, len(b.parts))
	for p, wp := range b.parts {
		for off := 0; off < 2; off++ {
			row := make([]*Expr, wp)
			for i := range row {
				row[i] = V(Var{Entry: EntryMain, PartIndex: p, Offset: off, Index: i})
			}
			b.main[p][off] = row
		}
	}
	for i := 0; i < numPublic; i++ {
		b.public = append(b.public, V(Var{Entry: EntryPublic, Index: i}))
	}
	return b
}

func checkOffset(offset int) {
	if offset != 0 && offset != 1 {
		panic(fmt.Sprintf("air: row offset %d (only 0 = local and 1 = next exist)", offset))
	}
}

func clone(xs []*Expr) []*Expr { return append([]*Expr(nil), xs...) }

// Main returns the row at offset (0 local, 1 next) of the only main part; it panics when the main
// trace is empty or partitioned (as OpenVM's `main()`).
func (b *Builder) Main(offset int) []*Expr {
	checkOffset(offset)
	if len(b.parts) != 1 {
		panic("air: Main() used on an AIR whose main trace is empty or partitioned")
	}
	return clone(b.main[0][offset])
}

// CommonMain returns the row at offset of the common main part (part index k).
func (b *Builder) CommonMain(offset int) []*Expr {
	checkOffset(offset)
	if b.width.CommonMain == 0 {
		panic("air: AIR has no common main trace")
	}
	return clone(b.main[len(b.width.CachedMains)][offset])
}

// CachedMain returns the row at offset of cached main part j.
func (b *Builder) CachedMain(j, offset int) []*Expr {
	checkOffset(offset)
	if j < 0 || j >= len(b.width.CachedMains) {
		panic(fmt.Sprintf("air: cached main %d out of range", j))
	}
	return clone(b.main[j][offset])
}

// NumCachedMains returns the number of cached main parts.
func (b *Builder) NumCachedMains() int { return len(b.width.CachedMains) }

// Preprocessed returns the preprocessed row at offset (empty when there is none).
func (b *Builder) Preprocessed(offset int) []*Expr {
	checkOffset(offset)
	return clone(b.pre[offset])
}

// Public returns public value i.
func (b *Builder) Public(i int) *Expr { return b.public[i] }

// Publics returns all public values.
func (b *Builder) Publics() []*Expr { return clone(b.public) }

// IsFirstRow, IsLastRow, IsTransition are the selectors (builder forms of the package functions).
func (b *Builder) IsFirstRow() *Expr   { return IsFirstRow() }
func (b *Builder) IsLastRow() *Expr    { return IsLastRow() }
func (b *Builder) IsTransition() *Expr { return IsTransition() }

// IsTransitionWindow is `is_transition_window(size)`; only size 2 exists.
func (b *Builder) IsTransitionWindow(size int) *Expr {
	if size != 2 {
		panic("air: only a transition window of size 2 is supported")
	}
	return IsTransition()
}

// PushInteraction appends Interaction{message, count, bus, countWeight} (message copied).
func (b *Builder) PushInteraction(bus uint16, message []*Expr, count *Expr, countWeight uint32) {
	b.interactions = append(b.interactions, Interaction{Message: clone(message), Count: count, Bus: bus, CountWeight: countWeight})
}

// Constraints returns the constraint trees in assert order.
func (b *Builder) Constraints() []*Expr { return clone(b.constraints) }

// Interactions returns the interactions in push order.
func (b *Builder) Interactions() []Interaction { return append([]Interaction(nil), b.interactions...) }

// LookupBus is OpenVM's LookupBus.
type LookupBus uint16

// LookupKey pushes (query, enabled, weight 1).
func (l LookupBus) LookupKey(b *Builder, query []*Expr, enabled *Expr) {
	b.PushInteraction(uint16(l), query, enabled, 1)
}

// AddKeyWithLookups pushes (key, Neg(numLookups), weight 0).
func (l LookupBus) AddKeyWithLookups(b *Builder, key []*Expr, numLookups *Expr) {
	b.PushInteraction(uint16(l), key, Neg(numLookups), 0)
}

// PermutationCheckBus is OpenVM's PermutationCheckBus.
type PermutationCheckBus uint16

// Send pushes (message, enabled, weight 1).
func (p PermutationCheckBus) Send(b *Builder, message []*Expr, enabled *Expr) {
	b.PushInteraction(uint16(p), message, enabled, 1)
}

// Receive pushes (message, Neg(enabled), weight 1).
func (p PermutationCheckBus) Receive(b *Builder, message []*Expr, enabled *Expr) {
	b.PushInteraction(uint16(p), message, Neg(enabled), 1)
}

// Interact pushes (message, direction, weight 1).
func (p PermutationCheckBus) Interact(b *Builder, message []*Expr, direction *Expr) {
	b.PushInteraction(uint16(p), message, direction, 1)
}

// SymbolicConstraints is the result of running an AIR's Eval on a symbolic builder.
type SymbolicConstraints struct {
	Constraints  []*Expr
	Interactions []Interaction
}

// MaxConstraintDegree is the max degree_multiple over all constraints and all interaction counts
// and message fields (on the trees, before simplification); 0 when there is nothing.
func (s *SymbolicConstraints) MaxConstraintDegree() int {
	d := 0
	for _, c := range s.Constraints {
		d = max(d, c.dm)
	}
	for _, it := range s.Interactions {
		d = max(d, it.Count.dm)
		for _, m := range it.Message {
			d = max(d, m.dm)
		}
	}
	return d
}

// ErrNilExpr is returned when an AIR pushed a nil expression.
var ErrNilExpr = errors.New("air: nil expression in an interaction")

// Symbolic runs air.Eval on a fresh builder. A panic raised by Eval (for instance Main() on a
// partitioned AIR) is returned as an error.
func Symbolic(a Air) (sc *SymbolicConstraints, err error) {
	b := NewBuilder(a.Width(), a.NumPublicValues())
	defer func() {
		if r := recover(); r != nil {
			sc, err = nil, fmt.Errorf("air %s: eval: %v", a.Name(), r)
		}
	}()
	a.Eval(b)
	for _, it := range b.interactions {
		if it.Count == nil {
			return nil, fmt.Errorf("air %s: %w", a.Name(), ErrNilExpr)
		}
		for _, m := range it.Message {
			if m == nil {
				return nil, fmt.Errorf("air %s: %w", a.Name(), ErrNilExpr)
			}
		}
	}
	return &SymbolicConstraints{Constraints: b.constraints, Interactions: b.interactions}, nil
}
