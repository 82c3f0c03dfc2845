package kernels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// sumcheckTranscriptKernels returns the permutation's constants and a product sumcheck on the
// test device (the sumcheck closed with the test).
func sumcheckTranscriptKernels(t *testing.T) (*Poseidon2, *Sumcheck) {
	t.Helper()
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewSumcheck(testDev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Close)
	return h, sc
}

// TestSumcheckTranscriptRounds: two product-sumcheck rounds with their transcript steps on the
// device (EncodeSumcheckRound, the second round's fold at the logged bound value:
// EncodeFoldRoundLogged) give the sums, bound values and sponge state of the host's formulas and
// transcript.Transcript, from every absorb index and from a partly used sample buffer.
func TestSumcheckTranscriptRounds(t *testing.T) {
	h, sc := sumcheckTranscriptKernels(t)
	const cols, logRows = 3, 4
	for pending := range 8 {
		r := rand.New(rand.NewPCG(71, uint64(pending)))
		var ht transcript.Transcript
		for range 8 {
			ht.Observe(fieldrand.Fp(r))
		}
		ht.Sample() // sample index 7
		for range pending {
			ht.Observe(fieldrand.Fp(r))
		}
		tt, f, w, src, dst := transcriptRoundFixture(t, h, &ht, 6, r, cols, logRows)
		n := cols << logRows
		b := testDev.Batch()
		if err := sc.EncodeRound(b, src); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeSumcheckRound(b, sc, 0); err != nil {
			t.Fatal(err)
		}
		if err := sc.EncodeFoldRoundLogged(b, src, dst, tt.Log, 2); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeSumcheckRound(b, sc, 3); err != nil {
			t.Fatal(err)
		}
		var got []field.Fp4
		if k := syncs(t, func() (err error) { got, err = tt.ReadLog(6); return err }); k != 1 {
			t.Errorf("%d pending: %d syncs, want 1", pending, k)
		}

		a1, a2 := refRound(f, w, cols, logRows, 1<<logRows)
		ht.ObserveExt(a1)
		ht.ObserveExt(a2)
		u1 := ht.SampleExt()
		ff, fw := make([]field.Fp4, n/2), make([]field.Fp4, n/2)
		refFold(f, 1<<logRows, 1<<(logRows-1), cols, logRows-1, u1, ff)
		refFold(w, 1<<logRows, 1<<(logRows-1), cols, logRows-1, u1, fw)
		b1, b2 := refRound(ff, fw, cols, logRows-1, 1<<(logRows-1))
		ht.ObserveExt(b1)
		ht.ObserveExt(b2)
		u2 := ht.SampleExt()
		want := []field.Fp4{a1, a2, u1, b1, b2, u2}
		sameTranscript(t, fmt.Sprintf("%d pending", pending), tt, got, want, &ht)
		b = testDev.Batch()
		if tt.EncodeSumcheckRound(b, sc, 4) == nil {
			t.Error("a transcript step past the log's end was accepted")
		}
		if sc.EncodeFoldRoundLogged(b, src, dst, tt.Log, 6) == nil {
			t.Error("a fold at a bound value past the log's end was accepted")
		}
	}
}

