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

// Committed is the device backend's commitment: the Merkle tree of the RS codeword of the stacked
// matrix Q on the device, the root and the layout on the host, and the resident traces Q is
// stacked from (pinned: a trace freed meanwhile keeps its buffer for the commitment). Where the
// backend keeps them (Backend.KeepStacked, the fast plan) Q and the codeword stay on the device
// until the commitment is freed. Else (the lean plan) the codeword is never whole on the device:
// the commit encodes it a chunk of columns at a time, the traces stacked straight into the
// chunk's message rows, and hashes each chunk into the rows' sponges
// (kernels.EncodeMerkleTreeStreamed); the openings stack Q again from the traces (acquireQ: the
// stacked reduction, which leaves it to WHIR's batching) and encode the codeword again, chunk by
// chunk, for WHIR's round-0 openings (encodeOpenings). OpenVM's prover rebuilds the codeword for
// those openings too, whole: between the stages the traces are the only copy of the trace data.
type Committed struct {
	be     *Backend
	layout *stark.StackedLayout
	root   stark.Digest
	// height and width of Q; the codeword has height<<logBlowup rows.
	height, width    int
	lSkip, logBlowup int
	k                int
	sources          []stackSource

	mu   sync.Mutex
	tree *kernels.MerkleTree // nil once freed
	// codeword is the RS codeword the tree was built from, when kept (nil: encoded again, chunk
	// by chunk, for the openings).
	codeword *gpu.Array[kernels.Mont]
	// q is Q: kept (qKept), or while the openings use it: qUsers leases (acquireQ), freed
	// with the last lease given back after a release that asked for it (qDrop).
	q      *gpu.Array[kernels.Mont]
	qKept  bool
	qUsers int
	qDrop  bool
}

// stackSource is one trace of a commitment and where its first column starts in Q.
type stackSource struct {
	trace            *Trace
	start, logStride int
}

var _ stark.Committed = (*Committed)(nil)

// Root returns the Merkle root.
func (c *Committed) Root() stark.Digest { return c.root }

// Layout returns the stacked layout.
func (c *Committed) Layout() *stark.StackedLayout { return c.layout }

// Free releases the device buffers of the commitment (the backend's Close does it for every live
// commitment) and its pins of the traces. Using it afterwards is an error.
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
	for _, s := range c.sources {
		s.trace.unpin()
	}
	c.sources = nil
}

// live reports ErrFreed for a freed commitment.
func (c *Committed) live() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
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

// encodeStack encodes the stacking of the commitment's traces into q (Q).
func (c *Committed) encodeStack(b *gpu.Batch, q *gpu.Array[kernels.Mont]) error {
	for _, s := range c.sources {
		t := s.trace
		if err := kernels.EncodeStackTrace(b, c.be.dev, t.pinnedValues(), t.height, t.width, q, s.start, s.logStride); err != nil {
			return err
		}
	}
	return b.Err()
}

// fillCodeword writes the columns [c0, c0 + n) of the commitment's RS codeword into chunk
// (kernels.FillColumns, for the streamed tree and its openings): the chunk cleared, the part of
// each trace that falls in those columns of Q stacked into its message rows, the encoding in
// place.
func (c *Committed) fillCodeword(b *gpu.Batch, chunk *gpu.Array[kernels.Mont], c0, n int) error {
	logH, _ := field.Log2(c.height)
	if err := kernels.EncodeZero(b, c.be.dev, chunk); err != nil {
		return err
	}
	for _, s := range c.sources {
		t := s.trace
		if err := kernels.EncodeStackTraceCols(b, c.be.dev, t.pinnedValues(), t.height, t.width, chunk, s.start, s.logStride, logH, logH+c.logBlowup, c0, n); err != nil {
			return err
		}
	}
	return c.be.ntt.EncodeRSInPlace(b, chunk, c.height, n, c.lSkip, c.logBlowup)
}

// encodeOpenings encodes the batched opening of the commitment's tree at q: from the kept
// codeword, or from the codeword encoded again a chunk of columns at a time (the lean plan).
func (c *Committed) encodeOpenings(b *gpu.Batch, q *kernels.QueryIndices) (*kernels.PendingOpening, error) {
	c.mu.Lock()
	tree, kept := c.tree, c.codeword != nil
	c.mu.Unlock()
	if tree == nil {
		return nil, ErrFreed
	}
	if kept { // the tree's own matrix
		return tree.EncodeOpenBatch(b, q)
	}
	return tree.EncodeOpenBatchStreamed(b, q, kernels.StreamChunkColumns(c.width), c.fillCodeword)
}

