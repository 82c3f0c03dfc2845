package kernels

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The zerocheck family (shaders/constraints/zerocheck.metal): the device side of a batch constraint sumcheck
// over one AIR's constraint program (internal/constraints; spec B §4), trace by trace.
//
// Geometry. A trace of height h = 2^LogHeight is lifted to X·N rows (N = 2^LogN, X = 2^NLift,
// NLift = max(LogHeight − LogN, 0); row r of the lift is row r mod h) and cut into X blocks of N
// rows. A slot is a column (local or rotated: row r+1) or a selector column (is_first = [r ≡ 0 mod
// h], is_last = [r ≡ h−1 mod h], is_transition = 1 − is_last).
//
// Round 0 (EncodeUniRound). For every block x and every point ω_M^i (M = 2^LogM ≥ N) the slots
// take the values of their block interpolants f_x (degree < N through the block's rows at the
// N-th roots of unity), the program runs over the base field, and
//
//	S_k[i] = Σ_x e(x)·C_k(x, i),  k ∈ {Zc, Num, Den},
//
// C being the weighted combination of the outputs (constraints.Weights: Zc = Σ λ^K·constraint_K,
// Num = Σ eq3b_K·count_K, Den = Σ eq3b_K·β^J·field_KJ + DenConst when the AIR has interactions)
// and e a table of X Fp4 values. Values at the points: a pre-pass (zc_coeffs) computes every
// block's coefficients c_k (IDFT of N rows) of the columns whose local or rotated slot the program
// reads; f_x(ω_M^i) = Σ_k c_k·ω_M^{ik}, either one point at a time (point mode: N products per
// slot value; GPUs) or one coset of the N-th roots at a time (coset mode: the points
// ω_M^{g + (M/N)·b}, b < N, are the N-point DFT of c_k·ω_M^{gk}; the host device, lanes across
// columns). The rotated column's interpolant is rot_x(Z) = f_x(ω_N·Z) + (v_next − v_first)·
// L_{N−1}(Z) (v_first: the block's first row, v_next: the next block's first row, cyclically;
// L_{N−1} the Lagrange polynomial of ω_N^{N−1} on the N-th roots): both sides agree on the N-th
// roots and have degree < N. The selectors are [x = 0]·F(ω_M^i), [x = X−1]·L(ω_M^i) and 1 − the
// latter, F and L the interpolants of the first and last block's selector rows. The sums come back
// in point-class order q = g·N + b (i = g + (M/N)·b: ZcDomain.PointOf), 12 uints per class (Zc,
// Num, Den as Montgomery Fp4).
//
// BindUnivariate (EncodeBindUni): every stored slot becomes an Fp4 table of X rows,
// t(x) = Σ_{j<N} w_j·t(ω^j, x) (w: N Fp4 weights).
//
// Rounds j ≥ 1 (EncodeRound): over tables of 2^n rows (n ≥ 1), for pairs y < 2^(n−1) and X =
// 1..P, the slots take t[2y] + X·(t[2y+1] − t[2y]), the program runs over Fp4 and
// R_k[X] = Σ_y e'(y)·C_k(X, y) (e': 2^(n−1) Fp4 values). Folding the tables between rounds is the
// sumcheck family's EncodeFold.
//
// Device buffers: traces canonical and column-major (as loaded); everything else Montgomery. An
// Fp4 table set is NumTables() columns of Fp4 (4 uints each) at a stride; tables are numbered by
// the program's stored slots (ZcTrace.TableOf). Sums come out of sc_sum_rows at an offset of the
// caller's result buffer.
//
// Evaluators. zc_uni_eval and zc_round_eval instantiate the kernel bodies zc_uni_body and
// zc_round_body with ProgInterpreter (shaders/include/program_lanes.h: the bytecode interpreter).
// An evaluator generated for one AIR (straight-line code for its program) is a struct with the same
// two member templates, base and ext (memory layout, constants and emit calls as documented
// there); it gets its own two kernels, each a copy of zc_uni_eval / zc_round_eval naming it instead
// of ProgInterpreter, and EncodeUniRound / EncodeRound dispatch those kernels for traces of that
// program (the buffers and parameters are the same).

// ZcMaxLogN is the largest LogN (l_skip) the kernels take: their coset DFTs live in thread arrays
// of 2^5 entries.
const ZcMaxLogN = 5

// zcNone marks a slot or table that does not exist (ZC_NONE).
const zcNone = ^uint32(0)

// zcLanes is MSL_LANES on dev: the kernels of a host device (even one posing as a GPU in tests)
// are compiled with lanes.
func zcLanes(dev *gpu.Device) int {
	if dev.Kind() == gpu.KindHost {
		return 1 << hostLogLanes
	}
	return 1
}

