package device

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// ErrWhirState: a WhirProver method was called out of order (more folds than variables, a
// codeword index that does not exist, a call after Release).
var ErrWhirState = errors.New("backend/device: WHIR prover method called out of order")

// whirProver is the device WHIR prover (spec A §6.3), equal call for call to cpuref's. The
// tables f and w are AoS Fp4 tables (4 Montgomery uints per entry) in ping-pong buffers (the
// sumcheck family folds out of place); the coefficient table of the current f is computed once
// per fold state (CommitFolded, EvalFolded and FinalPoly of a round share it); the committed
// folded codewords are column-major 2^L × 4 base planes (the NTT and Merkle kernels take them),
// kept with their trees for OpenCodeword.
//
// Syncs: one per call that returns values (SumcheckRound, CommitFolded, EvalFolded, FinalPoly,
// OpenInitial, OpenCodeword); NewWhirProver, Fold and AccumulateWeight only encode or record work.
// Fold records α: the next SumcheckRound folds and sums in one pass
// (kernels.Sumcheck.EncodeFoldRound), any other call first encodes the plain fold.
// AccumulateWeight records its expansion: an opening encodes it after its download (the device
// expands while the host makes the opened rows), any other call before its own work.
type whirProver struct {
	be      *Backend
	dev     *gpu.Device
	k       int
	commits []*Committed

	sc *kernels.Sumcheck
	// f[cur], w[cur] hold the current tables of 2^d entries; f[1−cur], w[1−cur] receive the fold.
	// Buffers 0 hold 2^m entries, buffers 1 2^(m−1): the folds alternate between them.
	f, w  [2]*gpu.Array[kernels.Mont4]
	cur   int
	d     int
	alpha *field.Fp4 // a recorded fold not yet encoded
	// weight is a recorded AccumulateWeight not yet encoded (its points uploaded): an opening
	// encodes it after its download, so that the device makes it while the host converts the
	// opened rows; any other call that reads w or folds encodes it first.
	weight *weightJob

	coeffs      *gpu.Array[kernels.Mont4] // coefficient table of the current f (when coeffsValid)
	coeffsValid bool
	horner      *gpu.Array[kernels.Mont4] // EncodeHorner scratch

	// Inputs of encoded work (they must outlive it): μ powers, the Möbius-eq halves of w, and
	// AccumulateWeight's points and eq tables (kernels.WhirWeights; grown on demand, reused).
	mu, kq, kHalves    *gpu.Array[kernels.Mont4]
	points, eqLo, eqHi *gpu.Array[kernels.Mont4]
	eqLoBase           *gpu.Array[kernels.Mont]

	codewords []*gpu.Array[kernels.Mont]
	trees     []*kernels.MerkleTree
	// trLog is SumcheckRounds' device transcript (made by its first call: one a proof, not one a
	// WHIR round, whose small allocations would fall in the host's gap between rounds).
	trLog *kernels.DeviceTranscript
	// muShadow, for a prover of NewWhirProverMu, is the stage's transcript as it will be after
	// μ's proof of work and μ (zeros in place of their values: only its indices matter), which
	// trLog's sponge holds on the device; log entries 0 and 1 hold the witness and μ, muIdx the
	// witness as the search found it.
	muShadow *transcript.Transcript
	muIdx    *gpu.Array[uint32]
	// final is the last round's query phase encoded and not yet waited for (encodeFinalQueries).
	final    *finalQueries
	released bool
}

var _ stark.WhirProver = (*whirProver)(nil)

// NewWhirProver implements stark.WhirBackend: f = Σ_{c, j} μ^idx·CoeffsToEvals(RSMessage(l_skip,
// Q_c[:, j])) and w = EvalsMobiusEqHypercube(uCube), built on the device without a sync. f: per
// commitment one kernels.EncodeWhirBatch pass over Q (batching first, then the per-block IDFT
// and the low subset-sum bits on the one Fp4 table), then the subset sum over the bits l_skip..m
// (kernels.EncodeSubsetSum). w: the Möbius-eq tables of uCube's four quarters (host, 2^⌈m/4⌉
// entries or so) expanded into those of its two halves, and those into w (kernels.EqExpand).
func (b *Backend) NewWhirProver(p params.SystemParams, commits []stark.Committed, mu field.Fp4, uCube []field.Fp4) (stark.WhirProver, error) {
	return b.newWhirProver(p, commits, uCube, mu, nil)
}

var _ stark.WhirDeviceMu = (*Backend)(nil)

// NewWhirProverMu implements stark.WhirDeviceMu: NewWhirProver with μ's proof of work ground
// from a device transcript set to tr's state (kernels.Grind.EncodeSearchAll), the witness
// observed and μ sampled (whir_tr_queries with no queries) and μ's powers made
// (kernels.EncodeMuPowers) before the batching: no sync. ChainRounds continues from that
// transcript.
func (b *Backend) NewWhirProverMu(p params.SystemParams, commits []stark.Committed, tr *transcript.Transcript, uCube []field.Fp4) (stark.WhirProver, error) {
	if !chainable(p) || p.Whir.MuPowBits < 0 || p.Whir.MuPowBits > chainMaxPowBits {
		return nil, stark.ErrDeviceRoundsUnsupported
	}
	return b.newWhirProver(p, commits, uCube, field.Fp4{}, tr)
}

// chainable reports whether ChainRounds runs WHIR with parameters p.
func chainable(p params.SystemParams) bool {
	k, R := p.Whir.K, len(p.Whir.Rounds)
	fbits, qpow := p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits
	return R >= 2 && fbits >= 0 && fbits <= kernels.SumcheckGrindMaxBits && qpow >= 0 && qpow <= chainMaxPowBits &&
		p.LSkip+p.NStack >= R*k
}

// chainLogLen is ChainRounds' log: per round but the last 4k + 6 entries, then the last round's
// 4k, after muLogLen entries for a prover that made μ.
func chainLogLen(p params.SystemParams) int {
	k, R := p.Whir.K, len(p.Whir.Rounds)
	return (R-1)*(4*k+6) + 4*k
}

// chainLogCap is the size of ChainRounds' log: chainLogLen, then room for the final
// polynomial's coefficients and the transcript's state, which its sync downloads with the log.
func chainLogCap(p params.SystemParams) int {
	return chainLogLen(p) + 1<<max(p.LogFinalPolyLen(), 0) + kernels.LogStateLen
}

// muLogLen is the log entries before the chain's of a prover that made μ: the witness and μ.
const muLogLen = 2

