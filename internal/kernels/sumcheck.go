package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The shared product-sumcheck family (shaders/common/sumcheck.metal), used by the stacked opening
// reduction and by WHIR: round sums, folds and eq tables over column-major Fp4 tables.
//
// An Fp4 value on the device is a Mont4, 4 consecutive Montgomery words (bb4.h); Fp4 indices
// below count such elements (word index = 4·Fp4 index). A table set has Cols columns of
// 2^LogRows rows, column c starting at Fp4 index c·Stride of its buffer.
//
// The EncodeSumRows functions take uint32 words: they add each word of a row as a base-field
// value, whatever the rows hold (Fp4 sums of the stacked reduction and GKR, the zerocheck
// family's per-point sums), so their partials are words.
//
// The typical round loop (one sync per round, none per bind):
//
//	sc := kernels.NewSumcheck(dev)            // per prover: owns the partials and the result
//	b := dev.Batch()
//	sc.EncodeRound(b, t)                       // first round: tables as built
//	s1, s2, _ := sc.ReadRound()                // the round's only sync, 32 bytes
//	// bind α: record it; the next round folds and sums in one pass:
//	sc.EncodeFoldRound(b, t, next, α)          // t → next (ping-pong buffers)
//	s1, s2, _ = sc.ReadRound()
//	// after the last bind: EncodeFold (no round sums) and read what is needed.

// ProductTables is a pair of table sets f and w of the same shape: Cols columns of 2^LogRows
// Fp4 rows, column c at Fp4 index c·Stride of F and of W.
type ProductTables struct {
	F, W    *gpu.Array[Mont4]
	Cols    int
	LogRows int
	Stride  int
}

// check validates the shape against the buffers.
func (t ProductTables) check(op string) error {
	if t.Cols <= 0 || t.LogRows < 0 || t.LogRows > 30 || t.Stride < 1<<t.LogRows && t.Cols > 1 {
		return fmt.Errorf("kernels: %s: %d columns of 2^%d rows, stride %d", op, t.Cols, t.LogRows, t.Stride)
	}
	need := (t.Cols-1)*t.Stride + 1<<t.LogRows
	if err := checkArray(op, t.F, need); err != nil {
		return err
	}
	return checkArray(op, t.W, need)
}

// Sumcheck runs the round reductions of one prover: it owns the per-group partials and the
// 8-uint result (s1 then s2, Montgomery) of the last encoded round. Not for concurrent use.
type Sumcheck struct {
	dev       *gpu.Device
	maxGroups int
	partials  *gpu.Array[uint32]
	result    *gpu.Array[uint32]
}

// NewSumcheck allocates the partials (8 uints per group of the largest dispatch) and the result.
func NewSumcheck(dev *gpu.Device) (*Sumcheck, error) {
	s := &Sumcheck{dev: dev, maxGroups: maxReduceGroups(dev)}
	var err error
	if s.partials, err = gpu.AllocArray[uint32](dev, "sumcheck partials", 8*s.maxGroups); err != nil {
		return nil, err
	}
	if s.result, err = gpu.AllocArray[uint32](dev, "sumcheck result", 8); err != nil {
		s.partials.Free()
		return nil, err
	}
	return s, nil
}

// Close frees the buffers.
func (s *Sumcheck) Close() {
	if s.partials != nil {
		s.partials.Free()
		s.result.Free()
		s.partials, s.result = nil, nil
	}
}

// Result is the device buffer of the last encoded round: s1 (uints 0..3) and s2 (4..7),
// Montgomery. ReadRound downloads it; a caller may also read it together with other buffers.
func (s *Sumcheck) Result() *gpu.Array[uint32] { return s.result }

