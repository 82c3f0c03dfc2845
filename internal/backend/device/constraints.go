package device

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// constraintProver is the batch constraint sumcheck (spec B §4) on the device, computing exactly
// what cpuref's constraint prover computes (internal/kernels/zerocheck.go has the math):
//
//   - UnivariateRound: per trace, the coefficient pre-pass and the round-0 evaluation at the M
//     points of every block, reduced to 3·M Fp4 sums (kernels.Zerocheck.EncodeUniRound); one
//     download for all traces; the host takes the M-point IDFTs and checks the degree bound.
//   - BindUnivariate: every stored slot of every trace becomes an Fp4 table of 2^ñ rows (the N
//     weights eq_D(r0, ω^j) computed on the host and uploaded). No sync.
//   - Round: the folds of the previous Bind (the sumcheck family's EncodeFold, ping-pong tables),
//     then the evaluation at X = 1..d+1 of every trace with ñ_T ≥ j; one download.
//   - Bind: records r (the next Round or Openings folds). No sync, no dispatch.
//   - Openings: the trace's pending folds down to one row, one download.
//
// The coordinates of ξ the eq tables e(x) of round 0 and e'(y) of every round need go up at
// construction (a queued upload: ξ is known then); UnivariateRound makes the tables' halves from
// them and expands them on the device behind its first kernels. Every buffer is allocated by
// NewConstraintProver and freed by Release, except what depends only on the proving key: the
// traces' maps, constants and piece bindings, and the round-0 domain, which the backend keeps for
// the next proof of the key (zcCache) and frees at Close.
type constraintProver struct {
	be      *Backend
	l, n, d int
	logM    int
	shifted bool // round 0 on the shifted domain: the Zc quotient by Z^N − 1 (kernels.ZcRound0Domain)

	dom    *kernels.ZcDomain // the backend's (zcDomain): not freed with the prover
	zc     *kernels.Zerocheck
	traces []*zcTrace
	owned  []*kernels.Program // programs uploaded for this prover only (not from a key)

	// xi is ξ; uni the round-0 polynomials (UnivariateRound), r0 their point (BindUnivariate),
	// last the previous Round's values at X = 0..d+1: what Round needs for the value at X = 0,
	// which the device does not compute (roundClaims).
	xi   []field.Fp4
	uni  []stark.ConstraintTriple
	r0   field.Fp4
	last []stark.ConstraintTriple

	eq, halves         *gpu.Array[kernels.Mont4]
	xiDev              *gpu.Array[kernels.Mont4] // ξ_{l..l+max ñ−1}, from which the halves are made
	eqSuffixes         []eqSuffixes              // the eq tables' expansion, encoded by UnivariateRound (nil after)
	uniOut, roundOut   *gpu.Array[uint32]
	bindW              *gpu.Array[uint32]
	rs                 []field.Fp4 // the r of every Bind so far
	binds              int         // −1 before BindUnivariate, then the Binds so far
	mu                 sync.Mutex
	released           bool
	uniWidth, rndWidth int
	ch                 *stark.ConstraintChallenges // the challenges of the kept traces' weights (setWeights)

	// The rounds with the transcript on the device (ProveRounds): made by its first call. After
	// it the claims live on the device, and Round (which needs them on the host) is refused.
	trRounds  *kernels.ZcTrRounds
	trLog     *kernels.DeviceTranscript
	devClaims bool
}

// zcTrace is one trace of a constraintProver.
type zcTrace struct {
	pg    *constraints.Program
	zt    *kernels.ZcTrace
	key   *zcTraceKey // non-nil: zt goes back to the backend's cache at Release (a key's program)
	reuse *zcReuse    // non-nil: zt was kept from an earlier proof and still needs this proof's weights
	nLift int
	eqOff []int // per round j = 0..ñ: Fp4 index of eq(ξ_{l+j..l+ñ−1}, ·) in the eq buffer
	tabs  [2]*gpu.Array[kernels.Mont4]
	cur   int // ping-pong side holding the current tables
	log   int // log2 of their rows (the stride is 2^log)
	folds int // Binds folded into the tables
}

var _ stark.ConstraintProver = (*constraintProver)(nil)

