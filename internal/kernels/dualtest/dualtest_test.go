package dualtest

import (
	"fmt"
	"math/bits"
	"os"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

var dev *gpu.Device

func TestMain(m *testing.M) {
	d, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		panic(err)
	}
	dev = d
	code := m.Run()
	d.Close()
	os.Exit(code)
}

// sizes are the awkward sizes every operation is tried at: as a column height (the powers of two
// are valid, the others must be rejected by both sides) and as a count of columns or states.
var sizes = []int{1, 9, 1001, 1024, 1025, 1 << 16}

// log2 returns log2(n) for a power of two, else a value that makes callers fall back to a
// small valid parameter (the operation then fails on both sides for the size itself).
func log2(n int) int {
	if n <= 0 || n&(n-1) != 0 {
		return 0
	}
	return bits.TrailingZeros(uint(n))
}

// shapes are (height, width) pairs: every size as a height with 1 and 9 columns, and the
// awkward sizes as widths of small columns (total work stays small).
func shapes() [][2]int {
	var out [][2]int
	for _, h := range sizes {
		out = append(out, [2]int{h, 1}, [2]int{h, 9})
	}
	return append(out, [2]int{16, 1001}, [2]int{8, 1025}, [2]int{1024, 1024})
}

// onDevice uploads in (canonical) in Montgomery form, runs f on the array and reads it back.
func onDevice(in []field.Fp, f func(a *gpu.Array[kernels.Mont]) error) ([]field.Fp, error) {
	a, err := kernels.UploadMont(dev, "dualtest input", in)
	if err != nil {
		return nil, err
	}
	defer a.Free()
	if err := f(a); err != nil {
		return nil, err
	}
	return kernels.ReadCanonical(a)
}

func TestDFTAndIDFT(t *testing.T) {
	ntt := kernels.NewNTT(dev)
	defer ntt.Close()
	for i, s := range shapes() {
		h, w := s[0], s[1]
		for _, inverse := range []bool{false, true} {
			Check(t, Case[field.Fp]{
				Name:   fmt.Sprintf("%dx%d/inverse=%v", h, w, inverse),
				Input:  Random(uint64(i), h*w),
				Layout: ColumnMajor(h),
				Device: func(in []field.Fp) ([]field.Fp, error) {
					return onDevice(in, func(a *gpu.Array[kernels.Mont]) error { return ntt.DFTColumns(a, h, w, inverse) })
				},
				Ref: func(in []field.Fp) ([]field.Fp, error) {
					if inverse {
						return in, cpuref.IDFTColumns(in, h)
					}
					return in, cpuref.DFTColumns(in, h)
				},
			})
		}
	}
}

func TestRSEncode(t *testing.T) {
	ntt := kernels.NewNTT(dev)
	defer ntt.Close()
	const logBlowup = 1
	for i, s := range shapes() {
		h, w := s[0], s[1]
		lSkip := min(3, log2(h))
		Check(t, Case[field.Fp]{
			Name:   fmt.Sprintf("%dx%d/lskip=%d", h, w, lSkip),
			Input:  Random(uint64(100+i), h*w),
			Layout: ColumnMajor(h << logBlowup),
			Device: func(in []field.Fp) ([]field.Fp, error) {
				q, err := gpu.UploadArray(dev, "dualtest rs input", in) // canonical: the launcher converts
				if err != nil {
					return nil, err
				}
				defer q.Free()
				out, err := ntt.RSEncodeMatrix("dualtest codeword", gpu.View[kernels.Mont](q), h, w, lSkip, logBlowup, true)
				if err != nil {
					return nil, err
				}
				defer out.Free()
				return kernels.ReadCanonical(out)
			},
			Ref: func(in []field.Fp) ([]field.Fp, error) {
				m, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, air.Matrix{Values: in, Width: w, Height: h})
				return m.Values, err
			},
		})
	}
}

