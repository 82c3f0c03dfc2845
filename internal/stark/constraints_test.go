package stark_test

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/stark/starktest"
	"github.com/metalprove/metalprove/internal/transcript"
)

// bcCase is one batch-constraint test input: the present AIRs in trace order.
type bcCase struct {
	p      params.SystemParams
	inputs []*stark.AirInput
	shapes []stark.TraceShape
	g      *stark.GkrOutcome
}

func bcParams() params.SystemParams { return params.TestParamsSmall(2, 8, 3) }

// hostTrace is m as a reference-backend trace.
func hostTrace(m air.Matrix) stark.Trace { return cpuref.Trace{M: &m} }

// newBCCase keygens the instances, sorts them into trace order and builds a GkrOutcome with random
// α, β, ξ whose claims are the true p̂(ξ), q̂(ξ) of the LogUp leaves (spec B §3.4).
func newBCCase(t testing.TB, p params.SystemParams, ins []testair.Instance, seed uint64) *bcCase {
	t.Helper()
	type item struct {
		idx int
		in  *stark.AirInput
	}
	var items []item
	for i, inst := range ins {
		var pre *air.PreprocessedVK
		var preM stark.Trace
		if pa, ok := inst.Air.(air.PreprocessedAir); ok {
			m := pa.PreprocessedTrace()
			if inst.Trace.Preprocessed != nil {
				m = *inst.Trace.Preprocessed
			}
			preM = hostTrace(m)
			pre = &air.PreprocessedVK{HypercubeDim: bits.Len(uint(m.Height)) - 1 - p.LSkip, StackingWidth: 1}
		}
		vk, err := air.Keygen(inst.Air, p.MaxConstraintDegree, false, pre)
		if err != nil {
			t.Fatalf("keygen %s: %v", inst.Air.Name(), err)
		}
		in := &stark.AirInput{AirIndex: i, VK: vk, Common: hostTrace(inst.Trace.CommonMain), Preprocessed: preM, Public: inst.Trace.Public}
		for _, c := range inst.Trace.CachedMains {
			in.Cached = append(in.Cached, hostTrace(c))
		}
		items = append(items, item{i, in})
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].in.Height() > items[b].in.Height() })
	c := &bcCase{p: p}
	for _, it := range items {
		c.inputs = append(c.inputs, it.in)
		c.shapes = append(c.shapes, stark.TraceShape{AirIndex: it.in.AirIndex, VK: it.in.VK, LogHeight: it.in.LogHeight(), Public: it.in.Public})
	}
	c.g = bcOutcome(c, rand.New(rand.NewPCG(seed, 7)))
	return c
}

// bcOutcome computes the GKR hand-over from the leaves directly: p̂(ξ) = Σ_i eq(ξ, i)·p_i,
// q̂(ξ) = Σ_i eq(ξ, i)·q_i with padding (0, α).
func bcOutcome(c *bcCase, rng *rand.Rand) *stark.GkrOutcome {
	l := c.p.LSkip
	g := &stark.GkrOutcome{Alpha: starktest.RandFp4(rng), Beta: starktest.RandFp4(rng)}
	var total uint64
	nMax := 0
	for _, in := range c.inputs {
		nl := max(in.LogHeight()-l, 0)
		nMax = max(nMax, nl)
		total += uint64(len(in.VK.DAG.Interactions)) << (l + nl)
	}
	if total > 0 {
		g.NLogup = bits.Len64(total) - l
	}
	g.Xi = make([]field.Fp4, l+max(nMax, g.NLogup))
	for i := range g.Xi {
		g.Xi[i] = starktest.RandFp4(rng)
	}
	if total == 0 {
		g.QClaim = g.Alpha
		return g
	}
	L := l + g.NLogup
	eq := stark.EvalsEqHypercube(g.Xi[:L])
	ps := make([]field.Fp4, 1<<L)
	qs := make([]field.Fp4, 1<<L)
	for i := range qs {
		qs[i] = g.Alpha
	}
	row := 0
	betaPows := field.PowersFp4(g.Beta, 200)
	for _, in := range c.inputs {
		h := in.Height()
		nl := max(in.LogHeight()-l, 0)
		norm := stark.InvPow2(max(l-in.LogHeight(), 0))
		for _, it := range in.VK.DAG.Interactions {
			for tt := 0; tt < 1<<(l+nl); tt++ {
				nodes := in.VK.DAG.EvalNodes(&starktest.Row{In: in, Row: tt % h, H: h}, nil)
				ps[row+tt] = field.Lift(nodes[it.Count].Mul(norm))
				var hb field.Fp4
				for j, m := range it.Message {
					hb = hb.Add(betaPows[j].MulBase(nodes[m]))
				}
				hb = hb.Add(betaPows[len(it.Message)].MulBase(field.Fp(uint32(it.Bus) + 1)))
				qs[row+tt] = g.Alpha.Add(hb)
			}
			row += 1 << (l + nl)
		}
	}
	for i := range eq {
		g.PClaim = g.PClaim.Add(eq[i].Mul(ps[i]))
		g.QClaim = g.QClaim.Add(eq[i].Mul(qs[i]))
	}
	return g
}

