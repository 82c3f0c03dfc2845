package kernels

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The rounds j ≥ 1 of the batch constraint sumcheck (zerocheck.go has the geometry): binding the
// univariate variable into Fp4 tables, the plans of the rounds whole or in pieces, and their
// encoding.

// zcRoundPlan is the round dispatch of one trace: whole program, and pieces (pieceThreads 0: the
// trace has none, or its pieces' registers do not fit in threadgroup memory); rounds with fewer
// lane groups than pieceBelow run the pieces, in groups of pieceTpg threads holding pieceShBytes
// of threadgroup memory.
type zcRoundPlan struct {
	threads, tpg                                     int
	pieceThreads, pieceTpg, pieceBelow, pieceShBytes int
	// Level-scheduled pieces (zc_round_levels): rounds with fewer lane groups than levelBelow (≤
	// pieceBelow; 0: none) run them in groups of levelTpg threads, levelK threads a lane group
	// (0: by round, levelShape; at least levelKMin), at most levelGroups groups; levelRows is the
	// partial rows of the largest such round.
	levelBelow, levelTpg, levelK, levelKMin, levelGroups, levelRows int
}

// zcLevelGroup is zc_round_levels' group size on GPUs: one SIMD group, whose barriers are cheap
// (Apple's and NVIDIA's SIMD groups are 32 wide).
const zcLevelGroup = 32

// zcLevelBelow is the rounds that run level-scheduled on GPUs by default: those with fewer lane
// groups a piece than this. Above it zc_round_pieces' serial walks fill the device and do less
// work (a level-scheduled lane group's threads idle where a level is narrower than they are
// many): on an H200, Keccak-f's round with 128 points a piece took 190 µs level-scheduled
// against 147 walked, the one with 64 98 against 138.
const zcLevelBelow = 65

// zcLevelThreadsPerCU: on GPUs a round's lane groups get 16 threads each while that makes at
// most this many threads a compute unit, else 8. Keccak-f's rounds' pieces take as many steps
// with 16 as with 32 (their depth, 47 levels at most) and 54 with 8 (their widest levels hold up
// to 60 instructions), but 8 do less work on idle threads: on an H200, 16 were faster with 4 and
// 8 lane groups a piece (29 against 34 µs a round), 8 with 16 and more (35 against 42 µs).
const zcLevelThreadsPerCU = 512

// planRoundLevels plans zc_round_levels for a trace whose rounds run the pieces of rs (rp's
// zc_round_pieces plan made), 2^nLift rows in the first round: on GPUs the rounds with fewer lane
// groups a piece than LevelBelow (zcLevelBelow), on any device every round that runs pieces with
// ZcOptions.Levels; none with NoLevels, or where a lane group's registers do not fit in a group's
// threadgroup memory. It uploads the pieces' level code (once per piece set).
func (z *Zerocheck) planRoundLevels(rp *zcRoundPlan, rs *zcPieceSet, nLift int) error {
	dev, L, opts := z.dev, z.lanes, z.opts
	below := 0
	switch {
	case opts.NoLevels:
		return nil
	case opts.Levels:
		below = rp.pieceBelow
	case !isHost(dev):
		below = zcLevelBelow
		if opts.LevelBelow > 0 {
			below = opts.LevelBelow
		}
	}
	if below = min(below, rp.pieceBelow); below <= 0 {
		return nil
	}
	k := opts.LevelThreads
	if k&(k-1) != 0 || k < 0 || k > 1<<10 {
		return fmt.Errorf("kernels: Zerocheck: %d threads a lane group (a power of two)", k)
	}
	if err := rs.useLevels(dev); err != nil {
		return err
	}
	lv := zcRoundPlan{levelBelow: below, levelK: k, levelKMin: max(k, 1)}
	cus := max(dev.Limits().ComputeUnits, 1)
	if isHost(dev) {
		lv.levelK = max(k, 1)
		lv.levelTpg, lv.levelGroups = lv.levelK, 8*cus
	} else {
		lv.levelTpg = groupSize(dev, "zc_round_levels", zcLevelGroup)
		lv.levelTpg = 1 << (bits.Len(uint(lv.levelTpg)) - 1)
		lv.levelGroups = 32 * cus // resident groups at most (32 a compute unit: CUDA's limit on Hopper)
		if k == 0 {
			lv.levelKMin = 8
		}
	}
	lv.levelKMin = min(lv.levelKMin, lv.levelTpg)
	limit := 32 << 10
	if m := dev.Limits().MaxThreadgroupMemory; m > 0 {
		limit = m
	}
	for z.levelBytes(&lv, rs, lv.levelKMin) > limit && lv.levelKMin < lv.levelTpg {
		lv.levelKMin *= 2
	}
	if z.levelBytes(&lv, rs, lv.levelKMin) > limit {
		return nil // a lane group's registers beyond a group's memory: the rounds walk the pieces
	}
	if lv.levelK > 0 {
		lv.levelK = max(min(lv.levelK, lv.levelTpg), lv.levelKMin)
	}
	for logRows := nLift; logRows >= 1; logRows-- {
		if units := ((1<<(logRows-1))*z.points + L - 1) / L; units < below {
			_, u, groups := z.levelShape(&lv, rs, units)
			lv.levelRows = max(lv.levelRows, groups*u*L)
		}
	}
	rp.levelBelow, rp.levelTpg, rp.levelK, rp.levelKMin, rp.levelGroups, rp.levelRows =
		lv.levelBelow, lv.levelTpg, lv.levelK, lv.levelKMin, lv.levelGroups, lv.levelRows
	return nil
}

