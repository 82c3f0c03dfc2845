package device

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// ErrProverState: a prover method was called out of order (or after Release).
var ErrProverState = errors.New("backend/device: prover method called out of order")

// stackingProver is the stacked opening reduction (spec B §5.3–5.4) on the device, computing
// exactly what cpuref's stackingProver computes:
//
//   - UnivariateRound: the kernels reduce the stacked matrices Q to A, B, C (N = 2^l_skip Fp4
//     each: the sums of the slices' blocks weighted by eq(r_1..r_nn, ·), its rotation and the
//     batching weights) and gather the blocks of the slices shorter than 2^l_skip; the host
//     takes IDFTs of those few values and multiplies by the eq_D polynomials (2N − 1
//     coefficients). One sync. The pass over Q, which no weight enters, is encoded by
//     NewStackingProver (kernels.EncodeStackedUniChunks: per-chunk sums), so that it runs before
//     λ is known; UnivariateRound weighs those sums (kernels.EncodeStackedUniWeigh).
//   - BindUnivariate: q(u_0; x) = Σ_z L_z(u_0)·Q[x·N + z] and W(u_0; x) per slice from its eq
//     table and two host scalars, into tables of every commitment side by side (Σ widths columns
//     of 2^n_stack Fp4). No sync.
//   - Round/Bind: the shared sumcheck family over those tables; Bind only records u, the next
//     Round folds and sums in one pass (ping-pong buffers). One sync per Round, none per Bind.
//   - Openings: the last fold of q into one row per column and its download. One sync.
//   - ProveFirstRounds: UnivariateRound's kernels, then its coefficients made on the device from
//     A, B, C and the short blocks (kernels.EncodeStackedUniCoeffs: the host's IDFTs and
//     products as matrices), observed and u_0 sampled on the device transcript, BindUnivariate's
//     scalars of u_0 made there (kernels.EncodeStackedUniBind), the bind and ProveRounds' rounds:
//     one sync for all.
//
// Every device buffer is allocated by NewStackingProver and freed by Release.
type stackingProver struct {
	be      *Backend
	p       params.SystemParams
	commits []*Committed
	// qs are the commitments' stacked matrices, leased for the prover (Committed.acquireQ);
	// its release leaves them to WHIR's batching.
	qs     []*gpu.Array[kernels.Mont]
	r      []field.Fp4          // the batch-sumcheck point
	batch  *stark.StackingBatch // λ and the rotation flags, from UnivariateRound on
	colOff []int                // first table column of each commitment
	cols   int                  // Σ widths

	uni     []kernels.SliceRange // per commitment: its slices of log height ≥ l_skip (Count 0: none)
	wRange  kernels.SliceRange   // every slice (of every commitment), for W
	wInfo   []wSlice             // host data of wRange's slices, in order
	shorts  []shortSlice         // slices of log height < l_skip, in gather order
	gathers []gatherRun          // copies of short blocks into the result buffer
	rows    int                  // partials rows of UnivariateRound
	// weighted are the slices of log height ≥ l_skip (index in the descriptors, commitment,
	// column): UnivariateRound's kernel writes their weights into the descriptors from λ.
	weighted []weightedSlice

	mu       sync.Mutex
	released bool
	bound    int        // variables bound: 0 before u_0, then 1 + rounds bound (as cpuref)
	pending  *field.Fp4 // a bound u not yet folded into the tables
	qFolded  bool       // ProveRounds folded q at the pending u into the other side (Openings reads it)
	cur      int        // ping-pong side holding the current tables
	logRows  int        // log rows of the current tables

	// Words: slices, the packed descriptors; rotBits, a bit a descriptor: its column's rotation
	// flag (UnivariateRound); sums, round 0's weight-free chunk sums (encoded by
	// NewStackingProver); partials and result, round 0's weighted sums (EncodeSumRows adds them
	// word by word) and, in result, the Q blocks of the short slices copied after them.
	// halves: the eq halves as EqTables returns them.
	slices, rotBits, sums, partials, result *gpu.Array[uint32]
	halves, etab, lag, weights              *gpu.Array[kernels.Mont4]
	qt, wt                                  [2]*gpu.Array[kernels.Mont4]
	sc                                      *kernels.Sumcheck
	// For ProveFirstRounds: from halves[uniOff], the functions of r_0 (uniConstants); shortInfo,
	// per short slice its weights entry, l_skip + nn, −nn (nil without short slices). Uploaded by
	// NewStackingProver.
	uniOff    int
	shortInfo *gpu.Array[uint32]
}

// wSlice is what BindUnivariate needs of one slice to compute its W scalars.
type wSlice struct {
	c, i int // commitment, index in its layout's Cols
	nn   int // log height − l_skip (may be negative)
}

// weightedSlice is a slice of log height ≥ l_skip: its descriptor's index and its column.
type weightedSlice struct{ at, c, i int }

// shortSlice is a slice of log height < l_skip: one block, gathered for the host.
type shortSlice struct {
	c, i, nn int
	qStart   int // uint index of its block in Q
}

