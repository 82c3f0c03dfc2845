package params

import (
	"encoding/json"
	"fmt"
	"slices"
)

// BabyBear facts used by the builder and the calculator.
const (
	// BabyBearOrder is p = 2^31 − 2^27 + 1.
	BabyBearOrder = 2013265921
	// TwoAdicity is the largest n with 2^n | p − 1; RS domains have log-size ≤ TwoAdicity.
	TwoAdicity = 27
	// MaxPowBits is the largest accepted proof-of-work difficulty (sample_bits on a 31-bit field).
	MaxPowBits = 30
)

// SystemParams are the SWIRL system parameters, fields in declaration (= postcard) order (§4.1).
type SystemParams struct {
	LSkip               int                     `json:"l_skip"`
	NStack              int                     `json:"n_stack"`
	WStack              int                     `json:"w_stack"`
	LogBlowup           int                     `json:"log_blowup"`
	Whir                WhirConfig              `json:"whir"`
	Logup               LogUpSecurityParameters `json:"logup"`
	MaxConstraintDegree int                     `json:"max_constraint_degree"`
}

// WhirConfig is the WHIR part of SystemParams (fields in declaration order).
type WhirConfig struct {
	// K is the folding factor: 2^K codeword points fold into one per WHIR round.
	K int `json:"k"`
	// Rounds holds one entry per WHIR round.
	Rounds            []WhirRoundConfig     `json:"rounds"`
	MuPowBits         int                   `json:"mu_pow_bits"`
	QueryPhasePowBits int                   `json:"query_phase_pow_bits"`
	FoldingPowBits    int                   `json:"folding_pow_bits"`
	Proximity         WhirProximityStrategy `json:"proximity"`
}

// WhirRoundConfig is one WHIR round.
type WhirRoundConfig struct {
	NumQueries int `json:"num_queries"`
}

// ProximityKind is the variant of WhirProximityStrategy; its value is the postcard variant index.
type ProximityKind uint8

const (
	UniqueDecodingKind  ProximityKind = 0
	SplitUniqueListKind ProximityKind = 1
	ListDecodingKind    ProximityKind = 2
)

// String returns the config-file spelling of the kind.
func (k ProximityKind) String() string {
	switch k {
	case UniqueDecodingKind:
		return "unique_decoding"
	case SplitUniqueListKind:
		return "split_unique_list"
	case ListDecodingKind:
		return "list_decoding"
	}
	return fmt.Sprintf("ProximityKind(%d)", uint8(k))
}

