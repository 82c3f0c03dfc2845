package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The plain-Go formulas of the sumcheck family.

func refRound(f, w []field.Fp4, cols, logRows, stride int) (s1, s2 field.Fp4) {
	for c := range cols {
		for y := 0; y < 1<<(logRows-1); y++ {
			f0, f1 := f[c*stride+2*y], f[c*stride+2*y+1]
			w0, w1 := w[c*stride+2*y], w[c*stride+2*y+1]
			s1 = s1.Add(f1.Mul(w1))
			s2 = s2.Add(f1.Double().Sub(f0).Mul(w1.Double().Sub(w0)))
		}
	}
	return s1, s2
}

// refFold folds cols columns of 2^(logRows+1) rows into dst (compact stride dstStride).
func refFold(src []field.Fp4, srcStride, dstStride, cols, logRows int, a field.Fp4, dst []field.Fp4) {
	for c := range cols {
		for y := 0; y < 1<<logRows; y++ {
			t0, t1 := src[c*srcStride+2*y], src[c*srcStride+2*y+1]
			dst[c*dstStride+y] = t0.Add(a.Mul(t1.Sub(t0)))
		}
	}
}

func randFp4s(r *rand.Rand, n int) []field.Fp4 {
	out := make([]field.Fp4, n)
	for i := range out {
		out[i] = fieldrand.Fp4(r)
	}
	return out
}

