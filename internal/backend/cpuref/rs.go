package cpuref

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

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
func RSEncodeMatrix(lSkip, logBlowup int, q air.Matrix) (air.Matrix, error) {
	if err := checkMatrix("RSEncodeMatrix", q); err != nil {
		return air.Matrix{}, err
	}
	logM, err := Log2Exact(q.Height)
	if err != nil {
		return air.Matrix{}, err
	}
	if lSkip < 0 || lSkip > logM {
		return air.Matrix{}, &SizeError{Op: "RSEncodeMatrix", Size: q.Height, Why: fmt.Sprintf("shorter than 2^l_skip = 2^%d", lSkip)}
	}
	if logBlowup < 0 || logM+logBlowup > MaxLogSize {
		return air.Matrix{}, &SizeError{Op: "RSEncodeMatrix", Size: q.Height, Why: "codeword longer than 2^27"}
	}
	n := q.Height << logBlowup
	out := air.NewMatrix(q.Width, n)
	for j := 0; j < q.Width; j++ {
		col := out.Column(j)
		copy(col, q.Column(j))
		if err := RSMessageInPlace(lSkip, col[:q.Height]); err != nil {
			return air.Matrix{}, err
		}
	}
	if err := DFTColumns(out.Values, n); err != nil && q.Width > 0 {
		return air.Matrix{}, err
	}
	return out, nil
}

// checkMatrix names the operation in a matrix shape error.
func checkMatrix(op string, m air.Matrix) error {
	if err := m.Check(); err != nil {
		return fmt.Errorf("cpuref: %s: %w", op, err)
	}
	return nil
}
