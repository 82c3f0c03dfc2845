package stark_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/stark/starktest"
	"github.com/metalprove/metalprove/internal/transcript"
)

func randFp(r *rand.Rand) field.Fp { return field.Fp(r.Uint32N(field.P)) }

type fixture struct {
	p       params.SystemParams
	commits []stark.Committed
	roots   []stark.Digest
	layouts []*stark.StackedLayout
	claims  *stark.OpeningClaims
}

// newFixture builds three commitments (common main with mixed heights, a "cached" and a
// "preprocessed" one) of random traces, and the true claims at a random point.
func newFixture(t testing.TB, p params.SystemParams, seed uint64, rot int) *fixture {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	m := p.LSkip + p.NStack
	// common main: log heights m, m−1, …, l_skip, l_skip−1, …, 0 (some widths 0), trace order.
	var common []air.Matrix
	for h := m; h >= 0; h-- {
		if h < m-1 && h > p.LSkip+1 && h%2 == 0 {
			continue
		}
		w := 1 + r.IntN(3)
		if h == m-1 {
			w = 0 // a trace without common-main columns
		}
		mat := air.NewMatrix(w, 1<<h)
		for i := range mat.Values {
			mat.Values[i] = randFp(r)
		}
		common = append(common, mat)
	}
	cached := air.NewMatrix(2, 1<<(m-1))
	prep := air.NewMatrix(1, 1<<max(p.LSkip-1, 0))
	for _, mat := range []air.Matrix{cached, prep} {
		for i := range mat.Values {
			mat.Values[i] = randFp(r)
		}
	}
	groups := [][]air.Matrix{common, {cached}, {prep}}
	f := &fixture{p: p}
	maxN := 0
	for _, g := range groups {
		c, err := cpuref.CommitMatrices(p, g)
		if err != nil {
			t.Fatal(err)
		}
		f.commits = append(f.commits, c)
		f.roots = append(f.roots, c.Root())
		f.layouts = append(f.layouts, c.Layout())
		for _, mat := range g {
			if mat.Width > 0 {
				h := 0
				for 1<<h < mat.Height {
					h++
				}
				maxN = max(maxN, h-p.LSkip)
			}
		}
	}
	pt := make([]field.Fp4, maxN+1)
	for i := range pt {
		pt[i] = starktest.RandFp4(r)
	}
	f.claims = &stark.OpeningClaims{R: pt}
	for _, g := range groups {
		var cc stark.CommitClaims
		for _, mat := range g {
			need := rot == 1 || (rot == 2 && r.IntN(2) == 0)
			cc.NeedRot = append(cc.NeedRot, need)
			vals := make([]field.Fp4, mat.Width)
			rots := make([]field.Fp4, mat.Width)
			for j := range mat.Width {
				vals[j] = starktest.EvalColumn(p.LSkip, mat.Column(j), pt)
				if need {
					rots[j] = starktest.EvalColumn(p.LSkip, starktest.Rotate(mat.Column(j)), pt)
				}
			}
			cc.Values = append(cc.Values, vals)
			cc.Rot = append(cc.Rot, rots)
		}
		f.claims.Commits = append(f.claims.Commits, cc)
	}
	return f
}

func startTranscript(seed uint64) transcript.Transcript {
	tr := transcript.New()
	for i := range 5 {
		tr.Observe(field.Fp(seed*7 + uint64(i)))
	}
	return tr
}

// prove runs ProveOpenings and returns the proofs as the verifier receives them: passed through
// the codec (viaCodec).
func (f *fixture) prove(t testing.TB) (stark.StackingProof, stark.WhirProof, transcript.Transcript) {
	t.Helper()
	tr := startTranscript(1)
	sp, wp, err := stark.ProveOpenings(cpuref.New(), &tr, f.p, f.commits, f.claims)
	if err != nil {
		t.Fatal(err)
	}
	sp, wp = viaCodec(t, f.p, &sp, &wp)
	return sp, wp, tr
}