// gatherRun copies count blocks of commitment c's Q from qStart into the result buffer.
type gatherRun struct {
	c, qStart, count, at int // at: uint index in result
}

var _ stark.StackingProver = (*stackingProver)(nil)

// NewStackingProver implements stark.StackingBackend on the device: it validates the inputs as
// cpuref does, packs the slice descriptors (their weights come with UnivariateRound), uploads
// them and the halves of the eq tables (a few KiB), encodes the eq tables' expansion and round
// 0's pass over Q, and allocates the tables (no sync).
func (b *Backend) NewStackingProver(p params.SystemParams, commits []stark.Committed, r []field.Fp4) (stark.StackingProver, error) {
	cs, err := b.commits(commits)
	if err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%w: no point r", stark.ErrOpeningInput)
	}
	if p.LSkip < 0 || p.LSkip > 5 || p.NStack < 0 {
		return nil, fmt.Errorf("%w: l_skip=%d n_stack=%d", stark.ErrOpeningInput, p.LSkip, p.NStack)
	}
	l, ns := p.LSkip, p.NStack
	n := 1 << l
	sp := &stackingProver{be: b, p: p, commits: cs, r: r, colOff: make([]int, len(cs)), uni: make([]kernels.SliceRange, len(cs))}
	for c, com := range cs {
		lay := com.Layout()
		for _, sc := range lay.Cols {
			if nl := sc.Slice.LogHeight - l; nl+1 > len(r) {
				return nil, fmt.Errorf("%w: point r too short", stark.ErrOpeningInput)
			}
		}
		if com.height != 1<<(l+ns) || com.lSkip != l {
			return nil, fmt.Errorf("%w: stacked height %d", stark.ErrOpeningInput, com.height)
		}
		sp.colOff[c] = sp.cols
		sp.cols += com.width
	}
	if 4*(sp.cols<<ns) >= 1<<31 {
		return nil, fmt.Errorf("%w: %d stacked columns of 2^%d rows exceed 32-bit indexing", stark.ErrOpeningInput, sp.cols, ns)
	}

	// The eq tables e_nn = eq(r_1..r_nn, ·) of every slice height, side by side.
	need := map[int]bool{}
	for _, com := range cs {
		for _, sc := range com.Layout().Cols {
			need[max(sc.Slice.LogHeight-l, 0)] = true
		}
	}
	nns := make([]int, 0, len(need))
	for nn := range need {
		nns = append(nns, nn)
	}
	sort.Ints(nns)
	eOff := map[int]int{}
	var halves []kernels.Mont4
	type expansion struct{ loOff, hiOff, outOff, logLo, logHi int }
	var exps []expansion
	etabLen := 0
	for _, nn := range nns {
		lo, hi, h := kernels.EqTables(r[1 : nn+1])
		exps = append(exps, expansion{len(halves), len(halves) + len(lo), etabLen, h, nn - h})
		halves = append(append(halves, lo...), hi...)
		eOff[nn] = etabLen
		etabLen += 1 << nn
	}

	// Slice descriptors, one list in layout order: every slice for W (a slice of log height <
	// l_skip as one block with e_0 = [1]); UnivariateRound reads each commitment's slices of log
	// height ≥ l_skip, the first ones of its part of the list.
	var all []kernels.StackedSlice
	nx := 1 << ns
	chunk := 0
	claim := 0 // the column's claim in (commitment, column) order: its weights λ^(2k), λ^(2k+1)
	for c, com := range cs {
		r := kernels.SliceRange{First: len(all), FirstChunk: chunk}
		for i, sc := range com.Layout().Cols {
			s := sc.Slice
			nn := s.LogHeight - l
			qStart := s.Col<<(l+ns) + s.Row
			wStart := (sp.colOff[c]+s.Col)*nx + s.Row>>l
			sp.wInfo = append(sp.wInfo, wSlice{c: c, i: i, nn: nn})
			if nn < 0 {
				sp.shorts = append(sp.shorts, shortSlice{c: c, i: i, nn: nn, qStart: qStart})
				all = append(all, kernels.StackedSlice{EOff: eOff[0], NN: 0, WStart: wStart, Short: true})
				chunk += kernels.StackedSliceChunks(0, l)
				continue
			}
			if len(all) != r.First+r.Count {
				return nil, fmt.Errorf("backend/device: commitment %d: a slice of log height ≥ l_skip follows a shorter one", c)
			}
			sp.weighted = append(sp.weighted, weightedSlice{at: len(all), c: c, i: i})
			all = append(all, kernels.StackedSlice{QStart: qStart, EOff: eOff[nn], NN: nn, WStart: wStart, Claim: claim + i})
			r.Count++
			r.Chunks += kernels.StackedSliceChunks(nn, l)
			chunk += kernels.StackedSliceChunks(nn, l)
		}
		claim += len(com.Layout().Cols)
		if r.Count > 0 {
			sp.uni[c] = r
			sp.rows += min(r.Chunks, kernels.StackedUniMaxRows(b.dev))
		}
	}
	words, chunks, err := kernels.PackStackedSlices(all, l)
	if err != nil {
		return nil, err
	}
	if chunks != chunk {
		return nil, fmt.Errorf("backend/device: %d chunks packed, %d counted", chunks, chunk)
	}
	sp.wRange = kernels.SliceRange{First: 0, Count: len(all), Chunks: chunks}

	// Short blocks: copied in runs of consecutive blocks after A, B, C in the result buffer.
	width := kernels.StackedUniWidth(l)
	for k, s := range sp.shorts {
		at := width + k*n
		if g := len(sp.gathers) - 1; g >= 0 && sp.gathers[g].c == s.c && sp.gathers[g].qStart+sp.gathers[g].count*n == s.qStart {
			sp.gathers[g].count++
			continue
		}
		sp.gathers = append(sp.gathers, gatherRun{c: s.c, qStart: s.qStart, count: 1, at: at})
	}

	fail := func(err error) (stark.StackingProver, error) {
		sp.freeBuffers()
		return nil, err
	}
	alloc := func(name string, n int) *gpu.Array[uint32] {
		if err != nil {
			return nil
		}
		var a *gpu.Array[uint32]
		a, err = gpu.AllocArray[uint32](b.dev, "stacking "+name, max(n, 1))
		return a
	}
	alloc4 := func(name string, n int) *gpu.Array[kernels.Mont4] {
		if err != nil {
			return nil
		}
		var a *gpu.Array[kernels.Mont4]
		a, err = gpu.AllocArray[kernels.Mont4](b.dev, "stacking "+name, max(n, 1))
		return a
	}
	// First what round 0's weight-free pass needs, so that it runs on the device while the host
	// allocates the tables below (and, in Prove, absorbs the column openings).
	sp.slices = alloc("slices", len(words))
	sp.rotBits = alloc("rotation flags", (len(all)+31)/32)
	sp.etab = alloc4("eq tables", etabLen)
	sp.sums = alloc("round 0 chunk sums", chunks*kernels.StackedChunkWidth(l))
	if err != nil {
		return fail(err)
	}
	if err := sp.slices.Write(0, words); err != nil {
		return fail(err)
	}
	// The halves are needed until the expansion has run (no sync before UnivariateRound's): freed
	// with the prover. ProveFirstRounds' functions of r_0 go up behind them (uploads before the
	// kernels below, so that they wait for nothing of this prover's).
	sp.uniOff = len(halves)
	if sp.halves, err = gpu.UploadArray(b.dev, "stacking eq halves", append(halves, kernels.Mont4Slice(uniConstants(l, r[0]))...)); err != nil {
		return fail(err)
	}
	if len(sp.shorts) > 0 {
		sinfo := make([]uint32, 0, 3*len(sp.shorts))
		for k, s := range sp.wInfo {
			if s.nn < 0 {
				sinfo = append(sinfo, uint32(2*k), uint32(l+s.nn), uint32(-s.nn))
			}
		}
		if sp.shortInfo, err = gpu.UploadArray(b.dev, "stacking short slices", sinfo); err != nil {
			return fail(err)
		}
	}
	batchEnc := b.dev.Batch()
	sp.qs = make([]*gpu.Array[kernels.Mont], len(cs))
	for c, com := range cs {
		if sp.qs[c], err = com.acquireQ(batchEnc); err != nil {
			return fail(err)
		}
	}
	for _, e := range exps {
		ex := kernels.EqExpand{Lo: sp.halves, Hi: sp.halves, Out: sp.etab, LoOff: e.loOff, HiOff: e.hiOff, OutOff: e.outOff, LogLo: e.logLo, LogHi: e.logHi, Count: 1}
		if err := ex.Encode(batchEnc, b.dev); err != nil {
			return fail(err)
		}
	}
	for c, r := range sp.uni {
		if r.Count == 0 {
			continue
		}
		r.Slices = sp.slices
		if err := kernels.EncodeStackedUniChunks(batchEnc, b.dev, sp.qs[c], r, sp.etab, sp.sums, l); err != nil {
			return fail(err)
		}
	}
	sp.partials = alloc("partials", sp.rows*width)
	sp.result = alloc("round 0 sums", width+len(sp.shorts)*n)
	sp.lag = alloc4("lagrange weights", n+3) // and BindUnivariate's three scalars
	sp.weights = alloc4("W weights", 2*len(all))
	sp.qt[0] = alloc4("q table", sp.cols*nx)
	sp.wt[0] = alloc4("W table", sp.cols*nx)
	sp.qt[1] = alloc4("q table (folded)", sp.cols*max(nx/2, 1))
	sp.wt[1] = alloc4("W table (folded)", sp.cols*max(nx/2, 1))
	if err != nil {
		return fail(err)
	}
	if sp.sc, err = kernels.NewSumcheck(b.dev); err != nil {
		return fail(err)
	}
	if err := b.track(sp); err != nil {
		return fail(err)
	}
	return sp, nil
}

