// Package backendtest is the conformance suite every prover backend passes: each stage of a
// subject backend is driven with fixed inputs and challenges beside the reference backend
// (internal/backend/cpuref), and every output — each commitment root, each round of each
// sumcheck, each opening, each proof-of-work witness — is compared as it is produced, so a broken
// kernel shows at its first wrong round rather than as a different proof file. The checks
// return errors (no testing.T) so that `go test` and `metalprove selftest` (and with it
// scripts/gpu-check.sh on a CUDA machine) run the same suite.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Subject is a backend under test.
type Subject struct {
	// Backend is what the stages run on.
	Backend *stark.Backend
}

// Check is one conformance check.
type Check struct {
	Name string
	Run  func() error
}

// Stage names of the checks, as in a stark.Backend's fields.
const (
	StageCommitter   = "Committer"
	StageGkr         = "Gkr"
	StageConstraints = "Constraints"
	StageStacking    = "Stacking"
	StageWhir        = "Whir"
	StageGrinder     = "Grinder"
	StageProve       = "Prove"
)

// Checks returns the suite for s: per fixture, one check per stage and one whole proof.
func Checks(s Subject) []Check {
	var out []Check
	for _, f := range Fixtures() {
		f := f
		for _, st := range []struct {
			stage string
			run   func(*pair) error
		}{
			{StageCommitter, checkCommit},
			{StageGkr, checkGkr},
			{StageConstraints, checkConstraints},
			{StageStacking, checkStacking},
			{StageWhir, checkWhir},
			{StageProve, checkProve},
		} {
			out = append(out, Check{Name: "conformance/" + st.stage + "/" + f.Name, Run: func() error {
				return s.run(f, st.run)
			}})
		}
	}
	out = append(out, Check{Name: "conformance/" + StageGrinder, Run: func() error {
		return checkGrinder(s.Backend)
	}})
	return out
}

func (s Subject) run(f Fixture, check func(*pair) error) error {
	pr, err := newPair(s.Backend, f)
	if err != nil {
		return fmt.Errorf("%s: set-up: %w", f.Name, err)
	}
	defer pr.free()
	if err := check(pr); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}

// Fixture is one multi-AIR statement with its parameters.
type Fixture struct {
	Name   string
	Params params.SystemParams
	Airs   []air.Air
	Inputs []stark.AirProvingInput
}

// Fixtures are the statements the suite proves: the test AIRs of spec B §8 together (every
// trace shape: preprocessed and cached parts, interactions on two buses, traces shorter than
// 2^l_skip, height 1) under the small test parameters, and Keccak-f under app-100bit at a small
// stacked height.
func Fixtures() []Fixture {
	mk := func(name string, p params.SystemParams, ins []testair.Instance) Fixture {
		f := Fixture{Name: name, Params: p}
		for _, in := range ins {
			f.Airs = append(f.Airs, in.Air)
			h := in.Trace.CommonMain.Height
			if len(in.Trace.CachedMains) > 0 {
				h = in.Trace.CachedMains[0].Height
			}
			ai := stark.AirProvingInput{Common: in.Trace.CommonMain, Public: in.Trace.Public}
			ai.Common.Height = h
			ai.Cached = append(ai.Cached, in.Trace.CachedMains...)
			f.Inputs = append(f.Inputs, ai)
		}
		return f
	}
	test, _, err := params.Preset("test", 0)
	if err != nil {
		panic(err)
	}
	test.Logup.PowBits = 3 // keep the grinds short but present
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8), testair.PreprocessedCached(2, 16)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.SelfInteraction([]int{3}, 4, 5)...)
	ins = append(ins, testair.ShortTraces()...)
	out := []Fixture{mk("test-airs", test, ins)}

	app, _, err := params.Preset("app-100bit", 12)
	if err != nil {
		panic(err)
	}
	ex, err := examples.Lookup("keccakf")
	if err != nil {
		panic(err)
	}
	secs, err := ex.Generate(examples.Options{Perms: 2})
	if err != nil {
		panic(err)
	}
	ti, err := secs[0].TraceInput()
	if err != nil {
		panic(err)
	}
	out = append(out, mk("keccakf-2", app, []testair.Instance{{Air: secs[0].Air, Trace: ti}}))
	return out
}

