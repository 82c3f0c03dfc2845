package kernels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// The generated whole-program round-0 code (piececode.Whole in a module of the whole template,
// compiled by the host device's C++ compiler at run time: kernel zc_uni_whole) against the lane
// interpreter over the same program (zc_uni_eval) and against the plain-Go model (the reference's
// evaluator, zcRef.uni), for every test AIR, random and edge-valued traces, in the host's plan and
// in the GPUs' (one point per lane, unit items).

// wholeAirs are the test AIRs (every built-in AIR but Keccak-f, which runs in pieces on GPUs):
// those of every test fixture and example (interaction-pair, short-traces, mixture), each once
// by name (the mixture's self-interaction AIRs differ only in width: the narrowest and widest).
func wholeAirs() []air.Air {
	var ins []testair.Instance
	ins = append(ins, testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8), testair.PreprocessedCached(2, 16), testair.Sum(3, 4))
	ins = append(ins, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.InteractionsFixture11(false)...)
	ins = append(ins, testair.InteractionPair(4, 1)...)
	ins = append(ins, testair.ShortTraces()...)
	ins = append(ins, testair.SelfInteraction([]int{3, 100}, 4, 5)...) // the mixture's narrowest and widest
	var out []air.Air
	seen := map[string]bool{}
	for _, in := range ins {
		if !seen[in.Air.Name()] {
			seen[in.Air.Name()] = true
			out = append(out, in.Air)
		}
	}
	return out
}