// viaCodec encodes the proofs (EncodeStackingProof, EncodeWhirProof), decodes them with p's
// limits and checks that the decoded proofs encode to the same bytes; it returns the decoded ones.
func viaCodec(t testing.TB, p params.SystemParams, sp *stark.StackingProof, wp *stark.WhirProof) (stark.StackingProof, stark.WhirProof) {
	t.Helper()
	spb, err := stark.EncodeStackingProof(sp)
	if err != nil {
		t.Fatalf("encode stacking proof: %v", err)
	}
	wpb, err := stark.EncodeWhirProof(wp)
	if err != nil {
		t.Fatalf("encode WHIR proof: %v", err)
	}
	lim := stark.LimitsFor(p)
	dsp, err := stark.DecodeStackingProof(spb, &lim)
	if err != nil {
		t.Fatalf("decode stacking proof: %v", err)
	}
	dwp, err := stark.DecodeWhirProof(wpb, &lim)
	if err != nil {
		t.Fatalf("decode WHIR proof: %v", err)
	}
	if b, err := stark.EncodeStackingProof(dsp); err != nil || !bytes.Equal(b, spb) {
		t.Fatalf("decoded stacking proof does not re-encode to its encoding (%v)", err)
	}
	if b, err := stark.EncodeWhirProof(dwp); err != nil || !bytes.Equal(b, wpb) {
		t.Fatalf("decoded WHIR proof does not re-encode to its encoding (%v)", err)
	}
	return *dsp, *dwp
}

func (f *fixture) verify(sp *stark.StackingProof, wp *stark.WhirProof, claims *stark.OpeningClaims) (transcript.Transcript, error) {
	tr := startTranscript(1)
	err := stark.VerifyOpenings(&tr, f.p, f.roots, f.layouts, claims, sp, wp)
	return tr, err
}

func testPreset(t testing.TB) params.SystemParams {
	p, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpeningsRoundTrip(t *testing.T) {
	app, _, err := params.Preset("app-100bit", 11)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		p    params.SystemParams
		rot  int
	}{
		{"test/rot-off", testPreset(t), 0},
		{"test/rot-on", testPreset(t), 1},
		{"test/rot-mixed", testPreset(t), 2},
		{"app11/rot-mixed", app, 2},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.p, uint64(10+i), tc.rot)
			sp, wp, ptr := f.prove(t)
			vtr, err := f.verify(&sp, &wp, f.claims)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !vtr.Same(&ptr) {
				t.Error("prover and verifier transcripts differ")
			}
		})
	}
}

func cloneStacking(s stark.StackingProof) stark.StackingProof {
	out := stark.StackingProof{
		UnivariateRoundCoeffs: append([]field.Fp4(nil), s.UnivariateRoundCoeffs...),
		SumcheckRoundPolys:    append([][2]field.Fp4(nil), s.SumcheckRoundPolys...),
	}
	for _, o := range s.StackingOpenings {
		out.StackingOpenings = append(out.StackingOpenings, append([]field.Fp4(nil), o...))
	}
	return out
}

func cloneWhir(w stark.WhirProof) stark.WhirProof {
	out := w
	out.WhirSumcheckPolys = append([][2]field.Fp4(nil), w.WhirSumcheckPolys...)
	out.CodewordCommits = append([]stark.Digest(nil), w.CodewordCommits...)
	out.OODValues = append([]field.Fp4(nil), w.OODValues...)
	out.FoldingPowWitnesses = append([]field.Fp(nil), w.FoldingPowWitnesses...)
	out.QueryPhasePowWitnesses = append([]field.Fp(nil), w.QueryPhasePowWitnesses...)
	out.FinalPoly = append([]field.Fp4(nil), w.FinalPoly...)
	out.InitialRoundOpenedRows = nil
	for _, c := range w.InitialRoundOpenedRows {
		var cq [][][]field.Fp
		for _, q := range c {
			var rows [][]field.Fp
			for _, row := range q {
				rows = append(rows, append([]field.Fp(nil), row...))
			}
			cq = append(cq, rows)
		}
		out.InitialRoundOpenedRows = append(out.InitialRoundOpenedRows, cq)
	}
	cloneProofs := func(in [][][]stark.Digest) [][][]stark.Digest {
		var o [][][]stark.Digest
		for _, c := range in {
			var cq [][]stark.Digest
			for _, q := range c {
				cq = append(cq, append([]stark.Digest(nil), q...))
			}
			o = append(o, cq)
		}
		return o
	}
	out.InitialRoundMerkleProofs = cloneProofs(w.InitialRoundMerkleProofs)
	out.CodewordMerkleProofs = cloneProofs(w.CodewordMerkleProofs)
	out.CodewordOpenedValues = nil
	for _, r := range w.CodewordOpenedValues {
		var rq [][]field.Fp4
		for _, q := range r {
			rq = append(rq, append([]field.Fp4(nil), q...))
		}
		out.CodewordOpenedValues = append(out.CodewordOpenedValues, rq)
	}
	return out
}

