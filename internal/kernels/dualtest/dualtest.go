// Package dualtest runs an operation twice, on a device and in the pure-Go reference (cpuref,
// poseidon2), on the same seeded random input, and reports the first element where the two
// disagree by index, row and column. Tests express the operation as two functions of the
// canonical input and compare the outputs as slices of any comparable element type (field.Fp,
// uint32, poseidon2.Digest, ...):
//
//	dualtest.Check(t, dualtest.Case[field.Fp]{
//		Name:   "DFT 2^10×9",
//		Input:  dualtest.Random(seed, 1024*9),
//		Layout: dualtest.ColumnMajor(1024),
//		Device: func(in []field.Fp) ([]field.Fp, error) { ... },
//		Ref:    func(in []field.Fp) ([]field.Fp, error) { ... },
//	})
//
// Both sides get their own copy of the input. When both return an error (a size the operation
// rejects) the case passes: the device launcher and the reference agree on what is invalid.
package dualtest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// Edges are the values every input mixes in: 0, 1 and p−1.
var Edges = fieldrand.Edges

// Random returns n canonical field elements from seed: the first ones are the edge values, then
// one element in four is an edge value and the others are uniform in [0, p).
func Random(seed uint64, n int) []field.Fp {
	r := rand.New(rand.NewPCG(seed, 0x6475616c))
	out := make([]field.Fp, n)
	for i := range out {
		switch {
		case i < len(Edges):
			out[i] = Edges[i]
		case r.IntN(4) == 0:
			out[i] = Edges[r.IntN(len(Edges))]
		default:
			out[i] = field.Fp(r.Uint32N(field.P))
		}
	}
	return out
}

// Layout names the position of a flat index in a matrix, for the mismatch report.
type Layout struct {
	N        int  // rows (column-major) or columns (row-major); 0: a plain vector
	RowMajor bool // element i is (row i/N, column i%N); else (row i%N, column i/N)
}

// ColumnMajor is the layout of a column-major matrix of the given height (air.Matrix).
func ColumnMajor(height int) Layout { return Layout{N: height} }

// RowMajor is the layout of consecutive records of width elements (Poseidon2 states, digests).
func RowMajor(width int) Layout { return Layout{N: width, RowMajor: true} }

// Pos returns the row and column of flat index i.
func (l Layout) Pos(i int) (row, col int) {
	switch {
	case l.N <= 0:
		return i, 0
	case l.RowMajor:
		return i / l.N, i % l.N
	default:
		return i % l.N, i / l.N
	}
}

// Mismatch is the first difference between two outputs.
type Mismatch[E comparable] struct {
	Index, Row, Col int
	Got, Want       E
	GotLen, WantLen int // differ when the outputs have different lengths
}

func (m *Mismatch[E]) String() string {
	if m.GotLen != m.WantLen && m.Index >= min(m.GotLen, m.WantLen) {
		return fmt.Sprintf("length %d, want %d", m.GotLen, m.WantLen)
	}
	return fmt.Sprintf("index %d (row %d, column %d): device %v, reference %v", m.Index, m.Row, m.Col, m.Got, m.Want)
}

// Compare returns the first difference between got and want, or nil when they are equal.
func Compare[E comparable](got, want []E, l Layout) *Mismatch[E] {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			r, c := l.Pos(i)
			return &Mismatch[E]{Index: i, Row: r, Col: c, Got: got[i], Want: want[i], GotLen: len(got), WantLen: len(want)}
		}
	}
	if len(got) != len(want) {
		r, c := l.Pos(n)
		return &Mismatch[E]{Index: n, Row: r, Col: c, GotLen: len(got), WantLen: len(want)}
	}
	return nil
}

// Case is one operation on one input, expressed for the device and for the reference.
type Case[E comparable] struct {
	Name   string
	Input  []field.Fp // canonical; each side gets a copy
	Layout Layout     // of the outputs
	Device func(in []field.Fp) ([]E, error)
	Ref    func(in []field.Fp) ([]E, error)
}

// Run runs both sides and returns the first mismatch (nil: equal), whether both sides rejected
// the input (then the mismatch is nil too), or an error when only one side failed.
func (c Case[E]) Run() (m *Mismatch[E], rejected bool, err error) {
	got, derr := c.Device(append([]field.Fp(nil), c.Input...))
	want, rerr := c.Ref(append([]field.Fp(nil), c.Input...))
	switch {
	case derr != nil && rerr != nil:
		return nil, true, nil
	case derr != nil:
		return nil, false, fmt.Errorf("device failed where the reference did not: %w", derr)
	case rerr != nil:
		return nil, false, fmt.Errorf("reference failed where the device did not: %w", rerr)
	}
	return Compare(got, want, c.Layout), false, nil
}

// Check runs c as a subtest of t named c.Name and fails it with the first mismatch.
func Check[E comparable](t *testing.T, c Case[E]) {
	t.Helper()
	t.Run(c.Name, func(t *testing.T) {
		t.Helper()
		m, rejected, err := c.Run()
		switch {
		case err != nil:
			t.Fatal(err)
		case m != nil:
			t.Fatal(m)
		case rejected:
			t.Log("both sides reject this input")
		}
	})
}
