package stark

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Batch constraint sumcheck (spec B §4, §6.2 steps 4–10; OpenVM prover/logup_zerocheck/mod.rs
// prove_zerocheck_and_logup from λ_c on, verifier/batch_constraints.rs verify_zerocheck_and_logup
// from λ_c on).

// Errors of the batch constraint sumcheck. Every verifier error wraps ErrBatchConstraint.
var (
	ErrBatchConstraint = errors.New("stark: batch constraint sumcheck")
	// ErrBatchConstraintInput: the inputs (parameters, keys, traces, GKR outcome) are inconsistent.
	ErrBatchConstraintInput = fmt.Errorf("%w: invalid input", ErrBatchConstraint)
	// ErrBatchConstraintShape: a list of the proof has the wrong length.
	ErrBatchConstraintShape = fmt.Errorf("%w: proof shape", ErrBatchConstraint)
	// ErrBatchConstraintNumerator: p̂(ξ) − Σ_T sum_{p,T} ≠ 0 (GkrNumeratorMismatch).
	ErrBatchConstraintNumerator = fmt.Errorf("%w: GKR numerator claim does not match the per-trace terms", ErrBatchConstraint)
	// ErrBatchConstraintDenominator: q̂(ξ) − Σ_T sum_{q,T} ≠ α (GkrDenominatorMismatch).
	ErrBatchConstraintDenominator = fmt.Errorf("%w: GKR denominator claim does not match the per-trace terms", ErrBatchConstraint)
	// ErrBatchConstraintSumClaim: N·Σ_{j≡0 mod N} a_j ≠ the batched claim (SumClaimMismatch).
	ErrBatchConstraintSumClaim = fmt.Errorf("%w: s_0 sum over the skip domain does not match the batched claim", ErrBatchConstraint)
	// ErrBatchConstraintFinal: the final sumcheck value does not match the batched polynomial
	// evaluated from the column openings (InconsistentClaims).
	ErrBatchConstraintFinal = fmt.Errorf("%w: final evaluation does not match the column openings", ErrBatchConstraint)
)

// ---------------------------------------------------------------------------------------------
// Constraint programs (internal/constraints): compiled once per verifying key (Keygen), or here
// for inputs built without one.

// programFor returns prog, or compiles vk's program when prog is nil.
func programFor(vk *air.VerifyingKey, prog *constraints.Program) (*constraints.Program, error) {
	if prog != nil {
		return prog, nil
	}
	pg, err := constraints.Compile(vk, constraints.All)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBatchConstraintInput, err)
	}
	return pg, nil
}

// SelectorsAt returns (is_first, is_last) of a trace with n = log_height − l_skip at the prism
// point r = (r_0; r_1..r_ñ) (spec B §2.3; short traces: l' = l+n, point r_0^(2^−n), no cube).
func SelectorsAt(lSkip, n int, r []field.Fp4) (isFirst, isLast field.Fp4) {
	l := lSkip
	z := r[0]
	var cube []field.Fp4
	if n < 0 {
		l = lSkip + n
		z = ExpPow2(r[0], -n)
	} else {
		cube = r[1 : 1+n]
	}
	isFirst = EqUniAtOne(l, z)
	isLast = EqUniAtOne(l, z.MulBase(field.TwoAdicGenerator(l)))
	for _, x := range cube {
		isFirst = isFirst.Mul(field.Fp4One.Sub(x))
		isLast = isLast.Mul(x)
	}
	return isFirst, isLast
}

// ---------------------------------------------------------------------------------------------
// Shapes shared by prover and verifier.

type bcShape struct {
	lSkip, n, d   int
	nT, nLift     []int
	nMax, nLogup  int
	totalInteract uint64
	progs         []*constraints.Program
	publics       [][]field.Fp
	eq3b          [][]field.Fp4
	norm          []field.Fp
}

