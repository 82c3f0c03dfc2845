package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The rows family (shaders/common/rows.metal, shaders/include/rows.h): constraint programs (program.h)
// evaluated on the rows of traces resident on the device, as constraints.Rows does on the host:
// row r of a trace of height h reads column c of each part at rows r and (r + 1) mod h, and the
// selectors is_first = [r = 0], is_last = [r = h − 1], is_transition = 1 − is_last.
//
// Rows are evaluated in runs (RowRun) of T = 2^LogPoints consecutive rows, T ≤ h: point t of the
// program.h scratch (slots and registers laid out [index][point]) is row Row0 + t. A run's slots
// are gathered part by part (EncodeFillSlots: only the columns the program reads), then a kernel
// writes the selector slots and runs the program on every point: the trace check below
// (EncodeCheckPartials), or the LogUp leaves of the GKR family (gkr.go).

// RowRun is one run of rows of a trace and the scratch its evaluation uses.
type RowRun struct {
	Prog *Program
	// CP is the program's constants and public values (Program.ConstsAndPublic); Slots and Regs
	// hold at least NumSlots·T and NumRegs·T Montgomery values.
	CP, Slots, Regs *gpu.Array[Mont]
	// Height is the trace height h (a power of two); the run is rows [Row0, Row0 + 2^LogPoints).
	Height, Row0, LogPoints int
}

// Points is T.
func (r RowRun) Points() int { return 1 << r.LogPoints }

func (r RowRun) check(op string) error {
	if err := r.checkRows(op); err != nil {
		return err
	}
	return r.Prog.check(op, &EvalBuffers{CP: r.CP, Slots: r.Slots, Regs: r.Regs, Points: r.Points()})
}

// checkRows checks the program and the run's rows.
func (r RowRun) checkRows(op string) error {
	if r.Prog == nil || r.Prog.Words == nil {
		return fmt.Errorf("kernels: %s: no program", op)
	}
	h, T := r.Height, r.Points()
	if h < 1 || h&(h-1) != 0 || r.LogPoints < 0 || T > h || r.Row0 < 0 || r.Row0%T != 0 || r.Row0+T > h {
		return fmt.Errorf("kernels: %s: rows [%d, %d+2^%d) of a trace of height %d", op, r.Row0, r.Row0, r.LogPoints, h)
	}
	return nil
}

// Flags of a used column (UsedColumns; ROWS_LOCAL and ROWS_NEXT of rows.metal).
const (
	rowsLocal   = 1 << 30
	rowsNext    = 1 << 31
	rowsColMask = 1<<30 - 1
)

// UsedColumns is rows_fill_slots' table of the columns a program reads: Words holds, part after
// part, one entry per column whose local or next-row slot the program reads (the column index with
// the flags of those slots); part q's entries are Words[Off[q] : Off[q] + Count[q]].
type UsedColumns struct {
	Words      []uint32
	Off, Count []int
}

// UsedColumnsOf returns p's table (opening-part order).
func UsedColumnsOf(p *constraints.Program) UsedColumns {
	var u UsedColumns
	for q, width := range p.PartWidths {
		u.Off = append(u.Off, len(u.Words))
		for c := range width {
			s := 2 * (p.PartStart[q] + c)
			w := uint32(c)
			if p.Used[s] {
				w |= rowsLocal
			}
			if p.Used[s+1] {
				w |= rowsNext
			}
			if w != uint32(c) {
				u.Words = append(u.Words, w)
			}
		}
		u.Count = append(u.Count, len(u.Words)-u.Off[q])
	}
	return u
}

// EncodeFillSlots encodes the slot values of one part's used columns for the run: part is the
// part's trace as loaded (column-major, Height rows, CANONICAL values), cols a UsedColumns table
// on the device whose entries cols[off : off+count] are the part's, partStart the part's first
// column among all parts (constraints.Program.PartStart). Slots become Montgomery values.
func (r RowRun) EncodeFillSlots(b *gpu.Batch, dev *gpu.Device, part *gpu.Array[field.Fp], cols *gpu.Array[uint32], off, count, partStart int) error {
	if err := r.checkRows("FillSlots"); err != nil {
		return err
	}
	if err := checkArray("FillSlots", r.Slots, r.Prog.NumSlots*r.Points()); err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if partStart < 0 || off < 0 || 2*(partStart+1) > r.Prog.NumSlots {
		return fmt.Errorf("kernels: FillSlots: part start %d for %d slots, columns from %d", partStart, r.Prog.NumSlots, off)
	}
	if err := checkArray("FillSlots", cols, off+count); err != nil {
		return err
	}
	if part == nil || part.Len()%r.Height != 0 {
		return fmt.Errorf("kernels: FillSlots: part is not a matrix of height %d", r.Height)
	}
	n := count << r.LogPoints
	g, t := shapeFor(dev, "rows_fill_slots", n)
	dispatchRowsFillSlots(b, g, t, part.Buffer, cols.Buffer, r.Slots.Buffer, rowsSlotsParams{colsOff: uint32(off), ncols: uint32(count),
		partStart: uint32(partStart), height: uint32(r.Height), row0: uint32(r.Row0), logPoints: uint32(r.LogPoints)})
	return b.Err()
}

