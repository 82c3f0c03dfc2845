package device

// The peak device memory of a proof, estimated before it starts (issue 13: refuse a proof that
// cannot fit, naming what it needs). The estimate follows what each stage of this backend
// allocates, in order, from the trace shapes and the parameters alone:
//
//   - resident for the whole proof: the traces, what was already allocated (the key's
//     preprocessed commitments, the Poseidon2 constants), each commitment's Merkle layers, its
//     stacked matrix Q (4·H·W bytes, H = 2^(l_skip+n_stack)) and codeword (4·H·W·2^log_blowup)
//     where the backend keeps them (KeepStacked; else the commit step holds a chunk of the
//     codeword's columns and the rows' sponge states, the openings Q from the stacked reduction
//     to WHIR's batching and a chunk of the codeword again at round 0's openings), the NTT's
//     twiddle tables and its scratch buffers (kernels.NTT keeps every scratch it outgrew);
//   - per step, freed after it: the trace check's row scratch (the rowEval the check makes,
//     planned without the trace) or its GKR leaves, the Merkle leaf and group scratch of a tree
//     being built, the GKR layers, the constraint sumcheck's tables and zerocheck scratch
//     (kernels.ZerocheckScratch: NewZerocheck's own plans, from the traces' shapes), the stacked
//     reduction's tables, WHIR's f and w tables, folded codewords and their trees;
//   - the check counts what a proof of the same shape before it left on the device (the NTT's
//     tables and scratch, the constraint sumcheck's per-key data and eq tables): a later proof's
//     check in the same process (bench) sees them.
//
// The largest of resident + step over the steps is the estimate. The terms mirror the
// allocation code (commit.go, whir.go, stacking.go, gkr.go, constraints.go and the kernels they
// call); TestEstimateProofMemory measures real peaks on the host device and requires the
// estimate to stay above them and within 1.3× of them (1.5× in pieces), so a change of an
// allocation pattern shows there.

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// MemoryEstimate is the estimated peak device memory of one proof.
type MemoryEstimate struct {
	// Peak is the estimated largest amount of device memory in use during the proof, in bytes,
	// counting InUse.
	Peak int64
	// Step names the step that reaches Peak: "check", "commit", "gkr", "constraints",
	// "stacking" or "whir".
	Step string
	// InUse is the device memory already in use when the estimate was made (the key, the
	// backend's tables; the traces when they are loaded already).
	InUse int64
	// Steps is each step's estimated peak, in proof order.
	Steps []StepMemory
	// resident is the model's resident bytes at the end of the proof.
	resident int64
}

// StepMemory is one step's estimated peak (bytes).
type StepMemory struct {
	Step string `json:"step"`
	Peak int64  `json:"peak_bytes"`
}

// programSlack is what the estimate adds for the small buffers it does not follow one by one
// (programs, constants, eq halves, sumcheck partials, the grinder's buffers): the programs'
// uploads are counted apart (programBytes).
const programSlack = 1 << 20

// memTally follows the resident memory through the steps and the largest total seen.
type memTally struct {
	live  int64
	est   MemoryEstimate
	seen  map[string]bool
	steps []StepMemory
}

// hold adds n bytes resident until the end of the proof.
func (t *memTally) hold(n int64) { t.live += n }

// step records step's peak: the resident memory plus transient bytes.
func (t *memTally) step(name string, transient int64) {
	p := t.live + transient
	if i := slices.IndexFunc(t.steps, func(s StepMemory) bool { return s.Step == name }); i >= 0 {
		t.steps[i].Peak = max(t.steps[i].Peak, p)
	} else {
		t.steps = append(t.steps, StepMemory{Step: name, Peak: p})
	}
	if p > t.est.Peak {
		t.est.Peak, t.est.Step = p, name
	}
}

// nttModel follows kernels.NTT's twiddle tables (built for the largest transform, kept) and its
// scratch (NTT.ScratchWords; an outgrown scratch is kept until Close).
type nttModel struct {
	be      *Backend
	logMax  int
	scratch int64 // words of the current scratch
	held    int64 // bytes of every scratch kept (the current and the outgrown)
}

// transform records a column transform of height rows × width columns.
func (m *nttModel) transform(t *memTally, height, width int) {
	m.transformWithin(t, height, width, m.be.ntt.ScratchWords(height, width))
}

