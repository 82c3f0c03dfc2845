package device

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/stark"
)

// Constraint programs on the rows of resident traces (the kernels' rows family), shared by the
// GKR leaves (gkr.go) and the trace check (check.go): a trace's rows are evaluated in runs of
// 2^logPoints rows, each run's slots gathered from the parts before the evaluating kernel.

// rowEval is one trace bound to a program for evaluation on its rows.
type rowEval struct {
	prog  *constraints.Program
	dp    *kernels.Program
	cols  *usedColumns
	parts []*gpu.Array[field.Fp] // opening-part order; nil for a width-0 part
	// cp is the program's constants and public values (uploaded; freed by free); cpWords the
	// same before a deferred upload (uploadConsts).
	cp                *gpu.Array[kernels.Mont]
	cpWords           []kernels.Mont
	height, logPoints int
	// pieces, when set, runs the program in pieces (the trace check on GPUs; freed by free).
	pieces *kernels.RowPieces
}

// newRowEval binds in's parts on b to its verifying key's program compiled for outs and uploads
// the program's constants and public values. Its errors name the AIR; the callers say which stage
// they belong to. extra is the scratch the evaluating kernel needs per
// point besides slots and registers (it sets the run length, kernels.RowPoints).
func (b *Backend) newRowEval(in *stark.AirInput, outs constraints.Outputs, extra func(*kernels.Program) int) (*rowEval, error) {
	return b.bindRowEval(in, outs, extra, false)
}