// ZcDomain holds the round-0 tables of N = 2^LogN rows per block and M = 2^LogM points σ·ω_M^i
// (i < M): the powers ω_M^e (e < M), L_{N−1}(σ·ω_M^i) (i < M) and the coefficient scales σ^k/N
// (k < N), Montgomery, uploaded once. The shift σ is 1, or ω_2M for a shifted domain
// (NewZcShiftedDomain): points off the N-th roots of unity, where the zerocheck polynomial's
// quotient by Z^N − 1 is read (the round-0 kernels see σ only through these tables and the
// selector values of NewZcTrace).
type ZcDomain struct {
	LogN, LogM int
	Shift      field.Fp
	Tw, LRow   *gpu.Array[Mont]
	Scale      *gpu.Array[uint32]
}

// NewZcDomain computes and uploads the tables (LogN ≤ ZcMaxLogN, LogN ≤ LogM ≤ 20) of the
// points ω_M^i.
func NewZcDomain(dev *gpu.Device, logN, logM int) (*ZcDomain, error) {
	return newZcDomain(dev, logN, logM, field.One)
}

// NewZcShiftedDomain is NewZcDomain with the points ω_2M·ω_M^i: the odd powers of ω_2M, none of
// them an N-th root of unity (their N-th powers are odd powers of ω_{2M/N}).
func NewZcShiftedDomain(dev *gpu.Device, logN, logM int) (*ZcDomain, error) {
	if logM >= field.TwoAdicity {
		return nil, fmt.Errorf("kernels: ZcDomain: M = 2^%d has no shift", logM)
	}
	return newZcDomain(dev, logN, logM, field.TwoAdicGenerator(logM+1))
}

func newZcDomain(dev *gpu.Device, logN, logM int, shift field.Fp) (*ZcDomain, error) {
	if logN < 0 || logN > ZcMaxLogN || logM < logN || logM > 20 {
		return nil, fmt.Errorf("kernels: ZcDomain: N = 2^%d, M = 2^%d", logN, logM)
	}
	m, n := 1<<logM, 1<<logN
	pw := field.Powers(field.TwoAdicGenerator(logM), m)
	invN := field.Fp(uint32(n)).Inverse()
	lrow := make([]field.Fp, m)
	wn := field.TwoAdicGenerator(logN)
	for i := range lrow {
		// L_{N−1}(z) = (1/N)·Σ_k (z·ω_N)^k at z = σ·ω_M^i.
		var s field.Fp
		zw, acc := shift.Mul(pw[i]).Mul(wn), field.One
		for k := 0; k < n; k++ {
			s = s.Add(acc)
			acc = acc.Mul(zw)
		}
		lrow[i] = s.Mul(invN)
	}
	// σ^k/N·R² mod p: the factor that takes a canonical IDFT output to Montgomery form, twisted.
	scale := make([]uint32, n)
	for k, sk := range field.Powers(shift, n) {
		scale[k] = uint32(MontOf(field.Fp(MontOf(sk.Mul(invN)))))
	}
	d := &ZcDomain{LogN: logN, LogM: logM, Shift: shift}
	var err error
	if d.Tw, err = UploadMont(dev, "zerocheck twiddles", pw); err != nil {
		return nil, err
	}
	if d.LRow, err = UploadMont(dev, "zerocheck L_{N-1}", lrow); err != nil {
		d.Free()
		return nil, err
	}
	if d.Scale, err = gpu.UploadArray(dev, "zerocheck coefficient scales", scale); err != nil {
		d.Free()
		return nil, err
	}
	return d, nil
}

// ZcRound0Domain chooses round 0's points for N = 2^logN rows a block and constraints of degree
// at most d (spec B §4.3: the polynomials have degree ≤ d(N−1)): M = 2^logM points, shifted or
// not. Where no trace has interactions (Num = Den = 0) and d ≥ 2, the zerocheck polynomial
// vanishes on the N-th roots (every row satisfies the constraints), so its quotient by Z^N − 1, of
// degree ≤ d(N−1) − N < (d−1)·N, is all round 0 must find: (d−1)·N points off the N-th roots
// (rounded up to a power of two), the shifted domain (OpenVM evaluates d − 1 cosets the same way).
// Otherwise the Num and Den polynomials need d(N−1) + 1 points: M = next_pow2(d(N−1) + 1) roots
// of unity.
func ZcRound0Domain(logN, d int, interactions bool) (logM int, shifted bool) {
	n := 1 << logN
	if !interactions && d >= 2 {
		return max(bits.Len(uint((d-1)*n-1)), logN), true
	}
	return bits.Len(uint(d * (n - 1))), false
}

// Point returns the point of index i, σ·ω_M^i.
func (d *ZcDomain) Point(i int) field.Fp {
	return d.Shift.Mul(field.TwoAdicGenerator(d.LogM).Exp(uint64(i)))
}

// Free releases the tables.
func (d *ZcDomain) Free() {
	for _, a := range []*gpu.Array[Mont]{d.Tw, d.LRow} {
		if a != nil {
			a.Free()
		}
	}
	if d.Scale != nil {
		d.Scale.Free()
	}
	d.Tw, d.LRow, d.Scale = nil, nil, nil
}

// PointOf returns the point index i (ω_M^i) of round-0 class q = g·N + b: i = g + (M/N)·b.
func (d *ZcDomain) PointOf(q int) int {
	n := 1 << d.LogN
	return q/n + (1<<(d.LogM-d.LogN))*(q%n)
}

