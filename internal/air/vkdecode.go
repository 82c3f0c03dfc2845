package air

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/postcard"
)

// Reading OpenVM's verifying key: the inverse of MultiVerifyingKey0.AppendPostcard plus the
// pre_hash (stark-backend v2.0.1 keygen/types.rs, MultiStarkVerifyingKey), and the checks that make
// a decoded key safe to prove with.

// ErrInvalidKey is wrapped by the errors of a key that decodes but cannot be proved with: an
// unsupported node kind, a variable outside the AIR's widths, a DAG out of order, a degree above
// the parameters', a pre_hash that is not the key's.
var ErrInvalidKey = errors.New("air: invalid OpenVM verifying key")

// Bounds of a decoded key, far above OpenVM's largest keys; they keep a hostile key from making
// the reader allocate much (lengths are also bounded by the bytes left).
const (
	maxKeyAirs    = 1 << 16
	maxKeyWidth   = 1 << 24
	maxKeyNodes   = 1 << 28
	maxKeyPublic  = 1 << 20
	maxKeyOffset  = 1 << 20
	maxKeyDegree  = 1 << 20
	maxKeyMessage = 1 << 16
)

// rInverse is 2^-32 mod p: Plonky3 0.4.3 serializes a BabyBear element by its Montgomery form
// x·2^32 mod p.
var rInverse = field.NewU64(1 << 32).Inverse()

// readFp reads one field element (a u32 varint of its Montgomery form, < p).
func readFp(r *postcard.Reader, what string) field.Fp {
	m := r.U32(what)
	if r.Err() == nil && m >= field.P {
		r.Failf(what, "field element %d ≥ p", m)
		return 0
	}
	return field.Fp(m).Mul(rInverse)
}

func readDigest(r *postcard.Reader, what string) poseidon2.Digest {
	var d poseidon2.Digest
	for i := range d {
		d[i] = readFp(r, what)
	}
	return d
}

// readVar reads a SymbolicVariable: the Entry variant with its fields, then the index.
func readVar(r *postcard.Reader, what string) Var {
	var v Var
	v.Entry = Entry(r.Variant(what+".entry", 4))
	switch v.Entry {
	case EntryPreprocessed:
		v.Offset = r.Usize(what+".offset", maxKeyOffset)
	case EntryMain:
		v.PartIndex = r.Usize(what+".part_index", maxKeyWidth)
		v.Offset = r.Usize(what+".offset", maxKeyOffset)
	}
	v.Index = r.Usize(what+".index", maxKeyWidth)
	return v
}

func readNode(r *postcard.Reader) Node {
	const what = "node"
	n := Node{Op: Op(r.Variant(what, 9))}
	switch n.Op {
	case OpVariable:
		n.Var = readVar(r, "node.variable")
	case OpConstant:
		n.C = readFp(r, "node.constant")
	case OpAdd, OpSub, OpMul:
		n.L = r.Usize("node.left_idx", maxKeyNodes)
		n.R = r.Usize("node.right_idx", maxKeyNodes)
		n.Degree = r.Usize("node.degree_multiple", maxKeyDegree)
	case OpNeg:
		n.L = r.Usize("node.idx", maxKeyNodes)
		n.Degree = r.Usize("node.degree_multiple", maxKeyDegree)
	}
	return n
}

func readDAG(r *postcard.Reader) *DAG {
	g := &DAG{}
	g.Nodes = make([]Node, r.Len("nodes", 1, maxKeyNodes))
	for i := range g.Nodes {
		g.Nodes[i] = readNode(r)
	}
	g.ConstraintIdx = make([]int, r.Len("constraint_idx", 1, maxKeyNodes))
	for i := range g.ConstraintIdx {
		g.ConstraintIdx[i] = r.Usize("constraint_idx", maxKeyNodes)
	}
	g.Interactions = make([]DAGInteraction, r.Len("interactions", 4, maxKeyNodes))
	for i := range g.Interactions {
		it := &g.Interactions[i]
		it.Message = make([]int, r.Len("interaction.message", 1, maxKeyMessage))
		for j := range it.Message {
			it.Message[j] = r.Usize("interaction.message", maxKeyNodes)
		}
		it.Count = r.Usize("interaction.count", maxKeyNodes)
		it.Bus = r.U16("interaction.bus_index")
		it.CountWeight = r.U32("interaction.count_weight")
	}
	return g
}

