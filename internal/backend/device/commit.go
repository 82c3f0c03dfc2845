package device

import (
	"fmt"
	"sync"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
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
	c, _, _, err := b.commit(p, traces, nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

var _ stark.CommitGrinder = (*Backend)(nil)

// CommitGrind implements stark.CommitGrinder: behind the commitment's kernels a device
// transcript in tr's state observes the root (from the tree) and tail (uploaded before the
// commitment is encoded), and the proof of work is searched from its sponge
// (kernels.Grind.EncodeSearchAll, at most chainMaxPowBits bits); the root and the witness come
// back in one download.
func (b *Backend) CommitGrind(p params.SystemParams, traces []stark.Trace, tr *transcript.Transcript, tail []field.Fp, bits int, behind func()) (stark.Committed, field.Fp, bool, error) {
	if bits < 1 || bits > chainMaxPowBits {
		c, err := b.Commit(p, traces)
		return c, 0, false, err
	}
	c, w, found, err := b.commit(p, traces, &preambleGrind{tr: tr, tail: tail, bits: bits, behind: behind})
	if err != nil {
		return nil, 0, false, err
	}
	return c, w, found, nil
}

// preambleGrind is what CommitGrind does behind the commitment: from tr's state, observe the
// root and tail, then grind bits.
type preambleGrind struct {
	tr     *transcript.Transcript
	tail   []field.Fp
	bits   int
	behind func() // CommitGrind's: run before the download
}

// commit is Commit, with pg set CommitGrind's: the witness and whether the search found one.
func (b *Backend) commit(p params.SystemParams, traces []stark.Trace, pg *preambleGrind) (*Committed, field.Fp, bool, error) {
	layout, err := stark.CommitLayout(p, traces)
	if err != nil {
		return nil, 0, false, err
	}
	dts, err := b.traces(traces)
	if err != nil {
		return nil, 0, false, err
	}
	c := &Committed{be: b, layout: layout, height: 1 << layout.LogHeight, width: layout.Width,
		lSkip: p.LSkip, logBlowup: p.LogBlowup, k: p.Whir.K}
	var codeword *gpu.Array[kernels.Mont]
	var tt *kernels.DeviceTranscript
	var pre *gpu.Array[kernels.Mont]
	defer func() {
		if tt != nil {
			tt.Close()
		}
		if pre != nil {
			pre.Free()
		}
	}()
	fail := func(err error) (*Committed, field.Fp, bool, error) {
		c.free()
		if codeword != nil {
			codeword.Free() // a second free of a kept codeword is harmless
		}
		return nil, 0, false, err
	}
	if pg != nil {
		// The root's place, the preamble's tail, the witness's place: up before the
		// commitment's kernels (an upload waits for the work queued before it).
		words := make([]field.Fp, poseidon2.DigestSize, poseidon2.DigestSize+len(pg.tail)+1)
		words = append(append(words, pg.tail...), 0)
		if pre, err = gpu.UploadArray(b.dev, "preamble", kernels.MontSlice(words)); err != nil {
			return fail(err)
		}
		if tt, err = b.hash.NewDeviceTranscript(1); err != nil {
			return fail(err)
		}
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
	var w field.Fp
	found := false
	if pg == nil {
		if c.root, err = c.tree.Root(); err != nil {
			return fail(fmt.Errorf("backend/device: commit: %w", err))
		}
	} else if c.root, w, found, err = c.encodeGrind(pg, tt, pre); err != nil {
		return fail(fmt.Errorf("backend/device: commit: %w", err))
	}
	c.codeword = codeword
	if err := b.track(c); err != nil {
		return fail(err)
	}
	return c, w, found, nil
}

// encodeGrind encodes pg behind the commitment on tt, with pre the root's place, pg.tail and
// the witness's place (uploaded): the root copied in, the root and tail observed at once, the
// search, its result copied in; one download brings back the root and the witness.
func (c *Committed) encodeGrind(pg *preambleGrind, tt *kernels.DeviceTranscript, pre *gpu.Array[kernels.Mont]) (stark.Digest, field.Fp, bool, error) {
	b := c.be.dev.Batch()
	n := poseidon2.DigestSize + len(pg.tail) // observed
	st, absorbIdx, sampleIdx := pg.tr.State()
	if err := tt.EncodeSetState(b, st, absorbIdx, sampleIdx); err != nil {
		return stark.Digest{}, 0, false, err
	}
	if err := c.tree.EncodeCopyRoot(b, pre.Buffer, 0); err != nil {
		return stark.Digest{}, 0, false, err
	}
	if err := tt.EncodeObserveSample(b, pre.Buffer, 0, n, false, 0); err != nil {
		return stark.Digest{}, 0, false, err
	}
	// The sponge's absorb index after the observes, as the host's transcript has it.
	shadow := *pg.tr
	shadow.ObserveSlice(make([]field.Fp, n))
	_, ai, _ := shadow.State()
	g, unlock, err := c.be.grinder()
	if err != nil {
		return stark.Digest{}, 0, false, err
	}
	defer unlock()
	if err := g.EncodeSearchAll(b, tt, ai, pg.bits); err != nil {
		return stark.Digest{}, 0, false, err
	}
	b.Copy(pre.Buffer, 4*n, g.Result().Buffer, 0, 4)
	if err := b.Err(); err != nil {
		return stark.Digest{}, 0, false, err
	}
	// The tree's scratch goes back in queue order, before what runs behind allocates.
	c.tree.ReleaseScratch()
	if pg.behind != nil {
		pg.behind()
	}
	v := make([]kernels.Mont, n+1)
	if err := pre.Read(v, 0); err != nil {
		return stark.Digest{}, 0, false, err
	}
	var root stark.Digest
	for i := range root {
		root[i] = kernels.CanonicalOf(v[i])
	}
	w := uint32(v[n]) // canonical: the search's result as found
	if w >= field.P {
		return root, 0, false, nil
	}
	return root, field.Fp(w), true, nil
}
