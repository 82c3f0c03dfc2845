package params

import "math"

// minPositive is Rust's f64::MIN_POSITIVE (smallest normal binary64), not Go's
// math.SmallestNonzeroFloat64 (a subnormal).
const minPositive = 0x1p-1022

// WhirParams are the inputs of the WHIR round builder (Rust WhirParams).
type WhirParams struct {
	K int
	// LogFinalPolyLen is a maximum: rounds stop as soon as the remaining log-length is ≤ it.
	LogFinalPolyLen   int
	QueryPhasePowBits int
	Proximity         WhirProximityStrategy
	FoldingPowBits    int
	MuPowBits         int
}

// satSub is usize::saturating_sub.
func satSub(a, b int) int {
	if a < b {
		return 0
	}
	return a - b
}

// MaxAgreement is the max agreement α of a far word at log inverse rate lir (§4.2):
// (1+ρ)/2 (unique) or sqrt(ρ)·(1 + 1/(2·max(m,1))) (list), clamped to [f64::MIN_POSITIVE, 1].
func MaxAgreement(reg ProximityRegime, lir int) float64 {
	rho := math.Pow(2, -float64(lir))
	var a float64
	if reg.List {
		m := float64(max(reg.M, 1))
		a = math.Sqrt(rho) * (1.0 + 1.0/(2.0*m))
	} else {
		a = (1.0 + rho) / 2.0
	}
	return min(max(a, minPositive), 1.0)
}

// PerQueryBits is −log2(α): the bits of security of one WHIR query at log inverse rate lir.
func PerQueryBits(reg ProximityRegime, lir int) float64 {
	return -1.0 * math.Log2(MaxAgreement(reg, lir))
}

// ceilQuotientToInt is `(num / den).ceil() as usize` in Rust: IEEE division, ceil, then a
// saturating cast (NaN → 0, +∞ or too large → MaxInt). No epsilon is added: a quotient that is an
// exact integer stays that integer.
func ceilQuotientToInt(num, den float64) int {
	c := math.Ceil(num / den)
	switch {
	case math.IsNaN(c) || c <= 0:
		return 0
	case c >= math.MaxInt:
		return math.MaxInt
	}
	return int(c)
}

// NumQueries is WhirConfig::queries: ceil(protocolSecurityBits / PerQueryBits(reg, lir)).
func NumQueries(reg ProximityRegime, protocolSecurityBits, lir int) int {
	return ceilQuotientToInt(float64(protocolSecurityBits), PerQueryBits(reg, lir))
}

// NewWhirConfig builds the WHIR configuration for a target of securityBits (§4.2). k must be ≥ 1;
// with k < 1 it returns a configuration without rounds (which Validate rejects).
func NewWhirConfig(logBlowup, logStackedHeight int, wp WhirParams, securityBits int) WhirConfig {
	psl := satSub(securityBits, wp.QueryPhasePowBits)
	numRounds := 0
	if wp.K >= 1 {
		numRounds = (satSub(logStackedHeight, wp.LogFinalPolyLen) + wp.K - 1) / wp.K
	}
	rounds := make([]WhirRoundConfig, 0, numRounds)
	lir := logBlowup
	for r := 0; r < numRounds; r++ {
		// Queries use the rate before this round's fold.
		rounds = append(rounds, WhirRoundConfig{NumQueries: NumQueries(wp.Proximity.InRound(r), psl, lir)})
		lir += wp.K - 1
	}
	return WhirConfig{
		K:                 wp.K,
		Rounds:            rounds,
		MuPowBits:         wp.MuPowBits,
		QueryPhasePowBits: wp.QueryPhasePowBits,
		FoldingPowBits:    wp.FoldingPowBits,
		Proximity:         wp.Proximity,
	}
}

// NewSystemParams is SystemParams::new: it builds the WHIR configuration for m = lSkip + nStack and
// stores the rest as given.
func NewSystemParams(logBlowup, lSkip, nStack, wStack, logFinalPolyLen, foldingPowBits, muPowBits int,
	proximity WhirProximityStrategy, securityBits int, logup LogUpSecurityParameters,
	maxConstraintDegree, whirQueryPhasePowBits, kWhir int) SystemParams {
	return SystemParams{
		LSkip:     lSkip,
		NStack:    nStack,
		WStack:    wStack,
		LogBlowup: logBlowup,
		Whir: NewWhirConfig(logBlowup, lSkip+nStack, WhirParams{
			K:                 kWhir,
			LogFinalPolyLen:   logFinalPolyLen,
			QueryPhasePowBits: whirQueryPhasePowBits,
			Proximity:         proximity,
			FoldingPowBits:    foldingPowBits,
			MuPowBits:         muPowBits,
		}, securityBits),
		Logup:               logup,
		MaxConstraintDegree: maxConstraintDegree,
	}
}
