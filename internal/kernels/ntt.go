package kernels

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// NTT launches the kernels of shaders/commit/ntt.metal: batched DFT/IDFT over the columns of a
// column-major matrix (natural order in and out, exactly cpuref.DFTColumns/IDFTColumns with
// g_n = field.TwoAdicGenerator(log n); the inverse includes the 1/n factor), the batched small
// transform of the RS message (cpuref.RSMessageInPlace) and the RS encoding of a matrix
// (cpuref.RSEncodeMatrix).
//
// It owns two twiddle tables on the device (forward and inverse, Montgomery form,
// tw[h + j] = w_{2h}^j), computed on the host and uploaded when a transform larger than the
// tables is first asked for; they serve every smaller size. An NTT may be shared by goroutines.
//
// A column transform of n = 2^L rows runs ntt_pass (Stockham, natural order in and out) once in
// place when L ≤ 13 (a column fits in the 32 KiB threadgroup array), else twice (L ≤ 22) or four
// times, each pass a batch of DFTs of ≤ 2^11 points (2^12 for the first of 2^22) in threadgroup
// memory, ping-ponging between
// the data and a scratch buffer that the NTT keeps (grown on demand up to scratchWords or one
// column, freed by Close); a wider transform runs chunk by chunk of columns. The 1/n of an inverse is folded into the last pass. Host device: one-thread groups, and
// passes planned by hostPassPlan for ntt_pass's lane functions (16 sub-transforms per SIMD op).
type NTT struct {
	dev *gpu.Device

	mu       sync.Mutex
	logMax   int
	fwd, inv *gpu.Array[Mont]
	scratch  *gpu.Array[Mont]
	retired  []*gpu.Array[Mont]
	// users counts the transforms encoding with the scratch now (scratchOf to doneScratch);
	// release asks the last of them to free it (ReleaseScratch while they encode).
	users   int
	release bool
}

// NewNTT returns the NTT launcher of dev; tables are uploaded on first use.
func NewNTT(dev *gpu.Device) *NTT { return &NTT{dev: dev, logMax: -1} }

// Close frees the twiddle tables and the scratch buffers.
func (t *NTT) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freeScratch()
	if t.fwd != nil {
		t.fwd.Free()
		t.inv.Free()
		t.fwd, t.inv = nil, nil
	}
	t.logMax = -1
}

// ReleaseScratch frees the scratch buffers (the tables stay): a proof short of memory gives them
// back between its transforms, and the next multi-pass transform allocates its scratch again.
// Work encoded before may still use them: frees are in queue order on GPUs, and the host runs
// work as it is encoded. A transform that another goroutine is encoding meanwhile keeps them
// until it is encoded (the last one frees them).
func (t *NTT) ReleaseScratch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.users > 0 {
		t.release = true
		return
	}
	t.freeScratch()
}

// freeScratch frees the scratch buffers (t.mu held).
func (t *NTT) freeScratch() {
	for _, s := range append(t.retired, t.scratch) {
		if s != nil {
			s.Free()
		}
	}
	t.scratch, t.retired, t.release = nil, nil, false
}

// Reserve allocates the scratch now if it is shorter than words: a caller that has just given a
// wide scratch back (ReleaseScratch) keeps the size its later transforms take, so that their
// encoding finds it (an allocation there, with the device waiting, cost an H200 0.3–0.6 ms of
// WHIR's host gap).
func (t *NTT) Reserve(words int) error {
	if words <= 0 {
		return nil
	}
	if _, err := t.scratchOf(words); err != nil {
		return err
	}
	t.doneScratch()
	return nil
}

// doneScratch ends a use of scratchOf, once the transform's dispatches are encoded.
func (t *NTT) doneScratch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.users--
	if t.users == 0 && t.release {
		t.freeScratch()
	}
}

// minTableLog is the smallest table built (so small transforms do not rebuild it repeatedly).
const minTableLog = 12

