package kernels

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

func programAirs() []air.Air {
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16), testair.PreprocessedCached(2, 16)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	var out []air.Air
	for _, in := range ins {
		out = append(out, in.Air)
	}
	return append(out, keccakf.Air{})
}

func compileProgram(t testing.TB, a air.Air) (*constraints.Program, *air.VerifyingKey) {
	t.Helper()
	var pre *air.PreprocessedVK
	if a.Width().HasPreprocessed() {
		pre = &air.PreprocessedVK{HypercubeDim: 2, StackingWidth: 1}
	}
	vk, err := air.Keygen(a, 3, false, pre)
	if err != nil {
		t.Fatal(err)
	}
	p, err := constraints.Compile(vk, constraints.All)
	if err != nil {
		t.Fatal(err)
	}
	return p, vk
}

func uploadWords(t *testing.T, name string, w []uint32) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.UploadArray(testDev, name, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func allocWords(t *testing.T, n int) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.AllocArray[uint32](testDev, "test scratch", max(n, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

// TestProgramInterpreterMatchesGo: every output of the device interpreter, base and extension,
// equals constraints.Eval at random points (edge values included), and the extension
// combination equals Program.CombineExt.
func TestProgramInterpreterMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, a := range programAirs() {
		p, vk := compileProgram(t, a)
		dp, err := UploadProgram(testDev, a.Name(), p)
		if err != nil {
			t.Fatal(err)
		}
		defer dp.Free()
		const T = 37
		public := fieldrand.Fps(r, vk.NumPublicValues)
		cpw, err := dp.ConstsAndPublic(public)
		if err != nil {
			t.Fatal(err)
		}
		cp := uploadOn(t, testDev, cpw)
		// Base field: slots [slot][t].
		slots := make([][]field.Fp, T)
		flat := make([]Mont, p.NumSlots()*T)
		for pt := range T {
			slots[pt] = fieldrand.Fps(r, p.NumSlots())
			if pt < 3 {
				for s := range slots[pt] {
					slots[pt][s] = []field.Fp{0, 1, field.Fp(field.P - 1)}[pt]
				}
			}
			for s, v := range slots[pt] {
				flat[s*T+pt] = MontOf(v)
			}
		}
		e := &EvalBuffers{CP: cp, Slots: uploadOn(t, testDev, flat), Regs: allocArray[Mont](t, testDev, dp.NumRegs*T), Points: T}
		out := allocArray[Mont](t, testDev, len(p.Outputs)*T)
		b := testDev.Batch()
		if err := dp.EncodeEvalOutputs(b, testDev, e, out); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCanonical(out)
		if err != nil {
			t.Fatal(err)
		}
		for pt := range T {
			constraints.Eval(p, slots[pt], public, func(x field.Fp) field.Fp { return x }, func(o int, v field.Fp) {
				if got[o*T+pt] != v {
					t.Fatalf("%s point %d output %d: device %v, Go %v", a.Name(), pt, o, got[o*T+pt], v)
				}
			}, nil)
		}

		// Extension field: outputs and the combination.
		slots4 := make([][]field.Fp4, T)
		flat4 := make([]Mont, 4*p.NumSlots()*T)
		for pt := range T {
			slots4[pt] = make([]field.Fp4, p.NumSlots())
			for s := range slots4[pt] {
				slots4[pt][s] = fieldrand.Fp4(r)
				m := Mont4Of(slots4[pt][s])
				copy(flat4[4*(s*T+pt):], m[:])
			}
		}
		e4 := &EvalBuffers{CP: cp, Slots: uploadOn(t, testDev, flat4), Regs: allocArray[Mont](t, testDev, 4*dp.NumRegs*T), Points: T, Ext: true}
		out4 := allocArray[Mont](t, testDev, 4*len(p.Outputs)*T)
		eq3b := make([]field.Fp4, len(p.Interactions))
		for i := range eq3b {
			eq3b[i] = fieldrand.Fp4(r)
		}
		w, err := p.Weights(fieldrand.Fp4(r), fieldrand.Fp4(r), eq3b)
		if err != nil {
			t.Fatal(err)
		}
		weights := uploadOn(t, testDev, append(Mont4Slice(w.Out), Mont4{}))
		den := uploadOn(t, testDev, Mont4Slice([]field.Fp4{w.DenConst}))
		comb := allocArray[Mont4](t, testDev, 3*T)
		b = testDev.Batch()
		if err := dp.EncodeEvalOutputs(b, testDev, e4, out4); err != nil {
			t.Fatal(err)
		}
		if err := dp.EncodeEvalCombine4(b, testDev, e4, weights, den, comb, len(p.Interactions) > 0); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		// The Fp4 outputs are four Mont words each, interleaved: read back as Mont4.
		ow, _ := gpu.View[Mont4](out4).ReadAll()
		cw, _ := comb.ReadAll()
		got4, gotC := Fp4SliceOf(ow), Fp4SliceOf(cw)
		for pt := range T {
			constraints.Eval(p, slots4[pt], public, field.Lift, func(o int, v field.Fp4) {
				if got4[o*T+pt] != v {
					t.Fatalf("%s point %d output %d (Fp4): device %v, Go %v", a.Name(), pt, o, got4[o*T+pt], v)
				}
			}, nil)
			c, _ := p.CombineExt(w, slots4[pt], public, nil)
			if got := (constraints.Combined{Zc: gotC[3*pt], Num: gotC[3*pt+1], Den: gotC[3*pt+2]}); got != c {
				t.Fatalf("%s point %d: device combination %v, Go %v", a.Name(), pt, got, c)
			}
		}
	}
}

// TestDeviceCode: on the host device a program runs grouped by operation (the uploaded program's
// registers are the grouped code's), made once per program and dropped once the program is
// collected.
func TestDeviceCode(t *testing.T) {
	if !isHost(testDev) {
		t.Skip("the host device's code")
	}
	p, _ := compileProgram(t, keccakf.Air{})
	g, err := DeviceCode(testDev, p)
	if err != nil {
		t.Fatal(err)
	}
	if g == p || len(g.Code) != len(p.Code) {
		t.Fatalf("host code %p of %d instructions for program %p of %d", g, len(g.Code), p, len(p.Code))
	}
	if again, _ := DeviceCode(testDev, p); again != g {
		t.Error("the host code was made twice")
	}
	dp, err := UploadProgram(testDev, "grouped", p)
	if err != nil {
		t.Fatal(err)
	}
	dp.Free()
	if dp.NumRegs != g.NumRegs || dp.NumCode != len(g.Code) {
		t.Errorf("uploaded %d registers, %d instructions; host code %d, %d", dp.NumRegs, dp.NumCode, g.NumRegs, len(g.Code))
	}
	key := weak.Make(p)
	kept := func() bool { _, ok := hostCode.Load(key); return ok }
	if !kept() {
		t.Fatal("no host code kept for the program")
	}
	p, g, dp = nil, nil, nil
	for i := 0; kept() && i < 200; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if kept() {
		t.Error("the host code was kept after its program was collected")
	}
}
