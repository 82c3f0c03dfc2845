package kernels

import (
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The plans of a Zerocheck from the traces' shapes: NewZerocheck plans its traces by their
// shapes (ZcTrace.Shape), and a memory estimate made before any trace is uploaded (the device
// backend's, before a key's first proof) plans the same shapes, made from the key
// (ZcShapeOf), through ZerocheckScratch: the scratch it counts is the scratch NewZerocheck
// allocates.

// ZcShape is what the zerocheck's plans read of one trace.
type ZcShape struct {
	// NLift: the trace has X = 2^NLift blocks of N rows.
	NLift int
	// Slots and Regs are the program's slots and registers; Cols round 0's source columns (the
	// columns whose local or rotated slot the program reads, each part's run aligned to 16).
	Slots, Regs, Cols int
	// Whole: the program has generated whole-program code (Program.UseGenerated), which round 0
	// runs where the program runs whole and the options allow; WholeGroup is its kernel's largest
	// group (0: not known, the code not built yet: the device's group size).
	Whole      bool
	WholeGroup int
	// Pieces are round 0's pieces (ZcTrace.UsePieces; nil: none), RoundPieces the rounds' own
	// (ZcTrace.UseRoundPieces; nil: Pieces).
	Pieces, RoundPieces *ZcPiecesShape
}

// ZcPiecesShape is what the plans read of a program in pieces.
type ZcPiecesShape struct {
	// Count is the number of pieces; MaxSlots and MaxRegs the largest piece's slots and registers.
	Count, MaxSlots, MaxRegs int
	// Generated: the pieces have generated round-0 code (ProgramPieces.UseGenerated); GroupLimit
	// is its kernel's largest group (0: not known, the code not built yet).
	Generated  bool
	GroupLimit int
}

// Shape is the shape of the pieces as they are now (generated code once built).
func (pp *ProgramPieces) Shape() ZcPiecesShape {
	s := ZcPiecesShape{Count: pp.NumPieces(), MaxSlots: pp.MaxSlots, MaxRegs: pp.MaxRegs, Generated: pp.Generated != nil}
	if pp.Generated != nil {
		s.GroupLimit = pp.Generated.groupLimit()
	}
	return s
}

// ZcShapeOf is the shape of a trace of height 2^logHeight of program pg on dev, on a domain of
// N = 2^logN rows per block, without generated code or pieces (the caller adds those it will give
// the trace). Its registers are those of pg's code on dev (DeviceCode).
func ZcShapeOf(dev *gpu.Device, pg *constraints.Program, logN, logHeight int) (ZcShape, error) {
	dc, err := DeviceCode(dev, pg)
	if err != nil {
		return ZcShape{}, err
	}
	_, cols, _ := zcSources(pg)
	return ZcShape{NLift: max(logHeight-logN, 0), Slots: pg.NumSlots(), Regs: dc.NumRegs, Cols: len(cols)}, nil
}

// UseWhole says that the program has generated whole-program code: g, or code not built yet (nil).
func (s *ZcShape) UseWhole(g *GeneratedWhole) {
	s.Whole, s.WholeGroup = true, 0
	if g != nil {
		s.WholeGroup = g.groupLimit()
	}
}

// Shape is the trace's shape: its program's generated code and its pieces as they are now.
func (z *ZcTrace) Shape() ZcShape {
	s := ZcShape{NLift: z.NLift, Slots: z.nslots, Regs: z.Prog.NumRegs, Cols: z.ncols}
	if z.Prog.Generated != nil {
		s.UseWhole(z.Prog.Generated)
	}
	if z.pieces != nil {
		ps := z.pieces.pp.Shape()
		s.Pieces = &ps
	}
	if z.rpieces != nil {
		rs := z.rpieces.pp.Shape()
		s.RoundPieces = &rs
	}
	return s
}

// ZcScratch is the scratch a Zerocheck shares among its traces, in words: each buffer is as
// large as its largest plan needs (NewZerocheck allocates at least one word each; Mid on GPUs
// only, Vals only when a trace runs round 0 in pieces).
type ZcScratch struct {
	Slots, Regs, Partials, Mid, Coefs, Deltas, Vals int
}

// Bytes is the device memory NewZerocheck allocates for the scratch.
func (s ZcScratch) Bytes() int64 {
	n := int64(max(s.Slots, 1) + max(s.Regs, 1) + max(s.Partials, 1) + max(s.Coefs, 1) + max(s.Deltas, 1))
	if s.Mid > 0 {
		n += int64(s.Mid)
	}
	if s.Vals > 0 {
		n += int64(s.Vals)
	}
	return 4 * n
}

// zcPlanner plans the dispatches of the traces of one Zerocheck: the device, the options
// (ScratchBytes set), the lanes, N = 2^logN, M = 2^logM and the rounds' evaluation points.
type zcPlanner struct {
	dev                       *gpu.Device
	opts                      ZcOptions
	lanes, logN, logM, points int
}

func newZcPlanner(dev *gpu.Device, logN, logM, points int, opts ZcOptions) zcPlanner {
	if opts.ScratchBytes <= 0 {
		opts.ScratchBytes = 256 << 20
	}
	return zcPlanner{dev: dev, opts: opts, lanes: zcLanes(dev), logN: logN, logM: logM, points: points}
}

// mid is the first level of the partial rows' two-level sums (GPUs; none on the host), whatever
// the traces.
func (pl zcPlanner) mid() int {
	if isHost(pl.dev) {
		return 0
	}
	return SumRowsMidRows * max(12<<pl.logM, 12*pl.points)
}

// plan plans round 0 and the rounds j ≥ 1 (rounds: the trace has any) of a trace of shape sh
// and grows sc to the scratch they need.
func (pl zcPlanner) plan(sh ZcShape, sc *ZcScratch) (up zcUniPlan, rp zcRoundPlan, rounds bool, err error) {
	dev, opts, L, points := pl.dev, pl.opts, pl.lanes, pl.points
	budget := opts.ScratchBytes / 4 // words
	n, x := 1<<pl.logN, 1<<sh.NLift
	// Round 0.
	if sh.Pieces != nil && (opts.Pieces || !isHost(dev)) {
		ps := sh.Pieces
		up = pl.planUniPieces(sh, budget)
		if !up.gen {
			sc.Slots = max(sc.Slots, up.threads*L*ps.MaxSlots)
			sc.Regs = max(sc.Regs, up.threads*L*ps.MaxRegs)
		}
		sc.Partials = max(sc.Partials, 12*up.threads*L)
		sc.Vals = max(sc.Vals, sh.Slots*up.width)
	} else {
		if up, err = pl.planUniWhole(sh, budget); err != nil {
			return up, rp, false, err
		}
		sc.Slots = max(sc.Slots, up.threads*up.unit*sh.Slots)
		sc.Regs = max(sc.Regs, up.threads*L*up.regs(sh.Regs))
		sc.Partials = max(sc.Partials, 12*up.threads*up.item)
	}
	// zc_slot_values (up.slotValues) reads no coefficient table, but the table stays allocated:
	// without its 46 MB (keccakf-1024) the stream-ordered pool served the later allocations of
	// the proof slower, 0.4–0.7 ms a proof on an H200 (docs/perf-notes/constraints.md).
	sc.Coefs = max(sc.Coefs, up.sliceBlocks*n*sh.Cols)
	sc.Deltas = max(sc.Deltas, up.sliceBlocks*sh.Cols)

	// Rounds j ≥ 1.
	if sh.NLift == 0 {
		return up, rp, false, nil
	}
	units := (x/2*points + L - 1) / L // the first round's (pair, X) lane groups
	rps := sh.RoundPieces
	if rps == nil {
		rps = sh.Pieces
	}
	if rps != nil {
		pl.planRoundPieces(&rp, rps, units)
		sc.Partials = max(sc.Partials, rp.pieceThreads*L*points*12)
	}
	if units < rp.pieceBelow {
		return up, rp, true, nil // every round runs the pieces: no scratch for the whole program
	}
	if isHost(dev) {
		rp.tpg = 1
		rp.threads = min(8*max(dev.Limits().ComputeUnits, 1), units)
	} else {
		rp.tpg = groupSize(dev, "zc_round_eval", gpuGroup)
		per := 4 * (sh.Slots + sh.Regs)
		rp.threads = min(budget/max(per, 1), units)
	}
	if opts.RoundThreads > 0 {
		rp.threads = opts.RoundThreads
	}
	rp.threads = max((rp.threads+rp.tpg-1)/rp.tpg*rp.tpg, rp.tpg)
	sc.Slots = max(sc.Slots, rp.threads*L*4*sh.Slots)
	sc.Regs = max(sc.Regs, rp.threads*L*4*sh.Regs)
	sc.Partials = max(sc.Partials, rp.threads*L*points*12)
	return up, rp, true, nil
}

// ZerocheckScratch is the scratch NewZerocheck allocates for traces of the given shapes on dom
// (N = 2^logN, M = 2^logM) with points evaluation points and options opts.
func ZerocheckScratch(dev *gpu.Device, logN, logM, points int, shapes []ZcShape, opts ZcOptions) (ZcScratch, error) {
	pl := newZcPlanner(dev, logN, logM, points, opts)
	sc := ZcScratch{Mid: pl.mid()}
	for _, sh := range shapes {
		if _, _, _, err := pl.plan(sh, &sc); err != nil {
			return ZcScratch{}, err
		}
	}
	return sc, nil
}
