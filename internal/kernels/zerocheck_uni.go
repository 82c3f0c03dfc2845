package kernels

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/gpu"
)

// Round 0 of the batch constraint sumcheck (zerocheck.go has the geometry): the plans of a trace's
// round 0, whole (the coefficient pre-pass, then zc_uni_eval or the generated code of
// zerocheck_whole.go) or in pieces (the slot-value table of
// zc_uni_values, then zc_uni_pieces or the generated code of zerocheck_generated.go), and their
// encoding.

// zcUniPlan is the round-0 dispatch of one trace; pieces: by the program's pieces (zc_uni_values,
// zc_uni_pieces; unit and item unused), width the row length of the slot-value table.
type zcUniPlan struct {
	unit, item, threads, tpg, sliceBlocks int
	coset, pieces                         bool
	width                                 int
	// gen: round 0 runs generated code: the pieces' (zc_uni_generated, without scratch) or the
	// whole program's (zc_uni_whole, without register scratch); NewZerocheck sets generated or
	// whole to the trace's code.
	gen       bool
	generated *GeneratedPieces
	whole     *GeneratedWhole
	// values: the dispatch of zc_uni_values (pieces); slotValues: zc_slot_values instead of
	// zc_coeffs(_tiles) and zc_uni_values (zcPlanner.slotValues).
	values     zcValuesPlan
	slotValues bool
}

// zcValuesPlan is the dispatch of zc_uni_values: threads per group, chunks of 2^logCols columns ×
// 2^logCosets cosets of N points, and the group memory they need.
type zcValuesPlan struct {
	tpg, logCols, logCosets int
	shBytes                 uint32
}

// planZcValues plans zc_uni_values on dev for N = 2^logN, M = 2^logM. GPUs: groups of
// groupSize threads, a chunk of 16 points per thread (8 butterflies per thread and stage: a chunk
// costs 7 barriers and its index arithmetic, so smaller chunks left the kernel issue-bound: two
// points a thread took 3.41 ms a keccakf-1024 proof on an H200, 8 2.60, 16 2.56); the
// host: one thread per group (its barriers cost per thread), chunks of 256 points. A chunk takes
// the cosets of a column first (up to M/N), then more columns; halved until its group memory fits
// the device.
func planZcValues(dev *gpu.Device, logN, logM int) zcValuesPlan {
	vp := zcValuesPlan{tpg: 1}
	target := 256
	if !isHost(dev) {
		vp.tpg = groupSize(dev, "zc_uni_values", gpuGroup)
		target = 16 * vp.tpg
	}
	mem := 32 << 10
	if m := dev.Limits().MaxThreadgroupMemory; m > 0 {
		mem = min(mem, m)
	}
	n := 1 << logN
	logK := max(bits.Len(uint(target))-1-logN, 0)
	for {
		vp.logCosets = min(logK, logM-logN)
		vp.logCols = logK - vp.logCosets
		words := n*(1<<logK+1) + n<<vp.logCols
		vp.shBytes = uint32((4*words + 15) &^ 15) // Metal allocates group memory in 16-byte units
		if logK == 0 || int(vp.shBytes) <= mem {
			return vp
		}
		logK--
	}
}

// encodeZcValues encodes zc_uni_values with plan vp (p's chunk shape set here).
func encodeZcValues(b *gpu.Batch, dev *gpu.Device, vp zcValuesPlan, coefs, deltas, srcmap, tw, lrow, sel, vals *gpu.Buffer, p zcValuesParams) {
	p.logCols, p.logCosets = uint32(vp.logCols), uint32(vp.logCosets)
	cosetRuns := 1 << (int(p.logM) - int(p.logN) - vp.logCosets)
	colRuns := (int(p.ncols) + 1 + 1<<vp.logCols - 1) >> vp.logCols
	chunks := int(p.sliceBlocks) * colRuns * cosetRuns
	groups := gpu.D1(uint32(min(chunks, 1<<16)))
	if !isHost(dev) {
		groups, _ = shapeFor(dev, "zc_uni_values", chunks*vp.tpg)
	}
	dispatchZcUniValues(b, groups, gpu.D1(uint32(vp.tpg)), coefs, deltas, srcmap, tw, lrow, sel, vals, p, vp.shBytes)
}

// ZcUsesPieces says whether dev runs long programs in pieces (ZcTrace.UsePieces: round 0 and the
// rounds with few pairs; the rows kernels' trace check): GPUs do; the host device's threads are
// few and its lanes already fill them.
func ZcUsesPieces(dev *gpu.Device) bool { return !isHost(dev) }

