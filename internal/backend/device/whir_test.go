package device_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// openHost returns a device backend on the host device and the device (for its counters).
func openHost(t *testing.T) (*device.Backend, *gpu.Device) {
	t.Helper()
	dev, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	be, err := device.New(dev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		be.Close()
		if n := len(dev.LiveBuffers()); n != 0 {
			t.Errorf("%d device buffers live after Close: %v", n, dev.LiveBuffers())
		}
		dev.Close()
	})
	return be, dev
}

// randomTraces returns matrices of the given log heights (descending) and widths, random values
// with the edge values mixed in.
func randomTraces(r *rand.Rand, logHeights, widths []int) []air.Matrix {
	out := make([]air.Matrix, len(widths))
	for i, w := range widths {
		m := air.NewMatrix(w, 1<<logHeights[i])
		copy(m.Values, fieldrand.Fps(r, len(m.Values)))
		out[i] = m
	}
	return out
}

// commitWhirPair commits the same traces on the device backend and on cpuref.
func commitWhirPair(t *testing.T, be *device.Backend, p params.SystemParams, ms []air.Matrix) (dev, ref stark.Committed) {
	t.Helper()
	dts := make([]stark.Trace, len(ms))
	rts := make([]stark.Trace, len(ms))
	for i := range ms {
		var err error
		if dts[i], err = be.LoadTrace(fmt.Sprintf("trace %d", i), &ms[i]); err != nil {
			t.Fatal(err)
		}
		if rts[i], err = (cpuref.Backend{}).LoadTrace("", &ms[i]); err != nil {
			t.Fatal(err)
		}
	}
	dc, err := be.Commit(p, dts)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cpuref.Backend{}.Commit(p, rts)
	if err != nil {
		t.Fatal(err)
	}
	if dc.Root() != rc.Root() {
		t.Fatal("commitment roots differ")
	}
	return dc, rc
}

// whirCase is a parameter set and, per commitment, the traces (log heights and widths).
type whirCase struct {
	name       string
	p          params.SystemParams
	logHeights [][]int
	widths     [][]int
}

func whirCases(t *testing.T) []whirCase {
	t.Helper()
	test, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	app14, err := params.AppParams(14)
	if err != nil {
		t.Fatal(err)
	}
	app18, err := params.AppParams(18)
	if err != nil {
		t.Fatal(err)
	}
	cases := []whirCase{
		// test preset: l_skip 2, n_stack 8, k 3, three rounds; traces below 2^l_skip rows too.
		{"test/one", test, [][]int{{10, 7, 1, 0}}, [][]int{{3, 5, 2, 4}}},
		{"test/three", test, [][]int{{9, 9}, {10}, {4, 1, 0}}, [][]int{{2, 3}, {1}, {6, 1, 9}}},
		// wider than a chunk of the streamed codeword (kernels.StreamChunkColumns): 33 columns
		// of 2^10, traces across the chunks' edges, a short one spread with a stride.
		{"test/wide", test, [][]int{{10, 10, 9, 1}}, [][]int{{20, 9, 7, 3}}},
		// app-100bit (l_skip 4, k 4) at small stacked heights: one round at 2^14, two at 2^18.
		{"app14/two", app14, [][]int{{14, 12, 3}, {13}}, [][]int{{2, 5, 7}, {3}}},
		{"app18/one", app18, [][]int{{18, 16, 2}}, [][]int{{1, 3, 4}}},
		// other l_skip and k: 0, 1, 3, 5 and k 2, 4.
		{"small/l0k2", params.TestParamsSmall(0, 6, 2), [][]int{{6, 2}}, [][]int{{3, 2}}},
		{"small/l1k4", params.TestParamsSmall(1, 7, 4), [][]int{{8, 0}, {5}}, [][]int{{2, 3}, {4}}},
		{"small/l3k2", params.TestParamsSmall(3, 5, 2), [][]int{{8, 2}}, [][]int{{2, 7}}},
		{"small/l5k3", params.TestParamsSmall(5, 4, 3), [][]int{{9, 4, 0}, {9}}, [][]int{{1, 2, 3}, {2}}},
	}
	if testing.Short() {
		cases = append(cases[:4], cases[5:]...)
	}
	return cases
}

