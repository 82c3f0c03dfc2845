package cpuref

import (
	"errors"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// Rust test_stacked_matrix_manual_strided_1 (spec A §5.3 example).
func TestStackedMatrixManualStrided(t *testing.T) {
	traces := []air.Matrix{
		{Values: fps(1, 2, 3, 4), Width: 1, Height: 4},
		{Values: fps(5, 6), Width: 1, Height: 2},
		{Values: fps(7), Width: 1, Height: 1},
	}
	q, l, err := StackedMatrix(3, 0, traces)
	if err != nil {
		t.Fatal(err)
	}
	if q.Width != 3 || q.Height != 8 || l.Width != 3 {
		t.Fatalf("shape %d×%d", q.Height, q.Width)
	}
	eqVec(t, "col0", q.Column(0), fps(1, 0, 2, 0, 3, 0, 4, 0))
	eqVec(t, "col1", q.Column(1), fps(5, 0, 0, 0, 6, 0, 0, 0))
	eqVec(t, "col2", q.Column(2), fps(7, 0, 0, 0, 0, 0, 0, 0))
}

func TestStackedLayoutRandom(t *testing.T) {
	r := newRNG(20)
	for iter := 0; iter < 200; iter++ {
		lSkip := int(r.IntN(4))
		m := lSkip + int(r.IntN(5))
		nm := 1 + int(r.IntN(6))
		dims := make([]stark.MatrixDim, nm)
		for i := range dims {
			dims[i] = stark.MatrixDim{Width: int(r.IntN(4)), LogHeight: int(r.IntN(m + 1))}
		}
		slices.SortStableFunc(dims, func(a, b stark.MatrixDim) int { return b.LogHeight - a.LogHeight })
		l, err := stark.NewStackedLayout(lSkip, m, dims)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, d := range dims {
			total += d.Width << max(d.LogHeight, lSkip)
		}
		if want := (total + (1 << m) - 1) >> m; l.Width != want {
			t.Fatalf("width %d, want %d (dims %v)", l.Width, want, dims)
		}
		// Gap-free, in order, inside the column, MatStarts consistent.
		pos := 0
		for i, sc := range l.Cols {
			s := sc.Slice
			if s.Col*(1<<m)+s.Row != pos || s.Row+s.Len(lSkip) > 1<<m {
				t.Fatalf("slice %d %+v at linear %d", i, s, pos)
			}
			pos += s.Len(lSkip)
			if got, ok := l.Get(sc.Mat, sc.Col); !ok || got != s {
				t.Fatalf("Get(%d,%d)", sc.Mat, sc.Col)
			}
			if l.MatStarts[sc.Mat]+sc.Col != i {
				t.Fatalf("MatStarts")
			}
		}
		if pos != total || len(l.MatStarts) != nm {
			t.Fatalf("total %d vs %d", pos, total)
		}
	}
}

func TestStackedMatrixRandom(t *testing.T) {
	r := newRNG(21)
	lSkip, nStack := 2, 3
	traces := []air.Matrix{randMatrix(r, 3, 16), randMatrix(r, 0, 8), randMatrix(r, 2, 4), randMatrix(r, 3, 2), randMatrix(r, 1, 1)}
	q, l, err := StackedMatrix(lSkip, nStack, traces)
	if err != nil {
		t.Fatal(err)
	}
	// Every trace entry is where its slice says, everything else is zero.
	seen := make([]bool, len(q.Values))
	for _, sc := range l.Cols {
		s := sc.Slice
		for i, v := range traces[sc.Mat].Column(sc.Col) {
			at := s.Col*q.Height + s.Row + i*s.Stride(lSkip)
			if q.Values[at] != v {
				t.Fatalf("trace %d col %d row %d", sc.Mat, sc.Col, i)
			}
			seen[at] = true
		}
	}
	for i, v := range q.Values {
		if !seen[i] && v != 0 {
			t.Fatalf("stray value at %d", i)
		}
	}
	if _, ok := l.Get(1, 0); ok {
		t.Error("width-0 matrix has a column")
	}
}

func TestStackingErrors(t *testing.T) {
	if _, err := stark.NewStackedLayout(2, 5, []stark.MatrixDim{{Width: 1, LogHeight: 3}, {Width: 1, LogHeight: 4}}); !errors.Is(err, stark.ErrLayoutNotSorted) {
		t.Errorf("unsorted: %v", err)
	}
	if _, err := stark.NewStackedLayout(2, 5, []stark.MatrixDim{{Width: 1, LogHeight: 6}}); !errors.Is(err, stark.ErrLayoutHeight) {
		t.Errorf("too tall: %v", err)
	}
	if _, _, err := StackedMatrix(1, 1, []air.Matrix{{Values: make([]field.Fp, 3), Width: 1, Height: 3}}); err == nil {
		t.Error("height 3 accepted")
	}
	p := params.SystemParams{LSkip: 1, NStack: 2, LogBlowup: 1, Whir: params.WhirConfig{K: 1}}
	if _, _, err := StackedCommit([]air.Matrix{{Width: 0, Height: 4}}, p); !errors.Is(err, stark.ErrStackedWidthZero) {
		t.Errorf("width 0: %v", err)
	}
	p.Whir.K = 5 // 2^5 rows per query > 2^(l_skip+n_stack+log_blowup) = 16 codeword rows
	if _, _, err := StackedCommit([]air.Matrix{randMatrix(newRNG(1), 1, 4)}, p); !errors.Is(err, ErrMerkleRowsPerQuery) {
		t.Errorf("k too large: %v", err)
	}
}

func TestStackedCommitOpenings(t *testing.T) {
	r := newRNG(22)
	p := params.SystemParams{LSkip: 2, NStack: 4, LogBlowup: 2, Whir: params.WhirConfig{K: 3}}
	traces := []air.Matrix{randMatrix(r, 3, 64), randMatrix(r, 2, 16), randMatrix(r, 1, 2)}
	root, data, err := StackedCommit(traces, p)
	if err != nil {
		t.Fatal(err)
	}
	cw, _ := RSEncodeMatrix(p.LSkip, p.LogBlowup, data.Matrix)
	if !slices.Equal(cw.Values, data.Tree.Backing.Values) || data.Root() != root {
		t.Fatal("backing matrix / root mismatch")
	}
	if data.Tree.QueryStride() != (1<<(2+4+2))/8 {
		t.Fatalf("qs = %d", data.Tree.QueryStride())
	}
	for y := 0; y < data.Tree.QueryStride(); y++ {
		o, err := data.Tree.Open(y)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyOpening(root, 8, data.Matrix.Width, o); err != nil {
			t.Fatalf("query %d: %v", y, err)
		}
	}
}