// RowPoints returns the run length T for a trace of height rows: the largest power of two ≤ height
// whose scratch (NumSlots + NumRegs + extra uints per point) fits a budget: on GPUs, where each row
// is a thread, up to 2^18 rows in 512 MiB (at most 1/16 of the device memory); on the host, whose
// few threads walk the scratch one point after another, up to 2^12 rows in 32 MiB. At least 1.
// (GPUs had 2^16: interaction-pair 2^20's GKR leaves were then 96 launches of 3–5 µs, and its
// GKR stage 0.4–0.6 ms slower on an H200 than with 2^17–2^20; docs/perf-notes/gkr.md.)
func RowPoints(dev *gpu.Device, p *Program, height, extra int) int {
	return RowPointsFor(dev, p.NumSlots+max(p.NumRegs, 1)+extra, height)
}

// RowPointsFor is RowPoints for words uints of scratch per point.
func RowPointsFor(dev *gpu.Device, words, height int) int {
	budget, maxPoints := 512<<20, 1<<18
	if isHost(dev) {
		budget, maxPoints = 32<<20, 1<<12
	}
	if mem := dev.Limits().MemoryBytes; mem > 0 {
		budget = int(min(uint64(budget), mem/16))
	}
	t := 1
	for 2*t <= height && 2*t <= maxPoints && 2*t*words*4 <= budget {
		t *= 2
	}
	return t
}

// CheckPartialGroups is the number of pairs EncodeCheckPartials writes for a run of points rows.
func CheckPartialGroups(dev *gpu.Device, points int) int {
	g, _, _ := checkShape(dev, points)
	return int(g.X)
}

// checkShape is rows_check_partials' dispatch for T points: on GPUs one point per thread in groups
// of up to 256; on the host one-thread groups (barriers cost per work item), each thread taking
// runs of MSL_LANES points.
func checkShape(dev *gpu.Device, points int) (groups, tpg gpu.Dim3, tgBytes uint32) {
	items := points
	t := groupSize(dev, "rows_check_partials", gpuGroup)
	if isHost(dev) {
		t = 1
		items = (points + 1<<hostLogLanes - 1) >> hostLogLanes
	}
	g := min(max((items+t-1)/t, 1), 1<<16)
	if isHost(dev) {
		g = min(g, maxReduceGroups(dev))
	}
	return gpu.D1(uint32(g)), gpu.D1(uint32(t)), uint32(8 * t)
}

// EncodeCheckPartials encodes the constraint check of the run's rows (the program's outputs are the
// constraints: constraints.Constraints): partials[2(outPair + g) ..] = (row, output) of the first
// row of group g's points where an output is not zero, and the smallest such output,
// (0xffffffff, 0xffffffff) when none; g < CheckPartialGroups(dev, T). The slots of every part must
// be filled (EncodeFillSlots). Reduce with EncodeMinPairs.
func (r RowRun) EncodeCheckPartials(b *gpu.Batch, dev *gpu.Device, partials *gpu.Array[uint32], outPair int) error {
	if err := r.check("CheckPartials"); err != nil {
		return err
	}
	g, t, tg := checkShape(dev, r.Points())
	if err := checkArray("CheckPartials", partials, 2*(outPair+int(g.X))); err != nil {
		return err
	}
	dispatchRowsCheckPartials(b, g, t, r.Prog.Words.Buffer, r.CP.Buffer, r.Slots.Buffer, r.Regs.Buffer, partials.Buffer,
		rowsCheckParams{points: uint32(r.Points()), row0: uint32(r.Row0), height: uint32(r.Height),
			selSlot: uint32(r.Prog.NumSlots - 3), outRow: uint32(outPair)}, tg)
	return b.Err()
}

// EncodeMinPairs encodes out[2·at ..] = the lexicographic minimum of the count pairs (row, output)
// at in[2·first ..] (rows_min_pairs, one group): the second pass of EncodeCheckPartials.
func EncodeMinPairs(b *gpu.Batch, dev *gpu.Device, in, out *gpu.Array[uint32], first, count, at int) error {
	if first < 0 || count <= 0 || at < 0 {
		return fmt.Errorf("kernels: MinPairs: %d pairs from %d into %d", count, first, at)
	}
	if err := checkArray("MinPairs", in, 2*(first+count)); err != nil {
		return err
	}
	if err := checkArray("MinPairs", out, 2*(at+1)); err != nil {
		return err
	}
	t := groupSize(dev, "rows_min_pairs", gpuGroup)
	if isHost(dev) {
		t = 1
	}
	dispatchRowsMinPairs(b, gpu.D1(1), gpu.D1(uint32(t)), in.Buffer, out.Buffer, rowsMinParams{first: uint32(first), count: uint32(count), at: uint32(at)}, uint32(8*t))
	return b.Err()
}

