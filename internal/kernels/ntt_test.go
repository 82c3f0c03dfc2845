package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

func TestDFTColumnsMatchesCpuref(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(3, 4))
	cases := []struct{ logH, width int }{
		{0, 1}, {0, 9}, {1, 1}, {1, 3}, {2, 9}, {3, 2}, {4, 9}, {5, 7}, {10, 3}, {11, 2}, {12, 3}, {13, 2}, {16, 2}, {20, 1}, {21, 1}, {22, 1},
	}
	defer func(old bool) { hostLanes = old }(hostLanes)
	for _, c := range cases {
		if testing.Short() && c.logH > 16 {
			continue
		}
		for _, variant := range []struct {
			inverse, lanes bool
		}{{false, true}, {true, true}, {false, false}, {true, false}} {
			inverse := variant.inverse
			hostLanes = variant.lanes // host device: lane functions and their plan, or the GPU plan
			t.Run(fmt.Sprintf("2^%dx%d/inv=%v/lanes=%v", c.logH, c.width, inverse, variant.lanes), func(t *testing.T) {
				h := 1 << c.logH
				v := fieldrand.Fps(r, h*c.width)
				a := upload(t, v)
				if n := syncs(t, func() error { return ntt.DFTColumns(a, h, c.width, inverse) }); n != 1 {
					t.Errorf("%d syncs, want 1", n)
				}
				want := cpurefDFT(t, v, h, inverse)
				got := readBack(t, a)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("element %d: got %d, want %d", i, got[i], want[i])
				}
			})
		}
	}
}

// cpurefDFT is cpuref's DFT (or IDFT) of every column of height h of a copy of v.
func cpurefDFT(t *testing.T, v []field.Fp, h int, inverse bool) []field.Fp {
	t.Helper()
	want := append([]field.Fp(nil), v...)
	var err error
	if inverse {
		err = cpuref.IDFTColumns(want, h)
	} else {
		err = cpuref.DFTColumns(want, h)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func TestDFTThenIDFTIsIdentity(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for _, logH := range []int{3, 12, 15} {
		h, w := 1<<logH, 3
		v := fieldrand.Fps(r, h*w)
		a := upload(t, v)
		b := testDev.Batch()
		if err := ntt.EncodeColumns(b, a, h, w, false); err != nil {
			t.Fatal(err)
		}
		if err := ntt.EncodeColumns(b, a, h, w, true); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(readBack(t, a), v); i >= 0 {
			t.Fatalf("2^%d: element %d differs after DFT+IDFT", logH, i)
		}
	}
}

func TestBitReverse(t *testing.T) {
	ntt := NewNTT(testDev)
	r := rand.New(rand.NewPCG(7, 8))
	for _, logH := range []int{0, 1, 4, 10, 16} {
		h, w := 1<<logH, 3
		v := fieldrand.Fps(r, h*w)
		a := upload(t, v)
		b := testDev.Batch()
		if err := ntt.EncodeBitReverse(b, a, h, w); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		want := append([]field.Fp(nil), v...)
		for c := 0; c < w; c++ {
			if err := cpuref.BitReverse(want[c*h : (c+1)*h]); err != nil {
				t.Fatal(err)
			}
		}
		if i := firstDiff(readBack(t, a), want); i >= 0 {
			t.Fatalf("2^%d: element %d", logH, i)
		}
	}
}

func TestIDFTBlocks(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(9, 10))
	for l := 0; l <= 5; l++ {
		for _, nb := range []int{1, 9, 1001, 1024, 1025} {
			n := nb << l
			v := fieldrand.Fps(r, n)
			a := upload(t, v)
			if k := syncs(t, func() error { return ntt.IDFTBlocks(a, n, l) }); k != 1 {
				t.Errorf("%d syncs", k)
			}
			want := append([]field.Fp(nil), v...)
			if err := cpuref.IDFTBlocks(want, l); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(readBack(t, a), want); i >= 0 {
				t.Fatalf("l=%d blocks=%d: element %d", l, nb, i)
			}
		}
	}
}

func TestRSEncodeMatrix(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(11, 12))
	cases := []struct{ logM, width, lSkip, logBlowup int }{
		{0, 1, 0, 1}, {2, 9, 2, 1}, {4, 3, 4, 2}, {5, 2, 3, 0}, {10, 9, 4, 1}, {12, 5, 5, 2}, {16, 2, 4, 1},
	}
	for _, c := range cases {
		h := 1 << c.logM
		q := air.NewMatrix(c.width, h)
		copy(q.Values, fieldrand.Fps(r, h*c.width))
		for _, canonical := range []bool{false, true} {
			var a *gpu.Array[Mont]
			if canonical {
				c, err := gpu.UploadArray(testDev, "test input", q.Values)
				if err != nil {
					t.Fatal(err)
				}
				a = gpu.View[Mont](c)
			} else {
				var err error
				if a, err = UploadMont(testDev, "test input", q.Values); err != nil {
					t.Fatal(err)
				}
			}
			var out interface{ Free() }
			n := syncs(t, func() error {
				o, err := ntt.RSEncodeMatrix("codeword", a, h, c.width, c.lSkip, c.logBlowup, canonical)
				if err != nil {
					return err
				}
				out = o
				got := readBack(t, o)
				want, err := cpuref.RSEncodeMatrix(c.lSkip, c.logBlowup, q)
				if err != nil {
					return err
				}
				if i := firstDiff(got, want.Values); i >= 0 {
					return fmt.Errorf("%+v canonical=%v: element %d: got %d want %d", c, canonical, i, got[i], want.Values[i])
				}
				return nil
			})
			if n != 1 {
				t.Errorf("%+v: %d syncs, want 1", c, n)
			}
			out.Free()
			a.Free()
		}
	}
}