func readAirKey(r *postcard.Reader) *VerifyingKey {
	vk := &VerifyingKey{}
	if r.Option("preprocessed_data") {
		vk.Preprocessed = &PreprocessedVK{
			Commit:        readDigest(r, "preprocessed_data.commit"),
			HypercubeDim:  r.Isize("preprocessed_data.hypercube_dim", 64),
			StackingWidth: r.Usize("preprocessed_data.stacking_width", maxKeyWidth),
		}
	}
	if r.Option("width.preprocessed") {
		vk.Width.Preprocessed = r.Usize("width.preprocessed", maxKeyWidth)
		if r.Err() == nil && vk.Width.Preprocessed == 0 {
			r.Failf("width.preprocessed", "Some(0): a preprocessed trace of width 0 is not supported")
		}
	}
	vk.Width.CachedMains = make([]int, r.Len("width.cached_mains", 1, maxKeyWidth))
	for i := range vk.Width.CachedMains {
		vk.Width.CachedMains[i] = r.Usize("width.cached_mains", maxKeyWidth)
	}
	vk.Width.CommonMain = r.Usize("width.common_main", maxKeyWidth)
	vk.NumPublicValues = r.Usize("num_public_values", maxKeyPublic)
	vk.NeedRot = r.Bool("need_rot")
	vk.DAG = readDAG(r)
	vk.MaxConstraintDegree = r.Byte("max_constraint_degree")
	vk.IsRequired = r.Bool("is_required")
	vk.UnusedVariables = make([]Var, r.Len("unused_variables", 2, maxKeyNodes))
	for i := range vk.UnusedVariables {
		vk.UnusedVariables[i] = readVar(r, "unused_variable")
	}
	return vk
}

// DecodeMultiVerifyingKey decodes postcard(MultiStarkVerifyingKey) as OpenVM stark-backend
// v2.0.1 writes it (`metalprove vk export` writes the same bytes) and checks it with
// ValidateImported: the key, and the pre_hash it carries (equal to the key's own). Every
// length is bounded before allocation, trailing bytes are rejected, and so are unknown enum
// variants (the error names what was being read and the byte offset); AppendPostcard of the
// result, followed by the pre_hash, gives b back exactly.
func DecodeMultiVerifyingKey(b []byte) (*MultiVerifyingKey0, poseidon2.Digest, error) {
	return DecodeMultiVerifyingKeyWith(nil, b)
}

// DecodeMultiVerifyingKeyWith is DecodeMultiVerifyingKey with the pre_hash recomputed through a
// (nil: pure Go; the host device's SIMD absorber makes Keccak-f's 283 kB key's hash several times
// faster).
func DecodeMultiVerifyingKeyWith(a poseidon2.Absorber, b []byte) (*MultiVerifyingKey0, poseidon2.Digest, error) {
	r := postcard.NewReader(b)
	m := &MultiVerifyingKey0{Params: params.ReadPostcard(r)}
	m.PerAir = make([]*VerifyingKey, r.Len("per_air", 8, maxKeyAirs))
	for i := range m.PerAir {
		m.PerAir[i] = readAirKey(r)
		if err := r.Err(); err != nil {
			return nil, poseidon2.Digest{}, fmt.Errorf("OpenVM verifying key: per_air[%d]: %w", i, err)
		}
	}
	m.TraceHeightConstraints = make([]LinearConstraint, r.Len("trace_height_constraints", 2, maxKeyAirs))
	for i := range m.TraceHeightConstraints {
		c := &m.TraceHeightConstraints[i]
		c.Coefficients = make([]uint32, r.Len("trace_height_constraint.coefficients", 1, maxKeyAirs))
		for j := range c.Coefficients {
			c.Coefficients[j] = r.U32("trace_height_constraint.coefficient")
		}
		c.Threshold = r.U32("trace_height_constraint.threshold")
	}
	keyBytes := b[:r.Offset()] // MultiStarkVerifyingKey0's bytes: the reader accepts canonical encodings only
	pre := readDigest(r, "pre_hash")
	r.End("MultiStarkVerifyingKey")
	if err := r.Err(); err != nil {
		return nil, poseidon2.Digest{}, fmt.Errorf("OpenVM verifying key: %w", err)
	}
	if err := m.ValidateImported(); err != nil {
		return nil, poseidon2.Digest{}, err
	}
	if got := hashPreimage(a, preHashPreimage(keyBytes)); got != pre {
		return nil, poseidon2.Digest{}, fmt.Errorf("%w: its pre_hash %v is not the hash of its contents %v (the key was altered)", ErrInvalidKey, pre, got)
	}
	return m, pre, nil
}