// TestWhirProverMatchesCpuref drives the device and the reference WHIR provers through the
// stage's call sequence (ProveWhir) with the same random challenges and compares every output,
// and counts the syncs of each call.
func TestWhirProverMatchesCpuref(t *testing.T) {
	for _, c := range whirCases(t) {
		// keep: the commitments keep their codewords (Backend.KeepStacked); else they keep Q
		// and the tree only, and OpenInitial rebuilds each codeword (driveWhir compares its
		// openings with cpuref's) and frees it again.
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", c.name, keep), func(t *testing.T) { testWhirProver(t, c, keep, false) })
		}
	}
}

// TestWhirDeviceRoundsMatchCpuref is TestWhirProverMatchesCpuref with each round's sumcheck rounds
// run by SumcheckRounds (the transcript and the folding grind on the device) against cpuref's
// prover driven by the stage's loop with the same transcript: the sums, the smallest witnesses
// (HostGrinder's), the bound values, one sync for the k rounds, and every later output.
func TestWhirDeviceRoundsMatchCpuref(t *testing.T) {
	for _, c := range whirCases(t) {
		t.Run(c.name, func(t *testing.T) { testWhirProver(t, c, true, true) })
	}
}

func testWhirProver(t *testing.T, c whirCase, keep, onDevice bool) {
	be, dev := openHost(t)
	be.KeepStacked(keep)
	r := rand.New(rand.NewPCG(41, uint64(len(c.name))))
	p := c.p
	var dcs, rcs []stark.Committed
	for i := range c.widths {
		dc, rc := commitWhirPair(t, be, p, randomTraces(r, c.logHeights[i], c.widths[i]))
		dcs, rcs = append(dcs, dc), append(rcs, rc)
	}
	want := 0
	if keep {
		want = len(dcs)
	}
	if n := liveNamed(dev, "stacked codeword"); n != want {
		t.Errorf("%d codewords live after the commits, want %d", n, want)
	}
	defer func() {
		if n := liveNamed(dev, "stacked codeword"); n != want {
			t.Errorf("%d codewords live after the openings, want %d", n, want)
		}
	}()
	m := p.LSkip + p.NStack
	mu := fieldrand.Fp4(r)
	uCube := make([]field.Fp4, m)
	for i := range uCube {
		uCube[i] = fieldrand.Fp4(r)
	}
	ref, err := cpuref.Backend{}.NewWhirProver(p, rcs, mu, uCube)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Release()
	s0 := dev.Stats().Syncs
	wp, err := be.NewWhirProver(p, dcs, mu, uCube)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Release()
	if n := dev.Stats().Syncs - s0; n != 0 {
		t.Errorf("NewWhirProver: %d syncs, want 0", n)
	}
	var tr *transcript.Transcript
	if onDevice {
		tr = new(transcript.Transcript)
		for range 5 + len(c.name)%8 {
			tr.Observe(fieldrand.Fp(r))
		}
	}
	driveWhir(t, r, p, dev, wp, ref, tr)
}

// liveNamed counts dev's live buffers named name.
func liveNamed(dev *gpu.Device, name string) int {
	n := 0
	for _, b := range dev.LiveBuffers() {
		if b.Name == name {
			n++
		}
	}
	return n
}

// whirSyncs runs f and fails unless it caused want syncs.
func whirSyncs(t *testing.T, dev *gpu.Device, what string, want int, f func() error) {
	t.Helper()
	s0 := dev.Stats().Syncs
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if n := dev.Stats().Syncs - s0; n != want {
		t.Errorf("%s: %d syncs, want %d", what, n, want)
	}
}

