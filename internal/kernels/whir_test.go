package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

func firstDiff4(a, b []field.Fp4) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return len(a)
	}
	return -1
}

// whirBatchRef is cpuref's NewWhirProver table: Σ μ^idx·CoeffsToEvals(RSMessage(l, column)).
func whirBatchRef(t *testing.T, lSkip int, mats [][]field.Fp, widths []int, mu []field.Fp4) []field.Fp4 {
	t.Helper()
	var out []field.Fp4
	idx := 0
	for m, q := range mats {
		h := len(q) / max(widths[m], 1)
		if out == nil {
			out = make([]field.Fp4, h)
		}
		for j := range widths[m] {
			e, err := cpuref.RSMessage(lSkip, q[j*h:(j+1)*h])
			if err != nil {
				t.Fatal(err)
			}
			cpuref.CoeffsToEvals(e)
			for b, v := range e {
				out[b] = out[b].Add(mu[idx].MulBase(v))
			}
			idx++
		}
	}
	return out
}

func TestWhirBatchMatchesCpuref(t *testing.T) {
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		logM, lSkip int
		widths      []int
	}{
		{0, 0, []int{1}}, {1, 1, []int{2}}, {2, 2, []int{3}}, {3, 2, []int{1, 2}}, {4, 4, []int{5}},
		{5, 5, []int{2, 1}}, {6, 3, []int{4}}, {7, 0, []int{3}}, {8, 1, []int{2, 3, 1}}, {10, 4, []int{7, 2}},
		{11, 2, []int{9}}, {12, 5, []int{3}}, {14, 4, []int{2, 2}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("2^%d/l%d/%v", c.logM, c.lSkip, c.widths), func(t *testing.T) {
			h := 1 << c.logM
			total := 0
			for _, w := range c.widths {
				total += w
			}
			mu := randFp4s(r, total)
			mats := make([][]field.Fp, len(c.widths))
			qs := make([]*gpu.Array[Mont], len(c.widths))
			for i, w := range c.widths {
				mats[i] = fieldrand.Fps(r, h*w)
				qs[i] = upload(t, mats[i])
			}
			muArr := uploadFp4(t, mu)
			// Garbage in f: the first matrix must overwrite it.
			f := uploadFp4(t, randFp4s(r, h))
			n := syncs(t, func() error {
				b := testDev.Batch()
				off := 0
				for i, w := range c.widths {
					if err := ntt.EncodeWhirBatch(b, qs[i], h, w, c.lSkip, muArr, off, f, i > 0); err != nil {
						return err
					}
					off += w
				}
				fm := gpu.View[Mont](f) // the subset sum indexes words
				if err := EncodeSubsetSum(b, testDev, fm, fm, c.logM+2, c.lSkip+2, c.logM+2, false); err != nil {
					return err
				}
				return b.Wait()
			})
			if n != 1 {
				t.Errorf("%d syncs, want 1", n)
			}
			got := readFp4(t, f)
			want := whirBatchRef(t, c.lSkip, mats, c.widths, mu)
			if i := firstDiff4(got, want); i >= 0 {
				t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
			}
		})
	}
}

// subsetRef applies the subset-sum (or Möbius) step over the index bits [lo, hi) of a.
func subsetRef(a []field.Fp, lo, hi int, inverse bool) {
	for i := lo; i < hi; i++ {
		h := 1 << i
		for x := range a {
			if x&h != 0 {
				if inverse {
					a[x] = a[x].Sub(a[x-h])
				} else {
					a[x] = a[x].Add(a[x-h])
				}
			}
		}
	}
}

func TestSubsetSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	cases := []struct{ logN, lo, hi int }{
		{0, 0, 0}, {1, 0, 1}, {3, 0, 3}, {5, 0, 5}, {6, 0, 6}, {7, 2, 7}, {9, 1, 8}, {10, 3, 10}, {12, 2, 12},
		{13, 0, 13}, {16, 5, 16}, {17, 2, 17},
	}
	for _, c := range cases {
		for _, inverse := range []bool{false, true} {
			for _, inPlace := range []bool{true, false} {
				if c.lo == c.hi && !inPlace {
					continue
				}
				n := 1 << c.logN
				v := fieldrand.Fps(r, n)
				src := upload(t, v)
				dst := src
				if !inPlace {
					dst = upload(t, make([]field.Fp, n))
				}
				k := syncs(t, func() error {
					b := testDev.Batch()
					if err := EncodeSubsetSum(b, testDev, src, dst, c.logN, c.lo, c.hi, inverse); err != nil {
						return err
					}
					return b.Wait()
				})
				if k != 1 {
					t.Errorf("%d syncs", k)
				}
				want := append([]field.Fp(nil), v...)
				subsetRef(want, c.lo, c.hi, inverse)
				if i := firstDiff(readBack(t, dst), want); i >= 0 {
					t.Fatalf("%+v inverse=%v inPlace=%v: element %d", c, inverse, inPlace, i)
				}
				if !inPlace {
					if i := firstDiff(readBack(t, src), v); i >= 0 {
						t.Fatalf("%+v: source modified at %d", c, i)
					}
				}
			}
		}
	}
	// Full-range transforms of an Fp4 table are CoeffsToEvals / EvalsToCoeffs coordinate-wise.
	v := randFp4s(r, 1<<9)
	a := uploadFp4(t, v)
	am := gpu.View[Mont](a)
	b := testDev.Batch()
	if err := EncodeSubsetSum(b, testDev, am, am, 11, 2, 11, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got := readFp4(t, a)
	for c := range 4 {
		col := make([]field.Fp, len(v))
		for i, x := range v {
			col[i] = x[c]
		}
		cpuref.EvalsToCoeffs(col)
		for i := range col {
			if got[i][c] != col[i] {
				t.Fatalf("Fp4 Möbius: element %d coordinate %d", i, c)
			}
		}
	}
	if err := EncodeSubsetSum(testDev.Batch(), testDev, am, am, 11, 5, 12, false); err == nil {
		t.Error("bits beyond the table accepted")
	}
}

