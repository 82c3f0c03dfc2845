package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// stackedFixture is a random stacked matrix with slices placed as a stacked layout places them
// (descending heights, each at a multiple of its length) and random eq tables per height.
type stackedFixture struct {
	lSkip, nStack, width int
	q                    []field.Fp // column-major, canonical
	etab                 []field.Fp4
	slices               []StackedSlice
}

func newStackedFixture(r *rand.Rand, lSkip, nStack, width int, nns []int) stackedFixture {
	f := stackedFixture{lSkip: lSkip, nStack: nStack, width: width, q: fieldrand.Fps(r, width<<(lSkip+nStack))}
	eOff := map[int]int{}
	blocks := 0 // next free block over all columns
	for _, nn := range nns {
		if _, ok := eOff[nn]; !ok {
			eOff[nn] = len(f.etab)
			f.etab = append(f.etab, randFp4s(r, 1<<nn)...)
		}
		s := StackedSlice{QStart: blocks << lSkip, EOff: eOff[nn], NN: nn, A: fieldrand.Fp4(r), WStart: blocks + 3}
		if r.IntN(3) > 0 {
			s.BW = fieldrand.Fp4(r)
		}
		f.slices = append(f.slices, s)
		blocks += 1 << nn
	}
	return f
}

// refChunks is the plain-Go formula of EncodeStackedUniChunks: per chunk of every slice, G0 then
// G1 (N Fp4 each), in chunk order.
func (f stackedFixture) refChunks(slices []StackedSlice) [][]field.Fp4 {
	n := 1 << f.lSkip
	per := 1 << StackedChunkLog(f.lSkip)
	var out [][]field.Fp4
	for _, s := range slices {
		for c := range StackedSliceChunks(s.NN, f.lSkip) {
			g := make([]field.Fp4, 2*n)
			for xl := c * per; xl < min((c+1)*per, 1<<s.NN); xl++ {
				e0 := f.etab[s.EOff+xl]
				e1 := f.etab[s.EOff+(xl-1)&(1<<s.NN-1)]
				for z := range n {
					v := f.q[s.QStart+xl*n+z]
					g[z] = g[z].Add(e0.MulBase(v))
					g[n+z] = g[n+z].Add(e1.MulBase(v))
				}
			}
			out = append(out, g)
		}
	}
	return out
}

// refUni is the plain-Go formula of EncodeStackedUniChunks + EncodeStackedUniWeigh +
// EncodeSumRows: A, B, C.
func (f stackedFixture) refUni(slices []StackedSlice) []field.Fp4 {
	n := 1 << f.lSkip
	out := make([]field.Fp4, 3*n)
	for _, s := range slices {
		for xl := 0; xl < 1<<s.NN; xl++ {
			e0 := f.etab[s.EOff+xl]
			e1 := f.etab[s.EOff+(xl-1)&(1<<s.NN-1)]
			for z := range n {
				v := f.q[s.QStart+xl*n+z]
				out[z] = out[z].Add(s.A.Mul(e0).MulBase(v))
				out[n+z] = out[n+z].Add(s.BW.Mul(e0).MulBase(v))
				out[2*n+z] = out[2*n+z].Add(s.BW.Mul(e1.Sub(e0)).MulBase(v))
			}
		}
	}
	return out
}