// free is Backend.Close's release of a live prover.
func (sp *stackingProver) free() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.released = true
	sp.freeBuffers()
}

// freeBuffers releases every device buffer (idempotent).
func (sp *stackingProver) freeBuffers() {
	for _, a := range []*gpu.Array[uint32]{sp.slices, sp.rotBits, sp.sums, sp.partials, sp.result, sp.shortInfo} {
		if a != nil {
			a.Free()
		}
	}
	for _, a := range []*gpu.Array[kernels.Mont4]{sp.halves, sp.etab, sp.lag, sp.weights, sp.qt[0], sp.qt[1], sp.wt[0], sp.wt[1]} {
		if a != nil {
			a.Free()
		}
	}
	sp.slices, sp.rotBits, sp.sums, sp.halves, sp.etab, sp.partials, sp.result, sp.lag, sp.weights = nil, nil, nil, nil, nil, nil, nil, nil, nil
	sp.shortInfo = nil
	sp.qt, sp.wt = [2]*gpu.Array[kernels.Mont4]{}, [2]*gpu.Array[kernels.Mont4]{}
	for c, q := range sp.qs {
		if q != nil {
			sp.commits[c].releaseQ(false)
		}
	}
	sp.qs = nil
	if sp.sc != nil {
		sp.sc.Close()
		sp.sc = nil
	}
}

