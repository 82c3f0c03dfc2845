package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// zcEdgeFp draws 0, 1, p−1 or a random element.
func zcEdgeFp(r *rand.Rand) field.Fp {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return field.One
	case 2:
		return field.Fp(field.P - 1)
	}
	return fieldrand.Fp(r)
}

// TestZcValuesMatchesGo: zc_uni_values' table equals the plain-Go sums (Σ_k c_k·ω_M^{ik}, the
// rotation at i + M/N plus δ·L_{N−1}(ω_M^i), L by the product formula; the selectors copied) word
// for word, and leaves every other word alone: every N ≤ 32 with M from N to 2^4·N and larger,
// odd column counts, slices not starting at block 0 and ending before or at the last block,
// slot maps with ZC_NONE on either side, on the host device and on the host posing as GPUs with
// lower group and group-memory limits (other chunk shapes, several threads per group).
func TestZcValuesMatchesGo(t *testing.T) {
	limited, _ := openLimitedWith(t, &limitedBackend{maxThreads: map[string]int{"zc_uni_values": 96}, tgMemory: 1024})
	gpuLike, _ := openLimitedWith(t, &limitedBackend{})
	devs := []struct {
		name string
		dev  *gpu.Device
	}{{"host", testDev}, {"gpu96", limited}, {"gpu", gpuLike}}
	r := rand.New(rand.NewPCG(91, 92))
	type cfg struct{ logN, logM, ncols, blocks, x0, sb int }
	cfgs := []cfg{
		{0, 0, 3, 4, 0, 4}, {0, 2, 5, 4, 1, 3}, {1, 1, 1, 2, 1, 1}, {1, 3, 7, 8, 2, 4},
		{2, 3, 13, 8, 0, 8}, {2, 4, 9, 4, 2, 2}, {2, 9, 3, 2, 0, 2}, {3, 3, 17, 4, 3, 1},
		{3, 5, 5, 4, 1, 3}, {4, 4, 11, 2, 0, 2}, {4, 6, 37, 8, 5, 3}, {4, 8, 7, 2, 1, 1},
		{5, 5, 3, 4, 0, 4}, {5, 7, 9, 4, 2, 2}, {5, 10, 1, 1, 0, 1},
	}
	for _, d := range devs {
		for _, c := range cfgs {
			t.Run(fmt.Sprintf("%s/n%d/m%d/c%d/x%d+%d", d.name, c.logN, c.logM, c.ncols, c.x0, c.sb), func(t *testing.T) {
				testZcValues(t, d.dev, r, c.logN, c.logM, c.ncols, c.blocks, c.x0, c.sb)
			})
		}
	}
}

func testZcValues(t *testing.T, dev *gpu.Device, r *rand.Rand, logN, logM, ncols, blocks, x0, sb int) {
	n, m := 1<<logN, 1<<logM
	cosets := m / n
	dom, err := NewZcDomain(dev, logN, logM)
	if err != nil {
		t.Fatal(err)
	}
	defer dom.Free()
	coefs := make([]field.Fp, sb*n*ncols)
	for i := range coefs {
		coefs[i] = zcEdgeFp(r)
	}
	deltas := make([]field.Fp, sb*ncols)
	for i := range deltas {
		deltas[i] = zcEdgeFp(r)
	}
	sel := make([]field.Fp, 2*m)
	for i := range sel {
		sel[i] = zcEdgeFp(r)
	}
	// Slots: a random permutation of the 2·ncols + 3 slot numbers, each column's pair (local,
	// rotated) and each selector ZC_NONE with probability 1/3 (the pair: both, either or none).
	nslots := 2*ncols + 3
	perm := r.Perm(nslots)
	slot := func(k int) uint32 {
		if r.IntN(3) == 0 {
			return zcNone
		}
		return uint32(perm[k])
	}
	srcmap := make([]uint32, 2*ncols)
	for k := range srcmap {
		srcmap[k] = slot(k)
	}
	var selSlots [3]uint32
	for k := range selSlots {
		selSlots[k] = slot(2*ncols + k)
	}
	width := sb*m + 5 // room past the points: must stay untouched
	const sentinel = 0xa5a5a5a5
	init := make([]uint32, nslots*width)
	for i := range init {
		init[i] = sentinel
	}

	up := func(name string, v []uint32) *gpu.Array[uint32] {
		a, err := gpu.UploadArray(dev, name, v)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Free)
		return a
	}
	ca, da, sa := up("coefs", montWords(MontSlice(coefs))), up("deltas", montWords(MontSlice(deltas))), up("srcmap", srcmap)
	sela, vals := up("sel", montWords(MontSlice(sel))), up("vals", init)
	vp := planZcValues(dev, logN, logM)
	if lim := dev.Limits().MaxThreadgroupMemory; lim > 0 && int(vp.shBytes) > lim {
		t.Fatalf("plan needs %d bytes of group memory, the device has %d", vp.shBytes, lim)
	}
	b := dev.Batch()
	encodeZcValues(b, dev, vp, ca.Buffer, da.Buffer, sa.Buffer, dom.Tw.Buffer, dom.LRow.Buffer, sela.Buffer, vals.Buffer,
		zcValuesParams{logN: uint32(logN), logM: uint32(logM), blocks: uint32(blocks), x0: uint32(x0),
			sliceBlocks: uint32(sb), ncols: uint32(ncols), width: uint32(width), selFirst: selSlots[0], selLast: selSlots[1],
			selTrans: selSlots[2]})
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := vals.ReadAll()
	if err != nil {
		t.Fatal(err)
	}

	want := append([]uint32(nil), init...)
	pw := field.Powers(field.TwoAdicGenerator(logM), m)
	lrow := make([]field.Fp, m)
	for i := range lrow {
		lrow[i] = lagrangeAt(logN, pw[i])[n-1]
	}
	at := func(xl, col, i int) field.Fp {
		var s field.Fp
		for k := 0; k < n; k++ {
			s = s.Add(coefs[(xl*n+k)*ncols+col].Mul(pw[(i*k)%m]))
		}
		return s
	}
	for xl := 0; xl < sb; xl++ {
		x := x0 + xl
		for q := 0; q < m; q++ {
			pp := xl*m + q
			i := q/n + cosets*(q%n)
			for col := 0; col < ncols; col++ {
				if s := srcmap[2*col]; s != zcNone {
					want[int(s)*width+pp] = uint32(MontOf(at(xl, col, i)))
				}
				if s := srcmap[2*col+1]; s != zcNone {
					want[int(s)*width+pp] = uint32(MontOf(at(xl, col, (i+cosets)%m).Add(deltas[xl*ncols+col].Mul(lrow[i]))))
				}
			}
			var first, last field.Fp
			if x == 0 {
				first = sel[i]
			}
			if x == blocks-1 {
				last = sel[m+i]
			}
			for k, v := range []field.Fp{first, last, field.One.Sub(last)} {
				if s := selSlots[k]; s != zcNone {
					want[int(s)*width+pp] = uint32(MontOf(v))
				}
			}
		}
	}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("plan %+v: slot %d point %d = %#x, want %#x (%d of %d slots, %d points)", vp, k/width, k%width,
				got[k], want[k], nslots, width, sb*m)
		}
	}
}
