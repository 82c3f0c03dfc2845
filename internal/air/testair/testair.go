// Package testair holds the test AIRs of spec B §8 (OpenVM `sb/test_utils/dummy_airs/**` and the
// fixtures of `crates/backend-tests`), each with a trace generator. They are used by tests and by
// `metalprove trace --example NAME`.
//
// Each AIR's Eval pushes its constraints and interactions in the order, and with the tree shapes,
// of the Rust eval it mirrors. Each AIR's Name is lower-case and encodes its parameters
// ("fibonacci", "dummy-interaction-send-w1-bus0", "self-interaction-w8-bus5", …), and Parse turns
// a name back into the AIR, so that a trace file section named after its AIR can be checked.
//
// The kinds of §8 are all here: Fibonacci with public values (FibonacciAir), an interaction pair
// (DummyInteractionAir sender and receiver on one bus, with multiplicities: InteractionPair,
// InteractionsFixture11), a preprocessed-trace AIR (FibonacciSelectorAir, PreprocessedCachedAir),
// traces shorter than 2^l_skip (ShortTraces: heights 1 and 2) and a multi-AIR set of different
// heights (Mixture).
package testair

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

// FibonacciAir is OpenVM's FibonacciAir: common main (left, right), publics (a, b, x).
type FibonacciAir struct{}

func (FibonacciAir) Name() string          { return "fibonacci" }
func (FibonacciAir) Width() air.TraceWidth { return air.TraceWidth{CommonMain: 2} }
func (FibonacciAir) NumPublicValues() int  { return 3 }

func (FibonacciAir) Eval(b *air.Builder) {
	a, bb, x := b.Public(0), b.Public(1), b.Public(2)
	local, next := b.Main(0), b.Main(1)
	left, right := local[0], local[1]
	first := b.WhenFirstRow()
	first.AssertEq(left, a)
	first.AssertEq(right, bb)
	tr := b.WhenTransition()
	tr.AssertEq(right, next[0])
	tr.AssertEq(air.Add(left, right), next[1])
	b.WhenLastRow().AssertEq(right, x)
}

// FibTrace is FibFixture's trace: rows (a, b), (b, a+b), … of height n, and publics
// [a, b, right of the last row].
func FibTrace(a, b uint32, n int) air.TraceInput {
	m := air.NewMatrix(2, n)
	l, r := field.New(a), field.New(b)
	for i := 0; i < n; i++ {
		m.Set(i, 0, l)
		m.Set(i, 1, r)
		l, r = r, l.Add(r)
	}
	return air.TraceInput{CommonMain: m, Public: []field.Fp{field.New(a), field.New(b), m.At(n-1, 1)}}
}

// HeightBound is implemented by the test AIRs whose preprocessed trace is a function of the trace
// height (the selectors of the §8 fixtures). Parse returns them without a preprocessed trace;
// WithHeight returns the AIR for traces of height h.
type HeightBound interface {
	air.Air
	WithHeight(h int) air.Air
}

// FibonacciSelectorAir is OpenVM's FibonacciSelectorAir(sels, lookup): preprocessed column sel,
// common main (left, right), publics (a, b, x); with Lookup, LookupBus(0).add_key_with_lookups.
// Its name does not record Sels: Parse and WithHeight give AlternatingSels.
type FibonacciSelectorAir struct {
	Sels   []bool
	Lookup bool
}

func (f FibonacciSelectorAir) Name() string {
	if f.Lookup {
		return "fibonacci-selector-lookup"
	}
	return "fibonacci-selector"
}

func (FibonacciSelectorAir) Width() air.TraceWidth {
	return air.TraceWidth{Preprocessed: 1, CommonMain: 2}
}
func (FibonacciSelectorAir) NumPublicValues() int { return 3 }

// PreprocessedTrace is the sel column.
func (f FibonacciSelectorAir) PreprocessedTrace() air.Matrix { return boolColumn(f.Sels) }

// WithHeight returns the AIR with AlternatingSels(h).
func (f FibonacciSelectorAir) WithHeight(h int) air.Air {
	f.Sels = AlternatingSels(h)
	return f
}

