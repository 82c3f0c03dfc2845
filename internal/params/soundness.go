package params

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// BaseFieldOrder is p as f64.
const BaseFieldOrder float64 = BabyBearOrder

// ChallengeFieldBits is bF = 4·log2(p) ≈ 123.627562385 (quartic extension).
var ChallengeFieldBits = 4.0 * math.Log2(BaseFieldOrder)

// Bits is a number of bits of security. It marshals to JSON as a number, or as the string
// "+Inf" / "-Inf" (an infinite bound: no error from that source / an invalid regime), or null (NaN).
type Bits float64

// MarshalJSON implements json.Marshaler.
func (b Bits) MarshalJSON() ([]byte, error) {
	f := float64(b)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// SoundnessInputs are the circuit-dependent inputs of the calculator (§4.6).
type SoundnessInputs struct {
	// MaxConstraintsPerAir is N_C, the max number of constraints of one AIR.
	MaxConstraintsPerAir int `json:"max_constraints_per_air"`
	NumAirs              int `json:"num_airs"`
	// MaxConstraintDegree is d.
	MaxConstraintDegree int `json:"max_constraint_degree"`
	// MaxLogTraceHeight is max_log_h.
	MaxLogTraceHeight int `json:"max_log_trace_height"`
	// NumTraceColumns is n_cols, total unstacked trace columns.
	NumTraceColumns int `json:"num_trace_columns"`
	// NumStackedColumns is n_stacked, the μ batch size.
	NumStackedColumns int `json:"num_stacked_columns"`
	// NLogup is the GKR depth beyond l_skip.
	NLogup int `json:"n_logup"`
}

// Bounds are circuit upper bounds from which SoundnessInputs are derived for given parameters, as
// OpenVM's tests/soundness.rs does when no verifying key is at hand.
type Bounds struct {
	Name                  string `json:"name"`
	MaxConstraintsPerAir  int    `json:"max_constraints_per_air"`
	NumAirs               int    `json:"num_airs"`
	MaxLogTraceHeight     int    `json:"max_log_trace_height"`
	NumTraceColumns       int    `json:"num_trace_columns"`
	MaxInteractionsPerAir int    `json:"max_interactions_per_air"`
}

// AppVMBounds are the App-VM bounds of OpenVM tests/soundness.rs (test_app_vm_security), the
// inputs of the spec's §4.6 worked example.
var AppVMBounds = Bounds{Name: "App-VM bounds", MaxConstraintsPerAir: 5000, NumAirs: 100,
	MaxLogTraceHeight: 24, NumTraceColumns: 30000, MaxInteractionsPerAir: 1000}

// AppVMInputs are AppVMBounds applied to app_params_with_100_bits_security(21): the exact inputs
// of the §4.6 worked example.
var AppVMInputs = SoundnessInputs{MaxConstraintsPerAir: 5000, NumAirs: 100, MaxConstraintDegree: 3,
	MaxLogTraceHeight: 24, NumTraceColumns: 30000, NumStackedColumns: 2048, NLogup: 27}

// recursionBounds are the recursion-circuit bounds of tests/soundness.rs with the given max log
// trace height.
func recursionBounds(name string, maxLogHeight int) Bounds {
	return Bounds{Name: name, MaxConstraintsPerAir: 1000, NumAirs: 50, MaxLogTraceHeight: maxLogHeight,
		NumTraceColumns: 2000, MaxInteractionsPerAir: 100}
}

// log2Ceil is ceil(log2(x)) for x ≥ 1, 0 for x ≤ 1 (exact, integer).
func log2Ceil(x uint64) int {
	n := 0
	for (uint64(1) << n) < x {
		n++
	}
	return n
}

// Inputs derives the calculator inputs for p: d = max_constraint_degree, n_stacked = w_stack and
// n_logup = min(ceil_log2(max_interaction_count) − l_skip, ceil_log2(num_airs) +
// ceil_log2(max_interactions_per_air) + max_log_h − l_skip) (saturating).
func (b Bounds) Inputs(p SystemParams) SoundnessInputs {
	fieldBound := satSub(log2Ceil(uint64(p.Logup.MaxInteractionCount)), p.LSkip)
	paramBound := satSub(log2Ceil(uint64(max(b.NumAirs, 0)))+log2Ceil(uint64(max(b.MaxInteractionsPerAir, 0)))+b.MaxLogTraceHeight, p.LSkip)
	return SoundnessInputs{
		MaxConstraintsPerAir: b.MaxConstraintsPerAir,
		NumAirs:              b.NumAirs,
		MaxConstraintDegree:  p.MaxConstraintDegree,
		MaxLogTraceHeight:    b.MaxLogTraceHeight,
		NumTraceColumns:      b.NumTraceColumns,
		NumStackedColumns:    p.WStack,
		NLogup:               min(fieldBound, paramBound),
	}
}

// Soundness is the calculator's per-component breakdown, in bits.
type Soundness struct {
	Inputs                 SoundnessInputs `json:"inputs"`
	LogupBits              Bits            `json:"logup_bits"`
	GkrSumcheckBits        Bits            `json:"gkr_sumcheck_bits"`
	GkrBatchingBits        Bits            `json:"gkr_batching_bits"`
	ZerocheckSumcheckBits  Bits            `json:"zerocheck_sumcheck_bits"`
	ConstraintBatchingBits Bits            `json:"constraint_batching_bits"`
	StackedReductionBits   Bits            `json:"stacked_reduction_bits"`
	WhirBits               Bits            `json:"whir_bits"`
	Whir                   WhirSoundness   `json:"whir"`
	TotalBits              Bits            `json:"total_bits"`
	// Weakest names the term that sets TotalBits, e.g. "whir round 2 query⊕γ".
	Weakest string `json:"weakest"`
}

// WhirSoundness is the WHIR breakdown: OpenVM's minima plus a per-round view.
type WhirSoundness struct {
	MuBatchingBits    Bits `json:"mu_batching_bits"`
	FoldRbrBits       Bits `json:"fold_rbr_bits"`
	ProximityGapsBits Bits `json:"proximity_gaps_bits"`
	SumcheckBits      Bits `json:"sumcheck_bits"`
	// OodRbrBits is +Inf when there is a single round.
	OodRbrBits        Bits                 `json:"ood_rbr_bits"`
	ShiftRbrBits      Bits                 `json:"shift_rbr_bits"`
	QueryBits         Bits                 `json:"query_bits"`
	GammaBatchingBits Bits                 `json:"gamma_batching_bits"`
	Rounds            []WhirRoundSoundness `json:"rounds"`
}

// WhirRoundSoundness is one WHIR round's terms.
type WhirRoundSoundness struct {
	Round      int    `json:"round"`
	Regime     string `json:"regime"`
	LogInvRate int    `json:"log_inv_rate"`
	NumQueries int    `json:"num_queries"`
	// FoldBits is the min over the k sub-rounds of sumcheck ⊕ proximity gap.
	FoldBits Bits `json:"fold_bits"`
	// FirstProximityGapBits is the proximity-gap term of the first sub-round (the smallest one).
	FirstProximityGapBits Bits `json:"first_proximity_gap_bits"`
	QueryBits             Bits `json:"query_bits"`
	GammaBits             Bits `json:"gamma_bits"`
	// ShiftBits is query ⊕ γ.
	ShiftBits Bits `json:"shift_bits"`
	// OODBits is nil for the final round.
	OODBits *Bits `json:"ood_bits,omitempty"`
}

// EffectivePowBits is eff_pow(g): the bits a g-bit grind is worth given the sample_bits bias.
func EffectivePowBits(g int) float64 {
	if g == 0 {
		return 0
	}
	pHi, _, _ := sampleBitsResidueProbs(float64(g))
	return -math.Log2(pHi)
}

// sampleBitsResidueProbs returns ((c+1)/p, c/p, r) with p = c·2^n + r.
func sampleBitsResidueProbs(n float64) (float64, float64, float64) {
	twoPowN := math.Exp2(n)
	c := math.Floor(BaseFieldOrder / twoPowN)
	r := BaseFieldOrder - float64(c*twoPowN)
	return (c + 1.0) / BaseFieldOrder, c / BaseFieldOrder, r
}

// log2Add is a numerically stable log2(2^x + 2^y).
func log2Add(x, y float64) float64 {
	if math.IsInf(x, 1) {
		return x
	}
	if math.IsInf(y, 1) {
		return y
	}
	if math.IsNaN(x) || math.IsNaN(y) {
		return math.NaN()
	}
	hi, lo := y, x
	if x >= y {
		hi, lo = x, y
	}
	return hi + math.Log2(1.0+math.Exp2(lo-hi))
}

// CombineBits is −log2(2^−a + 2^−b); +∞ is the identity.
func CombineBits(a, b float64) float64 {
	if math.IsInf(a, 1) {
		return b
	}
	if math.IsInf(b, 1) {
		return a
	}
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return -log2Add(-a, -b)
}

// rustMax and rustMin are f64::max / f64::min (a NaN operand yields the other one).
func rustMax(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	if math.IsNaN(b) {
		return a
	}
	return math.Max(a, b)
}

func rustMin(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	if math.IsNaN(b) {
		return a
	}
	return math.Min(a, b)
}

// bchks25 is the reference closed form of log2(a_bound) and log2(list size) (§4.6).
func bchks25(logDeg, lir, m int) (log2A, log2L float64) {
	inf := math.Inf(1)
	mEff := max(m, 1)
	log2Rho := -float64(lir)
	rho := math.Exp2(log2Rho)
	if rho <= 0 || math.IsInf(rho, 0) || math.IsNaN(rho) {
		return inf, inf
	}
	if mEff == 1 && rho >= 4.0/9.0 {
		return inf, inf
	}
	sqrtRho := math.Sqrt(rho)
	eta := sqrtRho / (2.0 * float64(mEff))
	gamma := 1.0 - sqrtRho - eta
	if eta <= 0 || gamma <= 0 || gamma >= 1.0-sqrtRho {
		return inf, inf
	}
	log2N := float64(logDeg + lir)

	mBar := float64(mEff) + 0.5
	log2MBar := math.Log2(mBar)
	log2Three := math.Log2(3.0)
	dx := log2MBar + log2N + float64(0.5*log2Rho)
	dy := log2MBar - float64(0.5*log2Rho)
	dz := float64(2.0*log2MBar) - log2Three - log2Rho
	dz = rustMax(dy, dz)

	log2GammaNPlus1 := log2Add(math.Log2(gamma)+log2N, 0.0)
	a := log2Add(1.0+dx+float64(2.0*dy)+dz, dy+log2GammaNPlus1)
	if math.IsInf(a, 0) || math.IsNaN(a) {
		return inf, inf
	}
	a = rustMax(a, 0.0)
	aBound := rustMax(math.Ceil(math.Exp2(a)), 1.0)
	return math.Log2(aBound), dy
}

// ProximityGap is PG(regime, log_deg, lir, batch) → (err_bits, log2 list size L); batch ≥ 2.
func ProximityGap(reg ProximityRegime, logDeg, lir, batch int) (errBits, log2L float64) {
	bF := ChallengeFieldBits
	if !reg.List {
		return bF - math.Log2(float64(batch-1)) - float64(logDeg) - float64(lir), 0
	}
	log2A, l := bchks25(logDeg, lir, reg.M)
	return bF - math.Log2(float64(batch-1)) - log2A, l
}

// queryBitsBiased is query_bits(regime, nq, lir, lqd) of §4.6 (without PoW).
func queryBitsBiased(reg ProximityRegime, nq, lir, lqd int) float64 {
	alpha := MaxAgreement(reg, lir)
	_, _, r := sampleBitsResidueProbs(float64(lqd))
	bigN := math.Exp2(float64(lqd))
	heavy := rustMin(float64(alpha*bigN), r)
	mass := float64(alpha*(1.0-r/BaseFieldOrder)) + heavy/BaseFieldOrder
	mass = min(max(mass, minPositive), 1.0)
	return -float64(nq) * math.Log2(mass)
}

// logupSoundness is the LogUp α/β soundness before PoW.
func logupSoundness(maxInteractionCount, logMaxMessageLength uint32, log2ListSize float64) float64 {
	return ChallengeFieldBits - math.Log2(2.0*float64(maxInteractionCount)) - float64(logMaxMessageLength) - log2ListSize
}

// Calculate runs the soundness calculator (§4.6) for p with the given inputs over BabyBear⁴. It
// returns an error where OpenVM asserts: N_C ≥ 1, num_airs ≥ 1, n_stacked ≥ 2, l_skip + n_logup ≥ 1,
// and for parameters that are not structurally valid.
func Calculate(p SystemParams, in SoundnessInputs) (Soundness, error) {
	switch {
	case in.MaxConstraintsPerAir < 1:
		return Soundness{}, errors.New("soundness: max constraints per AIR (N_C) must be ≥ 1")
	case in.NumAirs < 1:
		return Soundness{}, errors.New("soundness: num_airs must be ≥ 1")
	case in.NumStackedColumns < 2:
		return Soundness{}, errors.New("soundness: the number of stacked columns (w_stack) must be ≥ 2 for WHIR μ batching")
	case p.LSkip+in.NLogup < 1:
		return Soundness{}, errors.New("soundness: l_skip + n_logup must be ≥ 1 (GKR needs a round)")
	case in.MaxConstraintDegree < 0 || in.MaxLogTraceHeight < 0 || in.NumTraceColumns < 0 || in.NLogup < 0:
		return Soundness{}, errors.New("soundness: inputs must be non-negative")
	}
	if err := p.Validate(); err != nil {
		return Soundness{}, err
	}
	bF := ChallengeFieldBits
	l := p.LSkip
	_, l0 := ProximityGap(p.Whir.Proximity.InitialRound(), p.LogStackedHeight(), p.LogBlowup, in.NumStackedColumns)

	s := Soundness{Inputs: in}
	s.LogupBits = Bits(logupSoundness(p.Logup.MaxInteractionCount, p.Logup.LogMaxMessageLength, l0) + EffectivePowBits(p.Logup.PowBits))
	s.GkrSumcheckBits = Bits(bF - math.Log2(3.0))
	s.GkrBatchingBits = Bits(bF - math.Log2(1.0))
	d := in.MaxConstraintDegree
	s.ZerocheckSumcheckBits = Bits(bF - math.Log2(float64(max((d+1)*(int(1)<<l-1), d+1))) - l0)
	nExtra := satSub(satSub(in.MaxLogTraceHeight, l), in.NLogup)
	fused := bF - math.Log2(float64(max(nExtra, 3)+(int(1)<<l-1)+(in.MaxConstraintsPerAir-1)))
	batching := bF - math.Log2(float64(3*in.NumAirs-1))
	s.ConstraintBatchingBits = Bits(rustMin(fused, batching) - l0)
	s.StackedReductionBits = Bits(rustMin(rustMin(bF-math.Log2(2.0*float64(in.NumTraceColumns)), bF-math.Log2(float64(2*(int(1)<<l-1)))), bF-1.0) - l0)

	whirBits, whirLabel := calculateWhir(p, in.NumStackedColumns, &s.Whir)
	s.WhirBits = Bits(whirBits)

	comps := []struct {
		name string
		v    Bits
	}{
		{"logup", s.LogupBits}, {"gkr sumcheck", s.GkrSumcheckBits}, {"gkr batching", s.GkrBatchingBits},
		{"zerocheck sumcheck", s.ZerocheckSumcheckBits}, {"constraint batching", s.ConstraintBatchingBits},
		{"stacked reduction", s.StackedReductionBits}, {whirLabel, s.WhirBits},
	}
	s.TotalBits, s.Weakest = comps[0].v, comps[0].name
	for _, c := range comps[1:] {
		if float64(c.v) < float64(s.TotalBits) {
			s.TotalBits, s.Weakest = c.v, c.name
		}
	}
	return s, nil
}

// calculateWhir is calculate_whir_soundness; it fills w and returns min_rbr and its label.
func calculateWhir(p SystemParams, nStacked int, w *WhirSoundness) (float64, string) {
	bF := ChallengeFieldBits
	k := p.Whir.K
	prox := p.Whir.Proximity
	inf := math.Inf(1)
	minQuery, minProx, minSumcheck, minOOD, minGamma, minFold, minShift := inf, inf, inf, inf, inf, inf, inf
	foldPow := EffectivePowBits(p.Whir.FoldingPowBits)
	queryPow := EffectivePowBits(p.Whir.QueryPhasePowBits)

	muErr, _ := ProximityGap(prox.InitialRound(), p.LogStackedHeight(), p.LogBlowup, nStacked)
	mu := muErr + EffectivePowBits(p.Whir.MuPowBits)
	minRbr, label := mu, "whir μ batching"
	update := func(v float64, what string) {
		if v < minRbr {
			minRbr, label = v, what
		}
	}

	lir := p.LogBlowup
	cur := p.LogStackedHeight()
	R := len(p.Whir.Rounds)
	w.Rounds = make([]WhirRoundSoundness, 0, R)
	for r, rc := range p.Whir.Rounds {
		reg := prox.InRound(r)
		next := lir + k - 1
		rs := WhirRoundSoundness{Round: r, Regime: reg.String(), LogInvRate: lir, NumQueries: rc.NumQueries}
		roundFold := inf
		for j := 0; j < k; j++ {
			cur--
			e, lr := ProximityGap(reg, cur, lir, 2)
			pg := e + foldPow
			if j == 0 {
				rs.FirstProximityGapBits = Bits(pg)
			}
			minProx = rustMin(minProx, pg)
			sc := bF - math.Log2(3.0) - lr + foldPow
			minSumcheck = rustMin(minSumcheck, sc)
			fold := CombineBits(sc, pg)
			minFold = rustMin(minFold, fold)
			roundFold = rustMin(roundFold, fold)
			update(fold, fmt.Sprintf("whir round %d fold", r))
		}
		rs.FoldBits = Bits(roundFold)

		lqd := cur + lir
		query := queryBitsBiased(reg, rc.NumQueries, lir, lqd) + queryPow
		minQuery = rustMin(minQuery, query)
		_, ln := ProximityGap(prox.InRound(r+1), cur, next, 2)
		gamma := bF - math.Log2(float64(rc.NumQueries+1)) - ln
		minGamma = rustMin(minGamma, gamma)
		shift := CombineBits(query, gamma)
		minShift = rustMin(minShift, shift)
		update(shift, fmt.Sprintf("whir round %d query⊕γ", r))
		rs.QueryBits, rs.GammaBits, rs.ShiftBits = Bits(query), Bits(gamma), Bits(shift)

		if r != R-1 {
			ood := bF - float64(cur) + 1.0 - float64(2.0*ln)
			minOOD = rustMin(minOOD, ood)
			update(ood, fmt.Sprintf("whir round %d OOD", r))
			b := Bits(ood)
			rs.OODBits = &b
		}
		w.Rounds = append(w.Rounds, rs)
		lir = next
	}
	w.MuBatchingBits = Bits(mu)
	w.FoldRbrBits = Bits(minFold)
	w.ProximityGapsBits = Bits(minProx)
	w.SumcheckBits = Bits(minSumcheck)
	w.OodRbrBits = Bits(minOOD)
	w.ShiftRbrBits = Bits(minShift)
	w.QueryBits = Bits(minQuery)
	w.GammaBatchingBits = Bits(minGamma)
	return minRbr, label
}