// planUniWhole plans round 0 of a trace of shape sh by the whole program: slices of the
// coefficient pre-pass, and threads that take one point (GPUs) or whole blocks (the host) per
// step.
func (pl zcPlanner) planUniWhole(sh ZcShape, budget int) (zcUniPlan, error) {
	dev, opts, L := pl.dev, pl.opts, pl.lanes
	n, m, x := 1<<pl.logN, 1<<pl.logM, 1<<sh.NLift
	up := zcUniPlan{coset: isHost(dev) && !opts.PointMode, gen: sh.Whole && !opts.Interpreted}
	up.unit = L
	if up.coset {
		up.unit = max(n, L)
	}
	perThread := up.unit*sh.Slots + L*up.regs(sh.Regs)
	align := 1
	if isHost(dev) && !opts.UnitItems {
		// A thread takes whole blocks (its partial rows cover every point class).
		up.item = max(m, up.unit)
		up.tpg = 1
		up.threads = 16 * max(dev.Limits().ComputeUnits, 1)
	} else {
		// One point per thread and step: G ≡ 0 mod M keeps each thread on one point class.
		up.item = up.unit
		up.tpg = 1
		if !isHost(dev) {
			up.tpg = groupSize(dev, "zc_uni_eval", gpuGroup)
			if up.gen {
				up.tpg = generatedGroup(dev, sh.WholeGroup)
			}
		}
		align = max(m/up.unit, up.tpg)
		up.threads = min(budget/max(perThread, 1), (x*m+up.item-1)/up.item)
		if !isHost(dev) {
			// Enough threads to fill the device twice over; more only multiply the
			// partial rows (12·M words per thread) that the sums must read.
			up.threads = min(up.threads, 8*gpuGroup*max(dev.Limits().ComputeUnits, 1))
		}
	}
	if opts.UniThreads > 0 {
		up.threads = opts.UniThreads
	}
	up.threads = max((up.threads+align-1)/align*align, align)
	if up.threads%up.tpg != 0 || up.threads*up.item%m != 0 {
		return up, fmt.Errorf("kernels: Zerocheck: %d threads in groups of %d", up.threads, up.tpg)
	}
	// Slices of the coefficient pre-pass: on the host small ones (a slice's coefficients are
	// read back by the evaluation right after, from the caches); on GPUs as large as the
	// budget allows.
	coefBudget := budget
	if isHost(dev) {
		coefBudget = budget / 16
	}
	perBlock := (n + 1) * sh.Cols
	sb := 1
	for sb < x && 2*sb*perBlock <= coefBudget {
		sb *= 2
	}
	for sb < x && sb*m < up.item {
		sb *= 2
	}
	if opts.SliceBlocks > 0 {
		sb = min(max(opts.SliceBlocks, (up.item+m-1)/m), x)
	}
	up.sliceBlocks = sb
	return up, nil
}

// generatedGroup is the group of a generated round-0 kernel on a GPU: the device's group size,
// within the kernel's own limit (limit 0: not known yet).
func generatedGroup(dev *gpu.Device, limit int) int {
	tpg := groupSize(dev, "", gpuGroup)
	if w := max(dev.Limits().SIMDWidth, 1); limit > 0 && limit < tpg {
		tpg = max(limit/w*w, 1)
	}
	return tpg
}

// regs is the register scratch of round 0 by the whole program per lane: none for generated code.
// numRegs: the program's registers.
func (up zcUniPlan) regs(numRegs int) int {
	if up.gen {
		return 0
	}
	return numRegs
}