// EncodeRound encodes the round sums of t (LogRows ≥ 1) into Result: s1 = Σ_c Σ_y
// f_c[2y+1]·w_c[2y+1], s2 = Σ_c Σ_y (2f_c[2y+1] − f_c[2y])·(2w_c[2y+1] − w_c[2y]) (cpuref's
// stackingProver.Round and whirProver.SumcheckRound). Two dispatches: per-group partials, then
// their sum.
func (s *Sumcheck) EncodeRound(b *gpu.Batch, t ProductTables) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := t.check("Round"); err != nil {
		return err
	}
	if t.LogRows < 1 {
		return fmt.Errorf("kernels: Round: tables of one row have no round")
	}
	pairs := t.Cols << (t.LogRows - 1)
	g, tp, tg, out := s.roundShape("sc_round_partials", pairs)
	dispatchScRoundPartials(b, g, tp, t.F.Buffer, t.W.Buffer, out.Buffer, scRoundParams{logHalf: uint32(t.LogRows - 1), cols: uint32(t.Cols), stride: uint32(t.Stride)}, tg)
	return s.encodeSum(b, out, int(g.X))
}

// EncodeFoldRound encodes the fold of src at alpha into dst (both f and w; dst.LogRows =
// src.LogRows − 1 ≥ 1, same Cols) and the round sums of dst into Result, in one pass over src:
// the bind of one round and the sums of the next. dst must not overlap src.
func (s *Sumcheck) EncodeFoldRound(b *gpu.Batch, src, dst ProductTables, alpha field.Fp4) error {
	return s.encodeFoldRound(b, src, dst, MontFp4(alpha), nil, scAlphaParam)
}

// scAlphaParam is ScFoldRoundParams.alpha_at for α passed as a parameter (SC_ALPHA_PARAM).
const scAlphaParam = 0xffffffff

// EncodeFoldRoundLogged is EncodeFoldRound at the bound value log[at] that a device transcript's
// step wrote (DeviceTranscript.EncodeSumcheckRound): the host need not know it.
func (s *Sumcheck) EncodeFoldRoundLogged(b *gpu.Batch, src, dst ProductTables, log *gpu.Array[Mont4], at int) error {
	if at < 0 || at >= log.Len() {
		return fmt.Errorf("kernels: FoldRound: bound value %d of a log of %d", at, log.Len())
	}
	return s.encodeFoldRound(b, src, dst, [4]uint32{}, log, uint32(at))
}

// encodeFoldRound is EncodeFoldRound at a (alphaAt = scAlphaParam) or at log[alphaAt].
func (s *Sumcheck) encodeFoldRound(b *gpu.Batch, src, dst ProductTables, a [4]uint32, log *gpu.Array[Mont4], alphaAt uint32) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := src.check("FoldRound"); err != nil {
		return err
	}
	if err := dst.check("FoldRound"); err != nil {
		return err
	}
	if dst.Cols != src.Cols || dst.LogRows != src.LogRows-1 || dst.LogRows < 1 {
		return fmt.Errorf("kernels: FoldRound: 2^%d×%d into 2^%d×%d (need one row variable less, at least 2 rows)", src.LogRows, src.Cols, dst.LogRows, dst.Cols)
	}
	if dst.F.Buffer == src.F.Buffer || dst.F.Buffer == src.W.Buffer || dst.W.Buffer == src.F.Buffer || dst.W.Buffer == src.W.Buffer {
		return fmt.Errorf("kernels: FoldRound: the folded tables must not share a buffer with the source")
	}
	alphas := s.result.Buffer // bound but unread when α is a parameter
	if log != nil {
		alphas = log.Buffer
	}
	pairs := dst.Cols << (dst.LogRows - 1)
	g, tp, tg, out := s.roundShape("sc_fold_round_partials", pairs)
	dispatchScFoldRoundPartials(b, g, tp, src.F.Buffer, src.W.Buffer, dst.F.Buffer, dst.W.Buffer, out.Buffer, scFoldRoundParams{logHalf: uint32(dst.LogRows - 1), cols: uint32(dst.Cols), srcStride: uint32(src.Stride), dstStride: uint32(dst.Stride), a0: a[0], a1: a[1], a2: a[2], a3: a[3], alphaAt: alphaAt}, alphas, tg)
	return s.encodeSum(b, out, int(g.X))
}