func TestDFTColumnsFourPasses(t *testing.T) {
	old, oldLanes := maxPassLog, hostLanes
	maxPassLog, hostLanes = 4, false // the GPU plan, on the host device
	defer func() { maxPassLog, hostLanes = old, oldLanes }()
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ logH, width int }{{14, 2}, {16, 3}} {
		for _, inverse := range []bool{false, true} {
			h := 1 << c.logH
			v := fieldrand.Fps(r, h*c.width)
			a := upload(t, v)
			if err := ntt.DFTColumns(a, h, c.width, inverse); err != nil {
				t.Fatal(err)
			}
			want := cpurefDFT(t, v, h, inverse)
			got, err := ReadCanonical(a)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("2^%d×%d inv=%v: element %d: got %d, want %d", c.logH, c.width, inverse, i, got[i], want[i])
				}
			}
			a.Free()
		}
	}
}

// A transform wider than the scratch runs chunk by chunk of columns (scratchWords): the same
// values as cpuref, on both pass plans, two and four passes, with chunks that do not divide the
// width, and a scratch no larger than its cap.
func TestDFTColumnsInChunks(t *testing.T) {
	oldWords, oldPass, oldLanes := scratchWords, maxPassLog, hostLanes
	defer func() { scratchWords, maxPassLog, hostLanes = oldWords, oldPass, oldLanes }()
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		logH, width, chunk, passLog int
		lanes                       bool
	}{
		{14, 7, 3, oldPass, true}, {14, 7, 3, oldPass, false}, {15, 5, 2, oldPass, false}, {16, 5, 2, 4, false}, {14, 4, 1, 4, false},
	} {
		scratchWords, maxPassLog, hostLanes = c.chunk<<c.logH, c.passLog, c.lanes
		ntt := NewNTT(testDev)
		h := 1 << c.logH
		if ntt.Passes(h) < 2 {
			t.Fatalf("2^%d: %d passes, the test needs a multi-pass transform", c.logH, ntt.Passes(h))
		}
		for _, inverse := range []bool{false, true} {
			name := fmt.Sprintf("2^%d×%d/chunk %d/passes %d/lanes=%v/inv=%v", c.logH, c.width, c.chunk, ntt.Passes(h), c.lanes, inverse)
			v := fieldrand.Fps(r, h*c.width)
			a := upload(t, v)
			if n := syncs(t, func() error { return ntt.DFTColumns(a, h, c.width, inverse) }); n != 1 {
				t.Errorf("%s: %d syncs, want 1", name, n)
			}
			want := cpurefDFT(t, v, h, inverse)
			if i := firstDiff(readBack(t, a), want); i >= 0 {
				t.Fatalf("%s: element %d (column %d) differs", name, i, i/h)
			}
			a.Free()
		}
		if got := ntt.scratch.Len(); got > c.chunk*h {
			t.Errorf("2^%d×%d: scratch of %d words, want at most %d", c.logH, c.width, got, c.chunk*h)
		}
		ntt.Close()
	}
}