// ValidateImported checks that a multi-AIR key not made by this program's keygen can be proved
// with: valid parameters; per AIR a non-empty main trace, preprocessed data exactly when it has a
// preprocessed width (with a height within the stacked height), at least one constraint or
// interaction, a DAG in topological order whose variables lie within the AIR's widths, public
// values and rotation (no challenges: v2 has no challenge phase), sorted constraint indices,
// non-empty interaction messages within the LogUp message bound, constraint and interaction
// degrees (from the DAG's structure) within the AIR's max_constraint_degree and that within the
// parameters'; trace-height constraints with one coefficient per AIR. Errors wrap ErrInvalidKey
// and name the AIR and node.
func (m *MultiVerifyingKey0) ValidateImported() error {
	p := m.Params
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: parameters: %v", ErrInvalidKey, err)
	}
	if len(m.PerAir) == 0 {
		return fmt.Errorf("%w: no AIRs", ErrInvalidKey)
	}
	for i, vk := range m.PerAir {
		if err := vk.validateImported(p); err != nil {
			return fmt.Errorf("%w: AIR %d: %v", ErrInvalidKey, i, err)
		}
	}
	for i, c := range m.TraceHeightConstraints {
		if len(c.Coefficients) != len(m.PerAir) {
			return fmt.Errorf("%w: trace-height constraint %d has %d coefficients for %d AIRs", ErrInvalidKey, i, len(c.Coefficients), len(m.PerAir))
		}
	}
	return nil
}

