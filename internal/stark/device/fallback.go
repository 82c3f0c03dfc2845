package device

import (
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// This file holds the operations that still run on the reference backend. Each is counted by
// name (Backend.Fallbacks); the prover objects are wrapped so that every method call is counted
// too, except the ones the device already serves (WhirProver.OpenInitial) and Release.

// NewStackingProver implements stark.Backend: reference fallback (host copies of the stacked
// matrices).
func (b *Backend) NewStackingProver(p params.SystemParams, commits []stark.Committed, batch *stark.StackingBatch) (stark.StackingProver, error) {
	return delegate(b, "NewStackingProver", func(r cpuref.Backend) (stark.StackingProver, error) {
		hc, err := b.hostCommits(commits)
		if err != nil {
			return nil, err
		}
		sp, err := r.NewStackingProver(p, hc, batch)
		if err != nil {
			return nil, err
		}
		return &stackingProver{b: b, ref: sp}, nil
	})
}

// stackingProver counts every call into the reference stacking prover.
type stackingProver struct {
	b   *Backend
	ref stark.StackingProver
}

func (s *stackingProver) UnivariateRound() ([]field.Fp4, error) {
	s.b.fallback("StackingProver.UnivariateRound")
	return s.ref.UnivariateRound()
}

func (s *stackingProver) BindUnivariate(u0 field.Fp4) error {
	s.b.fallback("StackingProver.BindUnivariate")
	return s.ref.BindUnivariate(u0)
}

func (s *stackingProver) Round() (s1, s2 field.Fp4, err error) {
	s.b.fallback("StackingProver.Round")
	return s.ref.Round()
}

func (s *stackingProver) Bind(u field.Fp4) error {
	s.b.fallback("StackingProver.Bind")
	return s.ref.Bind(u)
}

func (s *stackingProver) Openings() ([][]field.Fp4, error) {
	s.b.fallback("StackingProver.Openings")
	return s.ref.Openings()
}

func (s *stackingProver) Release() { s.ref.Release() }

// NewWhirProver implements stark.Backend: the WHIR tables, sumcheck, folding and folded
// codewords are a reference fallback (host copies of the stacked matrices); the openings of the
// initial commitments are served from the device.
func (b *Backend) NewWhirProver(p params.SystemParams, commits []stark.Committed, mu field.Fp4, uCube []field.Fp4) (stark.WhirProver, error) {
	dcs, err := b.commits(commits)
	if err != nil {
		return nil, err
	}
	return delegate(b, "NewWhirProver", func(r cpuref.Backend) (stark.WhirProver, error) {
		hc, err := b.hostCommits(commits)
		if err != nil {
			return nil, err
		}
		wp, err := r.NewWhirProver(p, hc, mu, uCube)
		if err != nil {
			return nil, err
		}
		return &whirProver{b: b, ref: wp, commits: dcs}, nil
	})
}

// whirProver runs OpenInitial on the device and counts every other call into the reference
// WHIR prover.
type whirProver struct {
	b       *Backend
	ref     stark.WhirProver
	commits []*Committed
}

func (w *whirProver) SumcheckRound() (s1, s2 field.Fp4, err error) {
	w.b.fallback("WhirProver.SumcheckRound")
	return w.ref.SumcheckRound()
}

func (w *whirProver) Fold(alpha field.Fp4) error {
	w.b.fallback("WhirProver.Fold")
	return w.ref.Fold(alpha)
}

func (w *whirProver) CommitFolded(logDomain int) (stark.Digest, error) {
	w.b.fallback("WhirProver.CommitFolded")
	return w.ref.CommitFolded(logDomain)
}

func (w *whirProver) EvalFolded(z field.Fp4) (field.Fp4, error) {
	w.b.fallback("WhirProver.EvalFolded")
	return w.ref.EvalFolded(z)
}

func (w *whirProver) FinalPoly() ([]field.Fp4, error) {
	w.b.fallback("WhirProver.FinalPoly")
	return w.ref.FinalPoly()
}

func (w *whirProver) OpenCodeword(idx, y int) ([]field.Fp4, []stark.Digest, error) {
	w.b.fallback("WhirProver.OpenCodeword")
	return w.ref.OpenCodeword(idx, y)
}

func (w *whirProver) AccumulateWeight(coefs, points []field.Fp4) error {
	w.b.fallback("WhirProver.AccumulateWeight")
	return w.ref.AccumulateWeight(coefs, points)
}

func (w *whirProver) Release() { w.ref.Release() }

// OpenInitial implements stark.WhirProver on the device: per commitment one gather kernel (one
// sync), then the 2^k opened rows and the sibling digests are downloaded.
func (w *whirProver) OpenInitial(y int) ([][][]field.Fp, [][]stark.Digest, error) {
	rows := make([][][]field.Fp, len(w.commits))
	proofs := make([][]stark.Digest, len(w.commits))
	for i, c := range w.commits {
		if c.tree == nil {
			return nil, nil, ErrCommitFreed
		}
		o, err := c.tree.Open(y)
		if err != nil {
			return nil, nil, err
		}
		rows[i], proofs[i] = o.Rows, o.Proof
	}
	return rows, proofs, nil
}

// NewGkrProver implements stark.GkrBackend: reference fallback (the traces are host data).
func (b *Backend) NewGkrProver(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
	return delegate(b, "NewGkrProver", func(r cpuref.Backend) (stark.GkrProver, error) {
		g, err := r.NewGkrProver(p, traces, layout, alpha, beta)
		if err != nil {
			return nil, err
		}
		return &gkrProver{b: b, ref: g}, nil
	})
}

// gkrProver counts every call into the reference GKR prover.
type gkrProver struct {
	b   *Backend
	ref stark.GkrProver
}

func (g *gkrProver) Root() (p, q field.Fp4, err error) {
	g.b.fallback("GkrProver.Root")
	return g.ref.Root()
}

func (g *gkrProver) BeginLayer(j int, xi []field.Fp4, lambda field.Fp4) error {
	g.b.fallback("GkrProver.BeginLayer")
	return g.ref.BeginLayer(j, xi, lambda)
}

func (g *gkrProver) Round() ([3]field.Fp4, error) {
	g.b.fallback("GkrProver.Round")
	return g.ref.Round()
}

func (g *gkrProver) Bind(r field.Fp4) error {
	g.b.fallback("GkrProver.Bind")
	return g.ref.Bind(r)
}

func (g *gkrProver) LayerClaims() (stark.GkrLayerClaims, error) {
	g.b.fallback("GkrProver.LayerClaims")
	return g.ref.LayerClaims()
}

func (g *gkrProver) Release() { g.ref.Release() }

// NewConstraintProver implements stark.ConstraintBackend: reference fallback (the traces are
// host data).
func (b *Backend) NewConstraintProver(p params.SystemParams, traces []*stark.AirInput, ch *stark.ConstraintChallenges) (stark.ConstraintProver, error) {
	return delegate(b, "NewConstraintProver", func(r cpuref.Backend) (stark.ConstraintProver, error) {
		c, err := r.NewConstraintProver(p, traces, ch)
		if err != nil {
			return nil, err
		}
		return &constraintProver{b: b, ref: c}, nil
	})
}

// constraintProver counts every call into the reference batch-constraint prover.
type constraintProver struct {
	b   *Backend
	ref stark.ConstraintProver
}

func (c *constraintProver) UnivariateRound() ([]stark.ConstraintTriple, error) {
	c.b.fallback("ConstraintProver.UnivariateRound")
	return c.ref.UnivariateRound()
}

func (c *constraintProver) BindUnivariate(r0 field.Fp4) error {
	c.b.fallback("ConstraintProver.BindUnivariate")
	return c.ref.BindUnivariate(r0)
}

func (c *constraintProver) Round() ([]stark.ConstraintTriple, error) {
	c.b.fallback("ConstraintProver.Round")
	return c.ref.Round()
}

func (c *constraintProver) Bind(r field.Fp4) error {
	c.b.fallback("ConstraintProver.Bind")
	return c.ref.Bind(r)
}

func (c *constraintProver) Openings(t int) ([][]field.Fp4, error) {
	c.b.fallback("ConstraintProver.Openings")
	return c.ref.Openings(t)
}

func (c *constraintProver) Release() { c.ref.Release() }
