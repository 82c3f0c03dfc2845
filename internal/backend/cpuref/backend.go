package cpuref

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// ErrForeignHandle: a handle made by another backend was passed to the CPU backend.
var ErrForeignHandle = errors.New("cpuref: handle was not created by the CPU reference backend")

// Backend is the CPU reference implementation of every stage of stark.Backend (New fills them
// all with it).
type Backend struct{}

var (
	_ stark.TraceLoader       = Backend{}
	_ stark.Committer         = Backend{}
	_ stark.GkrBackend        = Backend{}
	_ stark.ConstraintBackend = Backend{}
	_ stark.StackingBackend   = Backend{}
	_ stark.WhirBackend       = Backend{}
)

// New returns the reference backend: every stage in plain Go on the host, the proof-of-work
// search by transcript.HostGrinder.
func New() *stark.Backend {
	b := Backend{}
	return &stark.Backend{Name: "cpuref", Loader: b, Committer: b, Gkr: b, Constraints: b, Stacking: b, Whir: b,
		Grinder: transcript.HostGrinder{}, Checker: stark.HostChecker{}}
}

// Trace is the reference backend's trace: the host matrix itself.
type Trace struct{ M *air.Matrix }

func (t Trace) Width() int        { return t.M.Width }
func (t Trace) Height() int       { return t.M.Height }
func (t Trace) Host() *air.Matrix { return t.M }
func (Trace) Free()               {}

// LoadTrace implements stark.TraceLoader: the reference backend computes on the host matrix.
func (Backend) LoadTrace(_ string, m *air.Matrix) (stark.Trace, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil matrix", ErrTraceShape)
	}
	if err := checkMatrix("LoadTrace", *m); err != nil {
		return nil, err
	}
	return Trace{M: m}, nil
}

// Committed is the CPU backend's committed data: the layout, the stacked matrix, its codeword and
// Merkle tree (StackedPCSData).
type Committed struct {
	Data *StackedPCSData
}

// Root returns the Merkle root.
func (c *Committed) Root() stark.Digest { return c.Data.Root() }

// Layout returns the stacked layout.
func (c *Committed) Layout() *stark.StackedLayout { return c.Data.Layout }

// Free does nothing: the garbage collector owns host data.
func (c *Committed) Free() {}

// Commit implements stark.Committer: stacked_commit of traces given in trace order.
func (Backend) Commit(p params.SystemParams, traces []stark.Trace) (stark.Committed, error) {
	if _, err := stark.CommitLayout(p, traces); err != nil {
		return nil, err
	}
	ms := make([]air.Matrix, len(traces))
	for i, t := range traces {
		if t.Host() == nil {
			return nil, fmt.Errorf("%w: trace %d has no host matrix", ErrTraceShape, i)
		}
		ms[i] = *t.Host()
	}
	return CommitMatrices(p, ms)
}

// CommitMatrices is Commit for cpuref matrices.
func CommitMatrices(p params.SystemParams, traces []air.Matrix) (*Committed, error) {
	_, data, err := StackedCommit(traces, p)
	if err != nil {
		return nil, err
	}
	return &Committed{Data: data}, nil
}

func cpuCommits(commits []stark.Committed) ([]*Committed, error) {
	out := make([]*Committed, len(commits))
	for i, c := range commits {
		cc, ok := c.(*Committed)
		if !ok || cc == nil {
			return nil, ErrForeignHandle
		}
		out[i] = cc
	}
	return out, nil
}

// hornerBase evaluates Σ_i c_i·x^i for base-field coefficients at an extension point.
func hornerBase(c []field.Fp, x field.Fp4) field.Fp4 {
	var acc field.Fp4
	for i := len(c) - 1; i >= 0; i-- {
		acc = acc.Mul(x).AddBase(c[i])
	}
	return acc
}

// polyMulAcc adds a·b (coefficient form) to dst (len(dst) ≥ len(a)+len(b)−1).
func polyMulAcc(dst, a, b []field.Fp4) {
	for i, x := range a {
		if x.IsZero() {
			continue
		}
		for j, y := range b {
			dst[i+j] = dst[i+j].Add(x.Mul(y))
		}
	}
}

// evalsToCoeffsFp4 is the Möbius transform (Mle::from_evaluations) on an extension table.
func evalsToCoeffsFp4(a []field.Fp4) {
	for step := 1; step < len(a); step <<= 1 {
		for i := 0; i < len(a); i += 2 * step {
			for j := i; j < i+step; j++ {
				a[j+step] = a[j+step].Sub(a[j])
			}
		}
	}
}

// dftFp4 is the natural-order DFT of an extension vector, coordinate by coordinate.
func dftFp4(v []field.Fp4) error {
	tmp := make([]field.Fp, len(v))
	for c := 0; c < 4; c++ {
		for i, e := range v {
			tmp[i] = e[c]
		}
		if err := DFT(tmp); err != nil {
			return err
		}
		for i := range v {
			v[i][c] = tmp[i]
		}
	}
	return nil
}
