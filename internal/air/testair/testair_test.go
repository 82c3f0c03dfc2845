package testair

import (
	"fmt"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

// checkAll runs the constraint checker on every instance and the interaction balance over all.
func checkAll(t *testing.T, ins []Instance) (failures []air.Failure, imbalances []air.Imbalance) {
	t.Helper()
	var airs []air.Air
	var traces []air.TraceInput
	for _, in := range ins {
		fs, err := constraints.Check(in.Air, in.Trace, 0)
		if err != nil {
			t.Fatalf("%s: %v", in.Air.Name(), err)
		}
		failures = append(failures, fs...)
		airs = append(airs, in.Air)
		traces = append(traces, in.Trace)
	}
	im, err := constraints.CheckInteractions(airs, traces)
	if err != nil {
		t.Fatal(err)
	}
	return failures, im
}

type fixture struct {
	name string
	ins  func() []Instance
	// corrupt changes one cell of ins so that a constraint or the balance fails.
	corrupt func(ins []Instance)
	// wantConstraint: the corruption breaks a constraint (else: the interaction balance).
	wantConstraint bool
}

func bump(m air.Matrix, r, c int) { m.Set(r, c, m.At(r, c).Add(field.One)) }

var fixtures = []fixture{
	{"fibonacci", func() []Instance { return []Instance{Fibonacci(0, 1, 16)} },
		func(ins []Instance) { bump(ins[0].Trace.CommonMain, 5, 1) }, true},
	{"fibonacci-selector", func() []Instance { return []Instance{FibonacciSelector(7, 3, 16)} },
		func(ins []Instance) { bump(ins[0].Trace.CommonMain, 3, 0) }, true},
	{"preprocessed-cached", func() []Instance { return []Instance{PreprocessedCached(3, 16)} },
		func(ins []Instance) { bump(ins[0].Trace.CachedMains[2], 6, 0) }, true},
	{"sum", func() []Instance { return []Instance{Sum(3, 8)} },
		func(ins []Instance) { bump(ins[0].Trace.CachedMains[0], 2, 1) }, true},
	{"interactions-fixture11", func() []Instance { return InteractionsFixture11(false) },
		func(ins []Instance) { bump(ins[1].Trace.CommonMain, 5, 0) }, false},
	{"cached-fixture11", func() []Instance { return InteractionsFixture11(true) },
		func(ins []Instance) { bump(ins[0].Trace.CachedMains[0], 2, 0) }, false},
	{"interaction-pair", func() []Instance { return InteractionPair(64, 42) },
		func(ins []Instance) { bump(ins[0].Trace.CommonMain, 10, 0) }, false},
	{"short-traces", ShortTraces,
		func(ins []Instance) { bump(ins[0].Trace.CommonMain, 0, 1) }, true},
	{"short-traces/interaction", ShortTraces,
		func(ins []Instance) { bump(ins[4].Trace.CommonMain, 1, 1) }, false},
	{"self-interaction", func() []Instance { return SelfInteraction(SelfInteractionWidths, 8, 5) },
		func(ins []Instance) { bump(ins[1].Trace.CommonMain, 3, 2) }, false},
	{"mixture", func() []Instance { return Mixture(16) },
		func(ins []Instance) { bump(ins[5].Trace.CommonMain, 9, 1) }, true},
}

func TestFixturesPassAndCorruptionFails(t *testing.T) {
	for _, fx := range fixtures {
		fs, im := checkAll(t, fx.ins())
		if len(fs) != 0 || len(im) != 0 {
			t.Errorf("%s: valid traces: failures %v, imbalances %v", fx.name, fs, im)
		}
		ins := fx.ins()
		fx.corrupt(ins)
		fs, im = checkAll(t, ins)
		if fx.wantConstraint && len(fs) == 0 {
			t.Errorf("%s: corrupted trace passes the constraints", fx.name)
		}
		if !fx.wantConstraint && (len(im) == 0 || len(fs) != 0) {
			t.Errorf("%s: corrupted trace: failures %v, imbalances %v; want an imbalance only", fx.name, fs, im)
		}
	}
}

func TestFixtureShapes(t *testing.T) {
	heights := func(ins []Instance) []int {
		var hs []int
		for _, in := range ins {
			hs = append(hs, in.Height())
		}
		return hs
	}
	if got := heights(ShortTraces()); slices.Max(got) >= 4 {
		t.Errorf("short traces heights %v, want all < 2^l_skip = 4", got)
	}
	if got := heights(InteractionPair(8, 1)); !slices.Equal(got, []int{8, 16}) {
		t.Errorf("interaction pair heights %v", got)
	}
	mix := Mixture(32)
	if got := heights(mix); !slices.Equal(got, []int{32, 4, 8, 4, 8, 32, 32, 32, 32, 32, 32, 32}) {
		t.Errorf("mixture heights %v", got)
	}
	// Counts above 1 and repeated messages: the pair exercises multiplicities.
	pair := InteractionPair(64, 42)
	big := 0
	for _, v := range pair[0].Trace.CommonMain.Values[:64] {
		if uint32(v) > 1 {
			big++
		}
	}
	if big == 0 {
		t.Error("interaction pair: no count above 1")
	}
	// Different seeds, different traces; the same seed, the same trace.
	a, b, c := InteractionPair(16, 1), InteractionPair(16, 2), InteractionPair(16, 1)
	if slices.Equal(a[1].MainCells(), b[1].MainCells()) || !slices.Equal(a[1].MainCells(), c[1].MainCells()) {
		t.Error("interaction pair is not a function of the seed")
	}
	if pv := Fibonacci(0, 1, 8).Trace.Public; pv[2] != field.New(21) {
		t.Errorf("fib(0,1,8) publics %v", pv)
	}
}

func TestNamesParse(t *testing.T) {
	var all []air.Air
	for _, fx := range fixtures {
		for _, in := range fx.ins() {
			all = append(all, in.Air)
		}
	}
	all = append(all, FibonacciSelectorAir{Lookup: true},
		DummyInteractionAir{FieldWidth: 3, Bus: 7, CountWeight: 2, Partition: true, IsSend: true})
	for _, a := range all {
		name := a.Name()
		got, err := Parse(name)
		if err != nil {
			t.Errorf("Parse(%q): %v", name, err)
			continue
		}
		if hb, ok := got.(HeightBound); ok {
			got = hb.WithHeight(4)
			if pa, ok := got.(air.PreprocessedAir); !ok || pa.PreprocessedTrace().Height != 4 {
				t.Errorf("%s: WithHeight(4) has no preprocessed trace of height 4", name)
			}
		}
		if got.Name() != name || fmt.Sprint(got.Width()) != fmt.Sprint(a.Width()) || got.NumPublicValues() != a.NumPublicValues() {
			t.Errorf("Parse(%q) = %#v, want %#v", name, got, a)
		}
		// Same constraints and interactions.
		s1, err1 := air.Symbolic(a)
		s2, err2 := air.Symbolic(got)
		if err1 != nil || err2 != nil || len(s1.Constraints) != len(s2.Constraints) || len(s1.Interactions) != len(s2.Interactions) {
			t.Errorf("%s: symbolic forms differ (%v, %v)", name, err1, err2)
		}
	}
	for _, bad := range []string{"", "Fibonacci", "fibonacci ", "dummy-interaction-send-w0-bus0", "dummy-interaction-send-w01-bus0",
		"dummy-interaction-send-w1-bus70000", "dummy-interaction-send-w1-bus0-weight0", "dummy-interaction-push-w1-bus0",
		"dummy-interaction-send-w1-bus0-cached-x", "self-interaction-w4", "sum-w", "preprocessed-cached-k", "keccakf",
		"self-interaction-w99999999999999999999-bus1"} {
		if a, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, a)
		}
	}
}

func TestSplitMain(t *testing.T) {
	for _, in := range []Instance{PreprocessedCached(2, 8), Sum(3, 4), Fibonacci(1, 1, 4), InteractionsFixture11(true)[1]} {
		cells := in.MainCells()
		got, err := SplitMain(in.Air, in.Height(), cells, in.Trace.Public)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := constraints.Check(in.Air, got, 0)
		if err != nil || len(fs) != 0 {
			t.Errorf("%s: split trace: %v %v", in.Air.Name(), fs, err)
		}
		if len(got.CachedMains) != len(in.Trace.CachedMains) || !slices.Equal(got.CommonMain.Values, in.Trace.CommonMain.Values) {
			t.Errorf("%s: split differs", in.Air.Name())
		}
		if _, err := SplitMain(in.Air, in.Height(), cells[1:], nil); err == nil {
			t.Errorf("%s: short cells accepted", in.Air.Name())
		}
	}
}