// NewConstraintProver implements stark.ConstraintBackend on the device. It validates the inputs
// as cpuref does, uploads each trace's maps and weights (the programs once per backend, see
// program; the maps once per key, see zcCache: a later proof of the key uploads the eq tables'
// halves here and its weights in UnivariateRound) and allocates the tables and scratch. No
// dispatch.
func (b *Backend) NewConstraintProver(p params.SystemParams, traces []*stark.AirInput, ch *stark.ConstraintChallenges) (stark.ConstraintProver, error) {
	if ch == nil || len(ch.Eq3b) != len(traces) {
		return nil, fmt.Errorf("%w: challenges for %d traces expected", ErrProverState, len(traces))
	}
	if (ch.Programs != nil && len(ch.Programs) != len(traces)) || (ch.Weights != nil && len(ch.Weights) != len(traces)) {
		return nil, fmt.Errorf("%w: programs or weights for %d traces expected", ErrProverState, len(traces))
	}
	l, d := p.LSkip, p.MaxConstraintDegree
	if l < 0 || l > kernels.ZcMaxLogN || d < 1 || d > 64 {
		return nil, fmt.Errorf("%w: l_skip %d (at most %d on the device), max constraint degree %d", stark.ErrBatchConstraintInput, l, kernels.ZcMaxLogN, d)
	}
	n := 1 << l
	pgs := make([]*constraints.Program, len(traces))
	interactions := false
	for t, in := range traces {
		pg, err := programOf(t, in, ch)
		if err != nil {
			return nil, err
		}
		pgs[t] = pg
		interactions = interactions || len(pg.Interactions) > 0
	}
	logM, shifted := kernels.ZcRound0Domain(l, d, interactions)
	cp := &constraintProver{be: b, l: l, n: n, d: d, logM: logM, shifted: shifted, binds: -1,
		xi: append([]field.Fp4(nil), ch.Xi...), ch: ch}
	fail := func(err error) (stark.ConstraintProver, error) {
		cp.freeBuffers()
		return nil, err
	}
	var err error
	if cp.dom, err = b.zcDomain(l, logM, shifted); err != nil {
		return fail(err)
	}
	var zts []*kernels.ZcTrace
	for t, in := range traces {
		zt, err := cp.newTrace(t, in, pgs[t], ch)
		if err != nil {
			return fail(err)
		}
		zts = append(zts, zt.zt)
	}
	// The large buffers first: the device zeroes round 0's (new buffers are zeroed in queue order)
	// while the host goes on; the upload below does not wait for that zeroing (a queued upload).
	// The rounds evaluate X = 1..d on the device (points d); Round derives X = 0 and d+1 (roundClaims).
	if cp.zc, err = kernels.NewZerocheck(b.dev, cp.dom, d, zts, b.zcOpts); err != nil {
		return fail(err)
	}
	cp.uniWidth, cp.rndWidth = cp.zc.UniWidth(), cp.zc.RoundWidth()
	// The rounds' tables, not zeroed: BindUnivariate writes every table in full (each column's
	// and rotation's, the selectors'), each fold the half it reads next. (Allocated after round
	// 0's launches instead, they made the next proof's commit 0.2–0.4 ms slower on an H200: the
	// stream-ordered pool's later allocations.)
	for _, tr := range cp.traces {
		x := tr.zt.Blocks()
		if tr.tabs[0], err = gpu.AllocArrayUninit[kernels.Mont4](b.dev, "constraints tables", max(tr.zt.NumTables()*x, 1)); err != nil {
			return fail(err)
		}
		if x > 1 {
			if tr.tabs[1], err = gpu.AllocArrayUninit[kernels.Mont4](b.dev, "constraints tables (folded)", max(tr.zt.NumTables()*x/2, 1)); err != nil {
				return fail(err)
			}
		}
	}
	// eq(ξ_{l+j..l+ñ−1}, ·) for every lift ñ and round j ≤ ñ, expanded from halves: for each
	// lift the tables of every suffix of ξ_{l..l+ñ−1}, one dispatch (kernels.EncodeEqSuffixes).
	halvesLen, maxLift := 0, 0
	eqLen := 0
	eqAt := map[[2]int]int{}
	lifts := map[int]bool{}
	for _, tr := range cp.traces {
		lifts[tr.nLift] = true
	}
	var nl []int
	for k := range lifts {
		nl = append(nl, k)
	}
	sort.Ints(nl)
	for _, nLift := range nl {
		cp.eqSuffixes = append(cp.eqSuffixes, eqSuffixes{halvesOff: halvesLen, outOff: eqLen, n: nLift})
		halvesLen += kernels.EqSuffixHalvesLen(nLift)
		maxLift = max(maxLift, nLift)
		for j := 0; j <= nLift; j++ {
			eqAt[[2]int{nLift, j}] = eqLen + 2<<nLift - 2<<(nLift-j)
		}
		eqLen += 2<<nLift - 1
	}
	for _, tr := range cp.traces {
		for j := 0; j <= tr.nLift; j++ {
			tr.eqOff = append(tr.eqOff, eqAt[[2]int{tr.nLift, j}])
		}
	}
	// The small buffers (kept from a released prover: zcCache), then the uploads.
	small := func(name string, n int) *gpu.Array[uint32] {
		if err != nil {
			return nil
		}
		var a *gpu.Array[uint32]
		a, err = takeBuf(b, &b.zc.words, "constraints "+name, max(n, 1))
		return a
	}
	small4 := func(name string, n int) *gpu.Array[kernels.Mont4] {
		if err != nil {
			return nil
		}
		var a *gpu.Array[kernels.Mont4]
		a, err = takeBuf(b, &b.zc.fp4s, "constraints "+name, max(n, 1))
		return a
	}
	cp.eq = small4("eq tables", eqLen)
	cp.halves = small4("eq halves", halvesLen)
	cp.xiDev = small4("eq point", maxLift)
	cp.uniOut = small("round 0 sums", len(traces)*cp.uniWidth)
	cp.roundOut = small("round sums", len(traces)*cp.rndWidth)
	cp.bindW = small("bind weights", 4*n)
	if err != nil {
		return fail(err)
	}
	// Nothing since the last sync has touched these kept buffers: a queued upload.
	if err := cp.xiDev.WriteQueued(0, kernels.Mont4Slice(ch.Xi[l:l+maxLift])); err != nil {
		return fail(err)
	}
	// Traces kept from an earlier proof: this proof's parts and public values; their weights
	// wait for UnivariateRound (setWeights).
	for _, tr := range cp.traces {
		if tr.reuse == nil {
			continue
		}
		ru := tr.reuse
		if err := tr.zt.Reuse(ru.parts, ru.public); err != nil {
			// A trace whose Reuse failed may hold another proof's constants: not kept.
			tr.key = nil
			return fail(fmt.Errorf("%w: trace %d: %w", stark.ErrBatchConstraintInput, ru.t, err))
		}
	}
	if err := b.track(cp); err != nil {
		return fail(err)
	}
	return cp, nil
}

// eqSuffixes is one lift's eq tables in the eq buffer (kernels.EncodeEqSuffixes).
type eqSuffixes struct{ halvesOff, outOff, n int }

// encodeEqTables encodes the eq tables' halves from ξ and their expansion, once (the first call).
func (cp *constraintProver) encodeEqTables(b *gpu.Batch) error {
	for _, e := range cp.eqSuffixes {
		if err := kernels.EncodeEqSuffixHalves(b, cp.be.dev, cp.xiDev, e.n, cp.halves, e.halvesOff); err != nil {
			return err
		}
		if err := kernels.EncodeEqSuffixes(b, cp.be.dev, cp.halves, e.halvesOff, cp.eq, e.outOff, e.n); err != nil {
			return err
		}
	}
	cp.eqSuffixes = nil
	return nil
}

// setWeights encodes the weights of the traces kept from an earlier proof from this proof's
// challenges on the device (kernels.ZcTrace.EncodeWeights): no host work for them before round 0.
func (cp *constraintProver) setWeights(b *gpu.Batch) error {
	for _, tr := range cp.traces {
		ru := tr.reuse
		if ru == nil {
			continue
		}
		tr.reuse = nil
		ch := cp.ch
		dc, err := tr.pg.DenConst(ch.Beta, ch.Eq3b[ru.t])
		if err == nil {
			err = tr.zt.EncodeWeights(b, ch.Lambda, ch.Beta, ch.Eq3b[ru.t], dc)
		}
		if err != nil {
			// A trace without this proof's weights is not kept.
			tr.key = nil
			return fmt.Errorf("%w: trace %d: %w", stark.ErrBatchConstraintInput, ru.t, err)
		}
	}
	return nil
}

