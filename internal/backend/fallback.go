package backend

import (
	"github.com/metalprove/metalprove/internal/backend/cpuref"
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