func bcTranscript() *transcript.Transcript {
	tr := transcript.New()
	tr.Observe(field.New(12345))
	return &tr
}

func (c *bcCase) prove(t testing.TB) (stark.BatchConstraintProof, *stark.OpeningClaims, *transcript.Transcript) {
	t.Helper()
	tr := bcTranscript()
	var beside []field.Fp4
	calls := 0
	proof, claims, err := stark.ProveBatchConstraints(cpuref.Backend{}, tr, c.p, c.inputs, c.g, func(r []field.Fp4) {
		beside = append([]field.Fp4(nil), r...)
		calls++
	})
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	// The function beside the absorb ran once, with the claims' point.
	if calls != 1 || fmt.Sprint(beside) != fmt.Sprint(claims.R) {
		t.Fatalf("beside: %d calls with r %v, want 1 with the claims' R %v", calls, beside, claims.R)
	}
	return proof, claims, tr
}

func (c *bcCase) verify(proof *stark.BatchConstraintProof) (*stark.OpeningClaims, *transcript.Transcript, error) {
	tr := bcTranscript()
	claims, err := stark.VerifyBatchConstraints(tr, c.p, c.shapes, c.g, proof)
	return claims, tr, err
}

// checkClaims compares the claims with direct evaluations of every column and rotated column.
func (c *bcCase) checkClaims(t *testing.T, claims *stark.OpeningClaims) {
	t.Helper()
	l := c.p.LSkip
	check := func(cc stark.CommitClaims, mat int, m *air.Matrix, needRot bool, what string) {
		h := m.Height
		for col := 0; col < m.Width; col++ {
			vals := m.Values[col*h : (col+1)*h]
			if got, want := cc.Values[mat][col], starktest.EvalColumn(l, vals, claims.R); got != want {
				t.Fatalf("%s column %d: claim %v, direct %v", what, col, got, want)
			}
			if needRot {
				rot := append(append([]field.Fp(nil), vals[1:]...), vals[0])
				if got, want := cc.Rot[mat][col], starktest.EvalColumn(l, rot, claims.R); got != want {
					t.Fatalf("%s column %d: rotated claim %v, direct %v", what, col, got, want)
				}
			}
		}
	}
	k := 1
	for ti, in := range c.inputs {
		nr := in.VK.NeedRot
		if claims.Commits[0].NeedRot[ti] != nr {
			t.Fatalf("trace %d need_rot", ti)
		}
		check(claims.Commits[0], ti, in.Common.Host(), nr, "common")
		if in.Preprocessed != nil {
			check(claims.Commits[k], 0, in.Preprocessed.Host(), nr, "preprocessed")
			k++
		}
		for j := range in.Cached {
			check(claims.Commits[k], 0, in.Cached[j].Host(), nr, "cached")
			k++
		}
	}
	if k != len(claims.Commits) {
		t.Fatalf("%d commitments, want %d", len(claims.Commits), k)
	}
}

func keccakInstance(t testing.TB, perms int) testair.Instance {
	t.Helper()
	ex, err := examples.Lookup("keccakf")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := ex.Generate(examples.Options{Perms: perms})
	if err != nil {
		t.Fatal(err)
	}
	ti, err := secs[0].TraceInput()
	if err != nil {
		t.Fatal(err)
	}
	return testair.Instance{Air: secs[0].Air, Trace: ti}
}