// pair is one fixture set up on the subject and on the reference: keys, loaded traces and the
// per-trace stage inputs in trace order.
type pair struct {
	f        Fixture
	sub, ref *stark.Backend
	pkS, pkR *stark.ProvingKey
	ldS, ldR []stark.AirTraces
	inS, inR []*stark.AirInput
}

func newPair(sub *stark.Backend, f Fixture) (*pair, error) {
	pr := &pair{f: f, sub: sub, ref: cpuref.New()}
	var err error
	if pr.pkR, err = stark.Keygen(f.Params, f.Airs, nil, pr.ref); err != nil {
		return nil, err
	}
	if pr.pkS, err = stark.Keygen(f.Params, f.Airs, nil, sub); err != nil {
		return nil, err
	}
	for c, pc := range pr.pkS.PreprocessedCommit {
		if pc != nil && pc.Root() != pr.pkR.PreprocessedCommit[c].Root() {
			pr.free()
			return nil, fmt.Errorf("keygen: preprocessed commitment root of AIR %d differs from the reference's", c)
		}
	}
	if pr.pkS.VK.PreHash != pr.pkR.VK.PreHash {
		pr.free()
		return nil, errors.New("keygen: verifying-key prehash differs from the reference's")
	}
	if pr.ldS, err = stark.LoadInputs(sub, pr.pkS, f.Inputs); err != nil {
		pr.free()
		return nil, err
	}
	if pr.ldR, err = stark.LoadInputs(pr.ref, pr.pkR, f.Inputs); err != nil {
		pr.free()
		return nil, err
	}
	if pr.inS, err = stark.AirInputs(pr.pkS, pr.ldS, f.Params); err != nil {
		pr.free()
		return nil, err
	}
	if pr.inR, err = stark.AirInputs(pr.pkR, pr.ldR, f.Params); err != nil {
		pr.free()
		return nil, err
	}
	return pr, nil
}

func (pr *pair) free() {
	stark.FreeTraces(pr.ldS)
	if pr.pkS != nil {
		pr.pkS.Free()
	}
}

// rng is the fixed source of every challenge of a check.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func fp4s(r *rand.Rand, n int) []field.Fp4 {
	out := make([]field.Fp4, n)
	for i := range out {
		out[i] = fieldrand.Fp4(r)
	}
	return out
}

// diff reports the first difference of two values of the same stage output.
func diff[T comparable](what string, got, want T) error {
	if got != want {
		return fmt.Errorf("%s: %v, reference %v", what, got, want)
	}
	return nil
}

