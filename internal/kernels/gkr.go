package kernels

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The LogUp-GKR family (shaders/gkr/gkr.metal): the leaves of the fraction tree from the interactions
// of resident traces, the tree's layers and the rounds of the layer sumchecks (cpuref gkr.go
// computes the same values on the host).
//
// A fraction (p, q) is a GkrFraction: p then q, each a Mont4; a layer of the tree is an array of
// fractions, eq values an array of Mont4. The layer sumcheck of layer j works on "tables of R rows":
// 2R fractions, row y being fractions 2y (p0, q0) and 2y + 1 (p1, q1), with R eq values: the layer
// itself is the tables of R = 2^(j−1) rows, and the folds keep that layout. A round's value is
//
//	s(x) = Σ_y eq(x, y)·(p0·q1 + p1·q0 + λ·q0·q1)(x, y),  x = 1, 2, 3,
//
// over the lowest row variable x (each column at x is lo + x·(hi − lo) of rows 2y, 2y + 1); binding
// x = r folds each column to lo + r·(hi − lo). GkrSumcheck runs a layer's rounds: EncodeRound for
// the first (the layer as built), then EncodeFoldRound, which folds the previous round's r into
// smaller tables and sums the next round in one pass; one 48-byte download per round.

// GkrFraction is a fraction p/q of the tree as the kernels hold it.
type GkrFraction struct{ P, Q Mont4 }

// GkrFractionWords is the number of words of a GkrFraction.
const GkrFractionWords = 8

// GkrFractionsOf converts p_0, q_0, p_1, q_1, … to device fractions (len(v) even).
func GkrFractionsOf(v []field.Fp4) []GkrFraction {
	out := make([]GkrFraction, len(v)/2)
	for i := range out {
		out[i] = GkrFraction{Mont4Of(v[2*i]), Mont4Of(v[2*i+1])}
	}
	return out
}

// Fp4sOfGkrFractions converts device fractions back to p_0, q_0, p_1, q_1, ….
func Fp4sOfGkrFractions(f []GkrFraction) []field.Fp4 {
	out := make([]field.Fp4, 0, 2*len(f))
	for _, x := range f {
		out = append(out, Fp4Of(x.P), Fp4Of(x.Q))
	}
	return out
}

// GkrLeaves is the leaf evaluation of one run of rows of a trace: its interactions-only program
// (constraints.Interactions outputs) runs on the rows, and row r of interaction k gives the
// fraction (norm·count, α + Σ_j β^j·m_j + β^len·(bus + 1)) at leaves base_k + r + m·h for m < Reps
// (norm = Reps^−1: a trace shorter than its block repeats with scaled numerators).
type GkrLeaves struct {
	Run RowRun
	// Outs is scratch of NumOutput·T Montgomery values (the program's outputs, as the rows family
	// writes them).
	Outs *gpu.Array[Mont]
	// Inter is GkrInteractionTable on the device, Consts GkrLeafConsts, for NumInteractions
	// interactions whose longest message has MaxMsgLen fields.
	Inter                      *gpu.Array[uint32]
	Consts                     *gpu.Array[Mont4]
	NumInteractions, MaxMsgLen int
	// Reps is 2^LogSize / h of the trace's blocks (≥ 1).
	Reps int
	// Leaves is the leaf layer; LeafEnd bounds the leaves the trace's blocks cover
	// (max_k base_k + Reps·h).
	Leaves  *gpu.Array[GkrFraction]
	LeafEnd int
}

// GkrInteractionTable returns gkr_leaves' description of p's interactions, whose blocks start at
// leaf bases[k]: 4 words per interaction (count output, index of its message list in the table,
// message length, base), then the message output lists.
func GkrInteractionTable(p *constraints.Program, bases []int) ([]uint32, error) {
	n := len(p.Interactions)
	if len(bases) != n {
		return nil, fmt.Errorf("kernels: GKR: %d block bases for %d interactions", len(bases), n)
	}
	out := make([]uint32, 4*n, 4*n+n*p.MaxMsgLen)
	for k, it := range p.Interactions {
		if bases[k] < 0 || bases[k] >= maxElems/GkrFractionWords {
			return nil, fmt.Errorf("kernels: GKR: block base %d", bases[k])
		}
		out[4*k], out[4*k+1], out[4*k+2], out[4*k+3] = uint32(it.Count), uint32(len(out)), uint32(len(it.Message)), uint32(bases[k])
		for _, m := range it.Message {
			out = append(out, uint32(m))
		}
	}
	return out, nil
}

