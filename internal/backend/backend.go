// Package backend composes the prover's backends: Reference is the pure-Go reference
// (internal/backend/cpuref) alone; Device puts every stage the device backend
// (internal/backend/device) implements on the device and, while stages remain unported, takes the
// others from the reference through one counting decorator (Fallbacks), so that `prove` reports
// how many calls did not run on the device. It is the only package that imports both backends.
package backend

import (
	"fmt"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

// Reference returns the reference backend: every stage in plain Go.
func Reference() *stark.Backend { return cpuref.New() }

// Composed is a device backend with the reference standing in for its missing stages.
type Composed struct {
	// Backend is what the prover runs on.
	*stark.Backend
	// Device is the device backend (its own stages are Device.Stages()).
	Device *device.Backend
	// Fallbacks counts the calls that ran on the reference backend.
	Fallbacks *Fallbacks
}

// Close frees the device backend's resources (not the device).
func (c *Composed) Close() { c.Device.Close() }

// Device returns the prover backend on dev: the device backend's stages, and the reference's
// for the stages it lacks (until GKR and the constraint sumcheck have device kernels), each call
// to those counted in Fallbacks (and logged once per operation, at debug level, to log).
func Device(dev *gpu.Device, log *zerolog.Logger) (*Composed, error) {
	db, err := device.New(dev, device.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	fb := newFallbacks(log)
	own := db.Stages()
	ref := cpuref.Backend{}
	be := *own
	if be.Constraints == nil {
		be.Constraints = fallbackConstraints{fb, ref}
	}
	be.Meter = meter{own.Meter, fb}
	return &Composed{Backend: &be, Device: db, Fallbacks: fb}, nil
}

// Fallbacks counts calls made on the reference backend on behalf of a device backend, per
// operation ("ConstraintProver.Round", ...), and logs the first call of each.
type Fallbacks struct {
	log    zerolog.Logger
	mu     sync.Mutex
	counts map[string]int
}

func newFallbacks(log *zerolog.Logger) *Fallbacks {
	f := &Fallbacks{log: zerolog.Nop(), counts: map[string]int{}}
	if log != nil {
		f.log = *log
	}
	return f
}

// count records one call of op.
func (f *Fallbacks) count(op string) {
	f.mu.Lock()
	f.counts[op]++
	first := f.counts[op] == 1
	f.mu.Unlock()
	if first {
		f.log.Debug().Str("op", op).Msg("reference fallback: operation runs on the CPU (cpuref), not on the device")
	}
}

// Counts returns the calls per operation.
func (f *Fallbacks) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// Total is the number of fallback calls.
func (f *Fallbacks) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.counts {
		n += v
	}
	return n
}

// Ops lists the operations that fell back, sorted.
func (f *Fallbacks) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.counts))
	for k := range f.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Summary is one line for logs: "3 operations, 265 calls: A, B, C" ("" when none).
func (f *Fallbacks) Summary() string {
	ops := f.Ops()
	if len(ops) == 0 {
		return ""
	}
	return fmt.Sprintf("%d operations, %d calls: %v", len(ops), f.Total(), ops)
}

// meter adds the fallback count to the device's counters.
type meter struct {
	dev stark.Meter
	fb  *Fallbacks
}

func (m meter) Counters() stark.Counters {
	c := m.dev.Counters()
	c.Fallbacks = m.fb.Total()
	return c
}

func (m meter) ResetPeak() { m.dev.ResetPeak() }