func bcFixtures(t testing.TB) map[string]func() []testair.Instance {
	return map[string]func() []testair.Instance{
		"fibonacci":          func() []testair.Instance { return []testair.Instance{testair.Fibonacci(0, 1, 16)} },
		"fibonacci-selector": func() []testair.Instance { return []testair.Instance{testair.FibonacciSelector(7, 3, 32)} },
		"short":              testair.ShortTraces,
		"mixture":            func() []testair.Instance { return testair.Mixture(16) },
		"interaction-pair":   func() []testair.Instance { return testair.InteractionPair(8, 3) },
		"preprocessed-cached": func() []testair.Instance {
			return []testair.Instance{testair.PreprocessedCached(2, 8), testair.Fibonacci(1, 1, 2), testair.Sum(3, 4)}
		},
		"keccakf-1": func() []testair.Instance { return []testair.Instance{keccakInstance(t, 1)} },
		"keccakf-2": func() []testair.Instance { return []testair.Instance{keccakInstance(t, 2)} },
	}
}

func TestBatchConstraintsProveVerify(t *testing.T) {
	for name, ins := range bcFixtures(t) {
		t.Run(name, func(t *testing.T) {
			c := newBCCase(t, bcParams(), ins(), 1)
			proof, claims, ptr := c.prove(t)
			vclaims, vtr, err := c.verify(&proof)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !reflect.DeepEqual(claims, vclaims) {
				t.Fatal("prover and verifier claims differ")
			}
			if ptr.SampleExt() != vtr.SampleExt() {
				t.Fatal("prover and verifier transcripts diverge")
			}
			c.checkClaims(t, claims)
		})
	}
}

// TestBatchConstraintsOpenings runs the claims through the stacked reduction and WHIR with
// commitments in the order of spec B §5.1, so the converter's output is what ProveOpenings needs.
func TestBatchConstraintsOpenings(t *testing.T) {
	for _, name := range []string{"mixture", "short", "preprocessed-cached"} {
		t.Run(name, func(t *testing.T) {
			c := newBCCase(t, bcParams(), bcFixtures(t)[name](), 2)
			proof, claims, ptr := c.prove(t)
			commits, roots, layouts := c.commit(t)
			sp, wp, err := stark.ProveOpenings(cpuref.New(), ptr, c.p, commits, claims)
			if err != nil {
				t.Fatalf("prove openings: %v", err)
			}
			vclaims, vtr, err := c.verify(&proof)
			if err != nil {
				t.Fatal(err)
			}
			if err := stark.VerifyOpenings(vtr, c.p, roots, layouts, vclaims, &sp, &wp); err != nil {
				t.Fatalf("verify openings: %v", err)
			}
		})
	}
}

func (c *bcCase) commit(t testing.TB) ([]stark.Committed, []stark.Digest, []*stark.StackedLayout) {
	t.Helper()
	var commons []stark.Trace
	for _, in := range c.inputs {
		commons = append(commons, in.Common)
	}
	mats := [][]stark.Trace{commons}
	for _, in := range c.inputs {
		if in.Preprocessed != nil {
			mats = append(mats, []stark.Trace{in.Preprocessed})
		}
		for _, m := range in.Cached {
			mats = append(mats, []stark.Trace{m})
		}
	}
	var commits []stark.Committed
	var roots []stark.Digest
	var layouts []*stark.StackedLayout
	for _, ms := range mats {
		cm, err := cpuref.Backend{}.Commit(c.p, ms)
		if err != nil {
			t.Fatal(err)
		}
		commits = append(commits, cm)
		roots = append(roots, cm.Root())
		layouts = append(layouts, cm.Layout())
	}
	return commits, roots, layouts
}

// TestBatchConstraintsApp runs the app-100bit parameters (l_skip = 4): traces of heights 64 down
// to 4, so several are shorter than 2^l_skip.
func TestBatchConstraintsApp(t *testing.T) {
	p, err := params.AppParams(12)
	if err != nil {
		t.Fatal(err)
	}
	ins := append(testair.Mixture(64), testair.FibonacciSelector(1, 2, 8), testair.Fibonacci(2, 3, 2))
	c := newBCCase(t, p, ins, 3)
	proof, claims, _ := c.prove(t)
	if _, _, err := c.verify(&proof); err != nil {
		t.Fatal(err)
	}
	c.checkClaims(t, claims)
}

func TestBatchConstraintsInvalidTrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		ins  []testair.Instance
		mat  func(c *bcCase) *air.Matrix
	}{
		{"fibonacci", []testair.Instance{testair.Fibonacci(0, 1, 16)}, func(c *bcCase) *air.Matrix { return c.inputs[0].Common.Host() }},
		{"short", testair.ShortTraces(), func(c *bcCase) *air.Matrix { return c.inputs[0].Common.Host() }},
		{"height-1", []testair.Instance{testair.Fibonacci(0, 1, 1)}, func(c *bcCase) *air.Matrix { return c.inputs[0].Common.Host() }},
		{"keccakf", []testair.Instance{keccakInstance(t, 1)}, func(c *bcCase) *air.Matrix { return c.inputs[0].Common.Host() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newBCCase(t, bcParams(), tc.ins, 4)
			m := tc.mat(c)
			vals := append([]field.Fp(nil), m.Values...)
			vals[m.Height+m.Height/2] = vals[m.Height+m.Height/2].Add(field.One) // column 1, middle row
			m.Values = vals
			c.g = bcOutcome(c, rand.New(rand.NewPCG(4, 7)))
			proof, _, _ := c.prove(t)
			// A non-vanishing constraint makes Σ_D eq_D(ξ_0, ·)·Zc_T ≠ 0: the s_0 sum check fails.
			if _, _, err := c.verify(&proof); !errors.Is(err, stark.ErrBatchConstraintSumClaim) {
				t.Fatalf("invalid trace accepted or wrong error: %v", err)
			}
		})
	}
}

func TestBatchConstraintsDeterministic(t *testing.T) {
	c := newBCCase(t, bcParams(), testair.Mixture(8), 5)
	a, _, _ := c.prove(t)
	b, _, _ := c.prove(t)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two proofs differ")
	}
}

func cloneBC(p *stark.BatchConstraintProof) *stark.BatchConstraintProof {
	q := &stark.BatchConstraintProof{
		NumeratorTermPerAir:   append([]field.Fp4(nil), p.NumeratorTermPerAir...),
		DenominatorTermPerAir: append([]field.Fp4(nil), p.DenominatorTermPerAir...),
		UnivariateRoundCoeffs: append([]field.Fp4(nil), p.UnivariateRoundCoeffs...),
	}
	for _, s := range p.SumcheckRoundPolys {
		q.SumcheckRoundPolys = append(q.SumcheckRoundPolys, append([]field.Fp4(nil), s...))
	}
	for _, o := range p.ColumnOpenings {
		var parts [][]field.Fp4
		for _, part := range o {
			parts = append(parts, append([]field.Fp4(nil), part...))
		}
		q.ColumnOpenings = append(q.ColumnOpenings, parts)
	}
	return q
}

