package device_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

var testDev *gpu.Device

// TestMain opens the host device, or the kind named by METALPROVE_TEST_DEVICE (e.g. cuda, for a
// test binary run on a GPU machine).
func TestMain(m *testing.M) {
	kind := gpu.KindHost
	if k := os.Getenv("METALPROVE_TEST_DEVICE"); k != "" {
		kind = gpu.Kind(k)
	}
	d, err := gpu.Open(kind, gpu.Options{})
	if err != nil {
		panic(err)
	}
	testDev = d
	code := m.Run()
	d.Close()
	os.Exit(code)
}

type traceShape struct{ logH, width int }

type stackingCase struct {
	name    string
	params  func() (params.SystemParams, error)
	commits [][]traceShape // per commitment, in trace order
}

func preset(name string, logH int) func() (params.SystemParams, error) {
	return func() (params.SystemParams, error) {
		p, _, err := params.Preset(name, logH)
		return p, err
	}
}

func small(lSkip, nStack, k int) func() (params.SystemParams, error) {
	return func() (params.SystemParams, error) { return params.TestParamsSmall(lSkip, nStack, k), nil }
}

var stackingCases = []stackingCase{
	{"test-mixed-2-commits", preset("test", 0), [][]traceShape{
		{{10, 3}, {9, 0}, {7, 2}, {2, 4}, {1, 2}, {0, 1}},
		{{8, 5}, {3, 2}, {1, 3}},
	}},
	{"test-below-lskip-only", preset("test", 0), [][]traceShape{{{1, 5}, {0, 3}}}},
	{"test-one-full-column", preset("test", 0), [][]traceShape{{{10, 1}}}},
	{"app100-2^11-mixed", preset("app-100bit", 11), [][]traceShape{
		{{11, 5}, {8, 3}, {4, 2}, {3, 1}, {0, 2}},
		{{10, 4}},
	}},
	{"app100-2^14-wide", preset("app-100bit", 14), [][]traceShape{{{14, 6}, {12, 9}, {5, 3}}}},
	{"app100-2^12-three-commits", preset("app-100bit", 12), [][]traceShape{
		{{12, 2}, {6, 0}, {6, 7}, {2, 3}},
		{{9, 3}, {4, 5}},
		{{12, 1}, {11, 1}, {10, 1}, {9, 1}},
	}},
	{"lskip0", small(0, 6, 2), [][]traceShape{{{6, 2}, {4, 3}, {0, 2}}}},
	{"lskip1", small(1, 5, 2), [][]traceShape{{{6, 1}, {3, 3}, {1, 2}, {0, 3}}}},
	{"lskip3", small(3, 4, 3), [][]traceShape{{{7, 2}, {5, 3}, {3, 1}, {2, 2}, {0, 1}}}},
	{"lskip5", small(5, 3, 2), [][]traceShape{{{8, 2}, {6, 3}, {5, 1}, {3, 2}, {1, 1}}}},
	// More short slices than one chunk of ProveFirstRounds' coefficient kernel holds (8 at l_skip 5).
	{"lskip5-many-short", small(5, 3, 2), [][]traceShape{{{8, 2}, {3, 7}, {1, 4}}}},
	{"nstack0", small(2, 0, 1), [][]traceShape{{{2, 3}, {1, 2}, {0, 1}}}},
}

// commitBoth commits random traces of shapes on the device backend and on cpuref.
func commitBoth(t *testing.T, be *device.Backend, p params.SystemParams, r *rand.Rand, shapes [][]traceShape) (dev, ref []stark.Committed) {
	t.Helper()
	refBe := cpuref.New()
	for c, ts := range shapes {
		var dts, rts []stark.Trace
		for j, s := range ts {
			m := &air.Matrix{Width: s.width, Height: 1 << s.logH, Values: fieldrand.Fps(r, s.width<<s.logH)}
			dt, err := be.LoadTrace(fmt.Sprint("trace ", c, j), m)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(dt.Free)
			rt, err := refBe.Loader.LoadTrace("trace", m)
			if err != nil {
				t.Fatal(err)
			}
			dts, rts = append(dts, dt), append(rts, rt)
		}
		dc, err := be.Commit(p, dts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dc.Free)
		rc, err := refBe.Committer.Commit(p, rts)
		if err != nil {
			t.Fatal(err)
		}
		if dc.Root() != rc.Root() {
			t.Fatalf("commitment %d: roots differ", c)
		}
		dev, ref = append(dev, dc), append(ref, rc)
	}
	return dev, ref
}

