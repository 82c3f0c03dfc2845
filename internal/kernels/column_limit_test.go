package kernels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// lowerLimits sets maxElems (the general 32-bit limit) and maxColumnElems for one test.
func lowerLimits(t *testing.T, general, columns int) {
	t.Helper()
	oldG, oldC := maxElems, maxColumnElems
	maxElems, maxColumnElems = general, columns
	t.Cleanup(func() { maxElems, maxColumnElems = oldG, oldC })
}

// TestCommitPathPastGeneralLimit: the whole commitment path over a matrix (the RS codeword, and for
// some cases the stacked matrix too) larger than the general limit maxElems, which the test lowers
// to 2^13 (standing for 2^31): RS encoding (pad, blocks, multi-pass DFT, also the inverse DFT of
// the codeword), the Merkle tree over the codeword and its openings (one, and batched) must take
// the larger column limit and equal cpuref byte for byte; on the host device with its lane
// functions, with the GPU pass plan, and with GPU dispatch shapes (openLimited: SIMD width 32).
func TestCommitPathPastGeneralLimit(t *testing.T) {
	lowerLimits(t, 1<<13, 1<<32-maxGridThreads)
	defer func(old int) { maxPassLog = old }(maxPassLog)
	maxPassLog = 4
	defer func(old bool) { hostLanes = old }(hostLanes)
	// GPU dispatch shapes (SIMD width 32) with a 256-byte tile, so that ntt_pass takes two and
	// four passes (through the NTT scratch, also past the limit) at these heights; ntt_pass in
	// one-thread groups (see TestLaunchersRespectKernelLimits).
	gpuShapes, _ := openLimitedWith(t, &limitedBackend{maxThreads: map[string]int{"ntt_pass": 1}, tgMemory: 256})
	if got := NewNTT(gpuShapes).PassLogs(1 << 9); len(got) != 4 {
		t.Fatalf("2^9 points on the small-tile device: passes %v, want four", got)
	}
	cases := []struct{ logM, width, lSkip, logBlowup, k int }{
		{8, 37, 3, 1, 2},  // Q 9472, codeword 18944 elements: both past the limit
		{6, 70, 2, 2, 3},  // Q 4480 below, codeword 17920 past
		{7, 70, 5, 2, 4},  // blowup 4, l_skip 5
		{8, 40, 4, 1, 0},  // k = 0
		{4, 600, 4, 1, 1}, // many short columns
	}
	r := rand.New(rand.NewPCG(32, 31))
	for _, dv := range []struct {
		name  string
		dev   *gpu.Device
		lanes bool
	}{{"host-lanes", testDev, true}, {"host-gpu-plan", testDev, false}, {"gpu-shapes", gpuShapes, false}} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/2^%dx%d-lskip%d-blowup%d-k%d", dv.name, c.logM, c.width, c.lSkip, c.logBlowup, c.k), func(t *testing.T) {
				hostLanes = dv.lanes
				commitPastLimit(t, dv.dev, r, c.logM, c.width, c.lSkip, c.logBlowup, c.k)
			})
		}
	}
}