// wide records a commitment's transform by EncodeRSMatrixWide.
func (m *nttModel) wide(t *memTally, height, width int) {
	m.transformWithin(t, height, width, m.be.ntt.ScratchWordsWithin(height, width, kernels.WideScratchWords))
}

func (m *nttModel) transformWithin(t *memTally, height, width, scratchWords int) {
	logN := bits.TrailingZeros(uint(height))
	if l := max(logN, 12); l > m.logMax {
		t.hold(2 * 4 << l)
		m.logMax = l
	}
	if n := int64(scratchWords); n > m.scratch {
		t.hold(4 * n) // the outgrown scratch stays too
		m.held += 4 * n
		m.scratch = n
	}
}

// release records NTT.ReleaseScratch.
func (m *nttModel) release(t *memTally) {
	t.live -= m.held
	m.scratch, m.held = 0, 0
}

// merkleBytes returns the resident layers and the build scratch of kernels.EncodeMerkleTree over
// rows rows with 2^k rows per query group (kernels.MerkleScratch: the leaf digests and group
// levels of a chunk of query groups).
func merkleBytes(rows, k int) (layers, scratch int64) {
	qs := int64(rows >> k)
	layers = 32 * (2*qs - 1)
	leaves, groups := kernels.MerkleScratch(rows, k)
	return layers, 32 * int64(leaves+groups)
}

// airShape is one present AIR of the proof.
type airShape struct {
	height  int
	parts   []int // widths of the committed parts besides the preprocessed one: common main, cached
	prog    *constraints.Program
	vk      *air.VerifyingKey
	preW    int // preprocessed width (committed at keygen)
	nInter  int
	logH    int
	present bool
}

// EstimateProofMemory estimates the peak device memory of proving, on this backend with key pk
// and parameters p, traces of the given heights (heights[i] is AIR i's trace height, 0 for an
// AIR absent from the proof), with the pre-proof trace check when check is set. Call it after
// keygen and before the traces are loaded (loaded tells it they are: their bytes are then in
// use already). The estimate counts the device memory in use now.
func (b *Backend) EstimateProofMemory(pk *stark.ProvingKey, heights []int, p params.SystemParams, check, loaded bool) (MemoryEstimate, error) {
	return b.estimateProof(pk, heights, p, check, loaded, nil)
}