// planUniPieces plans round 0 of a trace of shape sh by its pieces: slices of as many blocks as
// the slot-value table (every slot at every point of the slice) allows in budget words, and
// threads that fill the device without more scratch than budget; G·lanes a multiple of M (the
// partial rows' classes).
func (pl zcPlanner) planUniPieces(sh ZcShape, budget int) zcUniPlan {
	dev, L := pl.dev, pl.lanes
	m, x := 1<<pl.logM, 1<<sh.NLift
	ps := sh.Pieces
	width := func(sb int) int { return (sb*m + L - 1) / L * L }
	up := zcUniPlan{pieces: true, tpg: 1, sliceBlocks: 1, gen: ps.Generated && !pl.opts.Interpreted}
	for up.sliceBlocks < x && sh.Slots*width(2*up.sliceBlocks) <= budget {
		up.sliceBlocks *= 2
	}
	if pl.opts.SliceBlocks > 0 {
		up.sliceBlocks = min(pl.opts.SliceBlocks, x)
	}
	up.width = width(up.sliceBlocks)
	up.values = planZcValues(dev, pl.logN, pl.logM)
	up.slotValues = pl.slotValues()
	per := L * (ps.MaxSlots + ps.MaxRegs)
	if up.gen {
		per = 0 // values in registers: no scratch
	}
	if !isHost(dev) {
		up.tpg = groupSize(dev, "zc_uni_pieces", gpuGroup)
		if up.gen {
			up.tpg = generatedGroup(dev, ps.GroupLimit)
		}
	}
	up.threads = up.width / L * ps.Count
	if per > 0 {
		up.threads = min(budget/per, up.threads)
	}
	if isHost(dev) {
		up.threads = min(up.threads, 8*max(dev.Limits().ComputeUnits, 1))
	} else {
		up.threads = min(up.threads, 8*gpuGroup*max(dev.Limits().ComputeUnits, 1))
	}
	if pl.opts.UniThreads > 0 {
		up.threads = pl.opts.UniThreads
	}
	align := max(up.tpg, m)
	up.threads = max((up.threads+align-1)/align*align, align)
	return up
}

// encodeCoeffs encodes the coefficient pre-pass of blocks x0 .. x0+sb of t.
func (z *Zerocheck) encodeCoeffs(b *gpu.Batch, t *ZcTrace, x0, sb int) {
	dom := z.dom
	for q, part := range t.Parts {
		run := t.srcRuns[q]
		if run.count == 0 {
			continue
		}
		params := zcCoeffsParams{logH: uint32(t.LogHeight), logN: uint32(dom.LogN), logM: uint32(dom.LogM), x0: uint32(x0),
			sliceBlocks: uint32(sb), col0: uint32(run.col0), count: uint32(run.count), ncols: uint32(t.ncols),
			lanes: uint32(z.lanes)}
		if tpg := z.coeffsTileGroup(); tpg > 0 {
			tb := tpg / zcTileCols
			tiles := (sb + tb - 1) / tb * ((run.count + zcTileCols - 1) / zcTileCols)
			dispatchZcCoeffsTiles(b, gpu.D1(uint32(min(tiles, 1<<16))), gpu.D1(uint32(tpg)), part.Values.Buffer, t.cols.Buffer,
				dom.Tw.Buffer, dom.Scale.Buffer, z.coefs.Buffer, z.deltas.Buffer, params, uint32(4*zcTileCols*(tb<<dom.LogN+1)))
			continue
		}
		items := sb * ((run.count + z.lanes - 1) / z.lanes)
		g, tp := shapeFor(z.dev, "zc_coeffs", items)
		dispatchZcCoeffs(b, g, tp, part.Values.Buffer, t.cols.Buffer, dom.Tw.Buffer, dom.Scale.Buffer, z.coefs.Buffer, z.deltas.Buffer, params)
	}
}

// slotValues says whether round 0 in pieces makes its slot values with zc_slot_values (the
// coefficient pass and the values in one kernel, N = 16) rather than zc_coeffs(_tiles) and
// zc_uni_values: on GPUs, and on the host device with ZcOptions.SlotValues (tests).
func (pl zcPlanner) slotValues() bool {
	return pl.logN == 4 && (!isHost(pl.dev) || pl.opts.SlotValues)
}

// encodeSlotValues encodes zc_slot_values for blocks x0 .. x0+sb of t (one dispatch a part; the
// first also writes the selector slots) into the slot-value table of row length width.
func (z *Zerocheck) encodeSlotValues(b *gpu.Batch, t *ZcTrace, x0, sb, width int) error {
	dom := z.dom
	if len(t.Parts) == 0 {
		return fmt.Errorf("kernels: UniRound: a trace without parts")
	}
	sels := uint32(1)
	for q, part := range t.Parts {
		run := t.srcRuns[q]
		if run.count == 0 && sels == 0 {
			continue
		}
		params := zcSlotValuesParams{logH: uint32(t.LogHeight), logN: uint32(dom.LogN), logM: uint32(dom.LogM),
			blocks: uint32(t.Blocks()), x0: uint32(x0), sliceBlocks: uint32(sb), col0: uint32(run.col0),
			count: uint32(run.count), width: uint32(width), sels: sels,
			selFirst: t.selSlots[0], selLast: t.selSlots[1], selTrans: t.selSlots[2]}
		groups := min(((run.count+int(sels))*sb+zsvGroup-1)/zsvGroup, 1<<16)
		dispatchZcSlotValues(b, gpu.D1(uint32(groups)), gpu.D1(zsvGroup), part.Values.Buffer, t.cols.Buffer, dom.Tw.Buffer,
			dom.Scale.Buffer, t.srcmap.Buffer, dom.LRow.Buffer, t.sel.Buffer, z.vals.Buffer, params, zsvGroup/32*2*zsvTile*4)
		sels = 0
	}
	return nil
}