// driveWhir is ProveWhir's sequence of prover calls with random challenges: per round k ×
// (SumcheckRound, Fold), CommitFolded + EvalFolded (or FinalPoly in the last round), the
// openings, AccumulateWeight. With a transcript tr, each round's k sumcheck rounds are the
// device's SumcheckRounds against cpuref's rounds with tr's observes, grinds and samples.
func driveWhir(t *testing.T, r *rand.Rand, p params.SystemParams, dev *gpu.Device, wp, ref stark.WhirProver, tr *transcript.Transcript) {
	t.Helper()
	k := p.Whir.K
	lrs := p.LSkip + p.NStack + p.LogBlowup
	for round, rc := range p.Whir.Rounds {
		last := round == len(p.Whir.Rounds)-1
		if tr != nil {
			dr, ok := wp.(stark.WhirDeviceRounds)
			if !ok {
				t.Fatal("the device WHIR prover does not run its rounds on the device")
			}
			bits := p.Whir.FoldingPowBits
			before := *tr
			// More bits than one group grinds: refused before anything is encoded (the stage
			// then runs the rounds itself, with the backend's grinder).
			whirSyncs(t, dev, fmt.Sprintf("round %d SumcheckRounds refused", round), 0, func() error {
				if _, _, _, err := dr.SumcheckRounds(tr, k, kernels.SumcheckGrindMaxBits+1); !errors.Is(err, stark.ErrDeviceRoundsUnsupported) {
					t.Errorf("SumcheckRounds with %d bits: %v, want ErrDeviceRoundsUnsupported", kernels.SumcheckGrindMaxBits+1, err)
				}
				return nil
			})
			var polys [][2]field.Fp4
			var ws []field.Fp
			var alphas []field.Fp4
			whirSyncs(t, dev, fmt.Sprintf("round %d SumcheckRounds", round), 1, func() (err error) {
				polys, ws, alphas, err = dr.SumcheckRounds(tr, k, bits)
				return err
			})
			if !tr.Same(&before) {
				t.Fatal("SumcheckRounds changed the caller's transcript")
			}
			for j := range k {
				r1, r2, err := ref.SumcheckRound()
				if err != nil {
					t.Fatal(err)
				}
				if polys[j] != [2]field.Fp4{r1, r2} {
					t.Fatalf("round %d sumcheck %d: device %v, cpuref (%v, %v)", round, j, polys[j], r1, r2)
				}
				tr.ObserveExt(r1)
				tr.ObserveExt(r2)
				w, err := tr.GrindWith(context.Background(), transcript.HostGrinder{}, bits)
				if err != nil {
					t.Fatal(err)
				}
				alpha := tr.SampleExt()
				if ws[j] != w || alphas[j] != alpha {
					t.Fatalf("round %d sumcheck %d (%d bits): witness %d and bound value %v, want %d and %v", round, j, bits, ws[j], alphas[j], w, alpha)
				}
				if err := ref.Fold(alpha); err != nil {
					t.Fatal(err)
				}
			}
		}
		for j := range k {
			if tr != nil {
				break
			}
			what := fmt.Sprintf("round %d sumcheck %d", round, j)
			var d1, d2 field.Fp4
			whirSyncs(t, dev, what, 1, func() (err error) { d1, d2, err = wp.SumcheckRound(); return err })
			r1, r2, err := ref.SumcheckRound()
			if err != nil {
				t.Fatal(err)
			}
			if d1 != r1 || d2 != r2 {
				t.Fatalf("%s: device (%v, %v), cpuref (%v, %v)", what, d1, d2, r1, r2)
			}
			alpha := fieldrand.Fp4(r)
			whirSyncs(t, dev, what+" fold", 0, func() error { return wp.Fold(alpha) })
			if err := ref.Fold(alpha); err != nil {
				t.Fatal(err)
			}
		}
		var z0 field.Fp4
		if !last && tr != nil {
			// CommitRound: the commitment and the transcript's steps to the query-phase witness
			// on the device, against cpuref's commitment and evaluation with tr's steps.
			dc, ok := wp.(stark.WhirDeviceCommit)
			if !ok {
				t.Fatal("the device WHIR prover does not commit its rounds with the device transcript")
			}
			bits := p.Whir.QueryPhasePowBits
			before := *tr
			var root stark.Digest
			var zd, y0 field.Fp4
			var w field.Fp
			var err error
			s0 := dev.Stats().Syncs
			if root, zd, y0, w, err = dc.CommitRound(tr, lrs-1, bits); err != nil {
				t.Fatal(err)
			}
			// One sync, and one more for each slice of the search before the witness's.
			if n, want := dev.Stats().Syncs-s0, 1+int(w)/kernels.GrindSlice(dev, max(bits, 1)); n != want {
				t.Errorf("round %d CommitRound (witness %d): %d syncs, want %d", round, w, n, want)
			}
			if !tr.Same(&before) {
				t.Fatal("CommitRound changed the caller's transcript")
			}
			want, err := ref.CommitFolded(lrs - 1)
			if err != nil {
				t.Fatal(err)
			}
			if root != want {
				t.Fatalf("round %d: codeword roots differ", round)
			}
			tr.ObserveDigest(want)
			if z0 = tr.SampleExt(); zd != z0 {
				t.Fatalf("round %d: z %v, want %v", round, zd, z0)
			}
			wantY, err := ref.EvalFolded(z0)
			if err != nil || y0 != wantY {
				t.Fatalf("round %d: y %v, cpuref %v (%v)", round, y0, wantY, err)
			}
			tr.ObserveExt(wantY)
			wantW, err := tr.GrindWith(context.Background(), transcript.HostGrinder{}, bits)
			if err != nil {
				t.Fatal(err)
			}
			if w != wantW {
				t.Fatalf("round %d: %d-bit witness %d, want %d", round, bits, w, wantW)
			}
		} else if !last {
			var root stark.Digest
			whirSyncs(t, dev, "CommitFolded", 1, func() (err error) { root, err = wp.CommitFolded(lrs - 1); return err })
			want, err := ref.CommitFolded(lrs - 1)
			if err != nil {
				t.Fatal(err)
			}
			if root != want {
				t.Fatalf("round %d: codeword roots differ", round)
			}
			z0 = fieldrand.Fp4(r)
			var y0 field.Fp4
			whirSyncs(t, dev, "EvalFolded", 1, func() (err error) { y0, err = wp.EvalFolded(z0); return err })
			if want, err := ref.EvalFolded(z0); err != nil || y0 != want {
				t.Fatalf("round %d: EvalFolded %v, cpuref %v (%v)", round, y0, want, err)
			}
		} else {
			var fp []field.Fp4
			whirSyncs(t, dev, "FinalPoly", 1, func() (err error) { fp, err = wp.FinalPoly(); return err })
			want, err := ref.FinalPoly()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fp, want) {
				t.Fatalf("final polynomials differ")
			}
		}
		qbits := lrs - k
		idx := make([]int, rc.NumQueries)
		for q := range idx {
			idx[q] = r.IntN(1 << qbits)
		}
		if round == 0 {
			var got []stark.InitialOpening
			whirSyncs(t, dev, "OpenInitial", 1, func() (err error) { got, err = wp.OpenInitial(idx); return err })
			want, err := ref.OpenInitial(idx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("initial openings differ")
			}
		} else {
			var got []stark.CodewordOpening
			whirSyncs(t, dev, "OpenCodeword", 1, func() (err error) { got, err = wp.OpenCodeword(round-1, idx); return err })
			want, err := ref.OpenCodeword(round-1, idx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: codeword openings differ", round)
			}
		}
		if !last {
			gamma := fieldrand.Fp4(r)
			omega := field.TwoAdicGenerator(qbits)
			coefs := []field.Fp4{gamma}
			points := []field.Fp4{z0}
			gp := gamma
			for _, y := range idx {
				gp = gp.Mul(gamma)
				coefs = append(coefs, gp)
				points = append(points, field.Lift(omega.Exp(uint64(y))))
			}
			whirSyncs(t, dev, "AccumulateWeight", 0, func() error { return wp.AccumulateWeight(coefs, points) })
			if err := ref.AccumulateWeight(coefs, points); err != nil {
				t.Fatal(err)
			}
		}
		lrs--
	}
}