// TestZerocheckWholeMatches: round 0 by the generated whole-program code equals the interpreter's
// and the plain-Go model's for every test AIR, over several domain sizes, heights (shorter and
// longer than 2^l_skip), both slot-value strategies, slice and thread counts, and value kinds
// (uniform, edge values 0, 1, 2, p−2, p−1, all zero, all p−1, public values too). Each run used
// the kernel it names; the interpreter runs with the generated code present (Interpreted).
func TestZerocheckWholeMatches(t *testing.T) {
	type cfg struct {
		logN, d int
		logHs   []int
		opts    ZcOptions
	}
	cfgs := []cfg{
		{2, 3, []int{0, 1, 2, 4}, ZcOptions{}},
		{2, 3, []int{0, 3, 5}, ZcOptions{PointMode: true, UnitItems: true}}, // the GPU plan
		{4, 3, []int{3, 6}, ZcOptions{PointMode: true, UnitItems: true, UniThreads: 5, SliceBlocks: 2}},
		{4, 3, []int{2, 6}, ZcOptions{}},
		{2, 2, []int{0, 3}, ZcOptions{SliceBlocks: 1}}, // M = 8 < 16 lanes: units span blocks
		{0, 3, []int{0, 3}, ZcOptions{UniThreads: 1}},
		{5, 2, []int{5}, ZcOptions{NoTranspose: true}},
	}
	r := rand.New(rand.NewPCG(71, 72))
	airs := wholeAirs()
	if len(airs) < 8 {
		t.Fatalf("%d test AIRs", len(airs))
	}
	// Every AIR's module in one build (compiled side by side).
	names := make([]string, len(airs))
	pgs := make([]*constraints.Program, len(airs))
	srcs := make([]driver.ModuleSource, len(airs))
	for i, a := range airs {
		names[i] = a.Name()
		pgs[i], _ = compileProgram(t, a)
		var err error
		if srcs[i], err = WholeModule(names[i], pgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := BuildWholeFrom(testDev, names, pgs, srcs)
	if err != nil {
		t.Fatal(err)
	}
	for ai, a := range airs {
		pg, g := pgs[ai], gs[ai]
		if g.Report.AIR != a.Name() || g.Report.Instructions != len(pg.Code) || g.Report.Units != 1 || g.Report.Pieces != 0 {
			t.Fatalf("%s: report %+v", a.Name(), g.Report)
		}
		for ci, c := range cfgs {
			for hi, logH := range c.logHs {
				vals := zcValueKinds[(ai+ci+hi)%len(zcValueKinds)]
				if hi == 0 {
					vals = zcValueKinds[0] // every shape once with uniform values
				}
				t.Run(fmt.Sprintf("%s/air%d/cfg%d/h%d/%s", a.Name(), ai, ci, logH, vals.name), func(t *testing.T) {
					ref := newZcRefWith(r, pg, c.logN, logH, func() field.Fp { return vals.value(r) })
					if vals.name != "random" {
						for i := range ref.public {
							ref.public[i] = vals.value(r)
						}
					}
					ref.whole = g
					checkWholeUni(t, r, ref, logM(c.logN, c.d), c.d+1, c.opts, vals.name == "random")
				})
			}
		}
	}
}

// checkWholeUni runs round 0 of ref's trace by the generated code (ref.whole) and by the
// interpreter and compares both with the plain-Go model; nonZero: the model's sums must not all be
// zero.
func checkWholeUni(t *testing.T, r *rand.Rand, ref *zcRef, lm, points int, opts ZcOptions, nonZero bool) {
	t.Helper()
	e, want := uniModel(t, r, ref, lm, nonZero)
	interp := opts
	interp.Interpreted = true
	for _, run := range []struct {
		kernel string
		opts   ZcOptions
	}{{"zc_uni_whole", opts}, {"zc_uni_eval", interp}} {
		dv := newZcDevice(t, ref, lm, points, run.opts)
		before := testDev.Stats().PerKernel[run.kernel]
		got := uniRoundOf(t, dv, e)
		if testDev.Stats().PerKernel[run.kernel] == before {
			t.Fatalf("%s did not run", run.kernel)
		}
		requireUniSums(t, run.kernel, dv, got, want, lm)
	}
}

// uniModel draws random block weights e for ref's trace and returns them with the plain-Go
// model's round-0 sums (zcRef.uni); nonZero: the sums must not all be zero.
func uniModel(t *testing.T, r *rand.Rand, ref *zcRef, lm int, nonZero bool) ([]field.Fp4, [3][]field.Fp4) {
	t.Helper()
	e := make([]field.Fp4, 1<<ref.nLift)
	for i := range e {
		e[i] = fieldrand.Fp4(r)
	}
	want := ref.uni(lm, e)
	if nonZero {
		requireNonZero(t, want[:])
	}
	return e, want
}

// requireUniSums fails unless the round-0 sums got (uniRoundOf: 12 words a point class) of dv's
// trace, by kernel, equal the plain-Go model's want (zcRef.uni) at each class's point.
func requireUniSums(t *testing.T, kernel string, dv *zcDevice, got []uint32, want [3][]field.Fp4, lm int) {
	t.Helper()
	for q := 0; q < 1<<lm; q++ {
		i := dv.dom.PointOf(q)
		for k := 0; k < 3; k++ {
			if g := Fp4OfMont(got[12*q+4*k:]); g != want[k][i] {
				t.Fatalf("%s: class %d (point %d) sum %d = %v, want %v", kernel, q, i, k, g, want[k][i])
			}
		}
	}
}

// TestWholeModule: the module source names the whole template, its ID is a digest of the code
// (the same program gives the same ID, another program another), and a program the generator
// cannot write is refused; a Program refuses generated code of another program.
func TestWholeModule(t *testing.T) {
	pa, _ := compileProgram(t, testair.FibonacciAir{})
	pb, _ := compileProgram(t, testair.SumAir{W: 3})
	a1, err := WholeModule("fib", pa)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := WholeModule("fib", pa)
	b, _ := WholeModule("sum", pb)
	if a1.Template != wholeTemplate || !strings.HasPrefix(a1.ID, wholeTemplate+"-") || a1.ID != a2.ID || a1.ID == b.ID ||
		!strings.Contains(a1.Code, "struct AirWhole") || !strings.Contains(a1.What, "AIR fib") {
		t.Fatalf("sources: %+v / %+v", a1, b)
	}
	if _, err := WholeModule("empty", &constraints.Program{}); err == nil {
		t.Fatal("an empty program was accepted")
	}
	g, err := BuildWhole(testDev, "fib", pa)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := UploadProgram(testDev, "whole test", pb)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Free()
	if err := prog.UseGenerated(g); err == nil {
		t.Fatal("generated code of another program accepted")
	}
	if _, err := piececode.Whole(nil, "nil"); err == nil {
		t.Fatal("nil program accepted")
	}
}
