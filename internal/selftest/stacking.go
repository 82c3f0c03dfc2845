package selftest

import (
	"fmt"
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// sumcheckChecks: the shared sumcheck family (round sums, fused fold+round, fold, eq tables)
// against plain-Go formulas, at sizes that take both the block path and the pair path of the
// round kernels. Names "kernels/sumcheck-…".
func sumcheckChecks(dev *gpu.Device, tag string) []Check {
	var out []Check
	for _, c := range []struct{ cols, logRows int }{{1, 1}, {3, 2}, {5, 6}, {42, 9}, {1, 16}} {
		out = append(out, Check{Name: fmt.Sprintf("kernels/sumcheck-round-fold-%dx2^%d%s", c.cols, c.logRows, tag), Run: func() error {
			return checkSumcheck(dev, c.cols, c.logRows)
		}})
	}
	for _, k := range []int{0, 5, 14} {
		out = append(out, Check{Name: fmt.Sprintf("kernels/sumcheck-eq-expand-2^%d%s", k, tag), Run: func() error { return checkEqExpand(dev, k) }})
	}
	return out
}

func randFp4s(r *rand.Rand, n int) []field.Fp4 {
	v := make([]field.Fp4, n)
	for i := range v {
		v[i] = fieldrand.Fp4(r)
	}
	return v
}

// roundRef is the round sums of cols columns of 2^logRows rows (stride 2^logRows).
func roundRef(f, w []field.Fp4, cols, logRows int) (s1, s2 field.Fp4) {
	h := 1 << logRows
	for c := range cols {
		for y := 0; y < h/2; y++ {
			f0, f1, w0, w1 := f[c*h+2*y], f[c*h+2*y+1], w[c*h+2*y], w[c*h+2*y+1]
			s1 = s1.Add(f1.Mul(w1))
			s2 = s2.Add(f1.Double().Sub(f0).Mul(w1.Double().Sub(w0)))
		}
	}
	return s1, s2
}

func foldRef(t []field.Fp4, cols, logRows int, a field.Fp4) []field.Fp4 {
	h := 1 << logRows
	out := make([]field.Fp4, cols*h/2)
	for c := range cols {
		for y := 0; y < h/2; y++ {
			t0, t1 := t[c*h+2*y], t[c*h+2*y+1]
			out[c*h/2+y] = t0.Add(a.Mul(t1.Sub(t0)))
		}
	}
	return out
}

func checkSumcheck(dev *gpu.Device, cols, logRows int) error {
	r := rand.New(rand.NewPCG(uint64(cols), uint64(logRows)))
	n := cols << logRows
	f, w := randFp4s(r, n), randFp4s(r, n)
	var bufs []*gpu.Array[kernels.Mont4]
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	up := func(v []field.Fp4) (*gpu.Array[kernels.Mont4], error) {
		a, err := gpu.UploadArray(dev, "selftest sumcheck", kernels.Mont4Slice(v))
		if err == nil {
			bufs = append(bufs, a)
		}
		return a, err
	}
	fa, err := up(f)
	if err != nil {
		return err
	}
	wa, err := up(w)
	if err != nil {
		return err
	}
	sc, err := kernels.NewSumcheck(dev)
	if err != nil {
		return err
	}
	defer sc.Close()
	src := kernels.ProductTables{F: fa, W: wa, Cols: cols, LogRows: logRows, Stride: 1 << logRows}
	var s1, s2 field.Fp4
	if err := oneSync(dev, func() (err error) {
		if err := sc.EncodeRound(dev.Batch(), src); err != nil {
			return err
		}
		s1, s2, err = sc.ReadRound()
		return err
	}); err != nil {
		return err
	}
	if w1, w2 := roundRef(f, w, cols, logRows); s1 != w1 || s2 != w2 {
		return fmt.Errorf("round: (%v, %v), want (%v, %v)", s1, s2, w1, w2)
	}
	alpha := fieldrand.Fp4(r)
	ff, fw := foldRef(f, cols, logRows, alpha), foldRef(w, cols, logRows, alpha)
	dF, err := up(make([]field.Fp4, max(n/2, 1)))
	if err != nil {
		return err
	}
	dW, err := up(make([]field.Fp4, max(n/2, 1)))
	if err != nil {
		return err
	}
	if logRows >= 2 {
		dst := kernels.ProductTables{F: dF, W: dW, Cols: cols, LogRows: logRows - 1, Stride: 1 << (logRows - 1)}
		if err := oneSync(dev, func() (err error) {
			if err := sc.EncodeFoldRound(dev.Batch(), src, dst, alpha); err != nil {
				return err
			}
			s1, s2, err = sc.ReadRound()
			return err
		}); err != nil {
			return err
		}
		if w1, w2 := roundRef(ff, fw, cols, logRows-1); s1 != w1 || s2 != w2 {
			return fmt.Errorf("fold round: (%v, %v), want (%v, %v)", s1, s2, w1, w2)
		}
	} else {
		b := dev.Batch()
		if err := kernels.EncodeFold(b, dev, fa, 1<<logRows, dF, 1<<(logRows-1), cols, logRows-1, alpha); err != nil {
			return err
		}
		if err := kernels.EncodeFold(b, dev, wa, 1<<logRows, dW, 1<<(logRows-1), cols, logRows-1, alpha); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		a    *gpu.Array[kernels.Mont4]
		want []field.Fp4
	}{{dF, ff}, {dW, fw}} {
		v, err := x.a.ReadAll()
		if err != nil {
			return err
		}
		got := kernels.Fp4SliceOf(v)
		for i := range x.want {
			if got[i] != x.want[i] {
				return fmt.Errorf("folded table: element %d is %v, want %v", i, got[i], x.want[i])
			}
		}
	}
	return nil
}

func checkEqExpand(dev *gpu.Device, k int) error {
	r := rand.New(rand.NewPCG(uint64(k), 0xe9))
	x := randFp4s(r, k)
	lo, hi, h := kernels.EqTables(x)
	la, err := gpu.UploadArray(dev, "selftest eq lo", lo)
	if err != nil {
		return err
	}
	defer la.Free()
	ha, err := gpu.UploadArray(dev, "selftest eq hi", hi)
	if err != nil {
		return err
	}
	defer ha.Free()
	out, err := gpu.AllocArray[kernels.Mont4](dev, "selftest eq", 1<<k)
	if err != nil {
		return err
	}
	defer out.Free()
	if err := oneSync(dev, func() error {
		b := dev.Batch()
		if err := kernels.EncodeEqExpand(b, dev, la, ha, out, h, k-h, 1, false); err != nil {
			return err
		}
		return b.Wait()
	}); err != nil {
		return err
	}
	v, err := out.ReadAll()
	if err != nil {
		return err
	}
	got, want := kernels.Fp4SliceOf(v), stark.EvalsEqHypercube(x)
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("eq[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

// stackingChecks: the device's stacked opening reduction against cpuref's, every round, with the
// sync counts (one per UnivariateRound, Round and Openings, none per bind). Names
// "stark-device/stacking-…".
func stackingChecks(dev *gpu.Device, tag string) []Check {
	type trace struct{ logH, width int }
	cases := []struct {
		name    string
		preset  string
		logH    int
		commits [][]trace
	}{
		{"test-mixed-2-commits", "test", 0, [][]trace{{{10, 3}, {9, 0}, {7, 2}, {2, 4}, {1, 2}, {0, 1}}, {{8, 5}, {3, 2}, {1, 3}}}},
		{"app100-2^11-mixed", "app-100bit", 11, [][]trace{{{11, 5}, {8, 3}, {4, 2}, {3, 1}, {0, 2}}, {{10, 4}}}},
		{"app100-2^14-wide", "app-100bit", 14, [][]trace{{{14, 6}, {12, 9}, {5, 3}}}},
	}
	var out []Check
	for i, c := range cases {
		out = append(out, Check{Name: "stark-device/stacking-" + c.name + tag, Run: func() error {
			p, _, err := params.Preset(c.preset, c.logH)
			if err != nil {
				return err
			}
			r := rand.New(rand.NewPCG(uint64(i), 0x5ac))
			shapes := make([][]air.Matrix, len(c.commits))
			for k, ts := range c.commits {
				for _, t := range ts {
					shapes[k] = append(shapes[k], air.Matrix{Width: t.width, Height: 1 << t.logH, Values: fieldrand.Fps(r, t.width<<t.logH)})
				}
			}
			return checkStacking(dev, p, r, shapes)
		}})
	}
	return out
}

func checkStacking(dev *gpu.Device, p params.SystemParams, r *rand.Rand, commits [][]air.Matrix) error {
	be, err := device.New(dev, device.Options{})
	if err != nil {
		return err
	}
	defer be.Close()
	ref := cpuref.New()
	var dcs, rcs []stark.Committed
	for k := range commits {
		dts := make([]stark.Trace, len(commits[k]))
		for j := range commits[k] {
			if dts[j], err = be.LoadTrace(fmt.Sprint("selftest ", k, j), &commits[k][j]); err != nil {
				return err
			}
		}
		dc, err := be.Commit(p, dts)
		if err != nil {
			return err
		}
		rc, err := ref.Committer.Commit(p, loadAll(ref.Loader, commits[k]))
		if err != nil {
			return err
		}
		dcs, rcs = append(dcs, dc), append(rcs, rc)
	}
	pt := randFp4s(r, p.NStack+1)
	batch := &stark.StackingBatch{Lambda: randFp4s(r, 1)[0]}
	for _, c := range dcs {
		rot := make([]bool, len(c.Layout().Cols))
		for i := range rot {
			rot[i] = i%3 != 0
		}
		batch.NeedRot = append(batch.NeedRot, rot)
	}
	dsp, err := be.NewStackingProver(p, dcs, pt)
	if err != nil {
		return err
	}
	defer dsp.Release()
	rsp, err := ref.Stacking.NewStackingProver(p, rcs, pt)
	if err != nil {
		return err
	}
	defer rsp.Release()
	syncs := func(want int, what string, f func() error) error {
		before := dev.Stats().Syncs
		if err := f(); err != nil {
			return err
		}
		if n := dev.Stats().Syncs - before; n != want {
			return fmt.Errorf("%s: %d device syncs, want %d", what, n, want)
		}
		return nil
	}
	var got []field.Fp4
	if err := syncs(1, "UnivariateRound", func() (err error) { got, err = dsp.UnivariateRound(batch); return err }); err != nil {
		return err
	}
	want, err := rsp.UnivariateRound(batch)
	if err != nil {
		return err
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("UnivariateRound: %v, cpuref says %v", got, want)
	}
	u0 := fieldrand.Fp4(r)
	if err := syncs(0, "BindUnivariate", func() error { return dsp.BindUnivariate(u0) }); err != nil {
		return err
	}
	if err := rsp.BindUnivariate(u0); err != nil {
		return err
	}
	for j := 1; j <= p.NStack; j++ {
		var s1, s2 field.Fp4
		if err := syncs(1, "Round", func() (err error) { s1, s2, err = dsp.Round(); return err }); err != nil {
			return err
		}
		w1, w2, err := rsp.Round()
		if err != nil {
			return err
		}
		if s1 != w1 || s2 != w2 {
			return fmt.Errorf("round %d: (%v, %v), cpuref says (%v, %v)", j, s1, s2, w1, w2)
		}
		u := fieldrand.Fp4(r)
		if err := syncs(0, "Bind", func() error { return dsp.Bind(u) }); err != nil {
			return err
		}
		if err := rsp.Bind(u); err != nil {
			return err
		}
	}
	var gotOpen [][]field.Fp4
	if err := syncs(1, "Openings", func() (err error) { gotOpen, err = dsp.Openings(); return err }); err != nil {
		return err
	}
	wantOpen, err := rsp.Openings()
	if err != nil {
		return err
	}
	if fmt.Sprint(gotOpen) != fmt.Sprint(wantOpen) {
		return fmt.Errorf("Openings: %v, cpuref says %v", gotOpen, wantOpen)
	}
	return nil
}
