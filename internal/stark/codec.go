package stark

// Binary proof codec (spec A §7.1–§7.7), byte-for-byte the encoding of OpenVM stark-backend
// v2.0.1 `codec.rs`/`proof.rs` (CODEC_VERSION 3).
//
// Decoding policy (see DecodeLimits): every length read from the input is checked, before anything
// is allocated, against (a) the bytes that remain — a list of n elements of e > 0 encoded bytes each
// needs n·e bytes — (b) a limit derived from the system parameters (or the universal limits), and
// (c) an allocation budget proportional to the input length, which bounds lists whose elements
// can be encoded in zero bytes (empty rows, empty Merkle paths). Memory used by a decode is thus
// O(len(input)) whatever the length prefixes say.
//
// The decoder is slightly stricter than Rust's on encodings that Rust's encoder can never produce
// (so that a successful decode always re-encodes to the identical bytes): depth1 must be 0 when
// R = 1 or nq0 = 0; round 1 must have a query when nq0 > 0 and R > 1 (Rust's encoder panics
// there); a Merkle depth below 0 (depth1 − (r−1) < 0) is rejected when that round has queries.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// CodecVersion is the proof codec version written first in every encoded Proof.
const CodecVersion uint32 = 3

const (
	fpBytes     = field.FpBytes
	fp4Bytes    = field.Fp4Bytes
	digestBytes = poseidon2.DigestSize * fpBytes
	u32Bytes    = 4
)

// ErrUnencodable is wrapped by every encoder error: the proof has a shape or a value the binary
// format cannot express.
var ErrUnencodable = errors.New("proof not encodable")

// DecodeError reports why and where decoding failed.
type DecodeError struct {
	// Offset is the byte offset (in the decoded buffer) where the offending item starts.
	Offset int
	// Field names the item, e.g. "whir.initial_round_opened_rows[1][3][0][2]".
	Field string
	Msg   string
	// Err is an underlying error (e.g. *field.RangeError), if any.
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("proof decode: %s at byte %d: %s", e.Field, e.Offset, e.Msg)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeLimits bound every length the decoder accepts. LimitsFor derives them from the system
// parameters; UniversalLimits holds for every valid parameter set. A limit says "at most"; the
// exact shape is checked by the shape checks (shape.go) and the verifier.
type DecodeLimits struct {
	MaxAirs              int // num_airs, len(public_values): VK-independent bound 2^16
	MaxCachedCommitments int // per present AIR
	MaxPublicValues      int // per AIR
	MaxLogHeight         int // TraceVData.log_height
	MaxGkrLayers         int // len(claims_per_layer)
	MaxPolyCoeffs        int // univariate round coefficients, batch round-polynomial length
	MaxSumcheckRounds    int // batch n_max, stacking sumcheck rounds
	MaxParts             int // parts per present AIR in column_openings
	MaxColumnOpenings    int // openings per part
	MaxCommits           int // stacking openings / WHIR commitments C
	MaxStackedWidth      int // W_j, len(stacking_openings[j])
	MaxWhirRounds        int // R
	MaxWhirK             int // k
	MaxQueries           int // queries per WHIR round
	MaxMerkleDepth       int // Merkle path length
	MaxFinalPoly         int // len(final_poly)
}

// UniversalLimits are limits valid for any parameter set this code accepts (RS domains ≤ 2^27).
func UniversalLimits() DecodeLimits {
	return DecodeLimits{
		MaxAirs:              1 << 16,
		MaxCachedCommitments: 1 << 16,
		MaxPublicValues:      1 << 24,
		MaxLogHeight:         params.TwoAdicity,
		MaxGkrLayers:         128,
		MaxPolyCoeffs:        1 << 20,
		MaxSumcheckRounds:    params.TwoAdicity,
		MaxParts:             1<<16 + 2,
		MaxColumnOpenings:    1 << 28,
		MaxCommits:           1 << 16,
		MaxStackedWidth:      1 << 24,
		MaxWhirRounds:        params.TwoAdicity,
		MaxWhirK:             params.TwoAdicity,
		MaxQueries:           1 << 16,
		MaxMerkleDepth:       params.TwoAdicity,
		MaxFinalPoly:         1 << params.TwoAdicity,
	}
}

// LimitsFor derives decode limits from p (which should be valid): lists the parameters fix are
// bounded by their exact value, VK-dependent ones by what the parameters allow (Σ stacked widths
// ≤ w_stack bounds the number of commitments, cached commitments and parts; log_height ≤ m).
func LimitsFor(p params.SystemParams) DecodeLimits {
	u := UniversalLimits()
	m := p.LogStackedHeight()
	n := 1 << max(p.LSkip, 0)
	d := p.MaxConstraintDegree
	ws := max(p.WStack, 1)
	maxQ := 0
	for _, r := range p.Whir.Rounds {
		maxQ = max(maxQ, r.NumQueries)
	}
	l := DecodeLimits{
		MaxAirs:              u.MaxAirs,
		MaxCachedCommitments: ws,
		MaxPublicValues:      u.MaxPublicValues,
		MaxLogHeight:         m,
		MaxGkrLayers:         p.LSkip + m + 33,
		MaxPolyCoeffs:        max((d+1)*(n-1)+1, 2*(n-1)+1, d+1),
		MaxSumcheckRounds:    max(p.NStack, 0),
		MaxParts:             ws + 2,
		MaxColumnOpenings:    u.MaxColumnOpenings,
		MaxCommits:           ws,
		MaxStackedWidth:      ws,
		MaxWhirRounds:        max(p.NumWhirRounds(), 1),
		MaxWhirK:             max(p.Whir.K, 0),
		MaxQueries:           maxQ,
		MaxMerkleDepth:       max(m+p.LogBlowup-p.Whir.K, 0),
		MaxFinalPoly:         1 << min(max(p.LogFinalPolyLen(), 0), params.TwoAdicity),
	}
	if s := p.NStack; s >= 0 && s < 30 {
		l.MaxColumnOpenings = min(u.MaxColumnOpenings, 2*ws<<s)
	}
	return l
}

// ---------------------------------------------------------------------------------------------
// Encoder

type encoder struct {
	b   []byte
	err error
}

func (e *encoder) fail(name, format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("%w: %s: %s", ErrUnencodable, name, fmt.Sprintf(format, args...))
	}
}

