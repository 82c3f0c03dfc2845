package stark

import (
	"errors"
	"fmt"
)

// ErrLayout reports an invalid stacked layout input.
var ErrLayout = errors.New("stark: invalid stacked layout")

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

// NewStackedLayout builds the layout of matrices given in trace order (log heights descending).
func NewStackedLayout(lSkip, logHeight int, dims []MatrixDim) (*StackedLayout, error) {
	if lSkip < 0 || lSkip > logHeight || logHeight > 27 {
		return nil, fmt.Errorf("%w: l_skip=%d log_stacked_height=%d", ErrLayout, lSkip, logHeight)
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
			return nil, fmt.Errorf("%w: matrix %d log height %d > %d", ErrLayout, mat, d.LogHeight, logHeight)
		}
		if mat > 0 && d.LogHeight > dims[mat-1].LogHeight {
			return nil, fmt.Errorf("%w: matrices not sorted by log height descending", ErrLayout)
		}
		sliceLen := 1 << max(d.LogHeight, lSkip)
		for j := 0; j < d.Width; j++ {
			if row+sliceLen > height {
				if row != height {
					return nil, fmt.Errorf("%w: stacked column %d overflows", ErrLayout, col)
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