// ReadRound downloads Result (32 bytes; the sync of the round when work is pending).
func (s *Sumcheck) ReadRound() (s1, s2 field.Fp4, err error) {
	if err := s.live(); err != nil {
		return s1, s2, err
	}
	var v [8]uint32
	if err := s.result.Read(v[:], 0); err != nil {
		return s1, s2, err
	}
	return Fp4OfMont(v[0:4]), Fp4OfMont(v[4:8]), nil
}

func (s *Sumcheck) live() error {
	if s.partials == nil {
		return fmt.Errorf("kernels: Sumcheck used after Close")
	}
	return nil
}

// encodeSum adds the rows of partials into result, unless the partials kernel wrote its one row
// there (out: roundShape).
func (s *Sumcheck) encodeSum(b *gpu.Batch, out *gpu.Array[uint32], rows int) error {
	if out == s.result {
		return b.Err()
	}
	return EncodeSumRows(b, s.dev, s.partials, s.result, rows, 8)
}

// oneGroupRound bounds the groups of a round that runs in one group instead (each thread taking
// up to this many groups' share of the pairs): that group's row of sums is the round's result, one
// launch instead of two. The late rounds of a sumcheck are that small, and there the host's
// launch, not the device, sets the pace (about 7 µs a launch on an H200 host). At 8 the first
// such round of keccakf's stacked reduction took 22 µs in one group against 18 µs for the two
// launches before it; at 4, 16 µs against 19 µs (timelines of one proof, H200).
const oneGroupRound = 4

// roundShape is reduceShape for a round's partials kernel, with the buffer it writes: the
// partials, or Result itself for a round of one group (oneGroupRound).
func (s *Sumcheck) roundShape(kernel string, pairs int) (groups, tpg gpu.Dim3, tgBytes uint32, out *gpu.Array[uint32]) {
	groups, tpg, tgBytes = s.reduceShape(kernel, pairs)
	if groups.X <= oneGroupRound {
		return gpu.D1(1), tpg, tgBytes, s.result
	}
	return groups, tpg, tgBytes, s.partials
}

// maxReduceGroups bounds the groups of a partials dispatch: on GPUs 4 groups of 256 threads per
// compute unit, on the host 8 one-thread groups per worker (enough to balance the workers).
func maxReduceGroups(dev *gpu.Device) int {
	cu := max(dev.Limits().ComputeUnits, 1)
	if isHost(dev) {
		return 8 * cu
	}
	return 4 * cu
}

// reduceShape is the dispatch of a partials kernel over pairs work items (each thread takes runs
// of MSL_LANES items on the host) and its threadgroup memory (32 bytes per thread).
func (s *Sumcheck) reduceShape(kernel string, pairs int) (groups, tpg gpu.Dim3, tgBytes uint32) {
	t := groupSize(s.dev, kernel, gpuGroup)
	if isHost(s.dev) {
		t = 1 // barrier kernels: one work item per group (host barriers cost per item)
		pairs = (pairs + 15) / 16
	}
	g := min(max((pairs+t-1)/t, 1), s.maxGroups)
	return gpu.D1(uint32(g)), gpu.D1(uint32(t)), uint32(32 * t)
}

// EncodeSumRows encodes out[k] = Σ_{r<rows} in[r·width + k] for k < width (Fp sums of each uint:
// Fp4 rows add componentwise), one group (sc_sum_rows): the second pass of the partials kernels.
func EncodeSumRows(b *gpu.Batch, dev *gpu.Device, in, out *gpu.Array[uint32], rows, width int) error {
	return EncodeSumRowsAt(b, dev, in, out, 0, rows, width)
}

