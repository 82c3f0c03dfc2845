package stark

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
)

// Committed is a backend's opaque handle to one stacked commitment (stacked matrix, its codeword
// and Merkle tree), kept wherever the backend keeps its data (host or device).
type Committed interface {
	Root() Digest
	Layout() *StackedLayout
}

// Backend performs the heavy operations of the opening proof. The stage code in this package
// (stacking.go, whir.go) owns the transcript: everything observed, sampled or sent is decided
// there; the backend only computes. Methods take and return handles and small values so that a
// device implementation can keep matrices and tables on the device.
type Backend interface {
	GkrBackend
	ConstraintBackend
	// Commit stacks traces (given in trace order), RS-encodes and Merkle-commits them
	// (stacked_commit, spec A §5.8).
	Commit(p params.SystemParams, traces []air.Matrix) (Committed, error)
	// NewStackingProver prepares the stacked opening reduction (spec B §5) over commits with
	// the batching weights of b.
	NewStackingProver(p params.SystemParams, commits []Committed, b *StackingBatch) (StackingProver, error)
	// NewWhirProver prepares WHIR (spec A §6.3 step 2): f = Σ_i μ^i·F̂_i over all stacked columns
	// of commits (commitment-major), w = K(uCube, ·).
	NewWhirProver(p params.SystemParams, commits []Committed, mu field.Fp4, uCube []field.Fp4) (WhirProver, error)
}

// StackingBatch describes the batched kernel W_{c,m} of the stacked reduction (spec B §5.3).
type StackingBatch struct {
	// R is the batch-sumcheck point (r_0; r_1, …); it must be at least 1 + max ñ long.
	R []field.Fp4
	// EqWeight[c][i] and RotWeight[c][i] are the weights of sorted column i of commitment c:
	// λ^(2k) and (need_rot ? λ^(2k+1) : 0), k the global claim index.
	EqWeight, RotWeight [][]field.Fp4
}

// StackingProver runs the stacked reduction's sumcheck rounds on the backend.
type StackingProver interface {
	// UnivariateRound returns the 2(2^l_skip − 1) + 1 coefficients of s_0(Z) (constant first).
	UnivariateRound() ([]field.Fp4, error)
	// BindUnivariate fixes Z = u_0.
	BindUnivariate(u0 field.Fp4) error
	// Round returns s_j(1), s_j(2) of the next multilinear round.
	Round() (s1, s2 field.Fp4, err error)
	// Bind fixes the round's variable to u.
	Bind(u field.Fp4) error
	// Openings returns q_{c,m}(u) for every commitment c and stacked column m (after n_stack binds).
	Openings() ([][]field.Fp4, error)
	// Release frees backend resources.
	Release()
}

// WhirProver holds the WHIR tables f, w and the folded codewords on the backend.
type WhirProver interface {
	// SumcheckRound returns s(1), s(2) of Σ_y f·w over the lowest variable.
	SumcheckRound() (s1, s2 field.Fp4, err error)
	// Fold fixes the lowest variable of f and w to alpha.
	Fold(alpha field.Fp4) error
	// CommitFolded RS-encodes the coefficient table of the current f on the subgroup of order
	// 2^logDomain and Merkle-commits it with 2^k rows per query; the codeword gets the next
	// codeword index (0, 1, …).
	CommitFolded(logDomain int) (Digest, error)
	// EvalFolded returns Σ_b gc[b]·z^b for the coefficient table gc of the current f.
	EvalFolded(z field.Fp4) (field.Fp4, error)
	// FinalPoly returns the coefficient table of the current f.
	FinalPoly() ([]field.Fp4, error)
	// OpenInitial opens query group y of every initial commitment: rows[c][t][col], proofs[c].
	OpenInitial(y int) (rows [][][]field.Fp, proofs [][]Digest, err error)
	// OpenCodeword opens query group y of codeword idx: the 2^k values and the Merkle proof.
	OpenCodeword(idx, y int) ([]field.Fp4, []Digest, error)
	// AccumulateWeight adds Σ_i coefs[i]·eq(pow_d(points[i]), ·) to w (d = current variables).
	AccumulateWeight(coefs, points []field.Fp4) error
	// Release frees backend resources.
	Release()
}
