package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// DeviceTranscript is a copy of a stage's transcript in device memory, with which a sumcheck's
// rounds follow one another on the device without waiting for the host (the group sponge of
// poseidon2_group.h: GKR's layers in gkr.metal, gkr_tr_round, gkr_tr_small_rounds and
// gkr_tr_layer_end; the product sumcheck's rounds, sc_tr_round; the batch constraint
// sumcheck's rounds, zc_tr_round with ZcTrRounds): the sponge state (16 Montgomery
// words, then the absorb and sample indices of transcript.Transcript) and Log, the Fp4 values the
// kernels write (the rounds' sums and bound values, GKR's claims, μ and λ), which the stage
// downloads once and replays through its own transcript.
type DeviceTranscript struct {
	dev   *gpu.Device
	rc    *gpu.Array[Mont]
	state *gpu.Array[uint32]
	Log   *gpu.Array[Mont4]
}

// NewDeviceTranscript allocates the state and a log of n Fp4 values; h gives the permutation's
// constants.
func (h *Poseidon2) NewDeviceTranscript(n int) (*DeviceTranscript, error) {
	if n < 1 {
		return nil, fmt.Errorf("kernels: DeviceTranscript: a log of %d values", n)
	}
	t := &DeviceTranscript{dev: h.dev, rc: h.rc}
	var err error
	if t.state, err = gpu.AllocArray[uint32](h.dev, "device transcript state", poseidon2.Width+2); err != nil {
		return nil, err
	}
	if t.Log, err = gpu.AllocArray[Mont4](h.dev, "device transcript log", n); err != nil {
		t.state.Free()
		return nil, err
	}
	return t, nil
}

// Close frees the buffers.
func (t *DeviceTranscript) Close() {
	if t.state != nil {
		t.state.Free()
		t.Log.Free()
		t.state, t.Log = nil, nil
	}
}

// live reports a use after Close.
func (t *DeviceTranscript) live() error {
	if t.state == nil {
		return fmt.Errorf("kernels: DeviceTranscript used after Close")
	}
	return nil
}

// SetState uploads a transcript's state (transcript.Transcript.State).
func (t *DeviceTranscript) SetState(state [poseidon2.Width]field.Fp, absorbIdx, sampleIdx int) error {
	w, err := t.stateWords(state, absorbIdx, sampleIdx)
	if err != nil {
		return err
	}
	return t.state.Write(0, w[:])
}

// EncodeSetState is SetState in stream order (tr_set_state): an upload waits for the work
// encoded before it (a sync in all but name), this kernel for nothing.
func (t *DeviceTranscript) EncodeSetState(b *gpu.Batch, state [poseidon2.Width]field.Fp, absorbIdx, sampleIdx int) error {
	w, err := t.stateWords(state, absorbIdx, sampleIdx)
	if err != nil {
		return err
	}
	dispatchTrSetState(b, gpu.D1(1), gpu.D1(1), t.state.Buffer, trStateParams{s0: w[0], s1: w[1], s2: w[2], s3: w[3], s4: w[4], s5: w[5],
		s6: w[6], s7: w[7], s8: w[8], s9: w[9], s10: w[10], s11: w[11], s12: w[12], s13: w[13], s14: w[14], s15: w[15],
		absorbIdx: w[16], sampleIdx: w[17]})
	return b.Err()
}

// stateWords is the state buffer's contents for a transcript's state.
func (t *DeviceTranscript) stateWords(state [poseidon2.Width]field.Fp, absorbIdx, sampleIdx int) ([poseidon2.Width + 2]uint32, error) {
	var w [poseidon2.Width + 2]uint32
	if err := t.live(); err != nil {
		return w, err
	}
	if absorbIdx < 0 || absorbIdx >= 8 || sampleIdx < 0 || sampleIdx > 8 {
		return w, fmt.Errorf("kernels: DeviceTranscript: indices %d, %d", absorbIdx, sampleIdx)
	}
	for i, x := range state {
		w[i] = uint32(MontOf(x))
	}
	w[poseidon2.Width], w[poseidon2.Width+1] = uint32(absorbIdx), uint32(sampleIdx)
	return w, nil
}

