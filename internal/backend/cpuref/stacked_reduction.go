package cpuref

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// ErrProverState: a prover method was called out of order.
var ErrProverState = errors.New("cpuref: prover method called out of order")

// stackingProver is the CPU stacked-reduction prover (spec B §5.3–5.4). It keeps, per stacked
// column, the Z-coefficients of every 2^l_skip block (IDFT over D), and after u_0 the tables
// q(u_0; x) and W(u_0; x) over the 2^n_stack cube points, folded round by round.
type stackingProver struct {
	p       params.SystemParams
	commits []*Committed
	r       []field.Fp4   // the batch-sumcheck point
	eqW     [][]field.Fp4 // the batching weights ([c][i]), from UnivariateRound on
	rotW    [][]field.Fp4
	coeffs  [][][]field.Fp  // [c][m] block-wise Z coefficients (length 2^m)
	q, w    [][][]field.Fp4 // [c][m][x] after BindUnivariate
	bound   int             // number of bound variables (0 before u_0)
	eqR     map[int][]field.Fp4
}

// eqTable returns eq(r_1..r_nn, ·) over the 2^nn cube points, computed once per nn: every
// column of a slice height shares it, in both UnivariateRound and BindUnivariate.
func (sp *stackingProver) eqTable(nn int) []field.Fp4 {
	e, ok := sp.eqR[nn]
	if !ok {
		e = stark.EvalsEqHypercube(sp.r[1 : nn+1])
		sp.eqR[nn] = e
	}
	return e
}

// NewStackingProver implements stark.Backend.
func (Backend) NewStackingProver(p params.SystemParams, commits []stark.Committed, r []field.Fp4) (stark.StackingProver, error) {
	cs, err := cpuCommits(commits)
	if err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%w: no point r", stark.ErrOpeningInput)
	}
	sp := &stackingProver{p: p, commits: cs, r: r, coeffs: make([][][]field.Fp, len(cs)), eqR: map[int][]field.Fp4{}}
	for c, com := range cs {
		l := com.Layout()
		for _, sc := range l.Cols {
			if nl := sc.Slice.LogHeight - p.LSkip; nl+1 > len(r) {
				return nil, fmt.Errorf("%w: point r too short", stark.ErrOpeningInput)
			}
		}
		q := com.Data.Matrix
		if q.Height != 1<<(p.LSkip+p.NStack) {
			return nil, fmt.Errorf("%w: stacked height %d", stark.ErrOpeningInput, q.Height)
		}
		sp.coeffs[c] = make([][]field.Fp, q.Width)
		for m := range q.Width {
			col := append([]field.Fp(nil), q.Column(m)...)
			if err := IDFTBlocks(col, p.LSkip); err != nil {
				return nil, err
			}
			sp.coeffs[c][m] = col
		}
	}
	return sp, nil
}

func (sp *stackingProver) Release() { sp.coeffs, sp.q, sp.w, sp.eqR = nil, nil, nil, nil }

// UnivariateRound returns s_0(Z) = Σ_x Σ_{c,m} q_{c,m}(Z; x)·W_{c,m}(Z; x).
func (sp *stackingProver) UnivariateRound(b *stark.StackingBatch) ([]field.Fp4, error) {
	if sp.coeffs == nil || sp.bound != 0 || sp.eqW != nil {
		return nil, ErrProverState
	}
	layouts := make([]*stark.StackedLayout, len(sp.commits))
	for c, com := range sp.commits {
		layouts[c] = com.Layout()
	}
	if err := stark.CheckStackingBatch(b, layouts); err != nil {
		return nil, err
	}
	sp.eqW, sp.rotW = b.Weights()
	l := sp.p.LSkip
	n := 1 << l
	r := sp.r
	omega := field.TwoAdicGenerator(l)
	r0w := r[0].MulBase(omega)
	polyA := stark.EqUniCoeffs(l, r[0])
	polyB := stark.EqUniCoeffs(l, r0w)
	polyC := stark.EqUniCoeffs(l, field.Fp4One)
	cScale := stark.EqUniAtOne(l, r0w)
	for i := range polyC {
		polyC[i] = polyC[i].Mul(cScale)
	}
	res := make([]field.Fp4, 2*n-1)
	qa, qb, qc := make([]field.Fp4, n), make([]field.Fp4, n), make([]field.Fp4, n)
	for c, com := range sp.commits {
		for i, sc := range com.Layout().Cols {
			s := sc.Slice
			a, bw := sp.eqW[c][i], sp.rotW[c][i]
			rot := !bw.IsZero()
			col := sp.coeffs[c][s.Col]
			x0 := s.Row >> l
			nn := s.LogHeight - l
			if nn >= 0 {
				clear(qa)
				clear(qb)
				clear(qc)
				e := sp.eqTable(nn)
				mask := len(e) - 1
				for xl := range e {
					blk := col[(x0+xl)*n : (x0+xl+1)*n]
					al := a.Mul(e[xl])
					var be, ga field.Fp4
					if rot {
						be = bw.Mul(e[xl])
						ga = bw.Mul(e[(xl-1)&mask].Sub(e[xl]))
					}
					for j, v := range blk {
						qa[j] = qa[j].Add(al.MulBase(v))
						if rot {
							qb[j] = qb[j].Add(be.MulBase(v))
							qc[j] = qc[j].Add(ga.MulBase(v))
						}
					}
				}
				polyMulAcc(res, qa, polyA)
				if rot {
					polyMulAcc(res, qb, polyB)
					polyMulAcc(res, qc, polyC)
				}
			} else {
				blk := col[x0*n : (x0+1)*n]
				lp := l + nn
				np := 1 << lp
				sInv := stark.InvPow2(-nn)
				rp := stark.ExpPow2(r[0], -nn)
				ca := stark.EqUniCoeffs(lp, rp)
				var cb []field.Fp4
				if rot {
					cb = stark.EqUniCoeffs(lp, rp.MulBase(field.TwoAdicGenerator(lp)))
				}
				wpoly := make([]field.Fp4, n)
				for j := 0; j < np; j++ {
					v := a.Mul(ca[j])
					if rot {
						v = v.Add(bw.Mul(cb[j]))
					}
					v = v.MulBase(sInv)
					for kk := 0; kk < n; kk += np {
						wpoly[kk+j] = v
					}
				}
				lifted := make([]field.Fp4, n)
				for j, v := range blk {
					lifted[j] = field.Lift(v)
				}
				polyMulAcc(res, lifted, wpoly)
			}
		}
	}
	return res, nil
}

