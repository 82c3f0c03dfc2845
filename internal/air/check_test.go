package air_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

func mustCheck(t *testing.T, a air.Air, in air.TraceInput, max int) []air.Failure {
	t.Helper()
	f, err := constraints.Check(a, in, max)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type rc struct{ row, c int }

func failuresAt(fs []air.Failure) []rc {
	var out []rc
	for _, f := range fs {
		out = append(out, rc{f.Row, f.Constraint})
	}
	return out
}

func TestCheckFibonacciValid(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8, 64} {
		if fs := mustCheck(t, testair.FibonacciAir{}, testair.FibTrace(0, 1, n), 0); len(fs) != 0 {
			t.Errorf("n=%d: %v", n, fs)
		}
	}
	if fs := mustCheck(t, testair.FibonacciAir{}, testair.FibTrace(8, 8, 16), 0); len(fs) != 0 {
		t.Errorf("(8,8): %v", fs)
	}
}

func TestCheckFibonacciCorrupt(t *testing.T) {
	// right of row 5 changed: row 4 c3 (b' = a+b), row 5 c2 (a' = b) and c3.
	in := testair.FibTrace(0, 1, 8)
	in.CommonMain.Set(5, 1, in.CommonMain.At(5, 1).Add(field.One))
	fs := mustCheck(t, testair.FibonacciAir{}, in, 0)
	if want := []rc{{4, 3}, {5, 2}, {5, 3}}; !slices.Equal(failuresAt(fs), want) {
		t.Fatalf("failures %v, want %v", fs, want)
	}
	f := fs[0]
	if f.Air != "fibonacci" || f.Expr != "(IsTransition * ((m0[0] + m0[1]) - m0[1]'))" || f.Value != field.NewInt(-1) || f.Node != 16 {
		t.Errorf("failure %+v", f)
	}
	if s := f.String(); !strings.Contains(s, "row 4") || !strings.Contains(s, "constraint 3") {
		t.Errorf("String() = %q", s)
	}
	// maxFailures stops early.
	if fs := mustCheck(t, testair.FibonacciAir{}, in, 2); len(fs) != 2 {
		t.Errorf("max 2: %d failures", len(fs))
	}

	// left of row 0: c0 (first row) and c3 at row 0; no wrap-around check from the last row.
	in = testair.FibTrace(0, 1, 8)
	in.CommonMain.Set(0, 0, field.New(5))
	if got, want := failuresAt(mustCheck(t, testair.FibonacciAir{}, in, 0)), []rc{{0, 0}, {0, 3}}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	// wrong public x: only the last-row constraint.
	in = testair.FibTrace(0, 1, 8)
	in.Public[2] = in.Public[2].Add(field.One)
	if got, want := failuresAt(mustCheck(t, testair.FibonacciAir{}, in, 0)), []rc{{7, 4}}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	// wrong public b on a 1-row trace: first-row and last-row constraints on row 0.
	in = testair.FibTrace(3, 4, 1)
	in.Public[1] = field.New(9)
	if got, want := failuresAt(mustCheck(t, testair.FibonacciAir{}, in, 0)), []rc{{0, 1}}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
}

func TestCheckShapeErrors(t *testing.T) {
	in := testair.FibTrace(0, 1, 4)
	in.Public = in.Public[:2]
	if _, err := constraints.Check(testair.FibonacciAir{}, in, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("publics: %v", err)
	}
	in = testair.FibTrace(0, 1, 4)
	in.CommonMain.Width = 3
	if _, err := constraints.Check(testair.FibonacciAir{}, in, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("width: %v", err)
	}
	pin := testair.PreprocessedCachedTrace(testair.AlternatingSels(8), 2)
	pin.CachedMains[1] = air.NewMatrix(1, 4)
	if _, err := constraints.Check(testair.PreprocessedCachedAir{Sels: testair.AlternatingSels(8), K: 2}, pin, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("height: %v", err)
	}
	pin = testair.PreprocessedCachedTrace(testair.AlternatingSels(8), 2)
	if _, err := constraints.Check(testair.PreprocessedCachedAir{Sels: testair.AlternatingSels(4), K: 2}, pin, 0); !errors.Is(err, air.ErrShape) {
		t.Errorf("preprocessed height: %v", err)
	}
}

func TestCheckFibSelector(t *testing.T) {
	for _, n := range []int{1, 2, 8, 32} {
		sels := testair.AlternatingSels(n)
		a := testair.FibonacciSelectorAir{Sels: sels, Lookup: true}
		if fs := mustCheck(t, a, testair.FibSelectorTrace(7, 3, sels), 0); len(fs) != 0 {
			t.Errorf("n=%d: %v", n, fs)
		}
	}
	sels := testair.AlternatingSels(8)
	in := testair.FibSelectorTrace(7, 3, sels)
	// row 1 has sel = 0: next row must copy it. Corrupt left of row 2.
	in.CommonMain.Set(2, 0, field.New(1000))
	got := failuresAt(mustCheck(t, testair.FibonacciSelectorAir{Sels: sels}, in, 0))
	// row 1 (sel 0): c3 left copy fails; row 2 (sel 1): c4 (left+right → next.right) fails.
	if want := []rc{{1, 3}, {2, 4}}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	// An explicit preprocessed matrix overrides the AIR's own.
	pre := testair.FibonacciSelectorAir{Sels: make([]bool, 8)}.PreprocessedTrace()
	in = testair.FibSelectorTrace(7, 3, sels)
	in.Preprocessed = &pre
	if fs := mustCheck(t, testair.FibonacciSelectorAir{Sels: sels}, in, 0); len(fs) == 0 {
		t.Error("all-zero selectors should break the trace")
	}
}

