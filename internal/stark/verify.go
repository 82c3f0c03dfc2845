package stark

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// The whole verifier (spec B §6, A §7.9): parameter equality, at least one present trace, proof
// shape, trace-height linear constraints, then the transcript replay: preamble → LogUp-GKR →
// batch constraint sumcheck → stacked reduction → WHIR.

var (
	// ErrParamsMismatch: the verifier's parameters are not the verifying key's
	// (SystemParamsMismatch).
	ErrParamsMismatch = errors.New("stark: system parameters do not match the verifying key")
	// ErrNoTraces: the proof has no present AIR.
	ErrNoTraces = errors.New("stark: proof has no present trace")
	// ErrTraceHeights: the trace heights violate a linear trace-height constraint of the key.
	ErrTraceHeights = errors.New("stark: trace heights violate a trace-height constraint")
	// ErrPreprocessedHeight: a present AIR's log height is not its preprocessed trace's
	// (PreprocessedTraceHeightMismatch); it is a shape error.
	ErrPreprocessedHeight = fmt.Errorf("%w: log height does not match the preprocessed trace", ErrShape)
	// ErrVerifierInternal: the verifier hit an internal fault (a bug); the proof is rejected.
	ErrVerifierInternal = errors.New("stark: verifier internal error")
)

// verifyPlan is what the checks before the transcript derive from the key and the proof.
type verifyPlan struct {
	order   []int // present AIR indices in trace order
	shapes  []TraceShape
	roots   []Digest
	layouts []*StackedLayout
}

// checkProofShape is B §6.1 items 2, 3 and 5 (verify_proof_shape): it also builds the trace
// order, the trace shapes and the commitment list (roots and layouts).
func checkProofShape(vk *VerifyingKey, proof *Proof, p params.SystemParams) (*verifyPlan, error) {
	n := vk.NumAirs()
	if len(proof.TraceVData) != n {
		return nil, lenErr("trace_vdata", len(proof.TraceVData), n)
	}
	if len(proof.PublicValues) != n {
		return nil, lenErr("public_values", len(proof.PublicValues), n)
	}
	plan := &verifyPlan{}
	if !slices.ContainsFunc(proof.TraceVData, func(td *TraceVData) bool { return td != nil }) {
		return nil, ErrNoTraces
	}
	m := p.LogStackedHeight()
	for i, avk := range vk.MVK.PerAir {
		td := proof.TraceVData[i]
		f := func(name string) string { return fmt.Sprintf("%s[%d]", name, i) }
		if td == nil {
			if avk.IsRequired {
				return nil, shapeErr(f("trace_vdata"), "AIR is required but absent")
			}
			if len(proof.PublicValues[i]) != 0 {
				return nil, shapeErr(f("public_values"), "absent AIR has %d public values", len(proof.PublicValues[i]))
			}
			continue
		}
		if len(td.CachedCommitments) != len(avk.Width.CachedMains) {
			return nil, lenErr(f("trace_vdata")+".cached_commitments", len(td.CachedCommitments), len(avk.Width.CachedMains))
		}
		if td.LogHeight < 0 || td.LogHeight > m {
			return nil, shapeErr(f("trace_vdata")+".log_height", "%d exceeds l_skip + n_stack = %d", td.LogHeight, m)
		}
		if len(proof.PublicValues[i]) != avk.NumPublicValues {
			return nil, lenErr(f("public_values"), len(proof.PublicValues[i]), avk.NumPublicValues)
		}
		if pre := avk.Preprocessed; pre != nil && pre.HypercubeDim+p.LSkip != td.LogHeight {
			return nil, fmt.Errorf("%w: AIR %d: log height %d, preprocessed trace 2^%d", ErrPreprocessedHeight, i, td.LogHeight, pre.HypercubeDim+p.LSkip)
		}
	}
	heights := make([]int, n) // -1: absent; present log heights were checked >= 0 above
	for i, td := range proof.TraceVData {
		heights[i] = -1
		if td != nil {
			heights[i] = td.LogHeight
		}
	}
	plan.order = TraceOrder(heights)

	// Per-trace shapes, batch-constraint part widths, commitment list.
	nMax := 0
	parts := make([][]int, len(plan.order))
	commonDims := make([]MatrixDim, len(plan.order))
	plan.roots = []Digest{proof.CommonMainCommit}
	plan.layouts = []*StackedLayout{nil}
	for t, i := range plan.order {
		avk := vk.MVK.PerAir[i]
		td := proof.TraceVData[i]
		h := td.LogHeight
		plan.shapes = append(plan.shapes, TraceShape{AirIndex: i, VK: avk, Program: vk.program(i), LogHeight: h, Public: proof.PublicValues[i]})
		nMax = max(nMax, h-p.LSkip)
		rot := 1
		if avk.NeedRot {
			rot = 2
		}
		parts[t] = []int{avk.Width.CommonMain * rot}
		commonDims[t] = MatrixDim{Width: avk.Width.CommonMain, LogHeight: h}
		one := func(width int, root Digest) error {
			l, err := NewStackedLayout(p.LSkip, m, []MatrixDim{{Width: width, LogHeight: h}})
			if err != nil {
				return shapeErr(fmt.Sprintf("trace_vdata[%d]", i), "%v", err)
			}
			plan.roots = append(plan.roots, root)
			plan.layouts = append(plan.layouts, l)
			return nil
		}
		if pre := avk.Preprocessed; pre != nil {
			parts[t] = append(parts[t], avk.Width.Preprocessed*rot)
			if err := one(avk.Width.Preprocessed, pre.Commit); err != nil {
				return nil, err
			}
		}
		for j, w := range avk.Width.CachedMains {
			parts[t] = append(parts[t], w*rot)
			if err := one(w, td.CachedCommitments[j]); err != nil {
				return nil, err
			}
		}
	}
	cl, err := NewStackedLayout(p.LSkip, m, commonDims)
	if err != nil {
		return nil, shapeErr("trace_vdata", "common main layout: %v", err)
	}
	plan.layouts[0] = cl
	if err := CheckBatchConstraintShape(p, p.MaxConstraintDegree, len(plan.order), nMax, parts, &proof.BatchConstraint); err != nil {
		return nil, err
	}
	widths := make([]int, len(plan.layouts))
	for j, l := range plan.layouts {
		widths[j] = l.Width
	}
	if err := CheckStackingShape(p, widths, &proof.Stacking); err != nil {
		return nil, err
	}
	if err := CheckWhirShape(p, widths, &proof.Whir); err != nil {
		return nil, err
	}
	return plan, nil
}