// TestStackedUniChunksWeigh: both passes of round 0 through their launchers, one pair of
// dispatches per sub-list of slices over one packed list, against plain Go (the chunk sums on
// their own too).
func TestStackedUniChunksWeigh(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		lSkip, nStack, width int
		nns                  [][]int // slices per dispatch (one dispatch per list, same Q)
	}{
		{0, 4, 2, [][]int{{4, 3, 2, 1, 0, 0}}},
		{2, 3, 4, [][]int{{3, 3}, {2, 1, 1, 0, 0, 0}}},
		{2, 10, 2, [][]int{{10}, {9, 8, 0}}},
		{3, 6, 2, [][]int{{6, 5, 2, 2, 1, 1, 0}}},
		{4, 9, 4, [][]int{{9, 9}, {8, 7, 7, 6, 0, 0}}},
		{4, 12, 1, [][]int{{12}}},
		{5, 7, 3, [][]int{{7, 6, 6}, {0, 1}}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("l%d-n%d-w%d", c.lSkip, c.nStack, c.width), func(t *testing.T) {
			var all []int
			for _, l := range c.nns {
				all = append(all, l...)
			}
			f := newStackedFixture(r, c.lSkip, c.nStack, c.width, all)
			qa := upload(t, f.q)
			ea := uploadFp4(t, f.etab)
			// One packed list; one dispatch per sub-list, from its first chunk.
			words, _, err := PackStackedSlices(f.slices, c.lSkip)
			if err != nil {
				t.Fatal(err)
			}
			var ranges []SliceRange
			rows := 0
			at, chunk := 0, 0
			for _, l := range c.nns {
				rg := SliceRange{First: at, Count: len(l), FirstChunk: chunk}
				for _, nn := range l {
					rg.Chunks += StackedSliceChunks(nn, c.lSkip)
				}
				ranges = append(ranges, rg)
				rows += min(rg.Chunks, StackedUniMaxRows(testDev))
				at, chunk = at+len(l), chunk+rg.Chunks
			}
			sa, err := gpu.UploadArray(testDev, "slices", words)
			if err != nil {
				t.Fatal(err)
			}
			defer sa.Free()
			width := StackedUniWidth(c.lSkip)
			partials, err := gpu.AllocArray[uint32](testDev, "partials", rows*width)
			if err != nil {
				t.Fatal(err)
			}
			defer partials.Free()
			cw := StackedChunkWidth(c.lSkip)
			sums, err := gpu.AllocArray[uint32](testDev, "chunk sums", chunk*cw)
			if err != nil {
				t.Fatal(err)
			}
			defer sums.Free()
			out := allocFp4(t, 3<<c.lSkip)
			b := testDev.Batch()
			for _, rg := range ranges {
				rg.Slices = sa
				if err := EncodeStackedUniChunks(b, testDev, qa, rg, ea, sums, c.lSkip); err != nil {
					t.Fatal(err)
				}
			}
			row := 0
			for _, rg := range ranges {
				rg.Slices = sa
				g, err := EncodeStackedUniWeigh(b, testDev, sums, rg, partials, row, c.lSkip)
				if err != nil {
					t.Fatal(err)
				}
				row += g
			}
			if err := EncodeSumRows(b, testDev, partials, fp4Words(out), row, width); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			gotSums := make([]uint32, chunk*cw)
			if err := sums.Read(gotSums, 0); err != nil {
				t.Fatal(err)
			}
			for k, g := range f.refChunks(f.slices) {
				got := Fp4SliceOfMont(gotSums[k*cw : (k+1)*cw])
				for i := range g {
					if got[i] != g[i] {
						t.Fatalf("chunk %d: G%d[%d] = %v, want %v", k, i>>c.lSkip, i&(1<<c.lSkip-1), got[i], g[i])
					}
				}
			}
			got := readFp4(t, out)
			want := f.refUni(f.slices)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%c[%d] = %v, want %v", "ABC"[i>>c.lSkip], i&(1<<c.lSkip-1), got[i], want[i])
				}
			}
		})
	}
}