// zcReuse is what a kept trace needs of this proof (kernels.ZcTrace.Reuse, then its weights:
// setWeights).
type zcReuse struct {
	t      int
	parts  []kernels.ZcPart
	public []field.Fp
}

// weightsOf returns trace t's weights (program pg): the stage's, else computed here.
func weightsOf(t int, pg *constraints.Program, ch *stark.ConstraintChallenges) (*constraints.Weights, error) {
	if ch.Weights != nil && ch.Weights[t] != nil {
		return ch.Weights[t], nil
	}
	return pg.Weights(ch.Lambda, ch.Beta, ch.Eq3b[t])
}

// programOf is trace t's constraint program: the stage's, else its key's, else compiled from its
// verifying key.
func programOf(t int, in *stark.AirInput, ch *stark.ConstraintChallenges) (*constraints.Program, error) {
	if in == nil || in.Common == nil {
		return nil, fmt.Errorf("%w: trace %d missing", stark.ErrBatchConstraintInput, t)
	}
	var pg *constraints.Program
	if ch.Programs != nil {
		pg = ch.Programs[t]
	}
	if pg == nil {
		pg = in.Program
	}
	if pg == nil {
		return constraints.Compile(in.VK, constraints.All)
	}
	return pg, nil
}

// newTrace validates trace t (as cpuref does) and uploads its maps and weights; a trace kept from
// an earlier proof of the key gets its weights later (reuse).
func (cp *constraintProver) newTrace(t int, in *stark.AirInput, pg *constraints.Program, ch *stark.ConstraintChallenges) (*zcTrace, error) {
	h := in.Common.Height()
	logH, ok := field.Log2(h)
	if !ok || h < 1 {
		return nil, fmt.Errorf("%w: trace %d height %d", stark.ErrBatchConstraintInput, t, h)
	}
	nLift := max(logH-cp.l, 0)
	if len(ch.Xi) < cp.l+nLift {
		return nil, fmt.Errorf("%w: ξ too short", ErrProverState)
	}
	handles := []stark.Trace{in.Common}
	if in.Preprocessed != nil {
		handles = append(handles, in.Preprocessed)
	}
	handles = append(handles, in.Cached...)
	if len(handles) != len(pg.PartWidths) {
		return nil, fmt.Errorf("%w: trace %d parts do not match its key", ErrProverState, t)
	}
	dts, err := cp.be.traces(handles)
	if err != nil {
		return nil, err
	}
	parts := make([]kernels.ZcPart, len(dts))
	for q, dt := range dts {
		if dt.Width() != pg.PartWidths[q] || dt.Height() != h {
			return nil, fmt.Errorf("%w: trace %d part %d shape", ErrProverState, t, q)
		}
		v, err := dt.values()
		if err != nil {
			return nil, err
		}
		parts[q] = kernels.ZcPart{Values: v, Width: dt.Width()}
	}
	var key *zcTraceKey
	if pg == in.Program {
		// A key's program: the trace's maps, constants and piece bindings are the same for every
		// proof of this key and height; they stay on the device from one proof to the next.
		key = &zcTraceKey{pg: pg, vk: in.VK, logH: logH, l: cp.l, logM: cp.logM, shifted: cp.shifted}
		if zt := cp.be.takeZcTrace(*key); zt != nil {
			tr := &zcTrace{pg: pg, zt: zt, key: key, reuse: &zcReuse{t: t, parts: parts, public: in.Public}, nLift: nLift, log: nLift}
			cp.traces = append(cp.traces, tr)
			return tr, nil
		}
	}
	w, err := weightsOf(t, pg, ch)
	if err != nil {
		return nil, err
	}
	var prog *kernels.Program
	if pg == in.Program {
		if prog, err = cp.be.program(pg); err == nil && cp.be.generatesWhole(pg) {
			_, err = cp.be.buildWholes([]wholeBuild{{in.Name, pg, prog}}, nil)
		}
	} else {
		if prog, err = kernels.UploadProgram(cp.be.dev, fmt.Sprint("trace ", t), pg); err == nil {
			cp.owned = append(cp.owned, prog)
		}
	}
	if err != nil {
		return nil, err
	}
	zt, err := kernels.NewZcTrace(cp.be.dev, cp.dom, pg, prog, logH, parts, in.Public, w.Out, w.DenConst)
	if err != nil {
		return nil, fmt.Errorf("%w: trace %d: %w", stark.ErrBatchConstraintInput, t, err)
	}
	if pg == in.Program && cp.be.usePieces(pg) {
		// GPUs run a long program in pieces: round 0 in those its generated code is made from,
		// the rounds in finer ones.
		pp, err := cp.be.pieces(in.VK, constraints.All, constraints.DevicePieces)
		if err == nil && cp.be.generates() {
			_, _, err = cp.be.buildGenerated(in.Name, pp, nil)
		}
		if err == nil {
			err = zt.UsePieces(cp.be.dev, pp, in.Public)
		}
		if err == nil {
			if pp, err = cp.be.pieces(in.VK, constraints.All, constraints.DeviceRoundPieces); err == nil {
				err = zt.UseRoundPieces(cp.be.dev, pp, in.Public)
			}
		}
		if err != nil {
			zt.Free()
			return nil, err
		}
	}
	tr := &zcTrace{pg: pg, zt: zt, key: key, nLift: nLift, log: nLift}
	cp.traces = append(cp.traces, tr)
	return tr, nil
}

// free is Backend.Close's release of a live prover.
func (cp *constraintProver) free() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.released = true
	cp.freeBuffers()
}

