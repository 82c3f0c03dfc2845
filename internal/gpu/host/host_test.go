package host_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

var sizes = []int{1, 9, 1001, 1024, 1025, 1 << 16}

func open(t testing.TB) *gpu.Device {
	t.Helper()
	d, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// randFp returns n canonical values, the first ones 0, 1, p−1 (then 2, p−2).
func randFp(r *rand.Rand, n int) []uint32 {
	edges := []uint32{0, 1, field.P - 1, 2, field.P - 2}
	v := make([]uint32, n)
	for i := range v {
		if i < len(edges) {
			v[i] = edges[(i+r.IntN(len(edges)))%len(edges)]
		} else {
			v[i] = r.Uint32N(field.P)
		}
	}
	return v
}

func mont(x uint32) uint32   { return uint32(uint64(x) << 32 % uint64(field.P)) }
func unmont(x uint32) uint32 { return uint32(field.Fp(x).Mul(field.Fp(invR))) }

var invR = uint32(field.Fp(mont(1)).Inverse()) // 2^-32 mod p

func upload(t testing.TB, d *gpu.Device, name string, v []uint32) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.UploadArray(d, name, v)
	must(t, err)
	t.Cleanup(a.Free)
	return a
}

func alloc(t testing.TB, d *gpu.Device, name string, n int) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.AllocArray[uint32](d, name, n)
	must(t, err)
	t.Cleanup(a.Free)
	return a
}

// shape: groups of 64 threads, at most 16 groups, so large inputs exercise the grid-stride loop.
func shape(n int) (gpu.Dim3, gpu.Dim3) {
	return gpu.D1(uint32(min(16, (n+63)/64))), gpu.D1(64)
}

func read(t testing.TB, a *gpu.Array[uint32]) []uint32 {
	t.Helper()
	v, err := a.ReadAll()
	must(t, err)
	return v
}

func TestMontConversion(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range sizes {
		x := randFp(r, n)
		in := upload(t, d, "in", x)
		out := alloc(t, d, "out", n)
		g, tp := shape(n)
		must(t, d.Batch().Dispatch("fo_to_mont", g, tp, []gpu.Arg{gpu.Buf(in.Buffer), gpu.Buf(out.Buffer), gpu.U32(uint32(n))}).Wait())
		got := read(t, out)
		for i := range x {
			if got[i] != mont(x[i]) {
				t.Fatalf("n=%d: to_mont(%d) = %d, want %d", n, x[i], got[i], mont(x[i]))
			}
		}
		// back, in place
		must(t, d.Batch().Dispatch("fo_from_mont", g, tp, []gpu.Arg{gpu.Buf(out.Buffer), gpu.Buf(out.Buffer), gpu.U32(uint32(n))}).Wait())
		got = read(t, out)
		for i := range x {
			if got[i] != x[i] {
				t.Fatalf("n=%d: from_mont(to_mont(%d)) = %d", n, x[i], got[i])
			}
		}
	}
}

// binop runs a, b (canonical) through to_mont, op, from_mont in one batch.
func binop(t *testing.T, d *gpu.Device, kernel string, a, b []uint32, elemA, elemB int) []uint32 {
	n := len(a) / elemA
	ba, bb := upload(t, d, "a", a), upload(t, d, "b", b)
	out := alloc(t, d, "out", len(a))
	conv := func(k string, buf *gpu.Array[uint32], words int) (string, gpu.Dim3, gpu.Dim3, []gpu.Arg) {
		g, tp := shape(words)
		return k, g, tp, []gpu.Arg{gpu.Buf(buf.Buffer), gpu.Buf(buf.Buffer), gpu.U32(uint32(words))}
	}
	g, tp := shape(n)
	must(t, d.Batch().
		Dispatch(conv("fo_to_mont", ba, len(a))).
		Dispatch(conv("fo_to_mont", bb, len(b))).
		Dispatch(kernel, g, tp, []gpu.Arg{gpu.Buf(ba.Buffer), gpu.Buf(bb.Buffer), gpu.Buf(out.Buffer), gpu.U32(uint32(n))}).
		Dispatch(conv("fo_from_mont", out, len(a))).
		Wait())
	_ = elemB
	return read(t, out)
}