// SumRowsMidRows is the number of rows of the mid buffer EncodeSumRowsVia uses (the first level's
// groups, at most). The second level is one group's serial walk over them: with 1024, keccakf-1024's
// sums took 417 µs a proof on an H200 (the second level 19–32 µs a round), with 256 353 µs (the
// first level's longer chunks cost less than the second level saves; 128: 387, 64: 456 µs).
const SumRowsMidRows = 256

// EncodeSumRowsVia is EncodeSumRowsAt for many rows: on a GPU, when there are more rows than a
// few per group, a first level (sc_sum_row_blocks) sums chunks of rows in up to SumRowsMidRows
// groups into mid (SumRowsMidRows·width words), and one group adds those; a single group alone
// reads the rows at one compute unit's bandwidth (a 13 MB partials buffer: milliseconds).
func EncodeSumRowsVia(b *gpu.Batch, dev *gpu.Device, in, mid, out *gpu.Array[uint32], outOff, rows, width int) error {
	groups := min(SumRowsMidRows, (rows+63)/64)
	if isHost(dev) || mid == nil || groups < 2 {
		return EncodeSumRowsAt(b, dev, in, out, outOff, rows, width)
	}
	if err := checkArray("SumRowsVia", in, rows*width); err != nil {
		return err
	}
	if err := checkArray("SumRowsVia", mid, groups*width); err != nil {
		return err
	}
	chunk := (rows + groups - 1) / groups
	groups = (rows + chunk - 1) / chunk
	t := groupSize(dev, "sc_sum_row_blocks", gpuGroup)
	dispatchScSumRowBlocks(b, gpu.D1(uint32(groups)), gpu.D1(uint32(t)), in.Buffer, mid.Buffer,
		scSumBlocksParams{rows: uint32(rows), width: uint32(width), chunk: uint32(chunk)}, uint32(4*t))
	return EncodeSumRowsAt(b, dev, mid, out, outOff, groups, width)
}

// EncodeSumRowsAt is EncodeSumRows into out from index outOff: out[outOff + k] = Σ_r in[r·width + k].
func EncodeSumRowsAt(b *gpu.Batch, dev *gpu.Device, in, out *gpu.Array[uint32], outOff, rows, width int) error {
	if rows <= 0 || width <= 0 || outOff < 0 {
		return fmt.Errorf("kernels: SumRows: %d rows of %d into offset %d", rows, width, outOff)
	}
	if err := checkArray("SumRows", in, rows*width); err != nil {
		return err
	}
	if err := checkArray("SumRows", out, outOff+width); err != nil {
		return err
	}
	t := groupSize(dev, "sc_sum_rows", gpuGroup)
	if isHost(dev) {
		t = 1
	}
	dispatchScSumRows(b, gpu.D1(1), gpu.D1(uint32(t)), in.Buffer, out.Buffer, scSumRowsParams{rows: uint32(rows), width: uint32(width), outOff: uint32(outOff)}, uint32(4*t))
	return b.Err()
}

// EncodeFold encodes the fold of one table set at alpha, out of place: dst[c·dstStride + y] =
// src[c·srcStride + 2y] + α·(src[.. + 2y+1] − src[.. + 2y]) for c < cols, y < 2^logRows, where
// src has 2^(logRows+1) rows (cpuref foldTable). dst must not overlap src.
func EncodeFold(b *gpu.Batch, dev *gpu.Device, src *gpu.Array[Mont4], srcStride int, dst *gpu.Array[Mont4], dstStride, cols, logRows int, alpha field.Fp4) error {
	return encodeFold(b, dev, src, srcStride, dst, dstStride, cols, logRows, MontFp4(alpha), nil, scAlphaParam)
}