func diffSlice[T comparable](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, reference %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s[%d]: %v, reference %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// commitAll commits the opening proof's commitment list (B §5.1) on one side: common main, then
// per trace its preprocessed commitment and its cached ones. The second result lists the
// commitments made here (to free).
func commitAll(be *stark.Backend, pk *stark.ProvingKey, in []*stark.AirInput, p params.SystemParams) ([]stark.Committed, []stark.Committed, error) {
	commons := make([]stark.Trace, len(in))
	for t, a := range in {
		commons[t] = a.Common
	}
	common, err := be.Committer.Commit(p, commons)
	if err != nil {
		return nil, nil, err
	}
	list, made := []stark.Committed{common}, []stark.Committed{common}
	for _, a := range in {
		if pc := pk.PreprocessedCommit[a.AirIndex]; pc != nil {
			list = append(list, pc)
		}
		for j := range a.Cached {
			c, err := be.Committer.Commit(p, a.Cached[j:j+1])
			if err != nil {
				return nil, made, err
			}
			list, made = append(list, c), append(made, c)
		}
	}
	return list, made, nil
}

func freeAll(cs []stark.Committed) {
	for _, c := range cs {
		c.Free()
	}
}

// commits makes the commitment lists on both sides and checks roots and layouts.
func (pr *pair) commits() (sub, ref []stark.Committed, free func(), err error) {
	p := pr.f.Params
	sub, madeS, err := commitAll(pr.sub, pr.pkS, pr.inS, p)
	if err != nil {
		freeAll(madeS)
		return nil, nil, nil, err
	}
	ref, _, err = commitAll(pr.ref, pr.pkR, pr.inR, p)
	if err != nil {
		freeAll(madeS)
		return nil, nil, nil, err
	}
	free = func() { freeAll(madeS) }
	if len(sub) != len(ref) {
		free()
		return nil, nil, nil, fmt.Errorf("commit: %d commitments, reference %d", len(sub), len(ref))
	}
	for c := range sub {
		if err := diff(fmt.Sprintf("commit %d root", c), sub[c].Root(), ref[c].Root()); err != nil {
			free()
			return nil, nil, nil, err
		}
		ls, lr := sub[c].Layout(), ref[c].Layout()
		if ls.Width != lr.Width || ls.LogHeight != lr.LogHeight || len(ls.Cols) != len(lr.Cols) {
			free()
			return nil, nil, nil, fmt.Errorf("commit %d layout differs from the reference's", c)
		}
	}
	return sub, ref, free, nil
}

func checkCommit(pr *pair) error {
	for i, in := range pr.inS {
		h, hr := in.Common.Host(), pr.inR[i].Common.Host()
		if h == nil || h.Width != hr.Width || h.Height != hr.Height || len(h.Values) != len(hr.Values) ||
			(len(h.Values) > 0 && &h.Values[0] != &hr.Values[0]) {
			return fmt.Errorf("load: trace %d does not keep the host matrix it was loaded from", i)
		}
	}
	_, _, free, err := pr.commits()
	if err != nil {
		return err
	}
	free()
	return nil
}

func checkGkr(pr *pair) error {
	p := pr.f.Params
	logH := make([]int, len(pr.inS))
	numInter := make([]int, len(pr.inS))
	for t, in := range pr.inS {
		logH[t] = in.LogHeight()
		numInter[t] = len(in.VK.DAG.Interactions)
	}
	layout, _, err := stark.NewGkrLayout(p.LSkip, logH, numInter)
	if err != nil {
		return err
	}
	if layout.Total == 0 {
		return nil // no interactions: the stage has no backend work
	}
	r := rng(1)
	alpha, beta := fieldrand.Fp4(r), fieldrand.Fp4(r)
	gs, err := pr.sub.Gkr.NewGkrProver(p, pr.inS, layout, alpha, beta)
	if err != nil {
		return fmt.Errorf("gkr: new prover: %w", err)
	}
	defer gs.Release()
	gr, err := pr.ref.Gkr.NewGkrProver(p, pr.inR, layout, alpha, beta)
	if err != nil {
		return err
	}
	defer gr.Release()
	ps, qs, err := gs.Root()
	if err != nil {
		return fmt.Errorf("gkr: root: %w", err)
	}
	pRef, qRef, _ := gr.Root()
	if err := diff("gkr root", [2]field.Fp4{ps, qs}, [2]field.Fp4{pRef, qRef}); err != nil {
		return err
	}
	var xi []field.Fp4
	for j := 1; j <= layout.NumLayers(); j++ {
		lambda := fieldrand.Fp4(r)
		if err := gs.BeginLayer(j, xi, lambda); err != nil {
			return fmt.Errorf("gkr: layer %d: %w", j, err)
		}
		if err := gr.BeginLayer(j, xi, lambda); err != nil {
			return err
		}
		rho := fp4s(r, j-1)
		for t := range j - 1 {
			s, err := gs.Round()
			if err != nil {
				return fmt.Errorf("gkr: layer %d round %d: %w", j, t, err)
			}
			sr, _ := gr.Round()
			if err := diff(fmt.Sprintf("gkr layer %d round %d", j, t), s, sr); err != nil {
				return err
			}
			if err := gs.Bind(rho[t]); err != nil {
				return err
			}
			if err := gr.Bind(rho[t]); err != nil {
				return err
			}
		}
		c, err := gs.LayerClaims()
		if err != nil {
			return fmt.Errorf("gkr: layer %d claims: %w", j, err)
		}
		cr, _ := gr.LayerClaims()
		if err := diff(fmt.Sprintf("gkr layer %d claims", j), c, cr); err != nil {
			return err
		}
		xi = append([]field.Fp4{fieldrand.Fp4(r)}, rho...)
	}
	return nil
}

func checkConstraints(pr *pair) error {
	p := pr.f.Params
	l := p.LSkip
	r := rng(2)
	nMax := 0
	nLift := make([]int, len(pr.inS))
	for t, in := range pr.inS {
		nLift[t] = max(in.LogHeight()-l, 0)
		nMax = max(nMax, nLift[t])
	}
	challenges := func(in []*stark.AirInput, lambda, beta field.Fp4, xi []field.Fp4, eq3b [][]field.Fp4) (*stark.ConstraintChallenges, error) {
		ch := &stark.ConstraintChallenges{Lambda: lambda, Beta: beta, Xi: xi, Eq3b: eq3b}
		for t, a := range in {
			pg := a.Program
			if pg == nil {
				return nil, fmt.Errorf("trace %d has no compiled constraint program", t)
			}
			w, err := pg.Weights(lambda, beta, eq3b[t])
			if err != nil {
				return nil, err
			}
			ch.Programs = append(ch.Programs, pg)
			ch.Weights = append(ch.Weights, w)
		}
		return ch, nil
	}
	lambda, beta := fieldrand.Fp4(r), fieldrand.Fp4(r)
	xi := fp4s(r, l+nMax+1)
	eq3b := make([][]field.Fp4, len(pr.inS))
	for t, in := range pr.inS {
		eq3b[t] = fp4s(r, len(in.VK.DAG.Interactions))
	}
	chS, err := challenges(pr.inS, lambda, beta, xi, eq3b)
	if err != nil {
		return err
	}
	chR, err := challenges(pr.inR, lambda, beta, xi, eq3b)
	if err != nil {
		return err
	}
	cs, err := pr.sub.Constraints.NewConstraintProver(p, pr.inS, chS)
	if err != nil {
		return fmt.Errorf("constraints: new prover: %w", err)
	}
	defer cs.Release()
	cr, err := pr.ref.Constraints.NewConstraintProver(p, pr.inR, chR)
	if err != nil {
		return err
	}
	defer cr.Release()
	triples := func(what string, a, b []stark.ConstraintTriple) error {
		if len(a) != len(b) {
			return fmt.Errorf("%s: %d traces, reference %d", what, len(a), len(b))
		}
		for t := range a {
			for _, f := range []struct {
				name string
				x, y []field.Fp4
			}{{"Zc", a[t].Zc, b[t].Zc}, {"Num", a[t].Num, b[t].Num}, {"Den", a[t].Den, b[t].Den}} {
				if err := diffSlice(fmt.Sprintf("%s trace %d %s", what, t, f.name), f.x, f.y); err != nil {
					return err
				}
			}
		}
		return nil
	}
	u0, err := cs.UnivariateRound()
	if err != nil {
		return fmt.Errorf("constraints: round 0: %w", err)
	}
	u0r, _ := cr.UnivariateRound()
	if err := triples("constraints round 0", u0, u0r); err != nil {
		return err
	}
	openings := func(j int) error {
		for t := range pr.inS {
			if nLift[t] != j {
				continue
			}
			o, err := cs.Openings(t)
			if err != nil {
				return fmt.Errorf("constraints: openings of trace %d: %w", t, err)
			}
			or, _ := cr.Openings(t)
			if len(o) != len(or) {
				return fmt.Errorf("constraints: openings of trace %d: %d parts, reference %d", t, len(o), len(or))
			}
			for q := range o {
				if err := diffSlice(fmt.Sprintf("constraints openings trace %d part %d", t, q), o[q], or[q]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	rs := fp4s(r, nMax+1)
	if err := cs.BindUnivariate(rs[0]); err != nil {
		return err
	}
	if err := cr.BindUnivariate(rs[0]); err != nil {
		return err
	}
	if err := openings(0); err != nil {
		return err
	}
	for j := 1; j <= nMax; j++ {
		e, err := cs.Round()
		if err != nil {
			return fmt.Errorf("constraints: round %d: %w", j, err)
		}
		er, _ := cr.Round()
		if err := triples(fmt.Sprintf("constraints round %d", j), e, er); err != nil {
			return err
		}
		if err := cs.Bind(rs[j]); err != nil {
			return err
		}
		if err := cr.Bind(rs[j]); err != nil {
			return err
		}
		if err := openings(j); err != nil {
			return err
		}
	}
	return nil
}

// stackingBatch is a fixed point and batch for the commitment list of sub: a random λ, a
// rotation claim on every other column.
func stackingBatch(r *rand.Rand, p params.SystemParams, cs []stark.Committed) ([]field.Fp4, *stark.StackingBatch) {
	pt := fp4s(r, p.NStack+2)
	b := &stark.StackingBatch{Lambda: pt[p.NStack+1]}
	for _, c := range cs {
		rot := make([]bool, len(c.Layout().Cols))
		for i := 1; i < len(rot); i += 2 {
			rot[i] = true
		}
		b.NeedRot = append(b.NeedRot, rot)
	}
	return pt[:p.NStack+1], b
}

func checkStacking(pr *pair) error {
	p := pr.f.Params
	sub, ref, free, err := pr.commits()
	if err != nil {
		return err
	}
	defer free()
	r := rng(3)
	pt, batch := stackingBatch(r, p, sub)
	ss, err := pr.sub.Stacking.NewStackingProver(p, sub, pt)
	if err != nil {
		return fmt.Errorf("stacking: new prover: %w", err)
	}
	defer ss.Release()
	sr, err := pr.ref.Stacking.NewStackingProver(p, ref, pt)
	if err != nil {
		return err
	}
	defer sr.Release()
	u0, err := ss.UnivariateRound(batch)
	if err != nil {
		return fmt.Errorf("stacking: round 0: %w", err)
	}
	u0r, _ := sr.UnivariateRound(batch)
	if err := diffSlice("stacking round 0 coefficients", u0, u0r); err != nil {
		return err
	}
	us := fp4s(r, p.NStack+1)
	if err := ss.BindUnivariate(us[0]); err != nil {
		return err
	}
	if err := sr.BindUnivariate(us[0]); err != nil {
		return err
	}
	for j := 1; j <= p.NStack; j++ {
		s1, s2, err := ss.Round()
		if err != nil {
			return fmt.Errorf("stacking: round %d: %w", j, err)
		}
		r1, r2, _ := sr.Round()
		if err := diff(fmt.Sprintf("stacking round %d", j), [2]field.Fp4{s1, s2}, [2]field.Fp4{r1, r2}); err != nil {
			return err
		}
		if err := ss.Bind(us[j]); err != nil {
			return err
		}
		if err := sr.Bind(us[j]); err != nil {
			return err
		}
	}
	o, err := ss.Openings()
	if err != nil {
		return fmt.Errorf("stacking: openings: %w", err)
	}
	or, _ := sr.Openings()
	if len(o) != len(or) {
		return fmt.Errorf("stacking openings: %d commitments, reference %d", len(o), len(or))
	}
	for c := range o {
		if err := diffSlice(fmt.Sprintf("stacking openings commitment %d", c), o[c], or[c]); err != nil {
			return err
		}
	}
	return nil
}

func checkWhir(pr *pair) error {
	p := pr.f.Params
	sub, ref, free, err := pr.commits()
	if err != nil {
		return err
	}
	defer free()
	r := rng(4)
	m := p.LSkip + p.NStack
	mu := fieldrand.Fp4(r)
	uCube := fp4s(r, m)
	ws, err := pr.sub.Whir.NewWhirProver(p, sub, mu, uCube)
	if err != nil {
		return fmt.Errorf("whir: new prover: %w", err)
	}
	defer ws.Release()
	wr, err := pr.ref.Whir.NewWhirProver(p, ref, mu, uCube)
	if err != nil {
		return err
	}
	defer wr.Release()
	k, R := p.Whir.K, len(p.Whir.Rounds)
	lrs := m + p.LogBlowup
	for round, rc := range p.Whir.Rounds {
		last := round == R-1
		for i := range k {
			s1, s2, err := ws.SumcheckRound()
			if err != nil {
				return fmt.Errorf("whir: round %d sumcheck %d: %w", round, i, err)
			}
			r1, r2, _ := wr.SumcheckRound()
			if err := diff(fmt.Sprintf("whir round %d sumcheck %d", round, i), [2]field.Fp4{s1, s2}, [2]field.Fp4{r1, r2}); err != nil {
				return err
			}
			alpha := fieldrand.Fp4(r)
			if err := ws.Fold(alpha); err != nil {
				return err
			}
			if err := wr.Fold(alpha); err != nil {
				return err
			}
		}
		var z0 field.Fp4
		if !last {
			root, err := ws.CommitFolded(lrs - 1)
			if err != nil {
				return fmt.Errorf("whir: round %d commit: %w", round, err)
			}
			rr, _ := wr.CommitFolded(lrs - 1)
			if err := diff(fmt.Sprintf("whir round %d folded root", round), root, rr); err != nil {
				return err
			}
			z0 = fieldrand.Fp4(r)
			y0, err := ws.EvalFolded(z0)
			if err != nil {
				return fmt.Errorf("whir: round %d OOD: %w", round, err)
			}
			yr, _ := wr.EvalFolded(z0)
			if err := diff(fmt.Sprintf("whir round %d OOD value", round), y0, yr); err != nil {
				return err
			}
		} else {
			fp, err := ws.FinalPoly()
			if err != nil {
				return fmt.Errorf("whir: final polynomial: %w", err)
			}
			fr, _ := wr.FinalPoly()
			if err := diffSlice("whir final polynomial", fp, fr); err != nil {
				return err
			}
		}
		qbits := lrs - k
		ys := make([]int, rc.NumQueries)
		for q := range ys {
			ys[q] = r.IntN(1 << qbits)
		}
		if len(ys) > 0 {
			ys[0] = 0
			ys[len(ys)-1] = 1<<qbits - 1
		}
		if round == 0 {
			o, err := ws.OpenInitial(ys)
			if err != nil {
				return fmt.Errorf("whir: initial openings: %w", err)
			}
			or, _ := wr.OpenInitial(ys)
			if err := sameInitial(o, or); err != nil {
				return err
			}
		} else {
			o, err := ws.OpenCodeword(round-1, ys)
			if err != nil {
				return fmt.Errorf("whir: round %d openings: %w", round, err)
			}
			or, _ := wr.OpenCodeword(round-1, ys)
			if len(o) != len(or) {
				return fmt.Errorf("whir round %d openings: %d answers, reference %d", round, len(o), len(or))
			}
			for q := range o {
				if err := diffSlice(fmt.Sprintf("whir round %d query %d values", round, q), o[q].Values, or[q].Values); err != nil {
					return err
				}
				if err := diffSlice(fmt.Sprintf("whir round %d query %d path", round, q), o[q].Path, or[q].Path); err != nil {
					return err
				}
			}
		}
		if !last {
			omega := field.TwoAdicGenerator(qbits)
			coefs := fp4s(r, len(ys)+1)
			points := []field.Fp4{z0}
			for _, y := range ys {
				points = append(points, field.Lift(omega.Exp(uint64(y))))
			}
			if err := ws.AccumulateWeight(coefs, points); err != nil {
				return fmt.Errorf("whir: round %d weights: %w", round, err)
			}
			if err := wr.AccumulateWeight(coefs, points); err != nil {
				return err
			}
		}
		lrs--
	}
	return nil
}

func sameInitial(o, or []stark.InitialOpening) error {
	if len(o) != len(or) {
		return fmt.Errorf("whir initial openings: %d answers, reference %d", len(o), len(or))
	}
	for q := range o {
		if len(o[q].Rows) != len(or[q].Rows) || len(o[q].Paths) != len(or[q].Paths) {
			return fmt.Errorf("whir initial query %d: %d commitments, reference %d", q, len(o[q].Rows), len(or[q].Rows))
		}
		for c := range o[q].Rows {
			if len(o[q].Rows[c]) != len(or[q].Rows[c]) {
				return fmt.Errorf("whir initial query %d commitment %d: %d rows, reference %d", q, c, len(o[q].Rows[c]), len(or[q].Rows[c]))
			}
			for t := range o[q].Rows[c] {
				if err := diffSlice(fmt.Sprintf("whir initial query %d commitment %d row %d", q, c, t), o[q].Rows[c][t], or[q].Rows[c][t]); err != nil {
					return err
				}
			}
			if err := diffSlice(fmt.Sprintf("whir initial query %d commitment %d path", q, c), o[q].Paths[c], or[q].Paths[c]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkProve proves the fixture on both backends: the proof bytes must be equal, and verify.
func checkProve(pr *pair) error {
	p := pr.f.Params
	opts := &stark.ProveOptions{CheckConstraints: true}
	ps, err := stark.ProveTraces(pr.pkS, pr.ldS, p, pr.sub, opts)
	if err != nil {
		return fmt.Errorf("prove: %w", err)
	}
	prr, err := stark.ProveTraces(pr.pkR, pr.ldR, p, pr.ref, opts)
	if err != nil {
		return err
	}
	bs, err := ps.MarshalBinary()
	if err != nil {
		return err
	}
	br, err := prr.MarshalBinary()
	if err != nil {
		return err
	}
	if !bytes.Equal(bs, br) {
		return fmt.Errorf("prove: proof bytes differ from the reference's (%d vs %d bytes; first difference at byte %d)", len(bs), len(br), firstDiff(bs, br))
	}
	if err := stark.Verify(pr.pkR.VK, ps, p); err != nil {
		return fmt.Errorf("prove: the proof does not verify: %w", err)
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkGrinder compares the subject's proof-of-work search with the reference's on fixed
// states, absorb indices and bit counts.
func checkGrinder(be *stark.Backend) error {
	r := rng(5)
	for i := range 24 {
		var state [poseidon2.Width]field.Fp
		for j := range state {
			state[j] = fieldrand.Fp(r)
		}
		idx := i % 8
		bits := 1 + i%14
		got, err := be.Grinder.FindWitness(context.Background(), state, idx, bits)
		if err != nil {
			return fmt.Errorf("grinder: state %d, %d bits: %w", i, bits, err)
		}
		want, err := transcript.HostGrinder{}.FindWitness(context.Background(), state, idx, bits)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("grinder: state %d, absorb index %d, %d bits: witness %d, reference %d", i, idx, bits, got, want)
		}
	}
	return nil
}