// RowPieces is a program in pieces bound to one trace's public values for the rows kernels
// (ProgramPieces.Bind, uploaded).
type RowPieces struct {
	Pieces       *ProgramPieces
	cp           *gpu.Array[Mont]
	table, slots *gpu.Array[uint32] // descriptors: ProgramPieces.Bind
	RowPiecesPlan
}

// RowPiecesPlan is the check's dispatch of a program in pieces (rows_check_pieces: Groups groups
// of TPG threads) and the thread scratch it needs (Montgomery values): the largest piece's slots
// and registers per thread.
type RowPiecesPlan struct {
	Groups, TPG, SlotWords, RegWords int
}

// PlanRowPieces plans the check of pp's pieces on dev for runs of up to points rows: on GPUs
// enough threads to fill the device twice over, in groups of up to 256; on the host one-thread
// groups (barriers cost per work item).
func PlanRowPieces(dev *gpu.Device, pp *ProgramPieces, points int) RowPiecesPlan {
	var p RowPiecesPlan
	items := points * pp.NumPieces()
	if isHost(dev) {
		p.TPG, p.Groups = 1, min(items, maxReduceGroups(dev))
	} else {
		p.TPG = groupSize(dev, "rows_check_pieces", gpuGroup)
		p.Groups = min((items+p.TPG-1)/p.TPG, 8*max(dev.Limits().ComputeUnits, 1)*gpuGroup/p.TPG, 1<<16)
	}
	g := p.Groups * p.TPG
	p.SlotWords, p.RegWords = g*max(pp.MaxSlots, 1), g*max(pp.MaxRegs, 1)
	return p
}

// BindRowPieces uploads pp's buffers for these public values and plans the check's dispatch for
// runs of up to points rows (PlanRowPieces).
func BindRowPieces(dev *gpu.Device, pp *ProgramPieces, public []field.Fp, points int) (*RowPieces, error) {
	cp, table, slots, err := pp.Bind(public)
	if err != nil {
		return nil, err
	}
	rp := &RowPieces{Pieces: pp}
	if rp.cp, err = gpu.UploadArray(dev, "row pieces consts", cp); err == nil {
		if rp.table, err = gpu.UploadArray(dev, "row pieces table", table); err == nil {
			rp.slots, err = gpu.UploadArray(dev, "row pieces slots", slots)
		}
	}
	if err != nil {
		rp.Free()
		return nil, err
	}
	rp.RowPiecesPlan = PlanRowPieces(dev, pp, points)
	return rp, nil
}

// Scratch is the Montgomery values of the thread scratch EncodeCheckPieces needs: slots and registers.
func (rp *RowPieces) Scratch() (slots, regs int) { return rp.SlotWords, rp.RegWords }

// PartialGroups is the number of pairs EncodeCheckPieces writes per run.
func (rp *RowPieces) PartialGroups() int { return rp.Groups }

// Free releases the uploads (not the pieces).
func (rp *RowPieces) Free() {
	if rp.cp != nil {
		rp.cp.Free()
	}
	for _, a := range []*gpu.Array[uint32]{rp.table, rp.slots} {
		if a != nil {
			a.Free()
		}
	}
	rp.cp, rp.table, rp.slots = nil, nil, nil
}

// EncodeCheckPieces is EncodeCheckPartials by the pieces of the run's program (rows_check_pieces):
// the run's Slots hold the filled slot values (EncodeFillSlots; CP and Regs are not used), slots and regs
// are the pieces' thread scratch (Scratch), PartialGroups pairs are written from outPair.
func (r RowRun) EncodeCheckPieces(b *gpu.Batch, dev *gpu.Device, rp *RowPieces, slots, regs *gpu.Array[Mont], partials *gpu.Array[uint32], outPair int) error {
	if err := r.checkRows("CheckPieces"); err != nil {
		return err
	}
	if err := checkArray("CheckPieces", r.Slots, r.Prog.NumSlots*r.Points()); err != nil {
		return err
	}
	if rp == nil || rp.table == nil || rp.Pieces.Words == nil {
		return fmt.Errorf("kernels: CheckPieces: no pieces")
	}
	if err := checkArray("CheckPieces", slots, rp.SlotWords); err != nil {
		return err
	}
	if err := checkArray("CheckPieces", regs, rp.RegWords); err != nil {
		return err
	}
	if err := checkArray("CheckPieces", partials, 2*(outPair+rp.Groups)); err != nil {
		return err
	}
	pp := rp.Pieces
	dispatchRowsCheckPieces(b, gpu.D1(uint32(rp.Groups)), gpu.D1(uint32(rp.TPG)), pp.Words.Buffer, rp.cp.Buffer, rp.table.Buffer,
		rp.slots.Buffer, r.Slots.Buffer, slots.Buffer, regs.Buffer, partials.Buffer,
		rowsPiecesParams{points: uint32(r.Points()), row0: uint32(r.Row0), height: uint32(r.Height),
			selSlot: uint32(r.Prog.NumSlots - 3), outRow: uint32(outPair), npieces: uint32(pp.NumPieces()),
			nslots: uint32(pp.MaxSlots), nregs: uint32(pp.MaxRegs)}, uint32(8*rp.TPG))
	return b.Err()
}