// newBCShape checks the parameters, keys and heights (trace order) against the GKR outcome and
// computes the per-trace data of spec B §3.3, §3.6.
func newBCShape(p params.SystemParams, vks []*air.VerifyingKey, progs []*constraints.Program, publics [][]field.Fp, logHeights []int, g *GkrOutcome) (*bcShape, error) {
	if p.LSkip < 0 || p.LSkip > 20 || p.NStack < 0 || p.LSkip+p.NStack > 27 {
		return nil, fmt.Errorf("%w: l_skip=%d n_stack=%d", ErrBatchConstraintInput, p.LSkip, p.NStack)
	}
	if p.MaxConstraintDegree < 1 || p.MaxConstraintDegree > 64 {
		return nil, fmt.Errorf("%w: max_constraint_degree %d", ErrBatchConstraintInput, p.MaxConstraintDegree)
	}
	if len(vks) == 0 {
		return nil, fmt.Errorf("%w: no present trace", ErrBatchConstraintInput)
	}
	if g == nil {
		return nil, fmt.Errorf("%w: missing GKR outcome", ErrBatchConstraintInput)
	}
	sh := &bcShape{lSkip: p.LSkip, n: 1 << p.LSkip, d: p.MaxConstraintDegree}
	T := len(vks)
	sh.nT, sh.nLift = make([]int, T), make([]int, T)
	sh.progs = make([]*constraints.Program, T)
	sh.publics = publics
	sh.norm = make([]field.Fp, T)
	for t := 0; t < T; t++ {
		h := logHeights[t]
		if h < 0 || h > p.LSkip+p.NStack {
			return nil, fmt.Errorf("%w: trace %d log height %d", ErrBatchConstraintInput, t, h)
		}
		if t > 0 && h > logHeights[t-1] {
			return nil, fmt.Errorf("%w: traces not sorted by height", ErrBatchConstraintInput)
		}
		if vks[t] == nil || vks[t].Width.CommonMain <= 0 {
			return nil, fmt.Errorf("%w: trace %d has no common main columns", ErrBatchConstraintInput, t)
		}
		pg, err := programFor(vks[t], progs[t])
		if err != nil {
			return nil, fmt.Errorf("trace %d: %w", t, err)
		}
		if len(publics[t]) != pg.NumPublic {
			return nil, fmt.Errorf("%w: trace %d has %d public values, want %d", ErrBatchConstraintInput, t, len(publics[t]), pg.NumPublic)
		}
		if int(vks[t].MaxConstraintDegree) > sh.d {
			return nil, fmt.Errorf("%w: trace %d degree %d > %d", ErrBatchConstraintInput, t, vks[t].MaxConstraintDegree, sh.d)
		}
		sh.progs[t] = pg
		sh.nT[t] = h - p.LSkip
		sh.nLift[t] = max(h-p.LSkip, 0)
		sh.nMax = max(sh.nMax, sh.nLift[t])
		sh.norm[t] = InvPow2(max(-sh.nT[t], 0))
		sh.totalInteract += uint64(len(pg.Interactions)) << (p.LSkip + sh.nLift[t])
	}
	if sh.totalInteract != 0 {
		sh.nLogup = bits.Len64(sh.totalInteract) - p.LSkip
	}
	if g.NLogup != sh.nLogup {
		return nil, fmt.Errorf("%w: GKR outcome has n_logup %d, want %d", ErrBatchConstraintInput, g.NLogup, sh.nLogup)
	}
	if len(g.Xi) != p.LSkip+max(sh.nMax, sh.nLogup) {
		return nil, fmt.Errorf("%w: ξ has %d coordinates, want %d", ErrBatchConstraintInput, len(g.Xi), p.LSkip+max(sh.nMax, sh.nLogup))
	}
	// eq3b (verify_zerocheck_and_logup step 7): walk the interactions layout.
	sh.eq3b = make([][]field.Fp4, T)
	var stacked uint64
	for t, pg := range sh.progs {
		k := len(pg.Interactions)
		sh.eq3b[t] = make([]field.Fp4, k)
		shift := p.LSkip + sh.nLift[t]
		nb := sh.nLogup - sh.nLift[t]
		for i := 0; i < k; i++ {
			b := stacked >> shift
			e := field.Fp4One
			for j := 0; j < nb; j++ {
				x := g.Xi[shift+j]
				if (b>>j)&1 == 1 {
					e = e.Mul(x)
				} else {
					e = e.Mul(field.Fp4One.Sub(x))
				}
			}
			sh.eq3b[t][i] = e
			stacked += 1 << shift
		}
	}
	return sh, nil
}

// univariateLen is (d+1)(N−1)+1, the number of s_0 coefficients.
func (sh *bcShape) univariateLen() int { return (sh.d+1)*(sh.n-1) + 1 }

// eqSharpCoeffs returns the coefficients of eq♯(ξ_0..ξ_{l−1}; Z) (degree < N).
func eqSharpCoeffs(lSkip int, xi []field.Fp4) []field.Fp4 {
	n := 1 << lSkip
	table := EvalsEqHypercube(xi)
	out := make([]field.Fp4, n)
	omega := field.TwoAdicGenerator(lSkip)
	w := field.One
	for j := 0; j < n; j++ {
		lag := EqUniCoeffs(lSkip, field.Lift(w))
		for i := range out {
			out[i] = out[i].Add(table[j].Mul(lag[i]))
		}
		w = w.Mul(omega)
	}
	return out
}

