package stark

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Errors of the opening proof. Every verifier error wraps exactly one stage sentinel (and, for
// proof-of-work failures, also ErrPow); test with errors.Is.
var (
	// ErrOpeningInput: the inputs (parameters, claims, layouts) are inconsistent.
	ErrOpeningInput = errors.New("stark: invalid opening-proof input")

	ErrStacking = errors.New("stark: stacked reduction")
	// ErrStackingShape: a stacking proof list has the wrong length.
	ErrStackingShape = fmt.Errorf("%w: proof shape", ErrStacking)
	// ErrStackingUnivariate: N·Σ_{j≡0 mod N} s_0 coefficients ≠ the batched claim (S0Mismatch).
	ErrStackingUnivariate = fmt.Errorf("%w: s_0 sum does not match the batched claims", ErrStacking)
	// ErrStackingSumcheck: the final sum does not match the stacking openings (FinalSumMismatch).
	ErrStackingSumcheck = fmt.Errorf("%w: final sum does not match the stacking openings", ErrStacking)

	// ErrPow: a proof-of-work witness failed its check.
	ErrPow = errors.New("stark: proof-of-work witness invalid")

	ErrWhir = errors.New("stark: WHIR")
	// ErrWhirShape: a WHIR proof list has the wrong length (FinalPolyDegree included).
	ErrWhirShape = fmt.Errorf("%w: proof shape", ErrWhir)
	// ErrWhirMuPow, ErrWhirFoldingPow, ErrWhirQueryPow: the three WHIR PoW checks.
	ErrWhirMuPow      = &stageError{ErrWhir, ErrPow, "μ batching proof-of-work"}
	ErrWhirFoldingPow = &stageError{ErrWhir, ErrPow, "folding proof-of-work"}
	ErrWhirQueryPow   = &stageError{ErrWhir, ErrPow, "query-phase proof-of-work"}
	// ErrWhirQuery: a query's Merkle opening does not verify (MerkleVerify).
	ErrWhirQuery = fmt.Errorf("%w: Merkle opening does not verify", ErrWhir)
	// ErrWhirFinal: the final polynomial check fails (FinalPolyConstraint).
	ErrWhirFinal = fmt.Errorf("%w: final polynomial constraint", ErrWhir)
)

// stageError is a sentinel that is both a stage error and a kind (ErrPow).
type stageError struct {
	stage, kind error
	msg         string
}

func (e *stageError) Error() string   { return e.stage.Error() + ": " + e.msg + " witness invalid" }
func (e *stageError) Unwrap() []error { return []error{e.stage, e.kind} }

// CommitClaims are the opening claims on the columns of one commitment, indexed like its layout's
// matrices: Values[mat][col] = t̂(r), Rot[mat][col] = t̂_rot(r) (read only where NeedRot[mat]).
type CommitClaims struct {
	NeedRot []bool
	Values  [][]field.Fp4
	Rot     [][]field.Fp4
}

// OpeningClaims are the claims handed to the stacked reduction (spec B §5.1): the point
// r = (r_0; r_1, …) and per commitment (commitment-list order, spec A §5.1) the column claims.
type OpeningClaims struct {
	R       []field.Fp4
	Commits []CommitClaims
}

// ProveOpenings proves claims on the committed columns: the stacked opening reduction (spec B §5)
// followed by WHIR (spec A §6), on transcript tr.
func ProveOpenings(be *Backend, tr *transcript.Transcript, p params.SystemParams, commits []Committed, claims *OpeningClaims) (StackingProof, WhirProof, error) {
	if claims == nil {
		return StackingProof{}, WhirProof{}, fmt.Errorf("%w: no claims", ErrOpeningInput)
	}
	prover, err := be.Stacking.NewStackingProver(p, commits, claims.R)
	if err != nil {
		return StackingProof{}, WhirProof{}, err
	}
	sp, u, err := ProveStacking(prover, tr, p, commits, claims)
	if err != nil {
		return StackingProof{}, WhirProof{}, err
	}
	wp, err := ProveWhir(be.Whir, be.Grinder, tr, p, commits, UCube(p.LSkip, u))
	if err != nil {
		return StackingProof{}, WhirProof{}, err
	}
	return sp, wp, nil
}

// VerifyOpenings verifies ProveOpenings' proofs against the commitment roots and layouts
// (commitment-list order) and the claims.
func VerifyOpenings(tr *transcript.Transcript, p params.SystemParams, roots []Digest, layouts []*StackedLayout, claims *OpeningClaims, sp *StackingProof, wp *WhirProof) error {
	if len(roots) != len(layouts) {
		return fmt.Errorf("%w: %d roots, %d layouts", ErrOpeningInput, len(roots), len(layouts))
	}
	u, err := VerifyStacking(tr, p, layouts, claims, sp)
	if err != nil {
		return err
	}
	return VerifyWhir(tr, p, roots, sp.StackingOpenings, UCube(p.LSkip, u), wp)
}
