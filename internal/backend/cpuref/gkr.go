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

// LogUp-GKR on the CPU (OpenVM prover/logup_zerocheck/mod.rs leaf evaluation and
// fractional_sumcheck_gkr.rs; spec B §3.4–§3.5).

// ErrGkrProver reports an invalid GKR prover input or call sequence.
var ErrGkrProver = errors.New("cpuref: GKR prover")

// maxGkrLogLeaves bounds the tree the CPU prover builds (2^28 leaves ≈ 8 GiB of tree).
const maxGkrLogLeaves = 28

// gkrProver holds every layer of the fraction tree: p[j], q[j] have 2^j entries (layer 0 is the
// root, layer L the leaves), and the tables of the layer sumcheck in progress.
type gkrProver struct {
	p, q [][]field.Fp4
	// Current layer j, its rounds done, λ, and the tables eq, p0, q0, p1, q1 (length 2^(j−1−done)).
	layer, done, rounds int
	lambda              field.Fp4
	eq, p0, q0, p1, q1  []field.Fp4
}

// interactionLeaves evaluates every interaction of trace t on its rows with the interactions of
// its constraint program: num[k][ρ] = count, den[k][ρ] = α + Σ_j β^j·m_j + β^len·(bus+1).
func interactionLeaves(t *stark.AirInput, alpha, beta field.Fp4) (num [][]field.Fp, den [][]field.Fp4, err error) {
	prog, err := constraints.Compile(t.VK, constraints.Interactions)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: AIR %d: %w", ErrGkrProver, t.AirIndex, err)
	}
	parts := []*air.Matrix{t.Common.Host()}
	if t.Preprocessed != nil {
		parts = append(parts, t.Preprocessed.Host())
	}
	for _, c := range t.Cached {
		parts = append(parts, c.Host())
	}
	rows, err := constraints.NewRows(prog, parts, t.Public)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: AIR %d: %w", ErrGkrProver, t.AirIndex, err)
	}
	betaPows := field.PowersFp4(beta, prog.MaxMsgLen+1)
	h := rows.Height()
	num = make([][]field.Fp, len(prog.Interactions))
	den = make([][]field.Fp4, len(prog.Interactions))
	for k := range prog.Interactions {
		num[k] = make([]field.Fp, h)
		den[k] = make([]field.Fp4, h)
	}
	vals := make([]field.Fp, len(prog.Outputs))
	var slots, regs []field.Fp
	for r := range h {
		slots, regs = rows.Eval(r, slots, regs, func(o int, v field.Fp) { vals[o] = v })
		for k, it := range prog.Interactions {
			d := betaPows[len(it.Message)].MulBase(field.New(uint32(it.Bus) + 1))
			for j, m := range it.Message {
				d = d.Add(betaPows[j].MulBase(vals[m]))
			}
			num[k][r] = vals[it.Count]
			den[k][r] = d.Add(alpha)
		}
	}
	return num, den, nil
}

// NewGkrProver implements stark.GkrBackend.
func (Backend) NewGkrProver(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
	if layout == nil || layout.Total == 0 {
		return nil, fmt.Errorf("%w: empty layout", ErrGkrProver)
	}
	L := layout.NumLayers()
	if L < 1 || L > maxGkrLogLeaves || layout.Total > 1<<L {
		return nil, fmt.Errorf("%w: %d layers for %d interaction leaves", ErrGkrProver, L, layout.Total)
	}
	leavesP := make([]field.Fp4, 1<<L)
	leavesQ := make([]field.Fp4, 1<<L)
	for i := range leavesQ {
		leavesQ[i] = alpha // padding leaves (0, α)
	}
	// Blocks are grouped by trace; evaluate each trace once.
	cur := -1
	var num [][]field.Fp
	var den [][]field.Fp4
	for _, b := range layout.Blocks {
		if b.Trace < 0 || b.Trace >= len(traces) || traces[b.Trace] == nil || traces[b.Trace].VK == nil || traces[b.Trace].VK.DAG == nil {
			return nil, fmt.Errorf("%w: block of trace %d", ErrGkrProver, b.Trace)
		}
		t := traces[b.Trace]
		if b.Trace != cur {
			var err error
			if num, den, err = interactionLeaves(t, alpha, beta); err != nil {
				return nil, err
			}
			cur = b.Trace
		}
		h := t.Height()
		if b.Interaction < 0 || b.Interaction >= len(num) || b.LogSize < 0 || b.LogSize > L {
			return nil, fmt.Errorf("%w: block (%d, %d) of log size %d", ErrGkrProver, b.Trace, b.Interaction, b.LogSize)
		}
		size := 1 << b.LogSize
		if b.Row < 0 || b.Row > 1<<L-size || size%h != 0 {
			return nil, fmt.Errorf("%w: block (%d, %d) at row %d of size %d for height %d", ErrGkrProver, b.Trace, b.Interaction, b.Row, size, h)
		}
		// Short traces repeat 2^(−n_T) = size/h times with numerators scaled by h/size.
		norm := field.New(uint32(size / h)).Inverse()
		n, d := num[b.Interaction], den[b.Interaction]
		for i := range size {
			leavesP[b.Row+i] = field.Lift(n[i%h].Mul(norm))
			leavesQ[b.Row+i] = d[i%h]
		}
	}
	g := &gkrProver{p: make([][]field.Fp4, L+1), q: make([][]field.Fp4, L+1), layer: -1}
	g.p[L], g.q[L] = leavesP, leavesQ
	for j := L - 1; j >= 0; j-- {
		cp, cq := g.p[j+1], g.q[j+1]
		pj, qj := make([]field.Fp4, 1<<j), make([]field.Fp4, 1<<j)
		for y := range pj {
			pa, qa, pb, qb := cp[2*y], cq[2*y], cp[2*y+1], cq[2*y+1]
			pj[y] = pa.Mul(qb).Add(pb.Mul(qa))
			qj[y] = qa.Mul(qb)
		}
		g.p[j], g.q[j] = pj, qj
	}
	return g, nil
}