// newWhirProver is NewWhirProver with μ (muTr nil) or NewWhirProverMu (muTr: the transcript μ
// is made from).
func (b *Backend) newWhirProver(p params.SystemParams, commits []stark.Committed, uCube []field.Fp4, mu field.Fp4, muTr *transcript.Transcript) (stark.WhirProver, error) {
	cs, err := b.commits(commits)
	if err != nil {
		return nil, err
	}
	m := p.LSkip + p.NStack
	if len(uCube) != m {
		return nil, fmt.Errorf("%w: point of length %d, want %d", stark.ErrOpeningInput, len(uCube), m)
	}
	if p.LSkip < 0 || p.LSkip > 5 || m > field.TwoAdicity || p.Whir.K < 0 {
		return nil, fmt.Errorf("%w: l_skip %d, m %d (the device WHIR needs l_skip ≤ 5)", stark.ErrOpeningInput, p.LSkip, m)
	}
	total := 0
	for _, c := range cs {
		if c.height != 1<<m || c.lSkip != p.LSkip || c.logBlowup != p.LogBlowup || c.k != p.Whir.K {
			return nil, fmt.Errorf("%w: commitment does not match the parameters", stark.ErrOpeningInput)
		}
		total += c.width
	}
	wp := &whirProver{be: b, dev: b.dev, k: p.Whir.K, commits: cs, d: m}
	fail := func(err error) (stark.WhirProver, error) {
		wp.Release()
		return nil, err
	}
	if wp.sc, err = kernels.NewSumcheck(b.dev); err != nil {
		return fail(err)
	}
	// The uploads first (an upload waits for queued work, such as the zeroing of a new buffer).
	// The Möbius-eq tables of uCube's two halves come from four quarter tables expanded on the
	// device: computing the halves (2^⌈m/2⌉ products each) on the host took ≈ 0.2 ms of the gap
	// before WHIR's first kernel.
	if muTr == nil {
		wp.mu, err = gpu.UploadArray(b.dev, "whir μ powers", kernels.Mont4Slice(field.PowersFp4(mu, max(total, 1))))
	} else if wp.mu, err = gpu.AllocArrayUninit[kernels.Mont4](b.dev, "whir μ powers", max(total, 1)); err == nil {
		wp.muIdx, err = gpu.AllocArrayUninit[uint32](b.dev, "whir μ witness", 1)
	}
	if err != nil {
		return fail(err)
	}
	logLo := m / 2
	var quarters []field.Fp4
	var expand []kernels.EqExpand
	for h, half := range [][]field.Fp4{uCube[:logLo], uCube[logLo:]} {
		a := len(half) / 2
		lo, hi := stark.EvalsMobiusEqHypercube(half[:a]), stark.EvalsMobiusEqHypercube(half[a:])
		expand = append(expand, kernels.EqExpand{LoOff: len(quarters), HiOff: len(quarters) + len(lo), OutOff: h << logLo,
			LogLo: a, LogHi: len(half) - a, Count: 1})
		quarters = append(append(quarters, lo...), hi...)
	}
	if wp.kq, err = gpu.UploadArray(b.dev, "whir mobius eq quarters", kernels.Mont4Slice(quarters)); err != nil {
		return fail(err)
	}
	// kLo then kHi in one buffer: 2^logLo and 2^(m − logLo) entries.
	if wp.kHalves, err = gpu.AllocArrayUninit[kernels.Mont4](b.dev, "whir mobius eq halves", 1<<logLo+1<<(m-logLo)); err != nil {
		return fail(err)
	}
	// f[0] zeroed: no commitment with a column leaves it zero. w[0] is written whole by the
	// expansion below, the fold targets f[1], w[1] by every fold.
	for i, n := range []int{1 << m, 1 << max(m-1, 0)} {
		alloc := gpu.AllocArrayUninit[kernels.Mont4]
		if i == 0 {
			alloc = gpu.AllocArray[kernels.Mont4]
		}
		if wp.f[i], err = alloc(b.dev, "whir f", n); err != nil {
			return fail(err)
		}
		if wp.w[i], err = gpu.AllocArrayUninit[kernels.Mont4](b.dev, "whir w", n); err != nil {
			return fail(err)
		}
	}
	batch := b.dev.Batch()
	if muTr != nil {
		if err := wp.encodeMu(batch, muTr, p, total); err != nil {
			return fail(err)
		}
	}
	off, first := 0, true
	for _, c := range cs {
		if c.width == 0 {
			continue
		}
		// Q: kept, left by the stacked reduction, or stacked again; the batching is its last
		// use in the proof.
		q, err := c.acquireQ(batch)
		if err != nil {
			return fail(err)
		}
		err = b.ntt.EncodeWhirBatch(batch, q, c.height, c.width, p.LSkip, wp.mu, off, wp.f[0], !first)
		c.releaseQ(true)
		if err != nil {
			return fail(err)
		}
		off += c.width
		first = false
	}
	// The fresh f is zero when there is no column at all.
	fm := gpu.View[kernels.Mont](wp.f[0]) // the subset sum reads f word by word
	if err := kernels.EncodeSubsetSum(batch, b.dev, fm, fm, m+2, p.LSkip+2, m+2, false); err != nil {
		return fail(err)
	}
	for _, e := range expand {
		e.Lo, e.Hi, e.Out = wp.kq, wp.kq, wp.kHalves
		if err := e.Encode(batch, b.dev); err != nil {
			return fail(err)
		}
	}
	w := kernels.EqExpand{Lo: wp.kHalves, Hi: wp.kHalves, Out: wp.w[0], HiOff: 1 << logLo, LogLo: logLo, LogHi: m - logLo, Count: 1}
	if err := w.Encode(batch, b.dev); err != nil {
		return fail(err)
	}
	if err := batch.Err(); err != nil {
		return fail(err)
	}
	return wp, nil
}

// encodeMu encodes μ's steps on a new device transcript in tr's state: the proof of work, the
// witness observed and μ sampled (log entries 0 and 1), μ's total powers into wp.mu.
func (wp *whirProver) encodeMu(b *gpu.Batch, tr *transcript.Transcript, p params.SystemParams, total int) error {
	var err error
	if wp.trLog, err = wp.be.hash.NewDeviceTranscript(muLogLen + chainLogCap(p)); err != nil {
		return err
	}
	tt := wp.trLog
	st, ai, si := tr.State()
	if err := tt.EncodeSetState(b, st, ai, si); err != nil {
		return err
	}
	shadow := *tr
	q := kernels.WhirQueries{Idx: wp.muIdx, ZAt: 0, At: 0}
	if bits := p.Whir.MuPowBits; bits > 0 {
		g, unlock, err := wp.be.grinder()
		if err != nil {
			return err
		}
		defer unlock() // the witness is read in stream order by the kernel encoded next
		_, absorbIdx, _ := shadow.State()
		if err := g.EncodeSearchAll(b, tt, absorbIdx, bits); err != nil {
			return err
		}
		q.Witness = g.Result()
		shadow.Observe(0)
		shadow.Sample()
	}
	if wp.points, err = wp.grow(wp.points, "whir weight points", 2); err != nil {
		return err
	}
	q.Weights = wp.points
	if err := tt.EncodeWhirQueries(b, q); err != nil {
		return err
	}
	shadow.SampleExt()
	wp.muShadow = &shadow
	return kernels.EncodeMuPowers(b, wp.dev, tt.Log, 1, wp.mu, total)
}

// tables returns the current (src) or the fold target (dst) table pair with 2^logRows rows.
func (wp *whirProver) tables(i, logRows int) kernels.ProductTables {
	return kernels.ProductTables{F: wp.f[i], W: wp.w[i], Cols: 1, LogRows: logRows, Stride: 1 << logRows}
}

// live reports ErrWhirState after Release.
func (wp *whirProver) live() error {
	if wp.released {
		return fmt.Errorf("%w: prover was released", ErrWhirState)
	}
	return nil
}

// weightJob is a recorded AccumulateWeight: npts points in wp.points, those from baseFrom on in
// the base field.
type weightJob struct{ npts, baseFrom int }

