package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// rowsFixture is one AIR's trace on the device, bound to its program compiled for some outputs.
type rowsFixture struct {
	dev    *gpu.Device
	name   string
	prog   *constraints.Program
	dp     *Program
	rows   *constraints.Rows // the host reference
	parts  []*gpu.Array[field.Fp]
	used   UsedColumns
	cols   *gpu.Array[uint32]
	cp     *gpu.Array[Mont]
	height int
}

// instanceParts returns the opening parts of an instance: common main, preprocessed, cached.
func instanceParts(in testair.Instance) []*air.Matrix {
	common := in.Trace.CommonMain
	common.Height = in.Height()
	parts := []*air.Matrix{&common}
	if pa, ok := in.Air.(air.PreprocessedAir); ok && in.Air.Width().HasPreprocessed() {
		m := pa.PreprocessedTrace()
		parts = append(parts, &m)
	}
	for i := range in.Trace.CachedMains {
		parts = append(parts, &in.Trace.CachedMains[i])
	}
	return parts
}

func newRowsFixture(t *testing.T, in testair.Instance, parts []*air.Matrix, outs constraints.Outputs) *rowsFixture {
	t.Helper()
	return newRowsFixtureOn(t, testDev, in, parts, outs)
}

func newRowsFixtureOn(t *testing.T, dev *gpu.Device, in testair.Instance, parts []*air.Matrix, outs constraints.Outputs) *rowsFixture {
	t.Helper()
	_, vk := compileProgram(t, in.Air)
	prog, err := constraints.Compile(vk, outs)
	if err != nil {
		t.Fatal(err)
	}
	f := &rowsFixture{dev: dev, name: in.Air.Name(), prog: prog, height: parts[0].Height}
	if f.rows, err = constraints.NewRows(prog, parts, in.Trace.Public); err != nil {
		t.Fatal(err)
	}
	if f.dp, err = UploadProgram(dev, f.name, prog); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.dp.Free)
	for _, m := range parts {
		v := m.Values
		if len(v) == 0 {
			v = []field.Fp{0} // a width-0 part: a buffer of one element
		}
		f.parts = append(f.parts, uploadOn(t, dev, v))
	}
	f.used = UsedColumnsOf(prog)
	f.cols = uploadOn(t, dev, append(f.used.Words, 0))
	cpw, err := f.dp.ConstsAndPublic(in.Trace.Public)
	if err != nil {
		t.Fatal(err)
	}
	f.cp = uploadOn(t, dev, cpw)
	return f
}

