package device

import (
	"fmt"
	"sync"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

// Trace is a trace resident on the device: the column-major values as uploaded (canonical; the
// kernels that read it convert), in one buffer named after the trace. A width-0 trace has no
// buffer.
type Trace struct {
	be            *Backend
	host          *air.Matrix
	width, height int

	mu  sync.Mutex
	buf *gpu.Array[field.Fp]
	// pins counts the commitments that stack their matrix from this trace when they need it
	// (Committed.sources); a trace freed while pinned (dropped) keeps its buffer until the last
	// commitment lets it go, but is freed to everyone else.
	pins    int
	dropped bool
}

var _ stark.Trace = (*Trace)(nil)

// LoadTrace implements stark.TraceLoader: one upload of m's values.
func (b *Backend) LoadTrace(name string, m *air.Matrix) (stark.Trace, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil matrix", stark.ErrCommitInput)
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("%w: trace %q: %v", stark.ErrCommitInput, name, err)
	}
	if m.Height <= 0 || m.Height&(m.Height-1) != 0 {
		return nil, fmt.Errorf("%w: trace %q has height %d (not a power of two)", stark.ErrCommitInput, name, m.Height)
	}
	t := &Trace{be: b, host: m, width: m.Width, height: m.Height}
	if m.Width > 0 {
		buf, err := gpu.UploadArray(b.dev, "trace "+name, m.Values)
		if err != nil {
			return nil, err
		}
		t.buf = buf
	}
	if err := b.track(t); err != nil {
		t.free()
		return nil, err
	}
	return t, nil
}

func (t *Trace) Width() int        { return t.width }
func (t *Trace) Height() int       { return t.height }
func (t *Trace) Host() *air.Matrix { return t.host }

// Free releases the device copy.
func (t *Trace) Free() {
	t.be.untrack(t)
	t.free()
}

func (t *Trace) free() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pins > 0 {
		t.dropped = true
		return
	}
	if t.buf != nil {
		t.buf.Free()
		t.buf = nil
	}
}

// values returns the device buffer (nil for a width-0 trace) or ErrFreed.
func (t *Trace) values() (*gpu.Array[field.Fp], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.width > 0 && (t.buf == nil || t.dropped) {
		return nil, ErrFreed
	}
	return t.buf, nil
}

// pin keeps the trace's buffer for a commitment stacked from it (ErrFreed if it is gone).
func (t *Trace) pin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.width > 0 && (t.buf == nil || t.dropped) {
		return ErrFreed
	}
	t.pins++
	return nil
}

// unpin lets a pin go; the buffer of a trace freed meanwhile goes with the last one.
func (t *Trace) unpin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pins--
	if t.pins == 0 && t.dropped && t.buf != nil {
		t.buf.Free()
		t.buf = nil
	}
}

// pinnedValues returns the buffer of a pinned trace (nil for a width-0 trace).
func (t *Trace) pinnedValues() *gpu.Array[field.Fp] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf
}

// traces checks that every handle is a live trace of b.
func (b *Backend) traces(ts []stark.Trace) ([]*Trace, error) {
	out := make([]*Trace, len(ts))
	for i, t := range ts {
		dt, ok := t.(*Trace)
		if !ok || dt == nil || dt.be != b {
			return nil, ErrForeignHandle
		}
		out[i] = dt
	}
	return out, nil
}
