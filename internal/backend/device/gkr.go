package device

import (
	"fmt"
	"slices"
	"sync"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// maxGkrLayers bounds L on the device: the leaf layer (2^L fractions of 8 uints) must be indexable
// with 32 bits.
const maxGkrLayers = 27

// gkrProver is LogUp-GKR (spec B §3.4–§3.5) on the device, computing exactly what cpuref's
// gkrProver computes:
//
//   - NewGkrProver evaluates every trace's interactions-only program on its resident rows into
//     the leaf layer (kernels.GkrLeaves: the blocks of the layout, short traces repeated with
//     scaled numerators, padding (0, α)), then builds the tree layer by layer. No sync.
//   - Root downloads layer 0 (a sync): the traces' check and the per-layer path. ProveLayers
//     instead observes q_0 on the device behind the tree and brings the root back with the
//     layers' log: after the grind, the stage's one sync.
//   - BeginLayer(j) expands eq(ξ, ·) on the device; the tables of layer j are the layer itself
//     (row y: fractions 2y and 2y + 1). Round sums the layer's tables (first round) or folds the
//     last bound value into smaller tables and sums them in one pass: the folded tables of layer j
//     go into the buffers of layers j − 1, j − 2, …, 2, which the stage no longer needs (it runs
//     layers 1, 2, …, L in order; BeginLayer refuses to go back). Bind only records r. One sync
//     per Round.
//   - LayerClaims downloads the last tables (two rows, 128 bytes) and folds them at the last r on
//     the host (layer 1: its two fractions as built).
//
// Every buffer is allocated by NewGkrProver (the eq tables and halves by BeginLayer) and freed by
// Release.
type gkrProver struct {
	be *Backend
	L  int

	mu       sync.Mutex
	released bool
	// layers[j] holds 2^j fractions; eq holds the eq tables, the one of R rows at Fp4 index R.
	layers  []*gpu.Array[kernels.GkrFraction]
	eq      *gpu.Array[kernels.Mont4]
	sc      *kernels.GkrSumcheck
	halves  []*gpu.Array[kernels.Mont4] // eq halves uploaded by BeginLayer (EqTables' lo then hi)
	evals   []*rowEval                  // leaf evaluation inputs (freed once the tree is encoded)
	inters  []*gpu.Array[uint32]        // leaf interaction tables (freed once the tree is encoded)
	consts  []*gpu.Array[kernels.Mont4] // leaf constants (freed once the tree is encoded)
	scratch *rowScratch                 // leaf scratch (freed once the tree is encoded)
	root    *[2]field.Fp4

	layer, rounds, done int // current layer, its rounds, rounds bound
	begun               int // highest layer begun: the buffers below it hold folded tables
	cur                 int // the layer buffer holding the current tables (2^(cur−1) rows)
	lambda              field.Fp4
	pending             *field.Fp4 // a bound value not yet folded into the tables
}

var _ stark.GkrProver = (*gkrProver)(nil)

// gkrTrace is one trace's part of the leaves: its blocks' first leaves (per interaction) and the
// repetitions of its rows.
type gkrTrace struct {
	t     int
	bases []int
	reps  int
}

// NewGkrProver implements stark.GkrBackend on the device: PrepareGkr, then Start.
func (b *Backend) NewGkrProver(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
	pg, err := b.prepareGkr(p, traces, layout)
	if err != nil {
		return nil, err
	}
	return pg.Start(alpha, beta)
}

// gkrPrepared is the part of NewGkrProver that α and β do not enter (stark.GkrPreparer): the
// leaves' plan, the traces' programs, the interaction tables and every buffer of the prover.
// stark.Prove makes it behind the commitment, while the device hashes, so that the leaves'
// kernels follow the commitment's sync at once; Start does the rest.
type gkrPrepared struct {
	g       *gkrProver
	layout  *stark.GkrLayout
	tables  []kernels.GkrLeaves
	mu      sync.Mutex
	started bool // Start ran (its prover owns the buffers), or Release did
}

var _ stark.GkrPreparer = (*Backend)(nil)

// PrepareGkr implements stark.GkrPreparer.
func (b *Backend) PrepareGkr(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout) (stark.PreparedGkr, error) {
	return b.prepareGkr(p, traces, layout)
}

func (b *Backend) prepareGkr(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout) (*gkrPrepared, error) {
	if layout == nil || layout.Total == 0 {
		return nil, fmt.Errorf("%w: empty layout", stark.ErrGkrInput)
	}
	L := layout.NumLayers()
	if L < 1 || L > maxGkrLayers || layout.Total > 1<<L {
		return nil, fmt.Errorf("%w: %d layers for %d interaction leaves (the device allows 2^%d leaves)", stark.ErrGkrInput, L, layout.Total, maxGkrLayers)
	}
	plan, err := planGkrLeaves(traces, layout, L)
	if err != nil {
		return nil, err
	}
	g := &gkrProver{be: b, L: L, layer: -1}
	fail := func(err error) (*gkrPrepared, error) {
		g.freeBuffers()
		return nil, err
	}

	// The programs and tables on the host, then the buffers, then one queued upload: nothing
	// here waits for the work queued before it (behind a commitment, all of it).
	tables := make([]kernels.GkrLeaves, len(plan))
	inters := make([][]uint32, len(plan))
	for i, pt := range plan {
		in := traces[pt.t]
		e, err := b.bindRowEval(in, constraints.Interactions, gkrPointExtra, true)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", stark.ErrGkrInput, err))
		}
		g.evals = append(g.evals, e)
		if len(e.prog.Interactions) != len(pt.bases) {
			return fail(fmt.Errorf("%w: AIR %d: %d interaction blocks, its program has %d interactions", stark.ErrGkrInput, in.AirIndex, len(pt.bases), len(e.prog.Interactions)))
		}
		if inters[i], err = kernels.GkrInteractionTable(e.prog, pt.bases); err != nil {
			return fail(err)
		}
		tables[i] = kernels.GkrLeaves{NumInteractions: len(pt.bases), MaxMsgLen: e.prog.MaxMsgLen,
			Reps: pt.reps, LeafEnd: slices.Max(pt.bases) + pt.reps*e.height}
	}
	// The leaf layer (zeroed) and the leaves' scratch, then the tree's layers below it, which
	// gkr_layer writes in full (not zeroed).
	g.layers = make([]*gpu.Array[kernels.GkrFraction], L+1)
	if g.layers[L], err = gpu.AllocArray[kernels.GkrFraction](b.dev, fmt.Sprintf("gkr layer %d", L), 1<<L); err != nil {
		return fail(err)
	}
	if g.scratch, err = allocRowScratch(b.dev, g.evals, gkrExtra); err != nil {
		return fail(err)
	}
	for j := range L {
		if g.layers[j], err = gpu.AllocArrayUninit[kernels.GkrFraction](b.dev, fmt.Sprintf("gkr layer %d", j), 1<<j); err != nil {
			return fail(err)
		}
	}
	if g.sc, err = kernels.NewGkrSumcheck(b.dev); err != nil {
		return fail(err)
	}
	// The programs' constants and the interaction tables, and the leaves' constants' buffers
	// (written by Start); then one upload for all of them.
	var up stagedUpload
	for i, e := range g.evals {
		if e.cp, err = gpu.AllocArrayUninit[kernels.Mont](b.dev, "program constants and public values", len(e.cpWords)); err != nil {
			return fail(err)
		}
		up.add(e.cp.Buffer, monts(e.cpWords))
		e.cpWords = nil
		inter, err := gpu.AllocArrayUninit[uint32](b.dev, "gkr interactions", len(inters[i]))
		if err != nil {
			return fail(err)
		}
		g.inters = append(g.inters, inter)
		tables[i].Inter = inter
		up.add(inter.Buffer, inters[i])
		consts, err := gpu.AllocArrayUninit[kernels.Mont4](b.dev, "gkr leaf constants", kernels.GkrLeafConstsLen(e.prog))
		if err != nil {
			return fail(err)
		}
		g.consts = append(g.consts, consts)
		tables[i].Consts = consts
	}
	if err := up.run(b.dev, "gkr set-up"); err != nil {
		return fail(err)
	}
	if err := b.track(g); err != nil {
		return fail(err)
	}
	return &gkrPrepared{g: g, layout: layout, tables: tables}, nil
}