func TestPoseidon2Permute(t *testing.T) {
	p2, err := kernels.NewPoseidon2(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	for i, n := range sizes {
		Check(t, Case[field.Fp]{
			Name:   fmt.Sprintf("%d states", n),
			Input:  Random(uint64(200+i), poseidon2.Width*n),
			Layout: RowMajor(poseidon2.Width),
			Device: func(in []field.Fp) ([]field.Fp, error) {
				return onDevice(in, func(a *gpu.Array[kernels.Mont]) error { return p2.Permute(a, n) })
			},
			Ref: func(in []field.Fp) ([]field.Fp, error) {
				for s := 0; s < n; s++ {
					poseidon2.Permute((*[poseidon2.Width]field.Fp)(in[s*poseidon2.Width:]))
				}
				return in, nil
			},
		})
	}
}

// TestMerkle compares the query-group digests (layer 0) followed by the root.
func TestMerkle(t *testing.T) {
	p2, err := kernels.NewPoseidon2(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	for i, s := range shapes() {
		h, w := s[0], s[1]
		for _, k := range []int{0, 2} {
			if k > log2(h) && log2(h) > 0 || k > 0 && h == 1 {
				continue
			}
			Check(t, Case[poseidon2.Digest]{
				Name:  fmt.Sprintf("%dx%d/rows-per-query=%d", h, w, 1<<k),
				Input: Random(uint64(300+i), h*w),
				Device: func(in []field.Fp) ([]poseidon2.Digest, error) {
					a, err := kernels.UploadMont(dev, "dualtest matrix", in)
					if err != nil {
						return nil, err
					}
					defer a.Free()
					tree, err := p2.MerkleTree(a, h, w, k)
					if err != nil {
						return nil, err
					}
					defer tree.Free()
					l0, err := tree.Layer(0)
					if err != nil {
						return nil, err
					}
					root, err := tree.Root()
					return append(l0, root), err
				},
				Ref: func(in []field.Fp) ([]poseidon2.Digest, error) {
					tree, err := cpuref.NewMerkleTree(air.Matrix{Values: in, Width: w, Height: h}, 1<<k)
					if err != nil {
						return nil, err
					}
					return append(append([]poseidon2.Digest(nil), tree.DigestLayers[0]...), tree.Root()), nil
				},
			})
		}
	}
}

// TestHelperReportsMismatch checks the helper itself: a planted difference is found at the
// right index, row and column, and one-sided failures are errors.
func TestHelperReportsMismatch(t *testing.T) {
	in := Random(7, 12)
	for i, e := range Edges {
		if in[i] != e {
			t.Fatalf("input[%d] = %d, want edge value %d", i, in[i], e)
		}
	}
	id := func(in []field.Fp) ([]field.Fp, error) { return in, nil }
	planted := func(in []field.Fp) ([]field.Fp, error) { in[7] = in[7].Add(1); return in, nil }
	m, _, err := Case[field.Fp]{Input: in, Layout: ColumnMajor(4), Device: planted, Ref: id}.Run()
	if err != nil || m == nil || m.Index != 7 || m.Row != 3 || m.Col != 1 {
		t.Fatalf("column-major: mismatch %v, error %v; want index 7 (row 3, column 1)", m, err)
	}
	m, _, _ = Case[field.Fp]{Input: in, Layout: RowMajor(4), Device: planted, Ref: id}.Run()
	if m == nil || m.Row != 1 || m.Col != 3 {
		t.Fatalf("row-major: mismatch %v; want row 1, column 3", m)
	}
	short := func(in []field.Fp) ([]field.Fp, error) { return in[:5], nil }
	if m, _, _ = (Case[field.Fp]{Input: in, Device: short, Ref: id}).Run(); m == nil || m.GotLen != 5 {
		t.Fatalf("length mismatch not reported: %v", m)
	}
	fail := func([]field.Fp) ([]field.Fp, error) { return nil, fmt.Errorf("rejected") }
	if _, _, err := (Case[field.Fp]{Input: in, Device: fail, Ref: id}).Run(); err == nil {
		t.Fatal("a device-only failure is not an error")
	}
	if m, rejected, err := (Case[field.Fp]{Input: in, Device: fail, Ref: fail}).Run(); m != nil || !rejected || err != nil {
		t.Fatalf("both failing: %v %v %v; want rejected", m, rejected, err)
	}
}
