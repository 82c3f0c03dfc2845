package cpuref

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// Batch constraint sumcheck backend (spec B §4, §7.1 (d)–(h)), the simple reference way: every
// column (and rotated column and selector) of a trace is materialised at its lifted height
// N·2^ñ; round 0 evaluates the DAG in F on the subgroup of order M = next_pow2(d(N−1)+1) ⊇ D and
// interpolates; the later rounds evaluate it in EF on the folded tables.

// ErrConstraintProver: the constraint prover was driven out of protocol order.
var ErrConstraintProver = errors.New("cpuref: batch constraint prover misuse")

var _ stark.ConstraintBackend = Backend{}

type bcTrace struct {
	pg     *constraints.Program
	w      *constraints.Weights
	public []field.Fp
	nLift  int
	cols   [][]field.Fp  // per slot, lifted height (nil: not materialised)
	tables [][]field.Fp4 // per slot after BindUnivariate, height 2^(ñ − binds)
	slots  []field.Fp    // scratch
	slotsE []field.Fp4   // scratch
	regs   []field.Fp    // scratch
	regsE  []field.Fp4   // scratch
	used   []int         // slots read by the DAG
	stored []int         // slots materialised (openings need them even when unused)
}

type bcProver struct {
	l, n, d int
	xi      []field.Fp4
	traces  []*bcTrace
	binds   int // -1 before BindUnivariate
}

// NewConstraintProver implements stark.ConstraintBackend.
func (Backend) NewConstraintProver(p params.SystemParams, traces []*stark.AirInput, ch *stark.ConstraintChallenges) (stark.ConstraintProver, error) {
	if ch == nil || len(ch.Eq3b) != len(traces) {
		return nil, fmt.Errorf("%w: challenges for %d traces expected", ErrConstraintProver, len(traces))
	}
	if (ch.Programs != nil && len(ch.Programs) != len(traces)) || (ch.Weights != nil && len(ch.Weights) != len(traces)) {
		return nil, fmt.Errorf("%w: programs or weights for %d traces expected", ErrConstraintProver, len(traces))
	}
	l := p.LSkip
	n := 1 << l
	bp := &bcProver{l: l, n: n, d: p.MaxConstraintDegree, xi: ch.Xi, binds: -1}
	for t, in := range traces {
		var pg *constraints.Program
		if ch.Programs != nil {
			pg = ch.Programs[t]
		}
		if pg == nil {
			pg = in.Program
		}
		if pg == nil {
			var err error
			if pg, err = constraints.Compile(in.VK, constraints.All); err != nil {
				return nil, err
			}
		}
		var w *constraints.Weights
		if ch.Weights != nil {
			w = ch.Weights[t]
		}
		if w == nil {
			var err error
			if w, err = pg.Weights(ch.Lambda, ch.Beta, ch.Eq3b[t]); err != nil {
				return nil, err
			}
		}
		h := in.Height()
		nLift := max(in.LogHeight()-l, 0)
		if len(ch.Xi) < l+nLift {
			return nil, fmt.Errorf("%w: ξ too short", ErrConstraintProver)
		}
		hl := n << nLift
		bt := &bcTrace{pg: pg, w: w, public: in.Public, nLift: nLift, cols: make([][]field.Fp, pg.NumSlots())}
		parts := []*air.Matrix{in.Common.Host()}
		if in.Preprocessed != nil {
			parts = append(parts, in.Preprocessed.Host())
		}
		for _, c := range in.Cached {
			parts = append(parts, c.Host())
		}
		if len(parts) != len(pg.PartWidths) {
			return nil, fmt.Errorf("%w: trace %d parts do not match its key", ErrConstraintProver, t)
		}
		for q, m := range parts {
			if m.Width != pg.PartWidths[q] || m.Height != h || len(m.Values) != m.Width*h {
				return nil, fmt.Errorf("%w: trace %d part %d shape", ErrConstraintProver, t, q)
			}
			for c := 0; c < m.Width; c++ {
				src := m.Values[c*h : (c+1)*h]
				s := 2 * (pg.PartStart[q] + c)
				loc := make([]field.Fp, hl)
				for i := range loc {
					loc[i] = src[i&(h-1)]
				}
				bt.cols[s] = loc
				if pg.NeedRot {
					rot := make([]field.Fp, hl)
					for i := range rot {
						rot[i] = src[(i+1)&(h-1)]
					}
					bt.cols[s+1] = rot
				}
			}
		}
		first, last, trans := make([]field.Fp, hl), make([]field.Fp, hl), make([]field.Fp, hl)
		for i := range first {
			if i&(h-1) == 0 {
				first[i] = field.One
			}
			if i&(h-1) == h-1 {
				last[i] = field.One
			} else {
				trans[i] = field.One
			}
		}
		bt.cols[pg.SlotIsFirst()], bt.cols[pg.SlotIsLast()], bt.cols[pg.SlotIsTransition()] = first, last, trans
		for s, c := range bt.cols {
			if c != nil {
				bt.stored = append(bt.stored, s)
			}
			if pg.Used[s] {
				if c == nil {
					return nil, fmt.Errorf("%w: trace %d slot %d read but not materialised", ErrConstraintProver, t, s)
				}
				bt.used = append(bt.used, s)
			}
		}
		bt.slots = make([]field.Fp, pg.NumSlots())
		bt.slotsE = make([]field.Fp4, pg.NumSlots())
		bp.traces = append(bp.traces, bt)
	}
	return bp, nil
}