// TestStackedUniShapes runs sr_uni_chunks with GPU-like group shapes on the host device (256
// threads: 16 lanes per thread, or fewer) and sr_uni_weigh with several groups of several
// threads per z, against the launchers' result.
func TestStackedUniShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	lSkip := 4
	n := 1 << lSkip
	f := newStackedFixture(r, lSkip, 9, 2, []int{9, 8, 5, 5, 2, 0})
	w, chunks, err := PackStackedSlices(f.slices, lSkip)
	if err != nil {
		t.Fatal(err)
	}
	qa, ea := upload(t, f.q), uploadFp4(t, f.etab)
	sa, _ := gpu.UploadArray(testDev, "slices", w)
	defer sa.Free()
	want := f.refUni(f.slices)
	width := StackedUniWidth(lSkip)
	sums, err := gpu.AllocArray[uint32](testDev, "chunk sums", chunks*StackedChunkWidth(lSkip))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Free()
	shapes := []struct{ groups, tpg, wGroups, wTpg int }{{1, 1, 1, n}, {3, 1, 2, 2 * n}, {2, 16, 3, n}, {5, 4, 1, 4 * n}, {1, 2, 5, 2 * n}}
	for _, sh := range shapes {
		partials := allocFp4(t, sh.wGroups*width/4)
		out := allocFp4(t, 3<<lSkip)
		b := testDev.Batch()
		b.Dispatch("sr_uni_chunks", gpu.D1(uint32(sh.groups)), gpu.D1(uint32(sh.tpg)), []gpu.Arg{gpu.Buf(qa.Buffer), gpu.Buf(sa.Buffer),
			gpu.Buf(ea.Buffer), gpu.Buf(sums.Buffer),
			gpu.U32(0, uint32(len(f.slices)), 0, uint32(chunks), uint32(lSkip), uint32(StackedChunkLog(lSkip)))}, uint32(32*16*sh.tpg))
		b.Dispatch("sr_uni_weigh", gpu.D1(uint32(sh.wGroups)), gpu.D1(uint32(sh.wTpg)), []gpu.Arg{gpu.Buf(sums.Buffer), gpu.Buf(sa.Buffer),
			gpu.Buf(partials.Buffer), gpu.U32(0, uint32(len(f.slices)), 0, uint32(chunks), uint32(lSkip), 0)}, uint32(48*sh.wTpg))
		if err := EncodeSumRows(b, testDev, fp4Words(partials), fp4Words(out), sh.wGroups, width); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := readFp4(t, out)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: entry %d = %v, want %v", sh, i, got[i], want[i])
			}
		}
	}
}

// hornerIDFT is cpuref's q(u; x): the IDFT coefficients of the block, evaluated at u.
func hornerIDFT(t *testing.T, block []field.Fp, lSkip int, u field.Fp4) field.Fp4 {
	c := append([]field.Fp(nil), block...)
	if err := cpuref.IDFTBlocks(c, lSkip); err != nil {
		t.Fatal(err)
	}
	var acc field.Fp4
	for i := len(c) - 1; i >= 0; i-- {
		acc = acc.Mul(u).AddBase(c[i])
	}
	return acc
}

func TestLagrangeWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for lSkip := range 6 {
		n := 1 << lSkip
		for _, u := range []field.Fp4{fieldrand.Fp4(r), {}, field.Fp4One, field.Lift(field.TwoAdicGenerator(lSkip))} {
			v := fieldrand.Fps(r, n)
			lag := LagrangeWeights(lSkip, u)
			var got field.Fp4
			for z := range n {
				got = got.Add(lag[z].MulBase(v[z]))
			}
			if want := hornerIDFT(t, v, lSkip, u); got != want {
				t.Fatalf("l_skip %d, u %v: Σ L_z·v_z = %v, Horner of the IDFT = %v", lSkip, u, got, want)
			}
		}
	}
}

// TestStackedBindQ: sr_bind_q against the Horner of each block's IDFT, on the host device and on
// a host device posing as a GPU, with values at 0 and p − 1 among the random ones.
func TestStackedBindQ(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	gpuDev, _ := openLimited(t, nil)
	for _, c := range []struct{ lSkip, entries, off int }{{0, 5, 0}, {2, 33, 3}, {4, 100, 0}, {4, 1, 7}, {5, 40, 1}, {3, 1 << 12, 0}, {4, 1 << 10, 2}} {
		for _, dev := range []*gpu.Device{testDev, gpuDev} {
			n := 1 << c.lSkip
			q := fieldrand.Fps(r, c.entries*n)
			for i := 0; i < len(q); i += 7 {
				q[i] = field.Fp(field.P - 1)
			}
			q[0] = 0
			u := fieldrand.Fp4(r)
			prev := randFp4s(r, c.off+c.entries+2)
			out := uploadOn(t, dev, Mont4Slice(prev))
			b := dev.Batch()
			if err := EncodeStackedBindQ(b, dev, uploadMontOn(t, dev, q), uploadOn(t, dev, Mont4Slice(LagrangeWeights(c.lSkip, u))), out, c.entries, c.lSkip, c.off); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			got := readFp4(t, out)
			for i := range prev {
				want := prev[i]
				if e := i - c.off; e >= 0 && e < c.entries {
					want = hornerIDFT(t, q[e*n:(e+1)*n], c.lSkip, u)
				}
				if got[i] != want {
					t.Fatalf("%+v (GPU path %v): entry %d = %v, want %v", c, dev == gpuDev, i, got[i], want)
				}
			}
		}
	}
}