// tables returns the twiddle tables, (re)built for transforms of size up to 2^logN.
func (t *NTT) tables(logN int) (fwd, inv *gpu.Array[Mont], err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if logN <= t.logMax {
		return t.fwd, t.inv, nil
	}
	l := max(logN, minTableLog)
	f, i := TwiddleTable(l, false), TwiddleTable(l, true)
	nf, err := gpu.UploadArray(t.dev, fmt.Sprintf("ntt twiddles 2^%d", l), f)
	if err != nil {
		return nil, nil, err
	}
	ni, err := gpu.UploadArray(t.dev, fmt.Sprintf("ntt inverse twiddles 2^%d", l), i)
	if err != nil {
		nf.Free()
		return nil, nil, err
	}
	if t.fwd != nil {
		t.fwd.Free()
		t.inv.Free()
	}
	t.fwd, t.inv, t.logMax = nf, ni, l
	return nf, ni, nil
}

// TwiddleTable returns the table of 2^logN Montgomery values tw[h + j] = w_{2h}^j (h a power of
// two < 2^logN, j < h; tw[0] = 0), w_{2h} = field.TwoAdicGenerator(log2 2h) or its inverse.
// The top level (h = 2^logN/2) holds w_n^j; every lower level is a strided copy of it (the
// generators form a squaring chain). Large tables are filled on every core: a first proof pays
// for the 2^22-entry tables of the commitment (about 80 ms on one core).
func TwiddleTable(logN int, inverse bool) []Mont {
	n := 1 << logN
	tw := make([]Mont, n)
	if logN == 0 {
		return tw
	}
	g := field.TwoAdicGenerator(logN)
	if inverse {
		g = g.Inverse()
	}
	half := n / 2
	top := tw[half:]
	parallelRanges(half, 1<<15, func(lo, hi int) {
		acc := g.Exp(uint64(lo))
		for j := lo; j < hi; j++ {
			top[j] = MontOf(acc)
			acc = acc.Mul(g)
		}
	})
	parallelRanges(half, 1<<15, func(lo, hi int) { // entries [lo, hi) of the levels below the top
		for h := 1; h < half; h <<= 1 {
			step := half / h
			for j := max(lo, h) - h; j < min(hi, 2*h)-h; j++ {
				tw[h+j] = top[j*step]
			}
		}
	})
	return tw
}

// parallelRanges splits [0, n) into contiguous ranges of at least minPerWorker items run on all
// cores, and returns when all are done; small n runs inline.
func parallelRanges(n, minPerWorker int, f func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n/max(minPerWorker, 1))
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := n*i/w, n*(i+1)/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// log2Exact returns log2(n) for a power of two n ≥ 1 up to 2^27.
func log2Exact(op string, n int) (int, error) {
	l, ok := field.Log2(n)
	if !ok {
		return 0, fmt.Errorf("kernels: %s: size %d is not a power of two in [1, 2^%d]", op, n, field.TwoAdicity)
	}
	return l, nil
}

// maxPassLog is the largest DFT size (log2) of one ntt_pass of a multi-pass transform, so a block
// of 8 KiB uints still holds T ≥ 4 sub-transforms (runs of 16 bytes); passPlan makes one
// exception (2^22 = 2^12 · 2^10).
var maxPassLog = 11 // a variable for tests (forcing four passes at small sizes)

// tileElems is the threadgroup array of ntt_pass in uints: 32 KiB (Apple's limit), or less where
// the device allows less.
func tileElems(dev *gpu.Device) int {
	t := 8192
	if m := dev.Limits().MaxThreadgroupMemory; m > 0 {
		for t > 2 && 4*t > m {
			t /= 2
		}
	}
	return t
}

// hostLanes makes the host device run ntt_pass with its lane functions (SIMD across MSL_LANES =
// 16 sub-transforms) and the pass plan they need (hostPassPlan). Tests turn it off to run the
// GPU plan and the GPU code paths on the host device.
var hostLanes = true

// hostLogLanes is log2 of MSL_LANES on the host device (shaders/include/prelude.h).
const hostLogLanes = 4

// hostPassPlan is passPlan for the lane functions on the host: every pass needs T ≥ 16
// sub-transforms per block, so a pass is at most 2^(logTile−4) points (2^9 in 32 KiB) and at most
// n/16. Transforms of fewer than 2^8 points take one scalar pass; larger ones an even number of
// passes (the ping-pong ends in the data buffer). logTile > hostLogLanes (NTT.plan checks it).
func hostPassPlan(logN, logTile int) []int {
	maxR := logTile - hostLogLanes
	if logN < 2*hostLogLanes {
		return []int{logN}
	}
	np := 2
	for (logN+np-1)/np > maxR {
		np += 2
	}
	plan := make([]int, np)
	for i := range plan {
		plan[i] = logN / np
		if i < logN%np {
			plan[i]++
		}
	}
	return plan
}