// estimateProof is EstimateProofMemory with the NTT's model started from next when not nil (the
// state a proof of the same shape leaves it in: the next proof's NTT holds nothing new).
func (b *Backend) estimateProof(pk *stark.ProvingKey, heights []int, p params.SystemParams, check, loaded bool, next *nttModel) (MemoryEstimate, error) {
	if pk == nil || pk.VK == nil || pk.VK.MVK == nil {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate without a key")
	}
	if len(heights) != pk.VK.NumAirs() {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: %d heights for %d AIRs", len(heights), pk.VK.NumAirs())
	}
	m := p.LSkip + p.NStack
	if p.LSkip < 0 || p.NStack < 0 || p.LogBlowup < 0 || m+p.LogBlowup > field.TwoAdicity || p.Whir.K < 0 || p.Whir.K > m+p.LogBlowup {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: parameters l_skip %d, n_stack %d, log_blowup %d, k %d", p.LSkip, p.NStack, p.LogBlowup, p.Whir.K)
	}
	var airs []airShape
	var traceBytes, progBytes int64
	for i, h := range heights {
		if h == 0 {
			continue
		}
		lh, ok := field.Log2(h)
		if !ok || h < 0 || lh > m {
			return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: AIR %d height %d (a power of two up to 2^%d)", i, h, m)
		}
		avk := pk.VK.MVK.PerAir[i]
		w := avk.Width
		a := airShape{height: h, logH: lh, vk: avk, prog: pk.VK.Programs[i], preW: w.Preprocessed, present: true}
		a.parts = append([]int{w.CommonMain}, w.CachedMains...)
		if avk.DAG != nil {
			a.nInter = len(avk.DAG.Interactions)
		}
		for _, pw := range a.parts {
			traceBytes += 4 * int64(pw) * int64(h)
		}
		if a.prog != nil {
			// The program is uploaded whole and for some of its outputs (check, GKR) and in
			// pieces: about 12 bytes an instruction each time.
			progBytes += 3 * (12*int64(len(a.prog.Code)) + 4*int64(len(a.prog.Consts)))
		}
		airs = append(airs, a)
	}
	if len(airs) == 0 {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: no AIR present")
	}
	// Trace order: heights descending (stable), as stark.AirInputs orders them.
	slices.SortStableFunc(airs, func(x, y airShape) int { return y.height - x.height })

	// GKR: the fraction layers, the eq tables and the leaves' row scratch (the trace check
	// builds the same leaves to check the interactions' balance).
	logHeights, nInter := make([]int, len(airs)), make([]int, len(airs))
	var gkrRows rowBytes
	var gkrBytes, gkrCheck int64 // the proof's GKR; the check's (its tree only: no eq tables)
	for i, a := range airs {
		logHeights[i], nInter[i] = a.logH, a.nInter
		if a.nInter > 0 {
			r, _, err := b.rowScratchBytes(a, false)
			if err != nil {
				return MemoryEstimate{}, err
			}
			gkrRows = gkrRows.max(r)
		}
	}
	if layout, _, err := stark.NewGkrLayout(p.LSkip, logHeights, nInter); err == nil && layout.Total > 0 {
		L := int64(layout.NumLayers())
		gkrCheck = 4*kernels.GkrFractionWords*(2<<L-1) + gkrRows.slots + gkrRows.regs + gkrRows.extra
		gkrBytes = gkrCheck + 16<<L
	}

	// Check: the row scratch of the largest evaluation (slots, registers and the pieces'
	// scratch are each sized for the largest trace), every run's partial pairs and the result.
	// Computed before the memory in use is read: splitting a program into pieces uploads them.
	var checkBytes int64
	if check {
		var rows rowBytes
		evals := 0
		for _, a := range airs {
			r, ok, err := b.rowScratchBytes(a, true)
			if err != nil {
				return MemoryEstimate{}, err
			}
			if ok {
				rows, evals = rows.max(r), evals+1
				checkBytes += r.partials
			}
		}
		checkBytes += rows.slots + rows.regs + rows.extra + 8*int64(evals)
	}
	// Constraints: the zerocheck's scratch, planned from the traces' shapes (which splits and
	// uploads pieces too).
	interactions := false
	for _, a := range airs {
		interactions = interactions || (a.present && a.nInter > 0)
	}
	logM, _ := kernels.ZcRound0Domain(p.LSkip, p.MaxConstraintDegree, interactions)
	zcScratch, err := b.zerocheckScratch(airs, p, logM)
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: %w", err)
	}

	t := &memTally{}
	t.est.InUse = b.dev.Stats().MemoryInUse
	t.hold(t.est.InUse + progBytes + programSlack)
	if !loaded {
		t.hold(traceBytes)
	}
	H, R, k := 1<<m, 1<<(m+p.LogBlowup), p.Whir.K
	ntt := &nttModel{be: b, logMax: -1}
	if next != nil {
		ntt = next
	}
	// The preprocessed commitments made at keygen (in use already) built the tables and scratch
	// of their transforms.
	// Those of the AIRs present are opened with the proof's own.
	preCols, preCommits := 0, 0
	// rebuilt: the codeword chunks OpenInitial encodes (one per commitment that does not keep
	// its codeword, live together until the openings are read), restacked: the stacked matrices
	// the openings stack again (commitments that do not keep theirs).
	var rebuilt, restacked int64
	var rebuiltCols []int // the chunks' widths: their transforms
	chunks := 0           // the stacked reduction's round-0 chunks (its chunk sums)
	keep := b.keepStacked.Load()
	for i, c := range pk.PreprocessedCommit {
		if c == nil {
			continue
		}
		w := c.Layout().Width
		if heights[i] != 0 {
			chunks += stackedChunks(c.Layout())
		}
		ntt.logMax = max(ntt.logMax, max(m+p.LogBlowup, 12))
		ntt.scratch = max(ntt.scratch, int64(b.ntt.ScratchWords(R, w)))
		if heights[i] != 0 {
			preCols += w
			preCommits++
			if dc, ok := c.(*Committed); !ok || dc.codeword == nil {
				rebuilt += 4 * int64(R) * int64(kernels.StreamChunkColumns(w))
				rebuiltCols = append(rebuiltCols, kernels.StreamChunkColumns(w))
			}
			if dc, ok := c.(*Committed); !ok || !dc.qKept {
				restacked += 4 * int64(H) * int64(w)
			}
		}
	}

	// A check before a later proof of the process finds what this one keeps (kept: the
	// constraint sumcheck's per-key data; the NTT's tables and scratch): counted at the end.
	checkLive := t.live
	var kept int64
	if check {
		t.step("check", max(checkBytes, gkrCheck))
	}

	// Commit: the common main traces stacked together, then each cached trace alone.
	commit := func(dims []stark.MatrixDim) (int, error) {
		layout, err := stark.NewStackedLayout(p.LSkip, m, dims)
		if err != nil {
			return 0, err
		}
		if layout.Width == 0 {
			return 0, nil
		}
		chunks += stackedChunks(layout)
		W := layout.Width
		layers, scratch := merkleBytes(R, k)
		t.hold(layers)
		if keep {
			ntt.wide(t, R, W)
			t.hold(4*int64(H)*int64(W)<<p.LogBlowup + 4*int64(H)*int64(W)) // the codeword and Q
			t.step("commit", scratch)
			ntt.release(t)
			ntt.transform(t, R, W) // NTT.Reserve: a plain transform's scratch kept
		} else {
			// The codeword streamed: a chunk of columns and the rows' sponge states at a time,
			// and again a chunk for the openings.
			ntt.transform(t, R, kernels.StreamChunkColumns(W))
			chunk, states := kernels.StreamScratch(R, W)
			t.step("commit", scratch+4*int64(chunk+states))
			ntt.release(t)
			rebuilt += 4 * int64(chunk)
			rebuiltCols = append(rebuiltCols, kernels.StreamChunkColumns(W))
			restacked += 4 * int64(H) * int64(W)
		}
		return W, nil
	}
	var dims []stark.MatrixDim
	for _, a := range airs {
		dims = append(dims, stark.MatrixDim{Width: a.parts[0], LogHeight: a.logH})
	}
	mainW, err := commit(dims)
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: %w", err)
	}
	cols, commits := mainW+preCols, 1+preCommits
	for _, a := range airs {
		for _, w := range a.parts[1:] {
			commits++
			cw, err := commit([]stark.MatrixDim{{Width: w, LogHeight: a.logH}})
			if err != nil {
				return MemoryEstimate{}, fmt.Errorf("backend/device: memory estimate: %w", err)
			}
			cols += cw
		}
	}

	t.step("gkr", gkrBytes)

	// Constraints: per trace its tables (and their folded half), the eq tables (kept from one
	// proof to the next, zcCache), and the zerocheck scratch (above).
	var zcTables, zcEq int64
	lifts := map[int]bool{}
	for _, a := range airs {
		if a.prog == nil {
			continue
		}
		nLift := max(a.logH-p.LSkip, 0)
		x := int64(1) << nLift
		nt := int64(a.prog.NumCols + 3)
		if a.prog.NeedRot {
			nt = int64(2*a.prog.NumCols + 3)
		}
		zcTables += 16 * nt * x
		if x > 1 {
			zcTables += 8 * nt * x
		}
		if !lifts[nLift] {
			lifts[nLift] = true
			zcEq += 32 << nLift // eq tables of every round of this lift
		}
		// The trace's maps, constants and piece bindings stay on the device after the first
		// proof of the key (zcCache): in use already when kept, else allocated here and kept.
		if !b.zcKept(zcTraceKey{pg: a.prog, vk: a.vk, logH: a.logH, l: p.LSkip, logM: logM}) {
			n := b.zcKeyBytes(a, p, logM)
			t.hold(n)
			kept += n
		}
	}
	t.step("constraints", zcTables+zcEq+zcScratch)
	kept += zcEq

	// round0 records round 0's openings: the codeword chunks encoded again and their transforms.
	round0 := func(t *memTally) {
		for _, w := range rebuiltCols {
			ntt.transform(t, R, w)
		}
		t.step("whir", rebuilt)
	}
	// Openings: the stacked reduction's q and W tables (and their folded halves) over every
	// committed column, then WHIR.
	// The stacked matrices not kept are stacked again from the traces for the stacked
	// reduction and left to WHIR's batching (Committed.acquireQ).
	nx := int64(1) << p.NStack
	t.hold(restacked)
	t.step("stacking", 48*int64(cols)*nx+4*int64(kernels.StackedUniWidth(p.LSkip))*int64(kernels.StackedUniMaxRows(b.dev))*int64(commits)+
		4*int64(kernels.StackedChunkWidth(p.LSkip))*int64(chunks))
	t.hold(48 << m) // f and w, 2^m and 2^(m−1) Fp4 entries each
	t.step("whir", 0)
	t.live -= restacked
	t.hold(16 << max(m-k, 0))
	lrs := m + p.LogBlowup
	for i := range max(len(p.Whir.Rounds)-1, 0) {
		L := lrs - 1
		t.hold(16 << L) // the folded codeword: 2^L rows × 4 planes
		ntt.transform(t, 1<<L, 4)
		layers, scratch := merkleBytes(1<<L, k)
		t.hold(layers)
		t.step("whir", scratch)
		if i == 0 {
			round0(t) // round 0's openings, after the first folded commitment
			t.hold(whirWeightBytes(p, m))
		}
		lrs--
	}
	if len(p.Whir.Rounds) <= 1 {
		round0(t)
	}
	if check && next == nil {
		// What the NTT keeps for the process: the resident bytes this proof's model holds
		// beyond those of the same model with the NTT started as this one ends.
		seed := *ntt
		again, err := b.estimateProof(pk, heights, p, false, loaded, &seed)
		if err != nil {
			return MemoryEstimate{}, err
		}
		saved := t.live
		t.live = checkLive + kept + t.live - again.resident
		t.step("check", max(checkBytes, gkrCheck))
		t.live = saved
	}
	t.est.Steps, t.est.resident = t.steps, t.live
	return t.est, nil
}

