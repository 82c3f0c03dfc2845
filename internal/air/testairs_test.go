package air

import (
	"fmt"
	"slices"

	"github.com/metalprove/metalprove/internal/field"
)

// This file holds this package's own copies of the test AIRs of spec B §8 (OpenVM
// `sb/test_utils/dummy_airs/**`) with the exact tree shapes of their Rust eval, and trace
// generators for their fixtures. The exported versions live in package testair (which imports air,
// so these tests cannot import it); keep the Eval bodies of both in step.

// FibonacciAir is OpenVM's FibonacciAir: common main (left, right), publics (a, b, x).
type FibonacciAir struct{}

func (FibonacciAir) Name() string         { return "FibonacciAir" }
func (FibonacciAir) Width() TraceWidth    { return TraceWidth{CommonMain: 2} }
func (FibonacciAir) NumPublicValues() int { return 3 }

func (FibonacciAir) Eval(b *Builder) {
	a, bb, x := b.Public(0), b.Public(1), b.Public(2)
	local, next := b.Main(0), b.Main(1)
	left, right := local[0], local[1]
	first := b.WhenFirstRow()
	first.AssertEq(left, a)
	first.AssertEq(right, bb)
	tr := b.WhenTransition()
	tr.AssertEq(right, next[0])
	tr.AssertEq(Add(left, right), next[1])
	b.WhenLastRow().AssertEq(right, x)
}

// FibTrace is FibFixture's trace: rows (a, b), (b, a+b), … of height n, and publics
// [a, b, right of the last row].
func FibTrace(a, b uint32, n int) TraceInput {
	m := NewMatrix(2, n)
	l, r := field.New(a), field.New(b)
	for i := 0; i < n; i++ {
		m.Set(i, 0, l)
		m.Set(i, 1, r)
		l, r = r, l.Add(r)
	}
	return TraceInput{CommonMain: m, Public: []field.Fp{field.New(a), field.New(b), m.At(n-1, 1)}}
}

// FibonacciSelectorAir is OpenVM's FibonacciSelectorAir(sels, lookup): preprocessed column sel,
// common main (left, right), publics (a, b, x); with Lookup, LookupBus(0).add_key_with_lookups.
type FibonacciSelectorAir struct {
	Sels   []bool
	Lookup bool
}

func (FibonacciSelectorAir) Name() string { return "FibonacciSelectorAir" }
func (FibonacciSelectorAir) Width() TraceWidth {
	return TraceWidth{Preprocessed: 1, CommonMain: 2}
}
func (FibonacciSelectorAir) NumPublicValues() int { return 3 }

// PreprocessedTrace is the sel column.
func (f FibonacciSelectorAir) PreprocessedTrace() Matrix { return boolColumn(f.Sels) }

func boolColumn(s []bool) Matrix {
	m := NewMatrix(1, len(s))
	for i, v := range s {
		if v {
			m.Values[i] = field.One
		}
	}
	return m
}

func (f FibonacciSelectorAir) Eval(b *Builder) {
	a, bb, x := b.Public(0), b.Public(1), b.Public(2)
	sel := b.Preprocessed(0)[0]
	local, next := b.Main(0), b.Main(1)
	left, right := local[0], local[1]
	first := b.WhenFirstRow()
	first.AssertEq(left, a)
	first.AssertEq(right, bb)
	b.WhenTransition().When(sel).AssertEq(right, next[0])
	b.WhenTransition().WhenNe(sel, One()).AssertEq(left, next[0])
	b.WhenTransition().When(sel).AssertEq(Add(left, right), next[1])
	b.WhenTransition().WhenNe(sel, One()).AssertEq(right, next[1])
	b.WhenLastRow().AssertEq(right, x)
	if f.Lookup {
		LookupBus(0).AddKeyWithLookups(b, []*Expr{Add(left, right)}, sel)
	}
}

// AlternatingSels is PreprocessedFibFixture's selector: sels[i] = (i % 2 == 0).
func AlternatingSels(n int) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = i%2 == 0
	}
	return s
}