// BindUnivariate builds the q(u_0; x) and W(u_0; x) tables.
func (sp *stackingProver) BindUnivariate(u0 field.Fp4) error {
	if sp.coeffs == nil || sp.bound != 0 || sp.eqW == nil { // the weights come with UnivariateRound
		return ErrProverState
	}
	l := sp.p.LSkip
	n := 1 << l
	nx := 1 << sp.p.NStack
	r := sp.r
	omega := field.TwoAdicGenerator(l)
	r0w := r[0].MulBase(omega)
	a0 := stark.EqUni(l, u0, r[0])
	b0 := stark.EqUni(l, u0, r0w)
	c0 := stark.EqUniAtOne(l, u0).Mul(stark.EqUniAtOne(l, r0w))
	sp.q = make([][][]field.Fp4, len(sp.commits))
	sp.w = make([][][]field.Fp4, len(sp.commits))
	for c, com := range sp.commits {
		width := len(sp.coeffs[c])
		sp.q[c] = make([][]field.Fp4, width)
		sp.w[c] = make([][]field.Fp4, width)
		for m := range width {
			qt := make([]field.Fp4, nx)
			col := sp.coeffs[c][m]
			for x := range nx {
				qt[x] = hornerBase(col[x*n:(x+1)*n], u0)
			}
			sp.q[c][m] = qt
			sp.w[c][m] = make([]field.Fp4, nx)
		}
		for i, sc := range com.Layout().Cols {
			s := sc.Slice
			a, bw := sp.eqW[c][i], sp.rotW[c][i]
			wt := sp.w[c][s.Col]
			x0 := s.Row >> l
			nn := s.LogHeight - l
			if nn >= 0 {
				e := sp.eqTable(nn)
				mask := len(e) - 1
				for xl := range e {
					v := a.Mul(a0).Mul(e[xl])
					if !bw.IsZero() {
						v = v.Add(bw.Mul(b0.Mul(e[xl]).Add(c0.Mul(e[(xl-1)&mask].Sub(e[xl])))))
					}
					wt[x0+xl] = wt[x0+xl].Add(v)
				}
			} else {
				lp := l + nn
				rp := stark.ExpPow2(r[0], -nn)
				v := a.Mul(stark.EqUni(lp, u0, rp))
				if !bw.IsZero() {
					v = v.Add(bw.Mul(stark.EqUni(lp, u0, rp.MulBase(field.TwoAdicGenerator(lp)))))
				}
				wt[x0] = wt[x0].Add(v.Mul(stark.InUni(l, nn, u0)))
			}
		}
	}
	sp.coeffs, sp.eqR = nil, nil
	sp.bound = 1
	return nil
}

// Round returns s_j(1), s_j(2).
func (sp *stackingProver) Round() (s1, s2 field.Fp4, err error) {
	if sp.q == nil || sp.bound < 1 || sp.bound > sp.p.NStack {
		return s1, s2, ErrProverState
	}
	for c := range sp.q {
		for m := range sp.q[c] {
			q, w := sp.q[c][m], sp.w[c][m]
			for y := 0; y < len(q)/2; y++ {
				q0, q1, w0, w1 := q[2*y], q[2*y+1], w[2*y], w[2*y+1]
				s1 = s1.Add(q1.Mul(w1))
				s2 = s2.Add(q1.Double().Sub(q0).Mul(w1.Double().Sub(w0)))
			}
		}
	}
	return s1, s2, nil
}

// Bind folds every table's lowest variable at u.
func (sp *stackingProver) Bind(u field.Fp4) error {
	if sp.q == nil || sp.bound < 1 || sp.bound > sp.p.NStack {
		return ErrProverState
	}
	for c := range sp.q {
		for m := range sp.q[c] {
			sp.q[c][m] = foldTable(sp.q[c][m], u)
			sp.w[c][m] = foldTable(sp.w[c][m], u)
		}
	}
	sp.bound++
	return nil
}

// foldTable returns t'[y] = t[2y] + u·(t[2y+1] − t[2y]) (in place, truncated).
func foldTable(t []field.Fp4, u field.Fp4) []field.Fp4 {
	h := len(t) / 2
	for y := 0; y < h; y++ {
		t[y] = t[2*y].Add(u.Mul(t[2*y+1].Sub(t[2*y])))
	}
	return t[:h]
}

// Openings returns q_{c,m}(u).
func (sp *stackingProver) Openings() ([][]field.Fp4, error) {
	if sp.q == nil || sp.bound != sp.p.NStack+1 {
		return nil, ErrProverState
	}
	out := make([][]field.Fp4, len(sp.q))
	for c := range sp.q {
		out[c] = make([]field.Fp4, len(sp.q[c]))
		for m, t := range sp.q[c] {
			out[c][m] = t[0]
		}
	}
	return out, nil
}