// EncodeRSMatrixWide chunks the codeword's transform by WideScratchWords rather than scratchWords:
// the same codeword as cpuref with a scratch of the whole width, where EncodeRSMatrix's is a column.
func TestRSEncodeMatrixWideScratch(t *testing.T) {
	oldWords, oldPass := scratchWords, maxPassLog
	defer func() { scratchWords, maxPassLog = oldWords, oldPass }()
	r := rand.New(rand.NewPCG(13, 14))
	logM, width, lSkip, logBlowup := 12, 5, 4, 1
	h, n := 1<<logM, 1<<(logM+logBlowup)
	scratchWords, maxPassLog = n, 8 // one column a chunk, two passes
	q := air.NewMatrix(width, h)
	copy(q.Values, fieldrand.Fps(r, h*width))
	want, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, wide := range []bool{false, true} {
		ntt := NewNTT(testDev)
		if ntt.Passes(n) < 2 {
			t.Fatalf("2^%d: %d passes, the test needs a multi-pass transform", logM+logBlowup, ntt.Passes(n))
		}
		a, err := UploadMont(testDev, "test input", q.Values)
		if err != nil {
			t.Fatal(err)
		}
		out, err := gpu.AllocArrayUninit[Mont](testDev, "codeword", n*width)
		if err != nil {
			t.Fatal(err)
		}
		b := testDev.Batch()
		encode := ntt.EncodeRSMatrix
		if wide {
			encode = ntt.EncodeRSMatrixWide
		}
		if err := encode(b, a, out, h, width, lSkip, logBlowup, false); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(readBack(t, out), want.Values); i >= 0 {
			t.Fatalf("wide=%v: element %d (column %d) differs", wide, i, i/n)
		}
		wantScratch := n
		if wide {
			wantScratch = width * n
		}
		if got := ntt.scratch.Len(); got != wantScratch || ntt.ScratchWordsWithin(n, width, WideScratchWords) != width*n {
			t.Errorf("wide=%v: scratch of %d words, want %d", wide, got, wantScratch)
		}
		a.Free()
		out.Free()
		ntt.Close()
	}
}

