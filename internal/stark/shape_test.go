package stark

import (
	"errors"
	"testing"
)

func TestShapeChecks(t *testing.T) {
	p := codecPreset(t, "app-100bit", 21)
	widths := []int{3, 1}
	g := newCodecGen(11)
	type tc struct {
		name  string
		mut   func(w *WhirProof, st *StackingProof)
		field string
		msg   string
	}
	cases := []tc{
		{"ok", func(*WhirProof, *StackingProof) {}, "", ""},
		{"sumcheck", func(w *WhirProof, _ *StackingProof) { w.WhirSumcheckPolys = w.WhirSumcheckPolys[1:] }, "whir.whir_sumcheck_polys", "length 11, want 12"},
		{"ood", func(w *WhirProof, _ *StackingProof) { w.OODValues = nil }, "whir.ood_values", "length 0, want 2"},
		{"final", func(w *WhirProof, _ *StackingProof) { w.FinalPoly = w.FinalPoly[:511] }, "whir.final_poly", "length 511, want 512"},
		{"queries0", func(w *WhirProof, _ *StackingProof) { w.InitialRoundOpenedRows[1] = w.InitialRoundOpenedRows[1][1:] }, "whir.initial_round_opened_rows[1]", "192 queries, want 193"},
		{"width", func(w *WhirProof, _ *StackingProof) {
			w.InitialRoundOpenedRows[0][5][2] = w.InitialRoundOpenedRows[0][5][2][1:]
		}, "whir.initial_round_opened_rows[0][5][2]", "width 2, want 3"},
		{"depth0", func(w *WhirProof, _ *StackingProof) { w.InitialRoundMerkleProofs[1][7] = nil }, "whir.initial_round_merkle_proofs[1][7]", "depth 0, want 18"},
		{"depth1", func(w *WhirProof, _ *StackingProof) {
			w.CodewordMerkleProofs[1][3] = w.CodewordMerkleProofs[1][3][1:]
		}, "whir.codeword_merkle_proofs[1][3]", "depth 15, want 16"},
		{"values", func(w *WhirProof, _ *StackingProof) { w.CodewordOpenedValues[0][1] = nil }, "whir.codeword_opened_values[0][1]", "0 values, want 2^k = 16"},
		{"st-coeffs", func(_ *WhirProof, st *StackingProof) { st.UnivariateRoundCoeffs = nil }, "stacking.univariate_round_coeffs", "length 0, want 31"},
		{"st-rounds", func(_ *WhirProof, st *StackingProof) { st.SumcheckRoundPolys = st.SumcheckRoundPolys[1:] }, "stacking.sumcheck_round_polys", "length 16, want 17"},
		{"st-openings", func(_ *WhirProof, st *StackingProof) { st.StackingOpenings[1] = nil }, "stacking.stacking_openings[1]", "length 0, want 1"},
	}
	for _, c := range cases {
		w, st := g.whir(p, widths), g.stacking(p, widths)
		c.mut(&w, &st)
		err := CheckWhirShape(p, widths, &w)
		if err == nil {
			err = CheckStackingShape(p, widths, &st)
		}
		if c.field == "" {
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue
		}
		var se *ShapeError
		if !errors.Is(err, ErrShape) || !errors.As(err, &se) || se.Field != c.field || se.Msg != c.msg {
			t.Errorf("%s: got %v, want %s: %s", c.name, err, c.field, c.msg)
		}
	}
	// Σ widths > w_stack
	st := g.stacking(p, []int{2048, 1})
	if err := CheckStackingShape(p, []int{2048, 1}, &st); !errors.Is(err, ErrShape) {
		t.Fatalf("w_stack overflow: %v", err)
	}
	// wrong number of commitments
	w := g.whir(p, widths)
	if err := CheckWhirShape(p, []int{3}, &w); !errors.Is(err, ErrShape) {
		t.Fatalf("commitment count: %v", err)
	}
}

func TestShapeGkrBatch(t *testing.T) {
	p := sectionFParams()
	s := codecSmallShape()
	pr := newCodecGen(2).proof(p, s)
	if err := CheckGkrShape(s.gkrLayers+1, &pr.GKR); !errors.Is(err, ErrShape) {
		t.Fatalf("gkr: %v", err)
	}
	pr.GKR.SumcheckPolys[2] = pr.GKR.SumcheckPolys[2][:2]
	if err := CheckGkrShape(s.gkrLayers, &pr.GKR); err == nil || err.Error() != "proof shape: gkr.sumcheck_polys[2]: length 2, want 3" {
		t.Fatalf("gkr: %v", err)
	}
	bc := &pr.BatchConstraint
	if err := CheckBatchConstraintShape(p, 2, 3, s.nMax, nil, bc); !errors.Is(err, ErrShape) {
		t.Fatalf("degree: %v", err)
	}
	bc.ColumnOpenings[1][1] = nil
	if err := CheckBatchConstraintShape(p, p.MaxConstraintDegree, 3, s.nMax, nil, bc); err != nil {
		t.Fatalf("without part widths: %v", err)
	}
	if err := CheckBatchConstraintShape(p, p.MaxConstraintDegree, 3, s.nMax, s.partCounts, bc); err == nil ||
		err.Error() != "proof shape: batch.column_openings[1][1]: length 0, want 2" {
		t.Fatalf("part widths: %v", err)
	}
}