// plan returns the DFT sizes (log2) of the ntt_pass dispatches on the NTT's device, and whether
// they use the host lane functions.
func (t *NTT) plan(logN int) (plan []int, lanes bool) {
	logTile := bits.TrailingZeros(uint(tileElems(t.dev)))
	if isHost(t.dev) && hostLanes && logTile > hostLogLanes {
		return hostPassPlan(logN, logTile), true
	}
	return passPlan(logN, logTile), false
}

// passPlan returns the DFT sizes (log2) of the ntt_pass dispatches of a transform of 2^logN
// points: one pass when a whole column fits in the threadgroup array (done in place), else two
// (≤ 2^22 points) or four passes (even, so the ping-pong ends in the data buffer).
func passPlan(logN, logTile int) []int {
	if logN <= logTile {
		return []int{logN}
	}
	np := 2
	if logN > 2*maxPassLog {
		np = 4
	}
	plan := make([]int, np)
	for i := range plan {
		plan[i] = logN / np
		if i < logN%np {
			plan[i]++
		}
	}
	// The last pass writes runs of T = 2^(logTile − plan[np−1]) elements. An even split of
	// 2·maxPassLog points leaves T = 4 (16-byte runs, half sectors: the H100 measured that last
	// pass 40 % slower than the first); shifting one stage to the first pass gives the last
	// full 32-byte sectors, the first T = 2 (8-byte read runs, which other blocks' reads of
	// the same sectors share through L2).
	if np == 2 && logN == 2*maxPassLog && logTile >= maxPassLog+2 {
		plan[0], plan[1] = maxPassLog+1, maxPassLog-1
	}
	return plan
}

// scratchWords is the most words of scratch a multi-pass transform uses (64 MiB): wider
// transforms run in chunks of columns (at least one column each). A chunk of 2^22-row columns is
// four columns, still 2^24 points per pass: as many blocks as the device can run at once.
var scratchWords = 16 << 20 // a variable for the tests of chunked transforms

// WideScratchWords is the scratch limit of EncodeRSMatrixWide (256 MiB: sixteen 2^22-row
// columns a chunk). keccakf-1024's commitment DFT on an H200: 26 ntt_pass launches, 1,943 µs,
// with scratchWords; 10 launches, 1,778 µs, with this (fewer ramps and tails).
const WideScratchWords = 64 << 20

// scratchOf returns a device buffer of at least n uints for the ping-pong of multi-pass transforms;
// the caller calls doneScratch once its dispatches are encoded. Batches run in order on the
// device's one queue, so every transform may use the same buffer; a buffer outgrown is kept
// (work encoded earlier may still use it) until Close or ReleaseScratch.
func (t *NTT) scratchOf(n int) (*gpu.Array[Mont], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.scratch == nil || t.scratch.Len() < n {
		s, err := gpu.AllocArrayUninit[Mont](t.dev, "ntt scratch", n) // each pass writes what the next reads
		if err != nil {
			return nil, err
		}
		if t.scratch != nil {
			t.retired = append(t.retired, t.scratch)
		}
		t.scratch = s
	}
	t.users++
	return t.scratch, nil
}

// ScratchWords returns the scratch (words) a transform of height rows × width columns takes from
// the NTT on its device: none for one pass, else its chunk of columns (for the memory estimate).
func (t *NTT) ScratchWords(height, width int) int {
	return t.ScratchWordsWithin(height, width, scratchWords)
}

// ScratchWordsWithin is ScratchWords for transforms whose scratch is limited to limit words
// (scratchWords for ScratchWords; WideScratchWords for EncodeRSMatrixWide).
func (t *NTT) ScratchWordsWithin(height, width, limit int) int {
	if t.Passes(height) < 2 {
		return 0
	}
	return max(min(width, limit/height), 1) * height
}