func TestFpOps(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(2, 2))
	ops := map[string]func(a, b field.Fp) field.Fp{
		"fo_add": field.Fp.Add,
		"fo_sub": field.Fp.Sub,
		"fo_mul": field.Fp.Mul,
	}
	for _, name := range []string{"fo_add", "fo_sub", "fo_mul"} {
		for _, n := range sizes {
			a, b := randFp(r, n), randFp(r, n)
			got := binop(t, d, name, a, b, 1, 1)
			for i := range a {
				if want := uint32(ops[name](field.Fp(a[i]), field.Fp(b[i]))); got[i] != want {
					t.Fatalf("%s n=%d: [%d] %d op %d = %d, want %d", name, n, i, a[i], b[i], got[i], want)
				}
			}
		}
	}
}

func TestScale(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(3, 3))
	for _, n := range sizes {
		for _, c := range []uint32{0, 1, field.P - 1, r.Uint32N(field.P)} {
			x := randFp(r, n)
			in := upload(t, d, "in", x)
			out := alloc(t, d, "out", n)
			g, tp := shape(n)
			must(t, d.Batch().
				Dispatch("fo_to_mont", g, tp, []gpu.Arg{gpu.Buf(in.Buffer), gpu.Buf(in.Buffer), gpu.U32(uint32(n))}).
				Dispatch("fo_scale", g, tp, []gpu.Arg{gpu.Buf(in.Buffer), gpu.Buf(out.Buffer), gpu.U32(uint32(n), mont(c))}).
				Dispatch("fo_from_mont", g, tp, []gpu.Arg{gpu.Buf(out.Buffer), gpu.Buf(out.Buffer), gpu.U32(uint32(n))}).
				Wait())
			got := read(t, out)
			for i := range x {
				if want := uint32(field.Fp(x[i]).Mul(field.Fp(c))); got[i] != want {
					t.Fatalf("n=%d c=%d: [%d] = %d, want %d", n, c, i, got[i], want)
				}
			}
		}
	}
}

func fp4s(v []uint32, i int) field.Fp4 {
	return field.Fp4{field.Fp(v[4*i]), field.Fp(v[4*i+1]), field.Fp(v[4*i+2]), field.Fp(v[4*i+3])}
}

func TestFp4Ops(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range sizes {
		a, b, c := randFp(r, 4*n), randFp(r, 4*n), randFp(r, n)
		// The largest operands of bb4_mul's unreduced sums: Montgomery forms p − 1 (and 0, 1 and
		// canonical p − 1 beside them), every coefficient.
		edges := []uint32{unmont(field.P - 1), unmont(field.P - 2), 0, 1, field.P - 1}
		for i := 0; i < min(4*n, 8*len(edges)); i++ {
			a[i], b[i] = edges[(i/4)%len(edges)], edges[(i/4+i/(4*len(edges)))%len(edges)]
		}
		add := binop(t, d, "fo_ext_add", a, b, 4, 4)
		mul := binop(t, d, "fo_ext_mul", a, b, 4, 4)
		mulBase := binop(t, d, "fo_ext_mul_base", a, c, 4, 1)
		for i := 0; i < n; i++ {
			x, y := fp4s(a, i), fp4s(b, i)
			if got, want := fp4s(add, i), x.Add(y); got != want {
				t.Fatalf("n=%d: ext_add[%d] = %v, want %v", n, i, got, want)
			}
			if got, want := fp4s(mul, i), x.Mul(y); got != want {
				t.Fatalf("n=%d: ext_mul[%d] %v*%v = %v, want %v", n, i, x, y, got, want)
			}
			if got, want := fp4s(mulBase, i), x.MulBase(field.Fp(c[i])); got != want {
				t.Fatalf("n=%d: ext_mul_base[%d] = %v, want %v", n, i, got, want)
			}
		}
	}
}

// sumAll reduces in[0, n) with repeated fo_sum passes of at most groups groups of tpg threads.
func sumAll(t testing.TB, d *gpu.Device, in *gpu.Array[uint32], n, groups, tpg int) uint32 {
	t.Helper()
	tmp := []*gpu.Array[uint32]{alloc(t, d, "partial0", groups), alloc(t, d, "partial1", groups)}
	src := in
	for i := 0; ; i++ {
		g := min(groups, (n+tpg-1)/tpg)
		if g >= n && n > 1 { // one-thread groups: make progress
			g = (n + 1) / 2
		}
		dst := tmp[i%2]
		must(t, d.Batch().Dispatch("fo_sum", gpu.D1(uint32(g)), gpu.D1(uint32(tpg)),
			[]gpu.Arg{gpu.Buf(src.Buffer), gpu.Buf(dst.Buffer), gpu.U32(uint32(n))}, uint32(4*tpg)).Wait())
		if g == 1 {
			v := make([]uint32, 1)
			must(t, dst.Read(v, 0))
			return v[0]
		}
		src, n = dst, g
	}
}