// levelShape is zc_round_levels' dispatch for a round of units lane groups a piece: k threads a
// lane group, u lane groups a group, and the groups.
func (z *Zerocheck) levelShape(rp *zcRoundPlan, rs *zcPieceSet, units int) (k, u, groups int) {
	k = rp.levelK
	if k == 0 {
		k = 16
		if units*rs.pp.NumPieces()*16 > zcLevelThreadsPerCU*max(z.dev.Limits().ComputeUnits, 1) {
			k = 8
		}
		k = max(min(k, rp.levelTpg), rp.levelKMin)
	}
	u = rp.levelTpg / k
	groups = min(rp.levelGroups, rs.pp.NumPieces()*((units+u-1)/u))
	return k, u, max(groups, 1)
}

// levelBytes is zc_round_levels' threadgroup memory with k threads a lane group: the registers
// of tpg/k lane groups, the threads' sums when k > 1, a piece's level code and constants.
func (z *Zerocheck) levelBytes(rp *zcRoundPlan, rs *zcPieceSet, k int) int {
	n := 16*z.lanes*rs.lc.Regs*(rp.levelTpg/k) + 4*(rs.lc.BlockWords+rs.lc.Consts+rs.pp.numPublic)
	if k > 1 {
		n += 48 * z.lanes * rp.levelTpg
	}
	return n
}

// zcRoundPieceMem caps the threadgroup memory of zc_round_pieces' groups (bytes): a multiple of
// the per-thread registers that fits every device's group limit without CUDA's opt-in beyond 48
// KiB; larger groups would not hold more threads per compute unit, whose memory is the limit.
const zcRoundPieceMem = 48 << 10

// zcRoundPieceThreadsPerCU caps zc_round_pieces' threads a compute unit. Pieces with few
// registers (scheduled depth first: Keccak-f's need 4) would otherwise fill a compute unit's
// group memory with more threads than its register file runs at once, each with partial rows of
// its own (192 bytes a thread with d + 1 = 4 points). 768 ran keccakf-1024's constraint stage as
// fast as 1024 and faster than 512 or none on an H200 (docs/perf-notes/constraints.md).
const zcRoundPieceThreadsPerCU = 768

// planRoundPieces plans zc_round_pieces for a trace with pieces ps, whose first round has units
// lane groups. Registers live in threadgroup memory (16 bytes an Fp4
// value a lane), which bounds the group; groups are as many as the compute units hold at once
// (the first round's work items, (piece, lane group), go round-robin over them).
func (pl zcPlanner) planRoundPieces(rp *zcRoundPlan, ps *ZcPiecesShape, units int) {
	dev, L := pl.dev, pl.lanes
	per := 16 * L * max(ps.MaxRegs, 1)
	limit := 32 << 10
	if m := dev.Limits().MaxThreadgroupMemory; m > 0 {
		limit = m
	}
	tpg := min(limit, zcRoundPieceMem) / per
	if tpg < 1 {
		return // registers beyond a group's memory: the rounds run the whole program
	}
	switch {
	case pl.opts.Pieces:
		rp.pieceBelow = units + 1
	case !isHost(dev):
		// Fewer (pair, X) items than a few waves of threads: the whole program's serial walk per
		// item would leave most of the device idle.
		rp.pieceBelow = 4 * gpuGroup * max(dev.Limits().ComputeUnits, 1)
	}
	cus := max(dev.Limits().ComputeUnits, 1)
	var groups int
	if isHost(dev) {
		tpg = 1
		groups = 8 * cus
	} else {
		tpg = groupSize(dev, "zc_round_pieces", min(tpg, gpuGroup))
		groups = cus * max(min(limit/(tpg*per), zcRoundPieceThreadsPerCU/tpg), 1)
	}
	items := zcUnitPad(min(units, rp.pieceBelow), tpg) * ps.Count
	groups = min(groups, (items+tpg-1)/tpg)
	if pl.opts.PieceThreads > 0 {
		groups = (pl.opts.PieceThreads + tpg - 1) / tpg
	}
	rp.pieceTpg, rp.pieceThreads, rp.pieceShBytes = tpg, max(groups, 1)*tpg, tpg*per
}

