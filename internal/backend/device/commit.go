package device

import (
	"fmt"
	"sync"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// Committed is the device backend's commitment: the stacked matrix Q (Montgomery form,
// column-major) and the Merkle tree of its RS codeword on the device, the root and the layout on
// the host. The codeword itself (twice Q) is freed once the tree is built and rebuilt from Q for
// WHIR's round-0 openings (encodeCodeword), as OpenVM's prover does by default: keeping it would
// hold 705 MB through the constraint stage of keccakf-1024 for a rebuild of about a millisecond.
type Committed struct {
	be     *Backend
	layout *stark.StackedLayout
	root   stark.Digest
	// height and width of Q; the codeword has height<<logBlowup rows.
	height, width    int
	lSkip, logBlowup int
	k                int

	mu   sync.Mutex
	q    *gpu.Array[kernels.Mont]
	tree *kernels.MerkleTree
}

var _ stark.Committed = (*Committed)(nil)

// Root returns the Merkle root.
func (c *Committed) Root() stark.Digest { return c.root }

// Layout returns the stacked layout.
func (c *Committed) Layout() *stark.StackedLayout { return c.layout }

// Free releases the device buffers of the commitment (the backend's Close does it for every live
// commitment). Using it afterwards is an error.
func (c *Committed) Free() {
	c.be.untrack(c)
	c.free()
}

func (c *Committed) free() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree != nil {
		c.tree.Free()
		c.tree = nil
	}
	if c.q != nil {
		c.q.Free()
	}
	c.q = nil
}

// encodeCodeword encodes the rebuild of the RS codeword of Q into b (the commit's encoding: the
// values the tree was built from) and returns it; the caller frees it once b's work is done.
func (c *Committed) encodeCodeword(b *gpu.Batch) (*gpu.Array[kernels.Mont], error) {
	c.mu.Lock()
	q := c.q
	c.mu.Unlock()
	if q == nil {
		return nil, ErrFreed
	}
	cw, err := gpu.AllocArray[kernels.Mont](c.be.dev, "stacked codeword", (c.height*c.width)<<c.logBlowup)
	if err != nil {
		return nil, err
	}
	if err := c.be.ntt.EncodeRSMatrix(b, q, cw, c.height, c.width, c.lSkip, c.logBlowup, false); err != nil {
		cw.Free()
		return nil, err
	}
	return cw, nil
}

// live reports ErrFreed for a freed commitment.
func (c *Committed) live() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.q == nil {
		return ErrFreed
	}
	return nil
}

// liveTree returns the Merkle tree, or ErrFreed for a freed commitment.
func (c *Committed) liveTree() (*kernels.MerkleTree, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return nil, ErrFreed
	}
	return c.tree, nil
}

// StackedMatrix downloads Q (canonical): for tests and diagnostics, never on the proving path.
func (c *Committed) StackedMatrix() (air.Matrix, error) {
	if err := c.live(); err != nil {
		return air.Matrix{}, err
	}
	v, err := kernels.ReadCanonical(c.q)
	if err != nil {
		return air.Matrix{}, err
	}
	return air.Matrix{Width: c.width, Height: c.height, Values: v}, nil
}

// commits checks that every handle was made by b and is still live.
func (b *Backend) commits(cs []stark.Committed) ([]*Committed, error) {
	out := make([]*Committed, len(cs))
	for i, c := range cs {
		dc, ok := c.(*Committed)
		if !ok || dc == nil || dc.be != b {
			return nil, ErrForeignHandle
		}
		if err := dc.live(); err != nil {
			return nil, err
		}
		out[i] = dc
	}
	return out, nil
}

// Commit implements stark.Committer (stacked_commit, spec A §5.8) on the device, in one batch:
// the stacking kernel places every resident trace into Q (Montgomery), RS encoding is the NTT
// batch of kernels.EncodeRSMatrix, the Merkle tree the Poseidon2 kernels; the root is the only
// download (32 bytes).
func (b *Backend) Commit(p params.SystemParams, traces []stark.Trace) (stark.Committed, error) {
	layout, err := stark.CommitLayout(p, traces)
	if err != nil {
		return nil, err
	}
	dts, err := b.traces(traces)
	if err != nil {
		return nil, err
	}
	c := &Committed{be: b, layout: layout, height: 1 << layout.LogHeight, width: layout.Width,
		lSkip: p.LSkip, logBlowup: p.LogBlowup, k: p.Whir.K}
	fail := func(err error) (stark.Committed, error) {
		c.free()
		return nil, err
	}
	if c.q, err = gpu.AllocArray[kernels.Mont](b.dev, "stacked matrix", c.height*c.width); err != nil {
		return fail(err)
	}
	codeword, err := gpu.AllocArray[kernels.Mont](b.dev, "stacked codeword", (c.height*c.width)<<p.LogBlowup)
	if err != nil {
		return fail(err)
	}
	defer codeword.Free() // after the root's download, which waits for the batch
	batch := b.dev.Batch()
	for mat, t := range dts {
		if t.width == 0 {
			continue
		}
		vals, err := t.values()
		if err != nil {
			return fail(err)
		}
		start, stride := layout.Placement(layout.Cols[layout.MatStarts[mat]])
		logStride, _ := field.Log2(stride)
		if err := kernels.EncodeStackTrace(batch, b.dev, vals, t.height, t.width, c.q, start, logStride); err != nil {
			return fail(err)
		}
	}
	if err := b.ntt.EncodeRSMatrix(batch, c.q, codeword, c.height, c.width, p.LSkip, p.LogBlowup, false); err != nil {
		return fail(err)
	}
	if c.tree, err = b.hash.EncodeMerkleTree(batch, codeword, c.height<<p.LogBlowup, c.width, p.Whir.K); err != nil {
		return fail(err)
	}
	if err := batch.Err(); err != nil {
		return fail(err)
	}
	if c.root, err = c.tree.Root(); err != nil {
		return fail(fmt.Errorf("backend/device: commit: %w", err))
	}
	c.tree.ReleaseMatrix()
	if err := b.track(c); err != nil {
		return fail(err)
	}
	return c, nil
}