// randomBatch draws a point (1 + n_stack coordinates) and a batch: λ random, a rotation claim
// on about half of the columns.
func randomBatch(r *rand.Rand, p params.SystemParams, cs []stark.Committed) ([]field.Fp4, *stark.StackingBatch) {
	pt := make([]field.Fp4, p.NStack+1)
	for i := range pt {
		pt[i] = fieldrand.Fp4(r)
	}
	b := &stark.StackingBatch{Lambda: fieldrand.Fp4(r)}
	for _, c := range cs {
		rot := make([]bool, len(c.Layout().Cols))
		for i := range rot {
			rot[i] = r.IntN(2) == 0
		}
		b.NeedRot = append(b.NeedRot, rot)
	}
	return pt, b
}

// syncsOf runs f and returns the syncs it made.
func syncsOf(t *testing.T, f func() error) int {
	t.Helper()
	before := testDev.Stats().Syncs
	if err := f(); err != nil {
		t.Fatal(err)
	}
	return testDev.Stats().Syncs - before
}

func TestStackingProverMatchesCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Stages().Stacking == nil {
		t.Fatal("the device backend does not list its Stacking stage")
	}
	for ci, tc := range stackingCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.params()
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(ci), 0x57ac))
			dcs, rcs := commitBoth(t, be, p, r, tc.commits)
			pt, batch := randomBatch(r, p, dcs)
			mem := testDev.Stats().MemoryInUse
			dsp, err := be.Stages().Stacking.NewStackingProver(p, dcs, pt)
			if err != nil {
				t.Fatal(err)
			}
			rsp, err := cpuref.New().Stacking.NewStackingProver(p, rcs, pt)
			if err != nil {
				t.Fatal(err)
			}
			defer rsp.Release()

			var got []field.Fp4
			if n := syncsOf(t, func() (err error) { got, err = dsp.UnivariateRound(batch); return err }); n != 1 {
				t.Errorf("UnivariateRound: %d syncs, want 1", n)
			}
			want, err := rsp.UnivariateRound(batch)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("UnivariateRound: %d coefficients, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("UnivariateRound: coefficient %d = %v, want %v", i, got[i], want[i])
				}
			}
			u0 := fieldrand.Fp4(r)
			if n := syncsOf(t, func() error { return dsp.BindUnivariate(u0) }); n != 0 {
				t.Errorf("BindUnivariate: %d syncs, want 0", n)
			}
			if err := rsp.BindUnivariate(u0); err != nil {
				t.Fatal(err)
			}
			for j := 1; j <= p.NStack; j++ {
				var s1, s2 field.Fp4
				if n := syncsOf(t, func() (err error) { s1, s2, err = dsp.Round(); return err }); n != 1 {
					t.Errorf("round %d: %d syncs, want 1", j, n)
				}
				w1, w2, err := rsp.Round()
				if err != nil {
					t.Fatal(err)
				}
				if s1 != w1 || s2 != w2 {
					t.Fatalf("round %d: (%v, %v), want (%v, %v)", j, s1, s2, w1, w2)
				}
				u := fieldrand.Fp4(r)
				if n := syncsOf(t, func() error { return dsp.Bind(u) }); n != 0 {
					t.Errorf("bind %d: %d syncs, want 0", j, n)
				}
				if err := rsp.Bind(u); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := dsp.Round(); !errors.Is(err, device.ErrProverState) {
				t.Errorf("Round after the last bind: %v, want ErrProverState", err)
			}
			gotOpen := sameOpenings(t, dsp, rsp, 1)
			again, err := dsp.Openings()
			if err != nil || fmt.Sprint(again) != fmt.Sprint(gotOpen) {
				t.Fatalf("Openings again: %v, %v", again, err)
			}
			dsp.Release()
			// The stacked matrices the prover stacked again stay for WHIR's batching (the lean
			// plan, Backend.KeepStacked), until that drops them or the commitments are freed.
			var left int64
			for _, c := range dcs {
				left += 4 * int64(c.Layout().Width) << c.Layout().LogHeight
			}
			if m := testDev.Stats().MemoryInUse; m != mem+left {
				t.Errorf("after Release: %d bytes in use, %d before the prover and %d of stacked matrices", m, mem, left)
			}
			if _, err := dsp.Openings(); !errors.Is(err, device.ErrProverState) {
				t.Errorf("Openings after Release: %v, want ErrProverState", err)
			}
			dsp.Release() // twice is harmless
		})
	}
}