// zcUnitPad is units rounded up to a multiple of the group size tpg: zc_round_pieces numbers a
// piece's lane groups so, and a group's threads walk one piece.
func zcUnitPad(units, tpg int) int { return (units + tpg - 1) / tpg * tpg }

// EncodeBindUni encodes BindUnivariate of trace t into tables (NumTables() tables of X Fp4 rows,
// table τ at Fp4 index τ·stride): w holds the N weights w_j (Fp4) in R²-scaled Montgomery form
// (ZcBindWeights), first, last and sum the selector constants (the bound is_first at x = 0, the
// bound is_last at x = X−1, Σ_j w_j). w stays words: R²-scaled values are not Mont4 values.
func (z *Zerocheck) EncodeBindUni(b *gpu.Batch, t *ZcTrace, w *gpu.Array[uint32], first, last, sum field.Fp4, tables *gpu.Array[Mont4], stride int) error {
	x := t.Blocks()
	if stride < x {
		return fmt.Errorf("kernels: BindUni: stride %d < %d rows", stride, x)
	}
	if err := checkArray("BindUni", tables, (t.numTables-1)*stride+x); err != nil {
		return err
	}
	if err := checkArray("BindUni", w, 4<<z.dom.LogN); err != nil {
		return err
	}
	dev := z.dev
	// GPUs sum each coefficient's products in 64 bits, one block a work item; the host device
	// keeps its lanes across blocks (ZcOptions.WideBind runs the GPUs' path there).
	wide := !isHost(dev) || z.opts.WideBind
	for q, part := range t.Parts {
		if part.Width == 0 {
			continue
		}
		items := part.Width * ((x + z.lanes - 1) / z.lanes)
		if wide {
			items = part.Width * x
		}
		g, tp := shapeFor(dev, "zc_bind_uni", items)
		dispatchZcBindUni(b, g, tp, part.Values.Buffer, w.Buffer, t.colmaps[q].Buffer, tables.Buffer,
			zcBindParams{logH: uint32(t.LogHeight), logN: uint32(z.dom.LogN), blocks: uint32(x), width: uint32(part.Width),
				stride: uint32(stride), lanes: uint32(z.lanes), wide: uint32(b2u(wide))})
	}
	f, l, s := MontFp4(first), MontFp4(last), MontFp4(sum)
	g, tp := shapeFor(dev, "zc_bind_selectors", x)
	nc := t.nslots - 3
	dispatchZcBindSelectors(b, g, tp, tables.Buffer, zcBindSelParams{blocks: uint32(x), stride: uint32(stride),
		tFirst: uint32(t.tableOf[nc]), tLast: uint32(t.tableOf[nc+1]), tTrans: uint32(t.tableOf[nc+2]),
		f0: f[0], f1: f[1], f2: f[2], f3: f[3], l0: l[0], l1: l[1], l2: l[2], l3: l[3], s0: s[0], s1: s[1], s2: s[2], s3: s[3]})
	return b.Err()
}

// ZcBindWeights returns the BindUnivariate weights in the form EncodeBindUni reads: each
// coefficient times R² (Montgomery of the Montgomery form), so that products with canonical trace
// values come out in Montgomery form.
func ZcBindWeights(w []field.Fp4) []uint32 {
	out := make([]uint32, 0, 4*len(w))
	for _, x := range w {
		for _, c := range x {
			out = append(out, uint32(MontOf(field.Fp(MontOf(c)))))
		}
	}
	return out
}