// recordWeight grows the eq tables for npts points in wp.points (those from baseFrom on in the
// base field) at the current size and records their accumulation into w.
func (wp *whirProver) recordWeight(npts, baseFrom int) error {
	logLo := wp.d / 2
	var err error
	if wp.eqLo, err = wp.grow(wp.eqLo, "whir weight eq lo", max(1, baseFrom<<logLo)); err != nil {
		return err
	}
	if wp.eqLoBase, err = growArray(wp.dev, wp.eqLoBase, "whir weight eq lo (base)", max(1, (npts-baseFrom)<<logLo)); err != nil {
		return err
	}
	if wp.eqHi, err = wp.grow(wp.eqHi, "whir weight eq hi", npts<<(wp.d-logLo)); err != nil {
		return err
	}
	wp.weight = &weightJob{npts: npts, baseFrom: baseFrom}
	return nil
}

// encodeWeight encodes a recorded AccumulateWeight into b: per point the lo/hi halves of its eq
// table (the coefficient folded into hi), then one expansion for all points into w
// (kernels.WhirWeights).
func (wp *whirProver) encodeWeight(b *gpu.Batch) error {
	j := wp.weight
	if j == nil {
		return nil
	}
	wp.weight = nil
	logLo := wp.d / 2
	ww := kernels.WhirWeights{Points: wp.points, N: j.npts, BaseFrom: j.baseFrom, LogLo: logLo, LogHi: wp.d - logLo,
		Lo: wp.eqLo, LoBase: wp.eqLoBase, Hi: wp.eqHi}
	return ww.Encode(b, wp.dev, wp.w[wp.cur])
}

// flushFold encodes a recorded fold (with a recorded AccumulateWeight before it) into b; a
// recorded AccumulateWeight alone stays recorded (an opening encodes it after its download).
func (wp *whirProver) flushFold(b *gpu.Batch) error {
	if wp.alpha == nil {
		return nil
	}
	return wp.flush(b)
}

// flush encodes a recorded AccumulateWeight, then a recorded fold of f and w, into b.
func (wp *whirProver) flush(b *gpu.Batch) error {
	if err := wp.encodeWeight(b); err != nil {
		return err
	}
	if wp.alpha == nil {
		return nil
	}
	a := *wp.alpha
	src, dst := wp.cur, 1-wp.cur
	n := wp.d - 1
	if err := kernels.EncodeFold(b, wp.dev, wp.f[src], 2<<n, wp.f[dst], 1<<n, 1, n, a); err != nil {
		return err
	}
	if err := kernels.EncodeFold(b, wp.dev, wp.w[src], 2<<n, wp.w[dst], 1<<n, 1, n, a); err != nil {
		return err
	}
	wp.cur, wp.d, wp.alpha = dst, n, nil
	return nil
}

// vars is the variable count of the current tables once a recorded fold is applied.
func (wp *whirProver) vars() int {
	if wp.alpha != nil {
		return wp.d - 1
	}
	return wp.d
}

// SumcheckRound returns s(1), s(2) of Σ_y f·w over the lowest variable (one sync, 32 bytes).
func (wp *whirProver) SumcheckRound() (s1, s2 field.Fp4, err error) {
	if err := wp.live(); err != nil {
		return s1, s2, err
	}
	if wp.vars() < 1 {
		return s1, s2, fmt.Errorf("%w: round on a table of one entry", ErrWhirState)
	}
	b := wp.dev.Batch()
	if err := wp.encodeWeight(b); err != nil {
		return s1, s2, err
	}
	if wp.alpha != nil {
		src, dst := wp.cur, 1-wp.cur
		if err := wp.sc.EncodeFoldRound(b, wp.tables(src, wp.d), wp.tables(dst, wp.d-1), *wp.alpha); err != nil {
			return s1, s2, err
		}
		wp.cur, wp.d, wp.alpha = dst, wp.d-1, nil
	} else if err := wp.sc.EncodeRound(b, wp.tables(wp.cur, wp.d)); err != nil {
		return s1, s2, err
	}
	return wp.sc.ReadRound()
}

// deviceTranscript returns the prover's device transcript (trLog) with a log of at least n
// values, in tr's state.
func (wp *whirProver) deviceTranscript(tr *transcript.Transcript, n int) (*kernels.DeviceTranscript, error) {
	if wp.trLog != nil && wp.trLog.Log.Len() < n {
		wp.trLog.Close()
		wp.trLog = nil
	}
	if wp.trLog == nil {
		var err error
		if wp.trLog, err = wp.be.hash.NewDeviceTranscript(max(n, 4*wp.k)); err != nil {
			return nil, err
		}
	}
	return wp.trLog, wp.trLog.SetState(tr.State())
}

var _ stark.WhirDeviceRounds = (*whirProver)(nil)