// Release frees the prover's device buffers; later calls fail with ErrProverState.
func (sp *stackingProver) Release() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.released {
		return
	}
	sp.released = true
	sp.be.untrack(sp)
	sp.freeBuffers()
}

// live checks the prover and its commitments before a call.
func (sp *stackingProver) live() error {
	if sp.released {
		return ErrProverState
	}
	for _, c := range sp.commits {
		if err := c.live(); err != nil {
			return err
		}
	}
	return nil
}

// UnivariateRound returns s_0(Z) = Σ_x Σ_{c,m} q_{c,m}(Z; x)·W_{c,m}(Z; x) (2N − 1 coefficients)
// with the weights of batch, which it uploads into the slice descriptors first.
func (sp *stackingProver) UnivariateRound(batch *stark.StackingBatch) ([]field.Fp4, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	row, err := sp.encodeUnivariate(batch)
	if err != nil {
		return nil, err
	}
	l := sp.p.LSkip
	n := 1 << l
	width := kernels.StackedUniWidth(l)
	sums := make([]uint32, width+len(sp.shorts)*n)
	from := 0
	if row == 0 {
		from = width // no slice of log height ≥ l_skip: A = B = C = 0
	}
	if err := sp.result.Read(sums[from:], from); err != nil {
		return nil, err
	}
	abc := kernels.Fp4SliceOfMont(sums[:width])
	res := make([]field.Fp4, 2*n-1)
	idft := newSmallIDFT(l)
	for x, poly := range uniPolys(l, sp.r[0]) {
		polyMulAcc(res, idft.ext(abc[x*n:(x+1)*n]), poly)
	}
	for k, s := range sp.shorts {
		blk := make([]field.Fp, n)
		for j := range blk {
			blk[j] = kernels.CanonicalOf(kernels.Mont(sums[width+k*n+j]))
		}
		polyMulAcc(res, idft.base(blk), sp.shortPoly(s))
	}
	return res, nil
}

// uniPolys are the eq_D polynomials that A, B, C's inverse DFTs are multiplied by in round 0:
// eq_D(r_0, Z), eq_D(r_0·ω, Z), and eq_D(1, Z)·eq_D(r_0·ω, 1).
func uniPolys(l int, r0 field.Fp4) [3][]field.Fp4 {
	r0w := r0.MulBase(field.TwoAdicGenerator(l))
	polyC := stark.EqUniCoeffs(l, field.Fp4One)
	cScale := stark.EqUniAtOne(l, r0w)
	for i := range polyC {
		polyC[i] = polyC[i].Mul(cScale)
	}
	return [3][]field.Fp4{stark.EqUniCoeffs(l, r0), stark.EqUniCoeffs(l, r0w), polyC}
}

// shortPoly is a short slice's weight polynomial with the batch's weights (shortWeightPoly).
func (sp *stackingProver) shortPoly(s shortSlice) []field.Fp4 {
	a, bw := sp.batch.Weight(s.c, s.i)
	return shortWeightPoly(sp.p.LSkip, s.nn, sp.r[0], a, bw)
}

// uniConstants are ProveFirstRounds' functions of r_0: r_0, r_0·ω, eq_D(r_0·ω, 1), then the
// polynomials of A, B, C (uniPolys), N coefficients each.
func uniConstants(l int, r0 field.Fp4) []field.Fp4 {
	r0w := r0.MulBase(field.TwoAdicGenerator(l))
	out := []field.Fp4{r0, r0w, stark.EqUniAtOne(l, r0w)}
	for _, poly := range uniPolys(l, r0) {
		out = append(out, poly...)
	}
	return out
}