// usize writes a length/count; it fails for values outside [0, 2^32).
func (e *encoder) usize(v int, name string) {
	if v < 0 || uint64(v) > math.MaxUint32 {
		e.fail(name, "value %d does not fit a u32", v)
		return
	}
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v))
}

func (e *encoder) fp(v field.Fp, name string) {
	if uint32(v) >= field.P {
		e.fail(name, "value %d is not a canonical field element", uint32(v))
	}
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v))
}

func (e *encoder) fps(v []field.Fp, name string) {
	for _, x := range v {
		e.fp(x, name)
	}
}

func (e *encoder) fp4(v field.Fp4, name string) {
	for _, c := range v {
		e.fp(c, name)
	}
}

func (e *encoder) fp4s(v []field.Fp4, name string) {
	for _, x := range v {
		e.fp4(x, name)
	}
}

func (e *encoder) digest(v Digest, name string) {
	for _, c := range v {
		e.fp(c, name)
	}
}

func (e *encoder) digests(v []Digest, name string) {
	for _, x := range v {
		e.digest(x, name)
	}
}

// MarshalBinary encodes p exactly as OpenVM's `Proof::encode` (spec A §7.2). It fails (wrapping
// ErrUnencodable) for proofs the format cannot express.
func (p *Proof) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

// AppendBinary appends the encoding of p to b.
func (p *Proof) AppendBinary(b []byte) ([]byte, error) {
	e := &encoder{b: b}
	e.proof(p)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

func (e *encoder) proof(p *Proof) {
	e.b = binary.LittleEndian.AppendUint32(e.b, CodecVersion)
	e.digest(p.CommonMainCommit, "common_main_commit")
	n := len(p.TraceVData)
	e.usize(n, "num_airs")
	for c := 0; c < n; c += 8 {
		var byt byte
		for i := 0; i < 8 && c+i < n; i++ {
			if p.TraceVData[c+i] != nil {
				byt |= 1 << i
			}
		}
		e.b = append(e.b, byt)
	}
	for _, v := range p.TraceVData {
		if v == nil {
			continue
		}
		e.usize(v.LogHeight, "trace_vdata.log_height")
		e.usize(len(v.CachedCommitments), "trace_vdata.cached_commitments")
		e.digests(v.CachedCommitments, "trace_vdata.cached_commitments")
	}
	e.usize(len(p.PublicValues), "public_values")
	for _, pv := range p.PublicValues {
		e.usize(len(pv), "public_values[]")
		e.fps(pv, "public_values")
	}
	e.gkr(&p.GKR)
	e.batch(&p.BatchConstraint)
	e.stacking(&p.Stacking)
	e.whir(&p.Whir)
}

func (e *encoder) gkr(g *GkrProof) {
	e.fp(g.LogupPowWitness, "gkr.logup_pow_witness")
	e.fp4(g.Q0Claim, "gkr.q0_claim")
	L := len(g.ClaimsPerLayer)
	e.usize(L, "gkr.claims_per_layer")
	for _, c := range g.ClaimsPerLayer {
		e.fp4(c.PXi0, "gkr.claims_per_layer")
		e.fp4(c.PXi1, "gkr.claims_per_layer")
		e.fp4(c.QXi0, "gkr.claims_per_layer")
		e.fp4(c.QXi1, "gkr.claims_per_layer")
	}
	if want := max(L-1, 0); len(g.SumcheckPolys) != want {
		e.fail("gkr.sumcheck_polys", "%d layers, the format implies %d (len(claims_per_layer) − 1)", len(g.SumcheckPolys), want)
		return
	}
	for i, layer := range g.SumcheckPolys {
		if len(layer) != i+1 {
			e.fail(fmt.Sprintf("gkr.sumcheck_polys[%d]", i), "%d entries, the format implies %d", len(layer), i+1)
			return
		}
		for _, ev := range layer {
			e.fp4s(ev[:], "gkr.sumcheck_polys")
		}
	}
}

func (e *encoder) batch(bc *BatchConstraintProof) {
	P := len(bc.NumeratorTermPerAir)
	e.usize(P, "batch.numerator_term_per_air")
	e.fp4s(bc.NumeratorTermPerAir, "batch.numerator_term_per_air")
	if len(bc.DenominatorTermPerAir) != P {
		e.fail("batch.denominator_term_per_air", "length %d, must equal len(numerator_term_per_air) = %d", len(bc.DenominatorTermPerAir), P)
		return
	}
	e.fp4s(bc.DenominatorTermPerAir, "batch.denominator_term_per_air")
	e.usize(len(bc.UnivariateRoundCoeffs), "batch.univariate_round_coeffs")
	e.fp4s(bc.UnivariateRoundCoeffs, "batch.univariate_round_coeffs")
	nMax := len(bc.SumcheckRoundPolys)
	e.usize(nMax, "batch.sumcheck_round_polys")
	if nMax > 0 {
		w := len(bc.SumcheckRoundPolys[0])
		e.usize(w, "batch.sumcheck_round_polys[0]")
		for i, r := range bc.SumcheckRoundPolys {
			if len(r) != w {
				e.fail(fmt.Sprintf("batch.sumcheck_round_polys[%d]", i), "length %d, the format requires every round to have len(round 0) = %d", len(r), w)
				return
			}
			e.fp4s(r, "batch.sumcheck_round_polys")
		}
	}
	if len(bc.ColumnOpenings) != P {
		e.fail("batch.column_openings", "%d AIRs, the format implies len(numerator_term_per_air) = %d", len(bc.ColumnOpenings), P)
		return
	}
	for _, parts := range bc.ColumnOpenings {
		e.usize(len(parts), "batch.column_openings[]")
		for _, part := range parts {
			e.usize(len(part), "batch.column_openings[][]")
			e.fp4s(part, "batch.column_openings")
		}
	}
}

func (e *encoder) stacking(st *StackingProof) {
	e.usize(len(st.UnivariateRoundCoeffs), "stacking.univariate_round_coeffs")
	e.fp4s(st.UnivariateRoundCoeffs, "stacking.univariate_round_coeffs")
	e.usize(len(st.SumcheckRoundPolys), "stacking.sumcheck_round_polys")
	for _, r := range st.SumcheckRoundPolys {
		e.fp4s(r[:], "stacking.sumcheck_round_polys")
	}
	e.usize(len(st.StackingOpenings), "stacking.stacking_openings")
	for _, o := range st.StackingOpenings {
		e.usize(len(o), "stacking.stacking_openings[]")
		e.fp4s(o, "stacking.stacking_openings")
	}
}

func (e *encoder) whir(w *WhirProof) {
	e.fp(w.MuPowWitness, "whir.mu_pow_witness")
	S := len(w.WhirSumcheckPolys)
	e.usize(S, "whir.whir_sumcheck_polys")
	for _, s := range w.WhirSumcheckPolys {
		e.fp4s(s[:], "whir.whir_sumcheck_polys")
	}
	e.usize(len(w.CodewordCommits), "whir.codeword_commits")
	e.digests(w.CodewordCommits, "whir.codeword_commits")
	R := len(w.CodewordCommits) + 1
	if S%R != 0 {
		e.fail("whir.whir_sumcheck_polys", "S = %d is not a multiple of R = len(codeword_commits)+1 = %d", S, R)
		return
	}
	k := S / R
	if len(w.OODValues) != R-1 {
		e.fail("whir.ood_values", "length %d, the format implies R−1 = %d", len(w.OODValues), R-1)
		return
	}
	e.fp4s(w.OODValues, "whir.ood_values")
	if len(w.FoldingPowWitnesses) != S {
		e.fail("whir.folding_pow_witnesses", "length %d, the format implies S = %d", len(w.FoldingPowWitnesses), S)
		return
	}
	e.fps(w.FoldingPowWitnesses, "whir.folding_pow_witnesses")
	if len(w.QueryPhasePowWitnesses) != R {
		e.fail("whir.query_phase_pow_witnesses", "length %d, the format implies R = %d", len(w.QueryPhasePowWitnesses), R)
		return
	}
	e.fps(w.QueryPhasePowWitnesses, "whir.query_phase_pow_witnesses")
	C := len(w.InitialRoundOpenedRows)
	if C == 0 {
		e.fail("whir.initial_round_opened_rows", "no commitments (C must be > 0)")
		return
	}
	e.usize(C, "whir.initial_round_opened_rows")
	if len(w.InitialRoundMerkleProofs) != C {
		e.fail("whir.initial_round_merkle_proofs", "%d commitments, want C = %d", len(w.InitialRoundMerkleProofs), C)
		return
	}
	nq0 := len(w.InitialRoundOpenedRows[0])
	e.usize(nq0, "whir.initial_round_opened_rows[0]")
	anyQueries := nq0 > 0
	for _, v := range w.CodewordOpenedValues {
		anyQueries = anyQueries || len(v) > 0
	}
	rowsPerQuery := 0
	if anyQueries {
		if k > 62 {
			e.fail("whir.whir_sumcheck_polys", "k = S/R = %d is too large", k)
			return
		}
		rowsPerQuery = 1 << k
	}
	if nq0 > 0 {
		depth0 := len(w.InitialRoundMerkleProofs[0])
		if depth0 > 0 {
			depth0 = len(w.InitialRoundMerkleProofs[0][0])
		}
		e.usize(depth0, "whir.initial_round_merkle_proofs[0][0]")
		widths := make([]int, C)
		for j, rows := range w.InitialRoundOpenedRows {
			if len(rows) > 0 && len(rows[0]) > 0 {
				widths[j] = len(rows[0][0])
			}
			e.usize(widths[j], fmt.Sprintf("whir.initial_round_opened_rows[%d]", j))
		}
		for j, rows := range w.InitialRoundOpenedRows {
			if len(rows) != nq0 {
				e.fail(fmt.Sprintf("whir.initial_round_opened_rows[%d]", j), "%d queries, the format implies nq0 = %d", len(rows), nq0)
				return
			}
			for q, group := range rows {
				if len(group) != rowsPerQuery {
					e.fail(fmt.Sprintf("whir.initial_round_opened_rows[%d][%d]", j, q), "%d rows, the format implies 2^k = %d", len(group), rowsPerQuery)
					return
				}
				for t, row := range group {
					if len(row) != widths[j] {
						e.fail(fmt.Sprintf("whir.initial_round_opened_rows[%d][%d][%d]", j, q, t), "width %d, the format implies W_%d = %d", len(row), j, widths[j])
						return
					}
					e.fps(row, "whir.initial_round_opened_rows")
				}
			}
		}
		for j, proofs := range w.InitialRoundMerkleProofs {
			if len(proofs) != nq0 {
				e.fail(fmt.Sprintf("whir.initial_round_merkle_proofs[%d]", j), "%d queries, the format implies nq0 = %d", len(proofs), nq0)
				return
			}
			for q, pr := range proofs {
				if len(pr) != depth0 {
					e.fail(fmt.Sprintf("whir.initial_round_merkle_proofs[%d][%d]", j, q), "depth %d, the format implies depth0 = %d", len(pr), depth0)
					return
				}
				e.digests(pr, "whir.initial_round_merkle_proofs")
			}
		}
	} else {
		for j := range C {
			if len(w.InitialRoundOpenedRows[j]) != 0 || len(w.InitialRoundMerkleProofs[j]) != 0 {
				e.fail(fmt.Sprintf("whir.initial_round_opened_rows[%d]", j), "has queries while commitment 0 has none (nq0 = 0)")
				return
			}
		}
	}
	if len(w.CodewordOpenedValues) != R-1 {
		e.fail("whir.codeword_opened_values", "%d rounds, the format implies R−1 = %d", len(w.CodewordOpenedValues), R-1)
		return
	}
	if len(w.CodewordMerkleProofs) != R-1 {
		e.fail("whir.codeword_merkle_proofs", "%d rounds, the format implies R−1 = %d", len(w.CodewordMerkleProofs), R-1)
		return
	}
	for r1, vals := range w.CodewordOpenedValues {
		e.usize(len(vals), fmt.Sprintf("whir.codeword_opened_values[%d]", r1))
		for q, v := range vals {
			if len(v) != rowsPerQuery {
				e.fail(fmt.Sprintf("whir.codeword_opened_values[%d][%d]", r1, q), "%d values, the format implies 2^k = %d", len(v), rowsPerQuery)
				return
			}
			e.fp4s(v, "whir.codeword_opened_values")
		}
	}
	depth1 := 0
	if R > 1 && nq0 > 0 {
		if len(w.CodewordMerkleProofs[0]) == 0 {
			e.fail("whir.codeword_merkle_proofs[0]", "round 1 has no queries while nq0 = %d > 0 (depth1 is not expressible)", nq0)
			return
		}
		depth1 = len(w.CodewordMerkleProofs[0][0])
	}
	e.usize(depth1, "whir.codeword_merkle_proofs[0][0]")
	for r1, proofs := range w.CodewordMerkleProofs {
		if len(proofs) != len(w.CodewordOpenedValues[r1]) {
			e.fail(fmt.Sprintf("whir.codeword_merkle_proofs[%d]", r1), "%d queries, the format implies len(codeword_opened_values[%d]) = %d", len(proofs), r1, len(w.CodewordOpenedValues[r1]))
			return
		}
		for q, pr := range proofs {
			if len(pr) != depth1-r1 {
				e.fail(fmt.Sprintf("whir.codeword_merkle_proofs[%d][%d]", r1, q), "depth %d, the format implies depth1 − %d = %d", len(pr), r1, depth1-r1)
				return
			}
			e.digests(pr, "whir.codeword_merkle_proofs")
		}
	}
	e.usize(len(w.FinalPoly), "whir.final_poly")
	e.fp4s(w.FinalPoly, "whir.final_poly")
}

// EncodeWhirProof encodes a WhirProof on its own (spec A §7.6).
func EncodeWhirProof(w *WhirProof) ([]byte, error) {
	e := &encoder{}
	e.whir(w)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// EncodeStackingProof encodes a StackingProof on its own (spec A §7.5).
func EncodeStackingProof(st *StackingProof) ([]byte, error) {
	e := &encoder{}
	e.stacking(st)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// ---------------------------------------------------------------------------------------------
// Decoder

// Allocation budget: slots (slice elements or headers) the decoder may allocate, per input byte
// plus a constant. A valid proof needs at most about one slot per 2 input bytes.
const (
	budgetPerByte = 2
	budgetBase    = 1 << 12
)

type decoder struct {
	b      []byte
	off    int
	lim    DecodeLimits
	budget int
	// field path of the item being decoded, rendered only on error
	name string
	ix   [4]int
	nix  int
}

func newDecoder(b []byte, lim *DecodeLimits) *decoder {
	d := &decoder{b: b, budget: budgetPerByte*len(b) + budgetBase}
	if lim != nil {
		d.lim = *lim
	} else {
		d.lim = UniversalLimits()
	}
	return d
}

// at sets the name (and indices) of the item being decoded.
func (d *decoder) at(name string, ix ...int) {
	d.name = name
	d.nix = copy(d.ix[:], ix)
}

func (d *decoder) fieldName() string {
	if d.nix == 0 {
		return d.name
	}
	var sb strings.Builder
	sb.WriteString(d.name)
	for _, i := range d.ix[:d.nix] {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte(']')
	}
	return sb.String()
}

func (d *decoder) errAt(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Field: d.fieldName(), Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

// need checks that n bytes remain.
func (d *decoder) need(n int, what string) error {
	if n > d.remaining() {
		return d.errAt(d.off, "truncated: %s needs %d bytes, %d remain", what, n, d.remaining())
	}
	return nil
}

func (d *decoder) u32() (uint32, error) {
	if err := d.need(u32Bytes, "u32"); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += u32Bytes
	return v, nil
}

// count reads a usize and checks it against limit and, for elemBytes > 0, against the bytes
// that remain (count·elemBytes). It charges count allocation slots.
func (d *decoder) count(limit, elemBytes int) (int, error) {
	start := d.off
	v, err := d.u32()
	if err != nil {
		return 0, err
	}
	n := int(v)
	if n > limit {
		return 0, d.errAt(start, "length %d exceeds the limit %d", n, limit)
	}
	if err := d.room(start, n, elemBytes); err != nil {
		return 0, err
	}
	return n, nil
}

// room checks that n elements of elemBytes each fit in the remaining bytes and charges n slots.
func (d *decoder) room(start, n, elemBytes int) error {
	if elemBytes > 0 && n > d.remaining()/elemBytes {
		return d.errAt(start, "length %d needs %d bytes, only %d remain", n, int64(n)*int64(elemBytes), d.remaining())
	}
	return d.charge(start, n)
}

func (d *decoder) charge(start, n int) error {
	if n > d.budget {
		return d.errAt(start, "allocation budget exhausted (%d more elements for a %d-byte input)", n, len(d.b))
	}
	d.budget -= n
	return nil
}

func (d *decoder) fp() (field.Fp, error) {
	if err := d.need(fpBytes, "field element"); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	if v >= field.P {
		return 0, &DecodeError{Offset: d.off, Field: d.fieldName(), Msg: fmt.Sprintf("value %d is not a canonical field element (≥ p = %d)", v, field.P), Err: &field.RangeError{Value: v}}
	}
	d.off += fpBytes
	return field.Fp(v), nil
}

// fillFp decodes len(dst) elements; room for them must have been checked.
func (d *decoder) fillFp(dst []field.Fp) error {
	if err := d.need(len(dst)*fpBytes, "field elements"); err != nil {
		return err
	}
	for i := range dst {
		v, err := d.fp()
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}

func (d *decoder) fp4() (field.Fp4, error) {
	var r field.Fp4
	if err := d.need(fp4Bytes, "extension element"); err != nil {
		return r, err
	}
	err := d.fillFp(r[:])
	return r, err
}

func (d *decoder) fillFp4(dst []field.Fp4) error {
	if err := d.need(len(dst)*fp4Bytes, "extension elements"); err != nil {
		return err
	}
	for i := range dst {
		if err := d.fillFp(dst[i][:]); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) digest() (Digest, error) {
	var r Digest
	if err := d.need(digestBytes, "digest"); err != nil {
		return r, err
	}
	err := d.fillFp(r[:])
	return r, err
}

func (d *decoder) fillDigests(dst []Digest) error {
	if err := d.need(len(dst)*digestBytes, "digests"); err != nil {
		return err
	}
	for i := range dst {
		if err := d.fillFp(dst[i][:]); err != nil {
			return err
		}
	}
	return nil
}

// fp4List reads a len-prefixed list of EF.
func (d *decoder) fp4List(limit int) ([]field.Fp4, error) {
	n, err := d.count(limit, fp4Bytes)
	if err != nil {
		return nil, err
	}
	out := make([]field.Fp4, n)
	return out, d.fillFp4(out)
}

// fp4N reads a bare list of n EF (n already bounded by a limit).
func (d *decoder) fp4N(n int) ([]field.Fp4, error) {
	if err := d.room(d.off, n, fp4Bytes); err != nil {
		return nil, err
	}
	out := make([]field.Fp4, n)
	return out, d.fillFp4(out)
}

func (d *decoder) fpN(n int) ([]field.Fp, error) {
	if err := d.room(d.off, n, fpBytes); err != nil {
		return nil, err
	}
	out := make([]field.Fp, n)
	return out, d.fillFp(out)
}

func (d *decoder) digestN(n int) ([]Digest, error) {
	if err := d.room(d.off, n, digestBytes); err != nil {
		return nil, err
	}
	out := make([]Digest, n)
	return out, d.fillDigests(out)
}

func (d *decoder) finish() error {
	if d.off != len(d.b) {
		d.at("end")
		return d.errAt(d.off, "%d trailing bytes", len(d.b)-d.off)
	}
	return nil
}

// UnmarshalProof decodes a Proof with UniversalLimits.
func UnmarshalProof(b []byte) (*Proof, error) { return DecodeProof(b, nil) }

// UnmarshalBinary decodes b (UniversalLimits) into p.
func (p *Proof) UnmarshalBinary(b []byte) error {
	q, err := DecodeProof(b, nil)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// DecodeProof decodes a Proof (spec A §7.2), checking lengths against lim (nil: UniversalLimits).
// Errors are *DecodeError.
func DecodeProof(b []byte, lim *DecodeLimits) (*Proof, error) {
	d := newDecoder(b, lim)
	p, err := d.proof()
	if err == nil {
		err = d.finish()
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DecodeWhirProof decodes a WhirProof on its own (spec A §7.6); lim nil: UniversalLimits.
func DecodeWhirProof(b []byte, lim *DecodeLimits) (*WhirProof, error) {
	d := newDecoder(b, lim)
	w := new(WhirProof)
	err := d.whir(w)
	if err == nil {
		err = d.finish()
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DecodeStackingProof decodes a StackingProof on its own (spec A §7.5); lim nil: UniversalLimits.
func DecodeStackingProof(b []byte, lim *DecodeLimits) (*StackingProof, error) {
	d := newDecoder(b, lim)
	st := new(StackingProof)
	err := d.stacking(st)
	if err == nil {
		err = d.finish()
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (d *decoder) proof() (*Proof, error) {
	p := new(Proof)
	d.at("codec_version")
	start := d.off
	v, err := d.u32()
	if err != nil {
		return nil, err
	}
	if v != CodecVersion {
		return nil, d.errAt(start, "codec version %d, want %d", v, CodecVersion)
	}
	d.at("common_main_commit")
	if p.CommonMainCommit, err = d.digest(); err != nil {
		return nil, err
	}
	d.at("num_airs")
	start = d.off
	nv, err := d.u32()
	if err != nil {
		return nil, err
	}
	numAirs := int(nv)
	if numAirs > d.lim.MaxAirs {
		return nil, d.errAt(start, "length %d exceeds the limit %d", numAirs, d.lim.MaxAirs)
	}
	bitmapLen := (numAirs + 7) / 8
	d.at("trace_vdata.bitmap")
	if err := d.need(bitmapLen, "presence bitmap"); err != nil {
		return nil, err
	}
	if err := d.charge(start, numAirs); err != nil {
		return nil, err
	}
	bitmap := d.b[d.off : d.off+bitmapLen]
	if numAirs%8 != 0 {
		if pad := bitmap[bitmapLen-1] >> (numAirs % 8); pad != 0 {
			return nil, d.errAt(d.off+bitmapLen-1, "presence bitmap padding bits are not zero (byte 0x%02x, %d AIRs)", bitmap[bitmapLen-1], numAirs)
		}
	}
	d.off += bitmapLen
	p.TraceVData = make([]*TraceVData, numAirs)
	for i := range numAirs {
		if bitmap[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		tv := new(TraceVData)
		d.at("trace_vdata.log_height", i)
		start = d.off
		lh, err := d.u32()
		if err != nil {
			return nil, err
		}
		if int(lh) > d.lim.MaxLogHeight {
			return nil, d.errAt(start, "log_height %d exceeds the limit %d", lh, d.lim.MaxLogHeight)
		}
		tv.LogHeight = int(lh)
		d.at("trace_vdata.cached_commitments", i)
		n, err := d.count(d.lim.MaxCachedCommitments, digestBytes)
		if err != nil {
			return nil, err
		}
		tv.CachedCommitments = make([]Digest, n)
		if err := d.fillDigests(tv.CachedCommitments); err != nil {
			return nil, err
		}
		p.TraceVData[i] = tv
	}
	d.at("public_values")
	npv, err := d.count(d.lim.MaxAirs, u32Bytes)
	if err != nil {
		return nil, err
	}
	p.PublicValues = make([][]field.Fp, npv)
	for i := range npv {
		d.at("public_values", i)
		n, err := d.count(d.lim.MaxPublicValues, fpBytes)
		if err != nil {
			return nil, err
		}
		p.PublicValues[i] = make([]field.Fp, n)
		if err := d.fillFp(p.PublicValues[i]); err != nil {
			return nil, err
		}
	}
	if err := d.gkr(&p.GKR); err != nil {
		return nil, err
	}
	if err := d.batch(&p.BatchConstraint); err != nil {
		return nil, err
	}
	if err := d.stacking(&p.Stacking); err != nil {
		return nil, err
	}
	if err := d.whir(&p.Whir); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *decoder) gkr(g *GkrProof) error {
	var err error
	d.at("gkr.logup_pow_witness")
	if g.LogupPowWitness, err = d.fp(); err != nil {
		return err
	}
	d.at("gkr.q0_claim")
	if g.Q0Claim, err = d.fp4(); err != nil {
		return err
	}
	d.at("gkr.claims_per_layer")
	L, err := d.count(d.lim.MaxGkrLayers, 4*fp4Bytes)
	if err != nil {
		return err
	}
	g.ClaimsPerLayer = make([]GkrLayerClaims, L)
	for i := range g.ClaimsPerLayer {
		d.at("gkr.claims_per_layer", i)
		c := &g.ClaimsPerLayer[i]
		for _, dst := range []*field.Fp4{&c.PXi0, &c.PXi1, &c.QXi0, &c.QXi1} {
			if *dst, err = d.fp4(); err != nil {
				return err
			}
		}
	}
	layers := max(L-1, 0)
	// Layer i has i+1 entries of 3 EF: check the total before allocating anything.
	d.at("gkr.sumcheck_polys")
	total := layers * (layers + 1) / 2
	if err := d.room(d.off, total+layers, 0); err != nil {
		return err
	}
	if total > d.remaining()/(3*fp4Bytes) {
		return d.errAt(d.off, "truncated: %d layers need %d bytes, %d remain", layers, total*3*fp4Bytes, d.remaining())
	}
	g.SumcheckPolys = make([][][3]field.Fp4, layers)
	for i := range layers {
		layer := make([][3]field.Fp4, i+1)
		for j := range layer {
			d.at("gkr.sumcheck_polys", i, j)
			if err := d.fillFp4(layer[j][:]); err != nil {
				return err
			}
		}
		g.SumcheckPolys[i] = layer
	}
	return nil
}

func (d *decoder) batch(bc *BatchConstraintProof) error {
	var err error
	d.at("batch.numerator_term_per_air")
	P, err := d.count(d.lim.MaxAirs, 2*fp4Bytes) // numerator and denominator terms
	if err != nil {
		return err
	}
	bc.NumeratorTermPerAir = make([]field.Fp4, P)
	if err := d.fillFp4(bc.NumeratorTermPerAir); err != nil {
		return err
	}
	d.at("batch.denominator_term_per_air")
	if bc.DenominatorTermPerAir, err = d.fp4N(P); err != nil {
		return err
	}
	d.at("batch.univariate_round_coeffs")
	if bc.UnivariateRoundCoeffs, err = d.fp4List(d.lim.MaxPolyCoeffs); err != nil {
		return err
	}
	d.at("batch.sumcheck_round_polys")
	nMax, err := d.count(d.lim.MaxSumcheckRounds, 0)
	if err != nil {
		return err
	}
	bc.SumcheckRoundPolys = make([][]field.Fp4, nMax)
	if nMax > 0 {
		d.at("batch.sumcheck_round_polys[0]")
		start := d.off
		wv, err := d.u32()
		if err != nil {
			return err
		}
		w := int(wv)
		if w > d.lim.MaxPolyCoeffs {
			return d.errAt(start, "length %d exceeds the limit %d", w, d.lim.MaxPolyCoeffs)
		}
		d.at("batch.sumcheck_round_polys")
		if err := d.room(start, nMax*w, fp4Bytes); err != nil {
			return err
		}
		for i := range nMax {
			d.at("batch.sumcheck_round_polys", i)
			bc.SumcheckRoundPolys[i] = make([]field.Fp4, w)
			if err := d.fillFp4(bc.SumcheckRoundPolys[i]); err != nil {
				return err
			}
		}
	}
	d.at("batch.column_openings")
	if err := d.room(d.off, P, u32Bytes); err != nil {
		return err
	}
	bc.ColumnOpenings = make([][][]field.Fp4, P)
	for i := range P {
		d.at("batch.column_openings", i)
		parts, err := d.count(d.lim.MaxParts, u32Bytes)
		if err != nil {
			return err
		}
		bc.ColumnOpenings[i] = make([][]field.Fp4, parts)
		for j := range parts {
			d.at("batch.column_openings", i, j)
			if bc.ColumnOpenings[i][j], err = d.fp4List(d.lim.MaxColumnOpenings); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *decoder) stacking(st *StackingProof) error {
	var err error
	d.at("stacking.univariate_round_coeffs")
	if st.UnivariateRoundCoeffs, err = d.fp4List(d.lim.MaxPolyCoeffs); err != nil {
		return err
	}
	d.at("stacking.sumcheck_round_polys")
	n, err := d.count(d.lim.MaxSumcheckRounds, 2*fp4Bytes)
	if err != nil {
		return err
	}
	st.SumcheckRoundPolys = make([][2]field.Fp4, n)
	for i := range n {
		d.at("stacking.sumcheck_round_polys", i)
		if err := d.fillFp4(st.SumcheckRoundPolys[i][:]); err != nil {
			return err
		}
	}
	d.at("stacking.stacking_openings")
	C, err := d.count(d.lim.MaxCommits, u32Bytes)
	if err != nil {
		return err
	}
	st.StackingOpenings = make([][]field.Fp4, C)
	for j := range C {
		d.at("stacking.stacking_openings", j)
		if st.StackingOpenings[j], err = d.fp4List(d.lim.MaxStackedWidth); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) whir(w *WhirProof) error {
	var err error
	lim := &d.lim
	d.at("whir.mu_pow_witness")
	if w.MuPowWitness, err = d.fp(); err != nil {
		return err
	}
	d.at("whir.whir_sumcheck_polys")
	sStart := d.off
	S, err := d.count(lim.MaxWhirRounds*lim.MaxWhirK, 2*fp4Bytes+fpBytes) // + one folding PoW witness each
	if err != nil {
		return err
	}
	w.WhirSumcheckPolys = make([][2]field.Fp4, S)
	for i := range S {
		d.at("whir.whir_sumcheck_polys", i)
		if err := d.fillFp4(w.WhirSumcheckPolys[i][:]); err != nil {
			return err
		}
	}
	d.at("whir.codeword_commits")
	nc, err := d.count(lim.MaxWhirRounds-1, digestBytes+fp4Bytes+fpBytes) // + OOD value + query PoW each
	if err != nil {
		return err
	}
	w.CodewordCommits = make([]Digest, nc)
	for i := range nc {
		d.at("whir.codeword_commits", i)
		if w.CodewordCommits[i], err = d.digest(); err != nil {
			return err
		}
	}
	R := nc + 1
	if S%R != 0 {
		d.at("whir.whir_sumcheck_polys")
		return d.errAt(sStart, "S = %d sumcheck rounds is not a multiple of R = %d WHIR rounds", S, R)
	}
	k := S / R
	if k > lim.MaxWhirK {
		d.at("whir.whir_sumcheck_polys")
		return d.errAt(sStart, "k = S/R = %d exceeds the limit %d", k, lim.MaxWhirK)
	}
	d.at("whir.ood_values")
	if w.OODValues, err = d.fp4N(R - 1); err != nil {
		return err
	}
	d.at("whir.folding_pow_witnesses")
	if w.FoldingPowWitnesses, err = d.fpN(S); err != nil {
		return err
	}
	d.at("whir.query_phase_pow_witnesses")
	if w.QueryPhasePowWitnesses, err = d.fpN(R); err != nil {
		return err
	}
	d.at("whir.num_commits")
	cStart := d.off
	C, err := d.count(lim.MaxCommits, 0)
	if err != nil {
		return err
	}
	if C == 0 {
		return d.errAt(cStart, "number of commitments is 0")
	}
	d.at("whir.initial_num_queries")
	nq0, err := d.count(lim.MaxQueries, 0)
	if err != nil {
		return err
	}
	rows := 1 << k
	depth0 := 0
	widths := make([]int, C)
	if nq0 > 0 {
		d.at("whir.initial_merkle_depth")
		start := d.off
		v, err := d.u32()
		if err != nil {
			return err
		}
		if int(v) > lim.MaxMerkleDepth {
			return d.errAt(start, "Merkle depth %d exceeds the limit %d", v, lim.MaxMerkleDepth)
		}
		depth0 = int(v)
		d.at("whir.widths")
		if err := d.need(C*u32Bytes, "commitment widths"); err != nil {
			return err
		}
		// Every opened value and path digest is bare and follows: check the total now.
		rem := int64(d.remaining() - C*u32Bytes)
		for j := range C {
			d.at("whir.widths", j)
			start := d.off
			v, _ := d.u32()
			if int(v) > lim.MaxStackedWidth {
				return d.errAt(start, "width %d exceeds the limit %d", v, lim.MaxStackedWidth)
			}
			widths[j] = int(v)
			// bytes of commitment j's rows and paths; ≤ 2^16·(2^27·2^24·4 + …) cannot overflow
			// per query, and the running budget rem is checked before multiplying by nq0.
			perQuery := int64(rows)*int64(widths[j])*fpBytes + int64(depth0)*digestBytes
			if perQuery > 0 && int64(nq0) > rem/perQuery {
				return d.errAt(start, "truncated: %d queries of width %d and depth %d need %d bytes each, only %d remain for rows and paths", nq0, widths[j], depth0, perQuery, rem)
			}
			rem -= int64(nq0) * perQuery
		}
	}
	// Slots: per commitment 2 headers + nq0·(1 + 2^k + 1) headers; elements are covered by the
	// byte check above.
	d.at("whir.initial_round_opened_rows")
	if int64(C)*(2+int64(nq0)*(int64(rows)+2)) > int64(d.budget) {
		return d.errAt(d.off, "allocation budget exhausted (%d commitments × %d queries × %d rows)", C, nq0, rows)
	}
	d.budget -= C * (2 + nq0*(rows+2))
	w.InitialRoundOpenedRows = make([][][][]field.Fp, C)
	for j := range C {
		qs := make([][][]field.Fp, nq0)
		for q := range nq0 {
			group := make([][]field.Fp, rows)
			for t := range rows {
				d.at("whir.initial_round_opened_rows", j, q, t)
				if err := d.charge(d.off, widths[j]); err != nil {
					return err
				}
				group[t] = make([]field.Fp, widths[j])
				if err := d.fillFp(group[t]); err != nil {
					return err
				}
			}
			qs[q] = group
		}
		w.InitialRoundOpenedRows[j] = qs
	}
	w.InitialRoundMerkleProofs = make([][][]Digest, C)
	for j := range C {
		ps := make([][]Digest, nq0)
		for q := range nq0 {
			d.at("whir.initial_round_merkle_proofs", j, q)
			if ps[q], err = d.digestN(depth0); err != nil {
				return err
			}
		}
		w.InitialRoundMerkleProofs[j] = ps
	}
	w.CodewordOpenedValues = make([][][]field.Fp4, R-1)
	for r1 := range R - 1 {
		d.at("whir.codeword_opened_values", r1)
		nq, err := d.count(lim.MaxQueries, rows*fp4Bytes)
		if err != nil {
			return err
		}
		if r1 == 0 && nq0 > 0 && nq == 0 {
			return d.errAt(d.off-u32Bytes, "round 1 has no queries while the initial round has %d (not producible by the encoder)", nq0)
		}
		vs := make([][]field.Fp4, nq)
		for q := range nq {
			d.at("whir.codeword_opened_values", r1, q)
			if vs[q], err = d.fp4N(rows); err != nil {
				return err
			}
		}
		w.CodewordOpenedValues[r1] = vs
	}
	d.at("whir.codeword_merkle_depth")
	start := d.off
	v, err := d.u32()
	if err != nil {
		return err
	}
	depth1 := int(v)
	if (R == 1 || nq0 == 0) && depth1 != 0 {
		return d.errAt(start, "Merkle depth %d must be 0 when R = %d and nq0 = %d (the encoder writes 0)", depth1, R, nq0)
	}
	if depth1 > lim.MaxMerkleDepth {
		return d.errAt(start, "Merkle depth %d exceeds the limit %d", depth1, lim.MaxMerkleDepth)
	}
	w.CodewordMerkleProofs = make([][][]Digest, R-1)
	for r1 := range R - 1 {
		nq := len(w.CodewordOpenedValues[r1])
		depth := depth1 - r1
		if depth < 0 && nq > 0 {
			d.at("whir.codeword_merkle_proofs", r1)
			return d.errAt(d.off, "Merkle depth %d − %d is negative", depth1, r1)
		}
		if err := d.charge(d.off, nq); err != nil {
			return err
		}
		ps := make([][]Digest, nq)
		for q := range nq {
			d.at("whir.codeword_merkle_proofs", r1, q)
			if ps[q], err = d.digestN(depth); err != nil {
				return err
			}
		}
		w.CodewordMerkleProofs[r1] = ps
	}
	d.at("whir.final_poly")
	if w.FinalPoly, err = d.fp4List(lim.MaxFinalPoly); err != nil {
		return err
	}
	return nil
}