// EncodeFoldLogged is EncodeFold at the bound value log[at] that a device transcript's step
// wrote (DeviceTranscript.EncodeZcRound): the host need not know it.
func EncodeFoldLogged(b *gpu.Batch, dev *gpu.Device, src *gpu.Array[Mont4], srcStride int, dst *gpu.Array[Mont4], dstStride, cols, logRows int, log *gpu.Array[Mont4], at int) error {
	if log == nil || at < 0 || at >= log.Len() {
		return fmt.Errorf("kernels: Fold: a bound value at %d of the log", at)
	}
	return encodeFold(b, dev, src, srcStride, dst, dstStride, cols, logRows, [4]uint32{}, log, uint32(at))
}

// encodeFold is EncodeFold at a (alphaAt = scAlphaParam) or at log[alphaAt].
func encodeFold(b *gpu.Batch, dev *gpu.Device, src *gpu.Array[Mont4], srcStride int, dst *gpu.Array[Mont4], dstStride, cols, logRows int, a [4]uint32, log *gpu.Array[Mont4], alphaAt uint32) error {
	if cols <= 0 || logRows < 0 || logRows > 29 || (cols > 1 && (srcStride < 2<<logRows || dstStride < 1<<logRows)) {
		return fmt.Errorf("kernels: Fold: %d columns of 2^%d rows, strides %d → %d", cols, logRows+1, srcStride, dstStride)
	}
	if err := checkArray("Fold", src, (cols-1)*srcStride+2<<logRows); err != nil {
		return err
	}
	if err := checkArray("Fold", dst, (cols-1)*dstStride+1<<logRows); err != nil {
		return err
	}
	if src.Buffer == dst.Buffer {
		return fmt.Errorf("kernels: Fold: in place")
	}
	alphas := src.Buffer // bound but unread when α is a parameter
	if log != nil {
		alphas = log.Buffer
	}
	g, t := shapeFor(dev, "sc_fold", cols<<logRows)
	dispatchScFold(b, g, t, src.Buffer, dst.Buffer, alphas, scFoldParams{logRows: uint32(logRows), cols: uint32(cols), srcStride: uint32(srcStride), dstStride: uint32(dstStride),
		a0: a[0], a1: a[1], a2: a[2], a3: a[3], alphaAt: alphaAt})
	return b.Err()
}

// EncodeEqExpand encodes out[b] (+)= Σ_{t<count} lo[t·2^logLo + (b mod 2^logLo)]·hi[t·2^logHi +
// (b >> logLo)] for b < 2^(logLo+logHi) (Fp4 tables from index 0; += when accumulate). With
// EqTables' halves this is eq(r, ·) over 2^len(r) points, built on the device from two tables of
// about 2^(len(r)/2) entries; any product-form table (WHIR's Möbius eq, a scaled eq) factors the
// same way. EqExpand.Encode places the tables at offsets.
func EncodeEqExpand(b *gpu.Batch, dev *gpu.Device, lo, hi, out *gpu.Array[Mont4], logLo, logHi, count int, accumulate bool) error {
	return EqExpand{Lo: lo, Hi: hi, Out: out, LogLo: logLo, LogHi: logHi, Count: count, Accumulate: accumulate}.Encode(b, dev)
}

// EqExpand is EncodeEqExpand with every table at an offset (Fp4 indices): out[OutOff + b] (+)=
// Σ_t Lo[LoOff + t·2^LogLo + (b mod 2^LogLo)]·Hi[HiOff + t·2^LogHi + (b >> LogLo)].
type EqExpand struct {
	Lo, Hi, Out          *gpu.Array[Mont4]
	LoOff, HiOff, OutOff int
	LogLo, LogHi, Count  int
	Accumulate           bool
}