func (vk *VerifyingKey) validateImported(p params.SystemParams) error {
	w := vk.Width
	if w.MainWidth() == 0 {
		return errors.New("zero main trace width")
	}
	if (vk.Preprocessed != nil) != w.HasPreprocessed() {
		return fmt.Errorf("preprocessed data present: %v, preprocessed width: %d", vk.Preprocessed != nil, w.Preprocessed)
	}
	if pre := vk.Preprocessed; pre != nil {
		if lh := pre.HypercubeDim + p.LSkip; lh < 0 || lh > p.LogStackedHeight() {
			return fmt.Errorf("preprocessed trace of height 2^%d outside [1, 2^%d]", lh, p.LogStackedHeight())
		}
		if pre.StackingWidth < 1 {
			return errors.New("preprocessed stacking width 0")
		}
	}
	g := vk.DAG
	if len(g.ConstraintIdx) == 0 && len(g.Interactions) == 0 {
		return errors.New("no constraint and no interaction")
	}
	if int(vk.MaxConstraintDegree) > p.MaxConstraintDegree {
		return fmt.Errorf("max_constraint_degree %d exceeds the parameters' %d", vk.MaxConstraintDegree, p.MaxConstraintDegree)
	}
	if err := validVars(vk, g); err != nil {
		return err
	}
	deg := make([]int, len(g.Nodes))
	for i, n := range g.Nodes {
		switch n.Op {
		case OpVariable:
			deg[i] = n.Var.DegreeMultiple()
		case OpIsFirstRow, OpIsLastRow, OpIsTransition:
			deg[i] = 1
		case OpConstant:
		case OpAdd, OpSub, OpMul, OpNeg:
			if n.L >= i || (n.Op != OpNeg && n.R >= i) {
				return fmt.Errorf("node %d (%v) reads a later node: the DAG is not in topological order", i, n)
			}
			switch n.Op {
			case OpNeg:
				deg[i] = deg[n.L]
			case OpMul:
				deg[i] = min(deg[n.L]+deg[n.R], maxKeyDegree)
			default:
				deg[i] = max(deg[n.L], deg[n.R])
			}
		}
	}
	maxDeg := int(vk.MaxConstraintDegree)
	for k, c := range g.ConstraintIdx {
		if c >= len(g.Nodes) {
			return fmt.Errorf("constraint %d is node %d of %d", k, c, len(g.Nodes))
		}
		if k > 0 && c <= g.ConstraintIdx[k-1] {
			return fmt.Errorf("constraint_idx is not strictly increasing at %d (%d after %d)", k, c, g.ConstraintIdx[k-1])
		}
		if deg[c] > maxDeg {
			return fmt.Errorf("constraint %d (node %d) has degree %d > max_constraint_degree %d", k, c, deg[c], maxDeg)
		}
	}
	maxLen := uint64(1) << min(p.Logup.LogMaxMessageLength, 63)
	for k, it := range g.Interactions {
		if len(it.Message) == 0 {
			return fmt.Errorf("interaction %d has an empty message", k)
		}
		if uint64(len(it.Message)+1) > maxLen {
			return fmt.Errorf("interaction %d has a message of %d fields, more than the LogUp bound 2^%d − 1", k, len(it.Message), p.Logup.LogMaxMessageLength)
		}
		for _, x := range append([]int{it.Count}, it.Message...) {
			if x >= len(g.Nodes) {
				return fmt.Errorf("interaction %d reads node %d of %d", k, x, len(g.Nodes))
			}
			if deg[x] > maxDeg {
				return fmt.Errorf("interaction %d reads node %d of degree %d > max_constraint_degree %d", k, x, deg[x], maxDeg)
			}
		}
	}
	for _, v := range vk.UnusedVariables {
		if err := validVar(vk, v); err != nil {
			return fmt.Errorf("unused_variables: %v", err)
		}
	}
	return nil
}

func validVars(vk *VerifyingKey, g *DAG) error {
	for i, n := range g.Nodes {
		if n.Op != OpVariable {
			continue
		}
		if err := validVar(vk, n.Var); err != nil {
			return fmt.Errorf("node %d: %v", i, err)
		}
	}
	return nil
}

// validVar checks that v names a value the prover has: a column of the AIR's parts at offset 0
// or 1 (1 only with need_rot), or a public value.
func validVar(vk *VerifyingKey, v Var) error {
	w := vk.Width
	switch v.Entry {
	case EntryChallenge:
		return fmt.Errorf("unsupported node kind: challenge variable %v (stark-backend v2 has no challenge phase)", v)
	case EntryPublic:
		if v.Index >= vk.NumPublicValues {
			return fmt.Errorf("public value %d of %d", v.Index, vk.NumPublicValues)
		}
		return nil
	case EntryPreprocessed:
		if v.Index >= w.Preprocessed {
			return fmt.Errorf("variable %v: preprocessed width is %d", v, w.Preprocessed)
		}
	case EntryMain:
		parts := w.MainWidths()
		if v.PartIndex >= len(parts) {
			return fmt.Errorf("variable %v: the AIR has %d main parts", v, len(parts))
		}
		if v.Index >= parts[v.PartIndex] {
			return fmt.Errorf("variable %v: main part %d has width %d", v, v.PartIndex, parts[v.PartIndex])
		}
	}
	if v.Offset > 1 {
		return fmt.Errorf("unsupported rotation: variable %v has row offset %d (only 0 and 1 exist)", v, v.Offset)
	}
	if v.Offset == 1 && !vk.NeedRot {
		return fmt.Errorf("variable %v reads the next row but need_rot is false", v)
	}
	return nil
}