// FibSelectorTrace is the fib_selector_air trace (the pair advances only after rows with sel) with
// publics [a, b, right of the last row].
func FibSelectorTrace(a, b uint32, sels []bool) TraceInput {
	n := len(sels)
	m := NewMatrix(2, n)
	l, r := field.New(a), field.New(b)
	for i := 0; i < n; i++ {
		if i > 0 && sels[i-1] {
			l, r = r, l.Add(r)
		}
		m.Set(i, 0, l)
		m.Set(i, 1, r)
	}
	return TraceInput{CommonMain: m, Public: []field.Fp{field.New(a), field.New(b), m.At(n-1, 1)}}
}

// DummyInteractionAir is OpenVM's DummyInteractionAir: columns (count, f_0..f_{w−1}) in one common
// main, or (Partition) count in the common main and the fields in cached part 0. It sends
// (count) or receives (NEG_ONE * count) the fields on Bus with weight CountWeight.
type DummyInteractionAir struct {
	FieldWidth  int
	IsSend      bool
	Bus         uint16
	CountWeight uint32
	Partition   bool
}

func (d DummyInteractionAir) Name() string {
	dir := "Receive"
	if d.IsSend {
		dir = "Send"
	}
	return fmt.Sprintf("DummyInteractionAir<%d,%s,bus %d>", d.FieldWidth, dir, d.Bus)
}

func (d DummyInteractionAir) Width() TraceWidth {
	if d.Partition {
		return TraceWidth{CachedMains: []int{d.FieldWidth}, CommonMain: 1}
	}
	return TraceWidth{CommonMain: 1 + d.FieldWidth}
}
func (DummyInteractionAir) NumPublicValues() int { return 0 }

func (d DummyInteractionAir) Eval(b *Builder) {
	var fields []*Expr
	var count *Expr
	if d.Partition {
		count = b.CommonMain(0)[0]
		fields = b.CachedMain(0, 0)
	} else {
		local := b.Main(0)
		count = local[0]
		fields = local[1 : 1+d.FieldWidth]
	}
	if d.IsSend {
		b.PushInteraction(d.Bus, fields, count, d.CountWeight)
	} else {
		b.PushInteraction(d.Bus, fields, Mul(NegOne(), count), d.CountWeight)
	}
}

// DummyInteractionTrace builds the trace of a DummyInteractionAir from rows (count, fields…).
func DummyInteractionTrace(d DummyInteractionAir, rows [][]uint32) TraceInput {
	all := MatrixFromRows(rows)
	if !d.Partition {
		return TraceInput{CommonMain: all}
	}
	h := all.Height
	cnt := Matrix{Width: 1, Height: h, Values: slices.Clone(all.Values[:h])}
	fs := Matrix{Width: all.Width - 1, Height: h, Values: slices.Clone(all.Values[h:])}
	return TraceInput{CachedMains: []Matrix{fs}, CommonMain: cnt}
}

// Fixture11Sender and Fixture11Receiver are InteractionsFixture11's rows (count, field) on bus 0.
var (
	Fixture11Sender   = [][]uint32{{0, 1}, {3, 5}, {7, 4}, {546, 889}}
	Fixture11Receiver = [][]uint32{{1, 5}, {3, 4}, {4, 4}, {2, 5}, {0, 123}, {545, 889}, {1, 889}, {0, 456}}
)

// SelfInteractionAir is OpenVM's SelfInteractionAir: eight interactions of the local / next rows
// with itself on Bus (next_sum is the sum of the LOCAL row, as in Rust).
type SelfInteractionAir struct {
	W   int
	Bus uint16
}

func (s SelfInteractionAir) Name() string      { return fmt.Sprintf("SelfInteractionAir<%d>", s.W) }
func (s SelfInteractionAir) Width() TraceWidth { return TraceWidth{CommonMain: s.W} }
func (SelfInteractionAir) NumPublicValues() int {
	return 0
}