// stagedUpload writes words into several fresh buffers with one queued upload (gpu.Device.
// UploadQueued: it does not wait for the work queued before it, which a plain upload does): the
// words go up together into a staging buffer, then device copies put them in place.
type stagedUpload struct {
	dsts  []*gpu.Buffer
	words [][]uint32
}

func (u *stagedUpload) add(dst *gpu.Buffer, words []uint32) {
	u.dsts = append(u.dsts, dst)
	u.words = append(u.words, words)
}

func (u *stagedUpload) run(dev *gpu.Device, name string) error {
	var all []uint32
	for _, w := range u.words {
		all = append(all, w...)
	}
	if len(all) == 0 {
		return nil
	}
	staging, err := gpu.AllocArrayUninit[uint32](dev, name, len(all))
	if err != nil {
		return err
	}
	defer staging.Free() // in queue order, after the copies
	if err := staging.WriteQueued(0, all); err != nil {
		return err
	}
	b := dev.Batch()
	off := 0
	for i, w := range u.words {
		if len(w) > 0 {
			b.Copy(u.dsts[i], 0, staging.Buffer, 4*off, 4*len(w))
		}
		off += len(w)
	}
	return b.Err()
}

// monts returns Montgomery words as uint32 words.
func monts[T ~uint32](v []T) []uint32 {
	w := make([]uint32, len(v))
	for i, x := range v {
		w[i] = uint32(x)
	}
	return w
}

