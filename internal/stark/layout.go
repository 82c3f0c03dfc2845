package stark

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
)

// ErrLayout is wrapped by every stacked layout error.
var ErrLayout = errors.New("stark: invalid stacked layout")

// The stacked layout errors, each wrapping ErrLayout.
var (
	// ErrLayoutNotSorted: the matrices are not in trace order (log heights descending).
	ErrLayoutNotSorted = fmt.Errorf("%w: matrices not sorted by log height descending", ErrLayout)
	// ErrLayoutHeight: a matrix is taller than the stacked matrix.
	ErrLayoutHeight = fmt.Errorf("%w: trace log height exceeds the stacked log height", ErrLayout)
	// ErrLayoutRowOverflow: a slice would straddle two stacked columns.
	ErrLayoutRowOverflow = fmt.Errorf("%w: stacked column overflow", ErrLayout)
)

// MatrixDim is the shape of one matrix in a stacked layout.
type MatrixDim struct {
	Width     int
	LogHeight int
}

// StackedSlice is where one trace column lives inside the stacked matrix (spec A §5.2).
type StackedSlice struct {
	Col       int // stacked column index
	Row       int // first row inside the stacked column
	LogHeight int // log2 of the trace height (may be < l_skip)
}

// Len is the number of stacked rows the slice occupies: 2^max(LogHeight, lSkip).
func (s StackedSlice) Len(lSkip int) int { return 1 << max(s.LogHeight, lSkip) }

// Stride is the row step of the slice: 2^(lSkip − LogHeight) when LogHeight < lSkip (the column
// is strided), else 1.
func (s StackedSlice) Stride(lSkip int) int { return 1 << max(lSkip-s.LogHeight, 0) }

// StackedColumn is one entry of sorted_cols: column Col of matrix Mat lives in Slice.
type StackedColumn struct {
	Mat, Col int
	Slice    StackedSlice
}

// StackedLayout is StackedLayout::new of OpenVM prover/stacked_pcs.rs (spec A §5.2). The prover
// and verifier compute it identically; it is never transmitted.
type StackedLayout struct {
	LSkip     int
	LogHeight int // m = l_skip + n_stack
	Width     int // number of stacked columns
	Cols      []StackedColumn
	MatStarts []int // MatStarts[mat] = index in Cols of mat's first column
	Dims      []MatrixDim
}

// NewStackedLayout builds the layout of matrices given in trace order (log heights descending,
// width-0 matrices included).
func NewStackedLayout(lSkip, logHeight int, dims []MatrixDim) (*StackedLayout, error) {
	if lSkip < 0 || lSkip > logHeight || logHeight > field.TwoAdicity {
		return nil, fmt.Errorf("%w: l_skip=%d log_stacked_height=%d", ErrLayout, lSkip, logHeight)
	}
	for i := 1; i < len(dims); i++ {
		if dims[i].LogHeight > dims[i-1].LogHeight {
			return nil, fmt.Errorf("%w: matrix %d has log height %d > %d", ErrLayoutNotSorted, i, dims[i].LogHeight, dims[i-1].LogHeight)
		}
	}
	height := 1 << logHeight
	l := &StackedLayout{LSkip: lSkip, LogHeight: logHeight, Dims: append([]MatrixDim(nil), dims...)}
	col, row := 0, 0
	for mat, d := range dims {
		l.MatStarts = append(l.MatStarts, len(l.Cols))
		if d.Width < 0 || d.LogHeight < 0 {
			return nil, fmt.Errorf("%w: matrix %d has width %d, log height %d", ErrLayout, mat, d.Width, d.LogHeight)
		}
		if d.Width == 0 {
			continue
		}
		if d.LogHeight > logHeight {
			return nil, fmt.Errorf("%w: matrix %d log height %d > %d", ErrLayoutHeight, mat, d.LogHeight, logHeight)
		}
		sliceLen := 1 << max(d.LogHeight, lSkip)
		for j := 0; j < d.Width; j++ {
			if row+sliceLen > height {
				if row != height {
					return nil, fmt.Errorf("%w: stacked column %d", ErrLayoutRowOverflow, col)
				}
				col++
				row = 0
			}
			l.Cols = append(l.Cols, StackedColumn{Mat: mat, Col: j, Slice: StackedSlice{Col: col, Row: row, LogHeight: d.LogHeight}})
			row += sliceLen
		}
	}
	l.Width = col
	if row != 0 {
		l.Width++
	}
	return l, nil
}

// NumMatrices is the number of matrices the layout was built from.
func (l *StackedLayout) NumMatrices() int { return len(l.MatStarts) }

// Get returns the slice of column j of matrix mat.
func (l *StackedLayout) Get(mat, j int) (StackedSlice, bool) {
	if mat < 0 || mat >= len(l.MatStarts) {
		return StackedSlice{}, false
	}
	i := l.MatStarts[mat] + j
	if j < 0 || i >= len(l.Cols) || l.Cols[i].Mat != mat {
		return StackedSlice{}, false
	}
	return l.Cols[i].Slice, true
}

// Placement returns where column c lives in the column-major stacked matrix of height
// 2^l.LogHeight: the index of its first value (stacked column × height + first row) and the row
// stride of its values (2^(l_skip − log h) for a trace shorter than 2^l_skip, else 1); the rows
// between strided values are zero. The columns of one matrix follow each other: column j + 1
// starts Len(l_skip) values after column j, across stacked columns too. It is the one placement
// rule both backends fill the stacked matrix with.
func (l *StackedLayout) Placement(c StackedColumn) (start, stride int) {
	return c.Slice.Col<<l.LogHeight + c.Slice.Row, c.Slice.Stride(l.LSkip)
}

// ErrCommitInput is wrapped by the errors of CommitLayout: traces or parameters that no stacked
// commitment can be made of.
var ErrCommitInput = errors.New("stark: invalid commit input")

// ErrStackedWidthZero: every trace of a commitment has width 0.
var ErrStackedWidthZero = fmt.Errorf("%w: stacked matrix has width 0 (every trace has width 0)", ErrCommitInput)

// CommitLayout validates a commitment's parameters (l_skip, n_stack, log_blowup, k_whir) and
// traces (trace order, power-of-two heights) and returns their stacked layout. Every backend's
// Committer starts with it.
func CommitLayout(p params.SystemParams, traces []Trace) (*StackedLayout, error) {
	m := p.LSkip + p.NStack
	if p.LSkip < 0 || p.NStack < 0 || p.LogBlowup < 0 || m+p.LogBlowup > field.TwoAdicity || p.Whir.K < 0 || p.Whir.K > m+p.LogBlowup {
		return nil, fmt.Errorf("%w: l_skip=%d n_stack=%d log_blowup=%d k_whir=%d", ErrCommitInput, p.LSkip, p.NStack, p.LogBlowup, p.Whir.K)
	}
	dims := make([]MatrixDim, len(traces))
	for i, t := range traces {
		if t == nil {
			return nil, fmt.Errorf("%w: trace %d is nil", ErrCommitInput, i)
		}
		lh, ok := field.Log2(t.Height())
		if !ok || t.Width() < 0 {
			return nil, fmt.Errorf("%w: trace %d is %d×%d (the height must be a power of two)", ErrCommitInput, i, t.Height(), t.Width())
		}
		dims[i] = MatrixDim{Width: t.Width(), LogHeight: lh}
	}
	layout, err := NewStackedLayout(p.LSkip, m, dims)
	if err != nil {
		return nil, err
	}
	if layout.Width == 0 {
		return nil, ErrStackedWidthZero
	}
	return layout, nil
}