// Encode encodes the expansion (sc_eq_expand).
func (e EqExpand) Encode(b *gpu.Batch, dev *gpu.Device) error {
	if e.LogLo < 0 || e.LogHi < 0 || e.LogLo+e.LogHi > 28 || e.Count <= 0 || e.LoOff < 0 || e.HiOff < 0 || e.OutOff < 0 {
		return fmt.Errorf("kernels: EqExpand: 2^%d × 2^%d, %d products, offsets %d %d %d", e.LogLo, e.LogHi, e.Count, e.LoOff, e.HiOff, e.OutOff)
	}
	if err := checkArray("EqExpand", e.Lo, e.LoOff+e.Count<<e.LogLo); err != nil {
		return err
	}
	if err := checkArray("EqExpand", e.Hi, e.HiOff+e.Count<<e.LogHi); err != nil {
		return err
	}
	if err := checkArray("EqExpand", e.Out, e.OutOff+1<<(e.LogLo+e.LogHi)); err != nil {
		return err
	}
	acc := uint32(0)
	if e.Accumulate {
		acc = 1
	}
	g, t := shapeFor(dev, "sc_eq_expand", 1<<(e.LogLo+e.LogHi))
	dispatchScEqExpand(b, g, t, e.Lo.Buffer, e.Hi.Buffer, e.Out.Buffer, scEqExpandParams{logLo: uint32(e.LogLo), logTotal: uint32(e.LogLo + e.LogHi), count: uint32(e.Count), accumulate: acc, loOff: uint32(e.LoOff), hiOff: uint32(e.HiOff), outOff: uint32(e.OutOff)})
	return b.Err()
}

// EqTables splits eq(r, ·) (bit i of an index ↔ r[i], stark.EvalsEqHypercube) into the halves
// EncodeEqExpand multiplies: lo = eq(r[:h], ·), hi = eq(r[h:], ·) with h = len(r)/2, in device
// form. The host work is 2^h + 2^(len(r)−h) products.
func EqTables(r []field.Fp4) (lo, hi []Mont4, logLo int) {
	h := len(r) / 2
	return Mont4Slice(evalsEq(r[:h])), Mont4Slice(evalsEq(r[h:])), h
}

// The halves of the eq tables of every suffix of a point r (EqTables of r[j:] for j = 0..len(r),
// laid out lo_0, hi_0, lo_1, hi_1, …), which EncodeEqSuffixes expands, are made on the device
// (EncodeEqSuffixHalves; the tests' eqSuffixHalves makes them on the host).

// EqSuffixHalvesLen is the number of halves' entries of a point of n coordinates.
func EqSuffixHalvesLen(n int) int {
	total := 0
	for m := 0; m <= n; m++ {
		total += 1<<(m/2) + 1<<(m-m/2)
	}
	return total
}

// EncodeEqSuffixHalves encodes the halves of x[:n]'s suffixes into halves at Fp4 index halvesOff,
// made on the device from the coordinates (sc_eq_suffix_halves).
func EncodeEqSuffixHalves(b *gpu.Batch, dev *gpu.Device, x *gpu.Array[Mont4], n int, halves *gpu.Array[Mont4], halvesOff int) error {
	if n < 0 || n > 28 || halvesOff < 0 {
		return fmt.Errorf("kernels: EqSuffixHalves: point of %d coordinates, offset %d", n, halvesOff)
	}
	if err := checkArray("EqSuffixHalves", x, max(n, 1)); err != nil {
		return err
	}
	total := EqSuffixHalvesLen(n)
	if err := checkArray("EqSuffixHalves", halves, halvesOff+total); err != nil {
		return err
	}
	g, t := shapeFor(dev, "sc_eq_suffix_halves", total)
	dispatchScEqSuffixHalves(b, g, t, x.Buffer, halves.Buffer, scEqHalvesParams{n: uint32(n), halvesOff: uint32(halvesOff)})
	return b.Err()
}