// eqSharpAt is eval_eq_sharp_uni: Σ_j eq(ξ, bits(j))·eq_D(z, ω^j).
func eqSharpAt(lSkip int, xi []field.Fp4, z field.Fp4) field.Fp4 {
	table := EvalsEqHypercube(xi)
	omega := field.TwoAdicGenerator(lSkip)
	w := field.One
	var res field.Fp4
	for j := range table {
		res = res.Add(EqUni(lSkip, z, field.Lift(w)).Mul(table[j]))
		w = w.Mul(omega)
	}
	return res
}

// polyMul returns a·b in coefficient form.
func polyMul(a, b []field.Fp4) []field.Fp4 {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	out := make([]field.Fp4, len(a)+len(b)-1)
	for i, x := range a {
		if x.IsZero() {
			continue
		}
		for j, y := range b {
			out[i+j] = out[i+j].Add(x.Mul(y))
		}
	}
	return out
}

// sumOverD is Σ_{z∈D} S(z) = N·Σ_{j≡0 mod N} a_j.
func sumOverD(a []field.Fp4, n int) field.Fp4 {
	var s field.Fp4
	for j := 0; j < len(a); j += n {
		s = s.Add(a[j])
	}
	return s.MulBase(field.Fp(uint32(n)))
}

// sumOverDProduct is sumOverD(polyMul(a, b), n) from the product's coefficients at multiples of
// n alone.
func sumOverDProduct(a, b []field.Fp4, n int) field.Fp4 {
	var s field.Fp4
	if len(a) == 0 || len(b) == 0 {
		return s
	}
	for k := 0; k < len(a)+len(b)-1; k += n {
		for i := max(0, k-len(b)+1); i <= min(k, len(a)-1); i++ {
			if !a[i].IsZero() {
				s = s.Add(a[i].Mul(b[k-i]))
			}
		}
	}
	return s.MulBase(field.Fp(uint32(n)))
}

// InterpolateAt evaluates the polynomial of degree < len(evals) through (i, evals[i]) at r.
func InterpolateAt(evals []field.Fp4, r field.Fp4) field.Fp4 {
	s := len(evals) - 1
	fact := make([]field.Fp, s+1)
	fact[0] = field.One
	for i := 1; i <= s; i++ {
		fact[i] = fact[i-1].Mul(field.Fp(uint32(i)))
	}
	invFact := make([]field.Fp, s+1)
	field.BatchInverse(invFact, fact)
	pre := make([]field.Fp4, s+1)
	suf := make([]field.Fp4, s+1)
	pre[0], suf[0] = field.Fp4One, field.Fp4One
	for i := 0; i < s; i++ {
		pre[i+1] = pre[i].Mul(r.Sub(field.Lift(field.Fp(uint32(i)))))
		suf[i+1] = suf[i].Mul(field.Lift(field.Fp(uint32(s - i))).Sub(r))
	}
	var acc field.Fp4
	for i := 0; i <= s; i++ {
		acc = acc.Add(evals[i].Mul(pre[i]).Mul(suf[s-i]).MulBase(invFact[i].Mul(invFact[s-i])))
	}
	return acc
}

// eqAtSmall is eq(ξ, X) = (1 − ξ)(1 − X) + ξ·X for a small integer X.
func eqAtSmall(xi field.Fp4, x int) field.Fp4 {
	fx := field.Lift(field.Fp(uint32(x)))
	return field.Fp4One.Sub(xi).Mul(field.Fp4One.Sub(fx)).Add(xi.Mul(fx))
}

// traceEval is μ-weighted contribution of one trace at its full point (spec B §6.2 step 10):
// μ^{2T}·eqs·norm·Num + μ^{2T+1}·eqs·Den + μ^{2T_count+T}·eqz·C.
func (sh *bcShape) traceEval(t int, openings [][]field.Fp4, r []field.Fp4, w *constraints.Weights, muPows []field.Fp4, eqz, eqs field.Fp4) field.Fp4 {
	pg := sh.progs[t]
	first, last := SelectorsAt(sh.lSkip, sh.nT[t], r)
	c, _ := pg.CombineExt(w, pg.OpeningSlots(openings, first, last), sh.publics[t], nil)
	T := len(sh.progs)
	return muPows[2*t].Mul(eqs).Mul(c.Num.MulBase(sh.norm[t])).
		Add(muPows[2*t+1].Mul(eqs).Mul(c.Den)).
		Add(muPows[2*T+t].Mul(eqz).Mul(c.Zc))
}

// observeOpenings observes the column openings (B7, B8): common mains of all traces first, then
// the other parts trace by trace; a zero stands in for a missing rotation.
// The values go to the transcript in one ObserveSlice: keccakf-1024 has 21,064 of them.
func (sh *bcShape) observeOpenings(tr *transcript.Transcript, openings [][][]field.Fp4) {
	n := 0
	for t := range openings {
		for _, part := range openings[t] {
			n += 8 * len(part) // at most: a zero stands in for each missing rotation
		}
	}
	flat := make([]field.Fp, 0, n)
	obs := func(t int, vals []field.Fp4) {
		if sh.progs[t].NeedRot {
			for _, v := range vals {
				flat = append(flat, v[:]...)
			}
			return
		}
		for _, v := range vals {
			flat = append(append(flat, v[:]...), 0, 0, 0, 0)
		}
	}
	for t := range openings {
		obs(t, openings[t][0])
	}
	for t := range openings {
		for _, part := range openings[t][1:] {
			obs(t, part)
		}
	}
	tr.ObserveSlice(flat)
}