// TestStackedBindW: sr_bind_w against the formula, on the host device and on a host device
// posing as a GPU (an entry a work item).
func TestStackedBindW(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	gpuDev, _ := openLimited(t, nil)
	for _, c := range []struct {
		lSkip int
		nns   []int
	}{{4, []int{9, 7, 7, 0, 0, 0}}, {2, []int{0}}, {0, []int{12, 3, 1}}, {5, []int{6, 2}}} {
		for _, dev := range []*gpu.Device{testDev, gpuDev} {
			f := newStackedFixture(r, c.lSkip, 12, 1, c.nns)
			weights := randFp4s(r, 2*len(f.slices))
			weights[1] = field.Fp4{} // β = 0: no rotation term
			w, chunks, err := PackStackedSlices(f.slices, c.lSkip)
			if err != nil {
				t.Fatal(err)
			}
			// A leading dummy slice makes the dispatch's First non-zero.
			dummy, _, _ := PackStackedSlices([]StackedSlice{{}}, c.lSkip)
			sa, err := gpu.UploadArray(dev, "slices", append(dummy, w...))
			if err != nil {
				t.Fatal(err)
			}
			total := 3
			for _, s := range f.slices {
				total += 1 << s.NN
			}
			prev := randFp4s(r, total+2)
			out := uploadOn(t, dev, Mont4Slice(prev))
			b := dev.Batch()
			if err := EncodeStackedBindW(b, dev, SliceRange{Slices: sa, First: 1, Count: len(f.slices), Chunks: chunks}, uploadOn(t, dev, Mont4Slice(weights)), uploadOn(t, dev, Mont4Slice(f.etab)), out, c.lSkip); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			sa.Free()
			want := append([]field.Fp4(nil), prev...)
			for i, s := range f.slices {
				for xl := 0; xl < 1<<s.NN; xl++ {
					e0, e1 := f.etab[s.EOff+xl], f.etab[s.EOff+(xl-1)&(1<<s.NN-1)]
					want[s.WStart+xl] = weights[2*i].Mul(e0).Add(weights[2*i+1].Mul(e1))
				}
			}
			got := readFp4(t, out)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%+v (GPU path %v): entry %d = %v, want %v", c, dev == gpuDev, i, got[i], want[i])
				}
			}
		}
	}
}

func TestPackStackedSlicesRejects(t *testing.T) {
	for _, s := range []StackedSlice{{NN: -1}, {QStart: -1}, {NN: 27}} {
		if _, _, err := PackStackedSlices([]StackedSlice{s}, 4); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	if _, _, err := PackStackedSlices(nil, 6); err == nil {
		t.Error("l_skip 6: no error")
	}
}

// TestSetStackedSliceWeights: descriptors packed without weights and given them afterwards (as
// the device stacking prover does once λ is known) equal descriptors packed with them; a zero
// rotation weight clears the rotation flag a previous weight set.
func TestSetStackedSliceWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	f := newStackedFixture(r, 4, 6, 3, []int{5, 5, 3, 0, 2})
	f.slices[1].BW, f.slices[2].BW = field.Fp4{}, fieldrand.Fp4(r) // one without a rotation, one with
	want, wantChunks, err := PackStackedSlices(f.slices, f.lSkip)
	if err != nil {
		t.Fatal(err)
	}
	bare := append([]StackedSlice(nil), f.slices...)
	for i := range bare {
		bare[i].A, bare[i].BW = field.Fp4{}, fieldrand.Fp4(r) // a stale weight, overwritten below
	}
	got, chunks, err := PackStackedSlices(bare, f.lSkip)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range f.slices {
		SetStackedSliceWeights(got, i, s.A, s.BW)
	}
	if chunks != wantChunks || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("descriptors with weights set afterwards differ from packed ones (%d / %d chunks)", chunks, wantChunks)
	}
}

