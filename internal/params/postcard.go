package params

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