func TestSum(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(5, 5))
	for _, n := range sizes {
		x := randFp(r, n)
		var want field.Fp
		for _, v := range x {
			want = want.Add(field.Fp(v))
		}
		in := upload(t, d, "in", x)
		for _, c := range []struct{ groups, tpg int }{{1, 1}, {3, 1}, {1, 3}, {7, 32}, {4, 100}, {64, 256}, {2, 1000}, {1, 1024}} {
			if got := sumAll(t, d, in, n, c.groups, c.tpg); got != uint32(want) {
				t.Errorf("n=%d groups=%d tpg=%d: sum = %d, want %d", n, c.groups, c.tpg, got, want)
			}
		}
	}
}

// The ucontext fibers (the fallback on other platforms) give the same sums.
func TestSumUcontext(t *testing.T) {
	d := open(t)
	host.SetUcontextFibers(true)
	defer host.SetUcontextFibers(false)
	x := randFp(rand.New(rand.NewPCG(6, 6)), 5000)
	var want field.Fp
	for _, v := range x {
		want = want.Add(field.Fp(v))
	}
	in := upload(t, d, "in", x)
	if got := sumAll(t, d, in, len(x), 5, 128); got != uint32(want) {
		t.Errorf("ucontext: sum = %d, want %d", got, want)
	}
}

// TestTablesAgree: the C table holds the Go table's kernels but those of module templates, which
// run from modules built at run time (modules_test.go).
func TestTablesAgree(t *testing.T) {
	ct := host.CTable()
	var main []driver.KernelInfo
	for _, k := range driver.Kernels {
		if k.Module == "" {
			main = append(main, k)
		}
	}
	if len(ct) != len(main) || len(ct) == 0 {
		t.Fatalf("C table has %d kernels, Go table %d (of %d with the module templates')", len(ct), len(main), len(driver.Kernels))
	}
	for i, c := range ct {
		g := main[i]
		if c.Name != g.Name || c.NBuf != g.NBuf || c.NTG != g.NTG || c.UsesBarrier != g.UsesBarrier {
			t.Errorf("kernel %d: C {%s nbuf=%d ntg=%d barrier=%v}, Go {%s nbuf=%d ntg=%d barrier=%v}",
				i, c.Name, c.NBuf, c.NTG, c.UsesBarrier, g.Name, g.NBuf, g.NTG, g.UsesBarrier)
		}
		for _, p := range g.Params {
			if p.Kind == driver.ParamValue && c.ValueSizes[p.Index] != p.ValueSize {
				t.Errorf("%s: value slot %d: C size %d, Go %d", g.Name, p.Index, c.ValueSizes[p.Index], p.ValueSize)
			}
		}
	}
	for _, name := range []string{"fo_mul", "fo_sum", "fo_ext_mul", "fo_scale"} {
		if driver.Lookup(name) == nil {
			t.Errorf("kernel %s missing from the table", name)
		}
	}
	if k := driver.Lookup("fo_sum"); k == nil || !k.UsesBarrier || k.NTG != 1 || k.Family != "field_ops" {
		t.Errorf("fo_sum entry: %+v", k)
	}
	if k := driver.Lookup("fo_scale"); k == nil || k.Params[2].Kind != driver.ParamValue || k.Params[2].ValueSize != 8 {
		t.Errorf("fo_scale entry: %+v", k)
	}
}