// GkrLeafConsts returns gkr_leaves' Fp4 constants for p's interactions: d_k = α +
// β^len_k·(bus_k + 1) for each interaction k, then β^j for j < MaxMsgLen.
func GkrLeafConsts(p *constraints.Program, alpha, beta field.Fp4) []Mont4 {
	pows := field.PowersFp4(beta, p.MaxMsgLen+1)
	v := make([]field.Fp4, 0, len(p.Interactions)+p.MaxMsgLen)
	for _, it := range p.Interactions {
		v = append(v, pows[len(it.Message)].MulBase(field.New(uint32(it.Bus)+1)).Add(alpha))
	}
	v = append(v, pows[:p.MaxMsgLen]...)
	if len(v) == 0 {
		v = append(v, field.Fp4{})
	}
	return Mont4Slice(v)
}

// GkrLeafConstsLen is the length of GkrLeafConsts(p, …).
func GkrLeafConstsLen(p *constraints.Program) int { return max(len(p.Interactions)+p.MaxMsgLen, 1) }

// Encode encodes the leaves of the run (gkr_leaves). The slots of every part must be filled
// (RowRun.EncodeFillSlots); gkr_leaves writes the selectors.
func (l GkrLeaves) Encode(b *gpu.Batch, dev *gpu.Device) error {
	r := l.Run
	if err := r.check("GkrLeaves"); err != nil {
		return err
	}
	T := r.Points()
	if l.NumInteractions <= 0 || l.Reps < 1 || l.LeafEnd < l.Reps*r.Height {
		return fmt.Errorf("kernels: GkrLeaves: %d interactions, %d repetitions, leaves end at %d", l.NumInteractions, l.Reps, l.LeafEnd)
	}
	if err := checkArray("GkrLeaves", l.Outs, r.Prog.NumOutput*T); err != nil {
		return err
	}
	if err := checkArray("GkrLeaves", l.Inter, 4*l.NumInteractions); err != nil {
		return err
	}
	if err := checkArray("GkrLeaves", l.Consts, l.NumInteractions+l.MaxMsgLen); err != nil {
		return err
	}
	if err := checkArray("GkrLeaves", l.Leaves, l.LeafEnd); err != nil {
		return err
	}
	norm := field.New(uint32(l.Reps)).Inverse()
	g, t := shapeFor(dev, "gkr_leaves", T)
	dispatchGkrLeaves(b, g, t, r.Prog.Words.Buffer, r.CP.Buffer, r.Slots.Buffer, r.Regs.Buffer, l.Outs.Buffer, l.Inter.Buffer, l.Consts.Buffer,
		l.Leaves.Buffer, gkrLeafParams{points: uint32(T), row0: uint32(r.Row0), height: uint32(r.Height), selSlot: uint32(r.Prog.NumSlots - 3),
			nInter: uint32(l.NumInteractions), reps: uint32(l.Reps), norm: uint32(MontOf(norm))})
	return b.Err()
}

// EncodeGkrPad encodes leaves[i] = (0, α) for from ≤ i < to (gkr_pad): the padding leaves.
func EncodeGkrPad(b *gpu.Batch, dev *gpu.Device, leaves *gpu.Array[GkrFraction], from, to int, alpha field.Fp4) error {
	if from < 0 || to < from {
		return fmt.Errorf("kernels: GkrPad: leaves [%d, %d)", from, to)
	}
	if err := checkArray("GkrPad", leaves, to); err != nil {
		return err
	}
	if to == from {
		return nil
	}
	a := MontFp4(alpha)
	g, t := shapeFor(dev, "gkr_pad", to-from)
	dispatchGkrPad(b, g, t, leaves.Buffer, gkrPadParams{from: uint32(from), to: uint32(to), a0: a[0], a1: a[1], a2: a[2], a3: a[3]})
	return b.Err()
}

