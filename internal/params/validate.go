package params

import (
	"fmt"
	"math"
)

// MaxSecurityBits bounds security_bits: the challenge field has ≈123.6 bits, so no higher target
// can be met; the bound also keeps the builder's query counts small.
const MaxSecurityBits = 256

// Validate checks the structure of p and names the first offending key in config-key form
// (whir.k, whir.rounds[2].num_queries, logup.pow_bits, ...).
func (p SystemParams) Validate() error {
	nonNeg := []struct {
		key string
		v   int
	}{
		{"l_skip", p.LSkip}, {"n_stack", p.NStack},
		{"whir.mu_pow_bits", p.Whir.MuPowBits}, {"whir.query_phase_pow_bits", p.Whir.QueryPhasePowBits},
		{"whir.folding_pow_bits", p.Whir.FoldingPowBits}, {"logup.pow_bits", p.Logup.PowBits},
	}
	for _, f := range nonNeg {
		if f.v < 0 {
			return fmt.Errorf("%s must be ≥ 0", f.key)
		}
	}
	switch {
	case p.WStack < 1:
		return fmt.Errorf("w_stack must be ≥ 1")
	case p.LogBlowup < 1:
		return fmt.Errorf("log_blowup must be ≥ 1")
	case p.LSkip+p.NStack+p.LogBlowup > TwoAdicity:
		return fmt.Errorf("l_skip + n_stack + log_blowup must be ≤ %d (two-adicity), got %d", TwoAdicity, p.LSkip+p.NStack+p.LogBlowup)
	case p.MaxConstraintDegree < 1:
		return fmt.Errorf("max_constraint_degree must be ≥ 1")
	case p.Whir.K < 1:
		return fmt.Errorf("whir.k must be ≥ 1")
	}
	for _, f := range nonNeg[2:] {
		if f.v > MaxPowBits {
			return fmt.Errorf("%s must be ≤ %d, got %d", f.key, MaxPowBits, f.v)
		}
	}
	if err := p.Whir.Proximity.validate(); err != nil {
		return err
	}
	if len(p.Whir.Rounds) < 1 {
		return fmt.Errorf("whir.rounds must have at least one round (R ≥ 1)")
	}
	for i, r := range p.Whir.Rounds {
		if r.NumQueries < 1 {
			return fmt.Errorf("whir.rounds[%d].num_queries must be ≥ 1", i)
		}
		if r.NumQueries > math.MaxUint32 {
			return fmt.Errorf("whir.rounds[%d].num_queries must be ≤ %d", i, uint32(math.MaxUint32))
		}
	}
	if lf := p.LogFinalPolyLen(); lf < 0 {
		return fmt.Errorf("whir.rounds: %d rounds of k=%d fold %d variables but log_stacked_height is %d (log_final_poly_len must be ≥ 0)",
			len(p.Whir.Rounds), p.Whir.K, p.NumWhirSumcheckRounds(), p.LogStackedHeight())
	}
	switch {
	case p.Logup.MaxInteractionCount < 1:
		return fmt.Errorf("logup.max_interaction_count must be ≥ 1")
	case p.Logup.LogMaxMessageLength > 32:
		return fmt.Errorf("logup.log_max_message_length must be ≤ 32")
	}
	return nil
}

func (s WhirProximityStrategy) validate() error {
	switch s.Kind {
	case UniqueDecodingKind:
		if s.M != 0 || s.ListStartRound != 0 {
			return fmt.Errorf("whir.proximity: unique_decoding takes no m or list_start_round")
		}
	case SplitUniqueListKind:
		if s.M < 1 {
			return fmt.Errorf("whir.proximity.m must be ≥ 1")
		}
		if s.ListStartRound < 0 {
			return fmt.Errorf("whir.proximity.list_start_round must be ≥ 0")
		}
	case ListDecodingKind:
		if s.M < 1 {
			return fmt.Errorf("whir.proximity.m must be ≥ 1")
		}
		if s.ListStartRound != 0 {
			return fmt.Errorf("whir.proximity: list_decoding takes no list_start_round")
		}
	default:
		return fmt.Errorf("whir.proximity.kind %d is not unique_decoding, split_unique_list or list_decoding", s.Kind)
	}
	return nil
}

// CheckSecurity enforces the security policy: a target below SecurityBitsTarget (100), or a
// computed total below the target, is an error unless allowInsecure is set. The error names the
// weakest component.
func CheckSecurity(s Soundness, targetBits int, allowInsecure bool) error {
	if allowInsecure {
		return nil
	}
	if targetBits < SecurityBitsTarget {
		return fmt.Errorf("security_bits %d is below %d: insecure parameters need allow_insecure (--allow-insecure)", targetBits, SecurityBitsTarget)
	}
	if t := float64(s.TotalBits); !(t >= float64(targetBits)) {
		return fmt.Errorf("soundness %.2f bits is below security_bits %d (weakest: %s); insecure parameters need allow_insecure (--allow-insecure)",
			t, targetBits, s.Weakest)
	}
	return nil
}

// Insecure reports whether s falls short of targetBits or the target is below 100.
func Insecure(s Soundness, targetBits int) bool {
	return targetBits < SecurityBitsTarget || !(float64(s.TotalBits) >= float64(targetBits))
}