func commitPastLimit(t *testing.T, dev *gpu.Device, r *rand.Rand, logM, width, lSkip, logBlowup, k int) {
	height := 1 << logM
	n := height << logBlowup
	if n*width < maxElems || 8*n >= maxElems { // (the digest layers stay under the general limit)
		t.Fatalf("case does not test the limit: codeword %d elements, %d digests, limit %d", n*width, n, maxElems)
	}
	q := air.NewMatrix(width, height)
	copy(q.Values, fieldrand.Fps(r, len(q.Values)))
	copy(q.Values, fieldrand.Edges)
	copy(q.Values[len(q.Values)-3:], fieldrand.Edges)
	qa, err := UploadMont(dev, "q", q.Values)
	if err != nil {
		t.Fatal(err)
	}
	defer qa.Free()
	ntt := NewNTT(dev)
	defer ntt.Close()
	cw, err := ntt.RSEncodeMatrix("codeword", qa, height, width, lSkip, logBlowup, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Free()
	want, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCanonical(cw)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want.Values); i >= 0 {
		t.Fatalf("codeword element %d (row %d, column %d): got %d, want %d", i, i%n, i/n, got[i], want.Values[i])
	}

	h, err := NewPoseidon2(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tree, err := h.MerkleTree(cw, n, width, k)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Free()
	wantTree, err := cpuref.NewMerkleTree(want, 1<<k)
	if err != nil {
		t.Fatal(err)
	}
	if root, err := tree.Root(); err != nil || root != wantTree.Root() {
		t.Fatalf("Merkle root %v (%v), want %v", root, err, wantTree.Root())
	}
	qs := n >> k
	ys := []int{0, qs - 1, qs / 2, r.IntN(qs), r.IntN(qs)}
	batch, err := tree.OpenBatch(ys)
	if err != nil {
		t.Fatal(err)
	}
	for i, y := range ys {
		wo, err := wantTree.Open(y)
		if err != nil {
			t.Fatal(err)
		}
		one, err := tree.Open(y)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []struct {
			how   string
			rows  [][]field.Fp
			proof []poseidon2.Digest
		}{{"Open", one.Rows, one.Proof}, {"OpenBatch", batch.Rows[i], batch.Paths[i]}} {
			if fmt.Sprint(o.rows) != fmt.Sprint(wo.Rows) || fmt.Sprint(o.proof) != fmt.Sprint(wo.Proof) {
				t.Fatalf("%s(%d) differs from cpuref", o.how, y)
			}
		}
	}

	// The inverse transform of the codeword returns the zero-padded RS messages.
	if err := ntt.DFTColumns(cw, n, width, true); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCanonical(cw)
	if err != nil {
		t.Fatal(err)
	}
	wantBack := append([]field.Fp(nil), want.Values...)
	if err := cpuref.IDFTColumns(wantBack, n); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(back, wantBack); i >= 0 {
		t.Fatalf("IDFT of the codeword: element %d differs", i)
	}
}

// TestColumnLimitRefused: a matrix at or past maxColumnElems is refused by every launcher of the
// commitment path with an error naming the operation and the limit, before anything is allocated
// or dispatched; just below it is accepted. At the real limit (2^32 − 2^28: keccakf-16384's
// 2^22 × 659 codeword passes, 2^22 × 960 does not) and at a lowered one.
func TestColumnLimitRefused(t *testing.T) {
	if err := codewordLimit(1<<22, 659); err != nil {
		t.Errorf("2^22 × 659 codeword refused: %v", err)
	}
	if err := codewordLimit(1<<22, 959); err != nil {
		t.Errorf("2^22 × 959 codeword refused: %v", err)
	}
	small, err := gpu.AllocArray[Mont](testDev, "small", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	ntt := NewNTT(testDev)
	defer ntt.Close()
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	wantErr := func(what string, err error, words ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", what, err, w)
			}
		}
	}
	before := testDev.Stats()
	_, err = ntt.RSEncodeMatrix("codeword", small, 1<<21, 960, 4, 1, false)
	wantErr("RSEncodeMatrix 2^21×960", err, "RSEncodeMatrix", "4194304×960", "2^32 − 2^28")
	b := testDev.Batch()
	wantErr("EncodeRSMatrix 2^22×960", ntt.EncodeRSMatrix(b, small, small, 1<<21, 960, 4, 1, false), "RSEncodeMatrix", "2^32 − 2^28")
	wantErr("EncodeColumns 2^22×960", ntt.EncodeColumns(b, small, 1<<22, 960, false), "DFTColumns", "2^32 − 2^28")
	wantErr("EncodeBlocks", ntt.EncodeBlocks(b, small, BlockSpec{LogBlock: 4, NBlocks: 961 << 17, LogBlocksPerCol: 17, ColStride: 1 << 22}, true, true),
		"Blocks", "2^32 − 2^28")
	_, err = h.EncodeMerkleTree(b, small, 1<<22, 960, 4)
	wantErr("MerkleTree 2^22×960", err, "MerkleTree", "4026531840", "2^32 − 2^28")
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if after := testDev.Stats(); after.Dispatches != before.Dispatches || after.MemoryPeak > before.MemoryPeak {
		t.Errorf("refused launches dispatched %d kernels, memory peak %d → %d", after.Dispatches-before.Dispatches, before.MemoryPeak, after.MemoryPeak)
	}

	// A lowered limit: 2^12 elements refused, 2^12 − 512 accepted (and correct).
	lowerLimits(t, 1<<31, 1<<12)
	r := rand.New(rand.NewPCG(7, 8))
	q := air.NewMatrix(8, 1<<8)
	copy(q.Values, fieldrand.Fps(r, len(q.Values)))
	qa := upload(t, q.Values)
	_, err = ntt.RSEncodeMatrix("codeword", qa, 1<<8, 8, 3, 1, false)
	wantErr("RSEncodeMatrix 2^9×8 (limit 2^12)", err, "RSEncodeMatrix", "2^12")
	wantErr("DFTColumns 2^9×8 (limit 2^12)", ntt.DFTColumns(qa, 1<<9, 8, false), "DFTColumns", "2^12")
	_, err = h.MerkleTree(qa, 1<<9, 8, 1)
	wantErr("MerkleTree 2^9×8 (limit 2^12)", err, "MerkleTree", "2^12")
	q7 := air.Matrix{Width: 7, Height: 1 << 8, Values: q.Values[:7<<8]}
	cw, err := ntt.RSEncodeMatrix("codeword", qa, 1<<8, 7, 3, 1, false)
	if err != nil {
		t.Fatalf("2^9×7 codeword (3584 elements, limit 2^12) refused: %v", err)
	}
	defer cw.Free()
	want, err := cpuref.RSEncodeMatrix(3, 1, q7)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(readBack(t, cw), want.Values); i >= 0 {
		t.Fatalf("2^9×7 codeword element %d differs", i)
	}
}

