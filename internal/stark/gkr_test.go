package stark_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

const gkrLSkip = 2

func gkrParams(powBits int) params.SystemParams {
	p := params.TestParamsSmall(gkrLSkip, 8, 2)
	p.Logup.PowBits = powBits
	return p
}

// gkrCase holds the instances in trace order with their prover inputs and verifier shapes.
type gkrCase struct {
	ins    []testair.Instance
	inputs []*stark.AirInput
	shapes []stark.TraceShape
}

func instHeight(in testair.Instance) int {
	if len(in.Trace.CachedMains) > 0 {
		return in.Trace.CachedMains[0].Height
	}
	return in.Trace.CommonMain.Height
}

func newGkrCase(t *testing.T, p params.SystemParams, ins []testair.Instance) *gkrCase {
	t.Helper()
	ins = slices.Clone(ins)
	// Trace order: height descending, ties by AIR index (stable).
	slices.SortStableFunc(ins, func(a, b testair.Instance) int { return instHeight(b) - instHeight(a) })
	c := &gkrCase{ins: ins}
	for i, in := range ins {
		a := in.Air
		h := instHeight(in)
		logH := 0
		for 1<<logH < h {
			logH++
		}
		var pre *air.PreprocessedVK
		var preM stark.Trace
		if pa, ok := a.(air.PreprocessedAir); ok && a.Width().HasPreprocessed() {
			pre = &air.PreprocessedVK{HypercubeDim: logH - p.LSkip, StackingWidth: 1}
			preM = hostTrace(pa.PreprocessedTrace())
		}
		vk, err := air.Keygen(a, p.MaxConstraintDegree, true, pre)
		if err != nil {
			t.Fatalf("keygen %s: %v", a.Name(), err)
		}
		common := in.Trace.CommonMain
		if common.Height == 0 {
			common.Height = h
		}
		ai := &stark.AirInput{AirIndex: i, VK: vk, Common: hostTrace(common), Preprocessed: preM, Public: in.Trace.Public}
		for _, m := range in.Trace.CachedMains {
			ai.Cached = append(ai.Cached, hostTrace(m))
		}
		c.inputs = append(c.inputs, ai)
		c.shapes = append(c.shapes, stark.TraceShape{AirIndex: i, VK: vk, LogHeight: logH, Public: in.Trace.Public})
	}
	return c
}

// preamble puts something on a fresh transcript in place of the real preamble.
func preamble() *transcript.Transcript {
	tr := transcript.New()
	for i := range 5 {
		tr.Observe(field.New(uint32(1000 + i)))
	}
	return &tr
}

func proveGkr(t *testing.T, p params.SystemParams, c *gkrCase) (stark.GkrProof, *stark.GkrOutcome, *transcript.Transcript) {
	t.Helper()
	tr := preamble()
	proof, out, err := stark.ProveGkr(cpuref.Backend{}, transcript.HostGrinder{}, tr, p, c.inputs)
	if err != nil {
		t.Fatalf("ProveGkr: %v", err)
	}
	return proof, out, tr
}

func verifyGkr(p params.SystemParams, c *gkrCase, proof *stark.GkrProof) (*stark.GkrOutcome, *transcript.Transcript, error) {
	tr := preamble()
	out, err := stark.VerifyGkr(tr, p, c.shapes, proof)
	return out, tr, err
}

// rowVal evaluates symbolic expressions on the unlifted rows of a testair instance.
type rowVal struct {
	pre    *air.Matrix
	parts  []air.Matrix
	public []field.Fp
	h, row int
}

func (v *rowVal) Var(x air.Var) field.Fp {
	r := (v.row + x.Offset) % v.h
	switch x.Entry {
	case air.EntryPreprocessed:
		return v.pre.At(r, x.Index)
	case air.EntryMain:
		return v.parts[x.PartIndex].At(r, x.Index)
	case air.EntryPublic:
		return v.public[x.Index]
	}
	panic("challenge")
}
func (v *rowVal) IsFirstRow() field.Fp { return bf(v.row == 0) }
func (v *rowVal) IsLastRow() field.Fp  { return bf(v.row == v.h-1) }
func (v *rowVal) IsTransition() field.Fp {
	return bf(v.row != v.h-1)
}
func bf(b bool) field.Fp {
	if b {
		return field.One
	}
	return field.Zero
}