// whirWeightBytes bounds the buffers WHIR's AccumulateWeight keeps from round 0's openings on
// (grown to the largest round's): per point of a round (its queries and an out-of-domain sample)
// the two halves of its eq table over the d = m − k·(i+1) variables left, and the point itself.
func whirWeightBytes(p params.SystemParams, m int) int64 {
	var most int64
	for i, r := range p.Whir.Rounds {
		d := max(m-p.Whir.K*(i+1), 0)
		npts := int64(r.NumQueries + 1)
		most = max(most, 16*npts*(int64(1)<<(d/2)+int64(1)<<(d-d/2))+32*npts)
	}
	return most
}

// rowBytes is the row scratch of evaluations (bytes): allocRowScratch's slots, registers and
// extra words (each the largest evaluation's), and the check's partial pairs.
type rowBytes struct{ slots, regs, extra, partials int64 }

func (r rowBytes) max(o rowBytes) rowBytes {
	return rowBytes{max(r.slots, o.slots), max(r.regs, o.regs), max(r.extra, o.extra), max(r.partials, o.partials)}
}

// rowScratchBytes is the row scratch of a's evaluation by the trace check (check: its
// constraints, in pieces where the backend runs them so; ok false: the check has nothing to
// evaluate) or by the GKR leaves (its interactions): the rowEval the check or the leaves make,
// planned without the trace. Splitting the program uploads its pieces (once per key; the check
// and the proof use the same).
func (b *Backend) rowScratchBytes(a airShape, check bool) (r rowBytes, ok bool, err error) {
	if a.vk == nil || a.vk.DAG == nil {
		return r, false, nil // the check and the leaves refuse it
	}
	outs := constraints.Interactions
	if check {
		outs = constraints.Constraints
	}
	pg, err := b.shared.compile(a.vk, outs)
	if err != nil {
		return r, false, err
	}
	if check && pg.NumConstraints == 0 {
		return r, false, nil
	}
	dc, err := kernels.DeviceCode(b.dev, pg) // the registers the device's code uses
	if err != nil {
		return r, false, err
	}
	e := &rowEval{prog: pg, height: a.height,
		dp: &kernels.Program{NumSlots: pg.NumSlots(), NumRegs: dc.NumRegs, NumOutput: len(pg.Outputs)}}
	extra := gkrExtra
	switch {
	case !check:
		e.planRuns(b.dev, gkrPointExtra(e.dp))
	case b.usePieces(pg):
		pp, err := b.pieces(a.vk, outs, constraints.DevicePieces)
		if err != nil {
			return r, false, err
		}
		e.pieces = &kernels.RowPieces{RowPiecesPlan: e.planPieces(b.dev, pp)}
		extra = checkExtra
	default:
		e.planRuns(b.dev, 0)
		extra = checkExtra
	}
	s, g := e.scratch()
	r = rowBytes{slots: 4 * int64(max(s, 1)), regs: 4 * int64(max(g, 1)), extra: 4 * int64(extra(e))}
	if check {
		r.partials = 8 * int64(e.checkGroups(b.dev)) * int64(e.height/e.points())
	}
	return r, true, nil
}

