package cpuref

import (
	"errors"
	"fmt"
	"sort"

	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark/params"
)

// StackedSlice locates one trace column inside the stacked matrix (StackedSlice in Rust).
// LogHeight is the trace column's true log height; below l_skip the slice is strided.
type StackedSlice struct {
	Col       int // stacked column index
	Row       int // first row inside the stacked column
	LogHeight int
}

// Len is the number of stacked rows the slice occupies: 2^max(LogHeight, lSkip).
func (s StackedSlice) Len(lSkip int) int { return 1 << max(s.LogHeight, lSkip) }

// Stride is 2^(lSkip − LogHeight) when LogHeight < lSkip, else 1.
func (s StackedSlice) Stride(lSkip int) int { return 1 << max(lSkip-s.LogHeight, 0) }

// SortedCol is one entry of StackedLayout.SortedCols: column Col of matrix Mat goes to Slice.
type SortedCol struct {
	Mat   int
	Col   int
	Slice StackedSlice
}

// MatDim is the shape of one matrix fed to the layout.
type MatDim struct {
	Width     int
	LogHeight int
}

// StackedLayout is the result of greedy column stacking (spec A §5.2, StackedLayout::new).
type StackedLayout struct {
	LSkip      int
	Height     int // 2^(l_skip + n_stack)
	Width      int // number of stacked columns
	SortedCols []SortedCol
	MatStarts  []int // MatStarts[mat] = index in SortedCols of mat's first column
}

// Errors of the layout.
var (
	ErrLayoutNotSorted     = errors.New("cpuref: stacked layout input not sorted by log height descending")
	ErrLayoutHeight        = errors.New("cpuref: trace log height exceeds the stacked log height")
	ErrLayoutRowOverflow   = errors.New("cpuref: stacked column overflow")
	ErrStackedWidthZero    = errors.New("cpuref: stacked matrix has width 0 (every trace has width 0)")
	ErrTraceShape          = errors.New("cpuref: trace shape invalid")
	ErrBadStackingParams   = errors.New("cpuref: bad stacking parameters")
	ErrMerkleRowsPerQuery  = errors.New("cpuref: rows per query must be a power of two not exceeding the height")
	ErrMerkleQueryIndex    = errors.New("cpuref: query index out of range")
	ErrMerkleVerify        = errors.New("cpuref: Merkle proof does not verify")
	ErrMerkleOpeningLength = errors.New("cpuref: Merkle opening has the wrong shape")
)

// NewStackedLayout computes the layout of stacking the matrices dims (already in trace order:
// log heights descending) into columns of height 2^logStackedHeight.
func NewStackedLayout(lSkip, logStackedHeight int, dims []MatDim) (*StackedLayout, error) {
	if lSkip < 0 || lSkip > logStackedHeight || logStackedHeight > MaxLogSize {
		return nil, fmt.Errorf("%w: l_skip=%d log_stacked_height=%d", ErrBadStackingParams, lSkip, logStackedHeight)
	}
	for i := 1; i < len(dims); i++ {
		if dims[i].LogHeight > dims[i-1].LogHeight {
			return nil, fmt.Errorf("%w: matrix %d has log height %d > %d", ErrLayoutNotSorted, i, dims[i].LogHeight, dims[i-1].LogHeight)
		}
	}
	height := 1 << logStackedHeight
	l := &StackedLayout{LSkip: lSkip, Height: height}
	col, row := 0, 0
	for mat, d := range dims {
		l.MatStarts = append(l.MatStarts, len(l.SortedCols))
		if d.Width < 0 || d.LogHeight < 0 {
			return nil, fmt.Errorf("%w: matrix %d width %d log height %d", ErrTraceShape, mat, d.Width, d.LogHeight)
		}
		if d.Width == 0 {
			continue
		}
		if d.LogHeight > logStackedHeight {
			return nil, fmt.Errorf("%w: matrix %d log height %d > %d", ErrLayoutHeight, mat, d.LogHeight, logStackedHeight)
		}
		sliceLen := 1 << max(d.LogHeight, lSkip)
		for j := 0; j < d.Width; j++ {
			if row+sliceLen > height {
				if row != height {
					return nil, fmt.Errorf("%w: column %d", ErrLayoutRowOverflow, col)
				}
				col++
				row = 0
			}
			l.SortedCols = append(l.SortedCols, SortedCol{Mat: mat, Col: j, Slice: StackedSlice{Col: col, Row: row, LogHeight: d.LogHeight}})
			row += sliceLen
		}
	}
	l.Width = col
	if row != 0 {
		l.Width++
	}
	return l, nil
}