// encodeUnivariate checks the state and batch, uploads the rotation flags and encodes round 0's
// kernels: the weights, the weighed sums into sp.result (A, B, C; rows: their partial rows, 0
// when no slice has log height ≥ l_skip) and the short blocks gathered after them.
func (sp *stackingProver) encodeUnivariate(batch *stark.StackingBatch) (rows int, err error) {
	if err := sp.live(); err != nil {
		return 0, err
	}
	if sp.bound != 0 || sp.batch != nil {
		return 0, ErrProverState
	}
	layouts := make([]*stark.StackedLayout, len(sp.commits))
	for c, com := range sp.commits {
		layouts[c] = com.Layout()
	}
	if err := stark.CheckStackingBatch(batch, layouts); err != nil {
		return 0, err
	}
	// The weights on the device from λ: up go the rotation flags, a bit a slice.
	rot := make([]uint32, (sp.wRange.Count+31)/32)
	for _, w := range sp.weighted {
		if batch.NeedRot[w.c][w.i] {
			rot[w.at/32] |= 1 << (w.at % 32)
		}
	}
	if err := sp.rotBits.Write(0, rot); err != nil {
		return 0, err
	}
	sp.batch = batch
	l := sp.p.LSkip
	n := 1 << l
	dev := sp.be.dev
	width := kernels.StackedUniWidth(l)
	b := dev.Batch()
	if len(sp.weighted) > 0 {
		if err := kernels.EncodeStackedSliceWeights(b, dev, sp.slices, sp.wRange.Count, batch.Lambda, sp.rotBits); err != nil {
			return 0, err
		}
	}
	row := 0
	for _, r := range sp.uni {
		if r.Count == 0 {
			continue
		}
		r.Slices = sp.slices
		g, err := kernels.EncodeStackedUniWeigh(b, dev, sp.sums, r, sp.partials, row, l)
		if err != nil {
			return 0, err
		}
		row += g
	}
	if row > 0 {
		if err := kernels.EncodeSumRows(b, dev, sp.partials, sp.result, row, width); err != nil {
			return 0, err
		}
	}
	for _, g := range sp.gathers {
		b.Copy(sp.result.Buffer, 4*g.at, sp.qs[g.c].Buffer, 4*g.qStart, 4*g.count*n)
	}
	return row, b.Err()
}

// shortWeightPoly is cpuref's weight polynomial of a slice of log height l + nn < l (nn < 0):
// 2^(nn)·(a·eq_{D'}(r'; Z) + bw·eq_{D'}(r'·ω'; Z)) over the subgroup D' of order 2^(l+nn),
// r' = r_0^(2^(−nn)), repeated to N coefficients.
func shortWeightPoly(l, nn int, r0, a, bw field.Fp4) []field.Fp4 {
	n := 1 << l
	lp := l + nn
	np := 1 << lp
	sInv := stark.InvPow2(-nn)
	rp := stark.ExpPow2(r0, -nn)
	ca := stark.EqUniCoeffs(lp, rp)
	var cb []field.Fp4
	rot := !bw.IsZero()
	if rot {
		cb = stark.EqUniCoeffs(lp, rp.MulBase(field.TwoAdicGenerator(lp)))
	}
	w := make([]field.Fp4, n)
	for j := 0; j < np; j++ {
		v := a.Mul(ca[j])
		if rot {
			v = v.Add(bw.Mul(cb[j]))
		}
		v = v.MulBase(sInv)
		for k := 0; k < n; k += np {
			w[k+j] = v
		}
	}
	return w
}

// polyMulAcc adds a·b (coefficient form) to dst.
func polyMulAcc(dst, a, b []field.Fp4) {
	for i, x := range a {
		if x.IsZero() {
			continue
		}
		for j, y := range b {
			dst[i+j] = dst[i+j].Add(x.Mul(y))
		}
	}
}

// smallIDFT is the inverse DFT of length N = 2^l on the host (N ≤ 32: the quadratic formula
// coef_j = (1/N)·Σ_z ω^(−jz)·v_z).
type smallIDFT struct {
	n    int
	winv []field.Fp // ω^(−k), k < N
	ninv field.Fp
}

func newSmallIDFT(l int) smallIDFT {
	n := 1 << l
	return smallIDFT{n: n, winv: field.Powers(field.TwoAdicGenerator(l).Inverse(), n), ninv: field.Fp(uint32(n)).Inverse()}
}

func (d smallIDFT) ext(v []field.Fp4) []field.Fp4 {
	out := make([]field.Fp4, d.n)
	for j := range d.n {
		var acc field.Fp4
		for z, x := range v {
			acc = acc.Add(x.MulBase(d.winv[j*z%d.n]))
		}
		out[j] = acc.MulBase(d.ninv)
	}
	return out
}

func (d smallIDFT) base(v []field.Fp) []field.Fp4 {
	out := make([]field.Fp4, d.n)
	for j := range d.n {
		var acc field.Fp
		for z, x := range v {
			acc = acc.Add(x.Mul(d.winv[j*z%d.n]))
		}
		out[j] = field.Lift(acc.Mul(d.ninv))
	}
	return out
}