// TestStackingProverOrder: calls out of order fail with ErrProverState (as cpuref's), repeated
// calls that cpuref allows give its values, and inputs cpuref rejects are rejected.
func TestStackingProverOrder(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(99, 1))
	dcs, rcs := commitBoth(t, be, p, r, [][]traceShape{{{9, 2}, {3, 2}, {1, 1}}})
	pt, batch := randomBatch(r, p, dcs)
	sp, err := be.NewStackingProver(p, dcs, pt)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Release()
	ref, err := cpuref.New().Stacking.NewStackingProver(p, rcs, pt)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sp.Round(); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Round before BindUnivariate: %v", err)
	}
	if err := sp.Bind(field.Fp4One); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Bind before BindUnivariate: %v", err)
	}
	if _, err := sp.Openings(); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Openings before the rounds: %v", err)
	}
	// BindUnivariate before UnivariateRound (which brings the weights) fails; then two Binds in a
	// row, Round twice: all as cpuref.
	u := fieldrand.Fp4(r)
	for _, x := range []stark.StackingProver{sp, ref} {
		if err := x.BindUnivariate(u); err == nil {
			t.Errorf("%T: BindUnivariate before UnivariateRound: no error", x)
		}
		if _, err := x.UnivariateRound(batch); err != nil {
			t.Fatal(err)
		}
		if err := x.BindUnivariate(u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sp.UnivariateRound(batch); !errors.Is(err, device.ErrProverState) {
		t.Errorf("UnivariateRound after BindUnivariate: %v", err)
	}
	if err := sp.BindUnivariate(u); !errors.Is(err, device.ErrProverState) {
		t.Errorf("BindUnivariate twice: %v", err)
	}
	for j := 1; j <= p.NStack; j++ {
		for k := 0; k < j%3; k++ { // 0, 1 or 2 Round calls before the bind
			a1, a2, err := sp.Round()
			if err != nil {
				t.Fatal(err)
			}
			b1, b2, err := ref.Round()
			if err != nil {
				t.Fatal(err)
			}
			if a1 != b1 || a2 != b2 {
				t.Fatalf("round %d call %d differs", j, k)
			}
		}
		u := fieldrand.Fp4(r)
		if err := sp.Bind(u); err != nil {
			t.Fatal(err)
		}
		if err := ref.Bind(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Bind(u); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Bind past n_stack: %v", err)
	}
	got, err := sp.Openings()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.Openings()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("openings differ after an irregular call order")
	}

	// Invalid inputs: points to NewStackingProver, weights to UnivariateRound (each on a fresh
	// prover, with cpuref's answer alongside).
	for i, bp := range [][]field.Fp4{nil, pt[:1]} {
		if _, err := be.NewStackingProver(p, dcs, bp); !errors.Is(err, stark.ErrOpeningInput) {
			t.Errorf("bad point %d: %v, want ErrOpeningInput", i, err)
		}
		if _, err := cpuref.New().Stacking.NewStackingProver(p, rcs, bp); !errors.Is(err, stark.ErrOpeningInput) {
			t.Errorf("bad point %d, cpuref: %v, want ErrOpeningInput", i, err)
		}
	}
	bad := []*stark.StackingBatch{
		nil,
		{Lambda: batch.Lambda},
		{Lambda: batch.Lambda, NeedRot: [][]bool{batch.NeedRot[0][:1]}},
	}
	for i, bb := range bad {
		fresh, err := be.NewStackingProver(p, dcs, pt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fresh.UnivariateRound(bb); !errors.Is(err, stark.ErrOpeningInput) {
			t.Errorf("bad batch %d: %v, want ErrOpeningInput", i, err)
		}
		fresh.Release()
		rfresh, err := cpuref.New().Stacking.NewStackingProver(p, rcs, pt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rfresh.UnivariateRound(bb); !errors.Is(err, stark.ErrOpeningInput) {
			t.Errorf("bad batch %d, cpuref: %v, want ErrOpeningInput", i, err)
		}
		rfresh.Release()
	}
	if _, err := be.NewStackingProver(p, rcs, pt); !errors.Is(err, device.ErrForeignHandle) {
		t.Errorf("cpuref commitments: %v, want ErrForeignHandle", err)
	}
	p2 := p
	p2.NStack++
	pt2, _ := randomBatch(r, p2, dcs)
	if _, err := be.NewStackingProver(p2, dcs, pt2); !errors.Is(err, stark.ErrOpeningInput) {
		t.Errorf("other n_stack: %v, want ErrOpeningInput", err)
	}
}

// TestStackingProverClose: the backend's Close frees a live prover; the prover then fails.
func TestStackingProverClose(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := params.Preset("test", 0)
	r := rand.New(rand.NewPCG(7, 7))
	dcs, _ := commitBoth(t, be, p, r, [][]traceShape{{{9, 2}}})
	pt, batch := randomBatch(r, p, dcs)
	sp, err := be.NewStackingProver(p, dcs, pt)
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if _, err := sp.UnivariateRound(batch); err == nil {
		t.Error("UnivariateRound after Close: no error")
	}
	sp.Release()
}

// keccakfShape is the stacked layout of keccakf-1024 (metalprove trace --example keccakf --perms
// 1024): one trace of 2633 columns × 2^15 rows under app-100bit at 2^21 (l_skip 4, n_stack 17),
// stacked into 42 columns.
func keccakfShape(b *testing.B) (params.SystemParams, *device.Backend, []stark.Committed, []field.Fp4, *stark.StackingBatch) {
	b.Helper()
	p, _, err := params.Preset("app-100bit", 21)
	if err != nil {
		b.Fatal(err)
	}
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(be.Close)
	r := rand.New(rand.NewPCG(1024, 2633))
	m := &air.Matrix{Width: 2633, Height: 1 << 15, Values: fieldrand.Fps(r, 2633<<15)}
	tr, err := be.LoadTrace("keccakf-shaped", m)
	if err != nil {
		b.Fatal(err)
	}
	c, err := be.Commit(p, []stark.Trace{tr})
	if err != nil {
		b.Fatal(err)
	}
	tr.Free()
	cs := []stark.Committed{c}
	pt, batch := randomBatch(r, p, cs)
	return p, be, cs, pt, batch
}

// runStacking drives sp through a whole reduction and reports the time of each step (ms/op).
func runStacking(b *testing.B, p params.SystemParams, batch *stark.StackingBatch, newProver func() (stark.StackingProver, error)) {
	r := rand.New(rand.NewPCG(5, 5))
	var tNew, tUni, tBindUni, tRounds, tBinds, tOpen time.Duration
	lap := func(d *time.Duration, start time.Time) time.Time {
		now := time.Now()
		*d += now.Sub(start)
		return now
	}
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		sp, err := newProver()
		if err != nil {
			b.Fatal(err)
		}
		t = lap(&tNew, t)
		if _, err := sp.UnivariateRound(batch); err != nil {
			b.Fatal(err)
		}
		t = lap(&tUni, t)
		if err := sp.BindUnivariate(fieldrand.Fp4(r)); err != nil {
			b.Fatal(err)
		}
		t = lap(&tBindUni, t)
		for range p.NStack {
			if _, _, err := sp.Round(); err != nil {
				b.Fatal(err)
			}
			t = lap(&tRounds, t)
			if err := sp.Bind(fieldrand.Fp4(r)); err != nil {
				b.Fatal(err)
			}
			t = lap(&tBinds, t)
		}
		if _, err := sp.Openings(); err != nil {
			b.Fatal(err)
		}
		lap(&tOpen, t)
		sp.Release()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(tNew), "new-ms")
	b.ReportMetric(ms(tUni), "univariate-ms")
	b.ReportMetric(ms(tBindUni), "bind-univariate-ms")
	b.ReportMetric(ms(tRounds), "rounds-ms")
	b.ReportMetric(ms(tBinds), "binds-ms")
	b.ReportMetric(ms(tOpen), "openings-ms")
}

// BenchmarkStackingKeccakf1024Device: the device prover on the keccakf-1024 layout.
func BenchmarkStackingKeccakf1024Device(b *testing.B) {
	p, be, cs, pt, batch := keccakfShape(b)
	runStacking(b, p, batch, func() (stark.StackingProver, error) { return be.NewStackingProver(p, cs, pt) })
}

// BenchmarkStackingKeccakf1024Cpuref: cpuref's prover on the same stacked matrix (downloaded).
func BenchmarkStackingKeccakf1024Cpuref(b *testing.B) {
	p, _, cs, pt, batch := keccakfShape(b)
	q, err := cs[0].(*device.Committed).StackedMatrix()
	if err != nil {
		b.Fatal(err)
	}
	rc := []stark.Committed{&cpuref.Committed{Data: &cpuref.StackedPCSData{Layout: cs[0].Layout(), Matrix: q}}}
	runStacking(b, p, batch, func() (stark.StackingProver, error) { return cpuref.New().Stacking.NewStackingProver(p, rc, pt) })
}

// TestStackingDeviceRoundsMatchCpuref: the multilinear rounds with the transcript on the device
// (ProveRounds) give cpuref's sums and the stage loop's bound values (Round, observe s(1), s(2),
// sample, Bind), with one sync for all rounds and the caller's transcript unchanged; Openings
// follows with cpuref's values; the per-round methods and a second ProveRounds then fail.
func TestStackingDeviceRoundsMatchCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for ci, tc := range stackingCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.params()
			if err != nil {
				t.Fatal(err)
			}
			if p.NStack < 1 {
				t.Skip("no multilinear rounds")
			}
			r := rand.New(rand.NewPCG(uint64(ci), 0x7e5c))
			dsp, rsp, batch := stackingPair(t, be, p, r, tc.commits)
			for _, sp := range []stark.StackingProver{dsp, rsp} {
				if _, err := sp.UnivariateRound(batch); err != nil {
					t.Fatal(err)
				}
			}
			u0 := fieldrand.Fp4(r)
			for _, sp := range []stark.StackingProver{dsp, rsp} {
				if err := sp.BindUnivariate(u0); err != nil {
					t.Fatal(err)
				}
			}
			// A transcript in some state: observes and samples that leave both indices inside
			// their ranges (the absorb index differs per case).
			tr := transcript.New()
			for range 3 + ci {
				tr.Observe(fieldrand.Fp(r))
			}
			tr.SampleExt()
			for range ci % 8 {
				tr.Observe(fieldrand.Fp(r))
			}
			before := tr
			dr, ok := dsp.(stark.StackingDeviceRounds)
			if !ok {
				t.Fatal("the device stacking prover does not run its rounds on the device")
			}
			var polys [][2]field.Fp4
			var us []field.Fp4
			if n := syncsOf(t, func() (err error) { polys, us, err = dr.ProveRounds(&tr, p.NStack); return err }); n != 1 {
				t.Errorf("ProveRounds: %d syncs, want 1", n)
			}
			if !tr.Same(&before) {
				t.Error("ProveRounds changed the caller's transcript")
			}
			if len(polys) != p.NStack || len(us) != p.NStack {
				t.Fatalf("ProveRounds: %d sums and %d bound values, want %d", len(polys), len(us), p.NStack)
			}
			replayStackingRounds(t, rsp, &tr, polys, us)
			// q's last fold came with the rounds: the openings are one download, no sync.
			sameOpenings(t, dsp, rsp, 0)
			if _, _, err := dsp.Round(); !errors.Is(err, device.ErrProverState) {
				t.Errorf("Round after ProveRounds: %v, want ErrProverState", err)
			}
			if _, _, err := dr.ProveRounds(&before, p.NStack); !errors.Is(err, device.ErrProverState) {
				t.Errorf("ProveRounds twice: %v, want ErrProverState", err)
			}
		})
	}
}