// freeBuffers releases every device buffer (idempotent).
func (cp *constraintProver) freeBuffers() {
	for _, a := range []*gpu.Array[kernels.Mont4]{cp.eq, cp.halves, cp.xiDev} {
		if a != nil {
			putBuf(cp.be, &cp.be.zc.fp4s, a)
		}
	}
	for _, a := range []*gpu.Array[uint32]{cp.uniOut, cp.roundOut, cp.bindW} {
		if a != nil {
			putBuf(cp.be, &cp.be.zc.words, a)
		}
	}
	cp.eq, cp.halves, cp.xiDev, cp.uniOut, cp.roundOut, cp.bindW = nil, nil, nil, nil, nil, nil
	if cp.trRounds != nil {
		cp.trRounds.Close()
		cp.trLog.Close()
		cp.trRounds, cp.trLog = nil, nil
	}
	for _, tr := range cp.traces {
		for i, a := range tr.tabs {
			if a != nil {
				a.Free()
				tr.tabs[i] = nil
			}
		}
		if tr.key != nil {
			cp.be.putZcTrace(*tr.key, tr.zt)
		} else {
			tr.zt.Free()
		}
	}
	cp.traces = nil
	for _, pr := range cp.owned {
		pr.Free()
	}
	cp.owned = nil
	if cp.zc != nil {
		cp.zc.Close()
		cp.zc = nil
	}
	cp.dom = nil
}

// Release frees the prover's device buffers; later calls fail with ErrProverState.
func (cp *constraintProver) Release() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released {
		return
	}
	cp.released = true
	cp.be.untrack(cp)
	cp.freeBuffers()
}

// UnivariateRound implements stark.ConstraintProver (one sync).
func (cp *constraintProver) UnivariateRound() ([]stark.ConstraintTriple, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released || cp.binds != -1 {
		return nil, ErrProverState
	}
	dev := cp.be.dev
	b := dev.Batch()
	// The weights of reused traces are made and the eq tables expanded behind the first trace's
	// first round-0 kernels (the coefficient pass and slot values, which read neither), so that
	// the device starts on those while the host encodes them.
	expand := func(b *gpu.Batch) error {
		if err := cp.setWeights(b); err != nil {
			return err
		}
		return cp.encodeEqTables(b)
	}
	for t, tr := range cp.traces {
		if err := cp.zc.EncodeUniRoundThen(b, tr.zt, cp.eq, tr.eqOff[0], cp.uniOut, t*cp.uniWidth, expand); err != nil {
			return nil, err
		}
		expand = nil
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	words := make([]uint32, len(cp.traces)*cp.uniWidth)
	if err := cp.uniOut.Read(words, 0); err != nil {
		return nil, err
	}
	m := 1 << cp.logM
	plen := cp.d*(cp.n-1) + 1
	out := make([]stark.ConstraintTriple, len(cp.traces))
	for t := range cp.traces {
		var polys [3][]field.Fp4
		for k := range polys {
			a := make([]field.Fp4, m)
			for q := 0; q < m; q++ {
				a[cp.dom.PointOf(q)] = kernels.Fp4OfMont(words[t*cp.uniWidth+12*q+4*k:])
			}
			if cp.shifted {
				p, err := cp.zcFromQuotient(t, k, a, plen)
				if err != nil {
					return nil, err
				}
				polys[k] = p
				continue
			}
			idftFp4(a, cp.logM)
			for _, c := range a[plen:] {
				if !c.IsZero() {
					return nil, fmt.Errorf("%w: trace %d round-0 polynomial %d exceeds degree d(N−1)", stark.ErrBatchConstraintInput, t, k)
				}
			}
			polys[k] = a[:plen]
		}
		out[t] = stark.ConstraintTriple{Zc: polys[0], Num: polys[1], Den: polys[2]}
	}
	cp.uni = out
	return out, nil
}

// zcFromQuotient returns the plen coefficients of round-0 polynomial k of trace t from its values
// a[i] at the shifted domain's points z_i = σ·ω_M^i (kernels.ZcRound0Domain). Zc = (Z^N − 1)·Q:
// Q(z_i) = a[i]/(z_i^N − 1) (z_i^N ≠ 1), Q's coefficients by the M-point inverse DFT of those
// values (σ^k·Q_k) untwisted, of degree ≤ d(N−1) − N, then Zc_j = Q_{j−N} − Q_j. Num and Den are
// zero (no trace has interactions). A Q of higher degree means Zc does not vanish on the N-th
// roots: some row of the trace violates its constraints (a trace proved with --no-check).
func (cp *constraintProver) zcFromQuotient(t, k int, a []field.Fp4, plen int) ([]field.Fp4, error) {
	n := cp.n
	if k != 0 {
		for _, v := range a {
			if !v.IsZero() {
				return nil, fmt.Errorf("%w: trace %d round-0 polynomial %d is not zero without interactions", stark.ErrBatchConstraintInput, t, k)
			}
		}
		return make([]field.Fp4, plen), nil
	}
	den := make([]field.Fp, len(a))
	for i := range a {
		den[i] = cp.dom.Point(i).Exp(uint64(n)).Sub(field.One)
	}
	field.BatchInverse(den, den)
	for i := range a {
		a[i] = a[i].MulBase(den[i])
	}
	idftFp4(a, cp.logM)
	inv := cp.dom.Shift.Inverse()
	s := field.One
	for i := range a {
		a[i] = a[i].MulBase(s)
		s = s.Mul(inv)
	}
	qlen := max(plen-n, 0)
	for _, c := range a[qlen:] {
		if !c.IsZero() {
			return nil, fmt.Errorf("%w: trace %d does not satisfy its AIR's constraints (round 0's polynomial does not vanish on the %d-th roots of unity); check the trace without --no-check to find the row", stark.ErrBatchConstraintInput, t, n)
		}
	}
	zc := make([]field.Fp4, plen)
	for j := range zc {
		if j >= n && j-n < qlen {
			zc[j] = a[j-n]
		}
		if j < qlen {
			zc[j] = zc[j].Sub(a[j])
		}
	}
	return zc, nil
}

// idftFp4 is the inverse DFT of 2^logM extension values (coefficient order out), in place.
func idftFp4(a []field.Fp4, logM int) {
	m := len(a)
	for i := 0; i < m; i++ {
		if r := int(bits.Reverse(uint(i)) >> (bits.UintSize - logM)); logM > 0 && r > i {
			a[i], a[r] = a[r], a[i]
		}
	}
	winv := field.TwoAdicGenerator(logM).Inverse()
	for ln := 2; ln <= m; ln <<= 1 {
		wl := winv.Exp(uint64(m / ln))
		for s := 0; s < m; s += ln {
			w := field.One
			for k := 0; k < ln/2; k++ {
				x, y := a[s+k], a[s+k+ln/2].MulBase(w)
				a[s+k], a[s+k+ln/2] = x.Add(y), x.Sub(y)
				w = w.Mul(wl)
			}
		}
	}
	inv := field.Fp(uint32(m)).Inverse()
	for i := range a {
		a[i] = a[i].MulBase(inv)
	}
}

// BindUnivariate implements stark.ConstraintProver: t(r0, x) = Σ_j eq_D(r0, ω^j)·t(ω^j, x) for
// every stored slot (no sync).
func (cp *constraintProver) BindUnivariate(r0 field.Fp4) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released || cp.binds != -1 {
		return ErrProverState
	}
	cp.r0 = r0
	w := make([]field.Fp4, cp.n)
	omega := field.TwoAdicGenerator(cp.l)
	pw := field.One
	for j := range w {
		w[j] = stark.EqUni(cp.l, r0, field.Lift(pw))
		pw = pw.Mul(omega)
	}
	// Nothing since UnivariateRound's sync touches bindW: a queued upload.
	if err := cp.bindW.WriteQueued(0, kernels.ZcBindWeights(w)); err != nil {
		return err
	}
	b := cp.be.dev.Batch()
	// UnivariateRound did not run: the rounds still read the weights and the eq tables.
	if err := cp.setWeights(b); err != nil {
		return err
	}
	if err := cp.encodeEqTables(b); err != nil {
		return err
	}
	for _, tr := range cp.traces {
		first, last, sum := kernels.ZcSelectorBind(cp.l, tr.zt.LogHeight, w)
		if err := cp.zc.EncodeBindUni(b, tr.zt, cp.bindW, first, last, sum, tr.tabs[0], tr.zt.Blocks()); err != nil {
			return err
		}
	}
	cp.binds = 0
	return b.Err()
}

