package air

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// CodecVersion is OpenVM's CODEC_VERSION, the first 4 bytes of the vk prehash preimage.
const CodecVersion uint32 = 3

// PreprocessedVK is VerifierSinglePreprocessedData: the stacked-PCS commitment of the preprocessed
// trace, log2(height) − l_skip (signed) and the stacked matrix width. It is computed by the PCS
// layer and handed to Keygen.
type PreprocessedVK struct {
	Commit        poseidon2.Digest
	HypercubeDim  int
	StackingWidth int
}

// VerifyingKey is OpenVM's StarkVerifyingKey for one AIR (B §1.6).
type VerifyingKey struct {
	Preprocessed        *PreprocessedVK
	Width               TraceWidth
	NumPublicValues     int
	NeedRot             bool
	DAG                 *DAG
	MaxConstraintDegree uint8
	IsRequired          bool
	UnusedVariables     []Var
}

// Keygen errors (OpenVM KeygenError).
var (
	ErrWidthZero        = errors.New("air: zero main trace width")
	ErrNoConstraints    = errors.New("air: AIR must have at least one constraint or interaction")
	ErrEmptyMessage     = errors.New("air: interaction with an empty message")
	ErrDegreeExceeded   = errors.New("air: constraint degree exceeds max_constraint_degree")
	ErrPreprocessedData = errors.New("air: preprocessed data does not match the AIR")
)

// Keygen is AirKeygenBuilder::generate_pk minus the preprocessed commitment, which the caller
// passes (nil iff the AIR has no preprocessed trace). maxDegree is params.max_constraint_degree.
func Keygen(a Air, maxDegree int, required bool, pre *PreprocessedVK) (*VerifyingKey, error) {
	w := a.Width()
	if w.MainWidth() == 0 {
		return nil, fmt.Errorf("%w: %s", ErrWidthZero, a.Name())
	}
	if (pre != nil) != w.HasPreprocessed() {
		return nil, fmt.Errorf("%w: %s", ErrPreprocessedData, a.Name())
	}
	sc, err := Symbolic(a)
	if err != nil {
		return nil, err
	}
	if len(sc.Constraints) == 0 && len(sc.Interactions) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoConstraints, a.Name())
	}
	for i, it := range sc.Interactions {
		if len(it.Message) == 0 {
			return nil, fmt.Errorf("%w: %s interaction %d", ErrEmptyMessage, a.Name(), i)
		}
	}
	deg := sc.MaxConstraintDegree()
	if deg > maxDegree || deg > 255 {
		return nil, fmt.Errorf("%w: %s has degree %d > %d", ErrDegreeExceeded, a.Name(), deg, maxDegree)
	}
	dag, _ := BuildDAG(sc.Constraints, sc.Interactions)
	needRot := dag.MaxRotation() == 1
	return &VerifyingKey{
		Preprocessed:        pre,
		Width:               w,
		NumPublicValues:     a.NumPublicValues(),
		NeedRot:             needRot,
		DAG:                 dag,
		MaxConstraintDegree: uint8(deg),
		IsRequired:          required,
		UnusedVariables:     unusedVars(dag, w, needRot),
	}, nil
}

// unusedVars is find_unused_vars: preprocessed columns, then main parts in DAG numbering, columns
// ascending, offset 0 then 1 (offset 1 only when needRot).
func unusedVars(d *DAG, w TraceWidth, needRot bool) []Var {
	pre := make([][2]bool, w.Preprocessed)
	widths := w.MainWidths()
	main := make([][][2]bool, len(widths))
	for p, wp := range widths {
		main[p] = make([][2]bool, wp)
	}
	for _, n := range d.Nodes {
		if n.Op != OpVariable {
			continue
		}
		switch n.Var.Entry {
		case EntryPreprocessed:
			pre[n.Var.Index][n.Var.Offset] = true
		case EntryMain:
			main[n.Var.PartIndex][n.Var.Index][n.Var.Offset] = true
		}
	}
	out := []Var{}
	for i, pr := range pre {
		for off := 0; off < 2; off++ {
			if !pr[off] && (off == 0 || needRot) {
				out = append(out, Var{Entry: EntryPreprocessed, Offset: off, Index: i})
			}
		}
	}
	for p, cols := range main {
		for i, pr := range cols {
			for off := 0; off < 2; off++ {
				if !pr[off] && (off == 0 || needRot) {
					out = append(out, Var{Entry: EntryMain, PartIndex: p, Offset: off, Index: i})
				}
			}
		}
	}
	return out
}

// LinearConstraint is Σ coefficients[air]·height[air] < threshold.
type LinearConstraint struct {
	Coefficients []uint32
	Threshold    uint32
}

// impliedBy is LinearConstraint::is_implied_by.
func (c LinearConstraint) impliedBy(o LinearConstraint) bool {
	if c.Threshold < o.Threshold {
		return false
	}
	for i := range c.Coefficients {
		if i < len(o.Coefficients) && c.Coefficients[i] > o.Coefficients[i] {
			return false
		}
	}
	return true
}

