package device

import (
	"sync"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
)

// Shared is the host-side work that device backends of one process can share: a verifying key's
// programs compiled for some of their outputs (constraints.Compile: the GKR leaves' interactions,
// the trace check's constraints) and split into pieces (constraints.Split), each built once for
// every backend given the same Shared (Options.Shared). The results are read-only; each backend
// still uploads its own copy to its device (programs, pieces, column tables: small next to a
// proof), because a device buffer belongs to one gpu.Device (one queue).
//
// Several backends proving at once (bench --concurrency, one per CUDA stream or GPU) share one.
type Shared struct {
	mu       sync.Mutex
	compiled map[compiledKey]*sharedEntry[*constraints.Program]
	split    map[compiledKey]*sharedEntry[[]*constraints.Program]
}

// sharedEntry is one result, computed once by whichever backend asks first; the others wait.
type sharedEntry[T any] struct {
	once sync.Once
	v    T
	err  error
}

// NewShared returns an empty Shared.
func NewShared() *Shared {
	return &Shared{
		compiled: map[compiledKey]*sharedEntry[*constraints.Program]{},
		split:    map[compiledKey]*sharedEntry[[]*constraints.Program]{},
	}
}

func entry[T any](s *Shared, m map[compiledKey]*sharedEntry[T], key compiledKey) *sharedEntry[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := m[key]
	if e == nil {
		e = &sharedEntry[T]{}
		m[key] = e
	}
	return e
}

// compile returns vk's program for outs, compiling it on first use.
func (s *Shared) compile(vk *air.VerifyingKey, outs constraints.Outputs) (*constraints.Program, error) {
	e := entry(s, s.compiled, compiledKey{vk: vk, outs: outs})
	e.once.Do(func() { e.v, e.err = constraints.Compile(vk, outs) })
	return e.v, e.err
}

// pieces returns vk's program for outs split into at most k pieces, splitting it on first use.
func (s *Shared) pieces(vk *air.VerifyingKey, outs constraints.Outputs, k int) ([]*constraints.Program, error) {
	e := entry(s, s.split, compiledKey{vk, outs, k})
	e.once.Do(func() {
		e.v, e.err = constraints.Split(vk, outs, k)
		if e.err == nil && k == constraints.DevicePieces {
			e.v = constraints.OrderBySharedSlots(e.v, roundZeroOrderWindow)
		}
	})
	return e.v, e.err
}

// roundZeroOrderWindow is the window of constraints.OrderBySharedSlots for round 0's pieces, which
// the device runs one after another over the slice's slot-value table: keccakf-1024 on an H200
// (ncu, zc_uni_generated over a proof) read 3.05 → 2.45 GB from DRAM and took 2,252 → 2,181 µs
// (means of three) with a window of 3 (12: 2.54 GB, 2,191 µs).
const roundZeroOrderWindow = 3
