package device

import (
	"errors"
	"fmt"
	"sync"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
)

// ErrCommitFreed: a commitment was used after Free (or after the backend's Close).
var ErrCommitFreed = errors.New("stark/device: commitment was freed")

// maxLogSize bounds the stacked height and the codeword (the field's two-adicity).
const maxLogSize = field.TwoAdicity

// Committed is the device backend's commitment: the stacked matrix Q and its RS codeword
// (Montgomery form, column-major) and the Merkle tree, all on the device, plus the root and the
// layout on the host.
type Committed struct {
	be     *Backend
	layout *stark.StackedLayout
	root   stark.Digest
	// height and width of Q; the codeword has height<<logBlowup rows.
	height, width    int
	lSkip, logBlowup int
	k                int

	q, codeword *gpu.Array[uint32]
	tree        *kernels.MerkleTree

	hostMu sync.Mutex
	host   *cpuref.Committed // host copy for reference fallbacks, made on first use
}

// Root returns the Merkle root.
func (c *Committed) Root() stark.Digest { return c.root }

// Layout returns the stacked layout.
func (c *Committed) Layout() *stark.StackedLayout { return c.layout }

// Free releases the device buffers of the commitment (the backend's Close does it for every live
// commitment). Using it afterwards is an error.
func (c *Committed) Free() {
	c.be.mu.Lock()
	delete(c.be.live, c)
	c.be.mu.Unlock()
	c.free()
}

func (c *Committed) free() {
	if c.tree != nil {
		c.tree.Free()
		c.tree = nil
	}
	for _, a := range []*gpu.Array[uint32]{c.codeword, c.q} {
		if a != nil {
			a.Free()
		}
	}
	c.q, c.codeword = nil, nil
}

// poseidon returns the Merkle hasher, uploading the round constants on first use.
func (b *Backend) poseidon() (*kernels.Poseidon2, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.hash == nil {
		h, err := kernels.NewPoseidon2(b.dev)
		if err != nil {
			return nil, err
		}
		b.hash = h
	}
	return b.hash, nil
}

// Commit implements stark.Backend (stacked_commit, spec A §5.8) on the device: the stacked
// matrix is filled on the host (there is no stacking kernel yet) and uploaded once, in
// Montgomery form; RS encoding is one NTT batch, the Merkle tree one Poseidon2 batch (two syncs
// in all); the root is the only download (32 bytes).
func (b *Backend) Commit(p params.SystemParams, traces []air.Matrix) (stark.Committed, error) {
	if p.LSkip < 0 || p.NStack < 0 || p.LSkip+p.NStack > maxLogSize || p.LogBlowup < 0 ||
		p.LSkip+p.NStack+p.LogBlowup > maxLogSize || p.Whir.K < 0 || p.Whir.K > p.LSkip+p.NStack+p.LogBlowup {
		return nil, fmt.Errorf("%w: l_skip=%d n_stack=%d log_blowup=%d k_whir=%d", cpuref.ErrBadStackingParams,
			p.LSkip, p.NStack, p.LogBlowup, p.Whir.K)
	}
	dims := make([]stark.MatrixDim, len(traces))
	for i, t := range traces {
		if t.Width < 0 || t.Height <= 0 || t.Height&(t.Height-1) != 0 || len(t.Values) != t.Width*t.Height {
			return nil, fmt.Errorf("%w: trace %d is %d×%d with %d values (height must be a power of two)",
				cpuref.ErrTraceShape, i, t.Height, t.Width, len(t.Values))
		}
		lh := 0
		for 1<<lh < t.Height {
			lh++
		}
		dims[i] = stark.MatrixDim{Width: t.Width, LogHeight: lh}
	}
	layout, err := stark.NewStackedLayout(p.LSkip, p.LSkip+p.NStack, dims)
	if err != nil {
		return nil, err
	}
	if layout.Width == 0 {
		return nil, cpuref.ErrStackedWidthZero
	}
	hash, err := b.poseidon()
	if err != nil {
		return nil, err
	}
	c := &Committed{be: b, layout: layout, height: 1 << layout.LogHeight, width: layout.Width,
		lSkip: p.LSkip, logBlowup: p.LogBlowup, k: p.Whir.K}
	fail := func(err error) (stark.Committed, error) {
		c.free()
		return nil, err
	}
	if c.q, err = gpu.UploadArray(b.dev, "stacked matrix", stackedMont(layout, traces)); err != nil {
		return fail(err)
	}
	if c.codeword, err = b.ntt.RSEncodeMatrix("stacked codeword", c.q, c.height, c.width, p.LSkip, p.LogBlowup, false); err != nil {
		return fail(err)
	}
	if c.tree, err = hash.MerkleTree(c.codeword, c.height<<p.LogBlowup, c.width, p.Whir.K); err != nil {
		return fail(err)
	}
	if c.root, err = c.tree.Root(); err != nil {
		return fail(err)
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.live[c] = struct{}{}
	}
	b.mu.Unlock()
	if closed {
		return fail(ErrClosed)
	}
	return c, nil
}

// stackedMont fills the stacked matrix Q (spec A §5.3; cpuref.StackedMatrix) in Montgomery form:
// column-major, zero outside the slices and on the skipped rows of strided slices.
func stackedMont(l *stark.StackedLayout, traces []air.Matrix) []uint32 {
	h := 1 << l.LogHeight
	q := make([]uint32, l.Width*h)
	for _, sc := range l.Cols {
		t := traces[sc.Mat]
		src := t.Values[sc.Col*t.Height : (sc.Col+1)*t.Height]
		dst := q[sc.Slice.Col*h+sc.Slice.Row:]
		stride := 1 << max(l.LSkip-sc.Slice.LogHeight, 0)
		for i, v := range src {
			if v != 0 {
				dst[i*stride] = kernels.MontOf(v)
			}
		}
	}
	return q
}

// hostCopy returns the reference handle over a host copy of the commitment: the stacked matrix
// is downloaded (once; counted in gpu.Stats and Backend.HostCopies, and logged). The codeword
// and the tree stay on the device: the handle's tree carries the root and the codeword's shape
// only, with no query groups, so a reference opening of it fails loudly; the device backend
// serves the openings itself.
func (c *Committed) hostCopy() (*cpuref.Committed, error) {
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	if c.host != nil {
		return c.host, nil
	}
	if c.q == nil {
		return nil, ErrCommitFreed
	}
	nbytes := int64(4 * c.width * c.height)
	c.be.log.Warn().Int("width", c.width).Int("height", c.height).Int64("bytes", nbytes).
		Msg("downloading a stacked matrix to the host for reference fallbacks")
	vals, err := kernels.ReadCanonical(c.q)
	if err != nil {
		return nil, err
	}
	tree := &cpuref.MerkleTree{
		Backing:      air.Matrix{Height: c.height << c.logBlowup},
		DigestLayers: [][]poseidon2.Digest{nil, {c.root}},
		RowsPerQuery: 1 << c.k,
	}
	c.host = &cpuref.Committed{Data: &cpuref.StackedPCSData{
		Layout: c.layout,
		Matrix: air.Matrix{Values: vals, Width: c.width, Height: c.height},
		Tree:   tree,
	}}
	c.be.mu.Lock()
	c.be.hostCopies++
	c.be.hostBytes += nbytes
	c.be.mu.Unlock()
	return c.host, nil
}