// EncodeGkrLayer encodes one layer of the fraction tree (gkr_layer): dst[y] = src[2y] + src[2y+1]
// as fractions, (p_a·q_b + p_b·q_a, q_a·q_b), for y < n. dst must not overlap src.
func EncodeGkrLayer(b *gpu.Batch, dev *gpu.Device, src, dst *gpu.Array[GkrFraction], n int) error {
	if n <= 0 {
		return fmt.Errorf("kernels: GkrLayer: %d fractions", n)
	}
	if err := checkArray("GkrLayer", src, 2*n); err != nil {
		return err
	}
	if err := checkArray("GkrLayer", dst, n); err != nil {
		return err
	}
	if src.Buffer == dst.Buffer {
		return fmt.Errorf("kernels: GkrLayer: in place")
	}
	g, t := shapeFor(dev, "gkr_layer", n)
	dispatchGkrLayer(b, g, t, src.Buffer, dst.Buffer, gkrLayerParams{n: uint32(n)})
	return b.Err()
}

// GkrSumcheck runs the rounds of layer sumchecks: it owns the per-group partials and the 12-word
// result (s(1), s(2), s(3), Montgomery) of the last encoded round, words that EncodeSumRows adds.
// Not for concurrent use.
type GkrSumcheck struct {
	dev        *gpu.Device
	maxGroups  int
	partials   *gpu.Array[uint32]
	result     *gpu.Array[uint32]
	lastGroups int // the partial rows of the last encoded round
}

// NewGkrSumcheck allocates the partials (12 uints per group of the largest dispatch) and the result.
func NewGkrSumcheck(dev *gpu.Device) (*GkrSumcheck, error) {
	s := &GkrSumcheck{dev: dev, maxGroups: maxReduceGroups(dev)}
	var err error
	if s.partials, err = gpu.AllocArray[uint32](dev, "gkr sumcheck partials", 12*s.maxGroups); err != nil {
		return nil, err
	}
	if s.result, err = gpu.AllocArray[uint32](dev, "gkr sumcheck result", 12); err != nil {
		s.partials.Free()
		return nil, err
	}
	return s, nil
}

// Close frees the buffers.
func (s *GkrSumcheck) Close() {
	if s.partials != nil {
		s.partials.Free()
		s.result.Free()
		s.partials, s.result = nil, nil
	}
}

func (s *GkrSumcheck) live() error {
	if s.partials == nil {
		return fmt.Errorf("kernels: GkrSumcheck used after Close")
	}
	return nil
}

// shape is the dispatch of a partials kernel over pairs pairs of rows: on GPUs groups of up to 256
// threads, on the host one-thread groups (barriers cost per work item) taking runs of MSL_LANES
// pairs; at most maxGroups groups.
func (s *GkrSumcheck) shape(kernel string, pairs int) (groups, tpg gpu.Dim3, tgBytes uint32) {
	t := groupSize(s.dev, kernel, gpuGroup)
	if isHost(s.dev) {
		t = 1
		pairs = (pairs + 1<<hostLogLanes - 1) >> hostLogLanes
	}
	g := min(max((pairs+t-1)/t, 1), s.maxGroups)
	return gpu.D1(uint32(g)), gpu.D1(uint32(t)), uint32(48 * t)
}

// split is the threads a pair of a round kernel over pairs pairs (GkrRoundParams.split): 3, one
// a point X, while three threads a pair fit 512 threads a compute unit (a round of so few pairs
// is each thread's chain of Fp4 products on a device mostly idle), else 1.
func (s *GkrSumcheck) split(pairs int) int {
	if 3*pairs <= 512*max(s.dev.Limits().ComputeUnits, 1) {
		return 3
	}
	return 1
}