// EncodeRound encodes a round j ≥ 1 of trace t over its tables (NumTables() tables of 2^logRows
// Fp4 rows at Fp4 index τ·stride, logRows ≥ 1): out[outOff + 12(X−1) + 4k ..] = R_k[X] for X =
// 1..P, e'(y) = eq[eqOff + y] for y < 2^(logRows−1).
func (z *Zerocheck) EncodeRound(b *gpu.Batch, t *ZcTrace, tables *gpu.Array[Mont4], stride, logRows int, eq *gpu.Array[Mont4], eqOff int, out *gpu.Array[uint32], outOff int) error {
	rp, ok := z.round[t]
	if !ok || z.slots == nil {
		return fmt.Errorf("kernels: Round: trace not planned (or Zerocheck closed)")
	}
	if logRows < 1 || logRows > t.NLift || (t.numTables > 1 && stride < 1<<logRows) {
		return fmt.Errorf("kernels: Round: 2^%d rows at stride %d (trace of 2^%d blocks)", logRows, stride, t.NLift)
	}
	if err := checkArray("Round", tables, (t.numTables-1)*stride+1<<logRows); err != nil {
		return err
	}
	if err := checkArray("Round", eq, eqOff+1<<(logRows-1)); err != nil {
		return err
	}
	interleave := uint32(b2u(!isHost(z.dev)))
	units := ((1<<(logRows-1))*z.points + z.lanes - 1) / z.lanes
	if ps := t.roundPieces(); ps != nil && units < rp.levelBelow {
		k, u, groups := z.levelShape(&rp, ps, units)
		dispatchZcRoundLevels(b, gpu.D1(uint32(groups)), gpu.D1(uint32(rp.levelTpg)), ps.levels.Buffer, ps.cp.Buffer,
			ps.table.Buffer, t.Prog.Kinds.Buffer, t.weights.Buffer, ps.used.Buffer, tables.Buffer, eq.Buffer, z.partials.Buffer,
			zcLevelsParams{logRows: uint32(logRows), stride: uint32(stride), npieces: uint32(ps.pp.NumPieces()),
				nregs: uint32(ps.lc.Regs), points: uint32(z.points), hasDen: uint32(b2u(t.hasDen)),
				nout: uint32(t.Prog.NumOutput), eqOff: uint32(eqOff), unitPad: uint32((units + u - 1) / u * u),
				lanes: uint32(z.lanes), k: uint32(k), npublic: uint32(ps.pp.numPublic), codeWords: uint32(ps.lc.BlockWords),
				cpWords: uint32(ps.lc.Consts + ps.pp.numPublic)}, uint32(z.levelBytes(&rp, ps, k)))
		return EncodeSumRowsVia(b, z.dev, z.partials, z.mid, out, outOff, groups*u*z.lanes, 12*z.points)
	}
	if t.roundPieces() != nil && units < rp.pieceBelow {
		ps := t.roundPieces()
		pp := ps.pp
		// GPUs touch each piece's code and slot rows before walking it (zc_piece_touch; H200:
		// Keccak-f's rounds 5.83 → 5.54 ms); the host device's walks do not wait on them.
		dispatchZcRoundPieces(b, gpu.D1(uint32(rp.pieceThreads/rp.pieceTpg)), gpu.D1(uint32(rp.pieceTpg)), pp.Words.Buffer,
			ps.cp.Buffer, ps.table.Buffer, t.Prog.Kinds.Buffer, t.weights.Buffer, ps.used.Buffer, tables.Buffer,
			eq.Buffer, z.partials.Buffer,
			zcPiecesParams{logRows: uint32(logRows), stride: uint32(stride), npieces: uint32(pp.NumPieces()),
				nregs: uint32(pp.MaxRegs), points: uint32(z.points), hasDen: uint32(b2u(t.hasDen)),
				nout: uint32(t.Prog.NumOutput), eqOff: uint32(eqOff), unitPad: uint32(zcUnitPad(units, rp.pieceTpg)),
				lanes: uint32(z.lanes), touch: uint32(b2u(!isHost(z.dev)))}, uint32(rp.pieceShBytes))
		return EncodeSumRowsVia(b, z.dev, z.partials, z.mid, out, outOff, rp.pieceThreads*z.lanes, 12*z.points)
	}
	dispatchZcRoundEval(b, gpu.D1(uint32(rp.threads/rp.tpg)), gpu.D1(uint32(rp.tpg)), t.Prog.Words.Buffer, t.cp.Buffer,
		t.Prog.Kinds.Buffer, t.weights.Buffer, t.used.Buffer, tables.Buffer, eq.Buffer, z.slots.Buffer, z.regs.Buffer,
		z.partials.Buffer,
		zcRoundParams{logRows: uint32(logRows), stride: uint32(stride), nused: uint32(t.nused), nslots: uint32(t.nslots),
			nregs: uint32(t.Prog.NumRegs), points: uint32(z.points), hasDen: uint32(b2u(t.hasDen)),
			nout: uint32(t.Prog.NumOutput), eqOff: uint32(eqOff), interleave: interleave, lanes: uint32(z.lanes)})
	return EncodeSumRowsVia(b, z.dev, z.partials, z.mid, out, outOff, rp.threads*z.lanes, 12*z.points)
}

// ZcSelectorBind returns the constants of EncodeBindUni for a trace of height 2^logH and the
// weights w (N of them): the bound is_first of block 0, the bound is_last of block X−1, and Σ w_j.
func ZcSelectorBind(logN, logH int, w []field.Fp4) (first, last, sum field.Fp4) {
	n, h := 1<<logN, 1<<logH
	x := max(h/n, 1)
	for j, wj := range w {
		if j%h == 0 {
			first = first.Add(wj)
		}
		if ((x-1)*n+j)%h == h-1 {
			last = last.Add(wj)
		}
		sum = sum.Add(wj)
	}
	return first, last, sum
}