// groupFor is the one group of a transcript kernel: want threads on GPUs, 16 on the host device
// (its work items are fibers). The group's sponge (poseidon2_group.h) needs at least 16.
func (t *DeviceTranscript) groupFor(kernel string, want int) (int, error) {
	n := 16
	if !isHost(t.dev) {
		n = p2gGroup(t.dev, kernel, groupSize(t.dev, kernel, want))
	}
	if n < 16 {
		return 0, fmt.Errorf("kernels: %s: groups of %d threads on this device (SIMD width %d), the sponge needs 16 in one SIMD group",
			kernel, n, t.dev.KernelLimits(kernel).SIMDWidth)
	}
	return n, nil
}

// ReadLog downloads the first n values of the log (the stage's one sync).
func (t *DeviceTranscript) ReadLog(n int) ([]field.Fp4, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	v := make([]Mont4, n)
	if err := t.Log.Read(v, 0); err != nil {
		return nil, err
	}
	out := make([]field.Fp4, n)
	for i, m := range v {
		out[i] = Fp4Of(m)
	}
	return out, nil
}

// LogStateLen is the number of Fp4 entries past a log's values that ReadLogState needs: the
// state's 18 words.
const LogStateLen = (poseidon2.Width + 2 + 3) / 4

// ReadLogState is ReadLog with the transcript's state after the encoded work: the state is copied
// behind the first n values (the log must hold n + LogStateLen), and one download brings both
// (the stage's one sync). It returns the sponge (canonical) and the absorb and sample indices.
func (t *DeviceTranscript) ReadLogState(n int) ([]field.Fp4, [poseidon2.Width]field.Fp, int, int, error) {
	var sponge [poseidon2.Width]field.Fp
	if err := t.live(); err != nil {
		return nil, sponge, 0, 0, err
	}
	if n < 0 || n+LogStateLen > t.Log.Len() {
		return nil, sponge, 0, 0, fmt.Errorf("kernels: DeviceTranscript.ReadLogState: %d values and the state in a log of %d", n, t.Log.Len())
	}
	b := t.dev.Batch().Copy(t.Log.Buffer, 16*n, t.state.Buffer, 0, 4*(poseidon2.Width+2))
	if err := b.Err(); err != nil {
		return nil, sponge, 0, 0, err
	}
	v := make([]Mont4, n+LogStateLen)
	if err := t.Log.Read(v, 0); err != nil {
		return nil, sponge, 0, 0, err
	}
	out := make([]field.Fp4, n)
	for i, m := range v[:n] {
		out[i] = Fp4Of(m)
	}
	w := make([]Mont, 0, 4*LogStateLen)
	for _, m := range v[n:] {
		w = append(w, m[:]...)
	}
	for i := range sponge {
		sponge[i] = CanonicalOf(w[i])
	}
	return out, sponge, int(w[poseidon2.Width]), int(w[poseidon2.Width+1]), nil
}

// readState downloads the sponge (canonical), waiting for the work encoded before.
func (t *DeviceTranscript) readState() ([poseidon2.Width]field.Fp, error) {
	var sponge [poseidon2.Width]field.Fp
	if err := t.live(); err != nil {
		return sponge, err
	}
	w := make([]uint32, poseidon2.Width)
	if err := t.state.Read(w, 0); err != nil {
		return sponge, err
	}
	for i := range sponge {
		sponge[i] = CanonicalOf(Mont(w[i]))
	}
	return sponge, nil
}

// sumcheckTrScratch is the threadgroup memory of sc_tr_round: the sponge's exchanges and outputs,
// and the round constants (poseidon2_group.h).
const sumcheckTrScratch = (48 + p2gRCLen) * 4