// EncodeRound encodes the round sums of tables of 2^logRows rows (logRows ≥ 1) as built: frac holds
// their 2^(logRows+1) fractions from index 0, eq their eq values from Fp4 index eqOff.
func (s *GkrSumcheck) EncodeRound(b *gpu.Batch, eq *gpu.Array[Mont4], eqOff int, frac *gpu.Array[GkrFraction], logRows int, lambda field.Fp4) error {
	g, err := s.encodeRound(b, eq, eqOff, frac, logRows, lambda, nil, nil)
	if err != nil {
		return err
	}
	return EncodeSumRows(b, s.dev, s.partials, s.result, g, 12)
}

// EncodeFoldRound encodes the fold at r of src (tables of 2^(logRows+1) rows, eq values from
// eqSrc) into dst (2^logRows rows, logRows ≥ 1; eq values written from eqDst) and the round sums
// of the folded tables, in one pass. The eq ranges must not overlap, nor dst and src.
func (s *GkrSumcheck) EncodeFoldRound(b *gpu.Batch, eq *gpu.Array[Mont4], eqSrc, eqDst int, src, dst *gpu.Array[GkrFraction], logRows int, lambda, r field.Fp4) error {
	g, err := s.encodeFoldRound(b, eq, eqSrc, eqDst, src, dst, logRows, lambda, r, nil, nil)
	if err != nil {
		return err
	}
	return EncodeSumRows(b, s.dev, s.partials, s.result, g, 12)
}

// GkrFromLog says where the round kernels take λ and the bound value r from when the transcript
// runs on the device: their Fp4 indices in the log of a DeviceTranscript.
type GkrFromLog struct {
	Tr        *DeviceTranscript
	Lambda, R int
}

// GkrEqHalves are the halves of a layer's eq table that was not expanded (gkr_eq_at): lo at
// Fp4 index 0 of Halves (2^LogLo entries), hi right after it. A round kernel given them reads the
// table's entries as products of the halves' (the layer's first round and first fold, and the
// small rounds of a layer whose table no fold has written).
type GkrEqHalves struct {
	Halves *gpu.Array[Mont4]
	LogLo  int
}

// logLo checks h for a table of 2^logTable entries and returns the kernels' eq_log_lo
// (gkrNone: no halves) and the buffer they read them from (eq where none).
func (h *GkrEqHalves) logLo(what string, eq *gpu.Array[Mont4], logTable int) (*gpu.Buffer, uint32, error) {
	if h == nil {
		return eq.Buffer, gkrNone, nil
	}
	if h.LogLo < 0 || h.LogLo > logTable {
		return nil, 0, fmt.Errorf("kernels: %s: eq halves of 2^%d for a table of 2^%d", what, h.LogLo, logTable)
	}
	if err := checkArray(what, h.Halves, 1<<h.LogLo+1<<(logTable-h.LogLo)); err != nil {
		return nil, 0, err
	}
	return h.Halves.Buffer, uint32(h.LogLo), nil
}

// EncodeRoundLogged is EncodeRound with λ from the log, the sums left to tr.EncodeRound; with
// halves, eq's table is read from them (eq itself is not read).
func (s *GkrSumcheck) EncodeRoundLogged(b *gpu.Batch, eq *gpu.Array[Mont4], eqOff int, frac *gpu.Array[GkrFraction], logRows int, from GkrFromLog, halves *GkrEqHalves) error {
	_, err := s.encodeRound(b, eq, eqOff, frac, logRows, field.Fp4{}, &from, halves)
	return err
}

// EncodeFoldRoundLogged is EncodeFoldRound with λ and r from the log, the sums left to
// tr.EncodeRound; with halves, the source eq table is read from them.
func (s *GkrSumcheck) EncodeFoldRoundLogged(b *gpu.Batch, eq *gpu.Array[Mont4], eqSrc, eqDst int, src, dst *gpu.Array[GkrFraction], logRows int, from GkrFromLog, halves *GkrEqHalves) error {
	_, err := s.encodeFoldRound(b, eq, eqSrc, eqDst, src, dst, logRows, field.Fp4{}, field.Fp4{}, &from, halves)
	return err
}