// bindRowEval is newRowEval, leaving the upload to uploadConsts where deferUpload is set (an
// upload waits for the work queued before it: PrepareGkr uploads last).
func (b *Backend) bindRowEval(in *stark.AirInput, outs constraints.Outputs, extra func(*kernels.Program) int, deferUpload bool) (*rowEval, error) {
	if in == nil || in.VK == nil || in.VK.DAG == nil || in.Common == nil {
		return nil, fmt.Errorf("trace without verifying key or common main trace")
	}
	prog, dp, err := b.programFor(in.VK, outs)
	if err != nil {
		return nil, err
	}
	cols, err := b.columnsOf(prog)
	if err != nil {
		return nil, err
	}
	ts := []stark.Trace{in.Common}
	if in.Preprocessed != nil {
		ts = append(ts, in.Preprocessed)
	}
	ts = append(ts, in.Cached...)
	if len(ts) != len(prog.PartWidths) {
		return nil, fmt.Errorf("AIR %d: %d trace parts, its program has %d", in.AirIndex, len(ts), len(prog.PartWidths))
	}
	dts, err := b.traces(ts)
	if err != nil {
		return nil, err
	}
	h := in.Common.Height()
	if h < 1 || h&(h-1) != 0 {
		return nil, fmt.Errorf("AIR %d: height %d is not a power of two", in.AirIndex, h)
	}
	e := &rowEval{prog: prog, dp: dp, cols: cols, height: h}
	for q, t := range dts {
		if t.Width() != prog.PartWidths[q] || t.Height() != h {
			return nil, fmt.Errorf("AIR %d: part %d is %d×%d, want %d×%d", in.AirIndex, q, t.Height(), t.Width(), h, prog.PartWidths[q])
		}
		buf, err := t.values()
		if err != nil {
			return nil, err
		}
		e.parts = append(e.parts, buf)
	}
	e.planRuns(b.dev, extra(dp))
	if e.cpWords, err = dp.ConstsAndPublic(in.Public); err != nil {
		return nil, fmt.Errorf("AIR %d: %w", in.AirIndex, err)
	}
	if !deferUpload {
		if err := e.uploadConsts(b.dev); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// uploadConsts uploads the program's constants and public values (newRowEval's, deferred).
func (e *rowEval) uploadConsts(dev *gpu.Device) error {
	cp, err := gpu.UploadArray(dev, "program constants and public values", e.cpWords)
	if err != nil {
		return err
	}
	e.cp, e.cpWords = cp, nil
	return nil
}

// planRuns sets the run length for extra words of scratch per point besides slots and registers
// (kernels.RowPoints).
func (e *rowEval) planRuns(dev *gpu.Device, extra int) {
	e.logPoints = bits.TrailingZeros(uint(kernels.RowPoints(dev, e.dp, e.height, extra)))
}

// planPieces sets the run length of an evaluation by pp's pieces (as long as the slot values
// alone allow) and returns the pieces' plan for it.
func (e *rowEval) planPieces(dev *gpu.Device, pp *kernels.ProgramPieces) kernels.RowPiecesPlan {
	e.logPoints = bits.TrailingZeros(uint(kernels.RowPointsFor(dev, e.dp.NumSlots, e.height)))
	return kernels.PlanRowPieces(dev, pp, e.points())
}

func (e *rowEval) free() {
	if e.cp != nil {
		e.cp.Free()
		e.cp = nil
	}
	if e.pieces != nil {
		e.pieces.Free()
		e.pieces = nil
	}
}

// usePieces makes the evaluation run p's pieces (vk's program for outs): runs as long as the
// slot values alone allow, and the pieces' thread scratch.
func (e *rowEval) usePieces(b *Backend, in *stark.AirInput, outs constraints.Outputs) error {
	pp, err := b.pieces(in.VK, outs, constraints.DevicePieces)
	if err != nil {
		return err
	}
	e.planPieces(b.dev, pp)
	e.pieces, err = kernels.BindRowPieces(b.dev, pp, in.Public, e.points())
	return err
}

// points is the run length T.
func (e *rowEval) points() int { return 1 << e.logPoints }

// scratch returns the slots and registers (uints) of one run (in pieces: the slot values and the
// pieces' registers).
func (e *rowEval) scratch() (slots, regs int) {
	if e.pieces != nil {
		_, r := e.pieces.Scratch()
		return e.dp.NumSlots << e.logPoints, r
	}
	return e.dp.NumSlots << e.logPoints, max(e.dp.NumRegs, 1) << e.logPoints
}

// encodeRuns encodes, run after run, the slots of every part's used columns and then f(run).
func (e *rowEval) encodeRuns(b *gpu.Batch, dev *gpu.Device, slots, regs *gpu.Array[kernels.Mont], f func(kernels.RowRun) error) error {
	for row0 := 0; row0 < e.height; row0 += e.points() {
		run := kernels.RowRun{Prog: e.dp, CP: e.cp, Slots: slots, Regs: regs, Height: e.height, Row0: row0, LogPoints: e.logPoints}
		for q, part := range e.parts {
			if n := e.cols.Count[q]; n > 0 {
				if err := run.EncodeFillSlots(b, dev, part, e.cols.words, e.cols.Off[q], n, e.prog.PartStart[q]); err != nil {
					return err
				}
			}
		}
		if err := f(run); err != nil {
			return err
		}
	}
	return nil
}

// rowScratch is the scratch of the runs of several traces, evaluated one after another.
// Every word is a Montgomery value: slots, registers, and extra (the pieces' slots of the trace
// check, the program's outputs of the GKR leaves).
type rowScratch struct {
	slots, regs, extra *gpu.Array[kernels.Mont]
}

// allocRowScratch allocates scratch for the largest run of evals (extra: words per run beyond
// slots and registers, 0 for none).
func allocRowScratch(dev *gpu.Device, evals []*rowEval, extra func(*rowEval) int) (*rowScratch, error) {
	var ns, nr, ne int
	for _, e := range evals {
		s, r := e.scratch()
		ns, nr, ne = max(ns, s), max(nr, r), max(ne, extra(e))
	}
	sc := &rowScratch{}
	var err error
	if sc.slots, err = gpu.AllocArray[kernels.Mont](dev, "row slots", max(ns, 1)); err != nil {
		return nil, err
	}
	if sc.regs, err = gpu.AllocArray[kernels.Mont](dev, "row registers", max(nr, 1)); err != nil {
		sc.free()
		return nil, err
	}
	if ne > 0 {
		if sc.extra, err = gpu.AllocArray[kernels.Mont](dev, "row outputs", ne); err != nil {
			sc.free()
			return nil, err
		}
	}
	return sc, nil
}

func (sc *rowScratch) free() {
	for _, a := range []*gpu.Array[kernels.Mont]{sc.slots, sc.regs, sc.extra} {
		if a != nil {
			a.Free()
		}
	}
	*sc = rowScratch{}
}