func boolColumn(s []bool) air.Matrix {
	m := air.NewMatrix(1, len(s))
	for i, v := range s {
		if v {
			m.Values[i] = field.One
		}
	}
	return m
}

func (f FibonacciSelectorAir) Eval(b *air.Builder) {
	a, bb, x := b.Public(0), b.Public(1), b.Public(2)
	sel := b.Preprocessed(0)[0]
	local, next := b.Main(0), b.Main(1)
	left, right := local[0], local[1]
	first := b.WhenFirstRow()
	first.AssertEq(left, a)
	first.AssertEq(right, bb)
	b.WhenTransition().When(sel).AssertEq(right, next[0])
	b.WhenTransition().WhenNe(sel, air.One()).AssertEq(left, next[0])
	b.WhenTransition().When(sel).AssertEq(air.Add(left, right), next[1])
	b.WhenTransition().WhenNe(sel, air.One()).AssertEq(right, next[1])
	b.WhenLastRow().AssertEq(right, x)
	if f.Lookup {
		air.LookupBus(0).AddKeyWithLookups(b, []*air.Expr{air.Add(left, right)}, sel)
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
func FibSelectorTrace(a, b uint32, sels []bool) air.TraceInput {
	n := len(sels)
	m := air.NewMatrix(2, n)
	l, r := field.New(a), field.New(b)
	for i := 0; i < n; i++ {
		if i > 0 && sels[i-1] {
			l, r = r, l.Add(r)
		}
		m.Set(i, 0, l)
		m.Set(i, 1, r)
	}
	return air.TraceInput{CommonMain: m, Public: []field.Fp{field.New(a), field.New(b), m.At(n-1, 1)}}
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

// Name is dummy-interaction-{send|receive}-w<FieldWidth>-bus<Bus>[-weight<CountWeight>][-cached].
func (d DummyInteractionAir) Name() string {
	dir := "receive"
	if d.IsSend {
		dir = "send"
	}
	s := fmt.Sprintf("dummy-interaction-%s-w%d-bus%d", dir, d.FieldWidth, d.Bus)
	if d.CountWeight != 0 {
		s += fmt.Sprintf("-weight%d", d.CountWeight)
	}
	if d.Partition {
		s += "-cached"
	}
	return s
}

func (d DummyInteractionAir) Width() air.TraceWidth {
	if d.Partition {
		return air.TraceWidth{CachedMains: []int{d.FieldWidth}, CommonMain: 1}
	}
	return air.TraceWidth{CommonMain: 1 + d.FieldWidth}
}
func (DummyInteractionAir) NumPublicValues() int { return 0 }

func (d DummyInteractionAir) Eval(b *air.Builder) {
	var fields []*air.Expr
	var count *air.Expr
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
		b.PushInteraction(d.Bus, fields, air.Mul(air.NegOne(), count), d.CountWeight)
	}
}

// DummyInteractionTrace builds the trace of a DummyInteractionAir from rows (count, fields…).
func DummyInteractionTrace(d DummyInteractionAir, rows [][]uint32) air.TraceInput {
	all := air.MatrixFromRows(rows)
	if !d.Partition {
		return air.TraceInput{CommonMain: all}
	}
	h := all.Height
	cnt := air.Matrix{Width: 1, Height: h, Values: slices.Clone(all.Values[:h])}
	fs := air.Matrix{Width: all.Width - 1, Height: h, Values: slices.Clone(all.Values[h:])}
	return air.TraceInput{CachedMains: []air.Matrix{fs}, CommonMain: cnt}
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

func (s SelfInteractionAir) Name() string {
	return fmt.Sprintf("self-interaction-w%d-bus%d", s.W, s.Bus)
}
func (s SelfInteractionAir) Width() air.TraceWidth { return air.TraceWidth{CommonMain: s.W} }
func (SelfInteractionAir) NumPublicValues() int    { return 0 }

func (s SelfInteractionAir) Eval(b *air.Builder) {
	local, next := b.Main(0), b.Main(1)
	localSum := air.FoldSum(local...)
	nextSum := air.FoldSum(local...)
	b.PushInteraction(s.Bus, local, air.One(), 1)
	b.PushInteraction(s.Bus, next, air.NegOne(), 1)
	b.PushInteraction(s.Bus, local, localSum, 1)
	b.PushInteraction(s.Bus, next, air.Neg(nextSum), 1)
	b.PushInteraction(s.Bus, local, local[0], 1)
	b.PushInteraction(s.Bus, next, air.Neg(next[0]), 1)
	slices.Reverse(local)
	slices.Reverse(next)
	b.PushInteraction(s.Bus, local, localSum, 1)
	b.PushInteraction(s.Bus, next, air.Neg(nextSum), 1)
}

// SelfInteractionTrace is row r, column i = (r+i) mod width.
func SelfInteractionTrace(width, height int) air.TraceInput {
	m := air.NewMatrix(width, height)
	for r := 0; r < height; r++ {
		for i := 0; i < width; i++ {
			m.Set(r, i, field.New(uint32((r+i)%width)))
		}
	}
	return air.TraceInput{CommonMain: m}
}

// PreprocessedCachedAir is OpenVM's PreprocessedCachedAir(sels, k): preprocessed sel, k cached
// parts of width 1, common main c. Its name does not record Sels: Parse and WithHeight give
// AlternatingSels.
type PreprocessedCachedAir struct {
	Sels []bool
	K    int
}

func (p PreprocessedCachedAir) Name() string { return fmt.Sprintf("preprocessed-cached-k%d", p.K) }
func (p PreprocessedCachedAir) Width() air.TraceWidth {
	c := make([]int, p.K)
	for i := range c {
		c[i] = 1
	}
	return air.TraceWidth{Preprocessed: 1, CachedMains: c, CommonMain: 1}
}
func (PreprocessedCachedAir) NumPublicValues() int { return 0 }

// PreprocessedTrace is the sel column.
func (p PreprocessedCachedAir) PreprocessedTrace() air.Matrix { return boolColumn(p.Sels) }

// WithHeight returns the AIR with AlternatingSels(h).
func (p PreprocessedCachedAir) WithHeight(h int) air.Air {
	p.Sels = AlternatingSels(h)
	return p
}

func (p PreprocessedCachedAir) Eval(b *air.Builder) {
	selL, selN := b.Preprocessed(0)[0], b.Preprocessed(1)[0]
	cL, cN := b.CommonMain(0)[0], b.CommonMain(1)[0]
	b.AssertZero(air.Mul(selL, air.Sub(selL, air.One())))
	b.WhenFirstRow().AssertZero(cL)
	b.WhenTransition().AssertOne(air.Sub(cN, cL))
	prevL, prevN := cL, cN
	for j := 0; j < b.NumCachedMains(); j++ {
		pl, pn := b.CachedMain(j, 0)[0], b.CachedMain(j, 1)[0]
		b.AssertEq(air.Add(prevL, selL), pl)
		b.WhenTransition().AssertEq(air.Add(prevN, selN), pn)
		prevL, prevN = pl, pn
	}
}

// PreprocessedCachedTrace is PreprocessedAndCachedFixture: c[i] = i, cached part p = i + (p+1)·sel[i].
func PreprocessedCachedTrace(sels []bool, k int) air.TraceInput {
	n := len(sels)
	in := air.TraceInput{CommonMain: air.NewMatrix(1, n)}
	for i := 0; i < n; i++ {
		in.CommonMain.Values[i] = field.New(uint32(i))
	}
	for p := 0; p < k; p++ {
		m := air.NewMatrix(1, n)
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

func (s SumAir) Name() string { return fmt.Sprintf("sum-w%d", s.W) }
func (s SumAir) Width() air.TraceWidth {
	return air.TraceWidth{CachedMains: []int{s.W}, CommonMain: 1}
}
func (SumAir) NumPublicValues() int { return 0 }
func (s SumAir) Eval(b *air.Builder) {
	b.AssertEq(b.CommonMain(0)[0], air.FoldSum(b.CachedMain(0, 0)...))
}

// SumTrace is a SumAir trace of the given height: y_j[i] = i·(j+1) + 1, x = Σ y.
func SumTrace(w, height int) air.TraceInput {
	ys := air.NewMatrix(w, height)
	x := air.NewMatrix(1, height)
	for i := 0; i < height; i++ {
		s := field.Zero
		for j := 0; j < w; j++ {
			v := field.New(uint32(i*(j+1) + 1))
			ys.Set(i, j, v)
			s = s.Add(v)
		}
		x.Values[i] = s
	}
	return air.TraceInput{CachedMains: []air.Matrix{ys}, CommonMain: x}
}

// MaxParsedWidth bounds the widths, counts and buses that Parse accepts.
const MaxParsedWidth = 1 << 16

// Parse returns the test AIR whose Name is name. AIRs whose preprocessed trace depends on the
// height (HeightBound) come without one; call WithHeight.
func Parse(name string) (air.Air, error) {
	bad := func() (air.Air, error) { return nil, fmt.Errorf("testair: unknown test AIR %q", name) }
	// num parses "<prefix><decimal>" into [lo, MaxParsedWidth]; rest is what follows.
	num := func(s, prefix string, lo int) (int, string, bool) {
		if !strings.HasPrefix(s, prefix) {
			return 0, "", false
		}
		s = s[len(prefix):]
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || (i > 1 && s[0] == '0') {
			return 0, "", false
		}
		v, err := strconv.Atoi(s[:i])
		if err != nil || v < lo || v > MaxParsedWidth {
			return 0, "", false
		}
		return v, s[i:], true
	}
	switch name {
	case "fibonacci":
		return FibonacciAir{}, nil
	case "fibonacci-selector":
		return FibonacciSelectorAir{}, nil
	case "fibonacci-selector-lookup":
		return FibonacciSelectorAir{Lookup: true}, nil
	}
	var a air.Air
	switch {
	case strings.HasPrefix(name, "dummy-interaction-"):
		rest := strings.TrimPrefix(name, "dummy-interaction-")
		d := DummyInteractionAir{}
		switch {
		case strings.HasPrefix(rest, "send-"):
			d.IsSend, rest = true, rest[len("send-"):]
		case strings.HasPrefix(rest, "receive-"):
			rest = rest[len("receive-"):]
		default:
			return bad()
		}
		w, rest, ok := num(rest, "w", 1)
		if !ok {
			return bad()
		}
		bus, rest, ok := num(rest, "-bus", 0)
		if !ok || bus > 0xffff {
			return bad()
		}
		d.FieldWidth, d.Bus = w, uint16(bus)
		if strings.HasPrefix(rest, "-weight") {
			cw, r, ok := num(rest, "-weight", 1)
			if !ok {
				return bad()
			}
			d.CountWeight, rest = uint32(cw), r
		}
		if rest == "-cached" {
			d.Partition, rest = true, ""
		}
		if rest != "" {
			return bad()
		}
		a = d
	case strings.HasPrefix(name, "self-interaction-"):
		w, rest, ok := num(strings.TrimPrefix(name, "self-interaction-"), "w", 1)
		if !ok {
			return bad()
		}
		bus, rest, ok := num(rest, "-bus", 0)
		if !ok || rest != "" || bus > 0xffff {
			return bad()
		}
		a = SelfInteractionAir{W: w, Bus: uint16(bus)}
	case strings.HasPrefix(name, "preprocessed-cached-"):
		k, rest, ok := num(strings.TrimPrefix(name, "preprocessed-cached-"), "k", 0)
		if !ok || rest != "" {
			return bad()
		}
		a = PreprocessedCachedAir{K: k}
	case strings.HasPrefix(name, "sum-"):
		w, rest, ok := num(strings.TrimPrefix(name, "sum-"), "w", 1)
		if !ok || rest != "" {
			return bad()
		}
		a = SumAir{W: w}
	default:
		return bad()
	}
	if a.Name() != name { // canonical spelling only
		return bad()
	}
	return a, nil
}
