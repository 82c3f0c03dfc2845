package cpuref

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// whirProver is the CPU WHIR prover state (spec A §6.3): the hypercube tables f and w and the
// Merkle trees of the committed folded codewords.
type whirProver struct {
	k       int
	commits []*Committed
	f, w    []field.Fp4
	trees   []*MerkleTree
}

// NewWhirProver implements stark.Backend.
func (Backend) NewWhirProver(p params.SystemParams, commits []stark.Committed, mu field.Fp4, uCube []field.Fp4) (stark.WhirProver, error) {
	cs, err := cpuCommits(commits)
	if err != nil {
		return nil, err
	}
	m := p.LSkip + p.NStack
	if len(uCube) != m {
		return nil, fmt.Errorf("%w: point of length %d, want %d", stark.ErrOpeningInput, len(uCube), m)
	}
	f := make([]field.Fp4, 1<<m)
	pw := field.Fp4One
	for _, c := range cs {
		q := c.Data.Matrix
		if q.Height != 1<<m || c.Data.Tree.Backing.Height != 1<<(m+p.LogBlowup) || c.Data.Tree.RowsPerQuery != 1<<p.Whir.K {
			return nil, fmt.Errorf("%w: commitment does not match the parameters", stark.ErrOpeningInput)
		}
		for j := range q.Width {
			e, err := RSMessage(p.LSkip, q.Column(j))
			if err != nil {
				return nil, err
			}
			CoeffsToEvals(e)
			for b, v := range e {
				f[b] = f[b].Add(pw.MulBase(v))
			}
			pw = pw.Mul(mu)
		}
	}
	return &whirProver{k: p.Whir.K, commits: cs, f: f, w: stark.EvalsMobiusEqHypercube(uCube)}, nil
}

func (wp *whirProver) Release() { wp.f, wp.w, wp.trees = nil, nil, nil }

func (wp *whirProver) SumcheckRound() (s1, s2 field.Fp4, err error) {
	if len(wp.f) < 2 {
		return s1, s2, ErrProverState
	}
	f, w := wp.f, wp.w
	for y := 0; y < len(f)/2; y++ {
		f0, f1, w0, w1 := f[2*y], f[2*y+1], w[2*y], w[2*y+1]
		s1 = s1.Add(f1.Mul(w1))
		s2 = s2.Add(f1.Double().Sub(f0).Mul(w1.Double().Sub(w0)))
	}
	return s1, s2, nil
}

func (wp *whirProver) Fold(alpha field.Fp4) error {
	if len(wp.f) < 2 {
		return ErrProverState
	}
	wp.f = foldTable(wp.f, alpha)
	wp.w = foldTable(wp.w, alpha)
	return nil
}

func (wp *whirProver) coeffs() []field.Fp4 {
	c := append([]field.Fp4(nil), wp.f...)
	evalsToCoeffsFp4(c)
	return c
}

func (wp *whirProver) CommitFolded(logDomain int) (stark.Digest, error) {
	if wp.f == nil || logDomain < 0 || 1<<logDomain < len(wp.f) || logDomain > MaxLogSize || logDomain < wp.k {
		return stark.Digest{}, ErrProverState
	}
	cw := make([]field.Fp4, 1<<logDomain)
	copy(cw, wp.coeffs())
	if err := dftFp4(cw); err != nil {
		return stark.Digest{}, err
	}
	tree, err := NewMerkleTreeFp4(cw, len(cw), 1<<wp.k)
	if err != nil {
		return stark.Digest{}, err
	}
	wp.trees = append(wp.trees, tree)
	return tree.Root(), nil
}

func (wp *whirProver) EvalFolded(z field.Fp4) (field.Fp4, error) {
	if wp.f == nil {
		return field.Fp4{}, ErrProverState
	}
	return stark.Horner(wp.coeffs(), z), nil
}

func (wp *whirProver) FinalPoly() ([]field.Fp4, error) {
	if wp.f == nil {
		return nil, ErrProverState
	}
	return wp.coeffs(), nil
}

func (wp *whirProver) OpenInitial(ys []int) ([]stark.InitialOpening, error) {
	out := make([]stark.InitialOpening, len(ys))
	for q, y := range ys {
		o := stark.InitialOpening{Rows: make([][][]field.Fp, len(wp.commits)), Paths: make([][]stark.Digest, len(wp.commits))}
		for c, com := range wp.commits {
			mo, err := com.Data.Tree.Open(y)
			if err != nil {
				return nil, err
			}
			o.Rows[c], o.Paths[c] = mo.Rows, mo.Proof
		}
		out[q] = o
	}
	return out, nil
}

func (wp *whirProver) OpenCodeword(idx int, ys []int) ([]stark.CodewordOpening, error) {
	if idx < 0 || idx >= len(wp.trees) {
		return nil, ErrProverState
	}
	out := make([]stark.CodewordOpening, len(ys))
	for q, y := range ys {
		o, err := wp.trees[idx].Open(y)
		if err != nil {
			return nil, err
		}
		vals := make([]field.Fp4, len(o.Rows))
		for t, r := range o.Rows {
			vals[t] = Fp4Row(r)[0]
		}
		out[q] = stark.CodewordOpening{Values: vals, Path: o.Proof}
	}
	return out, nil
}

func (wp *whirProver) AccumulateWeight(coefs, points []field.Fp4) error {
	if wp.w == nil || len(coefs) != len(points) {
		return ErrProverState
	}
	d, _ := field.Log2(len(wp.w))
	for i, z := range points {
		eq := stark.EvalsEqHypercube(stark.PowersOf2(z, d))
		for b, v := range eq {
			wp.w[b] = wp.w[b].Add(coefs[i].Mul(v))
		}
	}
	return nil
}