// challengeAt is the kernels' index of a challenge (gkrNone: the parameter) and the buffer they
// read it from (any buffer when none is logged).
func (s *GkrSumcheck) challengeAt(from *GkrFromLog) (ch *gpu.Buffer, lambda, r uint32, err error) {
	if from == nil {
		return s.result.Buffer, gkrNone, gkrNone, nil
	}
	if from.Tr == nil || from.Tr.Log == nil {
		return nil, 0, 0, fmt.Errorf("kernels: GkrRound: no device transcript")
	}
	n := from.Tr.Log.Len()
	if from.Lambda < 0 || from.Lambda >= n || from.R < 0 || from.R >= n {
		return nil, 0, 0, fmt.Errorf("kernels: GkrRound: challenges at %d and %d of a log of %d", from.Lambda, from.R, n)
	}
	return from.Tr.Log.Buffer, uint32(from.Lambda), uint32(from.R), nil
}

// gkrNone is GKR_NONE of gkr.metal: a challenge taken from the parameters.
const gkrNone = 0xffffffff

func (s *GkrSumcheck) encodeRound(b *gpu.Batch, eq *gpu.Array[Mont4], eqOff int, frac *gpu.Array[GkrFraction], logRows int, lambda field.Fp4, from *GkrFromLog, halves *GkrEqHalves) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	if logRows < 1 || logRows > 28 || eqOff < 0 {
		return 0, fmt.Errorf("kernels: GkrRound: tables of 2^%d rows, eq at %d", logRows, eqOff)
	}
	eqh, logLo, err := halves.logLo("GkrRound", eq, logRows)
	if err != nil {
		return 0, err
	}
	if halves == nil {
		if err := checkArray("GkrRound", eq, eqOff+1<<logRows); err != nil {
			return 0, err
		}
	}
	if err := checkArray("GkrRound", frac, 2<<logRows); err != nil {
		return 0, err
	}
	ch, chL, _, err := s.challengeAt(from)
	if err != nil {
		return 0, err
	}
	split := s.split(1 << (logRows - 1))
	g, t, tg := s.shape("gkr_round_partials", split<<(logRows-1))
	l := MontFp4(lambda)
	dispatchGkrRoundPartials(b, g, t, eq.Buffer, frac.Buffer, s.partials.Buffer, ch, eqh, gkrRoundParams{logPairs: uint32(logRows - 1), eqOff: uint32(eqOff),
		l0: l[0], l1: l[1], l2: l[2], l3: l[3], chLambda: chL, split: uint32(split), eqLogLo: logLo}, tg)
	s.lastGroups = int(g.X)
	return int(g.X), b.Err()
}

func (s *GkrSumcheck) encodeFoldRound(b *gpu.Batch, eq *gpu.Array[Mont4], eqSrc, eqDst int, src, dst *gpu.Array[GkrFraction], logRows int, lambda, r field.Fp4, from *GkrFromLog, halves *GkrEqHalves) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	if logRows < 1 || logRows > 27 || eqSrc < 0 || eqDst < 0 {
		return 0, fmt.Errorf("kernels: GkrFoldRound: tables of 2^%d rows, eq at %d and %d", logRows, eqSrc, eqDst)
	}
	eqh, logLo, err := halves.logLo("GkrFoldRound", eq, logRows+1)
	if err != nil {
		return 0, err
	}
	if halves == nil {
		if eqSrc < eqDst+1<<logRows && eqDst < eqSrc+2<<logRows {
			return 0, fmt.Errorf("kernels: GkrFoldRound: eq ranges overlap")
		}
		if err := checkArray("GkrFoldRound", eq, max(eqSrc+2<<logRows, eqDst+1<<logRows)); err != nil {
			return 0, err
		}
	} else if err := checkArray("GkrFoldRound", eq, eqDst+1<<logRows); err != nil {
		return 0, err
	}
	if err := checkArray("GkrFoldRound", src, 4<<logRows); err != nil {
		return 0, err
	}
	if err := checkArray("GkrFoldRound", dst, 2<<logRows); err != nil {
		return 0, err
	}
	if src.Buffer == dst.Buffer {
		return 0, fmt.Errorf("kernels: GkrFoldRound: the folded tables must not share the source's buffer")
	}
	ch, chL, chR, err := s.challengeAt(from)
	if err != nil {
		return 0, err
	}
	split := s.split(1 << (logRows - 1))
	g, t, tg := s.shape("gkr_fold_round_partials", split<<(logRows-1))
	l, rm := MontFp4(lambda), MontFp4(r)
	dispatchGkrFoldRoundPartials(b, g, t, eq.Buffer, src.Buffer, dst.Buffer, s.partials.Buffer, ch, eqh, gkrFoldRoundParams{logPairs: uint32(logRows - 1),
		eqSrc: uint32(eqSrc), eqDst: uint32(eqDst), l0: l[0], l1: l[1], l2: l[2], l3: l[3], r0: rm[0], r1: rm[1], r2: rm[2], r3: rm[3],
		chLambda: chL, chR: chR, split: uint32(split), eqLogLo: logLo}, tg)
	s.lastGroups = int(g.X)
	return int(g.X), b.Err()
}

