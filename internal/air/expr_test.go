package air_test

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"strings"
	"testing"
)

func mainVar(part, off, idx int) *air.Expr {
	return air.V(air.Var{Entry: air.EntryMain, PartIndex: part, Offset: off, Index: idx})
}

func pubVar(i int) *air.Expr { return air.V(air.Var{Entry: air.EntryPublic, Index: i}) }

func symbolic(t *testing.T, a air.Air) *air.SymbolicConstraints {
	t.Helper()
	sc, err := air.Symbolic(a)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestDegreeMultiple(t *testing.T) {
	x, y, p := mainVar(0, 0, 0), mainVar(0, 1, 1), pubVar(0)
	pre := air.V(air.Var{Entry: air.EntryPreprocessed, Offset: 1, Index: 0})
	cases := []struct {
		e    *air.Expr
		want int
	}{
		{x, 1}, {pre, 1}, {p, 0}, {air.Const(5), 0}, {air.IsFirstRow(), 1}, {air.IsLastRow(), 1}, {air.IsTransition(), 1},
		{air.Add(x, p), 1}, {air.Sub(p, air.Const(1)), 0}, {air.Neg(air.Mul(x, y)), 2}, {air.Mul(x, air.Mul(y, pre)), 3},
		{air.Mul(air.IsTransition(), air.Sub(x, y)), 2}, {air.Mul(p, air.Const(3)), 0},
		// computed on the tree as built: y·0 still counts
		{air.Mul(x, air.Add(air.Mul(y, air.Const(0)), air.Const(3))), 2},
	}
	for i, c := range cases {
		if got := c.e.DegreeMultiple(); got != c.want {
			t.Errorf("case %d %v: dm %d, want %d", i, c.e, got, c.want)
		}
	}
}

// recorder collects the constraints a builder call sequence pushes.
func pushed(f func(b *air.Builder)) []string {
	b := air.NewBuilder(air.TraceWidth{Preprocessed: 1, CommonMain: 3}, 2)
	f(b)
	var out []string
	for _, c := range b.Constraints() {
		out = append(out, c.String())
	}
	return out
}

func TestBuilderTreeShapes(t *testing.T) {
	const pm1 = "2013265920"
	cases := []struct {
		name string
		f    func(b *air.Builder)
		want string
	}{
		{"assert_zero", func(b *air.Builder) { b.AssertZero(b.Main(0)[0]) }, "m0[0]"},
		{"assert_eq", func(b *air.Builder) { b.AssertEq(b.Main(0)[0], b.Main(1)[2]) }, "(m0[0] - m0[2]')"},
		{"assert_one", func(b *air.Builder) { b.AssertOne(b.Main(0)[1]) }, "(m0[1] - 1)"},
		{"assert_bool", func(b *air.Builder) { b.AssertBool(b.Main(0)[1]) }, "(m0[1] * (m0[1] - 1))"},
		{"assert_tern", func(b *air.Builder) { b.AssertTern(b.Main(0)[1]) }, "((m0[1] * (m0[1] - 1)) * (m0[1] - 2))"},
		{"when", func(b *air.Builder) { b.When(b.Preprocessed(0)[0]).AssertZero(b.Main(0)[0]) }, "(pre[0] * m0[0])"},
		{"when.when", func(b *air.Builder) { b.When(b.Main(0)[0]).When(b.Main(0)[1]).AssertZero(b.Main(0)[2]) },
			"(m0[0] * (m0[1] * m0[2]))"},
		{"when_first_row.assert_eq", func(b *air.Builder) { b.WhenFirstRow().AssertEq(b.Main(0)[0], b.Public(1)) },
			"(IsFirstRow * (m0[0] - pub[1]))"},
		{"when_last_row.assert_one", func(b *air.Builder) { b.WhenLastRow().AssertOne(b.Main(0)[0]) },
			"(IsLastRow * (m0[0] - 1))"},
		{"when_transition.when_ne", func(b *air.Builder) {
			b.WhenTransition().WhenNe(b.Preprocessed(0)[0], air.One()).AssertEq(b.Main(0)[0], b.Main(1)[0])
		}, "(IsTransition * ((pre[0] - 1) * (m0[0] - m0[0]')))"},
		{"filtered.assert_bool", func(b *air.Builder) { b.WhenTransition().AssertBool(b.Main(0)[0]) },
			"(IsTransition * (m0[0] * (m0[0] - 1)))"},
		{"neg_one_mul", func(b *air.Builder) { b.AssertZero(air.Mul(air.NegOne(), b.Main(0)[0])) }, "(" + pm1 + " * m0[0])"},
		{"neg", func(b *air.Builder) { b.AssertZero(air.Neg(b.Main(0)[0])) }, "-m0[0]"},
		{"fold_sum", func(b *air.Builder) { b.AssertZero(air.FoldSum(b.Main(0)...)) }, "(((0 + m0[0]) + m0[1]) + m0[2])"},
		{"sum", func(b *air.Builder) { b.AssertZero(air.Sum(b.Main(0)...)) }, "((m0[0] + m0[1]) + m0[2])"},
		{"transition_window", func(b *air.Builder) { b.AssertZero(b.IsTransitionWindow(2)) }, "IsTransition"},
	}
	for _, c := range cases {
		got := pushed(c.f)
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFibonacciTrees(t *testing.T) {
	sc := symbolic(t, testair.FibonacciAir{})
	want := []string{
		"(IsFirstRow * (m0[0] - pub[0]))",
		"(IsFirstRow * (m0[1] - pub[1]))",
		"(IsTransition * (m0[1] - m0[0]'))",
		"(IsTransition * ((m0[0] + m0[1]) - m0[1]'))",
		"(IsLastRow * (m0[1] - pub[2]))",
	}
	if len(sc.Constraints) != len(want) || len(sc.Interactions) != 0 {
		t.Fatalf("got %d constraints / %d interactions", len(sc.Constraints), len(sc.Interactions))
	}
	for i, w := range want {
		if g := sc.Constraints[i].String(); g != w {
			t.Errorf("constraint %d: %s, want %s", i, g, w)
		}
	}
	if d := sc.MaxConstraintDegree(); d != 2 {
		t.Errorf("max degree %d, want 2", d)
	}
}

func TestFibSelectorTrees(t *testing.T) {
	sc := symbolic(t, testair.FibonacciSelectorAir{Sels: testair.AlternatingSels(4), Lookup: true})
	want := []string{
		"(IsFirstRow * (m0[0] - pub[0]))",
		"(IsFirstRow * (m0[1] - pub[1]))",
		"(IsTransition * (pre[0] * (m0[1] - m0[0]')))",
		"(IsTransition * ((pre[0] - 1) * (m0[0] - m0[0]')))",
		"(IsTransition * (pre[0] * ((m0[0] + m0[1]) - m0[1]')))",
		"(IsTransition * ((pre[0] - 1) * (m0[1] - m0[1]')))",
		"(IsLastRow * (m0[1] - pub[2]))",
	}
	for i, w := range want {
		if g := sc.Constraints[i].String(); g != w {
			t.Errorf("constraint %d: %s, want %s", i, g, w)
		}
	}
	if len(sc.Interactions) != 1 {
		t.Fatalf("%d interactions", len(sc.Interactions))
	}
	it := sc.Interactions[0]
	if it.Bus != 0 || it.CountWeight != 0 || it.Count.String() != "-pre[0]" || len(it.Message) != 1 || it.Message[0].String() != "(m0[0] + m0[1])" {
		t.Errorf("interaction %+v count %v", it, it.Count)
	}
	if d := sc.MaxConstraintDegree(); d != 3 {
		t.Errorf("max degree %d, want 3", d)
	}
}

func TestBusHelpers(t *testing.T) {
	b := air.NewBuilder(air.TraceWidth{CommonMain: 2}, 0)
	m := b.Main(0)
	air.LookupBus(3).LookupKey(b, m[:1], m[1])
	air.LookupBus(3).AddKeyWithLookups(b, m[:1], m[1])
	air.PermutationCheckBus(4).Send(b, m, m[0])
	air.PermutationCheckBus(4).Receive(b, m, m[0])
	air.PermutationCheckBus(4).Interact(b, m, m[1])
	want := []struct {
		bus    uint16
		count  string
		weight uint32
	}{{3, "m0[1]", 1}, {3, "-m0[1]", 0}, {4, "m0[0]", 1}, {4, "-m0[0]", 1}, {4, "m0[1]", 1}}
	its := b.Interactions()
	if len(its) != len(want) {
		t.Fatalf("%d interactions", len(its))
	}
	for i, w := range want {
		if its[i].Bus != w.bus || its[i].Count.String() != w.count || its[i].CountWeight != w.weight {
			t.Errorf("interaction %d: bus %d count %v weight %d", i, its[i].Bus, its[i].Count, its[i].CountWeight)
		}
	}
}

func TestPartsAndPanics(t *testing.T) {
	// Main() on a partitioned AIR is an error (OpenVM panics).
	_, err := air.Symbolic(badAir{})
	if err == nil || !strings.Contains(err.Error(), "partitioned") {
		t.Errorf("err = %v", err)
	}
	b := air.NewBuilder(air.TraceWidth{Preprocessed: 1, CachedMains: []int{2, 1}, CommonMain: 3}, 1)
	if got := b.CachedMain(1, 1)[0].Var(); got != (air.Var{Entry: air.EntryMain, PartIndex: 1, Offset: 1}) {
		t.Errorf("cached var %+v", got)
	}
	if got := b.CommonMain(0)[2].Var(); got != (air.Var{Entry: air.EntryMain, PartIndex: 2, Index: 2}) {
		t.Errorf("common var %+v", got)
	}
	// only a single cached part and no common main: Main() is that part.
	b = air.NewBuilder(air.TraceWidth{CachedMains: []int{2}}, 0)
	if got := b.Main(1)[1].Var(); got != (air.Var{Entry: air.EntryMain, Offset: 1, Index: 1}) {
		t.Errorf("main var %+v", got)
	}
}

type badAir struct{}

func (badAir) Name() string { return "bad" }
func (badAir) Width() air.TraceWidth {
	return air.TraceWidth{CachedMains: []int{1}, CommonMain: 1}
}
func (badAir) NumPublicValues() int { return 0 }
func (badAir) Eval(b *air.Builder)  { b.AssertZero(b.Main(0)[0]) }

func TestAbbrevBoundsSharedTrees(t *testing.T) {
	x := air.V(air.Var{Entry: air.EntryMain, Index: 0})
	acc := x
	for range 40 { // 2^40 leaves if printed in full
		acc = air.Add(acc, acc)
	}
	s := acc.Abbrev(100)
	if len(s) > 200 || !strings.HasSuffix(s, "…") {
		t.Fatalf("Abbrev(100) = %d bytes %q", len(s), s)
	}
	small := air.Mul(x, air.Sub(x, air.One()))
	if got, want := small.Abbrev(100), small.String(); got != want {
		t.Fatalf("Abbrev of a short tree = %q, want %q", got, want)
	}
}
