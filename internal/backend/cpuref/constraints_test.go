package cpuref

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/stark/starktest"
)

func bcRefInput(t *testing.T, p params.SystemParams, in testair.Instance) *stark.AirInput {
	t.Helper()
	if _, ok := in.Air.(air.PreprocessedAir); ok {
		t.Fatal("no preprocessed AIRs here")
	}
	vk, err := air.Keygen(in.Air, p.MaxConstraintDegree, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := in.Trace.CommonMain
	out := &stark.AirInput{VK: vk, Common: Trace{M: &air.Matrix{Values: m.Values, Width: m.Width, Height: m.Height}}, Public: in.Trace.Public}
	for _, c := range in.Trace.CachedMains {
		out.Cached = append(out.Cached, Trace{M: &air.Matrix{Values: c.Values, Width: c.Width, Height: c.Height}})
	}
	return out
}

// TestConstraintRound0OnD checks the round-0 polynomials on D against row-by-row evaluation of
// the DAG: Zc(ω^j) = Σ_x e(x)·Σ_k λ^k C_k(row x·N + j) (periodic lift for short traces), same for
// Num and Den; and that a valid trace's Zc vanishes on D.
func TestConstraintRound0OnD(t *testing.T) {
	p := params.TestParamsSmall(2, 8, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	r4 := func() field.Fp4 {
		return field.Fp4{field.Fp(rng.Uint32N(field.P)), field.Fp(rng.Uint32N(field.P)), field.Fp(rng.Uint32N(field.P)), field.Fp(rng.Uint32N(field.P))}
	}
	ins := append([]testair.Instance{testair.Fibonacci(0, 1, 16)}, testair.InteractionPair(4, 9)...)
	ins = append(ins, testair.Fibonacci(0, 1, 2))
	var traces []*stark.AirInput
	for _, in := range ins {
		traces = append(traces, bcRefInput(t, p, in))
	}
	// trace order: 16, 8 (receiver), 4 (sender), 2
	traces[1], traces[2] = traces[2], traces[1]
	ch := &stark.ConstraintChallenges{Lambda: r4(), Beta: r4(), Xi: make([]field.Fp4, p.LSkip+3)}
	for i := range ch.Xi {
		ch.Xi[i] = r4()
	}
	for _, tr := range traces {
		e := make([]field.Fp4, len(tr.VK.DAG.Interactions))
		for i := range e {
			e[i] = r4()
		}
		ch.Eq3b = append(ch.Eq3b, e)
	}
	cp, err := Backend{}.NewConstraintProver(p, traces, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Release()
	if _, err := cp.Round(); !errors.Is(err, ErrConstraintProver) {
		t.Fatalf("Round before round 0: %v", err)
	}
	polys, err := cp.UnivariateRound()
	if err != nil {
		t.Fatal(err)
	}
	// The programs and weights the stage code passes give the same round-0 polynomials.
	pre := *ch
	for ti, tr := range traces {
		pg, err := constraints.Compile(tr.VK, constraints.All)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pg.Weights(ch.Lambda, ch.Beta, ch.Eq3b[ti])
		if err != nil {
			t.Fatal(err)
		}
		pre.Programs = append(pre.Programs, pg)
		pre.Weights = append(pre.Weights, w)
	}
	cp2, err := Backend{}.NewConstraintProver(p, traces, &pre)
	if err != nil {
		t.Fatal(err)
	}
	defer cp2.Release()
	polys2, err := cp2.UnivariateRound()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(polys, polys2) {
		t.Fatal("round-0 polynomials differ with prebuilt programs and weights")
	}
	pre.Weights = pre.Weights[:1]
	if _, err := (Backend{}).NewConstraintProver(p, traces, &pre); !errors.Is(err, ErrConstraintProver) {
		t.Errorf("short weights: %v", err)
	}
	l, n := p.LSkip, 1<<p.LSkip
	omega := field.TwoAdicGenerator(l)
	for ti, tr := range traces {
		h := tr.Height()
		nl := max(bits.Len(uint(h))-1-l, 0)
		eqx := stark.EvalsEqHypercube(ch.Xi[l : l+nl])
		lp := field.PowersFp4(ch.Lambda, len(tr.VK.DAG.ConstraintIdx))
		bp := field.PowersFp4(ch.Beta, 8)
		for j := 0; j < n; j++ {
			var zc, num, den field.Fp4
			for x, ex := range eqx {
				row := (x*n + j) % h
				nodes := tr.VK.DAG.EvalNodes(&starktest.Row{In: tr, Row: row, H: h}, nil)
				var c, nm, dn field.Fp4
				for k, idx := range tr.VK.DAG.ConstraintIdx {
					c = c.Add(lp[k].MulBase(nodes[idx]))
				}
				for k, it := range tr.VK.DAG.Interactions {
					nm = nm.Add(ch.Eq3b[ti][k].MulBase(nodes[it.Count]))
					var hb field.Fp4
					for m, f := range it.Message {
						hb = hb.Add(bp[m].MulBase(nodes[f]))
					}
					hb = hb.Add(bp[len(it.Message)].MulBase(field.Fp(uint32(it.Bus) + 1)))
					dn = dn.Add(ch.Eq3b[ti][k].Mul(hb))
				}
				zc, num, den = zc.Add(ex.Mul(c)), num.Add(ex.Mul(nm)), den.Add(ex.Mul(dn))
			}
			z := field.Lift(omega.Exp(uint64(j)))
			if got := stark.Horner(polys[ti].Zc, z); got != zc || !got.IsZero() {
				t.Fatalf("trace %d: Zc(ω^%d) = %v, want %v (= 0)", ti, j, got, zc)
			}
			if got := stark.Horner(polys[ti].Num, z); got != num {
				t.Fatalf("trace %d: Num(ω^%d) = %v, want %v", ti, j, got, num)
			}
			if got := stark.Horner(polys[ti].Den, z); got != den {
				t.Fatalf("trace %d: Den(ω^%d) = %v, want %v", ti, j, got, den)
			}
		}
	}
	if _, err := cp.Openings(0); err != nil {
		if !errors.Is(err, ErrConstraintProver) {
			t.Fatal(err)
		}
	} else {
		t.Fatal("openings before binding")
	}
	if err := cp.BindUnivariate(r4()); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Openings(3); err != nil { // height 2: no cube variables
		t.Fatal(err)
	}
	if _, err := cp.Openings(0); !errors.Is(err, ErrConstraintProver) {
		t.Fatalf("openings of an unbound trace: %v", err)
	}
	evals, err := cp.Round()
	if err != nil {
		t.Fatal(err)
	}
	if len(evals[0].Zc) != p.MaxConstraintDegree+1 || evals[3].Zc != nil {
		t.Fatal("round 1 evaluations: head/tail split wrong")
	}
}