// ZcPart is one part of a trace (common main, preprocessed, cached: the program's part order): its
// canonical column-major values on the device (nil for width 0) and its width.
type ZcPart struct {
	Values *gpu.Array[field.Fp]
	Width  int
}

// ZcTrace is one trace's data for the zerocheck kernels: its program and parts, the maps derived
// from the program (which columns round 0 reads, which slots are stored as tables, which are read)
// and the proof's weights, all on the device.
type ZcTrace struct {
	Prog      *Program
	LogHeight int
	NLift     int
	Parts     []ZcPart

	logN, logM int
	nslots     int
	hasDen     bool
	cp         *gpu.Array[Mont]
	weights    *gpu.Array[Mont4]
	// outDesc describes each output for zc_weights (kind | K << 2, J); eq3b holds a proof's
	// interaction weights for it (nil without interactions).
	outDesc       *gpu.Array[uint32]
	eq3b          *gpu.Array[Mont4]
	nInteractions int
	dev           *gpu.Device
	// public is a copy of the public values cp (and the pieces' cp) hold; partWidths the
	// program's part widths (Reuse checks a later proof's parts against them).
	public     []field.Fp
	partWidths []int

	// Round 0: source columns (local or rotated slot read), part by part, each part's run from a
	// multiple of 16 (so lane groups never straddle parts); srcmap holds (local slot, rotated
	// slot) per source column (zcNone: not read), partCols the part column of each.
	ncols        int
	srcRuns      []zcRun
	srcmap, cols *gpu.Array[uint32]
	sel          *gpu.Array[uint32] // 2M: the first and last blocks' selector values at the M points
	selSlots     [3]uint32          // is_first, is_last, is_transition slots, or zcNone

	// Tables: every stored slot (all columns, their rotations when the program needs them, the
	// three selectors) in slot order.
	tableOf   []int // per slot: its table, or −1
	numTables int
	colmaps   []*gpu.Array[uint32] // per part: (local table, rotated table) per column
	used      *gpu.Array[uint32]   // (slot, table) per slot the program reads
	nused     int

	// The program in pieces (UsePieces), for round 0 and the rounds on GPUs, and the rounds' own
	// pieces when they differ (UseRoundPieces; nil: the same).
	pieces, rpieces *zcPieceSet
}

// zcPieceSet is a program in pieces bound to one trace: the pieces, their cp buffers one after the
// other, (word offset, cp offset, slot-list offset, slots) per piece, and the slot lists:
// (piece slot, table) per slot for the rounds j ≥ 1 (used), (piece slot, program slot) for round
// 0 (slots).
type zcPieceSet struct {
	pp                 *ProgramPieces
	cp                 *gpu.Array[Mont]
	table, used, slots *gpu.Array[uint32]
	// levels is the pieces' level code (ProgramPieces.LevelWords), uploaded when a plan first runs
	// rounds level-scheduled (useLevels); lc its counts (Words dropped).
	levels *gpu.Array[uint32]
	lc     LevelCode
}

// useLevels uploads the pieces' level code unless it is there already.
func (s *zcPieceSet) useLevels(dev *gpu.Device) error {
	if s.levels != nil {
		return nil
	}
	lc, err := s.pp.LevelWords()
	if err != nil {
		return err
	}
	if s.levels, err = gpu.UploadArray(dev, "zerocheck piece levels", lc.Words); err != nil {
		return err
	}
	s.lc, s.lc.Words = *lc, nil
	return nil
}

func (s *zcPieceSet) free() {
	if s == nil {
		return
	}
	if s.cp != nil {
		s.cp.Free()
	}
	for _, a := range []*gpu.Array[uint32]{s.table, s.used, s.slots, s.levels} {
		if a != nil {
			a.Free()
		}
	}
}

// roundPieces returns the pieces the rounds j ≥ 1 run (nil: none).
func (z *ZcTrace) roundPieces() *zcPieceSet {
	if z.rpieces != nil {
		return z.rpieces
	}
	return z.pieces
}

type zcRun struct{ col0, count int }

// zcAlign is the alignment of each part's run of source columns (MSL_LANES on the host; GPUs
// need none but share the layout).
const zcAlign = 1 << hostLogLanes