// TestStackingFirstRoundsMatchCpuref: ProveFirstRounds (round 0 with its transcript step, the
// bind and the rounds on the device, one sync) gives cpuref's coefficients, u_0, sums, bound
// values and openings for every case (short slices, no slice of log height ≥ l_skip, l_skip 0
// to 5), and leaves the prover where ProveRounds leaves it.
func TestStackingFirstRoundsMatchCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for ci, tc := range stackingCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.params()
			if err != nil {
				t.Fatal(err)
			}
			if p.NStack < 1 {
				t.Skip("no multilinear rounds")
			}
			r := rand.New(rand.NewPCG(uint64(ci), 0xf125))
			dsp, rsp, batch := stackingPair(t, be, p, r, tc.commits)
			tr := transcript.New()
			for range 5 + ci {
				tr.Observe(fieldrand.Fp(r))
			}
			tr.SampleExt()
			before := tr
			fr, ok := dsp.(stark.StackingDeviceFirstRound)
			if !ok {
				t.Fatal("the device stacking prover does not run round 0 on the device")
			}
			var coeffs, us []field.Fp4
			var u0 field.Fp4
			var polys [][2]field.Fp4
			if n := syncsOf(t, func() (err error) { coeffs, u0, polys, us, err = fr.ProveFirstRounds(batch, &tr, p.NStack); return err }); n != 1 {
				t.Errorf("ProveFirstRounds: %d syncs, want 1", n)
			}
			if !tr.Same(&before) {
				t.Error("ProveFirstRounds changed the caller's transcript")
			}
			want, err := rsp.UnivariateRound(batch)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(coeffs) != fmt.Sprint(want) {
				t.Fatalf("round 0's coefficients\n got %v\nwant %v", coeffs, want)
			}
			for _, c := range want {
				tr.ObserveExt(c)
			}
			if w := tr.SampleExt(); u0 != w {
				t.Fatalf("u_0 %v, want %v", u0, w)
			}
			if err := rsp.BindUnivariate(u0); err != nil {
				t.Fatal(err)
			}
			if len(polys) != p.NStack || len(us) != p.NStack {
				t.Fatalf("%d sums and %d bound values, want %d", len(polys), len(us), p.NStack)
			}
			replayStackingRounds(t, rsp, &tr, polys, us)
			sameOpenings(t, dsp, rsp, 0)
			if _, _, _, _, err := fr.ProveFirstRounds(batch, &before, p.NStack); !errors.Is(err, device.ErrProverState) {
				t.Errorf("ProveFirstRounds twice: %v, want ErrProverState", err)
			}
			if _, err := dsp.UnivariateRound(batch); !errors.Is(err, device.ErrProverState) {
				t.Errorf("UnivariateRound after ProveFirstRounds: %v, want ErrProverState", err)
			}
		})
	}
}