// TestStackedSliceWeights: sr_slice_weights against the packed descriptors of the same slices
// with their weights λ^(2k), λ^(2k+1) computed in Go (stark.StackingBatch's definition), for
// claim indices 0, 1, large and random, rotation flags across word boundaries, λ random and with
// coordinates 0 and p − 1; short slices keep their words.
func TestStackedSliceWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	const pm1 = field.Fp(2013265920)
	for _, lambda := range []field.Fp4{fieldrand.Fp4(r), {pm1, 0, pm1, 1}, {0, 0, 0, pm1}} {
		var slices []StackedSlice
		var rot []bool
		for i := range 200 {
			s := StackedSlice{NN: i % 4, Claim: i, Short: i%11 == 5}
			switch {
			case i == 7:
				s.Claim = 1<<27 + 3
			case i%5 == 4:
				s.Claim = r.IntN(1 << 20)
			}
			if s.Short { // as the device prover packs them: its own words, never rewritten here
				s.NN, s.A, s.BW = 0, fieldrand.Fp4(r), fieldrand.Fp4(r)
			}
			slices = append(slices, s)
			rot = append(rot, r.IntN(2) == 0)
		}
		words, _, err := PackStackedSlices(slices, 4)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]uint32(nil), words...)
		bits := make([]uint32, (len(slices)+31)/32)
		for i, s := range slices {
			if rot[i] {
				bits[i/32] |= 1 << (i % 32)
			}
			if s.Short {
				continue
			}
			a := lambda.Exp(2 * uint64(s.Claim))
			var bw field.Fp4
			if rot[i] {
				bw = a.Mul(lambda)
			}
			SetStackedSliceWeights(want, i, a, bw)
			want[srSliceWords*i+srRot] = 0
			if rot[i] {
				want[srSliceWords*i+srRot] = 1
			}
		}
		sa, err := gpu.UploadArray(testDev, "slices", words)
		if err != nil {
			t.Fatal(err)
		}
		ba, err := gpu.UploadArray(testDev, "rotation flags", bits)
		if err != nil {
			t.Fatal(err)
		}
		b := testDev.Batch()
		if err := EncodeStackedSliceWeights(b, testDev, sa, len(slices), lambda, ba); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got := make([]uint32, len(words))
		if err := sa.Read(got, 0); err != nil {
			t.Fatal(err)
		}
		sa.Free()
		ba.Free()
		for i := range slices {
			d := srSliceWords * i
			if fmt.Sprint(got[d:d+srSliceWords]) != fmt.Sprint(want[d:d+srSliceWords]) {
				t.Fatalf("λ %v, slice %d (%+v, rotation %v): got %v, want %v", lambda, i, slices[i], rot[i], got[d:d+srSliceWords], want[d:d+srSliceWords])
			}
		}
	}
}

// TestStackedBindWeights: sr_bind_weights against the Go formula on a descriptor list with short
// slices (left as they were), from an offset in the scalars' buffer.
func TestStackedBindWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	lSkip := 3
	var slices []StackedSlice
	for i := range 300 {
		s := StackedSlice{NN: i % 5, A: fieldrand.Fp4(r), Short: i%7 == 3}
		if i%3 != 0 {
			s.BW = fieldrand.Fp4(r)
		}
		if s.Short {
			s.NN, s.A, s.BW = 0, field.Fp4{}, field.Fp4{}
		}
		slices = append(slices, s)
	}
	words, _, err := PackStackedSlices(slices, lSkip)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := gpu.UploadArray(testDev, "slices", words)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Free()
	uni := randFp4s(r, 5) // scalars at offset 2
	ua := uploadFp4(t, uni)
	before := randFp4s(r, 2*len(slices))
	wa := uploadFp4(t, before)
	b := testDev.Batch()
	if err := EncodeStackedBindWeights(b, testDev, sa, len(slices), ua, 2, wa); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got := readFp4(t, wa)
	a0, bmc, c0 := uni[2], uni[3], uni[4]
	for i, s := range slices {
		alpha, beta := s.A.Mul(a0).Add(s.BW.Mul(bmc)), s.BW.Mul(c0)
		if s.Short {
			alpha, beta = before[2*i], before[2*i+1]
		}
		if got[2*i] != alpha || got[2*i+1] != beta {
			t.Fatalf("slice %d (short %v): (%v, %v), want (%v, %v)", i, s.Short, got[2*i], got[2*i+1], alpha, beta)
		}
	}
	if err := EncodeStackedBindWeights(testDev.Batch(), testDev, sa, len(slices), ua, 3, wa); err == nil {
		t.Fatal("scalars past the buffer's end accepted")
	}
}
