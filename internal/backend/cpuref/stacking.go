package cpuref

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
)

// Errors of stacking and of the Merkle tree. The layout's own errors are stark.ErrLayout*.
var (
	ErrTraceShape          = errors.New("cpuref: trace shape invalid")
	ErrBadStackingParams   = errors.New("cpuref: bad stacking parameters")
	ErrMerkleRowsPerQuery  = errors.New("cpuref: rows per query must be a power of two not exceeding the height")
	ErrMerkleQueryIndex    = errors.New("cpuref: query index out of range")
	ErrMerkleVerify        = errors.New("cpuref: Merkle proof does not verify")
	ErrMerkleOpeningLength = errors.New("cpuref: Merkle opening has the wrong shape")
)

// traceDims validates the traces and returns their layout input.
func traceDims(traces []air.Matrix) ([]stark.MatrixDim, error) {
	dims := make([]stark.MatrixDim, len(traces))
	for i, t := range traces {
		if err := checkMatrix("stacking", t); err != nil {
			return nil, err
		}
		lh, err := Log2Exact(t.Height)
		if err != nil {
			return nil, fmt.Errorf("%w: trace %d height %d: %v", ErrTraceShape, i, t.Height, err)
		}
		dims[i] = stark.MatrixDim{Width: t.Width, LogHeight: lh}
	}
	return dims, nil
}

// StackedMatrix fills the stacked matrix Q (spec A §5.3, stacked_matrix) of the traces, which
// must be in trace order. Q has height 2^(lSkip+nStack), is column-major and zero outside the
// slices (including the skipped rows of strided slices).
func StackedMatrix(lSkip, nStack int, traces []air.Matrix) (air.Matrix, *stark.StackedLayout, error) {
	dims, err := traceDims(traces)
	if err != nil {
		return air.Matrix{}, nil, err
	}
	if nStack < 0 {
		return air.Matrix{}, nil, fmt.Errorf("%w: n_stack=%d", ErrBadStackingParams, nStack)
	}
	layout, err := stark.NewStackedLayout(lSkip, lSkip+nStack, dims)
	if err != nil {
		return air.Matrix{}, nil, err
	}
	q := air.NewMatrix(layout.Width, 1<<layout.LogHeight)
	for _, sc := range layout.Cols {
		src := traces[sc.Mat].Column(sc.Col)
		start, stride := layout.Placement(sc)
		dst := q.Values[start:]
		for i, v := range src {
			dst[i*stride] = v
		}
	}
	return q, layout, nil
}

// StackedPCSData is what the prover keeps of one stacked commitment (StackedPcsData): the layout,
// the stacked matrix Q and the Merkle tree over the codeword matrix (its backing matrix).
type StackedPCSData struct {
	Layout *stark.StackedLayout
	Matrix air.Matrix
	Tree   *MerkleTree
}

// Root returns the commitment.
func (d *StackedPCSData) Root() poseidon2.Digest { return d.Tree.Root() }

// StackedCommit runs stacked_commit (spec A §5.8) on traces given in trace order: layout →
// stacked matrix → RS codeword matrix (rate 2^-LogBlowup) → Merkle tree with 2^k_whir rows per
// query → root. It uses p.LSkip, p.NStack, p.LogBlowup and p.Whir.K.
func StackedCommit(traces []air.Matrix, p params.SystemParams) (poseidon2.Digest, *StackedPCSData, error) {
	if p.Whir.K < 0 || p.Whir.K > MaxLogSize {
		return poseidon2.Digest{}, nil, fmt.Errorf("%w: k_whir=%d", ErrBadStackingParams, p.Whir.K)
	}
	q, layout, err := StackedMatrix(p.LSkip, p.NStack, traces)
	if err != nil {
		return poseidon2.Digest{}, nil, err
	}
	if layout.Width == 0 {
		return poseidon2.Digest{}, nil, stark.ErrStackedWidthZero
	}
	cw, err := RSEncodeMatrix(p.LSkip, p.LogBlowup, q)
	if err != nil {
		return poseidon2.Digest{}, nil, err
	}
	tree, err := NewMerkleTree(cw, 1<<p.Whir.K)
	if err != nil {
		return poseidon2.Digest{}, nil, err
	}
	return tree.Root(), &StackedPCSData{Layout: layout, Matrix: q, Tree: tree}, nil
}