// NewZcTrace uploads one trace's maps and weights: pg is the host program (prog its upload), the
// parts in pg's part order (widths pg.PartWidths, height 2^logHeight each), public its public
// values, weights its output weights (constraints.Weights.Out) and denConst the constant
// denominator term. dom gives N and M.
func NewZcTrace(dev *gpu.Device, dom *ZcDomain, pg *constraints.Program, prog *Program, logHeight int, parts []ZcPart,
	public []field.Fp, weights []field.Fp4, denConst field.Fp4) (*ZcTrace, error) {
	if pg == nil || prog == nil || dom == nil {
		return nil, fmt.Errorf("kernels: ZcTrace: missing program or domain")
	}
	if len(parts) != len(pg.PartWidths) {
		return nil, fmt.Errorf("kernels: ZcTrace: %d parts, program has %d", len(parts), len(pg.PartWidths))
	}
	if logHeight < 0 || logHeight > 27 {
		return nil, fmt.Errorf("kernels: ZcTrace: log height %d", logHeight)
	}
	if len(weights) != len(pg.Outputs) || prog.NumOutput != len(pg.Outputs) || prog.NumSlots != pg.NumSlots() {
		return nil, fmt.Errorf("kernels: ZcTrace: %d weights for %d outputs", len(weights), len(pg.Outputs))
	}
	h := 1 << logHeight
	for q, part := range parts {
		if part.Width != pg.PartWidths[q] {
			return nil, fmt.Errorf("kernels: ZcTrace: part %d has width %d, program %d", q, part.Width, pg.PartWidths[q])
		}
		if part.Width > 0 {
			if err := checkArray("ZcTrace", part.Values, part.Width*h); err != nil {
				return nil, err
			}
		}
	}
	z := &ZcTrace{Prog: prog, LogHeight: logHeight, NLift: max(logHeight-dom.LogN, 0), Parts: parts, logN: dom.LogN,
		logM: dom.LogM, nslots: pg.NumSlots(), hasDen: len(pg.Interactions) > 0, nInteractions: len(pg.Interactions), dev: dev,
		public: append([]field.Fp{}, public...), partWidths: append([]int(nil), pg.PartWidths...)}
	fail := func(err error) (*ZcTrace, error) {
		z.Free()
		return nil, err
	}
	var err error
	up := func(name string, v []uint32) *gpu.Array[uint32] {
		if err != nil {
			return nil
		}
		if len(v) == 0 {
			v = []uint32{0}
		}
		var a *gpu.Array[uint32]
		a, err = gpu.UploadArray(dev, "zerocheck "+name, v)
		return a
	}
	cpw, cerr := prog.ConstsAndPublic(public)
	if cerr != nil {
		return fail(cerr)
	}
	if err == nil {
		z.cp, err = gpu.UploadArray(dev, "zerocheck consts", cpw)
	}
	if err == nil {
		z.weights, err = gpu.UploadArray(dev, "zerocheck weights", zcWeights(weights, denConst))
	}
	desc := make([]uint32, 0, 2*len(pg.Outputs))
	for _, o := range pg.Outputs {
		desc = append(desc, uint32(o.Kind)|uint32(o.K)<<2, uint32(o.J))
	}
	z.outDesc = up("output kinds", desc)
	if err == nil && len(pg.Interactions) > 0 {
		z.eq3b, err = gpu.AllocArray[Mont4](dev, "zerocheck eq3b", len(pg.Interactions))
	}

	// Round 0: source columns.
	srcmap, cols, runs := zcSources(pg)
	z.srcRuns = runs
	z.ncols = len(cols)
	z.srcmap = up("source slots", srcmap)
	z.cols = up("source columns", cols)
	for k, s := range []int{pg.SlotIsFirst(), pg.SlotIsLast(), pg.SlotIsTransition()} {
		z.selSlots[k] = zcNone
		if pg.Used[s] {
			z.selSlots[k] = uint32(s)
		}
	}
	z.sel = up("selectors", zcSelectorValues(dom, logHeight))

	// Tables.
	z.tableOf = make([]int, pg.NumSlots())
	for s := range z.tableOf {
		stored := s >= 2*pg.NumCols || s%2 == 0 || pg.NeedRot
		z.tableOf[s] = -1
		if stored {
			z.tableOf[s] = z.numTables
			z.numTables++
		}
	}
	var used []uint32
	for s, u := range pg.Used {
		if !u {
			continue
		}
		if z.tableOf[s] < 0 {
			return fail(fmt.Errorf("kernels: ZcTrace: slot %d is read but not stored", s))
		}
		used = append(used, uint32(s), uint32(z.tableOf[s]))
	}
	z.nused = len(used) / 2
	z.used = up("used slots", used)
	for q, pw := range pg.PartWidths {
		cm := make([]uint32, 0, 2*pw)
		for c := 0; c < pw; c++ {
			s := 2 * (pg.PartStart[q] + c)
			rot := zcNone
			if z.tableOf[s+1] >= 0 {
				rot = uint32(z.tableOf[s+1])
			}
			cm = append(cm, uint32(z.tableOf[s]), rot)
		}
		z.colmaps = append(z.colmaps, up(fmt.Sprint("part ", q, " tables"), cm))
	}
	if err != nil {
		return fail(err)
	}
	return z, nil
}

