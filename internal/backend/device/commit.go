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
// the host. The codeword itself (twice Q) is kept only where the backend keeps codewords
// (Backend.KeepCodewords); else it is freed once the tree is built and rebuilt from Q for WHIR's
// round-0 openings (encodeCodeword), as OpenVM's prover does by default.
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
	// codeword is the RS codeword the tree was built from, when kept (nil: rebuilt for the
	// openings).
	codeword *gpu.Array[kernels.Mont]
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
	for _, a := range []*gpu.Array[kernels.Mont]{c.codeword, c.q} {
		if a != nil {
			a.Free()
		}
	}
	c.q, c.codeword = nil, nil
}

// encodeCodeword returns the RS codeword of Q, the values the tree was built from: the kept one
// (rebuilt false), or a rebuild encoded into b (rebuilt true), which the caller frees once b's
// work is done.
func (c *Committed) encodeCodeword(b *gpu.Batch) (cw *gpu.Array[kernels.Mont], rebuilt bool, err error) {
	c.mu.Lock()
	q, kept := c.q, c.codeword
	c.mu.Unlock()
	if q == nil {
		return nil, false, ErrFreed
	}
	if kept != nil {
		return kept, false, nil
	}
	if cw, err = gpu.AllocArray[kernels.Mont](c.be.dev, "stacked codeword", (c.height*c.width)<<c.logBlowup); err != nil {
		return nil, false, err
	}
	if err := c.be.ntt.EncodeRSMatrix(b, q, cw, c.height, c.width, c.lSkip, c.logBlowup, false); err != nil {
		cw.Free()
		return nil, false, err
	}
	return cw, true, nil
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
	var codeword *gpu.Array[kernels.Mont]
	fail := func(err error) (stark.Committed, error) {
		c.free()
		if codeword != nil {
			codeword.Free() // a second free of a kept codeword is harmless
		}
		return nil, err
	}
	if c.q, err = gpu.AllocArray[kernels.Mont](b.dev, "stacked matrix", c.height*c.width); err != nil {
		return fail(err)
	}
	if codeword, err = gpu.AllocArray[kernels.Mont](b.dev, "stacked codeword", (c.height*c.width)<<p.LogBlowup); err != nil {
		return fail(err)
	}
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
	if b.keepCodewords.Load() {
		c.codeword = codeword
	} else { // the root's download waited for the batch: nothing reads the codeword any more
		c.tree.ReleaseMatrix()
		codeword.Free()
	}
	if err := b.track(c); err != nil {
		return fail(err)
	}
	return c, nil
}