// Get returns the slice of column j of matrix mat.
func (l *StackedLayout) Get(mat, j int) (StackedSlice, bool) {
	if mat < 0 || mat >= len(l.MatStarts) {
		return StackedSlice{}, false
	}
	i := l.MatStarts[mat] + j
	if j < 0 || i >= len(l.SortedCols) || l.SortedCols[i].Mat != mat {
		return StackedSlice{}, false
	}
	return l.SortedCols[i].Slice, true
}

// TraceOrder returns the trace order (spec A §5.1, sort_for_stacking) of matrices with the given
// log heights: indices sorted by log height descending, ties by index ascending.
func TraceOrder(logHeights []int) []int {
	idx := make([]int, len(logHeights))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logHeights[idx[a]] > logHeights[idx[b]] })
	return idx
}

// traceDims validates the traces and returns their layout input.
func traceDims(traces []Matrix) ([]MatDim, error) {
	dims := make([]MatDim, len(traces))
	for i, t := range traces {
		if err := t.check("stacking"); err != nil {
			return nil, err
		}
		lh, err := Log2Exact(t.Height)
		if err != nil {
			return nil, fmt.Errorf("%w: trace %d height %d: %v", ErrTraceShape, i, t.Height, err)
		}
		dims[i] = MatDim{Width: t.Width, LogHeight: lh}
	}
	return dims, nil
}

// StackedMatrix fills the stacked matrix Q (spec A §5.3, stacked_matrix) of the traces, which
// must be in trace order. Q has height 2^(lSkip+nStack), is column-major and zero outside the
// slices (including the skipped rows of strided slices).
func StackedMatrix(lSkip, nStack int, traces []Matrix) (Matrix, *StackedLayout, error) {
	dims, err := traceDims(traces)
	if err != nil {
		return Matrix{}, nil, err
	}
	if nStack < 0 {
		return Matrix{}, nil, fmt.Errorf("%w: n_stack=%d", ErrBadStackingParams, nStack)
	}
	layout, err := NewStackedLayout(lSkip, lSkip+nStack, dims)
	if err != nil {
		return Matrix{}, nil, err
	}
	q := NewMatrix(layout.Width, layout.Height)
	for _, sc := range layout.SortedCols {
		src := traces[sc.Mat].Column(sc.Col)
		dst := q.Values[sc.Slice.Col*q.Height+sc.Slice.Row:]
		stride := sc.Slice.Stride(lSkip)
		for i, v := range src {
			dst[i*stride] = v
		}
	}
	return q, layout, nil
}

// StackedPCSData is what the prover keeps of one stacked commitment (StackedPcsData): the layout,
// the stacked matrix Q and the Merkle tree over the codeword matrix (its backing matrix).
type StackedPCSData struct {
	Layout *StackedLayout
	Matrix Matrix
	Tree   *MerkleTree
}

// Root returns the commitment.
func (d *StackedPCSData) Root() poseidon2.Digest { return d.Tree.Root() }

// StackedCommit runs stacked_commit (spec A §5.8) on traces given in trace order: layout →
// stacked matrix → RS codeword matrix (rate 2^-LogBlowup) → Merkle tree with 2^k_whir rows per
// query → root. It uses p.LSkip, p.NStack, p.LogBlowup and p.Whir.K.
func StackedCommit(traces []Matrix, p params.SystemParams) (poseidon2.Digest, *StackedPCSData, error) {
	if p.Whir.K < 0 || p.Whir.K > MaxLogSize {
		return poseidon2.Digest{}, nil, fmt.Errorf("%w: k_whir=%d", ErrBadStackingParams, p.Whir.K)
	}
	q, layout, err := StackedMatrix(p.LSkip, p.NStack, traces)
	if err != nil {
		return poseidon2.Digest{}, nil, err
	}
	if layout.Width == 0 {
		return poseidon2.Digest{}, nil, ErrStackedWidthZero
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