// zcSources returns round 0's source columns of pg: (local slot, rotated slot) per source
// column (zcNone: not read), the part column of each, and each part's run, from a multiple of
// zcAlign (so lane groups never straddle parts); at least zcAlign columns, a multiple of it.
func zcSources(pg *constraints.Program) (srcmap, cols []uint32, runs []zcRun) {
	for q, pw := range pg.PartWidths {
		for len(srcmap)/2%zcAlign != 0 {
			srcmap, cols = append(srcmap, zcNone, zcNone), append(cols, 0)
		}
		run := zcRun{col0: len(cols)}
		for c := 0; c < pw; c++ {
			s := 2 * (pg.PartStart[q] + c)
			loc, rot := zcNone, zcNone
			if pg.Used[s] {
				loc = uint32(s)
			}
			if pg.Used[s+1] {
				rot = uint32(s + 1)
			}
			if loc == zcNone && rot == zcNone {
				continue
			}
			srcmap, cols = append(srcmap, loc, rot), append(cols, uint32(c))
		}
		run.count = len(cols) - run.col0
		runs = append(runs, run)
	}
	for len(cols)%zcAlign != 0 || len(cols) == 0 {
		srcmap, cols = append(srcmap, zcNone, zcNone), append(cols, 0)
	}
	return srcmap, cols, runs
}

// zcWeights is the weights buffer's content: the output weights, then the constant
// denominator term.
func zcWeights(weights []field.Fp4, denConst field.Fp4) []Mont4 {
	return append(Mont4Slice(weights), Mont4Of(denConst))
}

// Reuse binds a trace made for an earlier proof of the same program, height and domain (its maps,
// piece sets and constants stay on the device: a backend keeps them per key) to another proof:
// its parts (the program's part order and widths, height 2^LogHeight), public values (the
// constants are uploaded again only when they differ); its output weights follow
// (EncodeWeights) before round 0's first kernel that reads them. Its planned dispatches are unchanged: plan it
// again with NewZerocheck.
func (z *ZcTrace) Reuse(parts []ZcPart, public []field.Fp) error {
	if z.weights == nil {
		return fmt.Errorf("kernels: ZcTrace: reused after Free")
	}
	if len(parts) != len(z.partWidths) {
		return fmt.Errorf("kernels: ZcTrace: %d parts, program has %d", len(parts), len(z.partWidths))
	}
	for q, part := range parts {
		if part.Width != z.partWidths[q] {
			return fmt.Errorf("kernels: ZcTrace: part %d has width %d, program %d", q, part.Width, z.partWidths[q])
		}
		if part.Width > 0 {
			if err := checkArray("ZcTrace", part.Values, part.Width<<z.LogHeight); err != nil {
				return err
			}
		}
	}
	if !slices.Equal(public, z.public) {
		cpw, err := z.Prog.ConstsAndPublic(public)
		if err != nil {
			return err
		}
		if err := z.cp.Write(0, cpw); err != nil {
			return err
		}
		for _, s := range []*zcPieceSet{z.pieces, z.rpieces} {
			if s == nil {
				continue
			}
			pcp, _, err := s.pp.ConstsAndPublic(public)
			if err != nil {
				return err
			}
			if err := s.cp.Write(0, pcp); err != nil {
				return err
			}
		}
		z.public = append(z.public[:0], public...)
	}
	z.Parts = append(z.Parts[:0], parts...)
	return nil
}

// EncodeWeights encodes the output weights of a reused trace's proof (Reuse) from its challenges
// on the device (zc_weights): λ^K per constraint, eq3b[K] per count, eq3b[K]·β^J per message
// field (constraints.Program.Weights), and denConst (Program.DenConst). eq3b (one per interaction)
// is uploaded when the program has interactions (an upload waits for the queued work). Round 0's
// slot values (EncodeUniRoundThen's first kernels) read no weights, so a caller may encode this
// behind them.
func (z *ZcTrace) EncodeWeights(b *gpu.Batch, lambda, beta field.Fp4, eq3b []field.Fp4, denConst field.Fp4) error {
	if z.weights == nil {
		return fmt.Errorf("kernels: ZcTrace: weights set after Free")
	}
	if len(eq3b) != z.nInteractions {
		return fmt.Errorf("kernels: ZcTrace: %d eq3b weights for %d interactions", len(eq3b), z.nInteractions)
	}
	eq := z.outDesc // bound but not read without interactions
	if len(eq3b) > 0 {
		if err := z.eq3b.Write(0, Mont4Slice(eq3b)); err != nil {
			return err
		}
		eq = gpu.View[uint32](z.eq3b)
	}
	n := z.Prog.NumOutput
	l, bt, dc := MontFp4(lambda), MontFp4(beta), MontFp4(denConst)
	g, t := shapeFor(z.dev, "zc_weights", n+1)
	dispatchZcWeights(b, g, t, z.outDesc.Buffer, eq.Buffer, z.weights.Buffer, zcWeightsParams{nOut: uint32(n),
		l0: l[0], l1: l[1], l2: l[2], l3: l[3], b0: bt[0], b1: bt[1], b2: bt[2], b3: bt[3], dc0: dc[0], dc1: dc[1], dc2: dc[2], dc3: dc[3]})
	return b.Err()
}

// Detach forgets the parts, so that a trace kept for later proofs (Reuse) holds no buffer of the
// proof that used it last.
func (z *ZcTrace) Detach() {
	for q := range z.Parts {
		z.Parts[q].Values = nil
	}
}