func TestDispatchErrors(t *testing.T) {
	d := open(t)
	a, b, out := alloc(t, d, "a", 16), alloc(t, d, "b", 16), alloc(t, d, "out", 16)
	freed, err := gpu.AllocArray[uint32](d, "freed", 16)
	must(t, err)
	freed.Free()
	args := func(x *gpu.Array[uint32], n gpu.Arg) []gpu.Arg {
		return []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(x.Buffer), gpu.Buf(out.Buffer), n}
	}
	cases := []struct {
		name, kernel string
		groups, tpg  gpu.Dim3
		args         []gpu.Arg
		tg           []uint32
	}{
		{"arg count", "fo_mul", gpu.D1(1), gpu.D1(16), args(b, gpu.U32(16))[:3], nil},
		{"value size", "fo_mul", gpu.D1(1), gpu.D1(16), args(b, gpu.U32(16, 1)), nil},
		{"value for buffer", "fo_mul", gpu.D1(1), gpu.D1(16), []gpu.Arg{gpu.U32(1), gpu.Buf(b.Buffer), gpu.Buf(out.Buffer), gpu.U32(16)}, nil},
		{"freed buffer", "fo_mul", gpu.D1(1), gpu.D1(16), args(freed, gpu.U32(16)), nil},
		{"too many threads", "fo_mul", gpu.D1(1), gpu.D1(2048), args(b, gpu.U32(16)), nil},
		{"too much threadgroup memory", "fo_sum", gpu.D1(1), gpu.D1(16), []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(out.Buffer), gpu.U32(16)}, []uint32{40000}},
		{"threadgroup count", "fo_sum", gpu.D1(1), gpu.D1(16), []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(out.Buffer), gpu.U32(16)}, nil},
		{"no such kernel", "fo_nope", gpu.D1(1), gpu.D1(16), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := d.Batch().Dispatch(c.kernel, c.groups, c.tpg, c.args, c.tg...).Wait()
			var ge *gpu.Error
			if !errors.As(err, &ge) || ge.Kernel != c.kernel || ge.Op != "dispatch" {
				t.Fatalf("error %v (%T), want a *gpu.Error naming %s", err, err, c.kernel)
			}
			t.Log(err)
		})
	}
}

func TestBackendDirect(t *testing.T) {
	h, err := host.Open(2)
	must(t, err)
	if got := h.Name(); got == "" || h.Limits().MaxThreadgroupMemory != 32768 || h.Limits().SIMDWidth != 1 || h.Limits().MemoryBytes == 0 {
		t.Fatalf("name %q limits %+v", got, h.Limits())
	}
	t.Log(h.Name(), fmt.Sprintf("%+v", h.Limits()))
	b, err := h.Alloc(100)
	must(t, err)
	must(t, h.Upload(b, 10, []byte{1, 2, 3}))
	must(t, h.Copy(b, 11, b, 10, 3)) // overlapping
	got := make([]byte, 5)
	must(t, h.Download(got, b, 10))
	if fmt.Sprint(got) != "[1 1 2 3 0]" {
		t.Fatalf("after copy: %v", got)
	}
	if err := h.Upload(b, 99, []byte{1, 2}); err == nil {
		t.Fatal("out-of-range upload accepted")
	}
	h.Free(b)
	h.Free(b)
	if err := h.Upload(b, 0, []byte{1}); err == nil {
		t.Fatal("upload to a freed buffer accepted")
	}
	if _, err := h.Alloc(1 << 62); !errors.Is(err, driver.ErrOutOfMemory) {
		t.Fatalf("huge alloc: %v, want ErrOutOfMemory", err)
	}
}