// EncodeColumns encodes the DFT (or, with inverse, the IDFT) of each of the width columns of
// height rows of the column-major Montgomery matrix data (data[c·height + r]), in place.
// height must be a power of two ≤ 2^27 and width·height < maxColumnElems (2^32 − 2^28: ntt_pass
// indexes with unsigned 32-bit arithmetic, exact below 2^32). Transforms of more than 2^13
// points (fewer where the threadgroup memory is smaller) use the NTT's scratch buffer of
// min(height·width, max(scratchWords, height)) uints.
func (t *NTT) EncodeColumns(b *gpu.Batch, data *gpu.Array[Mont], height, width int, inverse bool) error {
	return t.encodeColumns(b, data, height, width, inverse, -1, false, scratchWords)
}

// EncodePass encodes only pass i (0 ≤ i < Passes(height)) of EncodeColumns' forward transform,
// between the buffers that pass uses there; the data it leaves is meaningless. For measuring
// each pass's bandwidth (bench).
func (t *NTT) EncodePass(b *gpu.Batch, data *gpu.Array[Mont], height, width, i int) error {
	if n := t.Passes(height); i < 0 || i >= n {
		return fmt.Errorf("kernels: EncodePass: pass %d of %d", i, n)
	}
	return t.encodeColumns(b, data, height, width, false, i, false, scratchWords)
}

// PassLogs returns the DFT size (log2) of each ntt_pass dispatch of a transform of height rows
// on the NTT's device (nil for height 1 or not a power of two).
func (t *NTT) PassLogs(height int) []int {
	logN, err := log2Exact("PassLogs", height)
	if err != nil || logN == 0 {
		return nil
	}
	plan, _ := t.plan(logN)
	return plan
}

// encodeColumns encodes every pass of the transform (only < 0), or pass only alone. zeroHi says
// that rows height/2.. of every column are zero: the first pass does not read them (ntt_pass
// zero_hi; GPU plans only, see skipsZeroHalf).
func (t *NTT) encodeColumns(b *gpu.Batch, data *gpu.Array[Mont], height, width int, inverse bool, only int, zeroHi bool, limit int) error {
	logN, err := log2Exact("DFTColumns", height)
	if err != nil {
		return err
	}
	if width < 0 {
		return fmt.Errorf("kernels: DFTColumns: width %d", width)
	}
	total := height * width
	if err := checkColumns("DFTColumns", data, total); err != nil {
		return err
	}
	if logN == 0 || width == 0 {
		return nil // the transform of size 1 is the identity
	}
	fwd, inv, err := t.tables(logN)
	if err != nil {
		return err
	}
	tw := fwd
	scale := MontOf(field.One)
	if inverse {
		tw = inv
		scale = MontOf(field.Fp(uint32(height)).Inverse())
	}
	one := MontOf(field.One)
	dev := t.dev
	tile := tileElems(dev)
	plan, useLanes := t.plan(logN)
	lanes := uint32(0)
	if useLanes {
		lanes = 1
	}
	if zeroHi && useLanes {
		return fmt.Errorf("kernels: DFTColumns: the lane passes read every row (skipsZeroHalf)")
	}
	// A multi-pass transform ping-pongs through the NTT's scratch, chunk by chunk of columns
	// so that the scratch stays at most scratchWords (or one column): a codeword's transform
	// would otherwise keep a second buffer of the codeword's size for the rest of the process.
	cols := width
	var scratch *gpu.Array[Mont]
	if len(plan) > 1 {
		cols = t.ScratchWordsWithin(height, width, limit) / height
		if scratch, err = t.scratchOf(cols * height); err != nil {
			return err
		}
		defer t.doneScratch()
	}
	for c0 := 0; c0 < width; c0 += cols {
		nc := min(cols, width-c0)
		off := uint32(c0 * height) // < maxColumnElems: checkColumns bounds height·width
		src, dst := data, data
		srcOff, dstOff := off, off
		if scratch != nil {
			dst, dstOff = scratch, 0
		}
		logNs := 0
		for i, lr := range plan {
			lt := min(bits.TrailingZeros(uint(tile))-lr, logN-lr)
			nblocks := nc << (logN - lr - lt)
			s := one
			if i == len(plan)-1 {
				s = scale
			}
			if only < 0 || i == only {
				var groups, tpg int
				if isHost(dev) {
					groups, tpg = min(nblocks, 1<<16), 1
				} else {
					// 256 threads, not 512: measured faster on the H100 (2^20×16 190 → 183 µs,
					// 2^22×16 762 → 730 µs; ntt_pass has 56 registers, 4 groups of 256 per SM), or
					// fewer where the pipeline allows fewer (groupSize); ntt_pass takes any group size.
					tpg = groupSize(dev, "ntt_pass", min(1<<(lr+lt-1), gpuGroup))
					groups = min(nblocks, 1<<16)
				}
				dispatchNttPass(b, gpu.D1(uint32(groups)), gpu.D1(uint32(tpg)), src.Buffer, dst.Buffer, tw.Buffer,
					nttPassParams{logN: uint32(logN), logR: uint32(lr), logNs: uint32(logNs), logT: uint32(lt), nblocks: uint32(nblocks),
						scale: uint32(s), lanes: lanes, srcOff: srcOff, dstOff: dstOff, zeroHi: uint32(b2u(zeroHi && i == 0))},
					uint32(4<<(lr+lt)))
			}
			logNs += lr
			src, dst = dst, src
			srcOff, dstOff = dstOff, srcOff
		}
	}
	return b.Err()
}

