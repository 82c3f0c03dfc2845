package transcript

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// ErrNoWitness is returned when no w in [0, p) passes the check (not expected for bits ≤ 30).
var ErrNoWitness = errors.New("transcript: no proof-of-work witness in [0, p)")

// Grinder searches proof-of-work witnesses (spec A §3.3–§3.5). FindWitness returns the smallest
// w in [0, p) that passes the grinding condition for a transcript whose sponge state is state
// with absorb index absorbIdx: with s = state and s[absorbIdx] = w, the low bits bits of
// Permute(s)[7] are zero (see WitnessOK). bits is in [1, MaxBits]. Every Grinder returns the
// same witness, so proofs do not depend on which one ran.
type Grinder interface {
	FindWitness(ctx context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, error)
}

// HostGrinder is the reference Grinder on the CPU: Workers goroutines (0: runtime.GOMAXPROCS).
type HostGrinder struct{ Workers int }

// FindWitness implements Grinder.
func (g HostGrinder) FindWitness(ctx context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, error) {
	checkBits(bits)
	if absorbIdx < 0 || absorbIdx >= rate {
		return 0, fmt.Errorf("transcript: absorb index %d outside [0, %d)", absorbIdx, rate)
	}
	workers := g.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return findWitness(ctx, state, absorbIdx, bits, workers)
}

// Grind is grind of spec A §3.2 and returns the smallest canonical witness (§3.5): with
// bits == 0 it returns 0 and leaves the transcript untouched; otherwise it finds the smallest w
// with CheckWitness(bits, w) and then runs CheckWitness(bits, w) on t, so t has absorbed w and
// consumed one sample. The search is HostGrinder's; the result does not depend on scheduling. It
// panics if bits is outside [0, MaxBits].
func (t *Transcript) Grind(bits int) field.Fp {
	w, err := t.GrindWith(context.Background(), HostGrinder{}, bits)
	if err != nil {
		panic(err)
	}
	return w
}

// GrindWith is Grind with the search done by g and cancellation by ctx: if ctx ends or g fails
// before a witness is found it returns the error and leaves t untouched. A witness from g is
// checked on t before it is accepted (a wrong one is an error, not a panic).
func (t *Transcript) GrindWith(ctx context.Context, g Grinder, bits int) (field.Fp, error) {
	checkBits(bits)
	if bits == 0 {
		return 0, nil
	}
	w, err := g.FindWitness(ctx, t.state, int(t.absorbIdx), bits)
	if err != nil {
		return 0, err
	}
	probe := *t
	if !probe.CheckWitness(bits, w) {
		return 0, fmt.Errorf("transcript: grinder returned %d, which fails the %d-bit proof-of-work check", w, bits)
	}
	*t = probe
	return w, nil
}

// WitnessOK is the grinding condition of spec A §3.3, evaluated on a copy of the state: with
// s' = state except s'[idx] = w, accept iff the low bits of Perm(s')[7] are zero (mask =
// 2^bits − 1). This equals
// CheckWitness on a transcript with that state and absorb_idx = idx, because the observe of w is
// followed by exactly one permutation (either the observe fills the rate, or the sample permutes
// since absorb_idx ≠ 0) and the sample then reads s[7].
func WitnessOK(state *[poseidon2.Width]field.Fp, idx int, mask uint32, w field.Fp) bool {
	s := *state
	s[idx] = w
	poseidon2.Permute(&s)
	return uint32(s[7])&mask == 0
}

// findWitness returns the smallest w in [0, p) passing WitnessOK. Worker k of n checks
// k, k+n, k+2n, … in ascending order and stops at its first hit or as soon as its candidate
// exceeds the smallest hit found so far (an atomic minimum). Every candidate below the final
// minimum is therefore checked by its worker, so the result is the smallest witness whatever the
// scheduling, and the work done is about w + n permutations with no barriers between workers.
func findWitness(ctx context.Context, state [poseidon2.Width]field.Fp, idx, bits, workers int) (field.Fp, error) {
	mask := uint32(1)<<bits - 1
	workers = max(workers, 1)
	var best atomic.Uint64
	best.Store(math.MaxUint64)
	var cancelled atomic.Bool
	scan := func(first uint64) {
		step := uint64(workers)
		for w, n := first, 0; w < uint64(field.P) && w < best.Load(); w, n = w+step, n+1 {
			if n&1023 == 1023 && (cancelled.Load() || ctx.Err() != nil) {
				cancelled.Store(true)
				return
			}
			if WitnessOK(&state, idx, mask, field.Fp(w)) {
				for {
					cur := best.Load()
					if w >= cur || best.CompareAndSwap(cur, w) {
						return
					}
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if workers == 1 {
		scan(0)
	} else {
		var wg sync.WaitGroup
		for k := range workers {
			wg.Go(func() { scan(uint64(k)) })
		}
		wg.Wait()
	}
	if cancelled.Load() {
		// A worker gave up early, so a hit found by another one need not be the smallest.
		return 0, ctx.Err()
	}
	if b := best.Load(); b != math.MaxUint64 {
		return field.Fp(b), nil
	}
	return 0, ErrNoWitness
}