// ---------------------------------------------------------------------------------------------
// Prover.

// checkAirInputs validates the traces against their keys.
func checkAirInputs(traces []*AirInput) (vks []*air.VerifyingKey, progs []*constraints.Program, publics [][]field.Fp, logHeights []int, err error) {
	for t, in := range traces {
		if in == nil || in.VK == nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: trace %d missing", ErrBatchConstraintInput, t)
		}
		w := in.VK.Width
		if in.Common == nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: trace %d has no common main trace", ErrBatchConstraintInput, t)
		}
		h := in.Height()
		if h < 1 || h&(h-1) != 0 {
			return nil, nil, nil, nil, fmt.Errorf("%w: trace %d height %d", ErrBatchConstraintInput, t, h)
		}
		check := func(m Trace, width int, what string) error {
			if m.Width() != width || m.Height() != h {
				return fmt.Errorf("%w: trace %d %s is %d×%d, want %d×%d", ErrBatchConstraintInput, t, what, m.Width(), m.Height(), width, h)
			}
			return nil
		}
		if err := check(in.Common, w.CommonMain, "common main"); err != nil {
			return nil, nil, nil, nil, err
		}
		if w.HasPreprocessed() != (in.Preprocessed != nil) {
			return nil, nil, nil, nil, fmt.Errorf("%w: trace %d preprocessed trace presence", ErrBatchConstraintInput, t)
		}
		if in.Preprocessed != nil {
			if err := check(in.Preprocessed, w.Preprocessed, "preprocessed"); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		if len(in.Cached) != len(w.CachedMains) {
			return nil, nil, nil, nil, fmt.Errorf("%w: trace %d has %d cached parts, want %d", ErrBatchConstraintInput, t, len(in.Cached), len(w.CachedMains))
		}
		for j := range in.Cached {
			if err := check(in.Cached[j], w.CachedMains[j], fmt.Sprintf("cached part %d", j)); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		vks = append(vks, in.VK)
		progs = append(progs, in.Program)
		publics = append(publics, in.Public)
		logHeights = append(logHeights, in.LogHeight())
	}
	return vks, progs, publics, logHeights, nil
}