// Start implements stark.PreparedGkr: the leaves' constants from α and β, then the leaves and
// the tree encoded (no sync). Once.
func (pg *gkrPrepared) Start(alpha, beta field.Fp4) (stark.GkrProver, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.started {
		return nil, fmt.Errorf("%w: the prepared GKR prover was started or released", ErrProverState)
	}
	pg.started = true
	g := pg.g
	b := g.be
	g.mu.Lock()
	closed := g.released // the backend was closed since PrepareGkr
	g.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	fail := func(err error) (stark.GkrProver, error) {
		g.Release()
		return nil, err
	}
	var up stagedUpload
	for i, e := range g.evals {
		c := kernels.GkrLeafConsts(e.prog, alpha, beta)
		if len(c) != g.consts[i].Len() {
			return fail(fmt.Errorf("backend/device: GKR: %d leaf constants, %d prepared", len(c), g.consts[i].Len()))
		}
		w := make([]uint32, 0, 4*len(c))
		for _, v := range c {
			w = append(w, monts(v[:])...)
		}
		up.add(g.consts[i].Buffer, w)
	}
	if err := up.run(b.dev, "gkr leaf constants"); err != nil {
		return fail(err)
	}
	batch := b.dev.Batch()
	leaves := g.layers[g.L]
	for i, e := range g.evals {
		lv := pg.tables[i]
		lv.Outs, lv.Leaves = g.scratch.extra, leaves
		if err := e.encodeRuns(batch, b.dev, g.scratch.slots, g.scratch.regs, func(run kernels.RowRun) error {
			lv.Run = run
			return lv.Encode(batch, b.dev)
		}); err != nil {
			return fail(err)
		}
	}
	for _, gap := range leafGaps(pg.layout, g.L) {
		if err := kernels.EncodeGkrPad(batch, b.dev, leaves, gap[0], gap[1], alpha); err != nil {
			return fail(err)
		}
	}
	for j := g.L - 1; j >= 0; j-- {
		if err := kernels.EncodeGkrLayer(batch, b.dev, g.layers[j+1], g.layers[j], 1<<j); err != nil {
			return fail(err)
		}
	}
	// Frees are in stream order (CUDA's pool, Metal's retained buffers; the host device has run
	// the kernels): the leaves' inputs go now, not at the first sync, so that the layers' rounds
	// do not hold them.
	g.freeBuilding()
	if err := batch.Err(); err != nil {
		return fail(err)
	}
	return g, nil
}

// Release implements stark.PreparedGkr: frees the buffers unless Start took them.
func (pg *gkrPrepared) Release() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if !pg.started {
		pg.started = true
		pg.g.Release()
	}
}

// gkrPointExtra is the leaves' scratch per point besides slots and registers (the run length):
// the program's outputs.
func gkrPointExtra(dp *kernels.Program) int { return dp.NumOutput }

// gkrExtra is the leaves' scratch of e per run besides slots and registers: its outputs at every
// point.
func gkrExtra(e *rowEval) int { return e.dp.NumOutput << e.logPoints }