// zsvGroup is zc_slot_values' group: two SIMD groups of 32, each with two tiles of zsvTile words
// (ZSV_TILE of zerocheck.metal: 16.5 KiB of group memory a group, within Apple's 32 KiB).
const (
	zsvGroup = 64
	zsvTile  = 32 * 33
)

// zcTileCols is ZC_TILE_COLS of zerocheck.metal: the source columns of a zc_coeffs_tiles tile.
const zcTileCols = 16

// coeffsTileGroup returns zc_coeffs_tiles' group size on a GPU (0: the host, or a device whose
// groups cannot hold a tile; zc_coeffs then runs): whole rows of zcTileCols threads, a tile of at
// most 256 rows a column.
func (z *Zerocheck) coeffsTileGroup() int {
	if isHost(z.dev) {
		return 0
	}
	tpg := groupSize(z.dev, "zc_coeffs_tiles", zcTileCols*max(256>>z.dom.LogN, 1)) / zcTileCols * zcTileCols
	if tpg == 0 {
		return 0
	}
	if m := z.dev.Limits().MaxThreadgroupMemory; m > 0 && 4*zcTileCols*(tpg/zcTileCols<<z.dom.LogN+1) > m {
		return 0
	}
	return tpg
}

// encodeUniPieces is EncodeUniRound by t's pieces (plan up).
func (z *Zerocheck) encodeUniPieces(b *gpu.Batch, t *ZcTrace, up zcUniPlan, eq *gpu.Array[Mont4], eqOff int, out *gpu.Array[uint32], outOff int, then func(*gpu.Batch) error) error {
	dev, dom, ps := z.dev, z.dom, t.pieces
	pp := ps.pp
	x, m := t.Blocks(), 1<<dom.LogM
	for x0 := 0; x0 < x; x0 += up.sliceBlocks {
		sb := min(up.sliceBlocks, x-x0)
		if up.slotValues {
			if err := z.encodeSlotValues(b, t, x0, sb, up.width); err != nil {
				return err
			}
		} else {
			z.encodeCoeffs(b, t, x0, sb)
			encodeZcValues(b, dev, up.values, z.coefs.Buffer, z.deltas.Buffer, t.srcmap.Buffer, dom.Tw.Buffer, dom.LRow.Buffer,
				t.sel.Buffer, z.vals.Buffer, zcValuesParams{logN: uint32(dom.LogN), logM: uint32(dom.LogM), blocks: uint32(x),
					x0: uint32(x0), sliceBlocks: uint32(sb), ncols: uint32(t.ncols), width: uint32(up.width),
					selFirst: t.selSlots[0], selLast: t.selSlots[1], selTrans: t.selSlots[2]})
		}
		if x0 == 0 && then != nil {
			if err := then(b); err != nil {
				return err
			}
		}
		params := zcUniPiecesParams{logM: uint32(dom.LogM), x0: uint32(x0), points: uint32(sb * m), width: uint32(up.width),
			npieces: uint32(pp.NumPieces()), nslots: uint32(pp.MaxSlots), nregs: uint32(pp.MaxRegs),
			hasDen: uint32(b2u(t.hasDen)), nout: uint32(t.Prog.NumOutput), zero: uint32(b2u(x0 == 0)), eqOff: uint32(eqOff),
			interleave: uint32(b2u(!isHost(dev))), lanes: uint32(z.lanes)}
		groups, tpg := gpu.D1(uint32(up.threads/up.tpg)), gpu.D1(uint32(up.tpg))
		if up.generated != nil {
			if err := z.encodeUniGenerated(b, up.generated, groups, tpg, t, eq, params); err != nil {
				return err
			}
			continue
		}
		dispatchZcUniPieces(b, groups, tpg, pp.Words.Buffer, ps.cp.Buffer, ps.table.Buffer, t.Prog.Kinds.Buffer,
			t.weights.Buffer, ps.slots.Buffer, z.vals.Buffer, eq.Buffer, z.slots.Buffer, z.regs.Buffer,
			z.partials.Buffer, params)
	}
	return EncodeSumRowsVia(b, dev, z.partials, z.mid, out, outOff, up.threads*z.lanes/m, 12*m)
}