// ProveBatchConstraints runs the batch constraint sumcheck prover (spec B §4.2 B1–B8) on traces
// given in trace order, after the GKR stage (g.Xi already extended to l + n_global). It returns
// the proof part and the opening claims for the stacked reduction (ColumnOpeningsToClaims).
// beside, when not nil, runs beside the transcript's absorb of the column openings, after the
// backend's constraint prover is released, with the sumcheck point r (the claims' R): the next
// stage's work that does not wait for the transcript.
func ProveBatchConstraints(be ConstraintBackend, tr *transcript.Transcript, p params.SystemParams, traces []*AirInput, g *GkrOutcome, beside func(r []field.Fp4)) (BatchConstraintProof, *OpeningClaims, error) {
	vks, progs, publics, logHeights, err := checkAirInputs(traces)
	if err != nil {
		return BatchConstraintProof{}, nil, err
	}
	sh, err := newBCShape(p, vks, progs, publics, logHeights, g)
	if err != nil {
		return BatchConstraintProof{}, nil, err
	}
	T, l, n, d := len(traces), sh.lSkip, sh.n, sh.d
	xi := g.Xi

	lambda := tr.SampleExt() // B1
	// The backend computes the weights where it needs them (a goroutine started here ran up to
	// 0.3 ms late on a GPU host, and round 0 waited for it); this stage's own copy, read only
	// after round 0, is computed beside the device's round 0 with the host's part of it that
	// depends on ξ alone.
	cp, err := be.NewConstraintProver(p, traces, &ConstraintChallenges{Lambda: lambda, Beta: g.Beta, Xi: xi, Eq3b: sh.eq3b, Programs: sh.progs})
	if err != nil {
		return BatchConstraintProof{}, nil, err
	}
	released := false
	defer func() {
		if !released {
			cp.Release()
		}
	}()

	// Round 0 (§4.3).
	var eqSharp, eqUni0 []field.Fp4
	weights := make([]*constraints.Weights, T)
	var werr error
	eqDone := make(chan struct{})
	go func() {
		defer close(eqDone)
		eqSharp, eqUni0 = eqSharpCoeffs(l, xi[:l]), EqUniCoeffs(l, xi[0])
		for t, pg := range sh.progs {
			if weights[t], werr = pg.Weights(lambda, g.Beta, sh.eq3b[t]); werr != nil {
				return
			}
		}
	}()
	polys, err := cp.UnivariateRound()
	<-eqDone
	if err == nil {
		err = werr
	}
	if err != nil {
		return BatchConstraintProof{}, nil, err
	}
	plen := d*(n-1) + 1
	if len(polys) != T {
		return BatchConstraintProof{}, nil, fmt.Errorf("%w: backend returned %d round-0 triples", ErrBatchConstraintInput, len(polys))
	}
	for t := range polys {
		if len(polys[t].Zc) != plen || len(polys[t].Num) != plen || len(polys[t].Den) != plen {
			return BatchConstraintProof{}, nil, fmt.Errorf("%w: backend round-0 polynomial length", ErrBatchConstraintInput)
		}
	}
	proof := BatchConstraintProof{
		NumeratorTermPerAir:   make([]field.Fp4, T),
		DenominatorTermPerAir: make([]field.Fp4, T),
	}
	// The per-AIR terms are sums over D of num·eq♯ and den·eq♯: only the products' coefficients
	// at multiples of N (sumOverDProduct); s0 then multiplies by eq♯ once, the μ-batched sum of
	// the numerators and denominators (the same coefficients as the sum of the products).
	nums := make([][]field.Fp4, T)
	for t := range polys {
		num := make([]field.Fp4, plen)
		for i, c := range polys[t].Num {
			num[i] = c.MulBase(sh.norm[t])
		}
		nums[t] = num
		proof.NumeratorTermPerAir[t] = sumOverDProduct(num, eqSharp, n)
		proof.DenominatorTermPerAir[t] = sumOverDProduct(polys[t].Den, eqSharp, n)
		tr.ObserveExt(proof.NumeratorTermPerAir[t]) // B2
		tr.ObserveExt(proof.DenominatorTermPerAir[t])
	}
	mu := tr.SampleExt() // B3
	muPows := field.PowersFp4(mu, 3*T)
	s0 := make([]field.Fp4, sh.univariateLen())
	logup := make([]field.Fp4, plen)
	zcBatch := make([]field.Fp4, plen)
	for t := range polys {
		for i := range plen {
			// polyMul skips zeros: an AIR without interactions has Num = Den = 0.
			if c := nums[t][i]; !c.IsZero() {
				logup[i] = logup[i].Add(muPows[2*t].Mul(c))
			}
			if c := polys[t].Den[i]; !c.IsZero() {
				logup[i] = logup[i].Add(muPows[2*t+1].Mul(c))
			}
			zcBatch[i] = zcBatch[i].Add(muPows[2*T+t].Mul(polys[t].Zc[i]))
		}
	}
	for i, c := range polyMul(logup, eqSharp) {
		s0[i] = s0[i].Add(c)
	}
	for i, c := range polyMul(eqUni0, zcBatch) {
		s0[i] = s0[i].Add(c)
	}
	tr.ObserveSlice(flattenExt(s0)) // B4 (as ObserveExt of each, in one absorb)
	proof.UnivariateRoundCoeffs = s0
	r := make([]field.Fp4, 1, sh.nMax+1)
	r[0] = tr.SampleExt() // B5
	if err := cp.BindUnivariate(r[0]); err != nil {
		return BatchConstraintProof{}, nil, err
	}

	// Rounds 1..n_max (§4.4). tails[t] is trace t's μ-weighted contribution at its full point
	// times Π_{ñ_T < i < j} r_i, kept once its variables are exhausted.
	eqz := EqUni(l, xi[0], r[0])
	eqs := eqSharpAt(l, xi[:l], r[0])
	openings := make([][][]field.Fp4, T)
	tails := make([]field.Fp4, T)
	exhaust := func(j int) error {
		for t := range traces {
			if sh.nLift[t] != j {
				continue
			}
			o, err := cp.Openings(t)
			if err != nil {
				return err
			}
			if err := sh.progs[t].CheckOpeningsShape(o); err != nil {
				return fmt.Errorf("%w: backend openings of trace %d: %v", ErrBatchConstraintInput, t, err)
			}
			openings[t] = o
			if j < sh.nMax { // a tail is read only by later rounds
				tails[t] = sh.traceEval(t, o, r, weights[t], muPows, eqz, eqs)
			}
		}
		return nil
	}
	if err := exhaust(0); err != nil {
		return BatchConstraintProof{}, nil, err
	}
	proof.SumcheckRoundPolys = make([][]field.Fp4, sh.nMax)
	// finish records round j's s_j (B6), samples r_j (checked against the device's when dev is
	// not nil) and moves the tails and eq factors to it.
	finish := func(j int, s []field.Fp4, dev *field.Fp4) (field.Fp4, error) {
		tr.ObserveSlice(flattenExt(s)) // B6
		proof.SumcheckRoundPolys[j-1] = s
		rj := tr.SampleExt()
		if dev != nil && *dev != rj {
			return rj, fmt.Errorf("%w: constraint round %d's challenge: %v on the device, %v here", ErrDeviceTranscript, j, *dev, rj)
		}
		r = append(r, rj)
		for t := range traces {
			if sh.nLift[t] < j {
				tails[t] = tails[t].Mul(rj)
			}
		}
		ef := eqFactor(xi[l+j-1], rj)
		eqz, eqs = eqz.Mul(ef), eqs.Mul(ef)
		return rj, nil
	}
	// A backend that runs the rounds with the transcript on the device does so from one trace's
	// exhaustion to the next (the tails need the exhausted traces' openings here).
	dr, onDevice := cp.(ConstraintDeviceRounds)
	var mix *ConstraintRoundMix
	if onDevice {
		mix = &ConstraintRoundMix{Zc: make([]field.Fp4, T), Num: make([]field.Fp4, T), Den: make([]field.Fp4, T)}
		for t := range traces {
			mix.Zc[t], mix.Num[t], mix.Den[t] = muPows[2*T+t], muPows[2*t].MulBase(sh.norm[t]), muPows[2*t+1]
		}
	}
	for j := 1; j <= sh.nMax; {
		if onDevice {
			to := j
			for ; to < sh.nMax && !slices.Contains(sh.nLift, to); to++ {
			}
			mix.From, mix.To, mix.Eqz, mix.Eqs, mix.Tail = j, to, eqz, eqs, field.Fp4{}
			for t := range traces {
				if sh.nLift[t] < j {
					mix.Tail = mix.Tail.Add(tails[t])
				}
			}
			polys, rs, err := dr.ProveRounds(tr, mix)
			if err != nil {
				return BatchConstraintProof{}, nil, err
			}
			if len(polys) != to-j+1 || len(rs) != to-j+1 {
				return BatchConstraintProof{}, nil, fmt.Errorf("%w: %d round polynomials and %d challenges from the device for rounds %d..%d", ErrDeviceTranscript, len(polys), len(rs), j, to)
			}
			for k := j; k <= to; k++ {
				if len(polys[k-j]) != d+1 {
					return BatchConstraintProof{}, nil, fmt.Errorf("%w: round %d polynomial of %d values from the device", ErrBatchConstraintInput, k, len(polys[k-j]))
				}
				if _, err := finish(k, polys[k-j], &rs[k-j]); err != nil {
					return BatchConstraintProof{}, nil, err
				}
				if err := exhaust(k); err != nil {
					return BatchConstraintProof{}, nil, err
				}
			}
			j = to + 1
			continue
		}
		evals, err := cp.Round()
		if err != nil {
			return BatchConstraintProof{}, nil, err
		}
		if len(evals) != T {
			return BatchConstraintProof{}, nil, fmt.Errorf("%w: backend returned %d round triples", ErrBatchConstraintInput, len(evals))
		}
		var tail field.Fp4
		for t := range traces {
			if sh.nLift[t] < j {
				tail = tail.Add(tails[t])
			} else if len(evals[t].Zc) != d+1 || len(evals[t].Num) != d+1 || len(evals[t].Den) != d+1 {
				return BatchConstraintProof{}, nil, fmt.Errorf("%w: backend round evaluations of trace %d", ErrBatchConstraintInput, t)
			}
		}
		xiStar := xi[l+j-1]
		s := make([]field.Fp4, d+1)
		for x := 1; x <= d+1; x++ {
			var hzc, hlog field.Fp4
			for t := range traces {
				if sh.nLift[t] < j {
					continue
				}
				e := evals[t]
				hzc = hzc.Add(muPows[2*T+t].Mul(e.Zc[x-1]))
				hlog = hlog.Add(muPows[2*t].Mul(e.Num[x-1].MulBase(sh.norm[t]))).Add(muPows[2*t+1].Mul(e.Den[x-1]))
			}
			hx := eqz.Mul(hzc).Add(eqs.Mul(hlog))
			s[x-1] = eqAtSmall(xiStar, x).Mul(hx).Add(tail.MulBase(field.Fp(uint32(x))))
		}
		rj, err := finish(j, s, nil)
		if err != nil {
			return BatchConstraintProof{}, nil, err
		}
		if err := cp.Bind(rj); err != nil {
			return BatchConstraintProof{}, nil, err
		}
		if err := exhaust(j); err != nil {
			return BatchConstraintProof{}, nil, err
		}
		j++
	}
	// The claims, the prover's release (frees the tables) and beside run beside the transcript's
	// absorb of the openings, which is sequential: ~2,600 permutations for keccakf-1024.
	var claims *OpeningClaims
	var cerr error
	side := make(chan struct{})
	released = true
	go func() {
		defer close(side)
		cp.Release()
		if beside != nil {
			beside(r)
		}
		claims, cerr = ColumnOpeningsToClaims(vks, r, openings)
	}()
	sh.observeOpenings(tr, openings) // B7, B8
	<-side
	if cerr != nil {
		return BatchConstraintProof{}, nil, cerr
	}
	proof.ColumnOpenings = openings
	return proof, claims, nil
}