// TraceHeightConstraints is the trace-height part of MultiStarkKeygenBuilder::generate_pk (B §1.7):
// per bus (ascending) Σ count_weight < p, then #interactions < maxInteractionCount, minimised.
// It also enforces message length + 1 ≤ 2^logMaxMessageLength.
func TraceHeightConstraints(vks []*VerifyingKey, logup params.LogUpSecurityParameters) ([]LinearConstraint, error) {
	n := len(vks)
	perBus := map[uint16]*LinearConstraint{}
	counts := make([]uint32, n)
	maxLen := uint64(1) << logup.LogMaxMessageLength
	for ai, vk := range vks {
		counts[ai] = uint32(len(vk.DAG.Interactions))
		for _, it := range vk.DAG.Interactions {
			if uint64(len(it.Message)+1) > maxLen {
				return nil, fmt.Errorf("air: interaction message with bus has length %d, more than max %d", len(it.Message)+1, maxLen)
			}
			c := perBus[it.Bus]
			if c == nil {
				c = &LinearConstraint{Coefficients: make([]uint32, n), Threshold: field.P}
				perBus[it.Bus] = c
			}
			c.Coefficients[ai] += it.CountWeight
		}
	}
	buses := make([]int, 0, len(perBus))
	for b := range perBus {
		buses = append(buses, int(b))
	}
	slices.Sort(buses)
	var all []LinearConstraint
	for _, b := range buses {
		all = append(all, *perBus[uint16(b)])
	}
	all = append(all, LinearConstraint{Coefficients: counts, Threshold: logup.MaxInteractionCount})
	kept := []LinearConstraint{}
	for _, c := range all {
		if slices.ContainsFunc(kept, func(k LinearConstraint) bool { return c.impliedBy(k) }) {
			continue
		}
		kept = slices.DeleteFunc(kept, func(k LinearConstraint) bool { return k.impliedBy(c) })
		kept = append(kept, c)
	}
	return kept, nil
}

// MultiVerifyingKey0 is MultiStarkVerifyingKey0, the value whose postcard bytes are prehashed.
type MultiVerifyingKey0 struct {
	Params                 params.SystemParams
	PerAir                 []*VerifyingKey
	TraceHeightConstraints []LinearConstraint
}

// MultiKeygen runs Keygen for every AIR (all optional unless listed in required) and the
// trace-height constraints. pre[i] is AIR i's preprocessed data (nil when none; pre may be nil).
func MultiKeygen(p params.SystemParams, airs []Air, required []bool, pre []*PreprocessedVK) (*MultiVerifyingKey0, error) {
	m := &MultiVerifyingKey0{Params: p}
	for i, a := range airs {
		var pd *PreprocessedVK
		if i < len(pre) {
			pd = pre[i]
		}
		vk, err := Keygen(a, p.MaxConstraintDegree, i < len(required) && required[i], pd)
		if err != nil {
			return nil, err
		}
		m.PerAir = append(m.PerAir, vk)
	}
	thc, err := TraceHeightConstraints(m.PerAir, p.Logup)
	if err != nil {
		return nil, err
	}
	m.TraceHeightConstraints = thc
	return m, nil
}

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// Montgomery returns the Montgomery form x·2^32 mod p that Plonky3 0.4.3 serializes.
func Montgomery(x field.Fp) uint32 { return uint32((uint64(x) << 32) % uint64(field.P)) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendZigzag(b []byte, v int64) []byte { return appendVarint(b, uint64((v<<1)^(v>>63))) }

// AppendPostcard appends the postcard bytes of SymbolicVariable.
func (v Var) AppendPostcard(b []byte) []byte {
	b = appendVarint(b, uint64(v.Entry))
	switch v.Entry {
	case EntryPreprocessed:
		b = appendVarint(b, uint64(v.Offset))
	case EntryMain:
		b = appendVarint(b, uint64(v.PartIndex))
		b = appendVarint(b, uint64(v.Offset))
	}
	return appendVarint(b, uint64(v.Index))
}

// AppendPostcard appends the postcard bytes of SymbolicExpressionNode.
func (n Node) AppendPostcard(b []byte) []byte {
	b = appendVarint(b, uint64(n.Op))
	switch n.Op {
	case OpVariable:
		b = n.Var.AppendPostcard(b)
	case OpConstant:
		b = appendVarint(b, uint64(Montgomery(n.C)))
	case OpAdd, OpSub, OpMul:
		b = appendVarint(b, uint64(n.L))
		b = appendVarint(b, uint64(n.R))
		b = appendVarint(b, uint64(n.Degree))
	case OpNeg:
		b = appendVarint(b, uint64(n.L))
		b = appendVarint(b, uint64(n.Degree))
	}
	return b
}

// AppendPostcard appends the postcard bytes of SymbolicConstraintsDag.
func (g *DAG) AppendPostcard(b []byte) []byte {
	b = appendVarint(b, uint64(len(g.Nodes)))
	for _, n := range g.Nodes {
		b = n.AppendPostcard(b)
	}
	b = appendVarint(b, uint64(len(g.ConstraintIdx)))
	for _, c := range g.ConstraintIdx {
		b = appendVarint(b, uint64(c))
	}
	b = appendVarint(b, uint64(len(g.Interactions)))
	for _, it := range g.Interactions {
		b = appendVarint(b, uint64(len(it.Message)))
		for _, m := range it.Message {
			b = appendVarint(b, uint64(m))
		}
		b = appendVarint(b, uint64(it.Count))
		b = appendVarint(b, uint64(it.Bus))
		b = appendVarint(b, uint64(it.CountWeight))
	}
	return b
}

// AppendPostcard appends the postcard bytes of StarkVerifyingKey.
func (vk *VerifyingKey) AppendPostcard(b []byte) []byte {
	if vk.Preprocessed == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		for _, f := range vk.Preprocessed.Commit {
			b = appendVarint(b, uint64(Montgomery(f)))
		}
		b = appendZigzag(b, int64(vk.Preprocessed.HypercubeDim))
		b = appendVarint(b, uint64(vk.Preprocessed.StackingWidth))
	}
	if vk.Width.HasPreprocessed() {
		b = append(b, 1)
		b = appendVarint(b, uint64(vk.Width.Preprocessed))
	} else {
		b = append(b, 0)
	}
	b = appendVarint(b, uint64(len(vk.Width.CachedMains)))
	for _, c := range vk.Width.CachedMains {
		b = appendVarint(b, uint64(c))
	}
	b = appendVarint(b, uint64(vk.Width.CommonMain))
	b = appendVarint(b, uint64(vk.NumPublicValues))
	b = appendBool(b, vk.NeedRot)
	b = vk.DAG.AppendPostcard(b)
	b = append(b, vk.MaxConstraintDegree)
	b = appendBool(b, vk.IsRequired)
	b = appendVarint(b, uint64(len(vk.UnusedVariables)))
	for _, v := range vk.UnusedVariables {
		b = v.AppendPostcard(b)
	}
	return b
}

