package selftest

import (
	"fmt"
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// KernelChecks returns the device checks: every kernel family of internal/kernels run on dev
// and compared with cpuref / internal/poseidon2 on random inputs mixed with the edge values 0,
// 1 and p−1, at awkward sizes and one large one. Names are "kernels/<what> [<device kind>]".
// Each check syncs once per operation and frees what it allocates.
func KernelChecks(dev *gpu.Device) []Check {
	tag := " [" + string(dev.Kind()) + "]"
	var out []Check
	add := func(name string, run func() error) { out = append(out, Check{Name: "kernels/" + name + tag, Run: run}) }
	ntt := kernels.NewNTT(dev)
	for _, c := range []struct{ logH, width int }{{0, 9}, {4, 9}, {10, 3}, {13, 2}, {16, 2}, {20, 1}} {
		add(fmt.Sprintf("ntt-dft-2^%dx%d", c.logH, c.width), func() error { return checkDFT(dev, ntt, c.logH, c.width, false) })
	}
	for _, c := range []struct{ logH, width int }{{3, 5}, {12, 3}, {20, 1}} {
		add(fmt.Sprintf("ntt-idft-2^%dx%d", c.logH, c.width), func() error { return checkDFT(dev, ntt, c.logH, c.width, true) })
	}
	for _, c := range []struct{ l, blocks int }{{3, 9}, {5, 1025}} {
		add(fmt.Sprintf("ntt-idft-blocks-2^%dx%d", c.l, c.blocks), func() error { return checkBlocks(dev, ntt, c.l, c.blocks) })
	}
	for _, c := range []struct{ logM, width, lSkip, logBlowup int }{{4, 9, 4, 1}, {12, 5, 5, 2}} {
		add(fmt.Sprintf("ntt-rs-encode-2^%dx%d-lskip%d-blowup%d", c.logM, c.width, c.lSkip, c.logBlowup), func() error {
			return checkRS(dev, ntt, c.logM, c.width, c.lSkip, c.logBlowup)
		})
	}
	for _, n := range []int{1, 1025, 1 << 16} {
		add(fmt.Sprintf("poseidon2-permute-%d", n), func() error { return checkPermute(dev, n) })
	}
	for _, c := range []struct{ logH, width, k int }{{0, 1, 0}, {5, 9, 3}, {10, 42, 4}, {16, 42, 4}} {
		add(fmt.Sprintf("merkle-2^%dx%d-k%d", c.logH, c.width, c.k), func() error { return checkMerkle(dev, c.logH, c.width, c.k) })
	}
	return append(out, sumcheckChecks(dev, tag)...)
}

func sameFp(what string, got, want []field.Fp) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %d, cpuref says %d", what, i, got[i], want[i])
		}
	}
	return nil
}

// oneSync runs f and checks that it synchronised the device exactly once.
func oneSync(dev *gpu.Device, f func() error) error {
	before := dev.Stats().Syncs
	if err := f(); err != nil {
		return err
	}
	if n := dev.Stats().Syncs - before; n != 1 {
		return fmt.Errorf("%d device syncs, want 1", n)
	}
	return nil
}

func checkDFT(dev *gpu.Device, ntt *kernels.NTT, logH, width int, inverse bool) error {
	r := rand.New(rand.NewPCG(uint64(logH), uint64(width)))
	h := 1 << logH
	v := fieldrand.Fps(r, h*width)
	a, err := kernels.UploadMont(dev, "selftest ntt", v)
	if err != nil {
		return err
	}
	defer a.Free()
	if err := oneSync(dev, func() error { return ntt.DFTColumns(a, h, width, inverse) }); err != nil {
		return err
	}
	got, err := kernels.ReadCanonical(a)
	if err != nil {
		return err
	}
	if inverse {
		err = cpuref.IDFTColumns(v, h)
	} else {
		err = cpuref.DFTColumns(v, h)
	}
	if err != nil {
		return err
	}
	return sameFp("columns", got, v)
}