func uploadFp4(t *testing.T, v []field.Fp4) *gpu.Array[Mont4] {
	t.Helper()
	a, err := gpu.UploadArray(testDev, "test fp4", Mont4Slice(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func allocFp4(t *testing.T, n int) *gpu.Array[Mont4] {
	t.Helper()
	a, err := gpu.AllocArray[Mont4](testDev, "test fp4 out", n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func readFp4(t *testing.T, a *gpu.Array[Mont4]) []field.Fp4 {
	t.Helper()
	v, err := a.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return Fp4SliceOf(v)
}

// fp4Words is an Fp4 table as the words that EncodeSumRows adds (it sums any rows word by word).
func fp4Words(a *gpu.Array[Mont4]) *gpu.Array[uint32] { return gpu.View[uint32](a) }

var sumcheckShapes = []struct{ cols, logRows, pad int }{
	{1, 1, 0}, {1, 2, 0}, {3, 1, 0}, {2, 3, 5}, {5, 4, 0}, {1, 9, 0}, {7, 6, 3}, {4, 10, 0}, {33, 5, 1}, {2, 14, 0},
}

func TestSumcheckRoundAndFoldRound(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	sc, err := NewSumcheck(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, s := range sumcheckShapes {
		t.Run(fmt.Sprintf("%dx2^%d+%d", s.cols, s.logRows, s.pad), func(t *testing.T) {
			stride := 1<<s.logRows + s.pad
			f, w := randFp4s(r, s.cols*stride), randFp4s(r, s.cols*stride)
			src := ProductTables{F: uploadFp4(t, f), W: uploadFp4(t, w), Cols: s.cols, LogRows: s.logRows, Stride: stride}
			b := testDev.Batch()
			sums := testDev.Stats().PerKernel["sc_sum_rows"]
			if err := sc.EncodeRound(b, src); err != nil {
				t.Fatal(err)
			}
			// A round of a few groups' pairs runs in one group, without the second pass.
			g, _, _ := sc.reduceShape("sc_round_partials", s.cols<<(s.logRows-1))
			if two := testDev.Stats().PerKernel["sc_sum_rows"] > sums; two != (g.X > oneGroupRound) {
				t.Errorf("round of %d groups: second pass %v", g.X, two)
			}
			var s1, s2 field.Fp4
			if n := syncs(t, func() (err error) { s1, s2, err = sc.ReadRound(); return err }); n != 1 {
				t.Errorf("round: %d syncs, want 1", n)
			}
			w1, w2 := refRound(f, w, s.cols, s.logRows, stride)
			if s1 != w1 || s2 != w2 {
				t.Fatalf("round: got (%v, %v), want (%v, %v)", s1, s2, w1, w2)
			}
			if s.logRows < 2 {
				return
			}
			// Fold at α then round, fused; compare the folded tables too.
			alpha := fieldrand.Fp4(r)
			dstStride := 1<<(s.logRows-1) + s.pad/2
			dst := ProductTables{F: allocFp4(t, s.cols*dstStride), W: allocFp4(t, s.cols*dstStride), Cols: s.cols, LogRows: s.logRows - 1, Stride: dstStride}
			b = testDev.Batch()
			if err := sc.EncodeFoldRound(b, src, dst, alpha); err != nil {
				t.Fatal(err)
			}
			if n := syncs(t, func() (err error) { s1, s2, err = sc.ReadRound(); return err }); n != 1 {
				t.Errorf("fold round: %d syncs, want 1", n)
			}
			ff, fw := make([]field.Fp4, s.cols*dstStride), make([]field.Fp4, s.cols*dstStride)
			refFold(f, stride, dstStride, s.cols, s.logRows-1, alpha, ff)
			refFold(w, stride, dstStride, s.cols, s.logRows-1, alpha, fw)
			w1, w2 = refRound(ff, fw, s.cols, s.logRows-1, dstStride)
			if s1 != w1 || s2 != w2 {
				t.Fatalf("fold round: got (%v, %v), want (%v, %v)", s1, s2, w1, w2)
			}
			gf, gw := readFp4(t, dst.F), readFp4(t, dst.W)
			for c := range s.cols {
				for y := 0; y < 1<<(s.logRows-1); y++ {
					i := c*dstStride + y
					if gf[i] != ff[i] || gw[i] != fw[i] {
						t.Fatalf("folded column %d row %d: got (%v, %v), want (%v, %v)", c, y, gf[i], gw[i], ff[i], fw[i])
					}
				}
			}
		})
	}
}

// TestSumcheckRoundShapes runs the two passes with GPU-like and odd group shapes on the host
// device (the launcher picks one-thread groups there).
func TestSumcheckRoundShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	cols, logRows := 3, 7
	stride := 1 << logRows
	f, w := randFp4s(r, cols*stride), randFp4s(r, cols*stride)
	fa, wa := uploadFp4(t, f), uploadFp4(t, w)
	want1, want2 := refRound(f, w, cols, logRows, stride)
	for _, sh := range []struct{ groups, tpg, sumTPG int }{{1, 1, 1}, {1, 256, 256}, {3, 7, 5}, {64, 32, 3}, {5, 64, 8}, {2, 3, 16}, {200, 1, 64}} {
		partials := allocFp4(t, 2*sh.groups)
		out := allocFp4(t, 2)
		b := testDev.Batch()
		b.Dispatch("sc_round_partials", gpu.D1(uint32(sh.groups)), gpu.D1(uint32(sh.tpg)), []gpu.Arg{gpu.Buf(fa.Buffer), gpu.Buf(wa.Buffer),
			gpu.Buf(partials.Buffer), gpu.U32(uint32(logRows-1), uint32(cols), uint32(stride))}, uint32(32*sh.tpg))
		b.Dispatch("sc_sum_rows", gpu.D1(1), gpu.D1(uint32(sh.sumTPG)), []gpu.Arg{gpu.Buf(partials.Buffer), gpu.Buf(out.Buffer),
			gpu.U32(uint32(sh.groups), 8, 0)}, uint32(4*sh.sumTPG))
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		if got[0] != want1 || got[1] != want2 {
			t.Fatalf("%+v: got (%v, %v), want (%v, %v)", sh, got[0], got[1], want1, want2)
		}
	}
}

func TestSumRows(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, c := range []struct{ rows, width, tpg int }{{1, 1, 1}, {5, 8, 1}, {7, 8, 256}, {300, 8, 256}, {9, 192, 256}, {33, 192, 64}, {4, 300, 256}, {3, 5, 7}} {
		v := fieldrand.Fps(r, c.rows*c.width)
		in := upload(t, v)
		const off = 2 // the sums land at an offset of out
		out, err := gpu.AllocArray[uint32](testDev, "sum rows out", off+c.width)
		if err != nil {
			t.Fatal(err)
		}
		b := testDev.Batch()
		b.Dispatch("sc_sum_rows", gpu.D1(1), gpu.D1(uint32(c.tpg)), []gpu.Arg{gpu.Buf(in.Buffer), gpu.Buf(out.Buffer),
			gpu.U32(uint32(c.rows), uint32(c.width), off)}, uint32(4*c.tpg))
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readBack(t, gpu.View[Mont](out))[off:]
		out.Free()
		for k := range c.width {
			var want field.Fp
			for row := range c.rows {
				want = want.Add(v[row*c.width+k])
			}
			if got[k] != want {
				t.Fatalf("%+v: column %d: got %d, want %d", c, k, got[k], want)
			}
		}
	}
	// The launcher's shape.
	v := fieldrand.Fps(r, 50*12)
	in := upload(t, v)
	out := upload(t, make([]field.Fp, 12))
	b := testDev.Batch()
	if err := EncodeSumRows(b, testDev, gpu.View[uint32](in), gpu.View[uint32](out), 50, 12); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, out)
	for k := range 12 {
		var want field.Fp
		for row := range 50 {
			want = want.Add(v[row*12+k])
		}
		if got[k] != want {
			t.Fatalf("launcher: column %d: got %d, want %d", k, got[k], want)
		}
	}
}

func TestSumcheckFold(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, s := range []struct{ cols, logRows, srcPad, dstPad int }{{1, 0, 0, 0}, {3, 0, 1, 2}, {1, 1, 0, 0}, {4, 3, 2, 0}, {6, 8, 0, 3}, {2, 12, 0, 0}} {
		srcStride, dstStride := 2<<s.logRows+s.srcPad, 1<<s.logRows+s.dstPad
		src := randFp4s(r, s.cols*srcStride)
		alpha := fieldrand.Fp4(r)
		sa := uploadFp4(t, src)
		prev := randFp4s(r, s.cols*dstStride) // rows past 2^logRows must survive
		da := uploadFp4(t, prev)
		b := testDev.Batch()
		if err := EncodeFold(b, testDev, sa, srcStride, da, dstStride, s.cols, s.logRows, alpha); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		want := append([]field.Fp4(nil), prev...)
		refFold(src, srcStride, dstStride, s.cols, s.logRows, alpha, want)
		got := readFp4(t, da)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: element %d: got %v, want %v", s, i, got[i], want[i])
			}
		}
	}
	// alpha = 0 and 1 pick the even and odd rows.
	src := randFp4s(r, 8)
	sa := uploadFp4(t, src)
	for _, a := range []field.Fp4{{}, field.Fp4One} {
		da := allocFp4(t, 4)
		b := testDev.Batch()
		if err := EncodeFold(b, testDev, sa, 8, da, 4, 1, 2, a); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, da)
		off := 0
		if a == field.Fp4One {
			off = 1
		}
		for y := range 4 {
			if got[y] != src[2*y+off] {
				t.Fatalf("alpha %v: row %d: got %v, want %v", a, y, got[y], src[2*y+off])
			}
		}
	}
}

// TestEqSuffixes: every suffix's eq table from one dispatch, at offsets in both buffers, against
// the product formula; the entries around the tables stay untouched.
func TestEqSuffixes(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{0, 1, 2, 5, 11} {
		x := randFp4s(r, n)
		const hOff, oOff = 3, 5
		halves := append(make([]Mont4, hOff), eqSuffixHalves(x)...)
		ha, err := gpu.UploadArray(testDev, "halves", halves)
		if err != nil {
			t.Fatal(err)
		}
		total := 2<<n - 1
		out := allocFp4(t, oOff+total+2)
		b := testDev.Batch()
		if err := EncodeEqSuffixes(b, testDev, ha, hOff, out, oOff, n); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		for i := range oOff {
			if !got[i].IsZero() || !got[oOff+total+i%2].IsZero() {
				t.Fatalf("n %d: an entry outside the tables was written", n)
			}
		}
		at := oOff
		for j := 0; j <= n; j++ {
			for bidx := range 1 << (n - j) {
				want := field.Fp4One
				for i := range n - j {
					if bidx>>i&1 == 1 {
						want = want.Mul(x[j+i])
					} else {
						want = want.Mul(field.Fp4One.Sub(x[j+i]))
					}
				}
				if got[at+bidx] != want {
					t.Fatalf("n %d, table %d, entry %d: got %v, want %v", n, j, bidx, got[at+bidx], want)
				}
			}
			at += 1 << (n - j)
		}
		ha.Free()
	}
	if err := EncodeEqSuffixes(testDev.Batch(), testDev, allocFp4(t, 4), 0, allocFp4(t, 8), 0, 2); err == nil {
		t.Error("short halves: no error")
	}
}

// TestEqSuffixHalves: the halves made on the device from the coordinates equal eqSuffixHalves's,
// at an offset, the entries around them untouched; short buffers are refused.
func TestEqSuffixHalves(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{0, 1, 2, 3, 6, 11, 17} {
		x := randFp4s(r, n)
		if n >= 2 { // edge values: factors 1 − x = 0 and x = 0
			x[n-1], x[n-2] = field.Fp4One, field.Fp4{}
		}
		want := eqSuffixHalves(x)
		if len(want) != EqSuffixHalvesLen(n) {
			t.Fatalf("n %d: EqSuffixHalvesLen %d, eqSuffixHalves gives %d", n, EqSuffixHalvesLen(n), len(want))
		}
		xa, err := gpu.UploadArray(testDev, "x", Mont4Slice(append(x, field.Fp4{})))
		if err != nil {
			t.Fatal(err)
		}
		const off = 3
		out := allocFp4(t, off+len(want)+2)
		if err := EncodeEqSuffixHalves(testDev.Batch(), testDev, xa, n, out, off); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		for i := range off {
			if !got[i].IsZero() {
				t.Fatalf("n %d: entry %d before the halves written", n, i)
			}
		}
		for i := range 2 {
			if !got[off+len(want)+i].IsZero() {
				t.Fatalf("n %d: an entry after the halves written", n)
			}
		}
		for i, w := range want {
			if got[off+i] != Fp4Of(w) {
				t.Fatalf("n %d: entry %d: got %v, want %v", n, i, got[off+i], Fp4Of(w))
			}
		}
		xa.Free()
	}
	if err := EncodeEqSuffixHalves(testDev.Batch(), testDev, allocFp4(t, 4), 3, allocFp4(t, 8), 0); err == nil {
		t.Error("short halves: no error")
	}
}

func TestEqExpand(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, k := range []int{0, 1, 2, 3, 7, 12} {
		x := randFp4s(r, k)
		lo, hi, h := EqTables(x)
		la, err := gpu.UploadArray(testDev, "lo", lo)
		if err != nil {
			t.Fatal(err)
		}
		ha, err := gpu.UploadArray(testDev, "hi", hi)
		if err != nil {
			t.Fatal(err)
		}
		out := allocFp4(t, 1<<k)
		b := testDev.Batch()
		if err := EncodeEqExpand(b, testDev, la, ha, out, h, k-h, 1, false); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		// eq(x, b) = Π_i (bit_i(b) ? x_i : 1 − x_i), the formula of stark.EvalsEqHypercube.
		for bidx := range 1 << k {
			want := field.Fp4One
			for i := range k {
				if bidx>>i&1 == 1 {
					want = want.Mul(x[i])
				} else {
					want = want.Mul(field.Fp4One.Sub(x[i]))
				}
			}
			if got[bidx] != want {
				t.Fatalf("k=%d: eq[%d] = %v, want %v", k, bidx, got[bidx], want)
			}
		}
		la.Free()
		ha.Free()
	}
	// Several products, accumulated onto existing values (the host's lane path from logLo 4).
	var prev []field.Fp4
	var out *gpu.Array[Mont4]
	for _, c := range []struct{ logLo, logHi, count int }{{3, 2, 3}, {5, 2, 3}, {4, 0, 2}, {6, 3, 1}} {
		logLo, logHi, count := c.logLo, c.logHi, c.count
		lo, hi := randFp4s(r, count<<logLo), randFp4s(r, count<<logHi)
		prev = randFp4s(r, 1<<(logLo+logHi))
		out = uploadFp4(t, prev)
		b := testDev.Batch()
		if err := EncodeEqExpand(b, testDev, uploadFp4(t, lo), uploadFp4(t, hi), out, logLo, logHi, count, true); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		for bidx := range 1 << (logLo + logHi) {
			want := prev[bidx]
			for c := range count {
				want = want.Add(lo[c<<logLo+bidx&(1<<logLo-1)].Mul(hi[c<<logHi+bidx>>logLo]))
			}
			if got[bidx] != want {
				t.Fatalf("accumulate %+v: entry %d: got %v, want %v", c, bidx, got[bidx], want)
			}
		}
	}
	// Tables at offsets: two eq tables side by side in one buffer, the entries around them kept.
	x4, x3 := randFp4s(r, 9), randFp4s(r, 3)
	lo4, hi4, h4 := EqTables(x4)
	lo3, hi3, h3 := EqTables(x3)
	halves := append(append(append(append([]Mont4(nil), lo4...), hi4...), lo3...), hi3...)
	ha, err := gpu.UploadArray(testDev, "halves", halves)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Free()
	prev = randFp4s(r, 1+512+8+1)
	out = uploadFp4(t, prev)
	b := testDev.Batch()
	for _, e := range []EqExpand{
		{LoOff: 0, HiOff: len(lo4), OutOff: 1, LogLo: h4, LogHi: 9 - h4},
		{LoOff: len(lo4) + len(hi4), HiOff: len(lo4) + len(hi4) + len(lo3), OutOff: 513, LogLo: h3, LogHi: 3 - h3},
	} {
		e.Lo, e.Hi, e.Out, e.Count = ha, ha, out, 1
		if err := e.Encode(b, testDev); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got := readFp4(t, out)
	want := append(append(append([]field.Fp4{prev[0]}, evalsEq(x4)...), evalsEq(x3)...), prev[521])
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offsets: entry %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestSumcheckRejects(t *testing.T) {
	sc, err := NewSumcheck(testDev)
	if err != nil {
		t.Fatal(err)
	}
	a := allocFp4(t, 16)
	c := allocFp4(t, 16)
	b := testDev.Batch()
	for name, tt := range map[string]ProductTables{
		"one row":      {F: a, W: a, Cols: 1, LogRows: 0, Stride: 1},
		"too large":    {F: a, W: a, Cols: 2, LogRows: 4, Stride: 16},
		"short stride": {F: a, W: a, Cols: 2, LogRows: 2, Stride: 3},
		"no columns":   {F: a, W: a, Cols: 0, LogRows: 1, Stride: 2},
	} {
		if err := sc.EncodeRound(b, tt); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	src := ProductTables{F: a, W: a, Cols: 2, LogRows: 3, Stride: 8}
	if err := sc.EncodeFoldRound(b, src, ProductTables{F: c, W: a, Cols: 2, LogRows: 2, Stride: 4}, field.Fp4One); err == nil {
		t.Error("fold round into its own source: no error")
	}
	if err := sc.EncodeFoldRound(b, src, ProductTables{F: c, W: c, Cols: 2, LogRows: 3, Stride: 8}, field.Fp4One); err == nil {
		t.Error("fold round without a smaller table: no error")
	}
	if err := EncodeFold(b, testDev, a, 8, a, 4, 2, 2, field.Fp4One); err == nil {
		t.Error("fold in place: no error")
	}
	sc.Close()
	if _, _, err := sc.ReadRound(); err == nil {
		t.Error("read after close: no error")
	}
}

// TestSumRowsViaTwoLevels: the two-level sum of many rows (sc_sum_row_blocks, then sc_sum_rows),
// taken on GPUs, on the host device posing as a GPU, against plain sums, for row counts around
// the group chunking and widths below and above the group size.
func TestSumRowsViaTwoLevels(t *testing.T) {
	dev, lb := openLimited(t, nil)
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ rows, width int }{{1, 5}, {63, 12}, {65, 12}, {1000, 48}, {64*1024 + 7, 12}, {3000, 768}} {
		vals := fieldrand.Fps(r, c.rows*c.width)
		for i := 0; i < min(len(vals), 16); i++ {
			vals[i] = field.Fp(field.P - 1)
		}
		in, err := gpu.UploadArray(dev, "rows", MontSlice(vals))
		if err != nil {
			t.Fatal(err)
		}
		mid, err := gpu.AllocArray[uint32](dev, "mid", SumRowsMidRows*c.width)
		if err != nil {
			t.Fatal(err)
		}
		out, err := gpu.AllocArray[uint32](dev, "out", c.width+3)
		if err != nil {
			t.Fatal(err)
		}
		b := dev.Batch()
		if err := EncodeSumRowsVia(b, dev, gpu.View[uint32](in), mid, out, 3, c.rows, c.width); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCanonical(gpu.View[Mont](out))
		if err != nil {
			t.Fatal(err)
		}
		for k := range c.width {
			var want field.Fp
			for row := range c.rows {
				want = want.Add(vals[row*c.width+k])
			}
			if got[3+k] != want {
				t.Fatalf("%d rows × %d: column %d = %v, want %v", c.rows, c.width, k, got[3+k], want)
			}
		}
		in.Free()
		mid.Free()
		out.Free()
	}
	if lb.largest["sc_sum_row_blocks"] == 0 {
		t.Fatal("the two-level path never ran")
	}
}

// eqSuffixHalves is the halves of the eq tables of every suffix of r on the host (EqTables of
// r[j:] for j = 0..len(r), laid out lo_0, hi_0, lo_1, hi_1, …): the reference of
// EncodeEqSuffixHalves.
func eqSuffixHalves(r []field.Fp4) []Mont4 {
	var out []Mont4
	for j := 0; j <= len(r); j++ {
		lo, hi, _ := EqTables(r[j:])
		out = append(append(out, lo...), hi...)
	}
	return out
}