// Passes returns the number of full read+write passes over the data that EncodeColumns makes
// for a transform of height rows on dev (for bandwidth accounting).
func (t *NTT) Passes(height int) int {
	return len(t.PassLogs(height))
}

// DFTColumns runs EncodeColumns in a batch of its own (one sync).
func (t *NTT) DFTColumns(data *gpu.Array[Mont], height, width int, inverse bool) error {
	b := t.dev.Batch()
	if err := t.EncodeColumns(b, data, height, width, inverse); err != nil {
		return err
	}
	return b.Wait()
}

// EncodeBitReverse encodes the bit-reversal permutation c'[i] = c[bitrev(i)] of every column
// (cpuref.BitReverse per column).
func (t *NTT) EncodeBitReverse(b *gpu.Batch, data *gpu.Array[Mont], height, width int) error {
	logN, err := log2Exact("BitReverse", height)
	if err != nil {
		return err
	}
	total := height * width
	if err := checkArray("BitReverse", data, total); err != nil {
		return err
	}
	if logN == 0 || width <= 0 {
		return nil
	}
	g, tp := shapeFor(t.dev, "ntt_bitrev", total)
	dispatchNttBitrev(b, g, tp, data.Buffer, nttBitrevParams{total: uint32(total), logN: uint32(logN)})
	return b.Err()
}

// BlockSpec places nblocks blocks of 2^LogBlock elements: block b starts at
// (b >> LogBlocksPerCol)·ColStride + (b mod 2^LogBlocksPerCol)·2^LogBlock.
type BlockSpec struct {
	LogBlock        int // ≤ 5
	NBlocks         int
	LogBlocksPerCol int
	ColStride       int
}