// Bytes is the device memory the trace's own buffers take (its maps, constants, weights and
// bound piece sets with their level code; not the parts, the program or its pieces).
func (z *ZcTrace) Bytes() int64 {
	var n int64
	arrs := []*gpu.Array[uint32]{z.srcmap, z.cols, z.sel, z.used, z.outDesc}
	arrs = append(arrs, z.colmaps...)
	if z.eq3b != nil {
		n += int64(z.eq3b.Size())
	}
	for _, s := range []*zcPieceSet{z.pieces, z.rpieces} {
		if s != nil {
			arrs = append(arrs, s.table, s.used, s.slots, s.levels)
			if s.cp != nil {
				n += int64(s.cp.Size())
			}
		}
	}
	if z.cp != nil {
		n += int64(z.cp.Size())
	}
	if z.weights != nil {
		n += int64(z.weights.Size())
	}
	for _, a := range arrs {
		if a != nil {
			n += int64(a.Size())
		}
	}
	return n
}

// UsePieces gives the trace its program in pieces (pp: constraints.Split of the trace's program,
// uploaded; public: the trace's public values), for round 0 and, unless UseRoundPieces gives them
// others, the rounds j ≥ 1 on GPUs (every round with ZcOptions.Pieces). Call it before
// NewZerocheck plans the trace.
func (z *ZcTrace) UsePieces(dev *gpu.Device, pp *ProgramPieces, public []field.Fp) error {
	s, err := z.bindPieces(dev, pp, public)
	if err != nil {
		return err
	}
	z.pieces.free()
	z.pieces = s
	return nil
}

// UseRoundPieces gives the rounds j ≥ 1 a split of their own (finer pieces: shorter serial walks
// and fewer registers per thread, which the rounds' few work items need; round 0 keeps the pieces
// its generated code was made for). Call it after UsePieces, before NewZerocheck.
func (z *ZcTrace) UseRoundPieces(dev *gpu.Device, pp *ProgramPieces, public []field.Fp) error {
	s, err := z.bindPieces(dev, pp, public)
	if err != nil {
		return err
	}
	z.rpieces.free()
	z.rpieces = s
	return nil
}

// bindPieces binds pp to the trace's tables and public values and uploads the result.
func (z *ZcTrace) bindPieces(dev *gpu.Device, pp *ProgramPieces, public []field.Fp) (*zcPieceSet, error) {
	if pp == nil || pp.Words == nil {
		return nil, fmt.Errorf("kernels: ZcTrace: no pieces")
	}
	cpw, table, slotsOf, err := pp.Bind(public)
	if err != nil {
		return nil, err
	}
	used := make([]uint32, len(slotsOf))
	for i := 0; i+1 < len(slotsOf); i += 2 {
		s := int(slotsOf[i+1])
		if s >= len(z.tableOf) || z.tableOf[s] < 0 {
			return nil, fmt.Errorf("kernels: ZcTrace: a piece reads slot %d, which is not stored", s)
		}
		used[i], used[i+1] = slotsOf[i], uint32(z.tableOf[s])
	}
	s := &zcPieceSet{pp: pp}
	up := func(name string, w []uint32) *gpu.Array[uint32] {
		if err != nil {
			return nil
		}
		var a *gpu.Array[uint32]
		a, err = gpu.UploadArray(dev, name, w)
		return a
	}
	if s.cp, err = gpu.UploadArray(dev, "zerocheck piece consts", cpw); err != nil {
		return nil, err
	}
	s.table = up("zerocheck piece table", table)
	s.used = up("zerocheck piece tables", used)
	s.slots = up("zerocheck piece slots", slotsOf)
	if err != nil {
		s.free()
		return nil, err
	}
	return s, nil
}

func (z *ZcTrace) freePieces() {
	z.pieces.free()
	z.rpieces.free()
	z.pieces, z.rpieces = nil, nil
}

// Free releases the trace's uploads (not the parts, not the program or its pieces).
func (z *ZcTrace) Free() {
	if z.cp != nil {
		z.cp.Free()
	}
	if z.weights != nil {
		z.weights.Free()
	}
	if z.eq3b != nil {
		z.eq3b.Free()
	}
	arrs := []*gpu.Array[uint32]{z.srcmap, z.cols, z.sel, z.used, z.outDesc}
	arrs = append(arrs, z.colmaps...)
	for _, a := range arrs {
		if a != nil {
			a.Free()
		}
	}
	z.cp, z.weights, z.eq3b, z.srcmap, z.cols, z.sel, z.used, z.outDesc, z.colmaps = nil, nil, nil, nil, nil, nil, nil, nil, nil
	z.freePieces()
}

// NumTables is the number of Fp4 tables BindUnivariate makes (the stored slots).
func (z *ZcTrace) NumTables() int { return z.numTables }

// TableOf is slot s's table, or −1 when the slot is not stored.
func (z *ZcTrace) TableOf(s int) int { return z.tableOf[s] }

// Blocks is X = 2^NLift.
func (z *ZcTrace) Blocks() int { return 1 << z.NLift }

