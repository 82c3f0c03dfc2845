package device_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// statement is a multi-AIR statement set up on a backend: its key, loaded traces and stage
// inputs in trace order.
type statement struct {
	pk *stark.ProvingKey
	ld []stark.AirTraces
	in []*stark.AirInput
}

// setUp keygens ins under p on be and loads their traces.
func setUp(t testing.TB, be *stark.Backend, p params.SystemParams, ins []testair.Instance) *statement {
	t.Helper()
	var airs []air.Air
	var inputs []stark.AirProvingInput
	for _, in := range ins {
		airs = append(airs, in.Air)
		ai := stark.AirProvingInput{Common: in.Trace.CommonMain, Public: in.Trace.Public}
		ai.Common.Height = in.Height()
		ai.Cached = append(ai.Cached, in.Trace.CachedMains...)
		inputs = append(inputs, ai)
	}
	s := &statement{}
	var err error
	if s.pk, err = stark.Keygen(p, airs, nil, be); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pk.Free)
	if s.ld, err = stark.LoadInputs(be, s.pk, inputs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stark.FreeTraces(s.ld) })
	if s.in, err = stark.AirInputs(s.pk, s.ld, p); err != nil {
		t.Fatal(err)
	}
	return s
}

func gkrLayout(t testing.TB, p params.SystemParams, in []*stark.AirInput) *stark.GkrLayout {
	t.Helper()
	logH := make([]int, len(in))
	numInter := make([]int, len(in))
	for i, a := range in {
		logH[i], numInter[i] = a.LogHeight(), len(a.VK.DAG.Interactions)
	}
	layout, _, err := stark.NewGkrLayout(p.LSkip, logH, numInter)
	if err != nil {
		t.Fatal(err)
	}
	return layout
}

func testParams(t *testing.T) params.SystemParams {
	t.Helper()
	p, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type gkrCase struct {
	name string
	p    func(t *testing.T) params.SystemParams
	ins  func() []testair.Instance
}

func gkrCases() []gkrCase {
	app := func(logH int) func(t *testing.T) params.SystemParams {
		return func(t *testing.T) params.SystemParams {
			p, _, err := params.Preset("app-100bit", logH)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	return []gkrCase{
		{"fixture11", testParams, func() []testair.Instance { return testair.InteractionsFixture11(false) }},
		{"fixture11-cached", testParams, func() []testair.Instance { return testair.InteractionsFixture11(true) }},
		{"self-interaction", testParams, func() []testair.Instance { return testair.SelfInteraction([]int{3, 8}, 4, 5) }},
		{"short-traces", testParams, testair.ShortTraces},
		{"pair-64", testParams, func() []testair.Instance { return testair.InteractionPair(64, 7) }},
		{"mixture-16", testParams, func() []testair.Instance { return testair.Mixture(16) }},
		{"pair-1024-app", app(14), func() []testair.Instance { return testair.InteractionPair(1024, 3) }},
		{"mixture-256-app", app(12), func() []testair.Instance { return testair.Mixture(256) }},
	}
}

// gkrSetUp is one GKR case on the device backend and on cpuref, its layout and random challenges.
type gkrSetUp struct {
	p           params.SystemParams
	dst, rst    *statement
	layout      *stark.GkrLayout
	r           *rand.Rand
	alpha, beta field.Fp4
}

func newGkrSetUp(t *testing.T, be *device.Backend, ci int, tc gkrCase, seed uint64) gkrSetUp {
	p := tc.p(t)
	ins := tc.ins()
	g := gkrSetUp{p: p, dst: setUp(t, be.Stages(), p, ins), rst: setUp(t, cpuref.New(), p, ins), r: rand.New(rand.NewPCG(uint64(ci), seed))}
	g.layout = gkrLayout(t, p, g.dst.in)
	g.alpha, g.beta = fieldrand.Fp4(g.r), fieldrand.Fp4(g.r)
	return g
}

// TestGkrProverMatchesCpuref drives the device prover and cpuref's with the same challenges on the
// interaction test AIRs and compares the root, every round and every layer's claims; each Round
// is one sync, LayerClaims at most one (none when the last round's sync left nothing pending),
// BeginLayer and Bind none.
func TestGkrProverMatchesCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Stages().Gkr == nil {
		t.Fatal("the device backend does not list its Gkr stage")
	}
	for ci, tc := range gkrCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := newGkrSetUp(t, be, ci, tc, 0x6b7)
			p, dst, rst, layout, r, alpha, beta := g.p, g.dst, g.rst, g.layout, g.r, g.alpha, g.beta
			// A first prover uploads the programs (kept by the backend until Close).
			dg, err := be.NewGkrProver(p, dst.in, layout, alpha, beta)
			if err != nil {
				t.Fatal(err)
			}
			dg.Release()
			mem := testDev.Stats().MemoryInUse
			if dg, err = be.NewGkrProver(p, dst.in, layout, alpha, beta); err != nil {
				t.Fatal(err)
			}
			rg, err := cpuref.Backend{}.NewGkrProver(p, rst.in, layout, alpha, beta)
			if err != nil {
				t.Fatal(err)
			}
			defer rg.Release()
			driveGkr(t, r, layout.NumLayers(), dg, rg, false)
			dg.Release()
			if got := testDev.Stats().MemoryInUse; got != mem {
				t.Errorf("after Release: %d bytes in use, want %d", got, mem)
			}
		})
	}
}