func TestEncodePassMatchesFullTransform(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(7, 8))
	h, w := 1<<16, 2
	if got := ntt.PassLogs(h); len(got) != 2 || got[0]+got[1] != 16 {
		t.Fatalf("PassLogs(2^16) = %v", got)
	}
	if err := ntt.EncodePass(testDev.Batch(), upload(t, fieldrand.Fps(r, 1)), 1, 1, 0); err == nil {
		t.Fatal("EncodePass of a size-1 transform: no error")
	}
	v := fieldrand.Fps(r, h*w)
	a := upload(t, v)
	defer a.Free()
	b := testDev.Batch()
	for i := range ntt.Passes(h) {
		if err := ntt.EncodePass(b, a, h, w, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	want := append([]field.Fp(nil), v...)
	if err := cpuref.DFTColumns(want, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCanonical(a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: got %d, want %d", i, got[i], want[i])
		}
	}
}

func TestHostPassPlan(t *testing.T) {
	for logN := 0; logN <= 27; logN++ {
		plan := hostPassPlan(logN, 13)
		sum := 0
		for _, lr := range plan {
			sum += lr
			lt := min(13-lr, logN-lr)
			if len(plan) > 1 && (lr < 1 || lt < hostLogLanes) {
				t.Errorf("2^%d: plan %v: pass of 2^%d points has T = 2^%d < 16", logN, plan, lr, lt)
			}
		}
		if sum != logN || (len(plan) > 1 && len(plan)%2 != 0) {
			t.Errorf("2^%d: plan %v", logN, plan)
		}
		if logN < 2*hostLogLanes && len(plan) != 1 {
			t.Errorf("2^%d: plan %v, want one pass", logN, plan)
		}
	}
}

// TestTwiddleTable checks every entry against its definition, w_{2h}^j for tw[h+j], at sizes
// filled inline and on several cores.
func TestTwiddleTable(t *testing.T) {
	for _, logN := range []int{0, 1, 2, 5, 17, 18} {
		for _, inverse := range []bool{false, true} {
			tw := TwiddleTable(logN, inverse)
			if len(tw) != 1<<logN || (logN > 0 && tw[0] != 0) {
				t.Fatalf("2^%d: length %d, tw[0] = %d", logN, len(tw), tw[0])
			}
			for h, lh := 1, 1; h < len(tw); h, lh = 2*h, lh+1 {
				w := field.TwoAdicGenerator(lh)
				if inverse {
					w = w.Inverse()
				}
				// every entry of the small levels, a sample of the large ones
				stride := max(1, h/4096)
				for j := 0; j < h; j += stride {
					if want := MontOf(w.Exp(uint64(j))); tw[h+j] != want {
						t.Fatalf("2^%d inverse=%v: tw[%d+%d] = %d, want %d", logN, inverse, h, j, tw[h+j], want)
					}
				}
				if j := h - 1; tw[h+j] != MontOf(w.Exp(uint64(j))) {
					t.Fatalf("2^%d inverse=%v: last entry of level %d wrong", logN, inverse, h)
				}
			}
		}
	}
}

// ntt_blocks' tiled path (GPUs: a group's blocks through group memory) against the host
// device's untiled one, on the host posing as a GPU with 64-thread groups: every block size,
// columns of 64 to 256 blocks with gaps between them, a partial last tile and a partial last
// column, forward and inverse, with and without the subset sum; words outside the blocks are
// left alone (the untiled path is cpuref's: TestIDFTBlocks, TestRSEncodeMatrix).
func TestNTTBlocksTiled(t *testing.T) {
	gpuDev, _ := openLimitedWith(t, &limitedBackend{maxThreads: map[string]int{"ntt_blocks": 64}})
	tiled, plain := NewNTT(gpuDev), NewNTT(testDev)
	defer tiled.Close()
	defer plain.Close()
	r := rand.New(rand.NewPCG(31, 32))
	for l := 0; l <= 5; l++ {
		if tpg := blocksTile(gpuDev, "ntt_blocks", l); tpg != 64 {
			t.Fatalf("l=%d: tile of %d blocks, want 64", l, tpg)
		}
		for _, c := range []struct{ logPerCol, nblocks, gap int }{{6, 64, 0}, {7, 300, 5}, {8, 256 * 3, 0}, {6, 64*4 - 1, 64}} {
			stride := c.gap + (1<<c.logPerCol)<<l
			n := ((c.nblocks-1)>>c.logPerCol)*stride + (1<<c.logPerCol)<<l
			v := fieldrand.Fps(r, n)
			spec := BlockSpec{LogBlock: l, NBlocks: c.nblocks, LogBlocksPerCol: c.logPerCol, ColStride: stride}
			for _, inverse := range []bool{false, true} {
				for _, ss := range []bool{false, true} {
					var got, want []field.Fp
					for _, run := range []struct {
						dev *gpu.Device
						ntt *NTT
						out *[]field.Fp
					}{{gpuDev, tiled, &got}, {testDev, plain, &want}} {
						a, err := UploadMont(run.dev, "blocks", v)
						if err != nil {
							t.Fatal(err)
						}
						b := run.dev.Batch()
						if err := run.ntt.EncodeBlocks(b, a, spec, inverse, ss); err != nil {
							t.Fatal(err)
						}
						if err := b.Wait(); err != nil {
							t.Fatal(err)
						}
						if *run.out, err = ReadCanonical(a); err != nil {
							t.Fatal(err)
						}
						a.Free()
					}
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("l=%d %+v inverse=%v subset=%v: element %d", l, c, inverse, ss, i)
					}
				}
			}
		}
	}
}

