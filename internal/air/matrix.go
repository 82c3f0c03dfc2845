package air

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

// Matrix is the project's one column-major matrix of canonical base-field elements (traces,
// stacked matrices, codewords on the host): Values[c*Height+r] is row r of column c, and
// len(Values) = Width*Height.
type Matrix struct {
	Width, Height int
	Values        []field.Fp
}

// NewMatrix returns a zero matrix.
func NewMatrix(width, height int) Matrix {
	return Matrix{Width: width, Height: height, Values: make([]field.Fp, width*height)}
}

// MatrixFromRows builds a column-major matrix from row-major rows (all of the same length).
func MatrixFromRows(rows [][]uint32) Matrix {
	h := len(rows)
	w := 0
	if h > 0 {
		w = len(rows[0])
	}
	m := NewMatrix(w, h)
	for r, row := range rows {
		if len(row) != w {
			panic("air: MatrixFromRows: ragged rows")
		}
		for c, v := range row {
			m.Values[c*h+r] = field.New(v)
		}
	}
	return m
}

// MatrixFromColumns copies equal-length columns into a matrix.
func MatrixFromColumns(cols [][]field.Fp) (Matrix, error) {
	if len(cols) == 0 {
		return Matrix{}, fmt.Errorf("air: MatrixFromColumns: no columns")
	}
	h := len(cols[0])
	m := NewMatrix(len(cols), h)
	for j, c := range cols {
		if len(c) != h {
			return Matrix{}, fmt.Errorf("air: MatrixFromColumns: column %d has length %d, want %d", j, len(c), h)
		}
		copy(m.Column(j), c)
	}
	return m, nil
}

// At returns row r of column c.
func (m Matrix) At(r, c int) field.Fp { return m.Values[c*m.Height+r] }

// Set sets row r of column c.
func (m Matrix) Set(r, c int, v field.Fp) { m.Values[c*m.Height+r] = v }

// Column returns column j (a sub-slice of Values, not a copy).
func (m Matrix) Column(j int) []field.Fp { return m.Values[j*m.Height : (j+1)*m.Height] }

// Row returns a copy of row r (the entries in column order).
func (m Matrix) Row(r int) []field.Fp {
	out := make([]field.Fp, m.Width)
	for j := range out {
		out[j] = m.Values[j*m.Height+r]
	}
	return out
}

// Check reports an error when the shape and the number of values disagree.
func (m Matrix) Check() error {
	if m.Width < 0 || m.Height < 0 || len(m.Values) != m.Width*m.Height {
		return fmt.Errorf("matrix %d×%d has %d values", m.Height, m.Width, len(m.Values))
	}
	return nil
}

func (m Matrix) valid() bool { return m.Check() == nil }

// SplitMain cuts a column-major main trace of height rows into the
// AIR's cached parts and common main (sharing cells) and attaches the public values.
func SplitMain(a Air, height int, cells, public []field.Fp) (TraceInput, error) {
	w := a.Width()
	if height < 1 || len(cells) != w.MainWidth()*height {
		return TraceInput{}, fmt.Errorf("air: %d cells for AIR %s of main width %d and height %d", len(cells), a.Name(), w.MainWidth(), height)
	}
	var in TraceInput
	off := 0
	for _, cw := range w.CachedMains {
		n := cw * height
		in.CachedMains = append(in.CachedMains, Matrix{Width: cw, Height: height, Values: cells[off : off+n : off+n]})
		off += n
	}
	in.CommonMain = Matrix{Width: w.CommonMain, Height: height, Values: cells[off:]}
	in.Public = public
	return in, nil
}