// TestPrepareGkr: a prover prepared without α and β (stark.GkrPreparer), then started, computes
// what cpuref's does; Start runs once; Release before Start frees every buffer, after it
// nothing (the prover owns them), and the prover's Release frees them.
func TestPrepareGkr(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for ci, tc := range gkrCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := newGkrSetUp(t, be, ci, tc, 0x9e7)
			p, dst, rst, layout, r, alpha, beta := g.p, g.dst, g.rst, g.layout, g.r, g.alpha, g.beta
			// A first preparation uploads the programs (kept by the backend until Close).
			pg, err := be.PrepareGkr(p, dst.in, layout)
			if err != nil {
				t.Fatal(err)
			}
			pg.Release()
			mem := testDev.Stats().MemoryInUse
			if pg, err = be.PrepareGkr(p, dst.in, layout); err != nil {
				t.Fatal(err)
			}
			if testDev.Stats().MemoryInUse <= mem {
				t.Fatal("PrepareGkr allocated nothing")
			}
			pg.Release()
			pg.Release()
			if got := testDev.Stats().MemoryInUse; got != mem {
				t.Fatalf("after Release before Start: %d bytes in use, want %d", got, mem)
			}
			if _, err := pg.Start(alpha, beta); err == nil {
				t.Fatal("a released preparation started")
			}
			if pg, err = be.PrepareGkr(p, dst.in, layout); err != nil {
				t.Fatal(err)
			}
			dg, err := pg.Start(alpha, beta)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pg.Start(alpha, beta); err == nil {
				t.Fatal("Start ran twice")
			}
			pg.Release() // the prover owns the buffers: nothing is freed
			rg, err := cpuref.Backend{}.NewGkrProver(p, rst.in, layout, alpha, beta)
			if err != nil {
				t.Fatal(err)
			}
			defer rg.Release()
			driveGkr(t, r, layout.NumLayers(), dg, rg, false)
			dg.Release()
			if got := testDev.Stats().MemoryInUse; got != mem {
				t.Errorf("after the prover's Release: %d bytes in use, want %d", got, mem)
			}
		})
	}
	// A preparation outlived by its backend does not start, and its Release is harmless.
	be2, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tc := gkrCases()[4]
	p := tc.p(t)
	st := setUp(t, be2.Stages(), p, tc.ins())
	pg, err := be2.PrepareGkr(p, st.in, gkrLayout(t, p, st.in))
	if err != nil {
		t.Fatal(err)
	}
	be2.Close()
	if _, err := pg.Start(field.Fp4One, field.Fp4One); !errors.Is(err, device.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	pg.Release()
}