// BindUnivariate builds the tables q(u_0; x) and W(u_0; x) on the device (no sync).
func (sp *stackingProver) BindUnivariate(u0 field.Fp4) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.live(); err != nil {
		return err
	}
	if sp.bound != 0 || sp.batch == nil { // the weights come with UnivariateRound
		return ErrProverState
	}
	l := sp.p.LSkip
	r := sp.r
	omega := field.TwoAdicGenerator(l)
	r0w := r[0].MulBase(omega)
	a0 := stark.EqUni(l, u0, r[0])
	b0 := stark.EqUni(l, u0, r0w)
	c0 := stark.EqUniAtOne(l, u0).Mul(stark.EqUniAtOne(l, r0w))
	// cpuref adds a·a0·e[xl] + bw·(b0·e[xl] + c0·(e[xl−1] − e[xl])) = α·e[xl] + β·e[xl−1]: α, β
	// of the slices of log height ≥ l_skip on the device from their descriptors' a, bw
	// (kernels.EncodeStackedBindWeights; on the host, three Fp4 products for each of
	// keccakf-1024's 2,633 slices and their upload took ≈ 0.25 ms with the device idle), those
	// of the short slices here (uploaded first; the kernel leaves them).
	if len(sp.shorts) > 0 {
		weights := make([]kernels.Mont4, 2*len(sp.wInfo))
		for k, s := range sp.wInfo {
			if s.nn >= 0 {
				continue
			}
			a, bw := sp.batch.Weight(s.c, s.i)
			lp := l + s.nn
			rp := stark.ExpPow2(r[0], -s.nn)
			v := a.Mul(stark.EqUni(lp, u0, rp))
			if !bw.IsZero() {
				v = v.Add(bw.Mul(stark.EqUni(lp, u0, rp.MulBase(field.TwoAdicGenerator(lp)))))
			}
			weights[2*k] = kernels.Mont4Of(v.Mul(stark.InUni(l, s.nn, u0)))
		}
		if err := sp.weights.Write(0, weights); err != nil {
			return err
		}
	}
	// The Lagrange weights of u_0 (N), then a0, b0 − c0, c0.
	lag := append(kernels.LagrangeWeights(l, u0), a0, b0.Sub(c0), c0)
	if err := sp.lag.Write(0, kernels.Mont4Slice(lag)); err != nil {
		return err
	}
	return sp.encodeBind(sp.be.dev.Batch())
}

// encodeBind encodes BindUnivariate's kernels, which read sp.lag and the short slices' weights.
func (sp *stackingProver) encodeBind(b *gpu.Batch) error {
	l, ns := sp.p.LSkip, sp.p.NStack
	n := 1 << l
	dev := sp.be.dev
	nx := 1 << ns
	for c, com := range sp.commits {
		if err := kernels.EncodeStackedBindQ(b, dev, sp.qs[c], sp.lag, sp.qt[0], com.width*nx, l, sp.colOff[c]*nx); err != nil {
			return err
		}
	}
	wr := sp.wRange
	wr.Slices = sp.slices
	if err := kernels.EncodeStackedBindWeights(b, dev, sp.slices, wr.Count, sp.lag, n, sp.weights); err != nil {
		return err
	}
	if err := kernels.EncodeStackedBindW(b, dev, wr, sp.weights, sp.etab, sp.wt[0], l); err != nil {
		return err
	}
	sp.bound, sp.cur, sp.logRows, sp.pending = 1, 0, ns, nil
	return nil
}

// tables are the current q and W tables.
func (sp *stackingProver) tables(side, logRows int) kernels.ProductTables {
	return kernels.ProductTables{F: sp.qt[side], W: sp.wt[side], Cols: sp.cols, LogRows: logRows, Stride: 1 << logRows}
}

// Round returns s_j(1), s_j(2): one batch (the pending fold and the sums) and a 32-byte download.
func (sp *stackingProver) Round() (s1, s2 field.Fp4, err error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.live(); err != nil {
		return s1, s2, err
	}
	if sp.bound < 1 || sp.bound > sp.p.NStack {
		return s1, s2, ErrProverState
	}
	b := sp.be.dev.Batch()
	if sp.pending != nil {
		if err := sp.sc.EncodeFoldRound(b, sp.tables(sp.cur, sp.logRows), sp.tables(1-sp.cur, sp.logRows-1), *sp.pending); err != nil {
			return s1, s2, err
		}
		sp.cur, sp.logRows, sp.pending = 1-sp.cur, sp.logRows-1, nil
	} else if err := sp.sc.EncodeRound(b, sp.tables(sp.cur, sp.logRows)); err != nil {
		return s1, s2, err
	}
	return sp.sc.ReadRound()
}

var _ stark.StackingDeviceRounds = (*stackingProver)(nil)