func (bp *bcProver) Release() { bp.traces = nil }

// UnivariateRound implements stark.ConstraintProver.
func (bp *bcProver) UnivariateRound() ([]stark.ConstraintTriple, error) {
	if bp.binds != -1 || bp.traces == nil {
		return nil, ErrConstraintProver
	}
	n, plen := bp.n, bp.d*(bp.n-1)+1
	m := 1
	for m < plen {
		m <<= 1
	}
	out := make([]stark.ConstraintTriple, len(bp.traces))
	for t, bt := range bp.traces {
		eqx := stark.EvalsEqHypercube(bp.xi[bp.l : bp.l+bt.nLift])
		accZ, accN, accD := make([]field.Fp4, m), make([]field.Fp4, m), make([]field.Fp4, m)
		ext := make([][]field.Fp, len(bt.pg.Used))
		for _, s := range bt.used {
			ext[s] = make([]field.Fp, m)
		}
		for x, ex := range eqx {
			for _, s := range bt.used {
				v := ext[s]
				clear(v)
				copy(v, bt.cols[s][x*n:(x+1)*n])
				if err := IDFT(v[:n]); err != nil {
					return nil, err
				}
				if err := DFT(v); err != nil {
					return nil, err
				}
			}
			for i := 0; i < m; i++ {
				for _, s := range bt.used {
					bt.slots[s] = ext[s][i]
				}
				var c constraints.Combined
				c, bt.regs = bt.pg.CombineBase(bt.w, bt.slots, bt.public, bt.regs)
				accZ[i] = accZ[i].Add(ex.Mul(c.Zc))
				accN[i] = accN[i].Add(ex.Mul(c.Num))
				accD[i] = accD[i].Add(ex.Mul(c.Den))
			}
		}
		polys := [3][]field.Fp4{accZ, accN, accD}
		for k, a := range polys {
			if err := idftFp4(a); err != nil {
				return nil, err
			}
			for _, c := range a[plen:] {
				if !c.IsZero() {
					return nil, fmt.Errorf("%w: trace %d round-0 polynomial %d exceeds degree d(N−1)", ErrConstraintProver, t, k)
				}
			}
			polys[k] = a[:plen]
		}
		out[t] = stark.ConstraintTriple{Zc: polys[0], Num: polys[1], Den: polys[2]}
	}
	return out, nil
}

// idftFp4 is the inverse DFT of an extension vector, coordinate by coordinate.
func idftFp4(v []field.Fp4) error {
	tmp := make([]field.Fp, len(v))
	for c := 0; c < 4; c++ {
		for i, e := range v {
			tmp[i] = e[c]
		}
		if err := IDFT(tmp); err != nil {
			return err
		}
		for i := range v {
			v[i][c] = tmp[i]
		}
	}
	return nil
}