// zcSelectorValues returns the values at dom's M points σ·ω_M^i of the interpolants of the first
// and the last block of is_first and is_last of a trace of height 2^logH (Montgomery; 2M words).
func zcSelectorValues(dom *ZcDomain, logH int) []uint32 {
	n, m, h := 1<<dom.LogN, 1<<dom.LogM, 1<<logH
	x := max(h/n, 1)
	first, last := make([]field.Fp, n), make([]field.Fp, n)
	for j := 0; j < n; j++ {
		if j%h == 0 {
			first[j] = field.One
		}
		if ((x-1)*n+j)%h == h-1 {
			last[j] = field.One
		}
	}
	out := make([]uint32, 0, 2*m)
	for _, v := range [][]field.Fp{first, last} {
		for _, y := range zcExtend(v, dom) {
			out = append(out, uint32(MontOf(y)))
		}
	}
	return out
}

// zcExtend returns the values at dom's points σ·ω_M^i of the polynomial of degree < len(v) through
// (ω_N^j, v[j]) (plain O(N·M) arithmetic on the host).
func zcExtend(v []field.Fp, dom *ZcDomain) []field.Fp {
	n, m := len(v), 1<<dom.LogM
	logN, _ := field.Log2(n)
	wn := field.Powers(field.TwoAdicGenerator(logN), n)
	invN := field.Fp(uint32(n)).Inverse()
	coef := make([]field.Fp, n)
	for k := range coef {
		var s field.Fp
		for j, y := range v {
			s = s.Add(y.Mul(wn[(n-(j*k)%n)%n]))
		}
		coef[k] = s.Mul(invN)
	}
	out := make([]field.Fp, m)
	for i := range out {
		z := dom.Point(i)
		var s field.Fp
		for k := n - 1; k >= 0; k-- {
			s = s.Mul(z).Add(coef[k])
		}
		out[i] = s
	}
	return out
}

// ZcOptions force the kernels' strategies (tests run the GPU paths on the host device).
type ZcOptions struct {
	// PointMode: round 0 computes slot values one point at a time (the GPU strategy) rather than
	// by coset DFTs (the host default).
	PointMode bool
	// UniThreads, RoundThreads: the threads of the round-0 and round dispatches (0: chosen per
	// device). On GPUs UniThreads is rounded up to a multiple of M and of the group size.
	UniThreads, RoundThreads int
	// SliceBlocks: blocks per round-0 slice (a power of two; 0: chosen from ScratchBytes).
	SliceBlocks int
	// UnitItems: a thread's step is one unit, threads aligned so that G·U ≡ 0 mod M (the GPU plan),
	// rather than whole blocks (the host plan).
	UnitItems bool
	// NoTranspose: the host's coset mode stores slot values one by one rather than through 16×16
	// transposes (when N ≥ 16), to test that path.
	NoTranspose bool
	// ScratchBytes bounds each scratch buffer (0: 256 MiB).
	ScratchBytes int
	// Pieces: round 0 and every round j ≥ 1 of a trace with pieces (ZcTrace.UsePieces) run them
	// (by default only GPUs do: round 0, and the rounds with too few pairs to fill the device);
	// PieceThreads: the threads of the rounds' dispatches (0: chosen per device).
	Pieces       bool
	PieceThreads int
	// Levels: every round that runs pieces runs them level-scheduled (zc_round_levels; by default
	// only GPUs do, in the rounds with fewer lane groups a piece than LevelBelow); NoLevels:
	// none does. LevelThreads: the threads that share a lane group's point (0: chosen per device;
	// a power of two). LevelBelow: the rounds with fewer lane groups a piece than this run level-
	// scheduled on GPUs (0: chosen per device).
	Levels, NoLevels bool
	LevelThreads     int
	LevelBelow       int
	// Interpreted: round 0 runs the interpreter (zc_uni_pieces, zc_uni_eval) even for pieces or
	// programs with generated code (ProgramPieces.UseGenerated, Program.UseGenerated), to compare
	// the two.
	Interpreted bool
	// GeneratedWhole: round 0 of a program run whole runs its generated code (Program.UseGenerated)
	// on the host device too: the device backend builds it there (GPUs that build modules always
	// do, unless Interpreted; the host device's lane interpreter is faster on CPUs).
	GeneratedWhole bool
	// WideBind: BindUnivariate takes one block a work item and sums in 64 bits on the host device
	// too (GPUs always do; the host's lanes across blocks are faster there).
	WideBind bool
	// SlotValues: round 0 in pieces makes its slot values with zc_slot_values on the host device
	// too (GPUs always do for N = 16).
	SlotValues bool
}

// Zerocheck runs the kernels of the traces of one sumcheck; it owns the scratch they share (slot
// values, registers, partial rows, round-0 coefficients), sized for the largest trace.
type Zerocheck struct {
	dev    *gpu.Device
	dom    *ZcDomain
	points int // P = d + 1 evaluation points of the rounds j ≥ 1
	lanes  int
	opts   ZcOptions

	uni   map[*ZcTrace]zcUniPlan
	round map[*ZcTrace]zcRoundPlan

	// slots and regs are the interpreter's (EvalBuffers); coefs and deltas round 0's block
	// interpolants and next-row differences of the source columns: all Montgomery words.
	slots, regs, coefs, deltas *gpu.Array[Mont]
	// vals holds a round-0 slice's slot values when a trace runs round 0 in pieces.
	vals *gpu.Array[Mont]
	// partials are rows of Fp4 sums per point and mid the first level of their two-level sums
	// (GPUs): words, as EncodeSumRowsVia adds them.
	partials, mid *gpu.Array[uint32]
}