// parseProximityKind is the inverse of ProximityKind.String.
func parseProximityKind(s string) (ProximityKind, bool) {
	for _, k := range []ProximityKind{UniqueDecodingKind, SplitUniqueListKind, ListDecodingKind} {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// WhirProximityStrategy is the Rust enum UniqueDecoding | SplitUniqueList{m, list_start_round} |
// ListDecoding{m}. M is used by the last two kinds, ListStartRound by SplitUniqueList only; the
// unused fields must be zero (use the constructors).
type WhirProximityStrategy struct {
	Kind           ProximityKind
	M              int
	ListStartRound int
}

// UniqueDecoding is the unique-decoding regime in every round.
func UniqueDecoding() WhirProximityStrategy { return WhirProximityStrategy{Kind: UniqueDecodingKind} }

// SplitUniqueList is unique decoding for rounds < listStartRound, list decoding with m after.
func SplitUniqueList(m, listStartRound int) WhirProximityStrategy {
	return WhirProximityStrategy{Kind: SplitUniqueListKind, M: m, ListStartRound: listStartRound}
}

// ListDecoding is list decoding with multiplicity m in every round.
func ListDecoding(m int) WhirProximityStrategy {
	return WhirProximityStrategy{Kind: ListDecodingKind, M: m}
}

// String is a human-readable form: unique_decoding, list_decoding(m=2), split_unique_list(m=3, list_start_round=1).
func (s WhirProximityStrategy) String() string {
	switch s.Kind {
	case SplitUniqueListKind:
		return fmt.Sprintf("split_unique_list(m=%d, list_start_round=%d)", s.M, s.ListStartRound)
	case ListDecodingKind:
		return fmt.Sprintf("list_decoding(m=%d)", s.M)
	}
	return s.Kind.String()
}

type proximityJSON struct {
	Kind           string `json:"kind"`
	M              *int   `json:"m,omitempty"`
	ListStartRound *int   `json:"list_start_round,omitempty"`
}

// MarshalJSON writes {"kind": ..., "m": ..., "list_start_round": ...} with only the variant's fields.
func (s WhirProximityStrategy) MarshalJSON() ([]byte, error) {
	j := proximityJSON{Kind: s.Kind.String()}
	switch s.Kind {
	case SplitUniqueListKind:
		j.M, j.ListStartRound = &s.M, &s.ListStartRound
	case ListDecodingKind:
		j.M = &s.M
	case UniqueDecodingKind:
	default:
		return nil, fmt.Errorf("unknown proximity kind %d", s.Kind)
	}
	return json.Marshal(j)
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (s *WhirProximityStrategy) UnmarshalJSON(b []byte) error {
	var j proximityJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	k, ok := parseProximityKind(j.Kind)
	if !ok {
		return fmt.Errorf("proximity kind %q: must be unique_decoding, split_unique_list or list_decoding", j.Kind)
	}
	*s = WhirProximityStrategy{Kind: k}
	if j.M != nil && k != UniqueDecodingKind {
		s.M = *j.M
	}
	if j.ListStartRound != nil && k == SplitUniqueListKind {
		s.ListStartRound = *j.ListStartRound
	}
	return nil
}

// ProximityRegime is the regime of one WHIR round: unique decoding, or list decoding with M.
type ProximityRegime struct {
	List bool
	M    int
}

// String: "unique" or "list(m=M)".
func (r ProximityRegime) String() string {
	if r.List {
		return fmt.Sprintf("list(m=%d)", r.M)
	}
	return "unique"
}

// InitialRound is InRound(0).
func (s WhirProximityStrategy) InitialRound() ProximityRegime { return s.InRound(0) }

// InRound returns the regime of WHIR round r.
func (s WhirProximityStrategy) InRound(r int) ProximityRegime {
	switch s.Kind {
	case SplitUniqueListKind:
		if r < s.ListStartRound {
			return ProximityRegime{}
		}
		return ProximityRegime{List: true, M: s.M}
	case ListDecodingKind:
		return ProximityRegime{List: true, M: s.M}
	}
	return ProximityRegime{}
}

// LogUpSecurityParameters bounds the LogUp argument and sets its PoW bits.
type LogUpSecurityParameters struct {
	MaxInteractionCount uint32 `json:"max_interaction_count"`
	LogMaxMessageLength uint32 `json:"log_max_message_length"`
	PowBits             int    `json:"pow_bits"`
}

// LogStackedHeight is m = l_skip + n_stack.
func (p SystemParams) LogStackedHeight() int { return p.LSkip + p.NStack }

// NumWhirRounds is R = len(whir.rounds).
func (p SystemParams) NumWhirRounds() int { return len(p.Whir.Rounds) }

// NumWhirSumcheckRounds is R·k.
func (p SystemParams) NumWhirSumcheckRounds() int { return len(p.Whir.Rounds) * p.Whir.K }

// LogFinalPolyLen is m − R·k (negative only for invalid parameters).
func (p SystemParams) LogFinalPolyLen() int { return p.LogStackedHeight() - p.NumWhirSumcheckRounds() }

// KWhir is whir.k.
func (p SystemParams) KWhir() int { return p.Whir.K }

// LogupPowBits is logup.pow_bits.
func (p SystemParams) LogupPowBits() int { return p.Logup.PowBits }

// Equal is full structural equality (the verifier's SystemParamsMismatch check).
func (p SystemParams) Equal(q SystemParams) bool {
	pw, qw := p.Whir, q.Whir
	return p.LSkip == q.LSkip && p.NStack == q.NStack && p.WStack == q.WStack &&
		p.LogBlowup == q.LogBlowup && p.Logup == q.Logup &&
		p.MaxConstraintDegree == q.MaxConstraintDegree &&
		pw.K == qw.K && slices.Equal(pw.Rounds, qw.Rounds) && pw.MuPowBits == qw.MuPowBits &&
		pw.QueryPhasePowBits == qw.QueryPhasePowBits && pw.FoldingPowBits == qw.FoldingPowBits &&
		pw.Proximity == qw.Proximity
}

// WhirRoundInfo is one row of the WHIR round table (§4.4).
type WhirRoundInfo struct {
	Round int `json:"round"`
	// Regime is the proximity regime of the round ("unique", "list(m=2)").
	Regime string `json:"regime"`
	// LogInvRate is the log inverse rate before this round's fold (used for its queries).
	LogInvRate int `json:"log_inv_rate"`
	// PerQueryBits is −log2(max agreement) at LogInvRate.
	PerQueryBits float64 `json:"per_query_bits"`
	NumQueries   int     `json:"num_queries"`
	// RSDomainLogSize is the log-size of the RS domain of the codeword opened in this round.
	RSDomainLogSize int `json:"rs_domain_log_size"`
	// QueryIndexBits = RSDomainLogSize − k (queries pick a group of 2^k rows).
	QueryIndexBits int `json:"query_index_bits"`
	// MerkleDepth is the depth of the Merkle proof of each query (= QueryIndexBits).
	MerkleDepth    int `json:"merkle_depth"`
	QueryPowBits   int `json:"query_pow_bits"`
	FoldingPowBits int `json:"folding_pow_bits"`
	// Final is true for the last round.
	Final bool `json:"final"`
}

// RoundTable returns the per-round table of the WHIR configuration.
func (p SystemParams) RoundTable() []WhirRoundInfo {
	k := p.Whir.K
	m := p.LogStackedHeight()
	lir := p.LogBlowup
	rows := make([]WhirRoundInfo, 0, len(p.Whir.Rounds))
	for r, rc := range p.Whir.Rounds {
		reg := p.Whir.Proximity.InRound(r)
		domain := m - r*k + lir
		rows = append(rows, WhirRoundInfo{
			Round:           r,
			Regime:          reg.String(),
			LogInvRate:      lir,
			PerQueryBits:    PerQueryBits(reg, lir),
			NumQueries:      rc.NumQueries,
			RSDomainLogSize: domain,
			QueryIndexBits:  domain - k,
			MerkleDepth:     domain - k,
			QueryPowBits:    p.Whir.QueryPhasePowBits,
			FoldingPowBits:  p.Whir.FoldingPowBits,
			Final:           r == len(p.Whir.Rounds)-1,
		})
		lir += k - 1
	}
	return rows
}