// zerocheckScratch is the scratch kernels.NewZerocheck allocates for the proof's traces: their
// shapes as the constraint prover gives them (newTrace: the key's program, in pieces where the
// backend runs it so, with the generated code it builds), planned by the zerocheck's own planners
// (kernels.ZerocheckScratch). The pieces are split and uploaded here if they were not yet.
func (b *Backend) zerocheckScratch(airs []airShape, p params.SystemParams, logM int) (int64, error) {
	var shapes []kernels.ZcShape
	for _, a := range airs {
		if a.prog == nil {
			continue
		}
		sh, err := kernels.ZcShapeOf(b.dev, a.prog, p.LSkip, a.logH)
		if err != nil {
			return 0, err
		}
		switch {
		case b.usePieces(a.prog):
			pp, err := b.pieces(a.vk, constraints.All, constraints.DevicePieces)
			if err != nil {
				return 0, err
			}
			rpp, err := b.pieces(a.vk, constraints.All, constraints.DeviceRoundPieces)
			if err != nil {
				return 0, err
			}
			ps, rs := pp.Shape(), rpp.Shape()
			ps.Generated = ps.Generated || b.generates() // built by the first proof
			sh.Pieces, sh.RoundPieces = &ps, &rs
		case b.generatesWhole(a.prog):
			sh.UseWhole(b.builtWhole(a.prog))
		}
		shapes = append(shapes, sh)
	}
	sc, err := kernels.ZerocheckScratch(b.dev, p.LSkip, logM, p.MaxConstraintDegree+1, shapes, b.zcOpts)
	return sc.Bytes(), err
}

