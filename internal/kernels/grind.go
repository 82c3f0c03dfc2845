package kernels

import (
	"context"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// Grind launches shaders/common/grind.metal: the search for the smallest w in [0, p) such that, with
// s = state and s[absorbIdx] = w, the canonical value of Permute(s)[7] has its low bits bits
// zero (transcript.WitnessOK). grind_search tests a range of candidates and leaves one minimum
// per threadgroup, grind_min reduces those to one value: both deterministic, without atomics
// (threads that start past a hit another thread has posted skip their candidates, which cannot
// hold the minimum).
// Search scans slices of candidates in increasing order and stops at the first slice with a
// hit, whose minimum is then the global one. A Grind owns a few small buffers and is not safe
// for concurrent use.
type Grind struct {
	dev       *gpu.Device
	rc        *gpu.Array[Mont]   // borrowed from the Poseidon2 that made it
	state     *gpu.Array[Mont]   // 16 elements
	groupMin  *gpu.Array[uint32] // one slot per threadgroup of grind_search
	result    *gpu.Array[uint32] // 1: the minimum of the last slice
	found     *gpu.Array[uint32] // 1: some hit of the running search (GRIND_NONE between searches: grind_min resets it)
	maxGroups int
	slice     int // tests: candidates per slice instead of SliceSize (0: SliceSize)
}

// grindNone is GRIND_NONE of shaders/common/grind.metal: no passing candidate.
const grindNone = 0xffffffff

// grindMaxCount bounds one slice: with the grid's candidates per step (≤ 2^28) it keeps the
// kernel's 32-bit candidate indices from wrapping.
const grindMaxCount = 1 << 30

// Host dispatches: grind_search has a barrier, so every work item runs on a fiber (~20 ns per
// switch); one-thread groups of MSL_LANES candidates each keep that negligible beside the 16
// permutations, and 2^12 groups balance the host's workers.
const (
	hostGrindLanes     = 1 << hostLogLanes
	hostGrindMaxGroups = 1 << 12
	gpuGrindThreads    = 256
)

// NewGrind allocates the search buffers; it shares h's round constants (h must outlive it).
func (h *Poseidon2) NewGrind() (*Grind, error) {
	g := &Grind{dev: h.dev, rc: h.rc, maxGroups: hostGrindMaxGroups}
	if !isHost(h.dev) {
		g.maxGroups = 1 << 16
		if cu := h.dev.Limits().ComputeUnits; cu > 0 {
			g.maxGroups = min(g.maxGroups, 64*cu)
		}
	}
	var err error
	if g.state, err = gpu.AllocArray[Mont](h.dev, "grind state", poseidon2.Width); err != nil {
		return nil, err
	}
	if g.groupMin, err = gpu.AllocArray[uint32](h.dev, "grind group minima", g.maxGroups); err != nil {
		g.Close()
		return nil, err
	}
	if g.result, err = gpu.AllocArray[uint32](h.dev, "grind result", 1); err != nil {
		g.Close()
		return nil, err
	}
	if g.found, err = gpu.UploadArray(h.dev, "grind hit", []uint32{grindNone}); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Close frees the buffers (not the round constants).
func (g *Grind) Close() {
	if g.state != nil {
		g.state.Free()
	}
	for _, a := range []*gpu.Array[uint32]{g.groupMin, g.result, g.found} {
		if a != nil {
			a.Free()
		}
	}
}

// SetState uploads the state (canonical) that the next searches start from, in Montgomery form.
func (g *Grind) SetState(state [poseidon2.Width]field.Fp) error {
	return g.state.Write(0, MontSlice(state[:]))
}

// searchShape returns grind_search's dispatch for count candidates.
func (g *Grind) searchShape(count int) (groups, tpg int) {
	if isHost(g.dev) {
		return min((count+hostGrindLanes-1)/hostGrindLanes, g.maxGroups), 1
	}
	tpg = min(gpuGrindThreads, max(g.dev.Limits().MaxThreadsPerGroup, 1))
	return min((count+tpg-1)/tpg, g.maxGroups), tpg
}

// EncodeSearch encodes the search of the candidates [base, base+count) for the state of the last
// SetState, with the witness at absorbIdx (< 8) and mask 2^bits − 1 (0 ≤ bits ≤ 30): the result
// (ReadResult) is the smallest passing candidate, or none. base + count ≤ p, 1 ≤ count ≤ 2^30.
func (g *Grind) EncodeSearch(b *gpu.Batch, absorbIdx, bits int, base, count uint32) error {
	return g.encodeSearch(b, g.state.Buffer, absorbIdx, bits, base, count, false)
}

// EncodeSearchFrom is EncodeSearch from the state in the first 16 Montgomery words of state (a
// device transcript's sponge, DeviceTranscript.State) instead of SetState's.
func (g *Grind) EncodeSearchFrom(b *gpu.Batch, state *gpu.Buffer, absorbIdx, bits int, base, count uint32) error {
	if state.Size() < 4*poseidon2.Width {
		return fmt.Errorf("kernels: Grind: a state of %d bytes", state.Size())
	}
	return g.encodeSearch(b, state, absorbIdx, bits, base, count, false)
}

// encodeSearch is EncodeSearch from state; with cont, a continuation of the search encoded just
// before on g (skipped after its hit, which the result keeps).
func (g *Grind) encodeSearch(b *gpu.Batch, state *gpu.Buffer, absorbIdx, bits int, base, count uint32, cont bool) error {
	if absorbIdx < 0 || absorbIdx >= 8 || bits < 0 || bits > 30 {
		return fmt.Errorf("kernels: Grind: absorb index %d, %d bits", absorbIdx, bits)
	}
	if count == 0 || count > grindMaxCount || uint64(base)+uint64(count) > uint64(field.P) {
		return fmt.Errorf("kernels: Grind: candidates [%d, %d + %d) not a non-empty range of at most 2^30 below p", base, base, count)
	}
	groups, tpg := g.searchShape(int(count))
	c := uint32(0)
	if cont {
		c = 1
	}
	dispatchGrindSearch(b, gpu.D1(uint32(groups)), gpu.D1(uint32(tpg)), state, g.rc.Buffer, g.groupMin.Buffer, g.found.Buffer,
		grindParams{absorbIdx: uint32(absorbIdx), mask: uint32(1)<<bits - 1, base: base, count: count, cont: c}, g.result.Buffer, uint32(4*tpg))
	// One group reduces the group minima (a single thread on the host: a plain loop over at
	// most 2^12 values; a full group on GPUs) and resets found for the next search, so that no
	// copy is encoded before grind_search (a device-to-device copy costs the host a launch).
	mt := 1
	if !isHost(g.dev) {
		mt = min(gpuGrindThreads, max(g.dev.Limits().MaxThreadsPerGroup, 1))
	}
	dispatchGrindMin(b, gpu.D1(1), gpu.D1(uint32(mt)), g.groupMin.Buffer, g.result.Buffer, uint32(groups), g.found.Buffer, c, uint32(4*mt))
	return b.Err()
}

// ReadResult downloads the result of the last encoded search (waiting for it): the smallest
// passing candidate and true, or false when the range had none.
func (g *Grind) ReadResult() (uint32, bool, error) {
	var v [1]uint32
	if err := g.result.Read(v[:], 0); err != nil {
		return 0, false, err
	}
	return v[0], v[0] != grindNone, nil
}

// Result is the buffer of the last encoded search's result (one uint32: the smallest passing
// candidate, canonical, or 0xffffffff), for kernels that read it in stream order.
func (g *Grind) Result() *gpu.Array[uint32] { return g.result }

// EncodeSearchAll encodes the search of the first 2^30 candidates from the sponge of a device
// transcript (bits ≤ 24: a range without a witness has probability e^−64 or less), its result
// (Result) read in stream order by the kernels after it. On GPUs two searches, the second
// skipped after a hit in the first. On the host device, whose work runs as it is encoded, and whose work items
// run one after another (one search over the range tested 7× the candidates of sliced searches:
// 272 against 38 ms at 20 bits), it reads the sponge (a download) and runs Search, whose last
// slice leaves the witness in Result.
func (g *Grind) EncodeSearchAll(b *gpu.Batch, t *DeviceTranscript, absorbIdx, bits int) error {
	if bits < 0 || bits > 24 {
		return fmt.Errorf("kernels: Grind.EncodeSearchAll: %d bits (at most 24)", bits)
	}
	if !isHost(g.dev) {
		// The first slice as Search tests it, then the rest of the range as its continuation,
		// skipped when the slice had a hit: one search over the whole range cost 418 µs more
		// over a keccakf-1024 proof's five searches (its first wave of threads went on past the
		// later waves' candidates before those ran).
		slice := uint32(g.SliceSize(bits))
		if err := g.encodeSearch(b, t.State(), absorbIdx, bits, 0, slice, false); err != nil {
			return err
		}
		return g.encodeSearch(b, t.State(), absorbIdx, bits, slice, grindMaxCount-slice, true)
	}
	if err := b.Err(); err != nil {
		return err
	}
	st, err := t.readState()
	if err != nil {
		return err
	}
	if _, _, err := g.Search(context.Background(), st, absorbIdx, bits); err != nil {
		return err
	}
	return nil
}

// SliceSize is the number of candidates Search tests per batch for bits. A search needs 2^bits
// candidates on average (geometrically distributed), and about half a slice is tested past the
// hit, while each slice costs one round trip (dispatch, sync, 4-byte download). On the host
// device (~50 µs a round trip, ~9.7 M candidates/s on 2 cores) slices of 2^(bits−3), at least 2^8,
// waste about 6 % on overshoot and a few round trips. On GPUs the grid runs ~2^21 threads, so
// slices below that cost the same (the launch latency), and each thread stops at its first hit
// only after ~2^bits of its own candidates: slices of 2^(bits+1) (a hit in 86 % of first slices),
// at least 2^16 and at most 2^27 (tens of ms, so cancellation stays prompt at 30 bits).
func (g *Grind) SliceSize(bits int) int { return GrindSlice(g.dev, bits) }

// GrindSlice is Grind.SliceSize on dev.
func GrindSlice(dev *gpu.Device, bits int) int {
	if isHost(dev) {
		return 1 << min(max(bits-3, 8), 24)
	}
	return 1 << min(max(bits+1, 16), 27)
}

// Search returns the smallest w in [0, p) passing the check for state and absorbIdx (see
// Grind), and false if there is none. It tests slices of SliceSize(bits) candidates in
// increasing order, one batch each (its only sync the result's download), stopping at the first
// slice with a hit; ctx is checked between slices.
func (g *Grind) Search(ctx context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := g.SetState(state); err != nil {
		return 0, false, err
	}
	slice := uint64(g.SliceSize(bits))
	if g.slice > 0 {
		slice = uint64(g.slice)
	}
	for base := uint64(0); base < uint64(field.P); base += slice {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		count := min(slice, uint64(field.P)-base)
		if err := g.EncodeSearch(g.dev.Batch(), absorbIdx, bits, uint32(base), uint32(count)); err != nil {
			return 0, false, err
		}
		w, ok, err := g.ReadResult()
		if err != nil || ok {
			return field.Fp(w), ok, err
		}
	}
	return 0, false, nil
}