// ReadRound downloads the last encoded round's s(1), s(2), s(3) (48 bytes; the round's sync).
func (s *GkrSumcheck) ReadRound() ([3]field.Fp4, error) {
	var out [3]field.Fp4
	if err := s.live(); err != nil {
		return out, err
	}
	var v [12]uint32
	if err := s.result.Read(v[:], 0); err != nil {
		return out, err
	}
	for i := range out {
		out[i] = Fp4OfMont(v[4*i : 4*i+4])
	}
	return out, nil
}

// gkrLayerEndScratch is the threadgroup memory of gkr_tr_layer_end (GKR_LAYER_END_WORDS): the
// sponge's exchanges and outputs, the round constants (poseidon2_group.h), ξ (GKR_XI_MAX Fp4)
// and the two small tables of a half (GKR_HALF_SMALL Fp4 each: halves of up to
// gkrHalfMaxCoords coordinates).
const (
	gkrXiMax           = 32
	gkrHalfMaxCoords   = 14
	gkrEndWords        = 4 * (gkrXiMax + 2*(1<<(gkrHalfMaxCoords/2)))
	gkrLayerEndScratch = (48 + p2gRCLen + gkrEndWords) * 4
)

// EncodeGkrRound encodes the transcript step of the GKR round s encoded last (EncodeRoundLogged or
// EncodeFoldRoundLogged): its sums s(1), s(2), s(3) into Log[at .. at+3), observed, and the bound
// value sampled into Log[at+3].
func (t *DeviceTranscript) EncodeGkrRound(b *gpu.Batch, s *GkrSumcheck, at int) error {
	if err := t.live(); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	if at < 0 || at+4 > t.Log.Len() || s.lastGroups < 1 {
		return fmt.Errorf("kernels: DeviceTranscript: GKR round at %d of a log of %d (%d partial rows)", at, t.Log.Len(), s.lastGroups)
	}
	// One SIMD group: the round's partial rows are few, and the sponge runs on one SIMD group anyway.
	tpg, err := t.groupFor("gkr_tr_round", 32)
	if err != nil {
		return err
	}
	dispatchGkrTrRound(b, gpu.D1(1), gpu.D1(uint32(tpg)), s.partials.Buffer, t.Log.Buffer, t.state.Buffer, t.rc.Buffer,
		gkrTrRoundParams{groups: uint32(s.lastGroups), at: uint32(at)}, uint32(48*tpg+4*p2gRCLen))
	return b.Err()
}

// GkrLayerEnd is one layer's end on the device: layer 1's (EncodeLayerEnd), or a later layer's in
// its small rounds' launch (GkrSmallRounds.End), whose claims are the last two rows folded at the
// last bound value.
type GkrLayerEnd struct {
	// At: the claims go to Log[At .. At+4), μ to Log[At+4].
	At int
	// Next: a layer follows, whose λ goes to Log[LambdaAt] and whose eq halves (kernels.EqTables
	// of ξ = (μ, Log[RhoAt], Log[RhoAt+RhoStep], …), NXi coordinates, the first LogLo in lo; at
	// most 14 a half) to Halves: lo at 0, hi at 2^LogLo.
	Next                     bool
	LambdaAt, RhoAt, RhoStep int
	NXi, LogLo               int
	Halves                   *gpu.Array[Mont4]
}