// fold encodes the Binds not yet folded into tr's tables, at most up to its ñ.
func (cp *constraintProver) fold(b *gpu.Batch, tr *zcTrace) error {
	for tr.folds < min(cp.binds, tr.nLift) {
		src, dst := tr.tabs[tr.cur], tr.tabs[1-tr.cur]
		if err := kernels.EncodeFold(b, cp.be.dev, src, 1<<tr.log, dst, 1<<(tr.log-1), tr.zt.NumTables(), tr.log-1, cp.rs[tr.folds]); err != nil {
			return err
		}
		tr.cur, tr.log, tr.folds = 1-tr.cur, tr.log-1, tr.folds+1
	}
	return nil
}

// Round implements stark.ConstraintProver (one sync).
func (cp *constraintProver) Round() ([]stark.ConstraintTriple, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released || cp.binds < 0 || cp.devClaims {
		return nil, ErrProverState
	}
	j := cp.binds + 1
	out := make([]stark.ConstraintTriple, len(cp.traces))
	b := cp.be.dev.Batch()
	active := false
	for t, tr := range cp.traces {
		if tr.nLift < j {
			continue
		}
		if err := cp.fold(b, tr); err != nil {
			return nil, err
		}
		if err := cp.zc.EncodeRound(b, tr.zt, tr.tabs[tr.cur], 1<<tr.log, tr.log, cp.eq, tr.eqOff[j], cp.roundOut, t*cp.rndWidth); err != nil {
			return nil, err
		}
		active = true
	}
	if err := b.Err(); err != nil || !active {
		return out, err
	}
	words := make([]uint32, len(cp.traces)*cp.rndWidth)
	if err := cp.roundOut.Read(words, 0); err != nil {
		return nil, err
	}
	d := cp.d
	xi := cp.xi[cp.l+j-1]
	if xi == field.Fp4One { // probability 2^−124: R(0) would need the program at X = 0
		return nil, fmt.Errorf("%w: ξ_%d = 1", ErrProverState, cp.l+j-1)
	}
	inv := field.Fp4One.Sub(xi).Inverse()
	all := make([]stark.ConstraintTriple, len(cp.traces))
	for t, tr := range cp.traces {
		if tr.nLift < j {
			continue
		}
		claims, err := cp.roundClaims(t, j)
		if err != nil {
			return nil, err
		}
		var vals [3][]field.Fp4
		for k := range vals {
			// R(0..d+1): R(1..d) from the device, R(0) from the claim
			// R_{j−1}(r_{j−1}) = (1 − ξ)·R(0) + ξ·R(1), R(d+1) from R(0..d) (degree ≤ d).
			v := make([]field.Fp4, d+2)
			for x := 1; x <= d; x++ {
				v[x] = kernels.Fp4OfMont(words[t*cp.rndWidth+12*(x-1)+4*k:])
			}
			v[0] = claims[k].Sub(xi.Mul(v[1])).Mul(inv)
			v[d+1] = stark.InterpolateAt(v[:d+1], field.Lift(field.Fp(uint32(d+1))))
			vals[k] = v
		}
		all[t] = stark.ConstraintTriple{Zc: vals[0], Num: vals[1], Den: vals[2]}
		out[t] = stark.ConstraintTriple{Zc: vals[0][1:], Num: vals[1][1:], Den: vals[2][1:]}
	}
	cp.last = all
	return out, nil
}

var _ stark.ConstraintDeviceRounds = (*constraintProver)(nil)