// TestWhirProverIrregularSequence calls the prover methods in orders the stage does not use
// (commit before any fold, folds without rounds, several evaluations per fold state, a weight
// update right after a fold) and compares with cpuref; the coefficient table is computed once
// per fold state.
func TestWhirProverIrregularSequence(t *testing.T) {
	be, dev := openHost(t)
	r := rand.New(rand.NewPCG(43, 44))
	p := params.TestParamsSmall(2, 6, 2)
	dc, rc := commitWhirPair(t, be, p, randomTraces(r, []int{8, 3, 1}, []int{2, 3, 5}))
	m := p.LSkip + p.NStack
	mu := fieldrand.Fp4(r)
	uCube := make([]field.Fp4, m)
	for i := range uCube {
		uCube[i] = fieldrand.Fp4(r)
	}
	ref, err := cpuref.Backend{}.NewWhirProver(p, []stark.Committed{rc}, mu, uCube)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Release()
	wp, err := be.NewWhirProver(p, []stark.Committed{dc}, mu, uCube)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Release()
	check := func(what string, got, want any, gerr, werr error) {
		t.Helper()
		if gerr != nil || werr != nil {
			t.Fatalf("%s: device error %v, cpuref error %v", what, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: device %v, cpuref %v", what, got, want)
		}
	}
	eval := func(what string) {
		t.Helper()
		z := fieldrand.Fp4(r)
		g, gerr := wp.EvalFolded(z)
		w, werr := ref.EvalFolded(z)
		check(what, g, w, gerr, werr)
	}
	round := func(what string) {
		t.Helper()
		g1, g2, gerr := wp.SumcheckRound()
		w1, w2, werr := ref.SumcheckRound()
		check(what, [2]field.Fp4{g1, g2}, [2]field.Fp4{w1, w2}, gerr, werr)
	}
	fold := func() {
		t.Helper()
		a := fieldrand.Fp4(r)
		if err := wp.Fold(a); err != nil {
			t.Fatal(err)
		}
		if err := ref.Fold(a); err != nil {
			t.Fatal(err)
		}
	}
	weight := func(n int) {
		t.Helper()
		coefs, points := make([]field.Fp4, n), make([]field.Fp4, n)
		for i := range n {
			coefs[i], points[i] = fieldrand.Fp4(r), fieldrand.Fp4(r)
			if i%3 == 0 { // base-field points among the others: AccumulateWeight puts them last
				points[i] = field.Lift(fieldrand.Fp(r))
			}
		}
		if err := wp.AccumulateWeight(coefs, points); err != nil {
			t.Fatal(err)
		}
		if err := ref.AccumulateWeight(coefs, points); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(what string, logDomain int) {
		t.Helper()
		g, gerr := wp.CommitFolded(logDomain)
		w, werr := ref.CommitFolded(logDomain)
		check(what, g, w, gerr, werr)
	}
	passes := func() int { return dev.Stats().PerKernel["whir_subset_pass"] }

	commit("commit before any fold", m)
	n0 := passes()
	eval("eval of the initial table")
	eval("second eval")
	if n := passes() - n0; n != 0 {
		t.Errorf("EvalFolded after CommitFolded recomputed the coefficients (%d passes)", n)
	}
	weight(3)
	round("round after a weight update")
	fold()
	fold()
	weight(2) // right after a recorded fold
	round("round after two folds")
	fold()
	eval("eval after a fold")
	commit("second codeword", m+p.LogBlowup-2)
	round("round")
	g, gerr := wp.FinalPoly()
	w, werr := ref.FinalPoly()
	check("final poly", g, w, gerr, werr)
	ys := []int{0, 3, 1, 3}
	gi, gerr := wp.OpenInitial(ys)
	wi, werr := ref.OpenInitial(ys)
	check("initial openings", gi, wi, gerr, werr)
	for idx := range 2 {
		gc, gerr := wp.OpenCodeword(idx, ys)
		wc, werr := ref.OpenCodeword(idx, ys)
		check(fmt.Sprintf("codeword %d openings", idx), gc, wc, gerr, werr)
	}
	// A recorded weight goes into w after an opening's download: the next round must see it,
	// also with a fold recorded between the weight and the opening, and before any call that
	// reads the coefficients.
	weight(2)
	gi, gerr = wp.OpenInitial(ys)
	wi, werr = ref.OpenInitial(ys)
	check("initial openings after a weight", gi, wi, gerr, werr)
	round("round after a weight and an opening")
	weight(3)
	fold()
	gc, gerr := wp.OpenCodeword(0, ys)
	wc, werr := ref.OpenCodeword(0, ys)
	check("codeword openings after a weight and a fold", gc, wc, gerr, werr)
	round("round after a weight, a fold and an opening")
	weight(1)
	eval("eval after a weight")
	round("round after a weight and an eval")
	// Fold down to one entry, then the table-of-one cases.
	for range m - 4 {
		fold()
	}
	eval("eval of a constant")
	commit("codeword of a constant", p.Whir.K)
	g, gerr = wp.FinalPoly()
	w, werr = ref.FinalPoly()
	check("final poly of a constant", g, w, gerr, werr)
	if _, _, err := wp.SumcheckRound(); err == nil {
		t.Error("SumcheckRound on a table of one entry succeeded")
	}
	if err := wp.Fold(field.Fp4One); err == nil {
		t.Error("Fold of a table of one entry succeeded")
	}
}

func TestWhirProverRejects(t *testing.T) {
	be, _ := openHost(t)
	r := rand.New(rand.NewPCG(45, 46))
	p := params.TestParamsSmall(2, 4, 2)
	dc, rc := commitWhirPair(t, be, p, randomTraces(r, []int{6}, []int{3}))
	uCube := make([]field.Fp4, p.LSkip+p.NStack)
	if _, err := be.NewWhirProver(p, []stark.Committed{rc}, field.Fp4One, uCube); err == nil {
		t.Error("a cpuref commitment was accepted")
	}
	if _, err := be.NewWhirProver(p, []stark.Committed{dc}, field.Fp4One, uCube[1:]); err == nil {
		t.Error("a point of the wrong length was accepted")
	}
	other := p
	other.NStack++
	if _, err := be.NewWhirProver(other, []stark.Committed{dc}, field.Fp4One, make([]field.Fp4, other.LSkip+other.NStack)); err == nil {
		t.Error("a commitment of another height was accepted")
	}
	wp, err := be.NewWhirProver(p, []stark.Committed{dc}, field.Fp4One, uCube)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wp.OpenCodeword(0, []int{0}); err == nil {
		t.Error("OpenCodeword without a codeword succeeded")
	}
	if _, err := wp.CommitFolded(p.LSkip + p.NStack - 1); err == nil {
		t.Error("a codeword shorter than the table was accepted")
	}
	if _, err := wp.OpenInitial([]int{1 << 10}); err == nil {
		t.Error("a query index beyond the tree was accepted")
	}
	if err := wp.AccumulateWeight([]field.Fp4{field.Fp4One}, nil); err == nil {
		t.Error("mismatched weight inputs were accepted")
	}
	wp.Release()
	wp.Release()
	if _, _, err := wp.SumcheckRound(); err == nil {
		t.Error("SumcheckRound after Release succeeded")
	}
	dc.Free()
	if _, err := be.NewWhirProver(p, []stark.Committed{dc}, field.Fp4One, uCube); err == nil {
		t.Error("a freed commitment was accepted")
	}
}

// TestWhirChainMatchesCpuref: ProveWhir with the device prover, which runs every round but the
// last as one chain (stark.WhirDeviceChain), gives cpuref's proof; the chain itself waits for
// the device once (no query-phase proof of work: on the host device a grind reads the sponge).
func TestWhirChainMatchesCpuref(t *testing.T) {
	for _, c := range whirCases(t) {
		if len(c.p.Whir.Rounds) < 2 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			be, dev := openHost(t)
			// The streamed codeword (the lean plan) for one case: its initial openings encode the
			// codeword again a chunk at a time, inside the chain.
			be.KeepStacked(c.name != "test/wide")
			r := rand.New(rand.NewPCG(43, uint64(len(c.name))))
			var dcs, rcs []stark.Committed
			for i := range c.widths {
				dc, rc := commitWhirPair(t, be, c.p, randomTraces(r, c.logHeights[i], c.widths[i]))
				dcs, rcs = append(dcs, dc), append(rcs, rc)
			}
			m := c.p.LSkip + c.p.NStack
			uCube := make([]field.Fp4, m)
			for i := range uCube {
				uCube[i] = fieldrand.Fp4(r)
			}
			var tr0 transcript.Transcript
			for range 7 {
				tr0.Observe(fieldrand.Fp(r))
			}
			for _, qpow := range []int{c.p.Whir.QueryPhasePowBits, 0} {
				p := c.p
				p.Whir.QueryPhasePowBits = qpow
				if qpow == 0 {
					p.Whir.MuPowBits = 0 // no grind: on the host device a grind reads the sponge
				}
				trd, trr := tr0, tr0
				s0 := dev.Stats().Syncs
				got, err := stark.ProveWhir(be, be.Stages().Grinder, &trd, p, dcs, uCube)
				if err != nil {
					t.Fatal(err)
				}
				// μ and the rounds but the last in one chain, the last round's query phase in one.
				if n := dev.Stats().Syncs - s0; qpow == 0 && n != 2 {
					t.Errorf("ProveWhir without grinds: %d syncs, want 2", n)
				}
				want, err := stark.ProveWhir(cpuref.Backend{}, transcript.HostGrinder{}, &trr, p, rcs, uCube)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("query-phase bits %d: the chained proof differs from cpuref's", qpow)
				}
				if !trd.Same(&trr) {
					t.Errorf("query-phase bits %d: the transcripts differ after WHIR", qpow)
				}
			}
			// The chain alone: one sync, the last round's query phase running behind it; waiting
			// for that is the second.
			p := c.p
			p.Whir.QueryPhasePowBits = 0
			tr := tr0
			tr.Observe(1)
			mu := tr.SampleExt()
			wp, err := be.NewWhirProver(p, dcs, mu, uCube)
			if err != nil {
				t.Fatal(err)
			}
			defer wp.Release()
			var run *stark.WhirChainRun
			whirSyncs(t, dev, "ChainRounds", 1, func() (err error) {
				run, err = wp.(stark.WhirDeviceChain).ChainRounds(&tr, p)
				return err
			})
			if run.Final == nil || len(run.FinalPoly) != 1<<p.LogFinalPolyLen() {
				t.Fatalf("the chain's final polynomial has %d coefficients (want %d), its query phase %v", len(run.FinalPoly), 1<<p.LogFinalPolyLen(), run.Final)
			}
			var fq *stark.WhirFinalQueries
			whirSyncs(t, dev, "the last round's query phase", 1, func() (err error) {
				fq, err = run.Final.Wait()
				return err
			})
			if n := p.Whir.Rounds[len(p.Whir.Rounds)-1].NumQueries; len(fq.QueryIndices) != n || len(fq.Codeword) != n {
				t.Errorf("the last round's query phase: %d indices and %d openings, want %d", len(fq.QueryIndices), len(fq.Codeword), n)
			}
			if _, err := run.Final.Wait(); !errors.Is(err, device.ErrWhirState) {
				t.Errorf("the last round's query phase waited for twice: %v, want ErrWhirState", err)
			}
			// μ made on the device too: still one sync, and the chain brings back μ; the prover
			// released without waiting for the last round's query phase frees its buffers.
			p.Whir.MuPowBits = 0
			tr = tr0
			live := len(dev.LiveBuffers())
			whirSyncs(t, dev, "NewWhirProverMu and ChainRounds", 1, func() error {
				wpm, err := be.NewWhirProverMu(p, dcs, &tr, uCube)
				if err != nil {
					return err
				}
				defer wpm.Release()
				run, err = wpm.(stark.WhirDeviceChain).ChainRounds(&tr, p)
				return err
			})
			if want := tr.SampleExt(); !run.MuOnDevice || run.Mu != want {
				t.Errorf("μ from the device %v (%t), want %v", run.Mu, run.MuOnDevice, want)
			}
			if n := len(dev.LiveBuffers()); n != live {
				t.Errorf("%d buffers live after the released prover, %d before it", n, live)
			}
			if _, err := run.Final.Wait(); !errors.Is(err, device.ErrWhirState) {
				t.Errorf("the last round's query phase of a released prover: %v", err)
			}
		})
	}
}