// EncodeUniRound encodes round 0 of trace t: out[outOff + 12q + 4k ..] = S_k of point class q
// (Montgomery Fp4; k = Zc, Num, Den), e(x) = eq[eqOff + x] (Fp4 index) for x < X.
func (z *Zerocheck) EncodeUniRound(b *gpu.Batch, t *ZcTrace, eq *gpu.Array[Mont4], eqOff int, out *gpu.Array[uint32], outOff int) error {
	return z.EncodeUniRoundThen(b, t, eq, eqOff, out, outOff, nil)
}

// EncodeUniRoundThen is EncodeUniRound with then (nil: nothing) encoded after the first slice's
// coefficient pass (and, in pieces, its slot values), which read neither eq nor the weights, and
// before the first kernel that does: work then encodes (the eq table's expansion, say) is queued
// behind work the device is already running instead of ahead of it.
func (z *Zerocheck) EncodeUniRoundThen(b *gpu.Batch, t *ZcTrace, eq *gpu.Array[Mont4], eqOff int, out *gpu.Array[uint32], outOff int, then func(*gpu.Batch) error) error {
	up, ok := z.uni[t]
	if !ok || z.slots == nil {
		return fmt.Errorf("kernels: UniRound: trace not planned (or Zerocheck closed)")
	}
	x := t.Blocks()
	if err := checkArray("UniRound", eq, eqOff+x); err != nil {
		return err
	}
	if up.pieces {
		return z.encodeUniPieces(b, t, up, eq, eqOff, out, outOff, then)
	}
	dev, dom := z.dev, z.dom
	for x0 := 0; x0 < x; x0 += up.sliceBlocks {
		sb := min(up.sliceBlocks, x-x0)
		z.encodeCoeffs(b, t, x0, sb)
		if x0 == 0 && then != nil {
			if err := then(b); err != nil {
				return err
			}
		}
		coset := uint32(0)
		if up.coset {
			coset = 1
		}
		zero := uint32(0)
		if x0 == 0 {
			zero = 1
		}
		groups, tpg := gpu.D1(uint32(up.threads/up.tpg)), gpu.D1(uint32(up.tpg))
		params := zcUniParams{logN: uint32(dom.LogN), logM: uint32(dom.LogM), blocks: uint32(x), x0: uint32(x0),
			sliceBlocks: uint32(sb), unit: uint32(up.unit), item: uint32(up.item), cosetMode: coset, ncols: uint32(t.ncols),
			nslots: uint32(t.nslots), nregs: uint32(up.regs(t.Prog.NumRegs)), selFirst: t.selSlots[0], selLast: t.selSlots[1],
			selTrans: t.selSlots[2], hasDen: uint32(b2u(t.hasDen)), nout: uint32(t.Prog.NumOutput), zero: zero,
			eqOff: uint32(eqOff), wide: uint32(b2u(!z.opts.NoTranspose)), interleave: uint32(b2u(!isHost(dev))),
			lanes: uint32(z.lanes)}
		if up.whole != nil {
			dispatchZcUniWhole(b, up.whole.module, groups, tpg, t.Prog.Words.Buffer, t.cp.Buffer, t.Prog.Kinds.Buffer,
				t.weights.Buffer, z.coefs.Buffer, z.deltas.Buffer, t.srcmap.Buffer, dom.Tw.Buffer, dom.LRow.Buffer, t.sel.Buffer,
				eq.Buffer, z.slots.Buffer, z.regs.Buffer, z.partials.Buffer, params)
			continue
		}
		dispatchZcUniEval(b, groups, tpg, t.Prog.Words.Buffer, t.cp.Buffer, t.Prog.Kinds.Buffer, t.weights.Buffer,
			z.coefs.Buffer, z.deltas.Buffer, t.srcmap.Buffer, dom.Tw.Buffer, dom.LRow.Buffer, t.sel.Buffer, eq.Buffer,
			z.slots.Buffer, z.regs.Buffer, z.partials.Buffer, params)
	}
	m := 1 << dom.LogM
	return EncodeSumRowsVia(b, dev, z.partials, z.mid, out, outOff, up.threads*up.item/m, 12*m)
}
