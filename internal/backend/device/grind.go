package device

import (
	"context"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// hostGrindMaxBits: searches of at most this many bits run on the CPU, on the calling thread's
// SIMD lanes (hostSearch). A device search costs one round trip at least (state upload, two
// dispatches, one sync, a 4-byte download): about 50 µs on the host device (this 2-core VM;
// docs/perf-notes/grind.md) and tens of µs on a GPU. The lane search tests 16 candidates per
// vector permutation and needs 2^bits candidates on average: a 5-bit search (WHIR's folding
// PoW) takes 4.1 µs on this VM, against 38.7 µs for transcript.HostGrinder, whose goroutines cost
// more to wake than the search itself (on a 16-core GPU host about 100 µs, measured as the device
// queue's gap per WHIR sumcheck round). Every search returns the smallest witness, so the choice
// never changes a proof.
const hostGrindMaxBits = 6

// FindWitness implements transcript.Grinder on the device (shaders/common/grind.metal through
// kernels.Grind): slices of candidates in increasing order, one sync each, ctx checked between
// slices. The search buffers are made on first use and reused; concurrent calls take turns.
func (b *Backend) FindWitness(ctx context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, error) {
	if bits < 1 || bits > transcript.MaxBits {
		return 0, fmt.Errorf("backend/device: proof-of-work bits %d outside [1, %d]", bits, transcript.MaxBits)
	}
	if absorbIdx < 0 || absorbIdx >= poseidon2.Rate {
		return 0, fmt.Errorf("backend/device: absorb index %d outside [0, %d)", absorbIdx, poseidon2.Rate)
	}
	if bits <= hostGrindMaxBits {
		return hostSearch(ctx, state, absorbIdx, bits)
	}
	g, unlock, err := b.grinder()
	if err != nil {
		return 0, err
	}
	defer unlock()
	w, ok, err := g.Search(ctx, state, absorbIdx, bits)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, transcript.ErrNoWitness
	}
	return w, nil
}

// hostSearch is the smallest witness by kernels.HostWitnessSearch, in ascending chunks of 2^16
// candidates (ctx checked between them).
func hostSearch(ctx context.Context, state [poseidon2.Width]field.Fp, idx, bits int) (field.Fp, error) {
	mask := uint32(1)<<bits - 1
	const chunk = 1 << 16
	for from := uint32(0); from < field.P; from += chunk {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if w, ok := kernels.HostWitnessSearch(&state, idx, mask, from, min(from+chunk, field.P)); ok {
			return w, nil
		}
	}
	return 0, transcript.ErrNoWitness
}

// grinder returns the search buffers (made on first use), held until unlock: concurrent searches
// take turns.
func (b *Backend) grinder() (g *kernels.Grind, unlock func(), err error) {
	b.grindMu.Lock()
	if b.grind == nil {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			b.grindMu.Unlock()
			return nil, nil, ErrClosed
		}
		if b.grind, err = b.hash.NewGrind(); err != nil {
			b.grindMu.Unlock()
			return nil, nil, err
		}
	}
	return b.grind, b.grindMu.Unlock, nil
}