// ProveRounds implements stark.StackingDeviceRounds: per round its sums (the pending fold and the
// sums in one pass, as Round) and its transcript step on the device (kernels.DeviceTranscript:
// the sums observed, the bound value sampled into the log), where the next round's fold reads the
// bound value; one download of the log at the end instead of a sync a round. The last bound value
// is left pending for Openings, as Bind leaves it.
func (sp *stackingProver) ProveRounds(tr *transcript.Transcript, n int) ([][2]field.Fp4, []field.Fp4, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.live(); err != nil {
		return nil, nil, err
	}
	if sp.bound != 1 || sp.pending != nil || n < 1 || n != sp.p.NStack || sp.logRows != n {
		return nil, nil, ErrProverState
	}
	tt, err := sp.be.hash.NewDeviceTranscript(3 * n)
	if err != nil {
		return nil, nil, err
	}
	defer tt.Close()
	if err := tt.SetState(tr.State()); err != nil {
		return nil, nil, err
	}
	if err := sp.encodeRounds(sp.be.dev.Batch(), tt, 0, n); err != nil {
		return nil, nil, err
	}
	log, err := tt.ReadLog(3 * n)
	if err != nil {
		return nil, nil, err
	}
	polys, u := sp.roundsOf(log, n)
	return polys, u, nil
}

// encodeRounds encodes rounds 1 .. n with their transcript steps on tt: round j's sums at
// Log[base + 3(j−1)], Log[base + 3(j−1) + 1], its bound value at Log[base + 3(j−1) + 2], where
// the next round's fold reads it; then q's last fold at u_n (W is not needed any more), so that
// Openings needs no sync of its own.
func (sp *stackingProver) encodeRounds(b *gpu.Batch, tt *kernels.DeviceTranscript, base, n int) error {
	var err error
	for j := 1; j <= n; j++ {
		if j == 1 {
			err = sp.sc.EncodeRound(b, sp.tables(sp.cur, sp.logRows))
		} else {
			err = sp.sc.EncodeFoldRoundLogged(b, sp.tables(sp.cur, sp.logRows), sp.tables(1-sp.cur, sp.logRows-1), tt.Log, base+3*(j-2)+2)
			sp.cur, sp.logRows = 1-sp.cur, sp.logRows-1
		}
		if err != nil {
			return err
		}
		if err := tt.EncodeSumcheckRound(b, sp.sc, base+3*(j-1)); err != nil {
			return err
		}
	}
	lr := sp.logRows - 1
	if err := kernels.EncodeFoldLogged(b, sp.be.dev, sp.qt[sp.cur], 1<<sp.logRows, sp.qt[1-sp.cur], 1<<lr, sp.cols, lr, tt.Log, base+3*(n-1)+2); err != nil {
		return err
	}
	sp.qFolded = true
	return nil
}

// roundsOf reads the n rounds' sums and bound values from their log entries (encodeRounds) and
// leaves the last bound value pending for Openings, as Bind leaves it.
func (sp *stackingProver) roundsOf(log []field.Fp4, n int) ([][2]field.Fp4, []field.Fp4) {
	polys := make([][2]field.Fp4, n)
	u := make([]field.Fp4, n)
	for j := range n {
		polys[j] = [2]field.Fp4{log[3*j], log[3*j+1]}
		u[j] = log[3*j+2]
	}
	last := u[n-1]
	sp.pending = &last
	sp.bound = n + 1
	return polys, u
}

var _ stark.StackingDeviceFirstRound = (*stackingProver)(nil)