// EncodeBlocks encodes the DFT (or IDFT, with the 2^-l factor) of every block of spec in place;
// with subsetSum it then applies the subset-sum transform (cpuref.CoeffsToEvals) to each block.
// IDFT + subset sum over the blocks of a stacked column is the RS message (spec A §5.5 step 1).
// One thread transforms one block (l ≤ 5: 32 registers). Every block must end below
// maxColumnElems (unsigned 32-bit indexing).
func (t *NTT) EncodeBlocks(b *gpu.Batch, data *gpu.Array[Mont], spec BlockSpec, inverse, subsetSum bool) error {
	l := spec.LogBlock
	if l < 0 || l > 5 {
		return fmt.Errorf("kernels: Blocks: log block size %d not in [0, 5]", l)
	}
	if spec.NBlocks <= 0 {
		return nil
	}
	if spec.LogBlocksPerCol < 0 || spec.LogBlocksPerCol > 30 {
		return fmt.Errorf("kernels: Blocks: log blocks per column %d", spec.LogBlocksPerCol)
	}
	if spec.ColStride < 0 {
		return fmt.Errorf("kernels: Blocks: column stride %d", spec.ColStride)
	}
	// The furthest block: the last one, or (when the last column is partial and the columns
	// overlap) the last of the column before it.
	blockEnd := func(b int) int {
		return (b>>spec.LogBlocksPerCol)*spec.ColStride + (b&(1<<spec.LogBlocksPerCol-1))<<l + 1<<l
	}
	last := spec.NBlocks - 1
	end := blockEnd(last)
	if c := last >> spec.LogBlocksPerCol; c > 0 {
		end = max(end, blockEnd(c<<spec.LogBlocksPerCol-1))
	}
	if err := checkColumns("Blocks", data, end); err != nil {
		return err
	}
	fwd, inv, err := t.tables(l)
	if err != nil {
		return err
	}
	tw, scale := fwd, MontOf(field.One)
	if inverse {
		tw, scale = inv, MontOf(field.Fp(uint32(1)<<l).Inverse())
	}
	ss := uint32(0)
	if subsetSum {
		ss = 1
	}
	p := nttBlocksParams{nblocks: uint32(spec.NBlocks), logBlock: uint32(l),
		logBlocksCol: uint32(spec.LogBlocksPerCol), colStride: uint32(spec.ColStride), scale: uint32(scale), subsetSum: ss}
	row := 4 * (1<<l + 1) // bytes of one block in group memory
	if tpg := blocksTile(t.dev, "ntt_blocks", l); tpg > 0 && 1<<spec.LogBlocksPerCol >= tpg {
		p.tiled = 1
		dispatchNttBlocks(b, gpu.D1(uint32(tileGroups(t.dev, spec.NBlocks, tpg))), gpu.D1(uint32(tpg)), data.Buffer, tw.Buffer, p, uint32(tpg*row))
		return b.Err()
	}
	g, tp := untiledBlocksShape(t.dev, "ntt_blocks", spec.NBlocks)
	dispatchNttBlocks(b, g, tp, data.Buffer, tw.Buffer, p, uint32(row))
	return b.Err()
}

// tileGroups is the groups of a tiled block kernel (tiles of tpg blocks, groups walking them
// with a stride): one a tile, within the grid bound and 64 groups of 256 threads a compute unit.
func tileGroups(dev *gpu.Device, blocks, tpg int) int {
	groups := min((blocks+tpg-1)/tpg, maxGridThreads/tpg)
	if lim := dev.Limits().ComputeUnits; lim > 0 {
		groups = min(groups, 64*gpuGroup*lim/tpg)
	}
	return groups
}

// blocksTile is the group size of the tiled path of kernel (ntt_blocks, ntt_message_columns) on
// dev for blocks of 2^l (0: untiled): the largest power of two ≤ 256 threads whose blocks fit
// the group memory (a block's row of 2^l + 1 words each) and the kernel's thread limit. The host
// device runs untiled: its threads are fibers, and a block's words are already in its cache.
func blocksTile(dev *gpu.Device, kernel string, l int) int {
	if isHost(dev) {
		return 0
	}
	tpg := groupSize(dev, kernel, 256)
	tpg = 1 << (bits.Len(uint(tpg)) - 1)
	if m := dev.Limits().MaxThreadgroupMemory; m > 0 {
		for tpg > 1 && tpg*4*(1<<l+1) > m {
			tpg >>= 1
		}
	}
	return tpg
}

// untiledBlocksShape is the dispatch of the untiled path of kernel (ntt_blocks,
// ntt_message_columns: one block a work item) for blocks blocks. On the host device, a
// one-thread group a block: the path has no barrier, but the host runs the items of a larger
// group of a kernel with barriers each on its own fiber (a switch per block of 2^l values), and
// its pool hands each thread runs of consecutive groups, so of consecutive blocks.
func untiledBlocksShape(dev *gpu.Device, kernel string, blocks int) (groups, tpg gpu.Dim3) {
	if isHost(dev) {
		return gpu.D1(uint32(min(max(blocks, 1), maxGridThreads))), gpu.D1(1)
	}
	return shapeFor(dev, kernel, blocks)
}

// IDFTBlocks applies the IDFT to each consecutive block of 2^logBlock elements of the first n
// elements of data (cpuref.IDFTBlocks; logBlock ≤ 5), in one batch.
func (t *NTT) IDFTBlocks(data *gpu.Array[Mont], n, logBlock int) error {
	if logBlock < 0 || logBlock > 5 || n%(1<<logBlock) != 0 {
		return fmt.Errorf("kernels: IDFTBlocks: %d elements, log block %d", n, logBlock)
	}
	b := t.dev.Batch()
	if err := t.EncodeBlocks(b, data, BlockSpec{LogBlock: logBlock, NBlocks: n >> logBlock, LogBlocksPerCol: 0, ColStride: 1 << logBlock}, true, false); err != nil {
		return err
	}
	return b.Wait()
}