// planGkrLeaves groups the layout's blocks by trace and checks them as cpuref does, plus what
// the leaf kernel assumes of a layout (stark.NewGkrLayout's): every interaction of a trace has one
// block, all of the trace's size, and blocks do not overlap.
func planGkrLeaves(traces []*stark.AirInput, layout *stark.GkrLayout, L int) ([]gkrTrace, error) {
	var plan []gkrTrace
	at := map[int]int{} // trace → plan index
	for _, blk := range layout.Blocks {
		if blk.Trace < 0 || blk.Trace >= len(traces) || traces[blk.Trace] == nil || traces[blk.Trace].VK == nil ||
			traces[blk.Trace].VK.DAG == nil || traces[blk.Trace].Common == nil {
			return nil, fmt.Errorf("%w: block of trace %d", stark.ErrGkrInput, blk.Trace)
		}
		t := traces[blk.Trace]
		h := t.Height()
		nInter := len(t.VK.DAG.Interactions)
		if blk.Interaction < 0 || blk.Interaction >= nInter || blk.LogSize < 0 || blk.LogSize > L {
			return nil, fmt.Errorf("%w: block (%d, %d) of log size %d", stark.ErrGkrInput, blk.Trace, blk.Interaction, blk.LogSize)
		}
		size := 1 << blk.LogSize
		if h < 1 || blk.Row < 0 || blk.Row > 1<<L-size || size%h != 0 {
			return nil, fmt.Errorf("%w: block (%d, %d) at row %d of size %d for height %d", stark.ErrGkrInput, blk.Trace, blk.Interaction, blk.Row, size, h)
		}
		i, ok := at[blk.Trace]
		if !ok {
			i = len(plan)
			at[blk.Trace] = i
			bases := make([]int, nInter)
			for k := range bases {
				bases[k] = -1
			}
			plan = append(plan, gkrTrace{t: blk.Trace, bases: bases, reps: size / h})
		}
		pt := &plan[i]
		if pt.reps != size/h || pt.bases[blk.Interaction] >= 0 {
			return nil, fmt.Errorf("%w: trace %d: blocks of different sizes, or two blocks of interaction %d", stark.ErrGkrInput, blk.Trace, blk.Interaction)
		}
		pt.bases[blk.Interaction] = blk.Row
	}
	for _, pt := range plan {
		if slices.Contains(pt.bases, -1) {
			return nil, fmt.Errorf("%w: trace %d: an interaction has no block", stark.ErrGkrInput, pt.t)
		}
	}
	blocks := slices.Clone(layout.Blocks)
	slices.SortFunc(blocks, func(a, b stark.GkrBlock) int { return a.Row - b.Row })
	for i := 1; i < len(blocks); i++ {
		if blocks[i].Row < blocks[i-1].Row+1<<blocks[i-1].LogSize {
			return nil, fmt.Errorf("%w: blocks at rows %d and %d overlap", stark.ErrGkrInput, blocks[i-1].Row, blocks[i].Row)
		}
	}
	return plan, nil
}

// leafGaps returns the leaf ranges [from, to) no block covers (the padding), in order.
func leafGaps(layout *stark.GkrLayout, L int) [][2]int {
	blocks := slices.Clone(layout.Blocks)
	slices.SortFunc(blocks, func(a, b stark.GkrBlock) int { return a.Row - b.Row })
	var gaps [][2]int
	next := 0
	for _, blk := range blocks {
		if blk.Row > next {
			gaps = append(gaps, [2]int{next, blk.Row})
		}
		next = blk.Row + 1<<blk.LogSize
	}
	if next < 1<<L {
		gaps = append(gaps, [2]int{next, 1 << L})
	}
	return gaps
}

// free is Backend.Close's release of a live prover.
func (g *gkrProver) free() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	g.freeBuffers()
}

// freeBuilding frees what only the leaves needed (once they are computed).
func (g *gkrProver) freeBuilding() {
	for _, e := range g.evals {
		e.free()
	}
	for _, a := range g.inters {
		a.Free()
	}
	for _, a := range g.consts {
		a.Free()
	}
	g.evals, g.inters, g.consts = nil, nil, nil
	if g.scratch != nil {
		g.scratch.free()
		g.scratch = nil
	}
}

// freeBuffers releases every device buffer (idempotent).
func (g *gkrProver) freeBuffers() {
	g.freeBuilding()
	for _, a := range g.layers {
		if a != nil {
			a.Free()
		}
	}
	for _, a := range g.halves {
		a.Free()
	}
	g.layers, g.halves = nil, nil
	if g.eq != nil {
		g.eq.Free()
		g.eq = nil
	}
	if g.sc != nil {
		g.sc.Close()
		g.sc = nil
	}
}