// TestGkrStageMatchesCpuref runs the whole GKR stage (stark.ProveGkr) on the device, whose prover
// runs the layers with the transcript on the device (stark.GkrDeviceLayers: rounds of ≥ 2^8 pairs
// as fold and transcript-step launches, the smaller ones in one launch a layer), and on cpuref
// from the same transcript: the proofs, the outcomes and the transcripts after it must agree, and
// the device's stage waits once (the root's q_0 is observed on the device). pair-1024-app's
// layers reach 2^13 rows, so both kinds of rounds and the switch between them run.
func TestGkrStageMatchesCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	maxLayers := 0
	defer func() {
		// Layer j's rounds of ≥ 2^(GkrSmallLog+1) pairs exist from j = GkrSmallLog + 3 on.
		if maxLayers < kernels.GkrSmallLog+4 {
			t.Errorf("the largest case has %d layers: the large rounds and the switch did not run", maxLayers)
		}
	}()
	for ci, tc := range gkrCases() {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p(t)
			ins := tc.ins()
			dst := setUp(t, be.Stages(), p, ins)
			rst := setUp(t, cpuref.New(), p, ins)
			r := rand.New(rand.NewPCG(uint64(ci), 0x57a6e))
			var dtr, rtr transcript.Transcript
			for range 5 + ci%7 { // the stage starts at any absorb index
				x := field.New(uint32(r.Uint64() % uint64(field.P)))
				dtr.Observe(x)
				rtr.Observe(x)
			}
			var dp stark.GkrProof
			var dout *stark.GkrOutcome
			// The host grinds here: the device's whole stage is one sync, the layers' log with the root.
			if n := syncsOf(t, func() (err error) {
				dp, dout, err = stark.ProveGkr(be.Stages().Gkr, transcript.HostGrinder{}, &dtr, p, dst.in)
				return err
			}); n != 1 {
				t.Errorf("the stage: %d syncs, want 1", n)
			}
			rp, rout, err := stark.ProveGkr(cpuref.Backend{}, transcript.HostGrinder{}, &rtr, p, rst.in)
			if err != nil {
				t.Fatal(err)
			}
			maxLayers = max(maxLayers, len(rp.ClaimsPerLayer))
			if !reflect.DeepEqual(dp, rp) || !reflect.DeepEqual(dout, rout) || !dtr.Same(&rtr) {
				t.Fatalf("the device's GKR stage differs from cpuref's (%d layers)", len(rp.ClaimsPerLayer))
			}
		})
	}
}

// driveGkr runs every layer on both provers and compares; with doubleBind the layers bind two
// variables between rounds where they can (the device folds the first at the second Bind).
func driveGkr(t *testing.T, r *rand.Rand, L int, dg, rg stark.GkrProver, doubleBind bool) {
	t.Helper()
	var p, q field.Fp4
	if n := syncsOf(t, func() (err error) { p, q, err = dg.Root(); return err }); n != 1 {
		t.Errorf("Root: %d syncs, want 1", n)
	}
	pr, qr, err := rg.Root()
	if err != nil {
		t.Fatal(err)
	}
	if p != pr || q != qr {
		t.Fatalf("root (%v, %v), want (%v, %v)", p, q, pr, qr)
	}
	if !p.IsZero() {
		t.Errorf("root numerator %v of a balanced statement", p)
	}
	var xi []field.Fp4
	for j := 1; j <= L; j++ {
		lambda := fieldrand.Fp4(r)
		if n := syncsOf(t, func() error { return dg.BeginLayer(j, xi, lambda) }); n != 0 {
			t.Errorf("layer %d: BeginLayer: %d syncs, want 0", j, n)
		}
		if err := rg.BeginLayer(j, xi, lambda); err != nil {
			t.Fatal(err)
		}
		rho := make([]field.Fp4, j-1)
		for k := 0; k < j-1; k++ {
			rho[k] = fieldrand.Fp4(r)
			skip := doubleBind && k%3 == 1
			if !skip {
				var s [3]field.Fp4
				if n := syncsOf(t, func() (err error) { s, err = dg.Round(); return err }); n != 1 {
					t.Errorf("layer %d round %d: %d syncs, want 1", j, k, n)
				}
				sr, err := rg.Round()
				if err != nil {
					t.Fatal(err)
				}
				if s != sr {
					t.Fatalf("layer %d round %d: %v, want %v", j, k, s, sr)
				}
			}
			if n := syncsOf(t, func() error { return dg.Bind(rho[k]) }); n != 0 {
				t.Errorf("layer %d bind %d: %d syncs, want 0", j, k, n)
			}
			if err := rg.Bind(rho[k]); err != nil {
				t.Fatal(err)
			}
		}
		var c stark.GkrLayerClaims
		if n := syncsOf(t, func() (err error) { c, err = dg.LayerClaims(); return err }); n > 1 {
			t.Errorf("layer %d claims: %d syncs, want at most 1", j, n)
		}
		cr, err := rg.LayerClaims()
		if err != nil {
			t.Fatal(err)
		}
		if c != cr {
			t.Fatalf("layer %d claims %v, want %v", j, c, cr)
		}
		xi = append([]field.Fp4{fieldrand.Fp4(r)}, rho...)
	}
}