// TestZcTrRoundsRejects: ZcTrRounds and EncodeZcRound refuse shapes they cannot run (the values
// themselves are checked against cpuref in backend/device's TestConstraintDeviceRoundsMatchCpuref).
func TestZcTrRoundsRejects(t *testing.T) {
	if _, err := NewZcTrRounds(testDev, 0, 3, 2); err == nil {
		t.Error("no traces: accepted")
	}
	if _, err := NewZcTrRounds(testDev, 1, 65, 2); err == nil {
		t.Error("degree 65: accepted")
	}
	z, err := NewZcTrRounds(testDev, 2, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	seg := ZcTrSegment{Mix: make([][3]field.Fp4, 2), NLift: []int{2, 1}, Xi: []field.Fp4{{5}, {7}}}
	if err := z.Write(seg); err != nil {
		t.Fatal(err)
	}
	bad := seg
	bad.Xi = []field.Fp4{{5}, field.Fp4One}
	if z.Write(bad) == nil {
		t.Error("ξ = 1: accepted")
	}
	bad = seg
	bad.NLift = []int{2}
	if z.Write(bad) == nil {
		t.Error("ñ of one trace for two: accepted")
	}
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := h.NewDeviceTranscript(5)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	sums := allocWords(t, 2*12*3)
	b := testDev.Batch()
	if tt.EncodeZcRound(b, z, sums, 36, 3, 0) == nil {
		t.Error("round 3 of 2: accepted")
	}
	if tt.EncodeZcRound(b, z, sums, 36, 1, 1) == nil {
		t.Error("a step past the log's end: accepted")
	}
	if tt.EncodeZcRound(b, z, sums, 24, 1, 0) == nil {
		t.Error("sums narrower than 12 uints a point: accepted")
	}
	if err := tt.EncodeZcRound(b, z, sums, 36, 1, 0); err != nil {
		t.Error(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	z.Close()
	if tt.EncodeZcRound(testDev.Batch(), z, sums, 36, 1, 0) == nil {
		t.Error("a closed ZcTrRounds: accepted")
	}
}

// TestSumcheckTranscriptGrind: the transcript step with WHIR's folding proof of work gives the
// host's sums, the smallest witness (transcript.GrindWith with HostGrinder), the bound value and
// the sponge state, for 0 to 8 bits from every absorb index; a second step after it folds at the
// logged bound value; more bits than SumcheckGrindMaxBits are refused.
func TestSumcheckTranscriptGrind(t *testing.T) {
	h, sc := sumcheckTranscriptKernels(t)
	const cols, logRows = 2, 3
	for bits := range 9 {
		pending := (3 * bits) % 8
		r := rand.New(rand.NewPCG(73, uint64(bits)))
		var ht transcript.Transcript
		for range 8 + pending {
			ht.Observe(fieldrand.Fp(r))
		}
		tt, f, w, src, dst := transcriptRoundFixture(t, h, &ht, 8, r, cols, logRows)
		n := cols << logRows
		b := testDev.Batch()
		if err := sc.EncodeRound(b, src); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeSumcheckRoundGrind(b, sc, 0, bits); err != nil {
			t.Fatal(err)
		}
		if err := sc.EncodeFoldRoundLogged(b, src, dst, tt.Log, 3); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeSumcheckRoundGrind(b, sc, 4, bits); err != nil {
			t.Fatal(err)
		}
		got, err := tt.ReadLog(8)
		if err != nil {
			t.Fatal(err)
		}

		var want []field.Fp4
		step := func(s1, s2 field.Fp4) field.Fp4 {
			ht.ObserveExt(s1)
			ht.ObserveExt(s2)
			wit, err := ht.GrindWith(context.Background(), transcript.HostGrinder{}, bits)
			if err != nil {
				t.Fatal(err)
			}
			u := ht.SampleExt()
			want = append(want, s1, s2, field.Lift(wit), u)
			return u
		}
		a1, a2 := refRound(f, w, cols, logRows, 1<<logRows)
		u1 := step(a1, a2)
		ff, fw := make([]field.Fp4, n/2), make([]field.Fp4, n/2)
		refFold(f, 1<<logRows, 1<<(logRows-1), cols, logRows-1, u1, ff)
		refFold(w, 1<<logRows, 1<<(logRows-1), cols, logRows-1, u1, fw)
		step(refRound(ff, fw, cols, logRows-1, 1<<(logRows-1)))
		sameTranscript(t, fmt.Sprintf("%d bits", bits), tt, got, want, &ht)
	}
	tt, err := h.NewDeviceTranscript(4)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	if tt.EncodeSumcheckRoundGrind(testDev.Batch(), sc, 0, SumcheckGrindMaxBits+1) == nil {
		t.Error("a proof of work above SumcheckGrindMaxBits was accepted")
	}
	if tt.EncodeSumcheckRoundGrind(testDev.Batch(), sc, 1, 5) == nil {
		t.Error("a transcript step past the log's end was accepted")
	}
}

// transcriptRoundFixture returns a device transcript of a log of n values in ht's state, random
// product tables of 2^logRows rows (f, w: their values; src: on the device) and room for their
// fold (dst).
func transcriptRoundFixture(t *testing.T, h *Poseidon2, ht *transcript.Transcript, n int, r *rand.Rand, cols, logRows int) (*DeviceTranscript, []field.Fp4, []field.Fp4, ProductTables, ProductTables) {
	t.Helper()
	tt, err := h.NewDeviceTranscript(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tt.Close)
	if err := tt.SetState(ht.State()); err != nil {
		t.Fatal(err)
	}
	m := cols << logRows
	f, w := randFp4s(r, m), randFp4s(r, m)
	src := ProductTables{F: uploadFp4(t, f), W: uploadFp4(t, w), Cols: cols, LogRows: logRows, Stride: 1 << logRows}
	dst := ProductTables{F: allocFp4(t, m/2), W: allocFp4(t, m/2), Cols: cols, LogRows: logRows - 1, Stride: 1 << (logRows - 1)}
	return tt, f, w, src, dst
}

// sameTranscript checks a device transcript's log values got against want and its sponge (state
// and indices) against ht's.
func sameTranscript(t *testing.T, what string, tt *DeviceTranscript, got, want []field.Fp4, ht *transcript.Transcript) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: log[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
	words := make([]uint32, poseidon2.Width+2)
	if err := tt.state.Read(words, 0); err != nil {
		t.Fatal(err)
	}
	st, ai, si := ht.State()
	for i, x := range st {
		if CanonicalOf(Mont(words[i])) != x {
			t.Errorf("%s: state word %d differs", what, i)
		}
	}
	if int(words[16]) != ai || int(words[17]) != si {
		t.Errorf("%s: indices %d, %d, want %d, %d", what, words[16], words[17], ai, si)
	}
}

// TestReadLogState: the log's first n values and the transcript's state come back in one
// download; a log without room for the state behind n values is refused.
func TestReadLogState(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(73, 1))
	var ht transcript.Transcript
	for range 13 {
		ht.Observe(fieldrand.Fp(r))
	}
	const n = 5
	tt, err := h.NewDeviceTranscript(n + LogStateLen)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	if err := tt.SetState(ht.State()); err != nil {
		t.Fatal(err)
	}
	want := randFp4s(r, n)
	if err := tt.Log.Write(0, Mont4Slice(want)); err != nil {
		t.Fatal(err)
	}
	var got []field.Fp4
	var st [poseidon2.Width]field.Fp
	var ai, si int
	if k := syncs(t, func() (err error) { got, st, ai, si, err = tt.ReadLogState(n); return err }); k != 1 {
		t.Errorf("%d syncs, want 1", k)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("log[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	wst, wai, wsi := ht.State()
	if st != wst || ai != wai || si != wsi {
		t.Errorf("state %v, %d, %d; want %v, %d, %d", st, ai, si, wst, wai, wsi)
	}
	if _, _, _, _, err := tt.ReadLogState(n + 1); err == nil {
		t.Error("ReadLogState without room for the state: accepted")
	}
}

// TestEncodeSetState: the state set by the kernel in stream order is the transcript's, and an
// observe and a sample after it (tr_observe_sample) continue from it as the host's transcript
// does, from every kind of state: observes pending, outputs left (p2g_sample4 takes 1–3 of them
// before its permutation), none left; invalid indices are refused before anything is encoded.
func TestEncodeSetState(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(74, 1))
	for _, c := range []struct{ obs, samples, devObs int }{
		{0, 0, 4}, {5, 0, 4}, {8, 0, 4}, {13, 4, 4}, {8, 5, 0}, {8, 6, 0}, {8, 7, 0}, {8, 8, 0}, {16, 4, 0}, {3, 0, 0},
	} {
		var ht transcript.Transcript
		for range c.obs {
			ht.Observe(fieldrand.Fp(r))
		}
		for range c.samples {
			ht.Sample()
		}
		tt, err := h.NewDeviceTranscript(2 + LogStateLen)
		if err != nil {
			t.Fatal(err)
		}
		vals := randFp4s(r, 1)
		src, err := gpu.UploadArray(testDev, "observed", Mont4Slice(vals))
		if err != nil {
			t.Fatal(err)
		}
		b := testDev.Batch()
		hs, hai, hsi := ht.State()
		if err := tt.EncodeSetState(b, hs, hai, hsi); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeObserveSample(b, src.Buffer, 0, c.devObs, true, 0); err != nil {
			t.Fatal(err)
		}
		got, st, ai, si, err := tt.ReadLogState(1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.devObs {
			ht.Observe(vals[0][i])
		}
		if z := ht.SampleExt(); got[0] != z {
			t.Errorf("%+v: sample %v, want %v", c, got[0], z)
		}
		wst, wai, wsi := ht.State()
		if st != wst || ai != wai || si != wsi {
			t.Errorf("%+v: state %v, %d, %d; want %v, %d, %d", c, st, ai, si, wst, wai, wsi)
		}
		src.Free()
		tt.Close()
	}
	tt, err := h.NewDeviceTranscript(1)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	var ht transcript.Transcript
	st, _, _ := ht.State()
	before := testDev.Totals().Dispatches
	if err := tt.EncodeSetState(testDev.Batch(), st, 8, 0); err == nil {
		t.Error("absorb index 8: accepted")
	}
	if err := tt.EncodeSetState(testDev.Batch(), st, 0, 9); err == nil {
		t.Error("sample index 9: accepted")
	}
	if d := testDev.Totals().Dispatches; d != before {
		t.Errorf("%d dispatches encoded for refused states", d-before)
	}
}

// TestEncodeWhirQueries: whir_tr_queries against the host transcript (CheckWitness, SampleBits
// per query, SampleExt) and AccumulateWeight's terms, from states with 0–7 outputs left and
// observes pending, with and without a grind, for a witness the grind did not find too.
func TestEncodeWhirQueries(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(75, 2))
	for _, c := range []struct {
		obs, samples, n, qbits int
		grind, none            bool
	}{
		{8, 0, 193, 20, true, false}, {13, 3, 88, 19, true, false}, {8, 7, 1, 5, false, false},
		{3, 0, 0, 8, true, false}, {16, 2, 9, 1, false, false}, {8, 1, 17, 12, true, true},
	} {
		var ht transcript.Transcript
		for range c.obs {
			ht.Observe(fieldrand.Fp(r))
		}
		for range c.samples {
			ht.Sample()
		}
		tt, err := h.NewDeviceTranscript(3 + LogStateLen)
		if err != nil {
			t.Fatal(err)
		}
		z0 := randFp4s(r, 1)[0]
		if err := tt.Log.Write(0, Mont4Slice([]field.Fp4{z0})); err != nil {
			t.Fatal(err)
		}
		w := uint32(fieldrand.Fp(r))
		if c.none {
			w = grindNone
		}
		wit, err := gpu.UploadArray(testDev, "witness", []uint32{w})
		if err != nil {
			t.Fatal(err)
		}
		idx, err := gpu.AllocArray[uint32](testDev, "indices", c.n+1)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := gpu.AllocArray[Mont4](testDev, "weights", 2*(c.n+1))
		if err != nil {
			t.Fatal(err)
		}
		q := WhirQueries{N: c.n, QBits: c.qbits, Idx: idx, ZAt: 0, At: 1, Weights: pc}
		if c.grind {
			q.Witness = wit
		}
		b := testDev.Batch()
		hs, hai, hsi := ht.State()
		if err := tt.EncodeSetState(b, hs, hai, hsi); err != nil {
			t.Fatal(err)
		}
		if err := tt.EncodeWhirQueries(b, q); err != nil {
			t.Fatal(err)
		}
		log, st, ai, si, err := tt.ReadLogState(3)
		if err != nil {
			t.Fatal(err)
		}
		gotIdx := make([]uint32, c.n+1)
		gotPC := make([]Mont4, 2*(c.n+1))
		if err := idx.Read(gotIdx, 0); err != nil {
			t.Fatal(err)
		}
		if err := pc.Read(gotPC, 0); err != nil {
			t.Fatal(err)
		}
		wantW := uint32(0)
		if c.grind {
			wantW = w
			obs := field.Fp(w)
			if c.none {
				obs = 0
			}
			ht.Observe(obs)
			ht.Sample()
		}
		if gotIdx[c.n] != wantW || (c.grind && !c.none && log[1] != (field.Fp4{field.Fp(w)})) {
			t.Errorf("%+v: witness %d, log %v; want %d", c, gotIdx[c.n], log[1], wantW)
		}
		omega := field.TwoAdicGenerator(c.qbits)
		want := make([]uint32, c.n)
		for i := range want {
			want[i] = ht.SampleBits(c.qbits)
		}
		gamma := ht.SampleExt()
		for i := range want {
			if gotIdx[i] != want[i] {
				t.Fatalf("%+v: index %d = %d, want %d", c, i, gotIdx[i], want[i])
			}
		}
		if log[2] != gamma {
			t.Errorf("%+v: γ %v, want %v", c, log[2], gamma)
		}
		gp := gamma
		for i := 0; i <= c.n; i++ {
			pt := z0
			if i > 0 {
				gp = gp.Mul(gamma)
				pt = field.Lift(omega.Exp(uint64(want[i-1])))
			}
			if Fp4Of(gotPC[2*i]) != pt || Fp4Of(gotPC[2*i+1]) != gp {
				t.Fatalf("%+v: weight term %d = (%v, %v), want (%v, %v)", c, i, Fp4Of(gotPC[2*i]), Fp4Of(gotPC[2*i+1]), pt, gp)
			}
		}
		wst, wai, wsi := ht.State()
		if st != wst || ai != wai || si != wsi {
			t.Errorf("%+v: state %v, %d, %d; want %v, %d, %d", c, st, ai, si, wst, wai, wsi)
		}
		wit.Free()
		idx.Free()
		pc.Free()
		tt.Close()
	}
}