func TestFp4ToPlanes(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, c := range []struct{ n, logOut int }{{1, 0}, {1, 3}, {5, 3}, {16, 4}, {1000, 11}} {
		v := randFp4s(r, c.n)
		src := uploadFp4(t, v)
		dst := upload(t, make([]field.Fp, 4<<c.logOut))
		b := testDev.Batch()
		if err := EncodeFp4ToPlanes(b, testDev, src, c.n, dst, c.logOut); err != nil {
			t.Fatal(err)
		}
		got := readBack(t, dst)
		h := 1 << c.logOut
		for i := range h {
			for k := range 4 {
				want := field.Fp(0)
				if i < c.n {
					want = v[i][k]
				}
				if got[k*h+i] != want {
					t.Fatalf("%+v: row %d coordinate %d", c, i, k)
				}
			}
		}
	}
	if err := EncodeFp4ToPlanes(testDev.Batch(), testDev, allocFp4(t, 3), 3, upload(t, make([]field.Fp, 8)), 1); err == nil {
		t.Error("3 elements into planes of 2 accepted")
	}
}

func TestHornerMatchesStark(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, logN := range []int{0, 1, 3, 4, 5, 8, 9, 13, 17} {
		n := 1 << logN
		c := randFp4s(r, n)
		for _, z := range []field.Fp4{fieldrand.Fp4(r), {}, field.Fp4One, field.Lift(field.Fp(field.P - 1))} {
			a := uploadFp4(t, c)
			scratch := allocFp4(t, HornerScratchLen(n))
			var at int
			k := syncs(t, func() error {
				b := testDev.Batch()
				var err error
				if at, err = EncodeHorner(b, testDev, a, n, z, scratch); err != nil {
					return err
				}
				return b.Wait()
			})
			if k != 1 {
				t.Errorf("%d syncs", k)
			}
			got := readFp4(t, scratch)[at]
			if want := stark.Horner(c, z); got != want {
				t.Fatalf("n=2^%d z=%v: got %v, want %v", logN, z, got, want)
			}
		}
	}
}

func TestWhirWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	// baseFrom splits the points: Fp4 points before it, base-field points (lo as base words) from
	// it; the host's lane path runs where d/2 ≥ 4, its scalar path (the GPUs' only one) below.
	for _, c := range []struct{ d, npts, baseFrom int }{
		{0, 1, 1}, {1, 2, 0}, {2, 1, 0}, {3, 5, 1}, {6, 3, 3}, {9, 17, 1}, {9, 6, 2}, {12, 40, 1}, {12, 9, 0}, {13, 1, 1}, {13, 7, 7},
	} {
		t.Run(fmt.Sprintf("d%d/pts%d/base%d", c.d, c.npts, c.baseFrom), func(t *testing.T) {
			n := 1 << c.d
			w := randFp4s(r, n)
			pts := randFp4s(r, c.npts)
			coefs := randFp4s(r, c.npts)
			for i := c.baseFrom; i < c.npts; i++ {
				pts[i] = field.Lift(fieldrand.Fp(r))
			}
			if c.baseFrom < c.npts {
				pts[c.baseFrom] = field.Lift(field.TwoAdicGenerator(5)) // a query point: a lifted root of unity
			}
			if c.npts > 2 {
				pts[c.npts-1], coefs[c.npts-2] = field.Fp4{}, field.Fp4One
			}
			pc := make([]field.Fp4, 0, 2*c.npts)
			for i := range pts {
				pc = append(pc, pts[i], coefs[i])
			}
			wa := uploadFp4(t, w)
			dl, dh := c.d/2, c.d-c.d/2
			ww := WhirWeights{Points: uploadFp4(t, pc), N: c.npts, BaseFrom: c.baseFrom, LogLo: dl, LogHi: dh,
				Lo: allocFp4(t, max(1, c.baseFrom<<dl)), Hi: allocFp4(t, c.npts<<dh)}
			var err error
			if ww.LoBase, err = gpu.AllocArray[Mont](testDev, "test lo base", max(1, (c.npts-c.baseFrom)<<dl)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ww.LoBase.Free)
			k := syncs(t, func() error {
				b := testDev.Batch()
				if err := ww.Encode(b, testDev, wa); err != nil {
					return err
				}
				return b.Wait()
			})
			if k != 1 {
				t.Errorf("%d syncs", k)
			}
			want := append([]field.Fp4(nil), w...)
			for i, z := range pts {
				for b, v := range stark.EvalsEqHypercube(stark.PowersOf2(z, c.d)) {
					want[b] = want[b].Add(coefs[i].Mul(v))
				}
			}
			if i := firstDiff4(readFp4(t, wa), want); i >= 0 {
				t.Fatalf("entry %d", i)
			}
		})
	}
	// Refused: a split outside the points, short tables.
	small := allocFp4(t, 4)
	base, err := gpu.AllocArray[Mont](testDev, "test lo base", 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Free)
	for _, ww := range []WhirWeights{
		{Points: small, N: 2, BaseFrom: 3, LogLo: 1, LogHi: 1, Lo: small, LoBase: base, Hi: small},
		{Points: small, N: 2, BaseFrom: 0, LogLo: 2, LogHi: 1, Lo: small, LoBase: base, Hi: small},
		{Points: small, N: 2, BaseFrom: 0, LogLo: 1, LogHi: 1, Lo: small, Hi: small},
	} {
		if err := ww.Encode(testDev.Batch(), testDev, small); err == nil {
			t.Errorf("%+v accepted", ww)
		}
	}
}