// flattenExt returns the coefficients of vs in order (c0..c3 of each): what ObserveExt of each
// absorbs.
func flattenExt(vs []field.Fp4) []field.Fp {
	out := make([]field.Fp, 0, 4*len(vs))
	for _, v := range vs {
		out = append(out, v[:]...)
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Verifier.

// VerifyBatchConstraints verifies the batch constraint sumcheck (spec B §6.2 steps 4–10, from
// λ_c on) for the present traces in trace order, after the GKR stage. It returns the opening
// claims for the stacked reduction.
func VerifyBatchConstraints(tr *transcript.Transcript, p params.SystemParams, traces []TraceShape, g *GkrOutcome, proof *BatchConstraintProof) (*OpeningClaims, error) {
	T := len(traces)
	vks := make([]*air.VerifyingKey, T)
	progs := make([]*constraints.Program, T)
	publics := make([][]field.Fp, T)
	logHeights := make([]int, T)
	for t, ts := range traces {
		vks[t], progs[t], publics[t], logHeights[t] = ts.VK, ts.Program, ts.Public, ts.LogHeight
	}
	sh, err := newBCShape(p, vks, progs, publics, logHeights, g)
	if err != nil {
		return nil, err
	}
	l, n, d := sh.lSkip, sh.n, sh.d
	xi := g.Xi

	// Proof shape (verify_proof_shape, batch part).
	if proof == nil {
		return nil, fmt.Errorf("%w: missing proof", ErrBatchConstraintShape)
	}
	if len(proof.NumeratorTermPerAir) != T || len(proof.DenominatorTermPerAir) != T {
		return nil, fmt.Errorf("%w: %d/%d per-trace terms for %d traces", ErrBatchConstraintShape, len(proof.NumeratorTermPerAir), len(proof.DenominatorTermPerAir), T)
	}
	if len(proof.UnivariateRoundCoeffs) != sh.univariateLen() {
		return nil, fmt.Errorf("%w: %d univariate coefficients, want %d", ErrBatchConstraintShape, len(proof.UnivariateRoundCoeffs), sh.univariateLen())
	}
	if len(proof.SumcheckRoundPolys) != sh.nMax {
		return nil, fmt.Errorf("%w: %d sumcheck rounds, want %d", ErrBatchConstraintShape, len(proof.SumcheckRoundPolys), sh.nMax)
	}
	for j, s := range proof.SumcheckRoundPolys {
		if len(s) != d+1 {
			return nil, fmt.Errorf("%w: round %d has %d evaluations, want %d", ErrBatchConstraintShape, j+1, len(s), d+1)
		}
	}
	if len(proof.ColumnOpenings) != T {
		return nil, fmt.Errorf("%w: column openings for %d traces, want %d", ErrBatchConstraintShape, len(proof.ColumnOpenings), T)
	}
	for t, o := range proof.ColumnOpenings {
		if err := sh.progs[t].CheckOpeningsShape(o); err != nil {
			return nil, fmt.Errorf("%w: trace %d: %v", ErrBatchConstraintShape, t, err)
		}
	}

	lambda := tr.SampleExt()
	pRem, qRem := g.PClaim, g.QClaim
	for t := 0; t < T; t++ {
		pRem = pRem.Sub(proof.NumeratorTermPerAir[t])
		qRem = qRem.Sub(proof.DenominatorTermPerAir[t])
		tr.ObserveExt(proof.NumeratorTermPerAir[t])
		tr.ObserveExt(proof.DenominatorTermPerAir[t])
	}
	if !pRem.IsZero() {
		return nil, ErrBatchConstraintNumerator
	}
	if qRem != g.Alpha {
		return nil, ErrBatchConstraintDenominator
	}
	mu := tr.SampleExt()
	muPows := field.PowersFp4(mu, 3*T)
	var claim field.Fp4
	for t := 0; t < T; t++ {
		claim = claim.Add(muPows[2*t].Mul(proof.NumeratorTermPerAir[t])).Add(muPows[2*t+1].Mul(proof.DenominatorTermPerAir[t]))
	}
	for _, c := range proof.UnivariateRoundCoeffs {
		tr.ObserveExt(c)
	}
	r := make([]field.Fp4, 1, sh.nMax+1)
	r[0] = tr.SampleExt()
	if sumOverD(proof.UnivariateRoundCoeffs, n) != claim {
		return nil, ErrBatchConstraintSumClaim
	}
	cur := Horner(proof.UnivariateRoundCoeffs, r[0])
	evals := make([]field.Fp4, d+2)
	for j := 1; j <= sh.nMax; j++ {
		s := proof.SumcheckRoundPolys[j-1]
		for _, v := range s {
			tr.ObserveExt(v)
		}
		rj := tr.SampleExt()
		evals[0] = cur.Sub(s[0])
		copy(evals[1:], s)
		cur = InterpolateAt(evals, rj)
		r = append(r, rj)
	}
	sh.observeOpenings(tr, proof.ColumnOpenings)

	// Final evaluation (step 10).
	eqzs := make([]field.Fp4, sh.nMax+1)
	eqss := make([]field.Fp4, sh.nMax+1)
	eqzs[0] = EqUni(l, xi[0], r[0])
	eqss[0] = eqSharpAt(l, xi[:l], r[0])
	for i := 1; i <= sh.nMax; i++ {
		e := eqFactor(xi[l+i-1], r[i])
		eqzs[i] = eqzs[i-1].Mul(e)
		eqss[i] = eqss[i-1].Mul(e)
	}
	prod := field.Fp4One
	for i := sh.nMax; i >= 0; i-- {
		eqzs[i] = eqzs[i].Mul(prod)
		eqss[i] = eqss[i].Mul(prod)
		prod = prod.Mul(r[i])
	}
	var expected field.Fp4
	for t, pg := range sh.progs {
		w, err := pg.Weights(lambda, g.Beta, sh.eq3b[t])
		if err != nil {
			return nil, err
		}
		k := sh.nLift[t]
		expected = expected.Add(sh.traceEval(t, proof.ColumnOpenings[t], r, w, muPows, eqzs[k], eqss[k]))
	}
	if cur != expected {
		return nil, ErrBatchConstraintFinal
	}
	return ColumnOpeningsToClaims(vks, r, proof.ColumnOpenings)
}

// ---------------------------------------------------------------------------------------------
// Claims for the stacked reduction.

// ColumnOpeningsToClaims turns column openings (proof layout, traces in trace order, keys vks)
// into the stacked reduction's claims (spec B §5.1): commitment 0 is the common main (one matrix
// per trace), then per trace its preprocessed commitment (if any) and its cached commitments, one
// matrix each. r is the batch sumcheck point (r_0; r_1..r_{n_max}).
func ColumnOpeningsToClaims(vks []*air.VerifyingKey, r []field.Fp4, openings [][][]field.Fp4) (*OpeningClaims, error) {
	if len(vks) != len(openings) {
		return nil, fmt.Errorf("%w: openings for %d traces, %d keys", ErrBatchConstraintInput, len(openings), len(vks))
	}
	split := func(vals []field.Fp4, needRot bool) (plain, rot []field.Fp4) {
		if !needRot {
			return append([]field.Fp4(nil), vals...), nil
		}
		plain = make([]field.Fp4, len(vals)/2)
		rot = make([]field.Fp4, len(vals)/2)
		for c := range plain {
			plain[c], rot[c] = vals[2*c], vals[2*c+1]
		}
		return plain, rot
	}
	claims := &OpeningClaims{R: append([]field.Fp4(nil), r...)}
	common := CommitClaims{}
	var rest []CommitClaims
	for t, vk := range vks {
		if vk == nil {
			return nil, fmt.Errorf("%w: trace %d has no key", ErrBatchConstraintInput, t)
		}
		widths := constraints.OpeningPartWidths(vk.Width)
		if len(openings[t]) != len(widths) {
			return nil, fmt.Errorf("%w: trace %d has %d opening parts, want %d", ErrBatchConstraintInput, t, len(openings[t]), len(widths))
		}
		f := 1
		if vk.NeedRot {
			f = 2
		}
		for q, w := range widths {
			if len(openings[t][q]) != w*f {
				return nil, fmt.Errorf("%w: trace %d part %d has %d openings, want %d", ErrBatchConstraintInput, t, q, len(openings[t][q]), w*f)
			}
			plain, rot := split(openings[t][q], vk.NeedRot)
			if q == 0 {
				common.NeedRot = append(common.NeedRot, vk.NeedRot)
				common.Values = append(common.Values, plain)
				common.Rot = append(common.Rot, rot)
				continue
			}
			rest = append(rest, CommitClaims{NeedRot: []bool{vk.NeedRot}, Values: [][]field.Fp4{plain}, Rot: [][]field.Fp4{rot}})
		}
	}
	claims.Commits = append([]CommitClaims{common}, rest...)
	return claims, nil
}