// SumcheckRounds implements stark.WhirDeviceRounds: per round its sums (a pending fold and the
// sums in one pass, as SumcheckRound) and its transcript step with the folding grind on the
// device (kernels.DeviceTranscript.EncodeSumcheckRoundGrind), the next round's fold at the logged
// bound value; one download of the log at the end instead of a sync a round. The last bound
// value is left recorded, as Fold leaves it.
func (wp *whirProver) SumcheckRounds(tr *transcript.Transcript, k, bits int) ([][2]field.Fp4, []field.Fp, []field.Fp4, error) {
	if err := wp.live(); err != nil {
		return nil, nil, nil, err
	}
	if bits < 0 || bits > kernels.SumcheckGrindMaxBits {
		return nil, nil, nil, stark.ErrDeviceRoundsUnsupported
	}
	if k < 1 || wp.vars() < k {
		return nil, nil, nil, fmt.Errorf("%w: %d rounds on a table of %d variables", ErrWhirState, k, wp.vars())
	}
	tt, err := wp.deviceTranscript(tr, 4*k)
	if err != nil {
		return nil, nil, nil, err
	}
	// Round i's sums at Log[4i], Log[4i+1], its witness at Log[4i+2], its bound value at Log[4i+3].
	b := wp.dev.Batch()
	if err := wp.encodeWeight(b); err != nil {
		return nil, nil, nil, err
	}
	for i := range k {
		src, dst := wp.cur, 1-wp.cur
		switch {
		case i > 0:
			err = wp.sc.EncodeFoldRoundLogged(b, wp.tables(src, wp.d), wp.tables(dst, wp.d-1), tt.Log, 4*(i-1)+3)
			wp.cur, wp.d = dst, wp.d-1
		case wp.alpha != nil:
			err = wp.sc.EncodeFoldRound(b, wp.tables(src, wp.d), wp.tables(dst, wp.d-1), *wp.alpha)
			wp.cur, wp.d, wp.alpha = dst, wp.d-1, nil
		default:
			err = wp.sc.EncodeRound(b, wp.tables(wp.cur, wp.d))
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if err := tt.EncodeSumcheckRoundGrind(b, wp.sc, 4*i, bits); err != nil {
			return nil, nil, nil, err
		}
	}
	log, err := tt.ReadLog(4 * k)
	if err != nil {
		return nil, nil, nil, err
	}
	polys := make([][2]field.Fp4, k)
	witnesses := make([]field.Fp, k)
	alphas := make([]field.Fp4, k)
	for i := range k {
		polys[i] = [2]field.Fp4{log[4*i], log[4*i+1]}
		witnesses[i] = log[4*i+2][0]
		alphas[i] = log[4*i+3]
	}
	last := alphas[k-1]
	wp.alpha = &last
	wp.coeffsValid = false
	return polys, witnesses, alphas, nil
}

// Fold fixes the lowest variable of f and w to alpha. It records alpha (the fold is encoded by
// the next call, fused with the next round's sums when that call is SumcheckRound): no sync.
func (wp *whirProver) Fold(alpha field.Fp4) error {
	if err := wp.live(); err != nil {
		return err
	}
	if wp.vars() < 1 {
		return fmt.Errorf("%w: fold of a table of one entry", ErrWhirState)
	}
	if wp.alpha != nil {
		b := wp.dev.Batch()
		if err := wp.flush(b); err != nil {
			return err
		}
	}
	wp.alpha = &alpha
	wp.coeffsValid = false
	return nil
}

// grow returns a, or a new zeroed array named name when a holds fewer than n entries (a freed).
func (wp *whirProver) grow(a *gpu.Array[kernels.Mont4], name string, n int) (*gpu.Array[kernels.Mont4], error) {
	return growArray(wp.dev, a, name, n)
}

// growArray returns a if it holds n elements, else a new zeroed array of n (a freed).
func growArray[T any](dev *gpu.Device, a *gpu.Array[T], name string, n int) (*gpu.Array[T], error) {
	if a != nil && a.Len() >= n {
		return a, nil
	}
	if a != nil {
		a.Free()
	}
	return gpu.AllocArray[T](dev, name, n)
}

// encodeCoeffs encodes the coefficient table of the current f (the Möbius transform over all
// its bits, cpuref's EvalsToCoeffs) into wp.coeffs unless it is there already.
func (wp *whirProver) encodeCoeffs(b *gpu.Batch) error {
	if err := wp.flush(b); err != nil {
		return err
	}
	if wp.coeffsValid {
		return nil
	}
	var err error
	if wp.coeffs, err = wp.grow(wp.coeffs, "whir coefficients", 1<<wp.d); err != nil {
		return err
	}
	if wp.d == 0 {
		b.Copy(wp.coeffs.Buffer, 0, wp.f[wp.cur].Buffer, 0, 16)
	} else if err := kernels.EncodeSubsetSum(b, wp.dev, gpu.View[kernels.Mont](wp.f[wp.cur]), gpu.View[kernels.Mont](wp.coeffs), wp.d+2, 2, wp.d+2, true); err != nil {
		return err
	}
	if err := b.Err(); err != nil {
		return err
	}
	wp.coeffsValid = true
	return nil
}

// CommitFolded RS-encodes the coefficient table (zero-padded to 2^logDomain, DFT of each Fp4
// coordinate plane) and builds its Merkle tree with 2^k rows per query group: one batch, the
// root its only download.
func (wp *whirProver) CommitFolded(logDomain int) (stark.Digest, error) {
	if err := wp.live(); err != nil {
		return stark.Digest{}, err
	}
	_, tree, err := wp.encodeCommit(logDomain)
	if err != nil {
		return stark.Digest{}, err
	}
	return tree.Root()
}

// encodeCommit encodes the folded f's codeword on 2^logDomain points (logDomain checked) and its
// Merkle tree, kept by the prover; it returns the batch.
func (wp *whirProver) encodeCommit(logDomain int) (*gpu.Batch, *kernels.MerkleTree, error) {
	d := wp.vars()
	if logDomain < d || logDomain < wp.k || logDomain > field.TwoAdicity {
		return nil, nil, fmt.Errorf("%w: codeword of 2^%d for 2^%d coefficients, k = %d", ErrWhirState, logDomain, d, wp.k)
	}
	b := wp.dev.Batch()
	if err := wp.encodeCoeffs(b); err != nil {
		return nil, nil, err
	}
	n := 1 << logDomain
	cw, err := gpu.AllocArray[kernels.Mont](wp.dev, fmt.Sprintf("whir codeword %d", len(wp.codewords)), 4*n)
	if err != nil {
		return nil, nil, err
	}
	if err := kernels.EncodeFp4ToPlanes(b, wp.dev, wp.coeffs, 1<<wp.d, cw, logDomain); err != nil {
		cw.Free()
		return nil, nil, err
	}
	if err := wp.be.ntt.EncodeColumns(b, cw, n, 4, false); err != nil {
		cw.Free()
		return nil, nil, err
	}
	tree, err := wp.be.hash.EncodeMerkleTree(b, cw, n, 4, wp.k)
	if err != nil {
		cw.Free()
		return nil, nil, err
	}
	wp.codewords = append(wp.codewords, cw)
	wp.trees = append(wp.trees, tree)
	return b, tree, nil
}

var _ stark.WhirDeviceCommit = (*whirProver)(nil)

// CommitRound implements stark.WhirDeviceCommit: CommitFolded's kernels, then on the device the
// transcript's steps after them (a copy of tr's state, kernels.DeviceTranscript): the root
// observed and z sampled, the Horner passes at the logged z (EvalFolded's), y observed, and the
// first slice of the query-phase grind searched from the sponge's state (kernels.Grind
// EncodeSearchFrom). One sync (the root's download; z, y and the witness follow with no new
// work); a slice without a hit continues the search one sync a slice, as FindWitness does.
func (wp *whirProver) CommitRound(tr *transcript.Transcript, logDomain, bits int) (stark.Digest, field.Fp4, field.Fp4, field.Fp, error) {
	var root stark.Digest
	var z, y field.Fp4
	if err := wp.live(); err != nil {
		return root, z, y, 0, err
	}
	if bits < 0 || bits > transcript.MaxBits {
		return root, z, y, 0, fmt.Errorf("%w: proof-of-work bits %d outside [0, %d]", ErrWhirState, bits, transcript.MaxBits)
	}
	// The absorb index the grind starts from: the observes and samples before it depend only on
	// the counts, not the values.
	probe := *tr
	probe.ObserveDigest(stark.Digest{})
	probe.SampleExt()
	probe.ObserveExt(field.Fp4{})
	_, absorbIdx, _ := probe.State()
	tt, err := wp.deviceTranscript(tr, 1)
	if err != nil {
		return root, z, y, 0, err
	}
	b, tree, err := wp.encodeCommit(logDomain)
	if err != nil {
		return root, z, y, 0, err
	}
	if err := tt.EncodeObserveRoot(b, tree, 0); err != nil {
		return root, z, y, 0, err
	}
	n := 1 << wp.d
	if wp.horner, err = wp.grow(wp.horner, "whir horner scratch", kernels.HornerScratchLen(n)); err != nil {
		return root, z, y, 0, err
	}
	at, err := kernels.EncodeHornerLogged(b, wp.dev, wp.coeffs, n, tt.Log, 0, wp.horner)
	if err != nil {
		return root, z, y, 0, err
	}
	if err := tt.EncodeObserveSample(b, wp.horner.Buffer, 4*at, 4, false, 0); err != nil {
		return root, z, y, 0, err
	}
	var g *kernels.Grind
	slice := uint32(0)
	if bits > 0 {
		var unlock func()
		if g, unlock, err = wp.be.grinder(); err != nil {
			return root, z, y, 0, err
		}
		defer unlock()
		slice = uint32(min(uint64(g.SliceSize(bits)), uint64(field.P)))
		if err := g.EncodeSearchFrom(b, tt.State(), absorbIdx, bits, 0, slice); err != nil {
			return root, z, y, 0, err
		}
	}
	if root, err = tree.Root(); err != nil {
		return root, z, y, 0, err
	}
	log, err := tt.ReadLog(1)
	if err != nil {
		return root, z, y, 0, err
	}
	z = log[0]
	var v [1]kernels.Mont4
	if err := wp.horner.Read(v[:], at); err != nil {
		return root, z, y, 0, err
	}
	y = kernels.Fp4Of(v[0])
	if bits == 0 {
		return root, z, y, 0, nil
	}
	for base := uint32(0); ; {
		w, ok, err := g.ReadResult()
		if err != nil || ok {
			return root, z, y, field.Fp(w), err
		}
		if base += slice; uint64(base) >= uint64(field.P) {
			return root, z, y, 0, transcript.ErrNoWitness
		}
		count := uint32(min(uint64(slice), uint64(field.P)-uint64(base)))
		if err := g.EncodeSearchFrom(wp.dev.Batch(), tt.State(), absorbIdx, bits, base, count); err != nil {
			return root, z, y, 0, err
		}
	}
}

// EvalFolded returns Σ_b coeffs[b]·z^b (device Horner passes, one sync, 16 bytes).
func (wp *whirProver) EvalFolded(z field.Fp4) (field.Fp4, error) {
	if err := wp.live(); err != nil {
		return field.Fp4{}, err
	}
	b := wp.dev.Batch()
	if err := wp.encodeCoeffs(b); err != nil {
		return field.Fp4{}, err
	}
	n := 1 << wp.d
	var err error
	if wp.horner, err = wp.grow(wp.horner, "whir horner scratch", kernels.HornerScratchLen(n)); err != nil {
		return field.Fp4{}, err
	}
	at, err := kernels.EncodeHorner(b, wp.dev, wp.coeffs, n, z, wp.horner)
	if err != nil {
		return field.Fp4{}, err
	}
	var v [1]kernels.Mont4
	if err := wp.horner.Read(v[:], at); err != nil {
		return field.Fp4{}, err
	}
	return kernels.Fp4Of(v[0]), nil
}

// FinalPoly downloads the coefficient table of the current f (one sync).
func (wp *whirProver) FinalPoly() ([]field.Fp4, error) {
	if err := wp.live(); err != nil {
		return nil, err
	}
	b := wp.dev.Batch()
	if err := wp.encodeCoeffs(b); err != nil {
		return nil, err
	}
	v := make([]kernels.Mont4, 1<<wp.d)
	if err := wp.coeffs.Read(v, 0); err != nil {
		return nil, err
	}
	return kernels.Fp4SliceOf(v), nil
}

// openBegin starts an opening: a batch with any recorded fold encoded (a recorded weight stays
// recorded for after the download) and the query indices uploaded (the caller frees them).
func (wp *whirProver) openBegin(ys []int) (*gpu.Batch, *kernels.QueryIndices, error) {
	b := wp.dev.Batch()
	if err := wp.flushFold(b); err != nil {
		return nil, nil, err
	}
	q, err := kernels.UploadQueryIndices(wp.dev, ys)
	if err != nil {
		return nil, nil, err
	}
	return b, q, nil
}

// OpenInitial answers the round-0 queries on every initial commitment: the indices uploaded
// once, per commitment one batched gather of rows and paths from its kept codeword, or from its
// codeword encoded again a chunk of columns at a time (Committed.encodeOpenings), one sync for
// all, one download per commitment; the chunks are freed with the openings.
func (wp *whirProver) OpenInitial(ys []int) ([]stark.InitialOpening, error) {
	if err := wp.live(); err != nil {
		return nil, err
	}
	b, q, err := wp.openBegin(ys)
	if err != nil {
		return nil, err
	}
	defer q.Free()
	pending := make([]*kernels.PendingOpening, len(wp.commits))
	defer func() {
		for _, p := range pending {
			if p != nil {
				p.Free()
			}
		}
	}()
	for c, com := range wp.commits {
		if pending[c], err = com.encodeOpenings(b, q); err != nil {
			return nil, err
		}
	}
	out := make([]stark.InitialOpening, len(ys))
	for i := range out {
		out[i] = stark.InitialOpening{Rows: make([][][]field.Fp, len(wp.commits)), Paths: make([][]stark.Digest, len(wp.commits))}
	}
	for _, p := range pending {
		if err := p.Fetch(); err != nil { // the first download waits for the batch: the call's one sync
			return nil, err
		}
	}
	// The recorded weight's kernels run while the host makes the openings' rows and paths.
	if err := wp.encodeWeight(wp.dev.Batch()); err != nil {
		return nil, err
	}
	for c, p := range pending {
		o, err := p.Read()
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Rows[c], out[i].Paths[c] = o.Rows[i], o.Paths[i]
		}
	}
	return out, nil
}

