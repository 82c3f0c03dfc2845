package cpuref

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

// Matrix is a column-major matrix of canonical base-field elements:
// Values[col*Height + row], len(Values) = Width*Height.
type Matrix struct {
	Values []field.Fp
	Width  int
	Height int
}

// NewMatrix returns a zero matrix of the given shape.
func NewMatrix(width, height int) Matrix {
	return Matrix{Values: make([]field.Fp, width*height), Width: width, Height: height}
}

// MatrixFromColumns copies equal-length columns into a column-major Matrix.
func MatrixFromColumns(cols [][]field.Fp) (Matrix, error) {
	if len(cols) == 0 {
		return Matrix{}, fmt.Errorf("cpuref: MatrixFromColumns: no columns")
	}
	h := len(cols[0])
	m := NewMatrix(len(cols), h)
	for j, c := range cols {
		if len(c) != h {
			return Matrix{}, fmt.Errorf("cpuref: MatrixFromColumns: column %d has length %d, want %d", j, len(c), h)
		}
		copy(m.Column(j), c)
	}
	return m, nil
}

// Column returns column j (a sub-slice of Values, not a copy).
func (m Matrix) Column(j int) []field.Fp { return m.Values[j*m.Height : (j+1)*m.Height] }

// At returns the entry at (row, col).
func (m Matrix) At(row, col int) field.Fp { return m.Values[col*m.Height+row] }

// Row returns a copy of row r (the entries in column order).
func (m Matrix) Row(r int) []field.Fp {
	out := make([]field.Fp, m.Width)
	for j := range out {
		out[j] = m.Values[j*m.Height+r]
	}
	return out
}

func (m Matrix) check(op string) error {
	if m.Width < 0 || m.Height < 0 || len(m.Values) != m.Width*m.Height {
		return fmt.Errorf("cpuref: %s: matrix %d×%d has %d values", op, m.Height, m.Width, len(m.Values))
	}
	return nil
}

// CoeffsToEvals is the subset-sum ("zeta") transform in place (spec A §1.5,
// Mle::coeffs_to_evals_inplace): for each bit i, E[b] += E[b − 2^i] for every b with bit i set.
// It turns a multilinear coefficient table into its hypercube evaluation table.
// len(a) must be a power of two.
func CoeffsToEvals(a []field.Fp) {
	for step := 1; step < len(a); step <<= 1 {
		for i := 0; i < len(a); i += 2 * step {
			for j := i; j < i+step; j++ {
				a[j+step] = a[j+step].Add(a[j])
			}
		}
	}
}

// EvalsToCoeffs is the inverse (Möbius) transform of CoeffsToEvals, in place.
func EvalsToCoeffs(a []field.Fp) {
	for step := 1; step < len(a); step <<= 1 {
		for i := 0; i < len(a); i += 2 * step {
			for j := i; j < i+step; j++ {
				a[j+step] = a[j+step].Sub(a[j])
			}
		}
	}
}

// RSMessageInPlace turns a stacked column q (length 2^m, m ≥ lSkip) into the eval-to-coeff RS
// message M in place (spec A §5.5 step 1, eval_to_coeff_rs_message): for every block
// q[2^lSkip·x .. 2^lSkip·(x+1)), IDFT over D = ⟨g_lSkip⟩ (natural order) and then the subset-sum
// transform CoeffsToEvals on that block. Bits above lSkip are untouched.
func RSMessageInPlace(lSkip int, q []field.Fp) error {
	logM, err := Log2Exact(len(q))
	if err != nil {
		return err
	}
	if lSkip < 0 || lSkip > logM {
		return &SizeError{Op: "RSMessage", Size: len(q), Why: fmt.Sprintf("shorter than 2^l_skip = 2^%d", lSkip)}
	}
	if err := IDFTBlocks(q, lSkip); err != nil {
		return err
	}
	b := 1 << lSkip
	for off := 0; off < len(q); off += b {
		CoeffsToEvals(q[off : off+b])
	}
	return nil
}

// RSMessage returns the RS message of the stacked column q (q is not modified).
func RSMessage(lSkip int, q []field.Fp) ([]field.Fp, error) {
	out := append([]field.Fp(nil), q...)
	if err := RSMessageInPlace(lSkip, out); err != nil {
		return nil, err
	}
	return out, nil
}

// RSEncode returns the codeword of the stacked column q (length 2^m): the message M of
// RSMessage, zero-padded to 2^(m+logBlowup), then DFT in natural order:
// C[r] = Σ_{b<2^m} M[b]·g_{m+logBlowup}^{r·b} (spec A §5.5 step 2).
func RSEncode(lSkip, logBlowup int, q []field.Fp) ([]field.Fp, error) {
	logM, err := Log2Exact(len(q))
	if err != nil {
		return nil, err
	}
	if logBlowup < 0 || logM+logBlowup > MaxLogSize {
		return nil, &SizeError{Op: "RSEncode", Size: len(q), Why: fmt.Sprintf("2^%d·2^log_blowup(%d) exceeds 2^%d", logM, logBlowup, MaxLogSize)}
	}
	out := make([]field.Fp, len(q)<<logBlowup)
	copy(out, q)
	if err := RSMessageInPlace(lSkip, out[:len(q)]); err != nil {
		return nil, err
	}
	if err := DFT(out); err != nil {
		return nil, err
	}
	return out, nil
}

// RSEncodeMatrix encodes every column of the stacked matrix q (rs_code_matrix): the result has
// q.Height·2^logBlowup rows and q.Width columns, column-major.
func RSEncodeMatrix(lSkip, logBlowup int, q Matrix) (Matrix, error) {
	if err := q.check("RSEncodeMatrix"); err != nil {
		return Matrix{}, err
	}
	logM, err := Log2Exact(q.Height)
	if err != nil {
		return Matrix{}, err
	}
	if lSkip < 0 || lSkip > logM {
		return Matrix{}, &SizeError{Op: "RSEncodeMatrix", Size: q.Height, Why: fmt.Sprintf("shorter than 2^l_skip = 2^%d", lSkip)}
	}
	if logBlowup < 0 || logM+logBlowup > MaxLogSize {
		return Matrix{}, &SizeError{Op: "RSEncodeMatrix", Size: q.Height, Why: "codeword longer than 2^27"}
	}
	n := q.Height << logBlowup
	out := NewMatrix(q.Width, n)
	for j := 0; j < q.Width; j++ {
		col := out.Column(j)
		copy(col, q.Column(j))
		if err := RSMessageInPlace(lSkip, col[:q.Height]); err != nil {
			return Matrix{}, err
		}
	}
	if err := DFTColumns(out.Values, n); err != nil && q.Width > 0 {
		return Matrix{}, err
	}
	return out, nil
}
