package backend

import (
	"sync"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// The counting decorator: each stage the device backend lacks is the reference's, with every
// call counted by name. Everything in this file goes once the device implements every stage.

// counted runs one reference call of op.
func counted[T any](f *Fallbacks, op string, call func() (T, error)) (T, error) {
	f.count(op)
	return call()
}

func countedErr(f *Fallbacks, op string, call func() error) error {
	f.count(op)
	return call()
}

type fallbackConstraints struct {
	fb  *Fallbacks
	ref cpuref.Backend
}

func (c fallbackConstraints) NewConstraintProver(p params.SystemParams, traces []*stark.AirInput, ch *stark.ConstraintChallenges) (stark.ConstraintProver, error) {
	cp, err := counted(c.fb, "NewConstraintProver", func() (stark.ConstraintProver, error) { return c.ref.NewConstraintProver(p, traces, ch) })
	if err != nil {
		return nil, err
	}
	return constraintProver{c.fb, cp}, nil
}

type constraintProver struct {
	fb  *Fallbacks
	ref stark.ConstraintProver
}

func (c constraintProver) UnivariateRound() ([]stark.ConstraintTriple, error) {
	return counted(c.fb, "ConstraintProver.UnivariateRound", c.ref.UnivariateRound)
}
func (c constraintProver) BindUnivariate(r0 field.Fp4) error {
	return countedErr(c.fb, "ConstraintProver.BindUnivariate", func() error { return c.ref.BindUnivariate(r0) })
}
func (c constraintProver) Round() ([]stark.ConstraintTriple, error) {
	return counted(c.fb, "ConstraintProver.Round", c.ref.Round)
}
func (c constraintProver) Bind(r field.Fp4) error {
	return countedErr(c.fb, "ConstraintProver.Bind", func() error { return c.ref.Bind(r) })
}
func (c constraintProver) Openings(t int) ([][]field.Fp4, error) {
	return counted(c.fb, "ConstraintProver.Openings", func() ([][]field.Fp4, error) { return c.ref.Openings(t) })
}
func (c constraintProver) Release() { c.ref.Release() }

// hostBridge gives the reference stages host copies of device commitments: Q downloaded once
// per commitment, its codeword and tree recomputed on the host (counted as one fallback each).
type hostBridge struct {
	fb     *Fallbacks
	mu     sync.Mutex
	copies map[*device.Committed]*cpuref.Committed
}

func (h *hostBridge) host(p params.SystemParams, cs []stark.Committed) ([]stark.Committed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]stark.Committed, len(cs))
	for i, c := range cs {
		dc, ok := c.(*device.Committed)
		if !ok {
			return nil, device.ErrForeignHandle
		}
		if hc := h.copies[dc]; hc != nil {
			out[i] = hc
			continue
		}
		h.fb.count("HostCopy")
		q, err := dc.StackedMatrix()
		if err != nil {
			return nil, err
		}
		cw, err := cpuref.RSEncodeMatrix(p.LSkip, p.LogBlowup, q)
		if err != nil {
			return nil, err
		}
		tree, err := cpuref.NewMerkleTree(cw, 1<<p.Whir.K)
		if err != nil {
			return nil, err
		}
		hc := &cpuref.Committed{Data: &cpuref.StackedPCSData{Layout: dc.Layout(), Matrix: q, Tree: tree}}
		h.copies[dc] = hc
		out[i] = hc
	}
	return out, nil
}

type fallbackStacking struct {
	h   *hostBridge
	ref cpuref.Backend
}

func (s fallbackStacking) NewStackingProver(p params.SystemParams, commits []stark.Committed, b *stark.StackingBatch) (stark.StackingProver, error) {
	hc, err := s.h.host(p, commits)
	if err != nil {
		return nil, err
	}
	sp, err := counted(s.h.fb, "NewStackingProver", func() (stark.StackingProver, error) { return s.ref.NewStackingProver(p, hc, b) })
	if err != nil {
		return nil, err
	}
	return stackingProver{s.h.fb, sp}, nil
}

type stackingProver struct {
	fb  *Fallbacks
	ref stark.StackingProver
}

func (s stackingProver) UnivariateRound() ([]field.Fp4, error) {
	return counted(s.fb, "StackingProver.UnivariateRound", s.ref.UnivariateRound)
}
func (s stackingProver) BindUnivariate(u0 field.Fp4) error {
	return countedErr(s.fb, "StackingProver.BindUnivariate", func() error { return s.ref.BindUnivariate(u0) })
}
func (s stackingProver) Round() (s1, s2 field.Fp4, err error) {
	r, err := counted(s.fb, "StackingProver.Round", func() ([2]field.Fp4, error) { a, b, err := s.ref.Round(); return [2]field.Fp4{a, b}, err })
	return r[0], r[1], err
}
func (s stackingProver) Bind(u field.Fp4) error {
	return countedErr(s.fb, "StackingProver.Bind", func() error { return s.ref.Bind(u) })
}
func (s stackingProver) Openings() ([][]field.Fp4, error) {
	return counted(s.fb, "StackingProver.Openings", s.ref.Openings)
}
func (s stackingProver) Release() { s.ref.Release() }