// Release frees the prover's device buffers; later calls fail with ErrProverState.
func (g *gkrProver) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	g.released = true
	g.be.untrack(g)
	g.freeBuffers()
}

func (g *gkrProver) Root() (p, q field.Fp4, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return p, q, ErrProverState
	}
	if g.root == nil {
		f, err := readFractions(g.layers[0], 1)
		if err != nil {
			return p, q, err
		}
		g.root = &[2]field.Fp4{f[0], f[1]}
	}
	return g.root[0], g.root[1], nil
}

// readFractions downloads the first n fractions of a layer: p_0, q_0, p_1, q_1, …
func readFractions(a *gpu.Array[kernels.GkrFraction], n int) ([]field.Fp4, error) {
	v := make([]kernels.GkrFraction, n)
	if err := a.Read(v, 0); err != nil {
		return nil, err
	}
	return kernels.Fp4sOfGkrFractions(v), nil
}

func (g *gkrProver) BeginLayer(j int, xi []field.Fp4, lambda field.Fp4) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return ErrProverState
	}
	if j < 1 || j > g.L || len(xi) != j-1 {
		return fmt.Errorf("%w: BeginLayer(%d) with %d coordinates (%d layers)", stark.ErrGkrInput, j, len(xi), g.L)
	}
	if j < g.begun {
		return fmt.Errorf("%w: BeginLayer(%d) after layer %d (the layers' buffers below %d hold its folded tables)", ErrProverState, j, g.begun, g.begun)
	}
	g.layer, g.rounds, g.done, g.begun, g.cur, g.lambda, g.pending = j, j-1, 0, j, j, lambda, nil
	if j == 1 {
		return nil
	}
	if g.eq == nil { // first layer with rounds (the trace check never gets here)
		var err error
		if g.eq, err = gpu.AllocArray[kernels.Mont4](g.be.dev, "gkr eq tables", 1<<g.L); err != nil {
			return err
		}
	}
	lo, hi, logLo := kernels.EqTables(xi)
	hv, err := gpu.UploadArray(g.be.dev, "gkr eq halves", append(lo, hi...))
	if err != nil {
		return err
	}
	g.halves = append(g.halves, hv)
	b := g.be.dev.Batch()
	return kernels.EqExpand{Lo: hv, Hi: hv, HiOff: len(lo), Out: g.eq, OutOff: 1 << (j - 1), LogLo: logLo, LogHi: j - 1 - logLo, Count: 1}.Encode(b, g.be.dev)
}

// encodeFold encodes the fold of the pending value into the next smaller tables and their round
// sums.
func (g *gkrProver) encodeFold(b *gpu.Batch) error {
	c := g.cur
	err := g.sc.EncodeFoldRound(b, g.eq, 1<<(c-1), 1<<(c-2), g.layers[c], g.layers[c-1], c-2, g.lambda, *g.pending)
	g.cur, g.pending = c-1, nil
	return err
}

func (g *gkrProver) Round() ([3]field.Fp4, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released || g.layer < 1 || g.done >= g.rounds {
		return [3]field.Fp4{}, fmt.Errorf("%w: Round with no round left", ErrProverState)
	}
	b := g.be.dev.Batch()
	var err error
	if g.pending != nil {
		err = g.encodeFold(b)
	} else {
		err = g.sc.EncodeRound(b, g.eq, 1<<(g.cur-1), g.layers[g.cur], g.cur-1, g.lambda)
	}
	if err != nil {
		return [3]field.Fp4{}, err
	}
	return g.sc.ReadRound()
}

func (g *gkrProver) Bind(r field.Fp4) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released || g.layer < 1 || g.done >= g.rounds {
		return fmt.Errorf("%w: Bind with no round left", ErrProverState)
	}
	if g.pending != nil {
		// Two binds in a row: fold the earlier value now (its round sums go unread).
		if err := g.encodeFold(g.be.dev.Batch()); err != nil {
			return err
		}
	}
	g.pending = &r
	g.done++
	return nil
}