// AppendPostcard appends the postcard bytes of MultiStarkVerifyingKey0.
func (m *MultiVerifyingKey0) AppendPostcard(b []byte) []byte {
	b = m.Params.AppendPostcard(b)
	b = appendVarint(b, uint64(len(m.PerAir)))
	for _, vk := range m.PerAir {
		b = vk.AppendPostcard(b)
	}
	b = appendVarint(b, uint64(len(m.TraceHeightConstraints)))
	for _, c := range m.TraceHeightConstraints {
		b = appendVarint(b, uint64(len(c.Coefficients)))
		for _, x := range c.Coefficients {
			b = appendVarint(b, uint64(x))
		}
		b = appendVarint(b, uint64(c.Threshold))
	}
	return b
}

// PreHashPreimage is u32_le(CODEC_VERSION) ‖ u64_le(len(vk_bytes)) ‖ vk_bytes.
func (m *MultiVerifyingKey0) PreHashPreimage() []byte { return preHashPreimage(m.AppendPostcard(nil)) }

// preHashPreimage is the pre_hash preimage of a key's postcard bytes vk.
func preHashPreimage(vk []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, CodecVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(vk)))
	return append(b, vk...)
}

// PreHash is vk_pre_hash = hash_slice(each preimage byte as a field element) (B §1.8).
func (m *MultiVerifyingKey0) PreHash() poseidon2.Digest { return m.PreHashWith(nil) }

// PreHashWith is PreHash with the hash's absorbs on a (nil: pure Go).
func (m *MultiVerifyingKey0) PreHashWith(a poseidon2.Absorber) poseidon2.Digest {
	return hashPreimage(a, m.PreHashPreimage())
}

// hashPreimage hashes each preimage byte as a field element.
func hashPreimage(a poseidon2.Absorber, pre []byte) poseidon2.Digest {
	fs := make([]field.Fp, len(pre))
	for i, x := range pre {
		fs[i] = field.Fp(x)
	}
	return poseidon2.HashSliceWith(a, fs)
}

// AppendKeyPostcard appends postcard(MultiStarkVerifyingKey): m's bytes, then pre_hash (8
// elements, each a varint of its Montgomery form). DecodeMultiVerifyingKey is its inverse.
func (m *MultiVerifyingKey0) AppendKeyPostcard(b []byte, preHash poseidon2.Digest) []byte {
	b = m.AppendPostcard(b)
	for _, f := range preHash {
		b = appendVarint(b, uint64(Montgomery(f)))
	}
	return b
}