// OpenCodeword answers the queries ys on codeword idx (one batched opening, one sync).
func (wp *whirProver) OpenCodeword(idx int, ys []int) ([]stark.CodewordOpening, error) {
	if err := wp.live(); err != nil {
		return nil, err
	}
	if idx < 0 || idx >= len(wp.trees) {
		return nil, fmt.Errorf("%w: codeword %d of %d", ErrWhirState, idx, len(wp.trees))
	}
	b, q, err := wp.openBegin(ys)
	if err != nil {
		return nil, err
	}
	defer q.Free()
	p, err := wp.trees[idx].EncodeOpenBatch(b, q)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	if err := p.Fetch(); err != nil { // the call's one sync
		return nil, err
	}
	// The recorded weight's kernels run while the host makes the openings.
	if err := wp.encodeWeight(wp.dev.Batch()); err != nil {
		return nil, err
	}
	o, err := p.Read()
	if err != nil {
		return nil, err
	}
	return codewordOpenings(o), nil
}

// codewordOpenings converts a folded codeword's batch opening (four base planes a row) to the
// stage's openings.
func codewordOpenings(bo *kernels.BatchOpening) []stark.CodewordOpening {
	out := make([]stark.CodewordOpening, len(bo.Rows))
	for i, rows := range bo.Rows {
		vals := make([]field.Fp4, len(rows))
		for t, r := range rows {
			vals[t] = field.Fp4{r[0], r[1], r[2], r[3]}
		}
		out[i] = stark.CodewordOpening{Values: vals, Path: bo.Paths[i]}
	}
	return out
}

// AccumulateWeight adds Σ_i coefs[i]·eq(pow_d(points[i]), ·) to w: the points and coefficients
// uploaded (32 bytes each; the queue is idle after the grind that precedes this call), the eq
// tables grown, and the work recorded (encodeWeight): one Fp4 product per point and entry of w,
// which the next opening encodes after its download and any other call before its own work.
// No sync.
func (wp *whirProver) AccumulateWeight(coefs, points []field.Fp4) error {
	if err := wp.live(); err != nil {
		return err
	}
	if len(coefs) != len(points) {
		return fmt.Errorf("%w: %d coefficients for %d points", ErrWhirState, len(coefs), len(points))
	}
	if len(points) == 0 {
		return nil
	}
	b := wp.dev.Batch()
	if err := wp.flush(b); err != nil {
		return err
	}
	// The points outside the base field first: the others' terms are base-by-Fp4 products
	// (kernels.WhirWeights). The sum's order does not change it.
	npts, baseFrom := len(points), 0
	pc := make([]field.Fp4, 0, 2*npts)
	for _, base := range []bool{false, true} {
		for i, z := range points {
			if z.IsBase() == base {
				pc = append(pc, z, coefs[i])
			}
		}
		if !base {
			baseFrom = len(pc) / 2
		}
	}
	var err error
	if wp.points, err = wp.grow(wp.points, "whir weight points", 2*npts); err != nil {
		return err
	}
	if err := wp.points.Write(0, kernels.Mont4Slice(pc)); err != nil {
		return err
	}
	if err := wp.recordWeight(npts, baseFrom); err != nil {
		return err
	}
	return b.Err()
}