// EncodeSumcheckRound encodes the transcript step of the product-sumcheck round s encoded last
// (Sumcheck.EncodeRound, EncodeFoldRound or EncodeFoldRoundLogged): its sums s(1), s(2) into
// Log[at], Log[at+1], observed, and the bound value sampled into Log[at+2], where
// EncodeFoldRoundLogged reads it (sc_tr_round).
func (t *DeviceTranscript) EncodeSumcheckRound(b *gpu.Batch, s *Sumcheck, at int) error {
	if err := t.live(); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	if at < 0 || at+3 > t.Log.Len() {
		return fmt.Errorf("kernels: DeviceTranscript: a round at %d of a log of %d", at, t.Log.Len())
	}
	tpg, err := t.groupFor("sc_tr_round", 32)
	if err != nil {
		return err
	}
	dispatchScTrRound(b, gpu.D1(1), gpu.D1(uint32(tpg)), s.result.Buffer, t.Log.Buffer, t.state.Buffer, t.rc.Buffer,
		scTrRoundParams{at: uint32(at)}, sumcheckTrScratch)
	return b.Err()
}

// SumcheckGrindMaxBits is the most proof-of-work bits EncodeSumcheckRoundGrind searches: its one
// group tests 2^bits candidates on average (WHIR's folding grinds have 0–5 in the presets).
const SumcheckGrindMaxBits = 10

// EncodeSumcheckRoundGrind is EncodeSumcheckRound with a proof of work of bits between the
// observes and the sample (WHIR's folding grind): Log[at], Log[at+1] the sums, Log[at+2] the
// smallest witness (w, 0, 0, 0) (0 when bits is 0: no grind, as transcript.GrindWith), Log[at+3]
// the bound value (sc_tr_round_grind).
func (t *DeviceTranscript) EncodeSumcheckRoundGrind(b *gpu.Batch, s *Sumcheck, at, bits int) error {
	if t.state == nil {
		return fmt.Errorf("kernels: DeviceTranscript used after Close")
	}
	if err := s.live(); err != nil {
		return err
	}
	if at < 0 || at+4 > t.Log.Len() {
		return fmt.Errorf("kernels: DeviceTranscript: a round at %d of a log of %d", at, t.Log.Len())
	}
	if bits < 0 || bits > SumcheckGrindMaxBits {
		return fmt.Errorf("kernels: DeviceTranscript: a %d-bit proof of work (at most %d here)", bits, SumcheckGrindMaxBits)
	}
	tpg, err := t.groupFor("sc_tr_round_grind", 512)
	if err != nil {
		return err
	}
	tpg &^= 15 // whole candidates of 16 threads
	s16 := tpg / 16
	dispatchScTrRoundGrind(b, gpu.D1(1), gpu.D1(uint32(tpg)), s.result.Buffer, t.Log.Buffer, t.state.Buffer, t.rc.Buffer,
		scTrGrindParams{at: uint32(at), bits: uint32(bits)}, uint32(4*(p2gRCLen+17+33*s16)))
	return b.Err()
}

// trObserveSampleScratch is tr_observe_sample's threadgroup memory (as sc_tr_round's).
const trObserveSampleScratch = sumcheckTrScratch

// EncodeObserveSample encodes a transcript step over values another kernel left in device
// memory: the n Montgomery words of src from word off observed, then, when sample, an Fp4
// sampled into Log[at] (tr_observe_sample).
func (t *DeviceTranscript) EncodeObserveSample(b *gpu.Batch, src *gpu.Buffer, off, n int, sample bool, at int) error {
	if err := t.live(); err != nil {
		return err
	}
	if off < 0 || n < 0 || 4*(off+n) > src.Size() {
		return fmt.Errorf("kernels: DeviceTranscript: %d words at %d of %s (%d bytes)", n, off, src.Name(), src.Size())
	}
	s := uint32(0)
	if sample {
		if at < 0 || at >= t.Log.Len() {
			return fmt.Errorf("kernels: DeviceTranscript: a sample at %d of a log of %d", at, t.Log.Len())
		}
		s = 1
	}
	tpg, err := t.groupFor("tr_observe_sample", 32)
	if err != nil {
		return err
	}
	dispatchTrObserveSample(b, gpu.D1(1), gpu.D1(uint32(tpg)), src, t.Log.Buffer, t.state.Buffer, t.rc.Buffer,
		trObserveSampleParams{srcOff: uint32(off), n: uint32(n), sample: s, at: uint32(max(at, 0))}, trObserveSampleScratch)
	return b.Err()
}