// acquireQ returns Q, stacked into b when it is not on the device; give it back with releaseQ.
func (c *Committed) acquireQ(b *gpu.Batch) (*gpu.Array[kernels.Mont], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return nil, ErrFreed
	}
	if c.q == nil {
		q, err := gpu.AllocArray[kernels.Mont](c.be.dev, "stacked matrix", c.height*c.width)
		if err != nil {
			return nil, err
		}
		if err := c.encodeStack(b, q); err != nil {
			q.Free()
			return nil, err
		}
		c.q = q
	}
	c.qUsers++
	return c.q, nil
}

// releaseQ gives back a lease of acquireQ; with drop, a Q that is not kept is freed once no
// lease holds it (the stacked reduction leaves it to WHIR's batching, which drops it). Work
// encoded before the call may still read Q: frees are in queue order on GPUs, and the host runs
// work as it is encoded.
func (c *Committed) releaseQ(drop bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.qUsers--
	c.qDrop = c.qDrop || drop
	if c.qUsers == 0 && c.qDrop && !c.qKept && c.q != nil {
		c.q.Free()
		c.q, c.qDrop = nil, false
	}
}

// StackedMatrix downloads Q (canonical): for tests and diagnostics, never on the proving path.
func (c *Committed) StackedMatrix() (air.Matrix, error) {
	b := c.be.dev.Batch()
	q, err := c.acquireQ(b)
	if err != nil {
		return air.Matrix{}, err
	}
	defer c.releaseQ(true)
	if err := b.Wait(); err != nil {
		return air.Matrix{}, err
	}
	v, err := kernels.ReadCanonical(q)
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
// the stacking kernel places every resident trace into Q (kept) or straight into the message rows
// of a chunk of the codeword's columns (Montgomery), RS encoding is the NTT batch of
// kernels.EncodeRSMatrix or EncodeRSInPlace, the Merkle tree the Poseidon2 kernels (streamed
// chunk by chunk in the lean plan); the root is the only download (32 bytes). The traces are
// pinned until the commitment is freed.
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
	for mat, t := range dts {
		if t.width == 0 {
			continue
		}
		if err := t.pin(); err != nil {
			return fail(err)
		}
		start, stride := layout.Placement(layout.Cols[layout.MatStarts[mat]])
		logStride, _ := field.Log2(stride)
		c.sources = append(c.sources, stackSource{trace: t, start: start, logStride: logStride})
	}
	keep := b.keepStacked.Load()
	batch := b.dev.Batch()
	if keep { // Q, then the codeword from it, the tree from the codeword
		if c.q, err = gpu.AllocArray[kernels.Mont](b.dev, "stacked matrix", c.height*c.width); err != nil {
			return fail(err)
		}
		c.qKept = true
		if err := c.encodeStack(batch, c.q); err != nil {
			return fail(err)
		}
		// The RS encoding writes every word of the codeword before it reads it (EncodeRSMatrix).
		if codeword, err = gpu.AllocArrayUninit[kernels.Mont](b.dev, "stacked codeword", (c.height*c.width)<<p.LogBlowup); err != nil {
			return fail(err)
		}
		if err := b.ntt.EncodeRSMatrixWide(batch, c.q, codeword, c.height, c.width, p.LSkip, p.LogBlowup, false); err != nil {
			return fail(err)
		}
		c.tree, err = b.hash.EncodeMerkleTree(batch, codeword, c.height<<p.LogBlowup, c.width, p.Whir.K)
	} else { // the codeword never whole: encoded and hashed a chunk of columns at a time
		c.tree, err = b.hash.EncodeMerkleTreeStreamed(batch, c.height<<p.LogBlowup, c.width, p.Whir.K, c.fillCodeword)
	}
	if err != nil {
		return fail(err)
	}
	if err := batch.Err(); err != nil {
		return fail(err)
	}
	// The NTT's scratch goes back: the lean plan's until the openings' transforms (the stacked
	// reduction's step, the proof's peak, needs none); the fast plan's commitment took a wide one
	// (EncodeRSMatrixWide), of which it keeps the size of a plain transform of its columns. In
	// queue order after the work that reads it, before the root's download: the host frees and
	// allocates while the device hashes.
	b.ntt.ReleaseScratch()
	if keep {
		if err := b.ntt.Reserve(b.ntt.ScratchWords(c.height<<p.LogBlowup, c.width)); err != nil {
			return fail(err)
		}
	}
	if c.root, err = c.tree.Root(); err != nil {
		return fail(fmt.Errorf("backend/device: commit: %w", err))
	}
	c.codeword = codeword
	if err := b.track(c); err != nil {
		return fail(err)
	}
	return c, nil
}