func (s SelfInteractionAir) Eval(b *Builder) {
	local, next := b.Main(0), b.Main(1)
	localSum := FoldSum(local...)
	nextSum := FoldSum(local...)
	b.PushInteraction(s.Bus, local, One(), 1)
	b.PushInteraction(s.Bus, next, NegOne(), 1)
	b.PushInteraction(s.Bus, local, localSum, 1)
	b.PushInteraction(s.Bus, next, Neg(nextSum), 1)
	b.PushInteraction(s.Bus, local, local[0], 1)
	b.PushInteraction(s.Bus, next, Neg(next[0]), 1)
	slices.Reverse(local)
	slices.Reverse(next)
	b.PushInteraction(s.Bus, local, localSum, 1)
	b.PushInteraction(s.Bus, next, Neg(nextSum), 1)
}

// SelfInteractionTrace is row r, column i = (r+i) mod width.
func SelfInteractionTrace(width, height int) TraceInput {
	m := NewMatrix(width, height)
	for r := 0; r < height; r++ {
		for i := 0; i < width; i++ {
			m.Set(r, i, field.New(uint32((r+i)%width)))
		}
	}
	return TraceInput{CommonMain: m}
}

// PreprocessedCachedAir is OpenVM's PreprocessedCachedAir(sels, k): preprocessed sel, k cached
// parts of width 1, common main c.
type PreprocessedCachedAir struct {
	Sels []bool
	K    int
}

func (p PreprocessedCachedAir) Name() string { return fmt.Sprintf("PreprocessedCachedAir<%d>", p.K) }
func (p PreprocessedCachedAir) Width() TraceWidth {
	c := make([]int, p.K)
	for i := range c {
		c[i] = 1
	}
	return TraceWidth{Preprocessed: 1, CachedMains: c, CommonMain: 1}
}
func (PreprocessedCachedAir) NumPublicValues() int { return 0 }

// PreprocessedTrace is the sel column.
func (p PreprocessedCachedAir) PreprocessedTrace() Matrix { return boolColumn(p.Sels) }

func (p PreprocessedCachedAir) Eval(b *Builder) {
	selL, selN := b.Preprocessed(0)[0], b.Preprocessed(1)[0]
	cL, cN := b.CommonMain(0)[0], b.CommonMain(1)[0]
	b.AssertZero(Mul(selL, Sub(selL, One())))
	b.WhenFirstRow().AssertZero(cL)
	b.WhenTransition().AssertOne(Sub(cN, cL))
	prevL, prevN := cL, cN
	for j := 0; j < b.NumCachedMains(); j++ {
		pl, pn := b.CachedMain(j, 0)[0], b.CachedMain(j, 1)[0]
		b.AssertEq(Add(prevL, selL), pl)
		b.WhenTransition().AssertEq(Add(prevN, selN), pn)
		prevL, prevN = pl, pn
	}
}

// PreprocessedCachedTrace is PreprocessedAndCachedFixture: c[i] = i, cached part p = i + (p+1)·sel[i].
func PreprocessedCachedTrace(sels []bool, k int) TraceInput {
	n := len(sels)
	in := TraceInput{CommonMain: NewMatrix(1, n)}
	for i := 0; i < n; i++ {
		in.CommonMain.Values[i] = field.New(uint32(i))
	}
	for p := 0; p < k; p++ {
		m := NewMatrix(1, n)
		for i := 0; i < n; i++ {
			v := i
			if sels[i] {
				v += p + 1
			}
			m.Values[i] = field.New(uint32(v))
		}
		in.CachedMains = append(in.CachedMains, m)
	}
	return in
}

// SumAir is tests/partitioned_sum_air.rs: common x, cached ys; x − ((0 + y_0) + y_1 …).
type SumAir struct{ W int }

func (s SumAir) Name() string       { return fmt.Sprintf("SumAir<%d>", s.W) }
func (s SumAir) Width() TraceWidth  { return TraceWidth{CachedMains: []int{s.W}, CommonMain: 1} }
func (SumAir) NumPublicValues() int { return 0 }
func (s SumAir) Eval(b *Builder)    { b.AssertEq(b.CommonMain(0)[0], FoldSum(b.CachedMain(0, 0)...)) }