func cloneClaims(c *stark.OpeningClaims) *stark.OpeningClaims {
	out := &stark.OpeningClaims{R: append([]field.Fp4(nil), c.R...)}
	for _, cc := range c.Commits {
		n := stark.CommitClaims{NeedRot: append([]bool(nil), cc.NeedRot...)}
		for _, v := range cc.Values {
			n.Values = append(n.Values, append([]field.Fp4(nil), v...))
		}
		for _, v := range cc.Rot {
			n.Rot = append(n.Rot, append([]field.Fp4(nil), v...))
		}
		out.Commits = append(out.Commits, n)
	}
	return out
}

func one(e field.Fp4) field.Fp4 { return e.AddBase(1) }

func TestOpeningsTampering(t *testing.T) {
	p := testPreset(t)
	p.Whir.MuPowBits, p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits = 0, 0, 0
	f := newFixture(t, p, 7, 2)
	sp0, wp0, _ := f.prove(t)
	if _, err := f.verify(&sp0, &wp0, f.claims); err != nil {
		t.Fatalf("honest proof rejected: %v", err)
	}
	last := len(wp0.CodewordOpenedValues) - 1
	cases := []struct {
		name   string
		want   error
		sp     func(*stark.StackingProof)
		wp     func(*stark.WhirProof)
		claims func(*stark.OpeningClaims)
	}{
		{name: "claim value", want: stark.ErrStackingUnivariate, claims: func(c *stark.OpeningClaims) { c.Commits[0].Values[0][0] = one(c.Commits[0].Values[0][0]) }},
		{name: "claim rotated value", want: stark.ErrStackingUnivariate, claims: func(c *stark.OpeningClaims) {
			for ci := range c.Commits {
				for mi, need := range c.Commits[ci].NeedRot {
					if need && len(c.Commits[ci].Rot[mi]) > 0 {
						c.Commits[ci].Rot[mi][0] = one(c.Commits[ci].Rot[mi][0])
						return
					}
				}
			}
			panic("no rotated claim")
		}},
		{name: "claim in short trace", want: stark.ErrStackingUnivariate, claims: func(c *stark.OpeningClaims) { c.Commits[2].Values[0][0] = one(c.Commits[2].Values[0][0]) }},
		{name: "claim point", want: stark.ErrStacking, claims: func(c *stark.OpeningClaims) { c.R[0] = one(c.R[0]) }},
		{name: "univariate coeff 0", want: stark.ErrStackingUnivariate, sp: func(s *stark.StackingProof) { s.UnivariateRoundCoeffs[0] = one(s.UnivariateRoundCoeffs[0]) }},
		{name: "univariate coeff 1", want: stark.ErrStackingSumcheck, sp: func(s *stark.StackingProof) { s.UnivariateRoundCoeffs[1] = one(s.UnivariateRoundCoeffs[1]) }},
		{name: "stacking round s(1)", want: stark.ErrStackingSumcheck, sp: func(s *stark.StackingProof) { s.SumcheckRoundPolys[0][0] = one(s.SumcheckRoundPolys[0][0]) }},
		{name: "stacking round s(2)", want: stark.ErrStackingSumcheck, sp: func(s *stark.StackingProof) {
			j := len(s.SumcheckRoundPolys) - 1
			s.SumcheckRoundPolys[j][1] = one(s.SumcheckRoundPolys[j][1])
		}},
		{name: "stacking opening", want: stark.ErrStackingSumcheck, sp: func(s *stark.StackingProof) { s.StackingOpenings[0][1] = one(s.StackingOpenings[0][1]) }},
		{name: "stacking opening shape", want: stark.ErrStackingShape, sp: func(s *stark.StackingProof) { s.StackingOpenings[0] = s.StackingOpenings[0][:1] }},
		{name: "whir sumcheck s(1)", want: stark.ErrWhir, wp: func(w *stark.WhirProof) { w.WhirSumcheckPolys[0][0] = one(w.WhirSumcheckPolys[0][0]) }},
		{name: "whir sumcheck s(2) last", want: stark.ErrWhir, wp: func(w *stark.WhirProof) {
			j := len(w.WhirSumcheckPolys) - 1
			w.WhirSumcheckPolys[j][1] = one(w.WhirSumcheckPolys[j][1])
		}},
		{name: "codeword commit", want: stark.ErrWhirQuery, wp: func(w *stark.WhirProof) { w.CodewordCommits[0][3]++ }},
		{name: "ood value", want: stark.ErrWhir, wp: func(w *stark.WhirProof) { w.OODValues[1] = one(w.OODValues[1]) }},
		{name: "initial merkle sibling", want: stark.ErrWhirQuery, wp: func(w *stark.WhirProof) { w.InitialRoundMerkleProofs[1][0][2][0]++ }},
		{name: "initial opened row", want: stark.ErrWhirQuery, wp: func(w *stark.WhirProof) {
			w.InitialRoundOpenedRows[0][1][3][0] = w.InitialRoundOpenedRows[0][1][3][0].Add(1)
		}},
		{name: "codeword opened value", want: stark.ErrWhirQuery, wp: func(w *stark.WhirProof) {
			w.CodewordOpenedValues[last][0][1] = one(w.CodewordOpenedValues[last][0][1])
		}},
		{name: "codeword merkle sibling", want: stark.ErrWhirQuery, wp: func(w *stark.WhirProof) { w.CodewordMerkleProofs[0][0][0][7]++ }},
		{name: "final poly", want: stark.ErrWhir, wp: func(w *stark.WhirProof) { w.FinalPoly[1] = one(w.FinalPoly[1]) }},
		{name: "final poly length", want: stark.ErrWhirShape, wp: func(w *stark.WhirProof) { w.FinalPoly = w.FinalPoly[:1] }},
		{name: "whir shape rows", want: stark.ErrWhirShape, wp: func(w *stark.WhirProof) { w.InitialRoundOpenedRows[2][0] = w.InitialRoundOpenedRows[2][0][:1] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, wp, claims := cloneStacking(sp0), cloneWhir(wp0), cloneClaims(f.claims)
			if tc.sp != nil {
				tc.sp(&sp)
			}
			if tc.wp != nil {
				tc.wp(&wp)
			}
			if tc.claims != nil {
				tc.claims(claims)
			}
			_, err := f.verify(&sp, &wp, claims)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The honest proof still verifies (the clones did not alias it).
	if _, err := f.verify(&sp0, &wp0, f.claims); err != nil {
		t.Fatalf("honest proof rejected after tampering: %v", err)
	}
}

func TestOpeningsPowTampering(t *testing.T) {
	p := testPreset(t)
	p.Whir.MuPowBits, p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits = 8, 8, 8
	f := newFixture(t, p, 8, 1)
	sp0, wp0, _ := f.prove(t)
	if _, err := f.verify(&sp0, &wp0, f.claims); err != nil {
		t.Fatalf("honest proof rejected: %v", err)
	}
	cases := []struct {
		name string
		want error
		wp   func(*stark.WhirProof)
	}{
		{"mu", stark.ErrWhirMuPow, func(w *stark.WhirProof) { w.MuPowWitness++ }},
		{"folding 0", stark.ErrWhirFoldingPow, func(w *stark.WhirProof) { w.FoldingPowWitnesses[0]++ }},
		{"folding last", stark.ErrWhirFoldingPow, func(w *stark.WhirProof) { w.FoldingPowWitnesses[len(w.FoldingPowWitnesses)-1]++ }},
		{"query 0", stark.ErrWhirQueryPow, func(w *stark.WhirProof) { w.QueryPhasePowWitnesses[0]++ }},
		{"query last", stark.ErrWhirQueryPow, func(w *stark.WhirProof) { w.QueryPhasePowWitnesses[len(w.QueryPhasePowWitnesses)-1]++ }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wp := cloneWhir(wp0)
			tc.wp(&wp)
			_, err := f.verify(&sp0, &wp, f.claims)
			if !errors.Is(err, tc.want) || !errors.Is(err, stark.ErrPow) || !errors.Is(err, stark.ErrWhir) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVerifyNeverPanics feeds the verifier randomly mutated and truncated proofs.
func TestVerifyNeverPanics(t *testing.T) {
	p := testPreset(t)
	f := newFixture(t, p, 9, 2)
	sp0, wp0, _ := f.prove(t)
	r := rand.New(rand.NewPCG(5, 5))
	for it := range 300 {
		sp, wp := cloneStacking(sp0), cloneWhir(wp0)
		switch it % 8 {
		case 0:
			sp.UnivariateRoundCoeffs = sp.UnivariateRoundCoeffs[:r.IntN(len(sp.UnivariateRoundCoeffs)+1)]
		case 1:
			sp.StackingOpenings = sp.StackingOpenings[:r.IntN(len(sp.StackingOpenings)+1)]
		case 2:
			wp.WhirSumcheckPolys = wp.WhirSumcheckPolys[:r.IntN(len(wp.WhirSumcheckPolys)+1)]
		case 3:
			c := r.IntN(len(wp.InitialRoundOpenedRows))
			q := r.IntN(len(wp.InitialRoundOpenedRows[c]))
			row := r.IntN(len(wp.InitialRoundOpenedRows[c][q]))
			wp.InitialRoundOpenedRows[c][q][row] = wp.InitialRoundOpenedRows[c][q][row][:r.IntN(len(wp.InitialRoundOpenedRows[c][q][row])+1)]
		case 4:
			i := r.IntN(len(wp.CodewordMerkleProofs))
			q := r.IntN(len(wp.CodewordMerkleProofs[i]))
			wp.CodewordMerkleProofs[i][q] = wp.CodewordMerkleProofs[i][q][:r.IntN(len(wp.CodewordMerkleProofs[i][q])+1)]
		case 5:
			i := r.IntN(len(wp.CodewordOpenedValues))
			wp.CodewordOpenedValues[i] = wp.CodewordOpenedValues[i][:r.IntN(len(wp.CodewordOpenedValues[i])+1)]
		case 6:
			wp.FinalPoly = append(wp.FinalPoly, starktest.RandFp4(r))
			wp.QueryPhasePowWitnesses = wp.QueryPhasePowWitnesses[:r.IntN(len(wp.QueryPhasePowWitnesses)+1)]
		case 7:
			wp.OODValues[r.IntN(len(wp.OODValues))] = starktest.RandFp4(r)
			wp.CodewordCommits = wp.CodewordCommits[:r.IntN(len(wp.CodewordCommits)+1)]
		}
		func() {
			defer func() {
				if e := recover(); e != nil {
					t.Fatalf("iteration %d: verifier panicked: %v", it, e)
				}
			}()
			_, _ = f.verify(&sp, &wp, f.claims)
		}()
	}
	// Bad inputs are errors, not panics.
	tr := startTranscript(1)
	if err := stark.VerifyOpenings(&tr, p, f.roots, f.layouts, &stark.OpeningClaims{}, &sp0, &wp0); !errors.Is(err, stark.ErrOpeningInput) {
		t.Fatalf("empty claims: %v", err)
	}
	if err := stark.VerifyOpenings(&tr, p, f.roots, f.layouts, f.claims, nil, nil); !errors.Is(err, stark.ErrStackingShape) {
		t.Fatalf("nil proof: %v", err)
	}
}

func deepEq(a, b any) bool { return reflect.DeepEqual(a, b) }

// TestStackingBatchWeights: the batch's weights are λ^(2k) and, with a rotation claim, λ^(2k+1)
// (k counted across commitments); Weight of one column equals Weights' entry.
func TestStackingBatchWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	lambda := field.Fp4{randFp(r), randFp(r), randFp(r), randFp(r)}
	b := &stark.StackingBatch{Lambda: lambda, NeedRot: [][]bool{{true, false, true}, {}, {false, true}}}
	eqW, rotW := b.Weights()
	k := 0
	for c, cols := range b.NeedRot {
		for i, rot := range cols {
			wantEq := lambda.Exp(2 * uint64(k))
			var wantRot field.Fp4
			if rot {
				wantRot = lambda.Exp(2*uint64(k) + 1)
			}
			if eqW[c][i] != wantEq || rotW[c][i] != wantRot {
				t.Fatalf("column %d of commitment %d: weights %v %v, want %v %v", i, c, eqW[c][i], rotW[c][i], wantEq, wantRot)
			}
			if eq, rw := b.Weight(c, i); eq != wantEq || rw != wantRot {
				t.Fatalf("Weight(%d, %d) = %v %v, want %v %v", c, i, eq, rw, wantEq, wantRot)
			}
			k++
		}
	}
}