// TestGkrProverCallOrder: binds without rounds between them give cpuref's values; going back to
// an earlier layer, calls out of order and calls after Release are errors; an unbalanced bus gives
// cpuref's non-zero root.
func TestGkrProverCallOrder(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p := testParams(t)
	ins := testair.InteractionPair(128, 11)
	dst := setUp(t, be.Stages(), p, ins)
	rst := setUp(t, cpuref.New(), p, ins)
	layout := gkrLayout(t, p, dst.in)
	r := rand.New(rand.NewPCG(5, 6))
	alpha, beta := fieldrand.Fp4(r), fieldrand.Fp4(r)
	dg, err := be.NewGkrProver(p, dst.in, layout, alpha, beta)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := cpuref.Backend{}.NewGkrProver(p, rst.in, layout, alpha, beta)
	if err != nil {
		t.Fatal(err)
	}
	defer rg.Release()
	if _, err := dg.Round(); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Round before BeginLayer: %v, want ErrProverState", err)
	}
	driveGkr(t, r, layout.NumLayers(), dg, rg, true)
	if err := dg.BeginLayer(2, []field.Fp4{alpha}, beta); !errors.Is(err, device.ErrProverState) {
		t.Errorf("BeginLayer(2) after layer %d: %v, want ErrProverState", layout.NumLayers(), err)
	}
	if err := dg.BeginLayer(layout.NumLayers()+1, make([]field.Fp4, layout.NumLayers()), beta); err == nil {
		t.Error("BeginLayer beyond the leaves accepted")
	}
	dg.Release()
	dg.Release()
	if _, _, err := dg.Root(); !errors.Is(err, device.ErrProverState) {
		t.Errorf("Root after Release: %v, want ErrProverState", err)
	}

	// One receiver row's count changed: the root numerator is cpuref's, not zero.
	bad := testair.InteractionPair(128, 11)
	recv := bad[1].Trace.CommonMain
	recv.Values = append([]field.Fp(nil), recv.Values...)
	recv.Values[3] = recv.Values[3].Add(field.One) // the count of row 3
	bad[1].Trace.CommonMain = recv
	dst = setUp(t, be.Stages(), p, bad)
	rst = setUp(t, cpuref.New(), p, bad)
	dg, err = be.NewGkrProver(p, dst.in, layout, alpha, beta)
	if err != nil {
		t.Fatal(err)
	}
	defer dg.Release()
	rg2, err := cpuref.Backend{}.NewGkrProver(p, rst.in, layout, alpha, beta)
	if err != nil {
		t.Fatal(err)
	}
	defer rg2.Release()
	gp, gq, err := dg.Root()
	if err != nil {
		t.Fatal(err)
	}
	wp, wq, _ := rg2.Root()
	if gp != wp || gq != wq || gp.IsZero() {
		t.Errorf("unbalanced root (%v, %v), want cpuref's (%v, %v), non-zero", gp, gq, wp, wq)
	}
}

// TestGkrProverRejects: layouts the device cannot or will not evaluate are errors, as cpuref's.
func TestGkrProverRejects(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p := testParams(t)
	dst := setUp(t, be.Stages(), p, testair.Mixture(16))
	good := gkrLayout(t, p, dst.in)
	if good.Blocks[0].Trace != good.Blocks[1].Trace {
		t.Fatal("the first two blocks should be one trace's")
	}
	var a, b field.Fp4
	for name, mod := range map[string]func(l *stark.GkrLayout){
		"empty":          func(l *stark.GkrLayout) { l.Total, l.Blocks = 0, nil },
		"trace":          func(l *stark.GkrLayout) { l.Blocks[0].Trace = 9 },
		"interaction":    func(l *stark.GkrLayout) { l.Blocks[0].Interaction = 9 },
		"missing block":  func(l *stark.GkrLayout) { l.Blocks = l.Blocks[1:] },
		"overlap":        func(l *stark.GkrLayout) { l.Blocks[1].Row = l.Blocks[0].Row },
		"beyond leaves":  func(l *stark.GkrLayout) { l.Blocks[1].Row = 1 << l.NumLayers() },
		"too many leafs": func(l *stark.GkrLayout) { l.NLogup = 40 },
	} {
		l := *good
		l.Blocks = append([]stark.GkrBlock(nil), good.Blocks...)
		mod(&l)
		if g, err := be.NewGkrProver(p, dst.in, &l, a, b); err == nil {
			g.Release()
			t.Errorf("%s: accepted", name)
		}
	}
	be.Close()
	if _, err := be.NewGkrProver(p, dst.in, good, a, b); err == nil {
		t.Error("closed backend: accepted")
	}
}