// ProveRounds implements stark.ConstraintDeviceRounds: per round the pending folds (at the bound
// values the device sampled: kernels.EncodeFoldLogged), the round's sums (as Round) and its
// transcript step on the device (DeviceTranscript.EncodeZcRound: R(0) and R(d+1) from the claims,
// s_j combined by m, observed, r_j sampled into the log, the claims moved to r_j); one download
// of the log at the end instead of a sync a round. The last r_j is left for the next fold, as Bind
// leaves it.
func (cp *constraintProver) ProveRounds(tr *transcript.Transcript, m *stark.ConstraintRoundMix) ([][]field.Fp4, []field.Fp4, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	T := len(cp.traces)
	nMax := 0
	for _, t := range cp.traces {
		nMax = max(nMax, t.nLift)
	}
	if cp.released || cp.binds < 0 || m == nil || m.From != cp.binds+1 || m.To < m.From || m.To > nMax ||
		len(m.Zc) != T || len(m.Num) != T || len(m.Den) != T {
		return nil, nil, ErrProverState
	}
	if cp.l+nMax > len(cp.xi) {
		return nil, nil, fmt.Errorf("%w: ξ of %d values for %d rounds after l_skip %d", ErrProverState, len(cp.xi), nMax, cp.l)
	}
	d, dev := cp.d, cp.be.dev
	if cp.trRounds == nil {
		var err error
		if cp.trRounds, err = kernels.NewZcTrRounds(dev, T, d, nMax); err != nil {
			return nil, nil, err
		}
		if cp.trLog, err = cp.be.hash.NewDeviceTranscript(nMax * (d + 2)); err != nil {
			cp.trRounds.Close()
			cp.trRounds = nil
			return nil, nil, err
		}
	}
	seg := kernels.ZcTrSegment{Eqz: m.Eqz, Eqs: m.Eqs, Tail: m.Tail, Mix: make([][3]field.Fp4, T), NLift: make([]int, T), Xi: cp.xi[cp.l : cp.l+nMax]}
	for t, tr := range cp.traces {
		seg.Mix[t] = [3]field.Fp4{m.Zc[t], m.Num[t], m.Den[t]}
		seg.NLift[t] = tr.nLift
	}
	if !cp.devClaims {
		seg.Claims = make([][3]field.Fp4, T)
		for t, tr := range cp.traces {
			if tr.nLift < m.From {
				continue
			}
			c, err := cp.roundClaims(t, m.From)
			if err != nil {
				return nil, nil, err
			}
			seg.Claims[t] = c
		}
	}
	if err := cp.trRounds.Write(seg); err != nil {
		return nil, nil, err
	}
	if err := cp.trLog.SetState(tr.State()); err != nil {
		return nil, nil, err
	}
	cp.devClaims = true
	// Round j's s_j at Log[(j−From)(d+2) ..], its r_j at Log[(j−From)(d+2) + d+1].
	from, step := m.From, d+2
	b := dev.Batch()
	// foldTo encodes tr's folds up to r_k: by value before this run, else at the logged value.
	foldTo := func(tr *zcTrace, k int) error {
		for tr.folds < k {
			src, dst := tr.tabs[tr.cur], tr.tabs[1-tr.cur]
			var err error
			if i := tr.folds + 1; i < from {
				err = kernels.EncodeFold(b, dev, src, 1<<tr.log, dst, 1<<(tr.log-1), tr.zt.NumTables(), tr.log-1, cp.rs[tr.folds])
			} else {
				err = kernels.EncodeFoldLogged(b, dev, src, 1<<tr.log, dst, 1<<(tr.log-1), tr.zt.NumTables(), tr.log-1, cp.trLog.Log, (i-from)*step+d+1)
			}
			if err != nil {
				return err
			}
			tr.cur, tr.log, tr.folds = 1-tr.cur, tr.log-1, tr.folds+1
		}
		return nil
	}
	for j := from; j <= m.To; j++ {
		for t, tr := range cp.traces {
			if tr.nLift < j {
				continue
			}
			if err := foldTo(tr, j-1); err != nil {
				return nil, nil, err
			}
			if err := cp.zc.EncodeRound(b, tr.zt, tr.tabs[tr.cur], 1<<tr.log, tr.log, cp.eq, tr.eqOff[j], cp.roundOut, t*cp.rndWidth); err != nil {
				return nil, nil, err
			}
		}
		if err := cp.trLog.EncodeZcRound(b, cp.trRounds, cp.roundOut, cp.rndWidth, j, (j-from)*step); err != nil {
			return nil, nil, err
		}
	}
	// The run's last folds too, so that the openings of the traces it exhausts need no sync of
	// their own.
	for _, tr := range cp.traces {
		if err := foldTo(tr, min(m.To, tr.nLift)); err != nil {
			return nil, nil, err
		}
	}
	n := m.To - from + 1
	log, err := cp.trLog.ReadLog(n * step)
	if err != nil {
		return nil, nil, err
	}
	polys := make([][]field.Fp4, n)
	rs := make([]field.Fp4, n)
	for i := range n {
		polys[i] = log[i*step : i*step+d+1]
		rs[i] = log[i*step+d+1]
	}
	cp.rs = append(cp.rs, rs...)
	cp.binds += n
	return polys, rs, nil
}

// roundClaims returns trace t's three values R_{j−1}(r_{j−1}) (Zc, Num, Den) before round j:
// the round-0 polynomials at r_0 (j = 1), else the previous round's at r_{j−1}. Σ over X ∈ {0, 1}
// of eq(ξ_{l+j−1}, X)·R_j(X) equals it (spec B §4: e' of round j−1 is eq(ξ_{l+j−1}, X)·e' of
// round j), which gives R_j(0) without evaluating the program there.
func (cp *constraintProver) roundClaims(t, j int) ([3]field.Fp4, error) {
	var c [3]field.Fp4
	if j == 1 {
		if cp.uni == nil {
			return c, fmt.Errorf("%w: Round before UnivariateRound", ErrProverState)
		}
		u := cp.uni[t]
		for k, p := range [][]field.Fp4{u.Zc, u.Num, u.Den} {
			c[k] = stark.Horner(p, cp.r0)
		}
		return c, nil
	}
	if cp.last == nil || cp.last[t].Zc == nil {
		return c, fmt.Errorf("%w: round %d without round %d", ErrProverState, j, j-1)
	}
	l := cp.last[t]
	r := cp.rs[j-2]
	for k, v := range [][]field.Fp4{l.Zc, l.Num, l.Den} {
		c[k] = stark.InterpolateAt(v[:cp.d+1], r)
	}
	return c, nil
}

// Bind implements stark.ConstraintProver: r is folded into the tables by the next Round (or
// Openings). No sync, no dispatch.
func (cp *constraintProver) Bind(r field.Fp4) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released || cp.binds < 0 {
		return ErrProverState
	}
	cp.rs = append(cp.rs, r)
	cp.binds++
	return nil
}

