package params

import "github.com/metalprove/metalprove/internal/postcard"

// appendVarint appends v as an unsigned LEB128 varint (postcard's encoding of u32/u64/usize).
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendPostcard appends the postcard serialization of p (§3.6): every field in declaration order,
// usize/u32 as LEB128 varints, Vec as a varint length then elements, the proximity enum as its
// variant index then the variant's fields. p must be valid (no negative field).
func (p SystemParams) AppendPostcard(b []byte) []byte {
	u := func(v int) { b = appendVarint(b, uint64(v)) }
	u(p.LSkip)
	u(p.NStack)
	u(p.WStack)
	u(p.LogBlowup)
	u(p.Whir.K)
	u(len(p.Whir.Rounds))
	for _, r := range p.Whir.Rounds {
		u(r.NumQueries)
	}
	u(p.Whir.MuPowBits)
	u(p.Whir.QueryPhasePowBits)
	u(p.Whir.FoldingPowBits)
	px := p.Whir.Proximity
	b = appendVarint(b, uint64(px.Kind))
	switch px.Kind {
	case SplitUniqueListKind:
		u(px.M)
		u(px.ListStartRound)
	case ListDecodingKind:
		u(px.M)
	}
	b = appendVarint(b, uint64(p.Logup.MaxInteractionCount))
	b = appendVarint(b, uint64(p.Logup.LogMaxMessageLength))
	u(p.Logup.PowBits)
	u(p.MaxConstraintDegree)
	return b
}

// Bounds on decoded parameters: far above any usable value, low enough that a hostile key
// cannot make the reader allocate much.
const (
	maxDecodedInt    = 1 << 30
	maxDecodedRounds = 1 << 10
)

// ReadPostcard reads SystemParams written by AppendPostcard from r (errors stick in r). The
// result is not validated: call Validate.
func ReadPostcard(r *postcard.Reader) SystemParams {
	u := func(what string) int { return r.Usize("params."+what, maxDecodedInt) }
	var p SystemParams
	p.LSkip = u("l_skip")
	p.NStack = u("n_stack")
	p.WStack = u("w_stack")
	p.LogBlowup = u("log_blowup")
	p.Whir.K = u("whir.k")
	n := r.Len("params.whir.rounds", 1, maxDecodedRounds)
	p.Whir.Rounds = make([]WhirRoundConfig, n)
	for i := range p.Whir.Rounds {
		p.Whir.Rounds[i].NumQueries = u("whir.rounds.num_queries")
	}
	p.Whir.MuPowBits = u("whir.mu_pow_bits")
	p.Whir.QueryPhasePowBits = u("whir.query_phase_pow_bits")
	p.Whir.FoldingPowBits = u("whir.folding_pow_bits")
	p.Whir.Proximity.Kind = ProximityKind(r.Variant("params.whir.proximity", 3))
	switch p.Whir.Proximity.Kind {
	case SplitUniqueListKind:
		p.Whir.Proximity.M = u("whir.proximity.m")
		p.Whir.Proximity.ListStartRound = u("whir.proximity.list_start_round")
	case ListDecodingKind:
		p.Whir.Proximity.M = u("whir.proximity.m")
	}
	p.Logup.MaxInteractionCount = r.U32("params.logup.max_interaction_count")
	p.Logup.LogMaxMessageLength = r.U32("params.logup.log_max_message_length")
	p.Logup.PowBits = u("logup.pow_bits")
	p.MaxConstraintDegree = u("max_constraint_degree")
	return p
}