// RSEncodeMatrix returns the Reed–Solomon codeword matrix of the column-major stacked matrix q
// (height rows, width columns; cpuref.RSEncodeMatrix): every column zero-padded to
// height·2^logBlowup rows, its first height rows turned into the RS message (per block of
// 2^lSkip: IDFT then subset sum), then DFT of each column. q is in Montgomery form unless
// canonical is set (then it is converted on the way; q itself is not modified). The result,
// a new Montgomery array named name, is produced in one batch (one sync). The codeword may
// exceed 2^31 elements: it must stay below maxColumnElems (2^32 − 2^28; EncodeRSMatrix).
func (t *NTT) RSEncodeMatrix(name string, q *gpu.Array[Mont], height, width, lSkip, logBlowup int, canonical bool) (*gpu.Array[Mont], error) {
	logM, err := log2Exact("RSEncodeMatrix", height)
	if err != nil {
		return nil, err
	}
	if logBlowup < 0 || logM+logBlowup > field.TwoAdicity || width <= 0 {
		return nil, fmt.Errorf("kernels: RSEncodeMatrix: %d×%d matrix, log blowup %d", height, width, logBlowup)
	}
	if err := codewordLimit(height<<logBlowup, width); err != nil {
		return nil, err
	}
	out, err := gpu.AllocArrayUninit[Mont](t.dev, name, (height*width)<<logBlowup) // EncodeRSMatrix writes it all
	if err != nil {
		return nil, err
	}
	b := t.dev.Batch()
	err = t.EncodeRSMatrix(b, q, out, height, width, lSkip, logBlowup, canonical)
	if err == nil {
		err = b.Wait()
	}
	if err != nil {
		out.Free()
		return nil, err
	}
	return out, nil
}

// EncodeRSMatrix encodes RSEncodeMatrix into b, writing the codeword into out (at least
// height·2^logBlowup·width values, fewer than maxColumnElems: ntt_message_columns and ntt_pass
// index it with unsigned 32-bit arithmetic, exact below 2^32, so codewords beyond 2^31
// elements (keccakf-16384: 2^22 × 659) need neither 64-bit indices nor column chunks).
func (t *NTT) EncodeRSMatrix(b *gpu.Batch, q, out *gpu.Array[Mont], height, width, lSkip, logBlowup int, canonical bool) error {
	return t.encodeRSMatrix(b, q, out, height, width, lSkip, logBlowup, canonical, scratchWords)
}

// EncodeRSMatrixWide is EncodeRSMatrix with its DFT's scratch up to WideScratchWords (fewer,
// larger chunks of columns): for a caller that has the memory and gives the scratch back after
// the commitment (ReleaseScratch), as the device backend's fast plan does.
func (t *NTT) EncodeRSMatrixWide(b *gpu.Batch, q, out *gpu.Array[Mont], height, width, lSkip, logBlowup int, canonical bool) error {
	return t.encodeRSMatrix(b, q, out, height, width, lSkip, logBlowup, canonical, WideScratchWords)
}