// Release frees every buffer of the prover (the commitments stay).
func (wp *whirProver) Release() {
	if wp.released {
		return
	}
	wp.released = true
	if wp.final != nil {
		wp.final.free()
	}
	for _, t := range wp.trees {
		t.Free()
	}
	if wp.sc != nil {
		wp.sc.Close()
	}
	if wp.muIdx != nil {
		wp.muIdx.Free()
		wp.muIdx = nil
	}
	if wp.eqLoBase != nil {
		wp.eqLoBase.Free()
		wp.eqLoBase = nil
	}
	bufs := []*gpu.Array[kernels.Mont4]{wp.f[0], wp.f[1], wp.w[0], wp.w[1], wp.coeffs, wp.horner, wp.mu, wp.kq, wp.kHalves, wp.points, wp.eqLo, wp.eqHi}
	for _, a := range bufs {
		if a != nil {
			a.Free()
		}
	}
	for _, a := range wp.codewords {
		a.Free()
	}
	if wp.trLog != nil {
		wp.trLog.Close()
		wp.trLog = nil
	}
	wp.trees, wp.codewords = nil, nil
	wp.f, wp.w = [2]*gpu.Array[kernels.Mont4]{}, [2]*gpu.Array[kernels.Mont4]{}
	wp.coeffs, wp.horner, wp.mu, wp.kq, wp.kHalves, wp.points, wp.eqLo, wp.eqHi = nil, nil, nil, nil, nil, nil, nil, nil
}

// chainMaxPowBits bounds the query-phase proof of work ChainRounds grinds on the device: one
// search over the first 2^30 candidates (kernels.Grind.EncodeSearchAll) misses a 24-bit witness
// with probability e^−64; beyond it the stage's loop runs the rounds.
const chainMaxPowBits = 24

var _ stark.WhirDeviceChain = (*whirProver)(nil)

