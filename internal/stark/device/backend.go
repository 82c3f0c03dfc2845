// Package device is the stark.Backend on a gpu.Device.
//
// What runs on the device: Commit (the stacked matrix is built on the host and uploaded once,
// then RS-encoded by the NTT kernels and Merkle-committed by the Poseidon2 kernels; only the
// 32-byte root comes back, the stacked matrix, codeword and tree stay on the device) and the
// WHIR openings of committed data (OpenInitial: a gather kernel, then only the opened rows and
// the sibling digests cross).
//
// Everything else is delegated to the CPU reference backend (internal/backend/cpuref) and COUNTED as a
// fallback: Fallbacks reports the calls per operation and the first call of each operation is
// logged (warn). A fallback that needs committed data gets host copies of it, downloaded from the
// device once per commitment on first use (counted in gpu.Stats and in HostCopies), never
// silently. `prove` must see zero fallbacks once every stage has kernels.
package device

import (
	"errors"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/stark"
)

// ErrForeignHandle: a handle made by another backend (or another device Backend) was passed in.
var ErrForeignHandle = errors.New("stark/device: handle was not created by this device backend")

// ErrClosed: the backend was used after Close.
var ErrClosed = errors.New("stark/device: backend is closed")

// Options configure New.
type Options struct {
	// Logger receives one line on the first use of each reference fallback and on every host
	// copy of committed data (nil: no logging).
	Logger *zerolog.Logger
}

// Backend is the stark.Backend on a gpu.Device. Its methods may be called from several
// goroutines (the device serialises the work).
type Backend struct {
	dev *gpu.Device
	log zerolog.Logger
	ref cpuref.Backend
	ntt *kernels.NTT

	mu         sync.Mutex
	hash       *kernels.Poseidon2 // created on first Commit (uploads the round constants)
	closed     bool
	live       map[*Committed]struct{}
	fallbacks  map[string]int
	hostCopies int
	hostBytes  int64
}

var _ stark.Backend = (*Backend)(nil)

// New returns the backend of dev. Kernel tables and constants are uploaded on first use.
func New(dev *gpu.Device, opts Options) *Backend {
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = opts.Logger.With().Str("backend", "device").Logger()
	}
	return &Backend{
		dev: dev, log: log, ntt: kernels.NewNTT(dev),
		live: map[*Committed]struct{}{}, fallbacks: map[string]int{},
	}
}

// Device is the device the backend runs on.
func (b *Backend) Device() *gpu.Device { return b.dev }

// Close frees every commitment still live and the kernel tables. The device itself is not
// closed.
func (b *Backend) Close() {
	b.mu.Lock()
	live := b.live
	b.live = map[*Committed]struct{}{}
	b.closed = true
	hash := b.hash
	b.hash = nil
	b.mu.Unlock()
	for c := range live {
		c.free()
	}
	if hash != nil {
		hash.Close()
	}
	b.ntt.Close()
}

// Fallbacks returns the number of calls per operation that ran on the reference backend
// (operation names like "NewStackingProver", "WhirProver.Fold"). Empty when everything ran on
// the device.
func (b *Backend) Fallbacks() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.fallbacks))
	for k, v := range b.fallbacks {
		out[k] = v
	}
	return out
}

// FallbackCalls is the total number of reference-fallback calls.
func (b *Backend) FallbackCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, v := range b.fallbacks {
		n += v
	}
	return n
}

// FallbackOps lists the operations that fell back, sorted (for reports).
func (b *Backend) FallbackOps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.fallbacks))
	for k := range b.fallbacks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// HostCopies returns how many commitments were copied to the host for fallbacks and the bytes
// downloaded for them.
func (b *Backend) HostCopies() (commits int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hostCopies, b.hostBytes
}

// fallback counts one call of op on the reference backend and logs the first one.
func (b *Backend) fallback(op string) {
	b.mu.Lock()
	b.fallbacks[op]++
	first := b.fallbacks[op] == 1
	b.mu.Unlock()
	if first {
		b.log.Warn().Str("op", op).Msg("reference fallback: operation runs on the CPU (cpuref), not on the device")
	}
}

// delegate runs op on the reference backend, counted as a fallback. New Backend methods with no
// device implementation yet are one line each:
//
//	func (b *Backend) Op(x X) (Y, error) { return delegate(b, "Op", func(r cpuref.Backend) (Y, error) { return r.Op(x) }) }
//
// Methods that take commitments hand the reference backend b.hostCommits(commits).
func delegate[T any](b *Backend, op string, f func(ref cpuref.Backend) (T, error)) (T, error) {
	b.fallback(op)
	return f(b.ref)
}

// commits checks that every handle was made by b and is still live.
func (b *Backend) commits(cs []stark.Committed) ([]*Committed, error) {
	out := make([]*Committed, len(cs))
	for i, c := range cs {
		dc, ok := c.(*Committed)
		if !ok || dc == nil || dc.be != b {
			return nil, ErrForeignHandle
		}
		if dc.tree == nil {
			return nil, ErrCommitFreed
		}
		out[i] = dc
	}
	return out, nil
}

// hostCommits returns reference handles over host copies of the commitments (downloaded once
// per commitment, on first use).
func (b *Backend) hostCommits(cs []stark.Committed) ([]stark.Committed, error) {
	dcs, err := b.commits(cs)
	if err != nil {
		return nil, err
	}
	out := make([]stark.Committed, len(dcs))
	for i, c := range dcs {
		h, err := c.hostCopy()
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}