func (g *gkrProver) Root() (p, q field.Fp4, err error) {
	if g.p == nil {
		return p, q, fmt.Errorf("%w: released", ErrGkrProver)
	}
	return g.p[0][0], g.q[0][0], nil
}

func (g *gkrProver) BeginLayer(j int, xi []field.Fp4, lambda field.Fp4) error {
	if g.p == nil || j < 1 || j >= len(g.p) || len(xi) != j-1 {
		return fmt.Errorf("%w: BeginLayer(%d) with %d coordinates", ErrGkrProver, j, len(xi))
	}
	half := 1 << (j - 1)
	g.layer, g.done, g.rounds, g.lambda = j, 0, j-1, lambda
	g.eq = stark.EvalsEqHypercube(xi)
	g.p0, g.q0 = make([]field.Fp4, half), make([]field.Fp4, half)
	g.p1, g.q1 = make([]field.Fp4, half), make([]field.Fp4, half)
	pj, qj := g.p[j], g.q[j]
	for y := range half {
		g.p0[y], g.q0[y] = pj[2*y], qj[2*y]
		g.p1[y], g.q1[y] = pj[2*y+1], qj[2*y+1]
	}
	return nil
}

var fp4Two, fp4Three = field.Lift(field.New(2)), field.Lift(field.New(3))

func (g *gkrProver) Round() ([3]field.Fp4, error) {
	var s [3]field.Fp4
	if g.layer < 1 || g.done >= g.rounds {
		return s, fmt.Errorf("%w: Round with no round left", ErrGkrProver)
	}
	cols := [5][]field.Fp4{g.eq, g.p0, g.q0, g.p1, g.q1}
	xs := [3]field.Fp4{field.Fp4One, fp4Two, fp4Three}
	n := len(g.eq) / 2
	for y := range n {
		var lo, diff [5]field.Fp4
		for c, col := range cols {
			lo[c] = col[2*y]
			diff[c] = col[2*y+1].Sub(col[2*y])
		}
		for i, x := range xs {
			var v [5]field.Fp4
			for c := range v {
				v[c] = lo[c].Add(diff[c].Mul(x))
			}
			// eq·(p0·q1 + p1·q0 + λ·q0·q1)
			pPrev := v[1].Mul(v[4]).Add(v[3].Mul(v[2]))
			qPrev := v[2].Mul(v[4])
			s[i] = s[i].Add(v[0].Mul(pPrev.Add(g.lambda.Mul(qPrev))))
		}
	}
	return s, nil
}

func (g *gkrProver) Bind(r field.Fp4) error {
	if g.layer < 1 || g.done >= g.rounds {
		return fmt.Errorf("%w: Bind with no round left", ErrGkrProver)
	}
	for _, col := range []*[]field.Fp4{&g.eq, &g.p0, &g.q0, &g.p1, &g.q1} {
		t := *col
		n := len(t) / 2
		for y := range n {
			t[y] = t[2*y].Add(r.Mul(t[2*y+1].Sub(t[2*y])))
		}
		*col = t[:n]
	}
	g.done++
	return nil
}

func (g *gkrProver) LayerClaims() (stark.GkrLayerClaims, error) {
	if g.layer < 1 || g.done != g.rounds {
		return stark.GkrLayerClaims{}, fmt.Errorf("%w: LayerClaims before the layer's rounds are bound", ErrGkrProver)
	}
	return stark.GkrLayerClaims{PXi0: g.p0[0], PXi1: g.p1[0], QXi0: g.q0[0], QXi1: g.q1[0]}, nil
}

func (g *gkrProver) Release() {
	*g = gkrProver{layer: -1}
}