func TestCheckPreprocessedCachedAndSum(t *testing.T) {
	sels := testair.AlternatingSels(16)
	for k := 1; k <= 3; k++ {
		a := testair.PreprocessedCachedAir{Sels: sels, K: k}
		in := testair.PreprocessedCachedTrace(sels, k)
		if fs := mustCheck(t, a, in, 0); len(fs) != 0 {
			t.Errorf("k=%d: %v", k, fs)
		}
		in.CachedMains[k-1].Values[3] = field.New(999)
		// row 3: local equality of part k−1; row 2: transition equality into row 3.
		fs := mustCheck(t, a, in, 0)
		if want := []rc{{2, 4 + 2*(k-1)}, {3, 3 + 2*(k-1)}}; !slices.Equal(failuresAt(fs), want) {
			t.Errorf("k=%d: failures %v, want %v", k, fs, want)
		}
	}
	// SumAir: x = Σ y.
	ys := air.NewMatrix(3, 4)
	x := air.NewMatrix(1, 4)
	for r := 0; r < 4; r++ {
		s := field.Zero
		for c := 0; c < 3; c++ {
			v := field.New(uint32(10*r + c + 1))
			ys.Set(r, c, v)
			s = s.Add(v)
		}
		x.Values[r] = s
	}
	in := air.TraceInput{CachedMains: []air.Matrix{ys}, CommonMain: x}
	if fs := mustCheck(t, testair.SumAir{W: 3}, in, 0); len(fs) != 0 {
		t.Errorf("sum: %v", fs)
	}
	x.Values[2] = x.Values[2].Add(field.One)
	fs := mustCheck(t, testair.SumAir{W: 3}, in, 0)
	if len(fs) != 1 || fs[0].Row != 2 || fs[0].Expr != "(m1[0] - (((0 + m0[0]) + m0[1]) + m0[2]))" || fs[0].Value != field.One {
		t.Errorf("sum failures %v", fs)
	}
}

func fixture11(partition bool) ([]air.Air, []air.TraceInput) {
	send := testair.DummyInteractionAir{FieldWidth: 1, IsSend: true, Partition: partition}
	recv := testair.DummyInteractionAir{FieldWidth: 1, Partition: partition}
	return []air.Air{send, recv}, []air.TraceInput{testair.DummyInteractionTrace(send, testair.Fixture11Sender), testair.DummyInteractionTrace(recv, testair.Fixture11Receiver)}
}

func TestCheckInteractionsBalanced(t *testing.T) {
	for _, part := range []bool{false, true} {
		airs, ins := fixture11(part)
		im, err := constraints.CheckInteractions(airs, ins)
		if err != nil || len(im) != 0 {
			t.Errorf("partition=%v: %v %v", part, im, err)
		}
		for i := range airs {
			if fs := mustCheck(t, airs[i], ins[i], 0); len(fs) != 0 {
				t.Errorf("constraints: %v", fs)
			}
		}
	}
	// Six SelfInteraction AIRs of equal height, bus 5, balanced each on its own.
	var airs []air.Air
	var ins []air.TraceInput
	for _, w := range []int{4, 7, 8, 8, 10, 100} {
		airs = append(airs, testair.SelfInteractionAir{W: w, Bus: 5})
		ins = append(ins, testair.SelfInteractionTrace(w, 16))
	}
	if im, err := constraints.CheckInteractions(airs, ins); err != nil || len(im) != 0 {
		t.Errorf("self interaction: %v %v", im, err)
	}
}

func TestCheckInteractionsUnbalanced(t *testing.T) {
	airs, ins := fixture11(false)
	ins[1].CommonMain.Set(5, 0, field.New(544)) // receive 544 of 889 instead of 545
	im, err := constraints.CheckInteractions(airs, ins)
	if err != nil {
		t.Fatal(err)
	}
	if len(im) != 1 {
		t.Fatalf("imbalances %v", im)
	}
	got := im[0]
	if got.Bus != 0 || len(got.Message) != 1 || got.Message[0] != field.New(889) || got.Sum != field.One ||
		len(got.Contributions) != 2 || got.Contributions[0].Count != field.New(546) || got.Contributions[1].Count != field.NewInt(-545) {
		t.Errorf("imbalance %v", got)
	}
	if !strings.Contains(got.String(), "bus 0 message [889]") {
		t.Errorf("String() = %q", got.String())
	}
	// The receiver alone is unbalanced on every message with a non-zero count; ordered by first occurrence.
	im, _ = constraints.CheckInteractions(airs[1:], ins[1:])
	var msgs []field.Fp
	for _, x := range im {
		msgs = append(msgs, x.Message[0])
	}
	if len(msgs) != 3 || msgs[0] != 5 || msgs[1] != 4 || msgs[2] != 889 {
		t.Errorf("receiver alone: %v", im)
	}
	// Same message on different buses does not cancel.
	send := testair.DummyInteractionAir{FieldWidth: 1, IsSend: true, Bus: 1}
	recv := testair.DummyInteractionAir{FieldWidth: 1, Bus: 2}
	rows := [][]uint32{{1, 42}}
	im, _ = constraints.CheckInteractions([]air.Air{send, recv}, []air.TraceInput{testair.DummyInteractionTrace(send, rows), testair.DummyInteractionTrace(recv, rows)})
	if len(im) != 2 || im[0].Bus != 1 || im[1].Bus != 2 {
		t.Errorf("two buses: %v", im)
	}
}