// Openings implements stark.ConstraintProver (one download).
func (cp *constraintProver) Openings(t int) ([][]field.Fp4, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.released || t < 0 || t >= len(cp.traces) {
		return nil, ErrProverState
	}
	tr := cp.traces[t]
	if cp.binds < tr.nLift {
		return nil, fmt.Errorf("%w: trace %d not fully bound", ErrProverState, t)
	}
	b := cp.be.dev.Batch()
	if err := cp.fold(b, tr); err != nil {
		return nil, err
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	rows := make([]kernels.Mont4, tr.zt.NumTables())
	if err := tr.tabs[tr.cur].Read(rows, 0); err != nil {
		return nil, err
	}
	pg := tr.pg
	f := 1
	if pg.NeedRot {
		f = 2
	}
	out := make([][]field.Fp4, len(pg.PartWidths))
	for q, pw := range pg.PartWidths {
		out[q] = make([]field.Fp4, f*pw)
		for c := 0; c < pw; c++ {
			s := 2 * (pg.PartStart[q] + c)
			out[q][f*c] = kernels.Fp4Of(rows[tr.zt.TableOf(s)])
			if f == 2 {
				out[q][f*c+1] = kernels.Fp4Of(rows[tr.zt.TableOf(s+1)])
			}
		}
	}
	return out, nil
}

// program returns p uploaded on the backend's device: once per program (a verifying key's
// programs live as long as the key), freed by Close.
func (b *Backend) program(p *constraints.Program) (*kernels.Program, error) {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	if dp := b.progs[p]; dp != nil {
		return dp, nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	dp, err := kernels.UploadProgram(b.dev, fmt.Sprintf("constraints %p", p), p)
	if err != nil {
		return nil, err
	}
	if b.progs == nil {
		b.progs = map[*constraints.Program]*kernels.Program{}
	}
	b.progs[p] = dp
	return dp, nil
}

// zcTraceKey names the device data of one trace of a constraint sumcheck that depends only on the
// proving key (its program and verifying key), the trace's height and the round-0 domain:
// kernels.ZcTrace's maps, constants and piece bindings.
type zcTraceKey struct {
	pg            *constraints.Program
	vk            *air.VerifyingKey
	logH, l, logM int
	shifted       bool
}

// zcCache keeps, across proofs, the constraint sumcheck's device data that a proof of the same key
// would upload again: the round-0 domains, and the traces' maps, constants and piece bindings
// (kernels.ZcTrace, a few hundred KiB for Keccak-f) of the provers released, one per key and shape
// and proof in flight at once. Freed by Close.
type zcCache struct {
	mu   sync.Mutex
	doms map[zcDomainKey]*kernels.ZcDomain
	idle map[zcTraceKey][]*kernels.ZcTrace
	// fp4s and words hold the small buffers of released provers (tens of KiB): the eq tables and
	// their halves; the sums and the bind weights.
	fp4s  bufPool[kernels.Mont4]
	words bufPool[uint32]
}

// bufPool holds kept buffers of one element type by name and length (guarded by zcCache.mu).
type bufPool[T any] map[zcBufKey][]*gpu.Array[T]

// free frees every kept buffer and empties the pool.
func (p *bufPool[T]) free() {
	for _, l := range *p {
		for _, a := range l {
			a.Free()
		}
	}
	*p = nil
}

type zcBufKey struct {
	name string
	n    int
}

// takeBuf returns a buffer of pool called name of n elements, or a new one (its content
// undefined either way: every use writes it first).
func takeBuf[T any](b *Backend, pool *bufPool[T], name string, n int) (*gpu.Array[T], error) {
	c := &b.zc
	c.mu.Lock()
	k := zcBufKey{name, n}
	if l := (*pool)[k]; len(l) > 0 {
		a := l[len(l)-1]
		(*pool)[k] = l[:len(l)-1]
		c.mu.Unlock()
		return a, nil
	}
	c.mu.Unlock()
	return gpu.AllocArray[T](b.dev, name, n)
}

// putBuf keeps a buffer of takeBuf in pool for the next prover, or frees it once the backend is
// closed.
func putBuf[T any](b *Backend, pool *bufPool[T], a *gpu.Array[T]) {
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.isClosed() {
		a.Free()
		return
	}
	if *pool == nil {
		*pool = bufPool[T]{}
	}
	k := zcBufKey{a.Name(), a.Len()}
	(*pool)[k] = append((*pool)[k], a)
}

// zcDomainKey names a round-0 domain: N = 2^l, M = 2^logM, shifted or not.
type zcDomainKey struct {
	l, logM int
	shifted bool
}

// zcDomain returns the round-0 domain tables for N = 2^l, M = 2^logM (shifted:
// kernels.NewZcShiftedDomain): made once per backend.
func (b *Backend) zcDomain(l, logM int, shifted bool) (*kernels.ZcDomain, error) {
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	k := zcDomainKey{l, logM, shifted}
	if d := c.doms[k]; d != nil {
		return d, nil
	}
	if b.isClosed() {
		return nil, ErrClosed
	}
	newDom := kernels.NewZcDomain
	if shifted {
		newDom = kernels.NewZcShiftedDomain
	}
	d, err := newDom(b.dev, l, logM)
	if err != nil {
		return nil, err
	}
	if c.doms == nil {
		c.doms = map[zcDomainKey]*kernels.ZcDomain{}
	}
	c.doms[k] = d
	return d, nil
}

// takeZcTrace returns a kept trace of key k for a new prover (nil: none is free).
func (b *Backend) takeZcTrace(k zcTraceKey) *kernels.ZcTrace {
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.idle[k]
	if len(l) == 0 {
		return nil
	}
	zt := l[len(l)-1]
	c.idle[k] = l[:len(l)-1]
	return zt
}

// putZcTrace keeps zt for the next prover of key k, or frees it once the backend is closed.
func (b *Backend) putZcTrace(k zcTraceKey, zt *kernels.ZcTrace) {
	zt.Detach()
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	// Close sets closed before it empties the cache (under c.mu): a trace kept here is freed by
	// it, one put after it is freed now.
	if b.isClosed() {
		zt.Free()
		return
	}
	if c.idle == nil {
		c.idle = map[zcTraceKey][]*kernels.ZcTrace{}
	}
	c.idle[k] = append(c.idle[k], zt)
}

// zcKept says whether a trace of key k is kept (its device data in use between proofs).
func (b *Backend) zcKept(k zcTraceKey) bool {
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.idle[k]) > 0
}

// freeZcCache frees the kept traces and domains (Close).
func (b *Backend) freeZcCache() {
	c := &b.zc
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.idle {
		for _, zt := range l {
			zt.Free()
		}
	}
	for _, d := range c.doms {
		d.Free()
	}
	c.fp4s.free()
	c.words.free()
	c.idle, c.doms = nil, nil
}

// isClosed says whether Close has begun.
func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// minPiecesCode is the shortest program GPUs split into pieces: a shorter one runs whole with
// enough threads (its scratch is small) and a short serial walk; pieces would add slot fills.
const minPiecesCode = 2048

// usePieces says whether the backend runs p in pieces (GPUs, or forced by its options).
func (b *Backend) usePieces(p *constraints.Program) bool {
	return len(p.Code) >= minPiecesCode && kernels.ZcUsesPieces(b.dev) || b.zcOpts.Pieces
}

// generates says whether round 0 of the constraint sumcheck runs generated code (the AIR's
// pieces as straight-line code, compiled at run time: kernels.BuildGenerated) for the programs
// it runs in pieces (usePieces): on devices that build modules and run round 0 in pieces (GPUs;
// the host device when the options ask for pieces), unless the options ask for the interpreter.
// A short program runs whole on GPUs, with generated code of its own (generatesWhole): in pieces,
// interaction-pair 2^20 (two AIRs of a few dozen instructions) took 17.7 ms in the constraint
// stage with generated code against 9.2 whole and interpreted (H200, issue 23), the slot-value
// table and the pieces' rounds costing more than the interpreter saves.
func (b *Backend) generates() bool {
	return b.dev.BuildsModules() && !b.zcOpts.Interpreted && (kernels.ZcUsesPieces(b.dev) || b.zcOpts.Pieces)
}

// GeneratedEvents are told of the builds of BuildConstraintCode: Start before an AIR's code is
// built (its units may be compiled: seconds), Done after, with what was built.
type GeneratedEvents struct {
	Start func(air string, units, instructions int)
	Done  func(kernels.GeneratedReport)
}

// BuildConstraintCode builds the generated round-0 code of every AIR of pk on the device (where
// round 0 runs it: see generates and generatesWhole; the programs run whole in one build), so
// that a service pays the compile before its first proof (keygen --warm) and a proof says what it
// compiles before its stages begin. Built code is
// kept per key for the backend's life; the device backend's cache keeps it across processes.
// It returns the reports of the AIRs built now (none on devices that do not build code).
func (b *Backend) BuildConstraintCode(pk *stark.ProvingKey, ev *GeneratedEvents) ([]kernels.GeneratedReport, error) {
	if !b.dev.BuildsModules() || b.zcOpts.Interpreted || pk == nil || pk.VK == nil || pk.VK.MVK == nil {
		return nil, nil
	}
	var out []kernels.GeneratedReport
	var whole []wholeBuild // the programs run whole, built together after the loop
	for i, vk := range pk.VK.MVK.PerAir {
		pg := pk.VK.Program(i)
		if pg != nil && b.generatesWhole(pg) {
			dp, err := b.program(pg)
			if err != nil {
				return nil, err
			}
			whole = append(whole, wholeBuild{pk.AirName(i), pg, dp})
			continue
		}
		if pg == nil || !b.usePieces(pg) || !b.generates() {
			continue
		}
		pp, err := b.pieces(vk, constraints.All, constraints.DevicePieces)
		if err != nil {
			return nil, err
		}
		r, built, err := b.buildGenerated(pk.AirName(i), pp, ev)
		if err != nil {
			return nil, err
		}
		if built {
			out = append(out, r)
		}
	}
	rs, err := b.buildWholes(whole, ev)
	if err != nil {
		return nil, err
	}
	return append(out, rs...), nil
}

// buildGenerated builds the generated code of pp (once: pieces are kept per key) and makes
// round 0 run it; built says whether it was built now (r is then its report).
func (b *Backend) buildGenerated(air string, pp *kernels.ProgramPieces, ev *GeneratedEvents) (r kernels.GeneratedReport, built bool, err error) {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	if pp.Generated != nil {
		return r, false, nil
	}
	src, units, err := kernels.GeneratedModule(air, pp)
	if err != nil {
		return r, false, err
	}
	instr := 0
	for _, u := range units {
		instr += u.Instructions
	}
	if ev != nil && ev.Start != nil {
		ev.Start(air, len(units), instr)
	}
	g, err := kernels.BuildGeneratedFrom(b.dev, air, pp, src, units)
	if err != nil {
		return r, false, err
	}
	if err := pp.UseGenerated(g); err != nil {
		return r, false, err
	}
	r = g.Report
	// The app layer logs the build (prover.BuildConstraintCode); the backend of the device
	// announces a compile itself.
	b.log.Debug().Str("air", air).Int("units", r.Units).Bool("compiled", r.Compiled).
		Str("elapsed", r.Elapsed.Round(time.Millisecond).String()).Str("cache", r.Cache).Msg("constraint kernels built")
	if ev != nil && ev.Done != nil {
		ev.Done(r)
	}
	return r, true, nil
}

// pieces returns vk's program for outs split into at most k pieces and uploaded: once per key,
// outputs and k (an AIR without interactions has one program for the constraints and for all
// outputs, so the trace check and the constraint sumcheck share it), freed by Close.
func (b *Backend) pieces(vk *air.VerifyingKey, outs constraints.Outputs, k int) (*kernels.ProgramPieces, error) {
	if vk == nil || vk.DAG == nil {
		return nil, fmt.Errorf("backend/device: pieces of a program without verifying key")
	}
	if len(vk.DAG.Interactions) == 0 {
		outs = constraints.All
	}
	key := compiledKey{vk, outs, k}
	b.progMu.Lock()
	defer b.progMu.Unlock()
	if pp := b.progPieces[key]; pp != nil {
		return pp, nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if k == constraints.DevicePieces {
		// The constraint sumcheck's rounds will want their finer split (tens of ms of CPU for a
		// long program): begin it now, beside the trace check and the commitment.
		go b.shared.pieces(vk, constraints.All, constraints.DeviceRoundPieces)
	}
	ps, err := b.shared.pieces(vk, outs, k)
	if err != nil {
		return nil, err
	}
	pp, err := kernels.UploadPieces(b.dev, fmt.Sprintf("%d pieces", len(ps)), ps)
	if err != nil {
		return nil, err
	}
	if b.progPieces == nil {
		b.progPieces = map[compiledKey]*kernels.ProgramPieces{}
	}
	b.progPieces[key] = pp
	return pp, nil
}

// freePrograms frees the uploaded programs and pieces (Close).
func (b *Backend) freePrograms() {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	for _, dp := range b.progs {
		dp.Free()
	}
	for _, pp := range b.progPieces {
		pp.Free()
	}
	b.progs, b.progPieces = nil, nil
}