// referenceLeaves builds the GKR leaves of spec B §3.4 from the symbolic interaction trees (not
// the DAG), independently of the backend.
func referenceLeaves(t *testing.T, c *gkrCase, alpha, beta field.Fp4, numLayers int) (ps, qs []field.Fp4) {
	t.Helper()
	ps = make([]field.Fp4, 1<<numLayers)
	qs = make([]field.Fp4, 1<<numLayers)
	for i := range qs {
		qs[i] = alpha
	}
	row := 0
	for _, in := range c.ins {
		sc, err := air.Symbolic(in.Air)
		if err != nil {
			t.Fatal(err)
		}
		h := instHeight(in)
		v := &rowVal{parts: slices.Clone(in.Trace.CachedMains), public: in.Trace.Public, h: h}
		if in.Air.Width().CommonMain != 0 {
			v.parts = append(v.parts, in.Trace.CommonMain)
		}
		if pa, ok := in.Air.(air.PreprocessedAir); ok && in.Air.Width().HasPreprocessed() {
			m := pa.PreprocessedTrace()
			v.pre = &m
		}
		size := max(h, 1<<gkrLSkip)
		norm := field.New(uint32(size / h)).Inverse()
		for _, it := range sc.Interactions {
			for i := range size {
				v.row = i % h
				d := field.Lift(field.New(uint32(it.Bus) + 1))
				for j := len(it.Message) - 1; j >= 0; j-- { // Horner: Σ β^j m_j + β^len (bus+1)
					d = d.Mul(beta).Add(field.Lift(it.Message[j].Eval(v)))
				}
				ps[row+i] = field.Lift(it.Count.Eval(v).Mul(norm))
				qs[row+i] = d.Add(alpha)
			}
			row += size
		}
	}
	return ps, qs
}

func gkrFixtures() map[string][]testair.Instance {
	return map[string][]testair.Instance{
		"interaction-pair":     testair.InteractionPair(16, 7),
		"fixture11":            testair.InteractionsFixture11(false),
		"fixture11-cached":     testair.InteractionsFixture11(true),
		"self-interaction":     testair.SelfInteraction([]int{4, 7}, 8, 3),
		"short-traces":         testair.ShortTraces(),
		"fib-and-interactions": append([]testair.Instance{testair.Fibonacci(0, 1, 64)}, testair.InteractionsFixture11(false)...),
		"mixture":              testair.Mixture(8),
	}
}

func TestGkrProveVerify(t *testing.T) {
	for name, ins := range gkrFixtures() {
		t.Run(name, func(t *testing.T) {
			p := gkrParams(2)
			c := newGkrCase(t, p, ins)
			proof, pout, ptr := proveGkr(t, p, c)
			vout, vtr, err := verifyGkr(p, c, &proof)
			if err != nil {
				t.Fatalf("VerifyGkr: %v", err)
			}
			if !reflect.DeepEqual(pout, vout) {
				t.Fatalf("outcomes differ:\nprover   %+v\nverifier %+v", pout, vout)
			}
			if ptr.SampleExt() != vtr.SampleExt() {
				t.Fatal("prover and verifier transcripts diverge after GKR")
			}
			// Layout, ξ length and the GKR identity p̂_L(ξ) = Σ_i eq(ξ, i)·p_i against reference leaves.
			hs, ks := make([]int, len(c.shapes)), make([]int, len(c.shapes))
			for i, s := range c.shapes {
				hs[i], ks[i] = s.LogHeight, len(s.VK.DAG.Interactions)
			}
			layout, nMax, err := stark.NewGkrLayout(p.LSkip, hs, ks)
			if err != nil {
				t.Fatal(err)
			}
			L := layout.NumLayers()
			if L == 0 || len(proof.ClaimsPerLayer) != L || pout.NLogup != layout.NLogup {
				t.Fatalf("L = %d, %d layer claims, n_logup %d vs %d", L, len(proof.ClaimsPerLayer), pout.NLogup, layout.NLogup)
			}
			if want := p.LSkip + max(nMax, layout.NLogup); len(pout.Xi) != want {
				t.Fatalf("len(ξ) = %d, want %d", len(pout.Xi), want)
			}
			ps, qs := referenceLeaves(t, c, pout.Alpha, pout.Beta, L)
			if got := stark.EvalMLEEvals(ps, pout.Xi[:L]); got != pout.PClaim {
				t.Fatalf("p̂(ξ) = %v, reference leaves give %v", pout.PClaim, got)
			}
			if got := stark.EvalMLEEvals(qs, pout.Xi[:L]); got != pout.QClaim {
				t.Fatalf("q̂(ξ) = %v, reference leaves give %v", pout.QClaim, got)
			}
			// The root: Σ p_i/q_i = 0 and q_0 = Π q_i.
			var sum field.Fp4
			prod := field.Fp4One
			for i := range ps {
				sum = sum.Add(ps[i].Mul(qs[i].Inverse()))
				prod = prod.Mul(qs[i])
			}
			if !sum.IsZero() || prod != proof.Q0Claim {
				t.Fatalf("Σ p/q = %v, Π q = %v, q0_claim %v", sum, prod, proof.Q0Claim)
			}
		})
	}
}