// builtWhole is p's generated whole-program code if it was built already (nil: not yet).
func (b *Backend) builtWhole(p *constraints.Program) *kernels.GeneratedWhole {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	if dp := b.progs[p]; dp != nil {
		return dp.Generated
	}
	return nil
}

// zcKeyBytes bounds the device data kernels.NewZcTrace and the piece bindings make for a's trace
// (kernels.ZcTrace.Bytes), which the backend keeps from one proof of the key to the next: maps of
// the source columns, slots and tables, the constants and weights, and per piece set (round 0's
// and the rounds', GPUs) its constants, table and two slot lists (counted as two words per
// instruction of the program: at most the operands a piece reads, pieces sharing little code; at
// most constraints.DeviceRoundPieces pieces) and the rounds' level code (kernels.ProgramPieces.
// LevelWords: 3 words an instruction, a level start at most per instruction, 9 words a piece;
// counted as 5 words per instruction of the program, as the pieces repeat some of its code:
// Keccak-f's 39,536 instructions are 42,750 in the rounds' pieces); and the prover's small
// buffers, kept too: the eq tables of every round and their halves, the sums, the bind weights.
func (b *Backend) zcKeyBytes(a airShape, p params.SystemParams, logM int) int64 {
	pg := a.prog
	ncols := 0
	for _, w := range pg.PartWidths {
		ncols = (ncols+15)/16*16 + w
	}
	ncols = max((ncols+15)/16*16, 16)
	cp := int64(len(pg.Consts) + pg.NumPublic + 1)
	n := 4*cp + 16*int64(len(pg.Outputs)+1) + 12*int64(ncols) + 8<<logM + 8*int64(pg.NumSlots())
	for _, w := range pg.PartWidths {
		n += 8*int64(w) + 4
	}
	if b.usePieces(pg) {
		code := int64(len(pg.Code))
		k := min(int64(constraints.DeviceRoundPieces), max(code, 1)) // a piece has an instruction at least
		n += 2 * (4*k*int64(pg.NumPublic+1) + 4*code + 16*k + 2*8*2*code)
		n += 4 * (10*k + 5*code) // the rounds' level code
	}
	nLift := max(a.logH-p.LSkip, 0)
	n += 2*(32<<nLift) + 48<<logM + 48*int64(p.MaxConstraintDegree+1) + 16<<p.LSkip
	return n
}

// stackedChunks is the number of round-0 chunks of the stacked reduction over layout's slices
// (kernels.StackedSliceChunks; a slice shorter than 2^l_skip counts one).
func stackedChunks(layout *stark.StackedLayout) int {
	n := 0
	for _, sc := range layout.Cols {
		n += kernels.StackedSliceChunks(max(sc.Slice.LogHeight-layout.LSkip, 0), layout.LSkip)
	}
	return n
}