// ChainRounds implements stark.WhirDeviceChain: every round but the last, and the last round's
// sumcheck rounds, encoded one after another with the transcript on the device and one sync at
// the end. Per round: the sumcheck rounds (as SumcheckRounds), the fold at the last logged bound
// value (kernels.EncodeFoldLogged), the commitment and its transcript steps (as CommitRound), the
// query-phase grind over the first 2^30 candidates from the sponge's state, the witness observed
// and the query indices and γ sampled (kernels.DeviceTranscript.EncodeWhirQueries), the next
// round's weight terms accumulated into w (as AccumulateWeight), and the openings gathered at the
// device's indices (kernels.DeviceQueryIndices), read at the end. The trees' scratch and a
// streamed opening's chunk are freed once encoded. Log layout: round r from r·(4k + 6): its
// sumcheck rounds (4 entries each: s(1), s(2), witness, bound value), z, y, the query witness, γ,
// the root (two entries); behind them the final polynomial and the transcript's state, which the
// sync downloads with the log (chainLogCap). Every round's indices lie in one buffer. After the
// sync the host observes the final polynomial from that state and encodes the last round's query
// phase (encodeFinalQueries, stark.WhirChainRun.Final); the chain's indices and openings are read
// after that with settled downloads (gpu.Device.DownloadSettled), which do not wait for it.
func (wp *whirProver) ChainRounds(tr *transcript.Transcript, p params.SystemParams) (*stark.WhirChainRun, error) {
	if err := wp.live(); err != nil {
		return nil, err
	}
	k, R := p.Whir.K, len(p.Whir.Rounds)
	fbits, qpow := p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits
	m := p.LSkip + p.NStack
	if !chainable(p) || k != wp.k || wp.alpha != nil || wp.weight != nil || wp.d != m || len(wp.trees) != 0 {
		if wp.muShadow != nil {
			return nil, fmt.Errorf("%w: WHIR rounds of a prover that made μ cannot run as a chain", ErrWhirState)
		}
		return nil, stark.ErrDeviceRoundsUnsupported
	}
	per := 4*k + 6
	// A prover that made μ continues its transcript (μ's entries first in the log); another
	// starts one in tr's state. The grinds' absorb indices depend only on the counts of what was
	// observed and sampled before them: a copy of tr fed zeros gives them.
	log0 := 0
	b := wp.dev.Batch()
	var shadow transcript.Transcript
	if wp.muShadow != nil {
		log0, shadow = muLogLen, *wp.muShadow
	} else {
		if wp.trLog != nil && wp.trLog.Log.Len() < chainLogCap(p) {
			wp.trLog.Close()
			wp.trLog = nil
		}
		if wp.trLog == nil {
			var err error
			if wp.trLog, err = wp.be.hash.NewDeviceTranscript(chainLogCap(p)); err != nil {
				return nil, err
			}
		}
		st, ai, si := tr.State()
		if err := wp.trLog.EncodeSetState(b, st, ai, si); err != nil {
			return nil, err
		}
		shadow = *tr
	}
	tt := wp.trLog
	logLen := log0 + chainLogLen(p)
	var g *kernels.Grind
	if qpow > 0 {
		var unlock func()
		var err error
		if g, unlock, err = wp.be.grinder(); err != nil {
			return nil, err
		}
		defer unlock()
	}
	// Every round's query indices (and the witness found after them), copied into one buffer at
	// the end: one download.
	idxOff := make([]int, R)
	for r := range R - 1 {
		idxOff[r+1] = idxOff[r] + p.Whir.Rounds[r].NumQueries + 1
	}
	idxs := make([]*gpu.Array[uint32], R)
	var err error
	if idxs[R-1], err = gpu.AllocArrayUninit[uint32](wp.dev, "whir query indices", idxOff[R-1]); err != nil {
		return nil, err
	}
	idxAll := idxs[R-1]
	var initial []*kernels.PendingOpening
	codeword := make([]*kernels.PendingOpening, R-1)
	defer func() {
		for _, a := range idxs {
			if a != nil {
				a.Free()
			}
		}
		for _, o := range append(initial, codeword...) {
			if o != nil {
				o.Free()
			}
		}
	}()
	lrs := m + p.LogBlowup
	var zero field.Fp4
	for r := range R {
		base := log0 + r*per
		for i := range k {
			var err error
			if i > 0 {
				src, dst := wp.cur, 1-wp.cur
				err = wp.sc.EncodeFoldRoundLogged(b, wp.tables(src, wp.d), wp.tables(dst, wp.d-1), tt.Log, base+4*(i-1)+3)
				wp.cur, wp.d = dst, wp.d-1
			} else {
				err = wp.sc.EncodeRound(b, wp.tables(wp.cur, wp.d))
			}
			if err != nil {
				return nil, err
			}
			if err := tt.EncodeSumcheckRoundGrind(b, wp.sc, base+4*i, fbits); err != nil {
				return nil, err
			}
			shadow.ObserveExt(zero)
			shadow.ObserveExt(zero)
			if fbits > 0 {
				shadow.Observe(0)
				shadow.Sample()
			}
			shadow.SampleExt()
		}
		// The last bound value's fold, at its logged value.
		alphaAt := base + 4*(k-1) + 3
		src, dst := wp.cur, 1-wp.cur
		n := wp.d - 1
		for _, t := range [][2]*gpu.Array[kernels.Mont4]{{wp.f[src], wp.f[dst]}, {wp.w[src], wp.w[dst]}} {
			if err := kernels.EncodeFoldLogged(b, wp.dev, t[0], 2<<n, t[1], 1<<n, 1, n, tt.Log, alphaAt); err != nil {
				return nil, err
			}
		}
		wp.cur, wp.d, wp.coeffsValid = dst, n, false
		if r == R-1 {
			// The final polynomial's coefficients, copied behind the log for its download.
			if err := wp.encodeCoeffs(b); err != nil {
				return nil, err
			}
			b.Copy(tt.Log.Buffer, 16*logLen, wp.coeffs.Buffer, 0, 16<<wp.d)
			break
		}
		// The commitment, z sampled, y = EvalFolded(z) observed and logged.
		cb, tree, err := wp.encodeCommit(lrs - 1)
		if err != nil {
			return nil, err
		}
		b = cb
		zAt := base + 4*k
		if err := tt.EncodeObserveRoot(b, tree, zAt); err != nil {
			return nil, err
		}
		if err := tree.EncodeCopyRoot(b, tt.Log.Buffer, 16*(zAt+4)); err != nil {
			return nil, err
		}
		tree.ReleaseScratch()
		if wp.horner, err = wp.grow(wp.horner, "whir horner scratch", kernels.HornerScratchLen(1<<wp.d)); err != nil {
			return nil, err
		}
		at, err := kernels.EncodeHornerLogged(b, wp.dev, wp.coeffs, 1<<wp.d, tt.Log, zAt, wp.horner)
		if err != nil {
			return nil, err
		}
		if err := tt.EncodeObserveSample(b, wp.horner.Buffer, 4*at, 4, false, 0); err != nil {
			return nil, err
		}
		b.Copy(tt.Log.Buffer, 16*(zAt+1), wp.horner.Buffer, 16*at, 16)
		shadow.ObserveDigest(stark.Digest{})
		shadow.SampleExt()
		shadow.ObserveExt(zero)
		// The query-phase grind, then the indices and γ; the next round's weight terms.
		q := kernels.WhirQueries{N: p.Whir.Rounds[r].NumQueries, QBits: lrs - k, ZAt: zAt, At: zAt + 2}
		if qpow > 0 {
			_, absorbIdx, _ := shadow.State()
			if err := g.EncodeSearchAll(b, tt, absorbIdx, qpow); err != nil {
				return nil, err
			}
			q.Witness = g.Result()
			shadow.Observe(0)
			shadow.Sample()
		}
		if idxs[r], err = gpu.AllocArrayUninit[uint32](wp.dev, "whir round query indices", q.N+1); err != nil {
			return nil, err
		}
		q.Idx = idxs[r]
		npts := q.N + 1
		if wp.points, err = wp.grow(wp.points, "whir weight points", 2*npts); err != nil {
			return nil, err
		}
		q.Weights = wp.points
		if err := tt.EncodeWhirQueries(b, q); err != nil {
			return nil, err
		}
		for range q.N {
			shadow.Sample()
		}
		shadow.SampleExt()
		// The out-of-domain point, then the queries ω^idx (base field).
		if err := wp.recordWeight(npts, 1); err != nil {
			return nil, err
		}
		if err := wp.encodeWeight(b); err != nil {
			return nil, err
		}
		// The openings at the device's indices, read after the sync.
		qi, err := kernels.DeviceQueryIndices(q.Idx, q.N)
		if err != nil {
			return nil, err
		}
		if r == 0 {
			for _, com := range wp.commits {
				o, err := com.encodeOpenings(b, qi)
				if err != nil {
					return nil, err
				}
				initial = append(initial, o)
			}
		} else if codeword[r], err = wp.trees[r-1].EncodeOpenBatch(b, qi); err != nil {
			return nil, err
		}
		lrs--
	}
	for r := range R - 1 {
		b.Copy(idxAll.Buffer, 4*idxOff[r], idxs[r].Buffer, 0, 4*(idxOff[r+1]-idxOff[r]))
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	nf := 1 << wp.d
	log, sponge, ai, si, err := tt.ReadLogState(logLen + nf) // the one sync
	if err != nil {
		return nil, err
	}
	run := &stark.WhirChainRun{Rounds: make([]stark.WhirChainRound, R-1), FinalPoly: log[logLen:]}
	log = log[:logLen]
	// The last round's query phase behind the chain, from the device's state with the final
	// polynomial observed here: encoded before the chain's outputs are read (their downloads do
	// not wait for it), so that the device grinds while the host reads them and ProveWhir replays
	// the chain.
	ft := *tr
	if err := ft.SetState(sponge, ai, si); err != nil {
		return nil, err
	}
	flat := make([]field.Fp, 0, 4*nf)
	for _, c := range run.FinalPoly {
		flat = append(flat, c[:]...)
	}
	ft.ObserveSlice(flat)
	st, fai, fsi := ft.State()
	if run.Final, err = wp.encodeFinalQueries(wp.dev.Batch(), tt, g, st, fai, fsi, p); err != nil {
		return nil, err
	}
	idxv := make([]uint32, idxOff[R-1])
	if err := idxAll.ReadSettled(idxv, 0); err != nil {
		return nil, err
	}
	sumchecks := func(base int) ([][2]field.Fp4, []field.Fp, []field.Fp4) {
		polys, ws, alphas := make([][2]field.Fp4, k), make([]field.Fp, k), make([]field.Fp4, k)
		for i := range k {
			e := base + 4*i
			polys[i] = [2]field.Fp4{log[e], log[e+1]}
			ws[i] = log[e+2][0]
			alphas[i] = log[e+3]
		}
		return polys, ws, alphas
	}
	if wp.muShadow != nil {
		var w [1]uint32
		if err := wp.muIdx.ReadSettled(w[:], 0); err != nil {
			return nil, err
		}
		if p.Whir.MuPowBits > 0 && w[0] == noWitness {
			return nil, fmt.Errorf("%w: no μ witness of %d bits among the first 2^30 candidates", stark.ErrDeviceTranscript, p.Whir.MuPowBits)
		}
		run.MuOnDevice, run.MuWitness, run.Mu = true, log[0][0], log[1]
	}
	for r := range R - 1 {
		cr := &run.Rounds[r]
		base := log0 + r*per
		cr.Polys, cr.Witnesses, cr.Alphas = sumchecks(base)
		e := base + 4*k
		copy(cr.Root[:4], log[e+4][:])
		copy(cr.Root[4:], log[e+5][:])
		cr.Z, cr.Y = log[e], log[e+1]
		cr.QueryWitness, cr.Gamma = log[e+2][0], log[e+3]
		n := p.Whir.Rounds[r].NumQueries
		v := idxv[idxOff[r] : idxOff[r]+n+1]
		if qpow > 0 && v[n] == noWitness {
			return nil, fmt.Errorf("%w: WHIR round %d: no query-phase witness of %d bits among the first 2^30 candidates", stark.ErrDeviceTranscript, r, qpow)
		}
		cr.QueryIndices = make([]int, n)
		for i := range n {
			cr.QueryIndices[i] = int(v[i])
		}
		if r == 0 {
			cr.Initial = make([]stark.InitialOpening, n)
			for i := range cr.Initial {
				cr.Initial[i] = stark.InitialOpening{Rows: make([][][]field.Fp, len(wp.commits)), Paths: make([][]stark.Digest, len(wp.commits))}
			}
			for c, o := range initial {
				if err := o.FetchSettled(); err != nil {
					return nil, err
				}
				bo, err := o.Read()
				if err != nil {
					return nil, err
				}
				for i := range cr.Initial {
					cr.Initial[i].Rows[c], cr.Initial[i].Paths[c] = bo.Rows[i], bo.Paths[i]
				}
			}
			continue
		}
		if err := codeword[r].FetchSettled(); err != nil {
			return nil, err
		}
		bo, err := codeword[r].Read()
		if err != nil {
			return nil, err
		}
		cr.Codeword = codewordOpenings(bo)
	}
	run.LastPolys, run.LastWitnesses, run.LastAlphas = sumchecks(log0 + (R-1)*per)
	return run, nil
}

// noWitness is kernels.Grind's result for a range without a witness.
const noWitness = 0xffffffff

var _ stark.WhirDeviceFinal = (*whirProver)(nil)

// FinalQueries implements stark.WhirDeviceFinal: from a device transcript set to tr's state, the
// last round's query phase as finalQueries encodes it; one sync (the log's download), the
// indices and the opening downloaded after it.
func (wp *whirProver) FinalQueries(tr *transcript.Transcript, p params.SystemParams) (*stark.WhirFinalQueries, error) {
	if err := wp.live(); err != nil {
		return nil, err
	}
	if !finalOnDevice(p) || len(wp.trees) != len(p.Whir.Rounds)-1 {
		return nil, stark.ErrDeviceRoundsUnsupported
	}
	if wp.trLog == nil || wp.trLog.Log.Len() < 2 {
		if wp.trLog != nil {
			wp.trLog.Close()
		}
		var err error
		if wp.trLog, err = wp.be.hash.NewDeviceTranscript(2); err != nil {
			return nil, err
		}
	}
	var g *kernels.Grind
	if p.Whir.QueryPhasePowBits > 0 {
		var unlock func()
		var err error
		if g, unlock, err = wp.be.grinder(); err != nil {
			return nil, err
		}
		defer unlock()
	}
	st, ai, si := tr.State()
	f, err := wp.encodeFinalQueries(wp.dev.Batch(), wp.trLog, g, st, ai, si, p)
	if err != nil {
		return nil, err
	}
	return f.Wait()
}

// finalOnDevice reports whether the last round's query phase can run on the device with
// parameters p: a committed codeword to open (R ≥ 2) and a proof of work that one search over
// the first 2^30 candidates finds.
func finalOnDevice(p params.SystemParams) bool {
	qpow := p.Whir.QueryPhasePowBits
	return len(p.Whir.Rounds) >= 2 && qpow >= 0 && qpow <= chainMaxPowBits
}

// finalQueries is the last round's query phase encoded on the device (stark.WhirPendingFinal):
// from a device transcript set to a given state (the one after the final polynomial was
// observed), the proof of work ground (kernels.Grind.EncodeSearchAll, by g, locked by the
// caller while it encodes), its witness observed and the query indices and γ sampled
// (whir_tr_queries: witness and γ into log entries 0 and 1), the last committed codeword opened
// at the device's indices. Wait reads it back; a prover's Release frees one not waited for.
type finalQueries struct {
	wp   *whirProver
	tt   *kernels.DeviceTranscript
	n    int
	qpow int
	idx  *gpu.Array[uint32]
	op   *kernels.PendingOpening
}

var _ stark.WhirPendingFinal = (*finalQueries)(nil)

// encodeFinalQueries encodes the last round's query phase into b (no sync) and records it as
// the prover's pending one.
func (wp *whirProver) encodeFinalQueries(b *gpu.Batch, tt *kernels.DeviceTranscript, g *kernels.Grind, st [poseidon2.Width]field.Fp, ai, si int, p params.SystemParams) (*finalQueries, error) {
	R, k, qpow := len(p.Whir.Rounds), p.Whir.K, p.Whir.QueryPhasePowBits
	if wp.final != nil {
		return nil, fmt.Errorf("%w: the last round's query phase encoded twice", ErrWhirState)
	}
	n := p.Whir.Rounds[R-1].NumQueries
	qbits := p.LSkip + p.NStack + p.LogBlowup - (R - 1) - k
	tree := wp.trees[R-2]
	if qbits < 0 || 1<<qbits != tree.QueryStride() {
		return nil, fmt.Errorf("%w: the last round's %d-bit queries on a codeword of %d query groups", ErrWhirState, qbits, tree.QueryStride())
	}
	if err := tt.EncodeSetState(b, st, ai, si); err != nil {
		return nil, err
	}
	q := kernels.WhirQueries{N: n, QBits: qbits, ZAt: 0, At: 0}
	if qpow > 0 {
		if err := g.EncodeSearchAll(b, tt, ai, qpow); err != nil {
			return nil, err
		}
		q.Witness = g.Result()
	}
	f := &finalQueries{wp: wp, tt: tt, n: n, qpow: qpow}
	var err error
	if f.idx, err = gpu.AllocArrayUninit[uint32](wp.dev, "whir final query indices", n+1); err != nil {
		return nil, err
	}
	q.Idx = f.idx
	// The weight terms are written and not used (no round follows).
	if wp.points, err = wp.grow(wp.points, "whir weight points", 2*(n+1)); err != nil {
		f.free()
		return nil, err
	}
	q.Weights = wp.points
	if err := tt.EncodeWhirQueries(b, q); err != nil {
		f.free()
		return nil, err
	}
	qi, err := kernels.DeviceQueryIndices(q.Idx, n)
	if err != nil {
		f.free()
		return nil, err
	}
	if f.op, err = tree.EncodeOpenBatch(b, qi); err != nil {
		f.free()
		return nil, err
	}
	wp.final = f
	return f, nil
}

// Wait implements stark.WhirPendingFinal: one sync (the log's download), the indices and the
// opening downloaded after it.
func (f *finalQueries) Wait() (*stark.WhirFinalQueries, error) {
	wp := f.wp
	if err := wp.live(); err != nil {
		return nil, err
	}
	if wp.final != f {
		return nil, fmt.Errorf("%w: the last round's query phase waited for twice", ErrWhirState)
	}
	defer f.free()
	log, err := f.tt.ReadLog(2) // the one sync
	if err != nil {
		return nil, err
	}
	v := make([]uint32, f.n+1)
	if err := f.idx.Read(v, 0); err != nil {
		return nil, err
	}
	if f.qpow > 0 && v[f.n] == noWitness {
		return nil, fmt.Errorf("%w: WHIR's last round: no query-phase witness of %d bits among the first 2^30 candidates", stark.ErrDeviceTranscript, f.qpow)
	}
	bo, err := f.op.Read()
	if err != nil {
		return nil, err
	}
	out := &stark.WhirFinalQueries{Witness: log[0][0], Gamma: log[1], QueryIndices: make([]int, f.n), Codeword: codewordOpenings(bo)}
	for i := range f.n {
		out.QueryIndices[i] = int(v[i])
	}
	return out, nil
}

// free releases the query phase's buffers (in queue order on GPUs) and its place in the prover.
func (f *finalQueries) free() {
	if f.idx != nil {
		f.idx.Free()
		f.idx = nil
	}
	if f.op != nil {
		f.op.Free()
		f.op = nil
	}
	if f.wp.final == f {
		f.wp.final = nil
	}
}
