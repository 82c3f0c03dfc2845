package stark

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Stacked opening reduction (spec B §5, §6.3; OpenVM prover/stacked_reduction.rs,
// verifier/stacked_reduction.rs).

// stackingClaim is one column claim in the global claim order of spec B §5.2.
type stackingClaim struct {
	t, tRot field.Fp4
	needRot bool
}

// checkStackingParams rejects parameters this implementation cannot handle.
func checkStackingParams(p params.SystemParams) error {
	if p.LSkip < 0 || p.NStack < 0 || p.LSkip+p.NStack > 27 {
		return fmt.Errorf("%w: l_skip=%d n_stack=%d", ErrOpeningInput, p.LSkip, p.NStack)
	}
	return nil
}

// flattenClaims checks the claims against the layouts and returns them in claim order, per
// commitment (same indexing as layout.Cols).
func flattenClaims(p params.SystemParams, layouts []*StackedLayout, claims *OpeningClaims) ([][]stackingClaim, error) {
	out := make([][]stackingClaim, len(layouts))
	err := walkClaims(p, layouts, claims, func(c int, cols []StackedColumn, cc CommitClaims) {
		out[c] = make([]stackingClaim, len(cols))
		for i, sc := range cols {
			cl := stackingClaim{t: cc.Values[sc.Mat][sc.Col], needRot: cc.NeedRot[sc.Mat]}
			if cl.needRot {
				cl.tRot = cc.Rot[sc.Mat][sc.Col]
			}
			out[c][i] = cl
		}
	})
	return out, err
}

// rotationFlags checks the claims as flattenClaims does and returns whether each claim in claim
// order has a rotation claim ([c][i]): all the prover needs of the flat claims (the device
// weighs them), without copying 2 × 2,633 Fp4 values on the critical path.
func rotationFlags(p params.SystemParams, layouts []*StackedLayout, claims *OpeningClaims) ([][]bool, error) {
	flags := make([][]bool, len(layouts))
	err := walkClaims(p, layouts, claims, func(c int, cols []StackedColumn, cc CommitClaims) {
		flags[c] = make([]bool, len(cols))
		for i, sc := range cols {
			flags[c][i] = cc.NeedRot[sc.Mat]
		}
	})
	return flags, err
}

// walkClaims checks the claims against the layouts (each column's claims present, slices in
// range, r long enough) and calls visit for each commitment once its columns passed.
func walkClaims(p params.SystemParams, layouts []*StackedLayout, claims *OpeningClaims, visit func(c int, cols []StackedColumn, cc CommitClaims)) error {
	if err := checkStackingParams(p); err != nil {
		return err
	}
	if claims == nil || len(claims.Commits) != len(layouts) || len(layouts) == 0 {
		return fmt.Errorf("%w: claims for %d commitments expected", ErrOpeningInput, len(layouts))
	}
	m := p.LSkip + p.NStack
	maxN := 0
	for c, l := range layouts {
		if l == nil || l.LSkip != p.LSkip || l.LogHeight != m {
			return fmt.Errorf("%w: layout %d does not match the parameters", ErrOpeningInput, c)
		}
		cc := claims.Commits[c]
		nm := l.NumMatrices()
		if len(cc.NeedRot) != nm || len(cc.Values) != nm {
			return fmt.Errorf("%w: commitment %d: claims for %d matrices expected", ErrOpeningInput, c, nm)
		}
		for _, sc := range l.Cols {
			if sc.Mat < 0 || sc.Mat >= nm || sc.Col < 0 || sc.Col >= len(cc.Values[sc.Mat]) ||
				(cc.NeedRot[sc.Mat] && (sc.Mat >= len(cc.Rot) || sc.Col >= len(cc.Rot[sc.Mat]))) {
				return fmt.Errorf("%w: commitment %d: no claim for matrix %d column %d", ErrOpeningInput, c, sc.Mat, sc.Col)
			}
			if sc.Slice.Col < 0 || sc.Slice.Col >= l.Width || sc.Slice.LogHeight < 0 || sc.Slice.LogHeight > m {
				return fmt.Errorf("%w: commitment %d: bad slice", ErrOpeningInput, c)
			}
			maxN = max(maxN, sc.Slice.LogHeight-p.LSkip)
		}
		for mat, d := range l.Dims {
			if mat < len(cc.Values) && len(cc.Values[mat]) != d.Width {
				return fmt.Errorf("%w: commitment %d matrix %d: %d claims for width %d", ErrOpeningInput, c, mat, len(cc.Values[mat]), d.Width)
			}
		}
		visit(c, l.Cols, cc)
	}
	if len(claims.R) < maxN+1 {
		return fmt.Errorf("%w: point r has %d coordinates, need %d", ErrOpeningInput, len(claims.R), maxN+1)
	}
	return nil
}

// batchedClaim is Σ_k λ^(2k)(t_k + λ·t_k^rot) over flat's claims in order.
func batchedClaim(flat [][]stackingClaim, lambda field.Fp4) field.Fp4 {
	lsq := lambda.Square()
	pw := field.Fp4One
	var claim field.Fp4
	for _, cols := range flat {
		for _, cl := range cols {
			claim = claim.Add(pw.Mul(cl.t.Add(lambda.Mul(cl.tRot))))
			pw = pw.Mul(lsq)
		}
	}
	return claim
}

// ProveStacking runs the stacked opening reduction prover (spec B §5.4) on sp, a prover of
// commits at claims.R (StackingBackend.NewStackingProver), and returns the proof and the point
// u = (u_0; u_1..u_{n_stack}). It releases sp.
func ProveStacking(sp StackingProver, tr *transcript.Transcript, p params.SystemParams, commits []Committed, claims *OpeningClaims) (StackingProof, []field.Fp4, error) {
	defer sp.Release()
	layouts := make([]*StackedLayout, len(commits))
	for i, c := range commits {
		layouts[i] = c.Layout()
	}
	needRot, err := rotationFlags(p, layouts, claims)
	if err != nil {
		return StackingProof{}, nil, err
	}
	// λ and the rotation flags: the backend computes the weights (the batched claim is the
	// verifier's).
	batch := &StackingBatch{NeedRot: needRot, Lambda: tr.SampleExt()}
	var proof StackingProof
	// A backend that runs the rounds with the transcript on the device returns them all at once
	// (with round 0 where it runs that too); the loop replays them through tr, checking each
	// sample.
	var devPolys [][2]field.Fp4
	var devU []field.Fp4
	var devU0 *field.Fp4
	dr, onDevice := sp.(StackingDeviceRounds)
	if fr, ok := sp.(StackingDeviceFirstRound); ok && p.NStack > 0 {
		var u0 field.Fp4
		switch proof.UnivariateRoundCoeffs, u0, devPolys, devU, err = fr.ProveFirstRounds(batch, tr, p.NStack); {
		case errors.Is(err, ErrDeviceRoundsUnsupported):
		case err != nil:
			return StackingProof{}, nil, err
		case len(proof.UnivariateRoundCoeffs) != 2<<p.LSkip-1:
			return StackingProof{}, nil, fmt.Errorf("%w: %d coefficients of round 0 from the device, want %d", ErrDeviceTranscript, len(proof.UnivariateRoundCoeffs), 2<<p.LSkip-1)
		default:
			devU0, onDevice = &u0, true
		}
	}
	if devU0 == nil {
		if proof.UnivariateRoundCoeffs, err = sp.UnivariateRound(batch); err != nil {
			return StackingProof{}, nil, err
		}
	}
	tr.ObserveSlice(flattenExt(proof.UnivariateRoundCoeffs)) // as ObserveExt of each, in one absorb
	u := make([]field.Fp4, p.NStack+1)
	u[0] = tr.SampleExt()
	if devU0 != nil {
		if *devU0 != u[0] {
			return StackingProof{}, nil, fmt.Errorf("%w: stacking round 0's bound value: %v on the device, %v here", ErrDeviceTranscript, *devU0, u[0])
		}
	} else {
		if err := sp.BindUnivariate(u[0]); err != nil {
			return StackingProof{}, nil, err
		}
		if onDevice && p.NStack > 0 {
			if devPolys, devU, err = dr.ProveRounds(tr, p.NStack); err != nil {
				return StackingProof{}, nil, err
			}
		}
	}
	proof.SumcheckRoundPolys = make([][2]field.Fp4, p.NStack)
	if onDevice && p.NStack > 0 && (len(devPolys) != p.NStack || len(devU) != p.NStack) {
		return StackingProof{}, nil, fmt.Errorf("%w: %d rounds' sums and %d bound values from the device, want %d", ErrDeviceTranscript, len(devPolys), len(devU), p.NStack)
	}
	for j := 1; j <= p.NStack; j++ {
		var s1, s2 field.Fp4
		if onDevice {
			s1, s2 = devPolys[j-1][0], devPolys[j-1][1]
		} else if s1, s2, err = sp.Round(); err != nil {
			return StackingProof{}, nil, err
		}
		tr.ObserveExt(s1)
		tr.ObserveExt(s2)
		proof.SumcheckRoundPolys[j-1] = [2]field.Fp4{s1, s2}
		u[j] = tr.SampleExt()
		if onDevice {
			if devU[j-1] != u[j] {
				return StackingProof{}, nil, fmt.Errorf("%w: stacking round %d's bound value: %v on the device, %v here", ErrDeviceTranscript, j, devU[j-1], u[j])
			}
		} else if err := sp.Bind(u[j]); err != nil {
			return StackingProof{}, nil, err
		}
	}
	if proof.StackingOpenings, err = sp.Openings(); err != nil {
		return StackingProof{}, nil, err
	}
	var opened []field.Fp4
	for _, col := range proof.StackingOpenings {
		opened = append(opened, col...)
	}
	tr.ObserveSlice(flattenExt(opened)) // as ObserveExt of each, in one absorb
	return proof, u, nil
}

// VerifyStacking is verify_stacked_reduction (spec B §6.3). It returns u = (u_0; u_1..u_{n_stack}).
func VerifyStacking(tr *transcript.Transcript, p params.SystemParams, layouts []*StackedLayout, claims *OpeningClaims, proof *StackingProof) ([]field.Fp4, error) {
	flat, err := flattenClaims(p, layouts, claims)
	if err != nil {
		return nil, err
	}
	widths := make([]int, len(layouts))
	for c, l := range layouts {
		widths[c] = l.Width
	}
	if err := CheckStackingShape(p, widths, proof); err != nil {
		return nil, stageShapeError(ErrStackingShape, err)
	}
	n := 1 << p.LSkip
	needRot, err := rotationFlags(p, layouts, claims)
	if err != nil {
		return nil, err
	}
	batch := &StackingBatch{Lambda: tr.SampleExt(), NeedRot: needRot}
	claim := batchedClaim(flat, batch.Lambda)
	eqW, rotW := batch.Weights()

	var sum field.Fp4
	for j := 0; j < len(proof.UnivariateRoundCoeffs); j += n {
		sum = sum.Add(proof.UnivariateRoundCoeffs[j])
	}
	if sum.MulBase(field.Fp(n)) != claim {
		return nil, ErrStackingUnivariate
	}
	for _, c := range proof.UnivariateRoundCoeffs {
		tr.ObserveExt(c)
	}
	u := make([]field.Fp4, p.NStack+1)
	u[0] = tr.SampleExt()
	cur := Horner(proof.UnivariateRoundCoeffs, u[0])
	for j := 1; j <= p.NStack; j++ {
		s1, s2 := proof.SumcheckRoundPolys[j-1][0], proof.SumcheckRoundPolys[j-1][1]
		tr.ObserveExt(s1)
		tr.ObserveExt(s2)
		u[j] = tr.SampleExt()
		cur = InterpolateQuadratic12(cur, s1, s2, u[j])
	}

	r := claims.R
	var final field.Fp4
	for c, l := range layouts {
		coeffs := make([]field.Fp4, l.Width)
		for i, sc := range l.Cols {
			s := sc.Slice
			nn := s.LogHeight - p.LSkip
			nl := max(nn, 0)
			b := make([]field.Fp4, 0, p.NStack-nl)
			for j := p.LSkip + nl; j < p.LSkip+p.NStack; j++ {
				b = append(b, field.Lift(field.Fp((s.Row>>j)&1)))
			}
			eqm := EqMLE(u[nl+1:], b)
			ind := InUni(p.LSkip, nn, u[0])
			lp, rs := p.LSkip, r[:nl+1]
			if nn < 0 {
				lp, rs = p.LSkip+nn, []field.Fp4{ExpPow2(r[0], -nn)}
			}
			batched := eqW[c][i].Mul(EqPrism(lp, u[:nl+1], rs))
			if flat[c][i].needRot {
				batched = batched.Add(rotW[c][i].Mul(RotKernelPrism(lp, u[:nl+1], rs)))
			}
			coeffs[s.Col] = coeffs[s.Col].Add(eqm.Mul(batched).Mul(ind))
		}
		for m, q := range proof.StackingOpenings[c] {
			tr.ObserveExt(q)
			final = final.Add(coeffs[m].Mul(q))
		}
	}
	if final != cur {
		return nil, ErrStackingSumcheck
	}
	return u, nil
}

// InterpolateQuadratic12 evaluates at x the quadratic s with s(0) = claim − s(1), s(1), s(2).
func InterpolateQuadratic12(claim, s1, s2, x field.Fp4) field.Fp4 {
	return InterpolateQuadratic012(claim.Sub(s1), s1, s2, x)
}