func (g *gkrProver) LayerClaims() (stark.GkrLayerClaims, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released || g.layer < 1 || g.done != g.rounds {
		return stark.GkrLayerClaims{}, fmt.Errorf("%w: LayerClaims before the layer's rounds are bound", ErrProverState)
	}
	if g.layer == 1 {
		f, err := readFractions(g.layers[1], 2)
		if err != nil {
			return stark.GkrLayerClaims{}, err
		}
		return stark.GkrLayerClaims{PXi0: f[0], QXi0: f[1], PXi1: f[2], QXi1: f[3]}, nil
	}
	// The tables have two rows (layer buffer 2: row y is fractions 2y, 2y + 1) and r is pending.
	if g.cur != 2 || g.pending == nil {
		return stark.GkrLayerClaims{}, fmt.Errorf("%w: layer %d ends with tables in buffer %d", ErrProverState, g.layer, g.cur)
	}
	f, err := readFractions(g.layers[2], 4)
	if err != nil {
		return stark.GkrLayerClaims{}, err
	}
	r := *g.pending
	lerp := func(lo, hi field.Fp4) field.Fp4 { return lo.Add(r.Mul(hi.Sub(lo))) }
	return stark.GkrLayerClaims{PXi0: lerp(f[0], f[4]), QXi0: lerp(f[1], f[5]), PXi1: lerp(f[2], f[6]), QXi1: lerp(f[3], f[7])}, nil
}

var _ stark.GkrDeviceLayers = (*gkrProver)(nil)