// TestBatchConstraintsTamper changes every element of the proof in turn. Openings of columns the
// constraints do not read cannot be caught here; for them the stacked reduction must reject.
func TestBatchConstraintsTamper(t *testing.T) {
	c := newBCCase(t, bcParams(), testair.Mixture(8), 6)
	proof, _, ptr := c.prove(t)
	commits, roots, layouts := c.commit(t)
	sp, wp, err := stark.ProveOpenings(cpuref.New(), ptr, c.p, commits, c.mustClaims(t, &proof))
	if err != nil {
		t.Fatal(err)
	}
	one := field.Fp4{1, 0, 0, 0}
	count := map[string]int{}
	try := func(what string, mut func(q *stark.BatchConstraintProof)) {
		t.Helper()
		q := cloneBC(&proof)
		mut(q)
		claims, tr, err := c.verify(q)
		if err == nil {
			err = stark.VerifyOpenings(tr, c.p, roots, layouts, claims, &sp, &wp)
			if err == nil {
				t.Fatalf("%s: tampered proof accepted", what)
			}
			count[what+" (by the openings)"]++
			return
		}
		count[what+": "+err.Error()]++
		if !errors.Is(err, stark.ErrBatchConstraint) {
			t.Fatalf("%s: error %v does not wrap ErrBatchConstraint", what, err)
		}
	}
	for i := range proof.NumeratorTermPerAir {
		try("numerator", func(q *stark.BatchConstraintProof) { q.NumeratorTermPerAir[i] = q.NumeratorTermPerAir[i].Add(one) })
		try("denominator", func(q *stark.BatchConstraintProof) { q.DenominatorTermPerAir[i] = q.DenominatorTermPerAir[i].Add(one) })
	}
	for i := range proof.UnivariateRoundCoeffs {
		try("univariate", func(q *stark.BatchConstraintProof) { q.UnivariateRoundCoeffs[i] = q.UnivariateRoundCoeffs[i].Add(one) })
	}
	if len(proof.SumcheckRoundPolys) == 0 {
		t.Fatal("fixture has no multilinear rounds")
	}
	for j := range proof.SumcheckRoundPolys {
		for i := range proof.SumcheckRoundPolys[j] {
			try("round", func(q *stark.BatchConstraintProof) {
				q.SumcheckRoundPolys[j][i] = q.SumcheckRoundPolys[j][i].Add(one)
			})
		}
	}
	for a := range proof.ColumnOpenings {
		for b := range proof.ColumnOpenings[a] {
			for i := range proof.ColumnOpenings[a][b] {
				try("opening", func(q *stark.BatchConstraintProof) {
					q.ColumnOpenings[a][b][i] = q.ColumnOpenings[a][b][i].Add(one)
				})
			}
		}
	}
	// Shapes: never a panic, always ErrBatchConstraintShape.
	shape := func(what string, mut func(q *stark.BatchConstraintProof)) {
		t.Helper()
		q := cloneBC(&proof)
		mut(q)
		if _, _, err := c.verify(q); !errors.Is(err, stark.ErrBatchConstraintShape) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shape("numerators", func(q *stark.BatchConstraintProof) { q.NumeratorTermPerAir = q.NumeratorTermPerAir[1:] })
	shape("denominators", func(q *stark.BatchConstraintProof) { q.DenominatorTermPerAir = nil })
	shape("univariate", func(q *stark.BatchConstraintProof) { q.UnivariateRoundCoeffs = append(q.UnivariateRoundCoeffs, one) })
	shape("rounds", func(q *stark.BatchConstraintProof) { q.SumcheckRoundPolys = q.SumcheckRoundPolys[1:] })
	shape("round length", func(q *stark.BatchConstraintProof) { q.SumcheckRoundPolys[0] = q.SumcheckRoundPolys[0][1:] })
	shape("airs", func(q *stark.BatchConstraintProof) { q.ColumnOpenings = q.ColumnOpenings[1:] })
	shape("parts", func(q *stark.BatchConstraintProof) { q.ColumnOpenings[0] = append(q.ColumnOpenings[0], nil) })
	shape("part width", func(q *stark.BatchConstraintProof) { q.ColumnOpenings[0][0] = q.ColumnOpenings[0][0][1:] })
	if _, err := stark.VerifyBatchConstraints(bcTranscript(), c.p, c.shapes, c.g, nil); !errors.Is(err, stark.ErrBatchConstraintShape) {
		t.Fatalf("nil proof: %v", err)
	}
	// GKR claims that do not match.
	g := *c.g
	g.PClaim = g.PClaim.Add(one)
	if _, err := stark.VerifyBatchConstraints(bcTranscript(), c.p, c.shapes, &g, &proof); !errors.Is(err, stark.ErrBatchConstraintNumerator) {
		t.Fatalf("p claim: %v", err)
	}
	g = *c.g
	g.QClaim = g.QClaim.Add(one)
	if _, err := stark.VerifyBatchConstraints(bcTranscript(), c.p, c.shapes, &g, &proof); !errors.Is(err, stark.ErrBatchConstraintDenominator) {
		t.Fatalf("q claim: %v", err)
	}
	for k, v := range count {
		t.Logf("%4d × %s", v, k)
	}
}

func (c *bcCase) mustClaims(t testing.TB, proof *stark.BatchConstraintProof) *stark.OpeningClaims {
	t.Helper()
	claims, _, err := c.verify(proof)
	if err != nil {
		t.Fatal(err)
	}
	return claims
}