// EncodeLayerEnd encodes layer 1's end e: its claims are layer1's two fractions as built.
func (t *DeviceTranscript) EncodeLayerEnd(b *gpu.Batch, layer1 *gpu.Array[GkrFraction], e GkrLayerEnd) error {
	if err := t.live(); err != nil {
		return err
	}
	n := t.Log.Len()
	if err := checkArray("GkrLayerEnd", layer1, 2); err != nil {
		return err
	}
	if e.At < 0 || e.At+5 > n {
		return fmt.Errorf("kernels: GkrLayerEnd: claims at %d, log of %d", e.At, n)
	}
	x, err := t.layerEndNext(e)
	if err != nil {
		return err
	}
	p := gkrTrLayerParams{at: uint32(e.At), lambdaAt: x.lambdaAt, rhoAt: x.rhoAt, rhoStep: x.rhoStep, nXi: x.nXi, logLo: x.logLo}
	// 256 threads on GPUs: the next layer's eq halves (up to 2^14 entries each) are made side by side.
	tpg, err := t.groupFor("gkr_tr_layer_end", 256)
	if err != nil {
		return err
	}
	dispatchGkrTrLayerEnd(b, gpu.D1(1), gpu.D1(uint32(tpg)), layer1.Buffer, t.Log.Buffer, t.state.Buffer, t.rc.Buffer, x.halves, p, gkrLayerEndScratch)
	return b.Err()
}

// gkrEndNext is the part of a layer end's parameters about the next layer (gkr_tr_layer_end's
// and gkr_tr_small_rounds'); lambdaAt is gkrNone for the last layer.
type gkrEndNext struct {
	lambdaAt, rhoAt, rhoStep, nXi, logLo uint32
	halves                               *gpu.Buffer
}

// layerEndNext checks e's next-layer fields against the log.
func (t *DeviceTranscript) layerEndNext(e GkrLayerEnd) (gkrEndNext, error) {
	x := gkrEndNext{lambdaAt: gkrNone, halves: t.Log.Buffer}
	if !e.Next {
		return x, nil
	}
	n := t.Log.Len()
	if e.LambdaAt < 0 || e.LambdaAt >= n || e.NXi < 1 || e.NXi > gkrXiMax || e.LogLo < 0 || e.LogLo > e.NXi ||
		e.NXi-e.LogLo > gkrHalfMaxCoords || e.LogLo > gkrHalfMaxCoords {
		return x, fmt.Errorf("kernels: GkrLayerEnd: λ at %d, ξ of %d coordinates (%d low)", e.LambdaAt, e.NXi, e.LogLo)
	}
	if last := e.RhoAt + (e.NXi-2)*e.RhoStep; e.NXi > 1 && (e.RhoAt < 0 || e.RhoStep < 0 || last >= n) {
		return x, fmt.Errorf("kernels: GkrLayerEnd: bound values from %d by %d in a log of %d", e.RhoAt, e.RhoStep, n)
	}
	if err := checkArray("GkrLayerEnd", e.Halves, 1<<e.LogLo+1<<(e.NXi-e.LogLo)); err != nil {
		return x, err
	}
	return gkrEndNext{lambdaAt: uint32(e.LambdaAt), rhoAt: uint32(max(e.RhoAt, 0)), rhoStep: uint32(e.RhoStep), nXi: uint32(e.NXi),
		logLo: uint32(e.LogLo), halves: e.Halves.Buffer}, nil
}

// GkrSmallLog bounds the rounds EncodeSmallRounds runs: from tables of at most 2^(GkrSmallLog+1)
// rows (GKR_SMALL_LOG of gkr.metal; 27 KiB of threadgroup memory with 128 threads).
const GkrSmallLog = 7

