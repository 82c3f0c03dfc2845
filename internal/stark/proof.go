package stark

import (
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// Digest is a Poseidon2 digest (8 base elements), a commitment root.
type Digest = poseidon2.Digest

// Proof is a whole SWIRL proof (spec A §7.2), fields in declaration order.
type Proof struct {
	CommonMainCommit Digest
	// TraceVData has one entry per AIR in verifying-key order; nil for an absent AIR.
	TraceVData []*TraceVData
	// PublicValues has one entry per AIR in verifying-key order; empty for absent AIRs.
	PublicValues    [][]field.Fp
	GKR             GkrProof
	BatchConstraint BatchConstraintProof
	Stacking        StackingProof
	Whir            WhirProof
}

// TraceVData is the per-trace data of a present AIR.
type TraceVData struct {
	LogHeight         int
	CachedCommitments []Digest
}

// GkrProof is the LogUp-GKR part (spec A §7.3, B §3).
type GkrProof struct {
	LogupPowWitness field.Fp
	Q0Claim         field.Fp4
	ClaimsPerLayer  []GkrLayerClaims
	// SumcheckPolys[i] has i+1 entries, each the evaluations at 1, 2, 3.
	SumcheckPolys [][][3]field.Fp4
}

// GkrLayerClaims are one GKR layer's claims, in proof-struct order.
type GkrLayerClaims struct {
	PXi0, PXi1, QXi0, QXi1 field.Fp4
}

// BatchConstraintProof is the batch constraint sumcheck part (spec A §7.4, B §4).
type BatchConstraintProof struct {
	NumeratorTermPerAir   []field.Fp4
	DenominatorTermPerAir []field.Fp4
	UnivariateRoundCoeffs []field.Fp4
	SumcheckRoundPolys    [][]field.Fp4
	// ColumnOpenings[i][part] for the i-th present AIR in trace order.
	ColumnOpenings [][][]field.Fp4
}

// StackingProof is the stacked opening reduction part (spec A §7.5, B §5).
type StackingProof struct {
	UnivariateRoundCoeffs []field.Fp4
	// SumcheckRoundPolys[j] = [s_j(1), s_j(2)].
	SumcheckRoundPolys [][2]field.Fp4
	// StackingOpenings[commit][stacked column].
	StackingOpenings [][]field.Fp4
}

// WhirProof is the WHIR opening proof (spec A §6.7, §7.6).
type WhirProof struct {
	MuPowWitness field.Fp
	// WhirSumcheckPolys has R·k entries [s(1), s(2)], rounds of all WHIR rounds concatenated.
	WhirSumcheckPolys [][2]field.Fp4
	// CodewordCommits are the roots of g_0..g_{R−2}.
	CodewordCommits []Digest
	// OODValues has one y0 per non-final round.
	OODValues              []field.Fp4
	FoldingPowWitnesses    []field.Fp
	QueryPhasePowWitnesses []field.Fp
	// InitialRoundOpenedRows[commit][query][t] is the full codeword row t of the query's group.
	InitialRoundOpenedRows [][][][]field.Fp
	// InitialRoundMerkleProofs[commit][query] lists siblings from the query-digest layer upward.
	InitialRoundMerkleProofs [][][]Digest
	// CodewordOpenedValues[r−1][query] holds round r's 2^k openings of codeword g_{r−1}.
	CodewordOpenedValues [][][]field.Fp4
	CodewordMerkleProofs [][][]Digest
	// FinalPoly is the coefficient table of the last folded multilinear, 2^(m − R·k) entries.
	FinalPoly []field.Fp4
}