// EncodeObserveRoot is EncodeObserveSample of tree's root (as transcript.ObserveDigest), then an
// Fp4 sampled into Log[at]. tree's kernels must have been encoded before.
func (t *DeviceTranscript) EncodeObserveRoot(b *gpu.Batch, tree *MerkleTree, at int) error {
	return t.EncodeObserveSample(b, tree.layers.Buffer, poseidon2.DigestSize*layerOffset(tree.QueryStride(), tree.depth), poseidon2.DigestSize, true, at)
}

// State is the sponge's buffer: 16 Montgomery words (a state as Grind.EncodeSearchFrom reads
// it), then the absorb and sample indices.
func (t *DeviceTranscript) State() *gpu.Buffer { return t.state.Buffer }

// WhirQueries are the inputs of EncodeWhirQueries: a WHIR round's query phase after its grind.
type WhirQueries struct {
	// Witness is the grind's result (Grind.Result); nil when no proof of work was ground (0
	// bits: nothing observed, no check sampled).
	Witness *gpu.Array[uint32]
	// N indices of QBits bits are sampled into Idx[0 .. N), the witness as found to Idx[N]
	// (0xffffffff: the search had none).
	N, QBits int
	Idx      *gpu.Array[uint32]
	// ZAt is the log entry of the round's out-of-domain point z0; At receives (w, 0, 0, 0) and
	// At + 1 γ.
	ZAt, At int
	// Weights receives the next round's weight terms in AccumulateWeight's layout, 2(N+1) Fp4:
	// (z0, γ), then (ω^idx_i, γ^(i+2)) with ω of order 2^QBits.
	Weights *gpu.Array[Mont4]
}

// EncodeWhirQueries encodes a WHIR round's transcript steps after its query-phase grind
// (whir_tr_queries): the witness observed and checked, the query indices and γ sampled, the
// next round's weight terms written (see WhirQueries).
func (t *DeviceTranscript) EncodeWhirQueries(b *gpu.Batch, q WhirQueries) error {
	if err := t.live(); err != nil {
		return err
	}
	switch {
	case q.N < 0 || q.Idx == nil || q.Idx.Len() < q.N+1 || q.Weights == nil || q.Weights.Len() < 2*(q.N+1):
		return fmt.Errorf("kernels: DeviceTranscript: %d queries for index and weight buffers of %d and %d", q.N, lenOf(q.Idx), lenOf(q.Weights))
	case q.QBits < 0 || q.QBits > field.TwoAdicity || q.QBits > 30:
		return fmt.Errorf("kernels: DeviceTranscript: %d-bit query indices", q.QBits)
	case q.ZAt < 0 || q.ZAt >= t.Log.Len() || q.At < 0 || q.At+2 > t.Log.Len():
		return fmt.Errorf("kernels: DeviceTranscript: log entries %d and %d of a log of %d", q.ZAt, q.At, t.Log.Len())
	}
	tpg, err := t.groupFor("whir_tr_queries", 64)
	if err != nil {
		return err
	}
	witness, grind := q.Idx.Buffer, uint32(0)
	if q.Witness != nil {
		witness, grind = q.Witness.Buffer, 1
	}
	omega := MontOf(field.TwoAdicGenerator(q.QBits))
	dispatchWhirTrQueries(b, gpu.D1(1), gpu.D1(uint32(tpg)), witness, t.Log.Buffer, t.state.Buffer, t.rc.Buffer, q.Idx.Buffer, q.Weights.Buffer,
		whirTrQueriesParams{n: uint32(q.N), mask: uint32(1)<<q.QBits - 1, omega: uint32(omega), grind: grind, zAt: uint32(q.ZAt), at: uint32(q.At)},
		trObserveSampleScratch)
	return b.Err()
}

// lenOf is a's length, 0 for nil.
func lenOf[T any](a *gpu.Array[T]) int {
	if a == nil {
		return 0
	}
	return a.Len()
}