// GkrSmallRounds are the last rounds of one layer, run by gkr_tr_small_rounds in one group.
type GkrSmallRounds struct {
	// Eq and EqOff: the eq table the first round uses (Fold: the previous round's, twice the rows).
	Eq    *gpu.Array[Mont4]
	EqOff int
	// Src: the first round's tables, 2^(LogPairs+1) rows; with Fold the previous round's (twice
	// the rows), folded at the bound value at Log[RAt].
	Src      *gpu.Array[GkrFraction]
	LogPairs int
	Fold     bool
	RAt      int
	// LambdaAt: the layer's λ in the log; At: the first round's s(1), s(2), s(3), r go to
	// Log[At .. At+4), each next round's 4 later, down to one pair.
	LambdaAt, At int
	// End: the layer's end, run in the same launch after the last round.
	End GkrLayerEnd
	// EqHalves, where set, hold the eq table the first round (Fold: the previous round) reads,
	// which was not expanded (Eq is not read).
	EqHalves *GkrEqHalves
}

// EncodeSmallRounds encodes the rounds of e: 1 + LogPairs rounds, one launch.
func (t *DeviceTranscript) EncodeSmallRounds(b *gpu.Batch, e GkrSmallRounds) error {
	if err := t.live(); err != nil {
		return err
	}
	if e.LogPairs < 0 || e.LogPairs > GkrSmallLog {
		return fmt.Errorf("kernels: GkrSmallRounds: 2^%d pairs (at most 2^%d)", e.LogPairs, GkrSmallLog)
	}
	rows := 2 << e.LogPairs
	srcRows := rows
	if e.Fold {
		srcRows *= 2
	}
	if err := checkArray("GkrSmallRounds", e.Src, 2*srcRows); err != nil {
		return err
	}
	eqh, logLo, err := e.EqHalves.logLo("GkrSmallRounds", e.Eq, bits.Len(uint(srcRows))-1)
	if err != nil {
		return err
	}
	if e.EqHalves == nil {
		if err := checkArray("GkrSmallRounds", e.Eq, e.EqOff+srcRows); err != nil || e.EqOff < 0 {
			return fmt.Errorf("kernels: GkrSmallRounds: eq table of %d rows at %d: %v", srcRows, e.EqOff, err)
		}
	}
	n := t.Log.Len()
	rounds := e.LogPairs + 1
	if e.At < 0 || e.At+4*rounds > n || e.LambdaAt < 0 || e.LambdaAt >= n || (e.Fold && (e.RAt < 0 || e.RAt >= n)) {
		return fmt.Errorf("kernels: GkrSmallRounds: %d rounds at %d, λ at %d, r at %d, log of %d", rounds, e.At, e.LambdaAt, e.RAt, n)
	}
	tpg, err := t.groupFor("gkr_tr_small_rounds", 128)
	if err != nil {
		return err
	}
	body := 20*rows + 12*tpg
	if e.End.At < 0 || e.End.At+5 > n {
		return fmt.Errorf("kernels: GkrSmallRounds: the layer's claims at %d, log of %d", e.End.At, n)
	}
	x, err := t.layerEndNext(e.End)
	if err != nil {
		return err
	}
	p := gkrSmallParams{logPairs: uint32(e.LogPairs), fold: uint32(b2u(e.Fold)), rAt: uint32(max(e.RAt, 0)), eqOff: uint32(e.EqOff),
		lambdaAt: uint32(e.LambdaAt), at: uint32(e.At), eqLogLo: logLo, endAt: uint32(e.End.At), nextLambdaAt: x.lambdaAt,
		rhoAt: x.rhoAt, rhoStep: x.rhoStep, nXi: x.nXi, logLo: x.logLo}
	words := max(body, gkrEndWords) + 48 + p2gRCLen
	dispatchGkrTrSmallRounds(b, gpu.D1(1), gpu.D1(uint32(tpg)), e.Eq.Buffer, e.Src.Buffer, t.Log.Buffer, t.state.Buffer,
		t.rc.Buffer, eqh, x.halves, p, uint32(4*words))
	return b.Err()
}