func checkBlocks(dev *gpu.Device, ntt *kernels.NTT, l, blocks int) error {
	r := rand.New(rand.NewPCG(uint64(l), uint64(blocks)))
	v := fieldrand.Fps(r, blocks<<l)
	a, err := kernels.UploadMont(dev, "selftest blocks", v)
	if err != nil {
		return err
	}
	defer a.Free()
	if err := oneSync(dev, func() error { return ntt.IDFTBlocks(a, len(v), l) }); err != nil {
		return err
	}
	got, err := kernels.ReadCanonical(a)
	if err != nil {
		return err
	}
	if err := cpuref.IDFTBlocks(v, l); err != nil {
		return err
	}
	return sameFp("blocks", got, v)
}

func checkRS(dev *gpu.Device, ntt *kernels.NTT, logM, width, lSkip, logBlowup int) error {
	r := rand.New(rand.NewPCG(uint64(logM), uint64(width)))
	q := air.NewMatrix(width, 1<<logM)
	copy(q.Values, fieldrand.Fps(r, len(q.Values)))
	a, err := kernels.UploadMont(dev, "selftest stacked matrix", q.Values)
	if err != nil {
		return err
	}
	defer a.Free()
	var cw *gpu.Array[kernels.Mont]
	if err := oneSync(dev, func() (err error) {
		cw, err = ntt.RSEncodeMatrix("selftest codeword", a, q.Height, width, lSkip, logBlowup, false)
		return err
	}); err != nil {
		return err
	}
	defer cw.Free()
	got, err := kernels.ReadCanonical(cw)
	if err != nil {
		return err
	}
	want, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, q)
	if err != nil {
		return err
	}
	return sameFp("codeword", got, want.Values)
}

func checkPermute(dev *gpu.Device, n int) error {
	r := rand.New(rand.NewPCG(uint64(n), 16))
	v := fieldrand.Fps(r, 16*n)
	for i := 0; i < 16 && n >= 1; i++ {
		v[i] = field.Fp(field.P - 1)
	}
	h, err := kernels.NewPoseidon2(dev)
	if err != nil {
		return err
	}
	defer h.Close()
	a, err := kernels.UploadMont(dev, "selftest states", v)
	if err != nil {
		return err
	}
	defer a.Free()
	if err := oneSync(dev, func() error { return h.Permute(a, n) }); err != nil {
		return err
	}
	got, err := kernels.ReadCanonical(a)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		var s [16]field.Fp
		copy(s[:], v[16*i:])
		poseidon2.Permute(&s)
		copy(v[16*i:], s[:])
	}
	return sameFp("states", got, v)
}

func checkMerkle(dev *gpu.Device, logH, width, k int) error {
	r := rand.New(rand.NewPCG(uint64(logH), uint64(width*16+k)))
	m := air.NewMatrix(width, 1<<logH)
	copy(m.Values, fieldrand.Fps(r, len(m.Values)))
	want, err := cpuref.NewMerkleTree(m, 1<<k)
	if err != nil {
		return err
	}
	h, err := kernels.NewPoseidon2(dev)
	if err != nil {
		return err
	}
	defer h.Close()
	a, err := kernels.UploadMont(dev, "selftest matrix", m.Values)
	if err != nil {
		return err
	}
	defer a.Free()
	var tree *kernels.MerkleTree
	if err := oneSync(dev, func() (err error) {
		tree, err = h.MerkleTree(a, m.Height, width, k)
		return err
	}); err != nil {
		return err
	}
	defer tree.Free()
	root, err := tree.Root()
	if err != nil {
		return err
	}
	if root != want.Root() {
		return fmt.Errorf("root %v, cpuref says %v", root, want.Root())
	}
	y := tree.QueryStride() / 3
	o, err := tree.Open(y)
	if err != nil {
		return err
	}
	if err := cpuref.VerifyOpening(root, 1<<k, width, &cpuref.MerkleOpening{Index: o.Index, Rows: o.Rows, Proof: o.Proof}); err != nil {
		return err
	}
	ys := []int{0, y, tree.QueryStride() - 1, y}
	bo, err := tree.OpenBatch(ys)
	if err != nil {
		return err
	}
	for q, y := range ys {
		wo, err := want.Open(y)
		if err != nil {
			return err
		}
		if fmt.Sprint(bo.Rows[q], bo.Paths[q]) != fmt.Sprint(wo.Rows, wo.Proof) {
			return fmt.Errorf("OpenBatch: query %d (index %d) differs from cpuref", q, y)
		}
	}
	return nil
}