// checkTraceHeights is B §6.1 item 4: Σ_present 2^max(h, l)·coef[air] < threshold for every
// linear constraint (u64 arithmetic; an overflowing sum violates the constraint).
func checkTraceHeights(vk *VerifyingKey, proof *Proof, p params.SystemParams) error {
	for ci, c := range vk.MVK.TraceHeightConstraints {
		var sum uint64
		over := false
		for i, td := range proof.TraceVData {
			if td == nil || i >= len(c.Coefficients) {
				continue
			}
			hi, lo := bits.Mul64(uint64(1)<<max(td.LogHeight, p.LSkip), uint64(c.Coefficients[i]))
			var carry uint64
			sum, carry = bits.Add64(sum, lo, 0)
			over = over || hi != 0 || carry != 0
		}
		if over || sum >= uint64(c.Threshold) {
			return fmt.Errorf("%w: constraint %d: Σ height·coefficient = %d ≥ %d", ErrTraceHeights, ci, sum, c.Threshold)
		}
	}
	return nil
}

// Verify verifies proof against the verifying key and the verifier's parameters p. Errors wrap
// ErrParamsMismatch, ErrNoTraces, ErrShape, ErrTraceHeights or the sentinel of the stage that
// rejected the proof (ErrGkr, the batch constraint stage's, ErrStacking, ErrWhir; PoW failures
// also ErrPow). Verify never panics on any proof value.
func Verify(vk *VerifyingKey, proof *Proof, p params.SystemParams) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrVerifierInternal, r)
		}
	}()
	if vk == nil || vk.MVK == nil || proof == nil {
		return fmt.Errorf("%w: no verifying key or proof", ErrVerifierInternal)
	}
	if !p.Equal(vk.Params()) {
		return ErrParamsMismatch
	}
	plan, err := checkProofShape(vk, proof, p)
	if err != nil {
		return err
	}
	if err := checkTraceHeights(vk, proof, p); err != nil {
		return err
	}
	tr := transcript.New()
	observePreamble(&tr, vk, proof)
	outcome, err := VerifyGkr(&tr, p, plan.shapes, &proof.GKR)
	if err != nil {
		return err
	}
	claims, err := VerifyBatchConstraints(&tr, p, plan.shapes, outcome, &proof.BatchConstraint)
	if err != nil {
		return err
	}
	return VerifyOpenings(&tr, p, plan.roots, plan.layouts, claims, &proof.Stacking, &proof.Whir)
}
