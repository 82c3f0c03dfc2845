package stark

// Proof shape checks (spec A §7.9, B §6.1 item 3): list lengths fixed by the parameters and the
// per-commitment stacked widths, as `verifier/proof_shape.rs::verify_proof_shape`. The checks
// that need the verifying key's constraint data (per-AIR presence, cached counts, part widths)
// take those numbers as arguments.

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/params"
)

// ErrShape is wrapped by every shape-check error.
var ErrShape = errors.New("proof shape")

// ShapeError names the part of the proof whose shape is wrong.
type ShapeError struct {
	// Field is the offending list, e.g. "whir.codeword_merkle_proofs[1][3]".
	Field string
	// Msg says what is wrong, e.g. "depth 15, want 16".
	Msg string
}

func (e *ShapeError) Error() string { return "proof shape: " + e.Field + ": " + e.Msg }

func (e *ShapeError) Unwrap() error { return ErrShape }

func shapeErr(field, format string, args ...any) error {
	return &ShapeError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func lenErr(field string, got, want int) error {
	return shapeErr(field, "length %d, want %d", got, want)
}

// stageShapeErr is a shape-check error as a verifier stage reports it: errors.Is finds both the
// stage's shape sentinel (ErrStackingShape, ErrWhirShape) and ErrShape, errors.As the *ShapeError.
type stageShapeErr struct {
	stage error
	shape error
}

func (e *stageShapeErr) Error() string {
	var se *ShapeError
	if errors.As(e.shape, &se) {
		return e.stage.Error() + ": " + se.Field + ": " + se.Msg
	}
	return e.stage.Error() + ": " + e.shape.Error()
}

func (e *stageShapeErr) Unwrap() []error { return []error{e.stage, e.shape} }

func stageShapeError(stage, err error) error { return &stageShapeErr{stage: stage, shape: err} }

// CheckStackingShape checks the stacking proof against p and the stacked widths W_j of the C
// commitments (common main first; layouts as in spec A §5.2).
func CheckStackingShape(p params.SystemParams, widths []int, st *StackingProof) error {
	if st == nil {
		return shapeErr("stacking", "no proof")
	}
	if len(widths) == 0 {
		return shapeErr("stacking.stacking_openings", "no commitments")
	}
	s0 := 2*((1<<p.LSkip)-1) + 1
	if len(st.UnivariateRoundCoeffs) != s0 {
		return lenErr("stacking.univariate_round_coeffs", len(st.UnivariateRoundCoeffs), s0)
	}
	if len(st.SumcheckRoundPolys) != p.NStack {
		return lenErr("stacking.sumcheck_round_polys", len(st.SumcheckRoundPolys), p.NStack)
	}
	total := 0
	for _, w := range widths {
		total += w
	}
	if total > p.WStack {
		return shapeErr("stacking.stacking_openings", "total stacked width %d exceeds w_stack %d", total, p.WStack)
	}
	if len(st.StackingOpenings) != len(widths) {
		return lenErr("stacking.stacking_openings", len(st.StackingOpenings), len(widths))
	}
	for j, o := range st.StackingOpenings {
		if len(o) != widths[j] {
			return lenErr(fmt.Sprintf("stacking.stacking_openings[%d]", j), len(o), widths[j])
		}
	}
	return nil
}

// CheckWhirShape checks the WHIR proof against p and the stacked widths W_j of the C commitments.
func CheckWhirShape(p params.SystemParams, widths []int, w *WhirProof) error {
	if w == nil {
		return shapeErr("whir", "no proof")
	}
	R := p.NumWhirRounds()
	if R == 0 {
		return shapeErr("params.whir.rounds", "no WHIR rounds")
	}
	k := p.Whir.K
	S := R * k
	C := len(widths)
	m := p.LogStackedHeight()
	switch {
	case len(w.WhirSumcheckPolys) != S:
		return lenErr("whir.whir_sumcheck_polys", len(w.WhirSumcheckPolys), S)
	case len(w.CodewordCommits) != R-1:
		return lenErr("whir.codeword_commits", len(w.CodewordCommits), R-1)
	case len(w.OODValues) != R-1:
		return lenErr("whir.ood_values", len(w.OODValues), R-1)
	case len(w.FoldingPowWitnesses) != S:
		return lenErr("whir.folding_pow_witnesses", len(w.FoldingPowWitnesses), S)
	case len(w.QueryPhasePowWitnesses) != R:
		return lenErr("whir.query_phase_pow_witnesses", len(w.QueryPhasePowWitnesses), R)
	case len(w.InitialRoundOpenedRows) != C:
		return lenErr("whir.initial_round_opened_rows", len(w.InitialRoundOpenedRows), C)
	case len(w.InitialRoundMerkleProofs) != C:
		return lenErr("whir.initial_round_merkle_proofs", len(w.InitialRoundMerkleProofs), C)
	case len(w.CodewordOpenedValues) != R-1:
		return lenErr("whir.codeword_opened_values", len(w.CodewordOpenedValues), R-1)
	case len(w.CodewordMerkleProofs) != R-1:
		return lenErr("whir.codeword_merkle_proofs", len(w.CodewordMerkleProofs), R-1)
	}
	if lf := p.LogFinalPolyLen(); lf < 0 || len(w.FinalPoly) != 1<<lf {
		return lenErr("whir.final_poly", len(w.FinalPoly), 1<<max(lf, 0))
	}
	rows := 1 << k
	nq0 := p.Whir.Rounds[0].NumQueries
	depth0 := max(m+p.LogBlowup-k, 0)
	for j := range C {
		opened, proofs := w.InitialRoundOpenedRows[j], w.InitialRoundMerkleProofs[j]
		if len(opened) != nq0 {
			return shapeErr(fmt.Sprintf("whir.initial_round_opened_rows[%d]", j), "%d queries, want %d", len(opened), nq0)
		}
		if len(proofs) != nq0 {
			return shapeErr(fmt.Sprintf("whir.initial_round_merkle_proofs[%d]", j), "%d queries, want %d", len(proofs), nq0)
		}
		for q, group := range opened {
			if len(group) != rows {
				return shapeErr(fmt.Sprintf("whir.initial_round_opened_rows[%d][%d]", j, q), "%d rows, want 2^k = %d", len(group), rows)
			}
			for t, row := range group {
				if len(row) != widths[j] {
					return shapeErr(fmt.Sprintf("whir.initial_round_opened_rows[%d][%d][%d]", j, q, t), "width %d, want %d", len(row), widths[j])
				}
			}
		}
		for q, pr := range proofs {
			if len(pr) != depth0 {
				return shapeErr(fmt.Sprintf("whir.initial_round_merkle_proofs[%d][%d]", j, q), "depth %d, want %d", len(pr), depth0)
			}
		}
	}
	for r := 1; r < R; r++ {
		nq := p.Whir.Rounds[r].NumQueries
		vals, proofs := w.CodewordOpenedValues[r-1], w.CodewordMerkleProofs[r-1]
		if len(vals) != nq {
			return shapeErr(fmt.Sprintf("whir.codeword_opened_values[%d]", r-1), "%d queries, want %d", len(vals), nq)
		}
		if len(proofs) != nq {
			return shapeErr(fmt.Sprintf("whir.codeword_merkle_proofs[%d]", r-1), "%d queries, want %d", len(proofs), nq)
		}
		for q, v := range vals {
			if len(v) != rows {
				return shapeErr(fmt.Sprintf("whir.codeword_opened_values[%d][%d]", r-1, q), "%d values, want 2^k = %d", len(v), rows)
			}
		}
		depth := max(m+p.LogBlowup-k-r, 0)
		for q, pr := range proofs {
			if len(pr) != depth {
				return shapeErr(fmt.Sprintf("whir.codeword_merkle_proofs[%d][%d]", r-1, q), "depth %d, want %d", len(pr), depth)
			}
		}
	}
	return nil
}

// CheckGkrShape checks the GKR proof for numLayers = L layers (L = l_skip + n_logup when the
// AIRs have interactions, else 0; spec B §6.1).
func CheckGkrShape(numLayers int, g *GkrProof) error {
	if len(g.ClaimsPerLayer) != numLayers {
		return lenErr("gkr.claims_per_layer", len(g.ClaimsPerLayer), numLayers)
	}
	if want := max(numLayers-1, 0); len(g.SumcheckPolys) != want {
		return lenErr("gkr.sumcheck_polys", len(g.SumcheckPolys), want)
	}
	for i, layer := range g.SumcheckPolys {
		if len(layer) != i+1 {
			return lenErr(fmt.Sprintf("gkr.sumcheck_polys[%d]", i), len(layer), i+1)
		}
	}
	return nil
}

// CheckBatchConstraintShape checks the batch constraint proof for numTraces present AIRs, the
// verifying key's maximum constraint degree d (mvk.max_constraint_degree(), not the parameter
// bound) and n_max sumcheck rounds (spec B §6.1). partOpenings, when non-nil, gives for each present AIR (in
// trace order) the expected number of openings of each part (width · (need_rot ? 2 : 1), common
// main first, then preprocessed, then cached parts); nil skips the VK-dependent part checks.
func CheckBatchConstraintShape(p params.SystemParams, d, numTraces, nMax int, partOpenings [][]int, bc *BatchConstraintProof) error {
	s0 := (d+1)*((1<<p.LSkip)-1) + 1
	switch {
	case len(bc.NumeratorTermPerAir) != numTraces:
		return lenErr("batch.numerator_term_per_air", len(bc.NumeratorTermPerAir), numTraces)
	case len(bc.DenominatorTermPerAir) != numTraces:
		return lenErr("batch.denominator_term_per_air", len(bc.DenominatorTermPerAir), numTraces)
	case len(bc.UnivariateRoundCoeffs) != s0:
		return lenErr("batch.univariate_round_coeffs", len(bc.UnivariateRoundCoeffs), s0)
	case len(bc.SumcheckRoundPolys) != nMax:
		return lenErr("batch.sumcheck_round_polys", len(bc.SumcheckRoundPolys), nMax)
	case len(bc.ColumnOpenings) != numTraces:
		return lenErr("batch.column_openings", len(bc.ColumnOpenings), numTraces)
	}
	for i, r := range bc.SumcheckRoundPolys {
		if len(r) != d+1 {
			return lenErr(fmt.Sprintf("batch.sumcheck_round_polys[%d]", i), len(r), d+1)
		}
	}
	if partOpenings == nil {
		return nil
	}
	if len(partOpenings) != numTraces {
		return shapeErr("batch.column_openings", "expected openings given for %d traces, want %d", len(partOpenings), numTraces)
	}
	for i, parts := range bc.ColumnOpenings {
		if len(parts) != len(partOpenings[i]) {
			return shapeErr(fmt.Sprintf("batch.column_openings[%d]", i), "%d parts, want %d", len(parts), len(partOpenings[i]))
		}
		for j, part := range parts {
			if len(part) != partOpenings[i][j] {
				return lenErr(fmt.Sprintf("batch.column_openings[%d][%d]", i, j), len(part), partOpenings[i][j])
			}
		}
	}
	return nil
}