// TestEncodeBlocksChecksEveryColumn: with overlapping columns (stride below a column's blocks) and
// a partial last column, the furthest block is the last of the column before: the bounds check
// must see it.
func TestEncodeBlocksChecksEveryColumn(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	a, err := gpu.AllocArray[Mont](testDev, "blocks", 40)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	// Columns of 4 blocks of 4 at stride 8: column 0 ends at 16, the one block of column 1 at 12.
	b := testDev.Batch()
	err = ntt.EncodeBlocks(b, a, BlockSpec{LogBlock: 2, NBlocks: 5, LogBlocksPerCol: 2, ColStride: 8}, false, false)
	if err != nil {
		t.Fatalf("in bounds: %v", err)
	}
	small, err := gpu.AllocArray[Mont](testDev, "blocks", 14)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	if err := ntt.EncodeBlocks(b, small, BlockSpec{LogBlock: 2, NBlocks: 5, LogBlocksPerCol: 2, ColStride: 8}, false, false); err == nil || !strings.Contains(err.Error(), "16 needed") {
		t.Errorf("14-element buffer for blocks up to 16: error %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestShapeBoundsGridThreads: however many compute units a device reports, a dispatch shaped by
// shapeFor has at most maxGridThreads threads, so the grid-stride loops of the column kernels
// (indices below maxColumnElems = 2^32 − maxGridThreads) cannot wrap.
func TestShapeBoundsGridThreads(t *testing.T) {
	dev, _ := openLimitedWith(t, &limitedBackend{computeUnits: 1 << 20})
	for _, work := range []int{1, 1 << 20, 1 << 31, 1<<32 - maxGridThreads - 1} {
		g, tpg := shapeFor(dev, "ntt_message_columns", work)
		if n := g.Count() * tpg.Count(); n > maxGridThreads || (work >= 1<<28 && n != maxGridThreads) {
			t.Errorf("work %d: %d groups of %d threads = %d threads (bound %d)", work, g.X, tpg.X, n, maxGridThreads)
		}
	}
	g, tpg := shapeFor(testDev, "ntt_message_columns", 1<<31)
	if n := g.Count() * tpg.Count(); n > maxGridThreads {
		t.Errorf("host device: %d threads", n)
	}
}
