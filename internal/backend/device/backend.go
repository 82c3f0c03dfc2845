// Package device is the prover's backend on a gpu.Device: one file per stage (traces.go: the
// transport step; commit.go: stacking, RS encoding and the Merkle tree; gkr.go: LogUp-GKR;
// constraints.go: the batch constraint sumcheck; stacking.go: the stacked opening reduction;
// whir.go; grind.go; check.go: the pre-proof trace check), each running kernels through
// internal/kernels on data that stays on the device from load to the end of a proof. Only small
// values cross to the host: roots, round polynomials, openings, witnesses. It never imports the
// reference backend (internal/backend/cpuref): the two are siblings, compared by the conformance
// suite (internal/backend/backendtest).
package device

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/stark"
)

// ErrForeignHandle: a handle made by another backend (or another device Backend) was passed in.
var ErrForeignHandle = errors.New("backend/device: handle was not created by this device backend")

// ErrClosed: the backend was used after Close.
var ErrClosed = errors.New("backend/device: backend is closed")

// ErrFreed: a trace or commitment was used after Free (or after the backend's Close).
var ErrFreed = errors.New("backend/device: handle was freed")

// Options configure New.
type Options struct {
	// Logger receives debug lines about uploads and buffer sizes (nil: no logging).
	Logger *zerolog.Logger
	// Zerocheck forces strategies of the constraint sumcheck's kernels (tests: the GPU paths on
	// the host device); Pieces runs every program in pieces, in the constraint sumcheck and the
	// trace check.
	Zerocheck kernels.ZcOptions
	// Shared is the host-side program work shared with other backends (nil: the backend's own).
	Shared *Shared
}

// Backend runs the prover's stages on a gpu.Device. Its methods may be called from several
// goroutines (the device serialises the work).
type Backend struct {
	dev    *gpu.Device
	log    zerolog.Logger
	zcOpts kernels.ZcOptions
	shared *Shared
	ntt    *kernels.NTT
	hash   *kernels.Poseidon2

	mu     sync.Mutex
	closed bool
	live   map[freer]struct{}

	// grind holds the proof-of-work search buffers (made on first use; grind.go), grindMu
	// serialises the searches that use them.
	grindMu sync.Mutex
	grind   *kernels.Grind

	// progs holds the constraint programs uploaded so far (program, constraints.go), by the
	// verifying key's program; progMu guards it.
	progMu sync.Mutex
	progs  map[*constraints.Program]*kernels.Program
	// progPieces holds the programs split into pieces (pieces, constraints.go); progMu guards it.
	progPieces map[compiledKey]*kernels.ProgramPieces
	// rowProgs holds the programs compiled for some outputs of a key and the column tables of
	// programs evaluated on trace rows (programs.go); progMu guards it.
	rowProgs rowProgramCache
	// zc keeps the constraint sumcheck's per-key device data across proofs (constraints.go).
	zc zcCache

	// keepStacked: commitments made from now on keep Q and the codeword (KeepStacked).
	keepStacked atomic.Bool
}

// KeepStacked chooses the memory plan of the commitments made from now on. Kept (the fast
// plan): a commitment keeps its stacked matrix Q and its RS codeword on the device for the
// openings. Not kept (the lean plan, the default, as OpenVM's prover): it keeps only its Merkle
// tree and the traces it was stacked from; the stacked reduction stacks Q again from the traces
// (kept for WHIR's batching), and WHIR's round-0 openings rebuild the codeword. For keccakf-1024
// the lean plan holds 1.06 GB less (Q 352 MB, the codeword 705 MB) and takes about 5 ms more on an
// H200. The prover keeps them when the proof fits the device's memory with them
// (prover.Backend.CheckDeviceMemory); EstimateProofMemory follows the setting. Proofs are the
// same either way.
func (b *Backend) KeepStacked(keep bool) { b.keepStacked.Store(keep) }

// StackedKept reports the KeepStacked setting.
func (b *Backend) StackedKept() bool { return b.keepStacked.Load() }

// freer is a handle the backend frees on Close.
type freer interface{ free() }

// New returns the backend of dev; it uploads the Poseidon2 round constants (NTT twiddles follow
// on first use).
func New(dev *gpu.Device, opts Options) (*Backend, error) {
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = opts.Logger.With().Str("backend", "device").Logger()
	}
	zcOpts, err := withEnv(opts.Zerocheck)
	if err != nil {
		return nil, err
	}
	hash, err := kernels.NewPoseidon2(dev)
	if err != nil {
		return nil, err
	}
	shared := opts.Shared
	if shared == nil {
		shared = NewShared()
	}
	return &Backend{dev: dev, log: log, ntt: kernels.NewNTT(dev), hash: hash, live: map[freer]struct{}{}, zcOpts: zcOpts, shared: shared}, nil
}

// Device is the device the backend runs on.
func (b *Backend) Device() *gpu.Device { return b.dev }

// Stages returns the stages this backend implements, as a stark.Backend; stages it does not
// implement yet are nil (internal/backend composes them).
func (b *Backend) Stages() *stark.Backend {
	return &stark.Backend{
		Name:        "device (" + string(b.dev.Kind()) + ": " + b.dev.Name() + ")",
		Loader:      b,
		Committer:   b,
		Gkr:         b,
		Constraints: b,
		Stacking:    b,
		Whir:        b,
		Grinder:     b,
		Checker:     b,
		Meter:       b,
		Absorber:    kernels.HostAbsorber,
	}
}

// Close frees every live trace and commitment and the kernel tables. The device itself is not
// closed.
func (b *Backend) Close() {
	b.mu.Lock()
	live := b.live
	b.live = map[freer]struct{}{}
	b.closed = true
	b.mu.Unlock()
	for h := range live {
		h.free()
	}
	b.grindMu.Lock()
	if b.grind != nil {
		b.grind.Close()
		b.grind = nil
	}
	b.grindMu.Unlock()
	b.freeZcCache()
	b.freePrograms()
	b.freeRowPrograms()
	b.hash.Close()
	b.ntt.Close()
}

// track registers a new handle for Close; it fails once the backend is closed.
func (b *Backend) track(h freer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.live[h] = struct{}{}
	return nil
}

// untrack forgets a handle freed by its owner.
func (b *Backend) untrack(h freer) {
	b.mu.Lock()
	delete(b.live, h)
	b.mu.Unlock()
}

// Counters implements stark.Meter from the device's statistics.
func (b *Backend) Counters() stark.Counters {
	s := b.dev.Totals()
	return stark.Counters{Dispatches: s.Dispatches, Syncs: s.Syncs, BytesToDevice: s.BytesToDevice,
		BytesFromDevice: s.BytesFromDevice, MemoryPeak: s.MemoryPeak, SyncWait: s.SyncWait, HostGap: s.HostGap}
}

// ResetPeak implements stark.Meter.
func (b *Backend) ResetPeak() { b.dev.ResetPeak() }