// EncodeEqSuffixes encodes the eq tables of every suffix of a point of n coordinates from their
// halves (EncodeEqSuffixHalves's, at Fp4 index halvesOff): table j = eq(r_j..r_{n−1}, ·) into out at Fp4
// index outOff + 2^(n+1) − 2^(n−j+1), 2^(n−j) entries, for j = 0..n. One dispatch
// (sc_eq_suffixes) where an EqExpand each took n + 1: a launch costs the host more than these
// small tables cost the device.
func EncodeEqSuffixes(b *gpu.Batch, dev *gpu.Device, halves *gpu.Array[Mont4], halvesOff int, out *gpu.Array[Mont4], outOff, n int) error {
	if n < 0 || n > 28 || halvesOff < 0 || outOff < 0 {
		return fmt.Errorf("kernels: EqSuffixes: point of %d coordinates, offsets %d %d", n, halvesOff, outOff)
	}
	need := 0
	for m := n; m >= 0; m-- {
		need += 1<<(m/2) + 1<<(m-m/2)
	}
	if err := checkArray("EqSuffixes", halves, halvesOff+need); err != nil {
		return err
	}
	total := 2<<n - 1
	if err := checkArray("EqSuffixes", out, outOff+total); err != nil {
		return err
	}
	g, t := shapeFor(dev, "sc_eq_suffixes", total)
	dispatchScEqSuffixes(b, g, t, halves.Buffer, out.Buffer, scEqSuffixParams{n: uint32(n), halvesOff: uint32(halvesOff), outOff: uint32(outOff)})
	return b.Err()
}

// evalsEq is stark.EvalsEqHypercube (repeated here: kernels does not import stark).
func evalsEq(x []field.Fp4) []field.Fp4 {
	out := make([]field.Fp4, 1<<len(x))
	out[0] = field.Fp4One
	for i, xi := range x {
		h := 1 << i
		one := field.Fp4One.Sub(xi)
		for j := 0; j < h; j++ {
			out[j+h] = out[j].Mul(xi)
			out[j] = out[j].Mul(one)
		}
	}
	return out
}

// Mont4Of returns x as the kernels hold it.
func Mont4Of(x field.Fp4) Mont4 {
	return Mont4{MontOf(x[0]), MontOf(x[1]), MontOf(x[2]), MontOf(x[3])}
}

// Fp4Of returns the Fp4 value of m.
func Fp4Of(m Mont4) field.Fp4 {
	return field.Fp4{CanonicalOf(m[0]), CanonicalOf(m[1]), CanonicalOf(m[2]), CanonicalOf(m[3])}
}

// Mont4Slice converts Fp4 values to device form.
func Mont4Slice(v []field.Fp4) []Mont4 { return convertSlice(v, Mont4Of) }

// Fp4SliceOf converts device-form Fp4 values back.
func Fp4SliceOf(v []Mont4) []field.Fp4 { return convertSlice(v, Fp4Of) }

// MontFp4 returns the four Montgomery uints of x: the words of Mont4Of for the launchers'
// parameter structs and for the families still on uint32 buffers.
func MontFp4(x field.Fp4) [4]uint32 {
	return [4]uint32{uint32(MontOf(x[0])), uint32(MontOf(x[1])), uint32(MontOf(x[2])), uint32(MontOf(x[3]))}
}

// Fp4OfMont returns the Fp4 value of four Montgomery uints.
func Fp4OfMont(v []uint32) field.Fp4 {
	return field.Fp4{CanonicalOf(Mont(v[0])), CanonicalOf(Mont(v[1])), CanonicalOf(Mont(v[2])), CanonicalOf(Mont(v[3]))}
}

// MontFp4Slice converts Fp4 values to device layout (4 Montgomery uints each).
func MontFp4Slice(v []field.Fp4) []uint32 {
	out := make([]uint32, 4*len(v))
	for i, x := range v {
		m := MontFp4(x)
		copy(out[4*i:], m[:])
	}
	return out
}

// Fp4SliceOfMont converts device-layout Fp4 values (4 Montgomery uints each) back.
func Fp4SliceOfMont(v []uint32) []field.Fp4 {
	out := make([]field.Fp4, len(v)/4)
	for i := range out {
		out[i] = Fp4OfMont(v[4*i : 4*i+4])
	}
	return out
}