func (t *NTT) encodeRSMatrix(b *gpu.Batch, q, out *gpu.Array[Mont], height, width, lSkip, logBlowup int, canonical bool, limit int) error {
	logM, err := log2Exact("RSEncodeMatrix", height)
	if err != nil {
		return err
	}
	if width <= 0 {
		return fmt.Errorf("kernels: RSEncodeMatrix: width %d", width)
	}
	if lSkip < 0 || lSkip > logM || lSkip > 5 {
		return fmt.Errorf("kernels: RSEncodeMatrix: l_skip %d with height 2^%d (need l_skip ≤ min(5, log height))", lSkip, logM)
	}
	if logBlowup < 0 || logM+logBlowup > field.TwoAdicity {
		return fmt.Errorf("kernels: RSEncodeMatrix: codeword of 2^%d rows", logM+logBlowup)
	}
	logN := logM + logBlowup
	n := 1 << logN
	if err := codewordLimit(n, width); err != nil {
		return err
	}
	if err := checkColumns("RSEncodeMatrix", q, height*width); err != nil {
		return err
	}
	if err := checkColumns("RSEncodeMatrix", out, n*width); err != nil {
		return err
	}
	_, inv, err := t.tables(lSkip)
	if err != nil {
		return err
	}
	// The DFT's first pass skips the upper half of each column where it can: its zeros are then
	// not written either.
	zeroHi := logBlowup > 0 && t.skipsZeroHalf(logN)
	p := nttMessageParams{nblocks: uint32(width << (logM - lSkip)), logBlock: uint32(lSkip), logBlocksCol: uint32(logM - lSkip),
		logIn: uint32(logM), logOut: uint32(logN), scale: uint32(MontOf(field.Fp(uint32(1) << lSkip).Inverse())), zeroReps: uint32(1) << logBlowup}
	if zeroHi {
		p.zeroReps /= 2
	}
	if canonical {
		p.toMont = 1
	}
	if tpg := blocksTile(t.dev, "ntt_message_columns", lSkip); tpg > 0 && 1<<(logM-lSkip) >= tpg {
		p.tiled = 1
		dispatchNttMessageColumns(b, gpu.D1(uint32(tileGroups(t.dev, int(p.nblocks), tpg))), gpu.D1(uint32(tpg)), q.Buffer, out.Buffer, inv.Buffer, p, uint32(tpg*4*(1<<lSkip+1)))
	} else {
		items := int(p.nblocks)
		if isHost(t.dev) && lSkip == hostLogLanes && logM-lSkip >= hostLogLanes {
			items >>= hostLogLanes // the kernel's lane path: 16 blocks a work item
		}
		g, tp := untiledBlocksShape(t.dev, "ntt_message_columns", items)
		dispatchNttMessageColumns(b, g, tp, q.Buffer, out.Buffer, inv.Buffer, p, uint32(4*(1<<lSkip+1)))
	}
	if err := b.Err(); err != nil {
		return err
	}
	return t.encodeColumns(b, out, n, width, false, -1, zeroHi, limit)
}

// skipsZeroHalf reports whether the first pass of a transform of 2^logN rows can leave the upper
// half of its input unread (ntt_pass zero_hi): the GPU plans can, the host device's lane passes
// cannot.
func (t *NTT) skipsZeroHalf(logN int) bool {
	_, lanes := t.plan(logN)
	return logN > 0 && !lanes
}

// EncodeRSInPlace encodes into b the RS encoding of EncodeRSMatrix for a codeword buffer out whose
// columns (height·2^logBlowup rows each) hold Q's columns in their first height rows and zeros
// below (EncodeStackTraceCols places them there): the message per block of 2^lSkip (IDFT, subset
// sum), then the DFT of each column, in place.
func (t *NTT) EncodeRSInPlace(b *gpu.Batch, out *gpu.Array[Mont], height, width, lSkip, logBlowup int) error {
	logM, err := log2Exact("RSEncodeMatrix", height)
	if err != nil {
		return err
	}
	if width <= 0 || lSkip < 0 || lSkip > logM || lSkip > 5 || logBlowup < 0 || logM+logBlowup > field.TwoAdicity {
		return fmt.Errorf("kernels: RSEncodeMatrix: %d×%d, l_skip %d, log blowup %d", height, width, lSkip, logBlowup)
	}
	n := height << logBlowup
	if err := codewordLimit(n, width); err != nil {
		return err
	}
	if err := checkColumns("RSEncodeMatrix", out, n*width); err != nil {
		return err
	}
	if err := t.EncodeBlocks(b, out, BlockSpec{LogBlock: lSkip, NBlocks: width << (logM - lSkip), LogBlocksPerCol: logM - lSkip, ColStride: n}, true, true); err != nil {
		return err
	}
	return t.EncodeColumns(b, out, n, width, false)
}

// codewordLimit refuses an RS codeword of n rows × width columns at or beyond maxColumnElems.
func codewordLimit(n, width int) error {
	if n*width >= maxColumnElems {
		return fmt.Errorf("kernels: RSEncodeMatrix: %d×%d codeword (%d elements) reaches the limit of the column kernels' unsigned 32-bit indexing (%s)",
			n, width, n*width, limitString(maxColumnElems))
	}
	return nil
}