// ntt_message_columns' tiled path (GPUs) and the DFT's first pass that leaves the zero half unread
// (ntt_pass zero_hi), on the host posing as a GPU with 64-thread groups, against cpuref: every block
// size, blowups 1, 2 and 4 (the zero copies), columns of exactly one tile and of several, a column
// too short for a tile (the untiled path on a GPU), canonical input, one and two passes. ntt_pass
// runs one thread a group: the host's fibers have too small a stack for its frame
// (TestLaunchersRespectKernelLimits).
func TestRSEncodeMatrixTiled(t *testing.T) {
	gpuDev, lb := openLimitedWith(t, &limitedBackend{maxThreads: map[string]int{"ntt_message_columns": 64, "ntt_pass": 1}})
	if tpg := blocksTile(gpuDev, "ntt_message_columns", 5); tpg != 64 {
		t.Fatalf("tile of %d blocks, want 64", tpg)
	}
	ntt := NewNTT(gpuDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct{ logM, width, lSkip, logBlowup int }{
		{6, 3, 0, 1}, {7, 2, 1, 2}, {9, 3, 3, 1}, {10, 2, 4, 0}, {11, 3, 5, 1}, {10, 5, 4, 1}, {5, 2, 2, 1},
		// two passes whose first is ntt_pass' specialised shape (2^10, 2^11, 2^12 points) reading
		// only the lower half of each column (zero_hi)
		{19, 1, 4, 1}, {20, 1, 4, 1}, {21, 1, 4, 1}, {19, 1, 4, 2},
	} {
		q := air.NewMatrix(c.width, 1<<c.logM)
		copy(q.Values, fieldrand.Fps(r, len(q.Values)))
		q.Values[0], q.Values[len(q.Values)-1] = 0, field.Fp(field.P-1)
		want, err := cpuref.RSEncodeMatrix(c.lSkip, c.logBlowup, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, canonical := range []bool{false, true} {
			var a *gpu.Array[Mont]
			if canonical {
				u, err := gpu.UploadArray(gpuDev, "q", q.Values)
				if err != nil {
					t.Fatal(err)
				}
				a = gpu.View[Mont](u)
			} else if a, err = UploadMont(gpuDev, "q", q.Values); err != nil {
				t.Fatal(err)
			}
			cw, err := ntt.RSEncodeMatrix("codeword", a, 1<<c.logM, c.width, c.lSkip, c.logBlowup, canonical)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadCanonical(cw)
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want.Values); i >= 0 {
				t.Fatalf("%+v canonical=%v: element %d: got %d want %d", c, canonical, i, got[i], want.Values[i])
			}
			cw.Free()
			a.Free()
		}
	}
	if lb.largest["ntt_message_columns"] != 64 {
		t.Errorf("ntt_message_columns ran in groups of at most %d threads, want tiles of 64", lb.largest["ntt_message_columns"])
	}
}

// ReleaseScratch frees the multi-pass scratch at once when no transform is encoding with it, and
// otherwise leaves it to the last such transform; transforms after it allocate it again and stay
// correct.
func TestNTTReleaseScratch(t *testing.T) {
	defer func(old int) { maxPassLog = old }(maxPassLog)
	maxPassLog = 4 // two passes from 2^5 points on: the scratch is used
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(41, 42))
	live := func() int {
		n := 0
		for _, b := range testDev.LiveBuffers() {
			if b.Name == "ntt scratch" {
				n++
			}
		}
		return n
	}
	transform := func() {
		t.Helper()
		v := fieldrand.Fps(r, 1<<8*3)
		a := upload(t, v)
		if err := ntt.DFTColumns(a, 1<<8, 3, false); err != nil {
			t.Fatal(err)
		}
		want := append([]field.Fp(nil), v...)
		for c := range 3 {
			if err := cpuref.DFT(want[c<<8 : (c+1)<<8]); err != nil {
				t.Fatal(err)
			}
		}
		if i := firstDiff(readBack(t, a), want); i >= 0 {
			t.Fatalf("element %d", i)
		}
	}
	transform()
	if n := live(); n != 1 {
		t.Fatalf("%d scratch buffers after a two-pass transform, want 1", n)
	}
	ntt.ReleaseScratch()
	if n := live(); n != 0 {
		t.Fatalf("%d scratch buffers after ReleaseScratch, want 0", n)
	}
	transform()
	// A release while a transform encodes with the scratch waits for it.
	if _, err := ntt.scratchOf(1 << 9); err != nil {
		t.Fatal(err)
	}
	ntt.ReleaseScratch()
	if n := live(); n == 0 {
		t.Fatal("the scratch was freed while a transform was encoding with it")
	}
	ntt.doneScratch()
	if n := live(); n != 0 {
		t.Fatalf("%d scratch buffers after the last user, want 0", n)
	}
	transform()
}