func uploadOn[T any](t *testing.T, dev *gpu.Device, w []T) *gpu.Array[T] {
	t.Helper()
	a, err := gpu.UploadArray(dev, "test array", w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func allocOn(t *testing.T, dev *gpu.Device, n int) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.AllocArray[uint32](dev, "test scratch", max(n, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

// encodeRun fills the slots of rows [row0, row0 + 2^logPoints) and returns the run.
func (f *rowsFixture) encodeRun(t *testing.T, b *gpu.Batch, slots, regs *gpu.Array[Mont], row0, logPoints int) RowRun {
	t.Helper()
	run := RowRun{Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: f.height, Row0: row0, LogPoints: logPoints}
	for q, part := range f.parts {
		if err := run.EncodeFillSlots(b, f.dev, part, f.cols, f.used.Off[q], f.used.Count[q], f.prog.PartStart[q]); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// firstFailure is the host reference of the check: the first row where an output is not zero and
// its smallest such output.
func (f *rowsFixture) firstFailure() (row, out int, found bool) {
	var slots, regs []field.Fp
	for r := range f.height {
		out = -1
		slots, regs = f.rows.Eval(r, slots, regs, func(o int, v field.Fp) {
			if !v.IsZero() && (out < 0 || o < out) {
				out = o
			}
		})
		if out >= 0 {
			return r, out, true
		}
	}
	return 0, 0, false
}

// rowsInstances are AIRs with every kind of part: preprocessed, cached, next-row reads, public
// values, interactions, Keccak-f's large program.
func rowsInstances(rows int) []testair.Instance {
	ins := []testair.Instance{testair.Fibonacci(0, 1, rows), testair.FibonacciSelector(7, 3, rows), testair.PreprocessedCached(2, rows), testair.Sum(3, rows)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	return append(ins, testair.SelfInteraction([]int{5}, rows, 3)...)
}

// TestRowsCheckFindsFirstFailure: the device check of every constraint on every row finds the host's
// first failing (row, constraint) — valid traces, one wrong cell at a random row, random traces —
// with runs shorter than the trace (their partials combined by rows_min_pairs) and GPU-like
// shapes on a limited host device.
func TestRowsCheckFindsFirstFailure(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	kec := keccakf.Air{}
	kin := testair.Instance{Air: kec, Trace: air.TraceInput{CommonMain: air.Matrix{Width: kec.Width().CommonMain, Height: 4,
		Values: fieldrand.Fps(r, 4*kec.Width().CommonMain)}}}
	cases, later := map[string]int{}, map[string]int{} // per variant: cases, cases failing after row 0
	for _, rows := range []int{1, 2, 16, 64} {
		ins := rowsInstances(rows)
		if rows == 16 {
			ins = append(ins, kin)
		}
		for _, in := range ins {
			for _, variant := range []string{"valid", "one wrong cell", "random"} {
				parts := instanceParts(in)
				if in.Air == kec && variant == "valid" {
					continue // a random Keccak-f trace is not valid
				}
				if in.Air != kec && variant != "valid" {
					// Corrupt the common main (or the first cached part) of a copy.
					q := 0
					if parts[0].Width == 0 {
						q = len(parts) - 1
					}
					m := *parts[q]
					m.Values = append([]field.Fp(nil), m.Values...)
					if variant == "random" {
						m.Values = fieldrand.Fps(r, len(m.Values))
					} else if len(m.Values) > 0 {
						i := r.IntN(len(m.Values))
						m.Values[i] = m.Values[i].Add(field.New(1 + uint32(r.IntN(5))))
					}
					parts[q] = &m
				}
				name := fmt.Sprintf("%s/%d rows/%s", in.Air.Name(), rows, variant)
				f := newRowsFixture(t, in, parts, constraints.Constraints)
				if f.prog.NumConstraints == 0 {
					continue
				}
				wantRow, wantOut, found := f.firstFailure()
				cases[variant]++
				if found && wantRow > 0 {
					later[variant]++
				}
				for _, logPoints := range []int{0, 2, 30} {
					lp := min(logPoints, log2(f.height))
					got := runCheck(t, f, lp)
					want := [2]uint32{0xffffffff, 0xffffffff}
					if found {
						want = [2]uint32{uint32(wantRow), uint32(wantOut)}
					}
					if got != want {
						t.Fatalf("%s, runs of 2^%d rows: device (row, output) %v, host %v", name, lp, got, want)
					}
				}
			}
		}
	}
	t.Logf("cases %v, of which failing after row 0 %v", cases, later)
	if later["valid"] != 0 || later["one wrong cell"] < cases["one wrong cell"]/3 {
		t.Errorf("cases failing after row 0: %v of %v: the fixtures do not exercise the search", later, cases)
	}
	// GPU shapes (SIMD width 32, groups of up to 64 threads) on the host.
	dev, _ := openLimited(t, map[string]int{"rows_check_partials": 64, "rows_min_pairs": 48})
	in := testair.Fibonacci(0, 1, 256)
	parts := instanceParts(in)
	m := *parts[0]
	m.Values = append([]field.Fp(nil), m.Values...)
	m.Values[200] = m.Values[200].Add(field.One)
	parts[0] = &m
	f := newRowsFixtureOn(t, dev, in, parts, constraints.Constraints)
	wantRow, wantOut, _ := f.firstFailure()
	if got := runCheck(t, f, 8); got != [2]uint32{uint32(wantRow), uint32(wantOut)} {
		t.Errorf("GPU shapes: device %v, host (%d, %d)", got, wantRow, wantOut)
	}
}

func log2(n int) int {
	k := 0
	for 1<<(k+1) <= n {
		k++
	}
	return k
}

// runCheck runs the check in runs of 2^logPoints rows and reduces the partials of every run.
func runCheck(t *testing.T, f *rowsFixture, logPoints int) [2]uint32 {
	t.Helper()
	dev := f.dev
	T := 1 << logPoints
	slots := allocArray[Mont](t, dev, f.dp.NumSlots*T)
	regs := allocArray[Mont](t, dev, max(f.dp.NumRegs, 1)*T)
	per := CheckPartialGroups(dev, T)
	runs := f.height / T
	partials := allocOn(t, dev, 2*per*runs)
	out := allocOn(t, dev, 4)
	b := dev.Batch()
	for k := range runs {
		run := f.encodeRun(t, b, slots, regs, k*T, logPoints)
		if err := run.EncodeCheckPartials(b, dev, partials, k*per); err != nil {
			t.Fatal(err)
		}
	}
	if err := EncodeMinPairs(b, dev, partials, out, 0, per*runs, 1); err != nil {
		t.Fatal(err)
	}
	var v [2]uint32
	if err := out.Read(v[:], 2); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRowsFillSlots: the gathered slots are the host's slot values (Montgomery) of every row, next
// rows wrapping, for runs at every offset.
func TestRowsFillSlots(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, in := range rowsInstances(8) {
		parts := instanceParts(in)
		for q := range parts {
			m := *parts[q]
			m.Values = fieldrand.Fps(r, len(m.Values))
			for i := range min(3, len(m.Values)) {
				m.Values[i] = []field.Fp{0, 1, field.Fp(field.P - 1)}[i]
			}
			parts[q] = &m
		}
		f := newRowsFixture(t, in, parts, constraints.All)
		const logT = 2
		T := 1 << logT
		for row0 := 0; row0 < f.height; row0 += T {
			slots := allocArray[Mont](t, testDev, f.dp.NumSlots*T)
			regs := allocArray[Mont](t, testDev, max(f.dp.NumRegs, 1)*T)
			b := testDev.Batch()
			f.encodeRun(t, b, slots, regs, row0, logT)
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			got, _ := slots.ReadAll()
			var want []field.Fp
			for pt := range T {
				want, _ = f.rows.Eval(row0+pt, want, nil, func(int, field.Fp) {})
				for s, used := range f.prog.Used {
					if used && s < f.prog.SlotIsFirst() && got[s*T+pt] != MontOf(want[s]) {
						t.Fatalf("%s row %d slot %d: %v, want %v", in.Air.Name(), row0+pt, s, CanonicalOf(got[s*T+pt]), want[s])
					}
				}
			}
		}
	}
}

// TestRowsRejects: launches that do not fit their buffers are errors.
func TestRowsRejects(t *testing.T) {
	f := newRowsFixture(t, testair.Fibonacci(0, 1, 8), instanceParts(testair.Fibonacci(0, 1, 8)), constraints.Constraints)
	slots := allocArray[Mont](t, testDev, f.dp.NumSlots*4)
	regs := allocArray[Mont](t, testDev, max(f.dp.NumRegs, 1)*4)
	b := testDev.Batch()
	for name, run := range map[string]RowRun{
		"unaligned run":   {Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: 8, Row0: 2, LogPoints: 2},
		"beyond the rows": {Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: 8, Row0: 8, LogPoints: 2},
		"slots too short": {Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: 8, Row0: 0, LogPoints: 3},
		"height":          {Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: 6, Row0: 0, LogPoints: 1},
	} {
		if err := run.EncodeCheckPartials(b, testDev, allocWords(t, 1024), 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	run := RowRun{Prog: f.dp, CP: f.cp, Slots: slots, Regs: regs, Height: 8, LogPoints: 2}
	if err := run.EncodeCheckPartials(b, testDev, allocWords(t, 1), 0); err == nil {
		t.Error("partials too short: accepted")
	}
	if err := EncodeMinPairs(b, testDev, allocWords(t, 4), allocWords(t, 2), 0, 3, 0); err == nil {
		t.Error("MinPairs beyond its input: accepted")
	}
}