// TestGkrLayoutSpecExample is the example of spec B §3.4 (l = 2; heights 2^3, 2^2, 2^1 with 1, 1
// and 2 interactions).
func TestGkrLayoutSpecExample(t *testing.T) {
	g, nMax, err := stark.NewGkrLayout(2, []int{3, 2, 1}, []int{1, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []stark.GkrBlock{{0, 0, 0, 3}, {1, 0, 8, 2}, {2, 0, 12, 2}, {2, 1, 16, 2}}
	if g.Total != 20 || g.NLogup != 3 || g.NumLayers() != 5 || nMax != 1 || !reflect.DeepEqual(g.Blocks, want) {
		t.Fatalf("layout %+v n_max %d", g, nMax)
	}
	if _, _, err := stark.NewGkrLayout(2, []int{1, 3}, []int{1, 1}); !errors.Is(err, stark.ErrGkrInput) {
		t.Fatalf("unsorted heights: %v", err)
	}
	if g, _, _ := stark.NewGkrLayout(2, []int{4}, []int{0}); g.Total != 0 || g.NumLayers() != 0 {
		t.Fatalf("no interactions: %+v", g)
	}
	// total = 2^4 exactly: bitlen 5 → n_logup 3 (half the leaves are padding).
	if g, _, _ := stark.NewGkrLayout(2, []int{4}, []int{1}); g.NLogup != 3 {
		t.Fatalf("power-of-two total: n_logup %d", g.NLogup)
	}
}

func TestGkrNoInteractions(t *testing.T) {
	for _, bits := range []int{0, 2} {
		p := gkrParams(bits)
		c := newGkrCase(t, p, []testair.Instance{testair.Fibonacci(0, 1, 32), testair.Fibonacci(1, 1, 4)})
		proof, pout, ptr := proveGkr(t, p, c)
		if proof.Q0Claim != field.Fp4One || len(proof.ClaimsPerLayer) != 0 || len(proof.SumcheckPolys) != 0 {
			t.Fatalf("proof %+v", proof)
		}
		if pout.NLogup != 0 || len(pout.Xi) != p.LSkip+3 || !pout.PClaim.IsZero() || pout.QClaim != pout.Alpha {
			t.Fatalf("outcome %+v", pout)
		}
		if bits == 0 && proof.LogupPowWitness != 0 {
			t.Fatalf("witness %v with pow_bits 0", proof.LogupPowWitness)
		}
		vout, vtr, err := verifyGkr(p, c, &proof)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pout, vout) || ptr.SampleExt() != vtr.SampleExt() {
			t.Fatal("prover and verifier disagree")
		}
		bad := proof
		bad.Q0Claim = field.Fp4{}
		if _, _, err := verifyGkr(p, c, &bad); !errors.Is(err, stark.ErrGkrZeroRound) {
			t.Fatalf("q0_claim 0: %v", err)
		}
		bad = proof
		bad.ClaimsPerLayer = []stark.GkrLayerClaims{{}}
		if _, _, err := verifyGkr(p, c, &bad); !errors.Is(err, stark.ErrGkrShape) || !errors.Is(err, stark.ErrShape) {
			t.Fatalf("extra layer: %v", err)
		}
	}
}

func TestGkrUnbalanced(t *testing.T) {
	p := gkrParams(2)
	ins := testair.InteractionPair(8, 3)
	// Bump one receiver count: the bus no longer balances.
	recv := ins[1].Trace.CommonMain
	recv.Values = slices.Clone(recv.Values)
	recv.Values[0] = recv.Values[0].Add(field.One)
	ins[1].Trace.CommonMain = recv
	c := newGkrCase(t, p, ins)
	if _, _, err := stark.ProveGkr(cpuref.Backend{}, transcript.HostGrinder{}, preamble(), p, c.inputs); !errors.Is(err, stark.ErrGkrRootNumerator) || !errors.Is(err, stark.ErrGkr) {
		t.Fatalf("ProveGkr on an unbalanced bus: %v", err)
	}
	proof, _, err := stark.ProveGkrWithOptions(cpuref.Backend{}, transcript.HostGrinder{}, preamble(), p, c.inputs, stark.GkrProveOptions{AllowNonZeroRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := verifyGkr(p, c, &proof); !errors.Is(err, stark.ErrGkrRootNumerator) {
		t.Fatalf("VerifyGkr on an unbalanced proof: %v", err)
	}
}

func TestGkrDeterministic(t *testing.T) {
	p := gkrParams(3)
	c := newGkrCase(t, p, testair.Mixture(8))
	a, ao, _ := proveGkr(t, p, c)
	b, bo, _ := proveGkr(t, p, c)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ao, bo) {
		t.Fatal("two proofs of the same input differ")
	}
}

func TestGkrTamper(t *testing.T) {
	p := gkrParams(2)
	c := newGkrCase(t, p, testair.InteractionsFixture11(false))
	proof, _, _ := proveGkr(t, p, c)
	L := len(proof.ClaimsPerLayer)
	if L < 3 {
		t.Fatalf("want a proof with sumcheck layers, L = %d", L)
	}
	clone := func() stark.GkrProof {
		q := proof
		q.ClaimsPerLayer = slices.Clone(proof.ClaimsPerLayer)
		q.SumcheckPolys = make([][][3]field.Fp4, len(proof.SumcheckPolys))
		for i := range q.SumcheckPolys {
			q.SumcheckPolys[i] = slices.Clone(proof.SumcheckPolys[i])
		}
		return q
	}
	bump := func(x *field.Fp4) { x[0] = x[0].Add(field.One) }
	expect := func(what string, q stark.GkrProof, want ...error) {
		t.Helper()
		_, _, err := verifyGkr(p, c, &q)
		if !errors.Is(err, stark.ErrGkr) {
			t.Fatalf("%s: %v does not wrap ErrGkr", what, err)
		}
		for _, w := range want {
			if errors.Is(err, w) {
				return
			}
		}
		t.Fatalf("%s: %v, want one of %v", what, err, want)
	}

	// Witness: find a value that fails the check (pow_bits 2 passes 1/4 of the values).
	q := clone()
	for w := proof.LogupPowWitness.Add(field.One); ; w = w.Add(field.One) {
		tr := preamble()
		if !tr.CheckWitness(p.Logup.PowBits, w) {
			q.LogupPowWitness = w
			break
		}
	}
	expect("witness", q, stark.ErrLogupPow)
	if _, _, err := verifyGkr(p, c, &q); !errors.Is(err, stark.ErrPow) {
		t.Fatalf("witness: %v does not wrap ErrPow", err)
	}

	q = clone()
	bump(&q.Q0Claim)
	expect("q0_claim", q, stark.ErrGkrRootDenominator)

	for j := range L {
		for k := range 4 {
			q = clone()
			cl := &q.ClaimsPerLayer[j]
			bump([]*field.Fp4{&cl.PXi0, &cl.PXi1, &cl.QXi0, &cl.QXi1}[k])
			if j == 0 {
				expect("layer 1 claim", q, stark.ErrGkrRootNumerator, stark.ErrGkrRootDenominator)
			} else {
				expect("layer claim", q, stark.ErrGkrSumcheck)
			}
		}
	}
	for i := range proof.SumcheckPolys {
		for r := range proof.SumcheckPolys[i] {
			for k := range 3 {
				q = clone()
				bump(&q.SumcheckPolys[i][r][k])
				expect("sumcheck eval", q, stark.ErrGkrSumcheck)
			}
		}
	}

	// Shapes: never a panic.
	q = clone()
	q.ClaimsPerLayer = q.ClaimsPerLayer[:L-1]
	expect("missing layer", q, stark.ErrGkrShape)
	q = clone()
	q.SumcheckPolys[L-2] = q.SumcheckPolys[L-2][:L-2]
	expect("short sumcheck layer", q, stark.ErrGkrShape)
	q = clone()
	q.SumcheckPolys = nil
	expect("no sumcheck polys", q, stark.ErrGkrShape)
	if _, err := stark.VerifyGkr(preamble(), p, c.shapes, nil); !errors.Is(err, stark.ErrGkrShape) {
		t.Fatalf("nil proof: %v", err)
	}
	if _, err := stark.VerifyGkr(preamble(), p, nil, &proof); !errors.Is(err, stark.ErrGkrInput) {
		t.Fatalf("no traces: %v", err)
	}
	bad := slices.Clone(c.shapes)
	bad[0].LogHeight = 80
	if _, err := stark.VerifyGkr(preamble(), p, bad, &proof); !errors.Is(err, stark.ErrGkrInput) {
		t.Fatalf("huge log height: %v", err)
	}
}

// layersBackend gives cpuref's GKR provers ProveLayers (stark.GkrDeviceLayers) computed on the
// host round by round from a copy of the transcript, with tamper applied to the run.
type layersBackend struct {
	cpuref.Backend
	tamper func(*stark.GkrLayersRun)
	final  bool // give the transcript's state after the layers (GkrLayersRun.Final)
}

type layersProver struct {
	stark.GkrProver
	L      int
	tamper func(*stark.GkrLayersRun)
	final  bool
}

func (b layersBackend) NewGkrProver(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
	gp, err := b.Backend.NewGkrProver(p, traces, layout, alpha, beta)
	if err != nil {
		return nil, err
	}
	return &layersProver{GkrProver: gp, L: layout.NumLayers(), tamper: b.tamper, final: b.final}, nil
}

func (lp *layersProver) ProveLayers(tr *transcript.Transcript) (*stark.GkrLayersRun, error) {
	c := *tr
	L := lp.L
	p0, q0, err := lp.Root()
	if err != nil {
		return nil, err
	}
	c.ObserveExt(q0)
	run := &stark.GkrLayersRun{Root: &[2]field.Fp4{p0, q0}, Lambda: make([]field.Fp4, L), Polys: make([][][3]field.Fp4, L),
		Rho: make([][]field.Fp4, L), Claims: make([]stark.GkrLayerClaims, L), Mu: make([]field.Fp4, L)}
	var xi []field.Fp4
	for j := 1; j <= L; j++ {
		if j > 1 {
			run.Lambda[j-1] = c.SampleExt()
		}
		if err := lp.BeginLayer(j, xi, run.Lambda[j-1]); err != nil {
			return nil, err
		}
		for range j - 1 {
			s, err := lp.Round()
			if err != nil {
				return nil, err
			}
			for _, v := range s {
				c.ObserveExt(v)
			}
			r := c.SampleExt()
			run.Polys[j-1] = append(run.Polys[j-1], s)
			run.Rho[j-1] = append(run.Rho[j-1], r)
			if err := lp.Bind(r); err != nil {
				return nil, err
			}
		}
		cl, err := lp.LayerClaims()
		if err != nil {
			return nil, err
		}
		run.Claims[j-1] = cl
		for _, v := range []field.Fp4{cl.PXi0, cl.QXi0, cl.PXi1, cl.QXi1} {
			c.ObserveExt(v)
		}
		run.Mu[j-1] = c.SampleExt()
		xi = append([]field.Fp4{run.Mu[j-1]}, run.Rho[j-1]...)
	}
	if lp.final {
		st, ai, si := c.State()
		run.Final = &stark.TranscriptState{Sponge: st, AbsorbIdx: ai, SampleIdx: si}
	}
	if lp.tamper != nil {
		lp.tamper(run)
	}
	return run, nil
}

// gkrRunTampers change one value of a GKR layers run each: the root's q_0, a sample, a sum or a claim.
func gkrRunTampers() map[string]func(*stark.GkrLayersRun) {
	one := field.Fp4{1}
	return map[string]func(*stark.GkrLayersRun){
		"root":        func(r *stark.GkrLayersRun) { r.Root[1] = r.Root[1].Add(one) },
		"λ":           func(r *stark.GkrLayersRun) { r.Lambda[len(r.Lambda)-1] = r.Lambda[len(r.Lambda)-1].Add(one) },
		"bound value": func(r *stark.GkrLayersRun) { r.Rho[1][0] = r.Rho[1][0].Add(one) },
		"sums":        func(r *stark.GkrLayersRun) { r.Polys[1][0][2] = r.Polys[1][0][2].Add(one) },
		"claims":      func(r *stark.GkrLayersRun) { r.Claims[0].QXi1 = r.Claims[0].QXi1.Add(one) },
		"μ":           func(r *stark.GkrLayersRun) { r.Mu[0] = r.Mu[0].Add(one) },
	}
}

// TestGkrDeviceLayers: a backend that returns the layers at once (stark.GkrDeviceLayers) gives the
// stage's proof and transcript byte for byte; a run whose sample, sums or claims differ from the
// stage's replay, or whose shape is wrong, is an ErrDeviceTranscript error (a changed sum changes
// the next sample).
func TestGkrDeviceLayers(t *testing.T) {
	p := gkrParams(2)
	for name, ins := range gkrFixtures() {
		c := newGkrCase(t, p, ins)
		want, wout, wtr := proveGkr(t, p, c)
		tr := preamble()
		got, gout, err := stark.ProveGkr(layersBackend{}, transcript.HostGrinder{}, tr, p, c.inputs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gout, wout) || !tr.Same(wtr) {
			t.Fatalf("%s: the layers at once differ from the stage's loop", name)
		}
		tampers := gkrRunTampers()
		tampers["shape"] = func(r *stark.GkrLayersRun) { r.Rho[1] = r.Rho[1][:0] }
		for what, tamper := range tampers {
			if _, _, err := stark.ProveGkr(layersBackend{tamper: tamper}, transcript.HostGrinder{}, preamble(), p, c.inputs); !errors.Is(err, stark.ErrDeviceTranscript) {
				t.Errorf("%s: %s changed: err %v, want ErrDeviceTranscript", name, what, err)
			}
		}
	}
}

// TestGkrDeviceLayersDeferred: with the run's final state and GkrProveOptions.Defer, the stage
// returns the same proof and transcript before its replay has run, and the replay's check, not
// the stage, reports a run that differs from it (ErrDeviceTranscript), a changed final state too.
func TestGkrDeviceLayersDeferred(t *testing.T) {
	p := gkrParams(2)
	for name, ins := range gkrFixtures() {
		c := newGkrCase(t, p, ins)
		want, wout, wtr := proveGkr(t, p, c)
		var check func() error
		opt := stark.GkrProveOptions{Defer: func(f func() error) { check = f }}
		tr := preamble()
		got, gout, err := stark.ProveGkrWithOptions(layersBackend{final: true}, transcript.HostGrinder{}, tr, p, c.inputs, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if check == nil {
			t.Fatalf("%s: no check deferred", name)
		}
		if err := check(); err != nil {
			t.Fatalf("%s: deferred check: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gout, wout) || !tr.Same(wtr) {
			t.Fatalf("%s: the deferred replay's stage differs from the stage's loop", name)
		}
		tampers := gkrRunTampers()
		tampers["final state"] = func(r *stark.GkrLayersRun) { r.Final.Sponge[5] = r.Final.Sponge[5].Add(field.Fp(1)) }
		tampers["final index"] = func(r *stark.GkrLayersRun) { r.Final.SampleIdx = (r.Final.SampleIdx + 1) % 8 }
		for what, tamper := range tampers {
			check = nil
			_, _, err := stark.ProveGkrWithOptions(layersBackend{final: true, tamper: tamper}, transcript.HostGrinder{}, preamble(), p, c.inputs, opt)
			if err == nil && check != nil {
				err = check()
			}
			if !errors.Is(err, stark.ErrDeviceTranscript) {
				t.Errorf("%s: %s changed: err %v, want ErrDeviceTranscript", name, what, err)
			}
		}
	}
}

// TestProveJoinsDeferredGkrCheck: a whole proof whose GKR layers come at once with their final
// state (the device backend's way) equals cpuref's byte for byte, and stark.Prove refuses it when
// the run differs from its replay: ProveTraces waits for the deferred check.
func TestProveJoinsDeferredGkrCheck(t *testing.T) {
	p := presetParams(t, "test")
	airs, inputs := statement(testair.InteractionPair(16, 7))
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	want, err := stark.Prove(pk, inputs, p, cpuref.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	with := func(lb layersBackend) *stark.Backend {
		be := cpuref.New()
		be.Gkr = lb
		return be
	}
	got, err := stark.Prove(pk, inputs, p, with(layersBackend{final: true}), nil)
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := want.MarshalBinary()
	gb, _ := got.MarshalBinary()
	if !bytes.Equal(gb, wb) {
		t.Fatal("the proof with the deferred GKR replay differs from cpuref's")
	}
	tamper := func(r *stark.GkrLayersRun) { r.Mu[1] = r.Mu[1].Add(field.Fp4{1}) }
	if _, err := stark.Prove(pk, inputs, p, with(layersBackend{final: true, tamper: tamper}), nil); !errors.Is(err, stark.ErrDeviceTranscript) {
		t.Fatalf("a changed μ: %v, want ErrDeviceTranscript", err)
	}
}