// BindUnivariate implements stark.ConstraintProver: t(r0, x) = Σ_j eq_D(r0, ω^j)·t(ω^j, x).
func (bp *bcProver) BindUnivariate(r0 field.Fp4) error {
	if bp.binds != -1 || bp.traces == nil {
		return ErrConstraintProver
	}
	n := bp.n
	wts := make([]field.Fp4, n)
	omega := field.TwoAdicGenerator(bp.l)
	pw := field.One
	for j := range wts {
		wts[j] = stark.EqUni(bp.l, r0, field.Lift(pw))
		pw = pw.Mul(omega)
	}
	for _, bt := range bp.traces {
		bt.tables = make([][]field.Fp4, len(bt.cols))
		for _, s := range bt.stored {
			col := bt.cols[s]
			tab := make([]field.Fp4, len(col)/n)
			for x := range tab {
				var acc field.Fp4
				for j, w := range wts {
					acc = acc.Add(w.MulBase(col[x*n+j]))
				}
				tab[x] = acc
			}
			bt.tables[s] = tab
		}
		bt.cols = nil
	}
	bp.binds = 0
	return nil
}

// Round implements stark.ConstraintProver.
func (bp *bcProver) Round() ([]stark.ConstraintTriple, error) {
	if bp.binds < 0 || bp.traces == nil {
		return nil, ErrConstraintProver
	}
	j := bp.binds + 1
	out := make([]stark.ConstraintTriple, len(bp.traces))
	for t, bt := range bp.traces {
		if bt.nLift < j {
			continue
		}
		eqy := stark.EvalsEqHypercube(bp.xi[bp.l+j : bp.l+bt.nLift])
		zc, num, den := make([]field.Fp4, bp.d+1), make([]field.Fp4, bp.d+1), make([]field.Fp4, bp.d+1)
		diff := make([]field.Fp4, len(bt.slotsE))
		for y, ey := range eqy {
			for _, s := range bt.used {
				tab := bt.tables[s]
				bt.slotsE[s] = tab[2*y]
				diff[s] = tab[2*y+1].Sub(tab[2*y])
			}
			for x := 1; x <= bp.d+1; x++ {
				for _, s := range bt.used {
					bt.slotsE[s] = bt.slotsE[s].Add(diff[s])
				}
				var c constraints.Combined
				c, bt.regsE = bt.pg.CombineExt(bt.w, bt.slotsE, bt.public, bt.regsE)
				zc[x-1] = zc[x-1].Add(ey.Mul(c.Zc))
				num[x-1] = num[x-1].Add(ey.Mul(c.Num))
				den[x-1] = den[x-1].Add(ey.Mul(c.Den))
			}
		}
		out[t] = stark.ConstraintTriple{Zc: zc, Num: num, Den: den}
	}
	return out, nil
}

// Bind implements stark.ConstraintProver.
func (bp *bcProver) Bind(r field.Fp4) error {
	if bp.binds < 0 || bp.traces == nil {
		return ErrConstraintProver
	}
	j := bp.binds + 1
	for _, bt := range bp.traces {
		if bt.nLift < j {
			continue
		}
		for _, s := range bt.stored {
			tab := bt.tables[s]
			h := len(tab) / 2
			for y := 0; y < h; y++ {
				tab[y] = tab[2*y].Add(r.Mul(tab[2*y+1].Sub(tab[2*y])))
			}
			bt.tables[s] = tab[:h]
		}
	}
	bp.binds = j
	return nil
}

// Openings implements stark.ConstraintProver.
func (bp *bcProver) Openings(t int) ([][]field.Fp4, error) {
	if bp.traces == nil || t < 0 || t >= len(bp.traces) {
		return nil, ErrConstraintProver
	}
	bt := bp.traces[t]
	if bp.binds < bt.nLift {
		return nil, fmt.Errorf("%w: trace %d not fully bound", ErrConstraintProver, t)
	}
	pg := bt.pg
	out := make([][]field.Fp4, len(pg.PartWidths))
	for q, pw := range pg.PartWidths {
		for c := 0; c < pw; c++ {
			s := 2 * (pg.PartStart[q] + c)
			out[q] = append(out[q], bt.tables[s][0])
			if pg.NeedRot {
				out[q] = append(out[q], bt.tables[s+1][0])
			}
		}
		if out[q] == nil {
			out[q] = []field.Fp4{}
		}
	}
	return out, nil
}