// ProveLayers implements stark.GkrDeviceLayers: every layer's rounds encoded at once, the
// transcript steps on the device (kernels.DeviceTranscript), one download of the log at the end.
// Per layer j: the eq table from the halves the previous layer's end wrote (ξ on the device),
// each large round's partials with λ and the last bound value read from the log and its
// transcript step (its sums, the bound value), the rounds of ≤ 2^GkrSmallLog pairs in one launch
// (EncodeSmallRounds), the layer's end (claims, μ, the next λ and eq halves). The log holds the
// root's fraction (p_0, q_0), then per layer λ (j ≥ 2), four values a round (s(1), s(2), s(3), r)
// and five at the end (the claims, μ).
func (g *gkrProver) ProveLayers(tr *transcript.Transcript) (*stark.GkrLayersRun, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released || g.layer != -1 || g.begun != 0 {
		return nil, fmt.Errorf("%w: ProveLayers after a layer was begun", ErrProverState)
	}
	L := g.L
	type layerAt struct{ lambda, rounds, end int }
	at := make([]layerAt, L+1)
	n := 2 // the root's fraction (p_0, q_0), copied from layer 0
	for j := 1; j <= L; j++ {
		if j > 1 {
			at[j].lambda = n
			n++
		}
		at[j].rounds = n
		n += 4 * (j - 1)
		at[j].end = n
		n += 5
	}
	dev := g.be.dev
	tt, err := g.be.hash.NewDeviceTranscript(n + kernels.LogStateLen)
	if err != nil {
		return nil, err
	}
	defer tt.Close()
	var halves *gpu.Array[kernels.Mont4]
	if L > 1 {
		if g.eq == nil {
			if g.eq, err = gpu.AllocArray[kernels.Mont4](dev, "gkr eq tables", 1<<L); err != nil {
				return nil, err
			}
		}
		h := (L - 1) / 2 // the largest halves: layer L's ξ of L − 1 coordinates
		if halves, err = gpu.AllocArray[kernels.Mont4](dev, "gkr eq halves", 1<<h+1<<(L-1-h)); err != nil {
			return nil, err
		}
		g.halves = append(g.halves, halves)
	}
	// Layer j's end: its claims, μ, and (not the last layer) the next λ and eq halves. Layer 1's
	// claims are its fractions as built; later layers' come from their small rounds' launch.
	layerEnd := func(j int) kernels.GkrLayerEnd {
		e := kernels.GkrLayerEnd{At: at[j].end}
		if j < L {
			e.Next, e.LambdaAt, e.RhoAt, e.RhoStep, e.NXi, e.LogLo, e.Halves = true, at[j+1].lambda, at[j].rounds+3, 4, j, j/2, halves
		}
		return e
	}
	g.begun = L + 1 // the per-layer methods refuse from now on
	// The state in stream order (an upload would wait for the tree), then q_0 observed behind the
	// tree and the root's fraction copied into the log: no sync between the tree and the layers.
	b := dev.Batch()
	state, absorbIdx, sampleIdx := tr.State()
	if err := tt.EncodeSetState(b, state, absorbIdx, sampleIdx); err != nil {
		return nil, err
	}
	const q0 = 4 // q_0's four words follow p_0's in layer 0's fraction (kernels.GkrFraction)
	b.Copy(tt.Log.Buffer, 0, g.layers[0].Buffer, 0, 4*kernels.GkrFractionWords)
	if err := tt.EncodeObserveSample(b, g.layers[0].Buffer, q0, 4, false, 0); err != nil {
		return nil, err
	}
	for j := 1; j <= L; j++ {
		if j > 1 {
			// The layer's eq table is not expanded: its first round and first fold (or its small
			// rounds, where no fold has written a table) read it from the halves the previous
			// layer's end made.
			eqh := &kernels.GkrEqHalves{Halves: halves, LogLo: (j - 1) / 2}
			cur := j
			// Round t has 2^(j−2−t) pairs: the last rounds, from 2^GkrSmallLog pairs down, run in
			// one launch (EncodeSmallRounds).
			small := max(0, j-2-kernels.GkrSmallLog)
			for t := range small {
				from := kernels.GkrFromLog{Tr: tt, Lambda: at[j].lambda, R: at[j].rounds + 4*(t-1) + 3}
				if t == 0 {
					from.R = from.Lambda
					err = g.sc.EncodeRoundLogged(b, g.eq, 1<<(cur-1), g.layers[cur], cur-1, from, eqh)
				} else {
					var src *kernels.GkrEqHalves
					if t == 1 {
						src = eqh
					}
					err = g.sc.EncodeFoldRoundLogged(b, g.eq, 1<<(cur-1), 1<<(cur-2), g.layers[cur], g.layers[cur-1], cur-2, from, src)
					cur--
				}
				if err == nil {
					err = tt.EncodeGkrRound(b, g.sc, at[j].rounds+4*t)
				}
				if err != nil {
					return nil, err
				}
			}
			// Before round small, the tables are g.layers[cur] (2^(cur−1) rows) and the eq table
			// sits at 2^(cur−1): round 0's as built, or the previous round's, folded by the kernel.
			// The layer's end runs in the same launch, after the last round.
			e := kernels.GkrSmallRounds{Eq: g.eq, EqOff: 1 << (cur - 1), Src: g.layers[cur], LogPairs: j - 2 - small,
				Fold: small > 0, RAt: at[j].rounds + 4*(small-1) + 3, LambdaAt: at[j].lambda, At: at[j].rounds + 4*small, End: layerEnd(j)}
			if small <= 1 {
				e.EqHalves = eqh
			}
			if err := tt.EncodeSmallRounds(b, e); err != nil {
				return nil, err
			}
		} else if err := tt.EncodeLayerEnd(b, g.layers[1], layerEnd(1)); err != nil {
			return nil, err
		}
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	v, sponge, absorbIdx, sampleIdx, err := tt.ReadLogState(n)
	if err != nil {
		return nil, err
	}
	g.root = &[2]field.Fp4{v[0], v[1]}
	run := &stark.GkrLayersRun{Root: &[2]field.Fp4{v[0], v[1]}, Lambda: make([]field.Fp4, L), Polys: make([][][3]field.Fp4, L), Rho: make([][]field.Fp4, L),
		Claims: make([]stark.GkrLayerClaims, L), Mu: make([]field.Fp4, L),
		Final: &stark.TranscriptState{Sponge: sponge, AbsorbIdx: absorbIdx, SampleIdx: sampleIdx}}
	for j := 1; j <= L; j++ {
		if j > 1 {
			run.Lambda[j-1] = v[at[j].lambda]
		}
		run.Polys[j-1] = make([][3]field.Fp4, j-1)
		run.Rho[j-1] = make([]field.Fp4, j-1)
		for t := range j - 1 {
			k := at[j].rounds + 4*t
			run.Polys[j-1][t] = [3]field.Fp4{v[k], v[k+1], v[k+2]}
			run.Rho[j-1][t] = v[k+3]
		}
		k := at[j].end
		run.Claims[j-1] = stark.GkrLayerClaims{PXi0: v[k], QXi0: v[k+1], PXi1: v[k+2], QXi1: v[k+3]}
		run.Mu[j-1] = v[k+4]
	}
	return run, nil
}