// BenchmarkWhirKernels times each WHIR kernel at the sizes of a keccakf-1024 proof (stacked
// matrix 2^21 × 42, l_skip 4, k 4: f of 2^21 entries, 2^17 after the first k folds, 194 weight
// points) on the test device:
//
//	go test ./internal/kernels -run '^$' -bench WhirKernels -benchtime 3x
func BenchmarkWhirKernels(b *testing.B) {
	const logM, width, lSkip, npts = 21, 42, 4, 194
	ntt := NewNTT(testDev)
	defer ntt.Close()
	r := rand.New(rand.NewPCG(31, 32))
	alloc := func(n int) *gpu.Array[Mont4] {
		a, err := gpu.AllocArray[Mont4](testDev, "bench", n)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(a.Free)
		return a
	}
	q, err := UploadMont(testDev, "bench", fieldrand.Fps(r, width<<logM))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(q.Free)
	mu := alloc(width)
	if err := mu.Write(0, Mont4Slice(field.PowersFp4(fieldrand.Fp4(r), width))); err != nil {
		b.Fatal(err)
	}
	f := alloc(1 << logM)
	coeffs := alloc(1 << (logM - 4))
	planes, err := gpu.AllocArray[Mont](testDev, "bench planes", 4<<logM)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(planes.Free)
	scratch := alloc(HornerScratchLen(1 << (logM - 4)))
	pc := alloc(2 * npts)
	if err := pc.Write(0, Mont4Slice(randFp4s(r, 2*npts))); err != nil {
		b.Fatal(err)
	}
	d := logM - 4
	lo, hi := alloc(1<<(d/2)), alloc(npts<<(d-d/2))
	loBase, err := gpu.AllocArray[Mont](testDev, "bench lo base", (npts-1)<<(d/2))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(loBase.Free)
	ww := WhirWeights{Points: pc, N: npts, BaseFrom: 1, LogLo: d / 2, LogHi: d - d/2, Lo: lo, LoBase: loBase, Hi: hi}
	fm, cm := gpu.View[Mont](f), gpu.View[Mont](coeffs) // the subset sum indexes words
	run := func(name string, encode func(bt *gpu.Batch) error) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				bt := testDev.Batch()
				if err := encode(bt); err != nil {
					b.Fatal(err)
				}
				if err := bt.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("batch 2^21x42", func(bt *gpu.Batch) error { return ntt.EncodeWhirBatch(bt, q, 1<<logM, width, lSkip, mu, 0, f, false) })
	run("subset sum 2^21 bits 4..21", func(bt *gpu.Batch) error {
		return EncodeSubsetSum(bt, testDev, fm, fm, logM+2, lSkip+2, logM+2, false)
	})
	run("mobius 2^17", func(bt *gpu.Batch) error { return EncodeSubsetSum(bt, testDev, fm, cm, d+2, 2, d+2, true) })
	run("to planes 2^17 into 2^21", func(bt *gpu.Batch) error { return EncodeFp4ToPlanes(bt, testDev, coeffs, 1<<d, planes, logM) })
	run("horner 2^17", func(bt *gpu.Batch) error {
		_, err := EncodeHorner(bt, testDev, coeffs, 1<<d, fieldrand.Fp4(r), scratch)
		return err
	})
	run("weights 194 x 2^17 (1 Fp4 point)", func(bt *gpu.Batch) error { return ww.Encode(bt, testDev, f) })
}