// NewZerocheck plans the dispatches of traces on dom (points: the evaluation points of the rounds
// j ≥ 1, d + 1) by their shapes (zerocheck_plan.go) and allocates the shared scratch.
func NewZerocheck(dev *gpu.Device, dom *ZcDomain, points int, traces []*ZcTrace, opts ZcOptions) (*Zerocheck, error) {
	if dom == nil || points < 1 || points > 1<<10 {
		return nil, fmt.Errorf("kernels: Zerocheck: %d points", points)
	}
	pl := newZcPlanner(dev, dom.LogN, dom.LogM, points, opts)
	z := &Zerocheck{dev: dev, dom: dom, points: points, lanes: pl.lanes, opts: pl.opts,
		uni: map[*ZcTrace]zcUniPlan{}, round: map[*ZcTrace]zcRoundPlan{}}
	sc := ZcScratch{Mid: pl.mid()}
	for _, t := range traces {
		if t.logN != dom.LogN || t.logM != dom.LogM {
			return nil, fmt.Errorf("kernels: Zerocheck: trace built for another domain")
		}
		up, rp, rounds, err := pl.plan(t.Shape(), &sc)
		if err != nil {
			return nil, err
		}
		if up.gen && up.pieces {
			up.generated = t.pieces.pp.Generated
		} else if up.gen {
			up.whole = t.Prog.Generated
		}
		z.uni[t] = up
		if rounds {
			z.round[t] = rp
		}
		// The late rounds level-scheduled (zc_round_levels): planned from the trace's own pieces,
		// whose level code it uploads; its partial rows are a few MB at most (not in the
		// shape-based estimate).
		if rs := t.roundPieces(); rounds && rs != nil && rp.pieceThreads > 0 {
			if err := z.planRoundLevels(&rp, rs, t.NLift); err != nil {
				return nil, err
			}
			sc.Partials = max(sc.Partials, rp.levelRows*points*12)
			z.round[t] = rp
		}
	}
	var err error
	z.slots = allocZcScratch[Mont](dev, &err, "slots", sc.Slots)
	z.regs = allocZcScratch[Mont](dev, &err, "registers", sc.Regs)
	z.partials = allocZcScratch[uint32](dev, &err, "partials", sc.Partials)
	if sc.Mid > 0 {
		z.mid = allocZcScratch[uint32](dev, &err, "partial sums", sc.Mid)
	}
	z.coefs = allocZcScratch[Mont](dev, &err, "coefficients", sc.Coefs)
	z.deltas = allocZcScratch[Mont](dev, &err, "deltas", sc.Deltas)
	if sc.Vals > 0 {
		z.vals = allocZcScratch[Mont](dev, &err, "slot values", sc.Vals)
	}
	if err != nil {
		z.Close()
		return nil, err
	}
	return z, nil
}

// allocZcScratch allocates n words of scratch unless *err is set already, and sets *err when
// the allocation fails or n exceeds 32-bit indexing.
func allocZcScratch[T any](dev *gpu.Device, err *error, name string, n int) *gpu.Array[T] {
	if *err != nil {
		return nil
	}
	if n >= maxElems {
		*err = fmt.Errorf("kernels: Zerocheck: %s of %d words exceeds 32-bit indexing", name, n)
		return nil
	}
	// Not zeroed: every kernel writes the scratch it reads (a thread zeroes its own partial
	// rows, the interpreter writes a slot or register before reading it, the value and
	// coefficient passes fill what round 0 reads); clearing ~0.5 GB for keccakf-1024 took
	// ~0.2 ms of the constraint stage's device time.
	var a *gpu.Array[T]
	a, *err = gpu.AllocArrayUninit[T](dev, "zerocheck "+name, max(n, 1))
	return a
}

// Close frees the scratch.
func (z *Zerocheck) Close() {
	for _, a := range []*gpu.Array[Mont]{z.slots, z.regs, z.coefs, z.deltas, z.vals} {
		if a != nil {
			a.Free()
		}
	}
	for _, a := range []*gpu.Array[uint32]{z.partials, z.mid} {
		if a != nil {
			a.Free()
		}
	}
	z.slots, z.regs, z.partials, z.mid, z.coefs, z.deltas, z.vals = nil, nil, nil, nil, nil, nil, nil
}

// UniWidth is the number of uints EncodeUniRound writes: 12 per point class (Zc, Num, Den).
func (z *Zerocheck) UniWidth() int { return 12 << z.dom.LogM }

// RoundWidth is the number of uints EncodeRound writes: 12 per evaluation point.
func (z *Zerocheck) RoundWidth() int { return 12 * z.points }