// BenchmarkFoMul: host throughput of fo_mul on 2^24 elements. One element per thread is the
// CPU-friendly shape (contiguous per group); the strided shape (1024 groups of 256 threads, each
// thread striding over 64 elements, as a GPU launcher might choose) defeats the prefetchers.
func BenchmarkFoMul(b *testing.B) {
	const n = 1 << 24
	for _, c := range []struct {
		name   string
		groups uint32
	}{{"contiguous", n / 256}, {"strided", 1024}} {
		b.Run(c.name, func(b *testing.B) {
			d := open(b)
			r := rand.New(rand.NewPCG(7, 7))
			x, y := upload(b, d, "a", randFp(r, n)), upload(b, d, "b", randFp(r, n))
			out := alloc(b, d, "out", n)
			args := []gpu.Arg{gpu.Buf(x.Buffer), gpu.Buf(y.Buffer), gpu.Buf(out.Buffer), gpu.U32(n)}
			must(b, d.Batch().Dispatch("fo_mul", gpu.D1(c.groups), gpu.D1(256), args).Wait()) // first touch
			b.ResetTimer()
			for range b.N {
				must(b, d.Batch().Dispatch("fo_mul", gpu.D1(c.groups), gpu.D1(256), args).Wait())
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// BenchmarkBarrier: fo_sum with one element per thread, 256 threads per group: 9 barriers per
// work item. Reports ns per work item per barrier.
func BenchmarkBarrier(b *testing.B) {
	for _, uctx := range []bool{false, true} {
		b.Run(fmt.Sprintf("ucontext=%v", uctx), func(b *testing.B) {
			d := open(b)
			host.SetUcontextFibers(uctx)
			defer host.SetUcontextFibers(false)
			const tpg, groups = 256, 256
			n := tpg * groups
			in := upload(b, d, "in", randFp(rand.New(rand.NewPCG(8, 8)), n))
			part := alloc(b, d, "partial", groups)
			args := []gpu.Arg{gpu.Buf(in.Buffer), gpu.Buf(part.Buffer), gpu.U32(uint32(n))}
			b.ResetTimer()
			for range b.N {
				must(b, d.Batch().Dispatch("fo_sum", gpu.D1(groups), gpu.D1(tpg), args, 4*tpg).Wait())
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(n*9), "ns/item-barrier")
		})
	}
}

// TestISAOptions: ISAs lists what the CPU runs, best first, down to the baseline; each one can be
// asked for, by the options or by METALPROVE_HOST_ISA, and the device name says which kernels
// run; an unknown one is refused, naming where it came from.
func TestISAOptions(t *testing.T) {
	t.Setenv(host.ISAEnv, "")
	isas := host.ISAs()
	if len(isas) == 0 || isas[len(isas)-1] != host.BaselineISA {
		t.Fatalf("ISAs() = %v, baseline %s", isas, host.BaselineISA)
	}
	for i, isa := range append([]string{""}, isas...) {
		h, err := host.OpenOptions(host.Options{Threads: 2, ISA: isa})
		if err != nil {
			t.Fatal(err)
		}
		want := isas[max(i-1, 0)]
		if h.ISA() != want || !strings.Contains(h.Name(), want+" kernels") {
			t.Errorf("ISA %q: backend runs %s (%s), want %s", isa, h.ISA(), h.Name(), want)
		}
	}
	if _, err := host.OpenOptions(host.Options{ISA: "pentium-mmx"}); err == nil {
		t.Error("an unknown instruction set was accepted")
	}

	t.Setenv(host.ISAEnv, host.BaselineISA)
	h, err := host.OpenOptions(host.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if h.ISA() != host.BaselineISA {
		t.Errorf("%s=%s: backend runs %s", host.ISAEnv, host.BaselineISA, h.ISA())
	}
	if h, err = host.OpenOptions(host.Options{Threads: 2, ISA: isas[0]}); err != nil || h.ISA() != isas[0] {
		t.Errorf("the options' %s beside %s=%s: %v, %v", isas[0], host.ISAEnv, host.BaselineISA, h, err)
	}
	t.Setenv(host.ISAEnv, "pentium-mmx")
	if _, err := host.OpenOptions(host.Options{Threads: 2}); err == nil || !strings.Contains(err.Error(), host.ISAEnv) {
		t.Errorf("%s=pentium-mmx: %v", host.ISAEnv, err)
	}
}

// TestRecycledBuffersZeroed: a large buffer freed and allocated again (the recycler hands the
// same memory back) reads as zeros, and the freed handle stays unusable.
func TestRecycledBuffersZeroed(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []int{1 << 20, 3<<20 + 5, 1 << 24} {
		b, err := h.Alloc(n)
		must(t, err)
		ones := make([]byte, n)
		for i := range ones {
			ones[i] = 0xA5
		}
		must(t, h.Upload(b, 0, ones))
		h.Free(b)
		if err := h.Upload(b, 0, ones[:4]); err == nil {
			t.Fatal("upload to a freed buffer accepted")
		}
		for _, m := range []int{n, n - n/16} { // the same size, and a smaller one the freed buffer fits
			c, err := h.Alloc(m)
			must(t, err)
			got := make([]byte, m)
			must(t, h.Download(got, c, 0))
			for i, x := range got {
				if x != 0 {
					t.Fatalf("alloc %d after free of %d: byte %d = %#x", m, n, i, x)
				}
			}
			must(t, h.Upload(c, 0, ones[:m]))
			h.Free(c)
		}
	}
}