// ProveFirstRounds implements stark.StackingDeviceFirstRound: round 0's kernels
// (encodeUnivariate), its coefficients into the log of a device transcript set to tr's state
// (kernels.EncodeStackedUniCoeffs), observed and u_0 sampled (tr_observe_sample), the bind's
// scalars of u_0 (kernels.EncodeStackedUniBind), the bind (encodeBind) and the rounds
// (encodeRounds); one sync. Log: the 2N − 1 coefficients, u_0, then the rounds' 3n entries.
func (sp *stackingProver) ProveFirstRounds(batch *stark.StackingBatch, tr *transcript.Transcript, n int) ([]field.Fp4, field.Fp4, [][2]field.Fp4, []field.Fp4, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var u0 field.Fp4
	if err := sp.live(); err != nil {
		return nil, u0, nil, nil, err
	}
	if sp.bound != 0 || sp.batch != nil || n < 1 || n != sp.p.NStack || sp.logRows != 0 {
		return nil, u0, nil, nil, ErrProverState
	}
	l := sp.p.LSkip
	nn := 1 << l
	ncoef := 2*nn - 1
	rows, err := sp.encodeUnivariate(batch)
	if err != nil {
		return nil, u0, nil, nil, err
	}
	// The short slices' weights and polynomials need λ: up they go (only where there are any;
	// the upload waits for round 0's few small kernels).
	scst, sinfo := sp.halves, sp.rotBits // not read without short slices
	shorts := len(sp.shorts)
	if shorts > 0 {
		v := make([]field.Fp4, 4*shorts, 4*shorts+shorts*nn)
		for k, s := range sp.shorts {
			a, bw := batch.Weight(s.c, s.i)
			lp := l + s.nn
			rp := stark.ExpPow2(sp.r[0], -s.nn)
			v[4*k], v[4*k+1], v[4*k+2], v[4*k+3] = a, bw, rp, rp.MulBase(field.TwoAdicGenerator(lp))
			v = append(v, shortWeightPoly(l, s.nn, sp.r[0], a, bw)...)
		}
		var err error
		if scst, err = gpu.UploadArray(sp.be.dev, "stacking short slices' weights", kernels.Mont4Slice(v)); err != nil {
			return nil, u0, nil, nil, err
		}
		defer scst.Free()
		sinfo = sp.shortInfo
	}
	logLen := ncoef + 1 + 3*n
	tt, err := sp.be.hash.NewDeviceTranscript(logLen)
	if err != nil {
		return nil, u0, nil, nil, err
	}
	defer tt.Close()
	dev := sp.be.dev
	b := dev.Batch()
	st, ai, si := tr.State()
	if err := tt.EncodeSetState(b, st, ai, si); err != nil {
		return nil, u0, nil, nil, err
	}
	uc := kernels.StackedUniCoeffs{Result: sp.result, Polys: sp.halves, PolyOff: sp.uniOff + 3, SPolys: scst, SPolyOff: 4 * shorts,
		ABC: rows > 0, Shorts: shorts, ShortOff: kernels.StackedUniWidth(l)}
	if err := kernels.EncodeStackedUniCoeffs(b, dev, uc, l, tt.Log, 0); err != nil {
		return nil, u0, nil, nil, err
	}
	if err := tt.EncodeObserveSample(b, tt.Log.Buffer, 0, 4*ncoef, true, ncoef); err != nil {
		return nil, u0, nil, nil, err
	}
	ub := kernels.StackedUniBind{Cst: sp.halves, CstOff: sp.uniOff, SCst: scst, SInfo: sinfo, Shorts: shorts}
	if err := kernels.EncodeStackedUniBind(b, dev, ub, l, tt.Log, ncoef, sp.lag, sp.weights); err != nil {
		return nil, u0, nil, nil, err
	}
	if err := sp.encodeBind(b); err != nil {
		return nil, u0, nil, nil, err
	}
	if err := sp.encodeRounds(b, tt, ncoef+1, n); err != nil {
		return nil, u0, nil, nil, err
	}
	log, err := tt.ReadLog(logLen) // the one sync
	if err != nil {
		return nil, u0, nil, nil, err
	}
	polys, u := sp.roundsOf(log[ncoef+1:], n)
	return log[:ncoef], log[ncoef], polys, u, nil
}

// Bind fixes the round's variable to u: recorded, folded by the next Round or Openings (a second
// Bind before that encodes the first fold on its own; still no sync).
func (sp *stackingProver) Bind(u field.Fp4) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.live(); err != nil {
		return err
	}
	if sp.bound < 1 || sp.bound > sp.p.NStack {
		return ErrProverState
	}
	if sp.pending != nil {
		if err := sp.foldPending(true); err != nil {
			return err
		}
	}
	sp.pending = &u
	sp.bound++
	return nil
}

// foldPending encodes the pending fold of q (and W when both) into the other side.
func (sp *stackingProver) foldPending(both bool) error {
	dev := sp.be.dev
	b := dev.Batch()
	lr := sp.logRows - 1
	if err := kernels.EncodeFold(b, dev, sp.qt[sp.cur], 1<<sp.logRows, sp.qt[1-sp.cur], 1<<lr, sp.cols, lr, *sp.pending); err != nil {
		return err
	}
	if both {
		if err := kernels.EncodeFold(b, dev, sp.wt[sp.cur], 1<<sp.logRows, sp.wt[1-sp.cur], 1<<lr, sp.cols, lr, *sp.pending); err != nil {
			return err
		}
		sp.cur, sp.logRows, sp.pending = 1-sp.cur, lr, nil
	}
	return nil
}

// Openings returns q_{c,m}(u): the last fold of q (one row per column) and one download.
func (sp *stackingProver) Openings() ([][]field.Fp4, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.live(); err != nil {
		return nil, err
	}
	if sp.bound != sp.p.NStack+1 {
		return nil, ErrProverState
	}
	side := sp.cur
	if sp.qFolded {
		side = 1 - sp.cur
	} else if sp.pending != nil {
		// The fold of q alone (W is not needed any more) into the other side, state unchanged:
		// calling Openings again repeats it.
		if err := sp.foldPending(false); err != nil {
			return nil, err
		}
		side = 1 - sp.cur
	} else if sp.logRows != 0 {
		return nil, ErrProverState
	}
	v := make([]kernels.Mont4, sp.cols)
	if err := sp.qt[side].Read(v, 0); err != nil {
		return nil, err
	}
	all := kernels.Fp4SliceOf(v)
	out := make([][]field.Fp4, len(sp.commits))
	for c, com := range sp.commits {
		out[c] = all[sp.colOff[c] : sp.colOff[c]+com.width]
	}
	return out, nil
}