// replayStackingRounds runs cpuref's prover rsp through the multilinear rounds with tr's
// observes and samples, checking the device's sums and bound values.
func replayStackingRounds(t *testing.T, rsp stark.StackingProver, tr *transcript.Transcript, polys [][2]field.Fp4, us []field.Fp4) {
	t.Helper()
	for j := 1; j <= len(polys); j++ {
		w1, w2, err := rsp.Round()
		if err != nil {
			t.Fatal(err)
		}
		if polys[j-1] != [2]field.Fp4{w1, w2} {
			t.Fatalf("round %d: %v, want (%v, %v)", j, polys[j-1], w1, w2)
		}
		tr.ObserveExt(w1)
		tr.ObserveExt(w2)
		u := tr.SampleExt()
		if us[j-1] != u {
			t.Fatalf("round %d: bound value %v, want %v", j, us[j-1], u)
		}
		if err := rsp.Bind(u); err != nil {
			t.Fatal(err)
		}
	}
}

// sameOpenings checks that the device prover's openings are cpuref's and take syncs syncs (none
// after the device's rounds: q's last fold came with them), and returns them.
func sameOpenings(t *testing.T, dsp, rsp stark.StackingProver, syncs int) [][]field.Fp4 {
	t.Helper()
	var got [][]field.Fp4
	if n := syncsOf(t, func() (err error) { got, err = dsp.Openings(); return err }); n != syncs {
		t.Errorf("Openings: %d syncs, want %d", n, syncs)
	}
	want, err := rsp.Openings()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Openings: %v, want %v", got, want)
	}
	return got
}

// stackingPair commits random traces of shapes on the device backend and on cpuref and makes a
// stacking prover of each at one random point, released with the test, and a random batch.
func stackingPair(t *testing.T, be *device.Backend, p params.SystemParams, r *rand.Rand, shapes [][]traceShape) (dsp, rsp stark.StackingProver, batch *stark.StackingBatch) {
	t.Helper()
	dcs, rcs := commitBoth(t, be, p, r, shapes)
	pt, batch := randomBatch(r, p, dcs)
	dsp, err := be.Stages().Stacking.NewStackingProver(p, dcs, pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dsp.Release)
	if rsp, err = cpuref.New().Stacking.NewStackingProver(p, rcs, pt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rsp.Release)
	return dsp, rsp, batch
}
