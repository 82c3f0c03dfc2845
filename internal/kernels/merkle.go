package kernels

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// MerkleTree is a Merkle commitment built on the device by shaders/commit/merkle.metal, equal to
// cpuref.NewMerkleTree: leaf[r] = hash_slice(row r of the column-major matrix, in column order);
// query group y < qs = height/2^k is tree_compress(leaf[y + t·qs], t < 2^k); a binary tree of
// compress above the qs group digests. The layers stay on the device in ONE buffer of 2qs − 1
// digests: layer d (qs >> d digests; layer 0 has the query-group
// digests, the last layer the root) starts at digest 2qs − (2qs >> d), so one dispatch can
// gather sibling paths across all layers. The matrix is borrowed (the tree reads it for
// openings) and must outlive the tree, unless the tree lets it go (ReleaseMatrix): a commitment
// that does not keep its codeword rebuilds it for the openings (EncodeOpenBatchOf).
type MerkleTree struct {
	dev                   *gpu.Device
	matrix                *gpu.Array[Mont]
	height, width, logRPQ int
	depth                 int                    // layers below the root: log2 qs
	layers                *gpu.Array[MontDigest] // nil once freed
	// scratch holds the leaf digests and group levels below layer 0 until the tree's batch is
	// known to be done (the first download: Root, Open or a batch opening's Read), then it is
	// freed.
	scratch []*gpu.Array[MontDigest]
}

// MerkleTree commits to the column-major Montgomery matrix (height rows, a power of two; width
// ≥ 1 columns; height·width < maxColumnElems = 2^32 − 2^28) with 2^logRowsPerQuery rows per
// query group, in one batch (one sync).
func (h *Poseidon2) MerkleTree(matrix *gpu.Array[Mont], height, width, logRowsPerQuery int) (*MerkleTree, error) {
	b := h.dev.Batch()
	t, err := h.EncodeMerkleTree(b, matrix, height, width, logRowsPerQuery)
	if err != nil {
		return nil, err
	}
	if err := b.Wait(); err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}

// layerOffset is the digest offset of layer d in the layers buffer of a tree with qs query
// groups (layers of qs, qs/2, …, 1 digests, back to back).
func layerOffset(qs, d int) int { return 2*qs - (2*qs)>>d }

// EncodeMerkleTree encodes MerkleTree into b: the layers are allocated now and valid once b's
// work is done (the tree's Root and Open wait for it). On an error the tree is freed.
func (h *Poseidon2) EncodeMerkleTree(b *gpu.Batch, matrix *gpu.Array[Mont], height, width, logRowsPerQuery int) (*MerkleTree, error) {
	logH, err := log2Exact("MerkleTree", height)
	if err != nil {
		return nil, err
	}
	if width <= 0 || logRowsPerQuery < 0 || logRowsPerQuery > logH {
		return nil, fmt.Errorf("kernels: MerkleTree: width %d, 2^%d rows per query, height 2^%d", width, logRowsPerQuery, logH)
	}
	// merkle_hash_rows and the gathers of the openings index the matrix with unsigned 32-bit
	// arithmetic (exact below 2^32): it may be a codeword beyond 2^31 elements.
	if err := checkColumns("MerkleTree", matrix, height*width); err != nil {
		return nil, err
	}
	if 8*height >= maxElems {
		return nil, fmt.Errorf("kernels: MerkleTree: %d rows exceed 2^28", height)
	}
	dev := h.dev
	qs := height >> logRowsPerQuery
	t := &MerkleTree{dev: dev, matrix: matrix, height: height, width: width, logRPQ: logRowsPerQuery, depth: logH - logRowsPerQuery}
	fail := func(err error) (*MerkleTree, error) {
		t.Free()
		return nil, err
	}
	if t.layers, err = gpu.AllocArray[MontDigest](dev, "merkle layers", 2*qs-1); err != nil {
		return nil, err
	}
	scratch := func(name string, n int) (*gpu.Array[MontDigest], error) {
		a, err := gpu.AllocArrayUninit[MontDigest](dev, name, n) // written before each read
		if err == nil {
			t.scratch = append(t.scratch, a)
		}
		return a, err
	}
	// Leaves; with k = 0 they are layer 0, hashed straight into it.
	if logRowsPerQuery == 0 {
		encodeHashRows(b, dev, matrix, t.layers, h.rc, height, width, height, logH, 0, 0)
	} else {
		// The query groups chunk by chunk of c consecutive group indices y (MerkleScratch): the
		// 2^k slabs of c rows y0 + t·qs + [0, c) hashed into the leaf scratch, then the k group
		// levels (qs = c there), the last into layer 0 at y0; the scratch reused by each chunk.
		c := merkleChunk(qs, logRowsPerQuery)
		logC := bits.TrailingZeros(uint(c))
		leaves, err := scratch("merkle leaves", c<<logRowsPerQuery)
		if err != nil {
			return fail(err)
		}
		var other *gpu.Array[MontDigest]
		if logRowsPerQuery > 1 {
			if other, err = scratch("merkle group scratch", c<<(logRowsPerQuery-1)); err != nil {
				return fail(err)
			}
		}
		for y0 := 0; y0 < qs; y0 += c {
			encodeHashRows(b, dev, matrix, leaves, h.rc, height, width, c<<logRowsPerQuery, logC, qs, y0)
			// The k group levels, ping-ponging between the leaves and the other scratch.
			cur := leaves
			for lvl := 1; lvl <= logRowsPerQuery; lvl++ {
				n := c << (logRowsPerQuery - lvl)
				dst, outOff := leaves, 0
				switch {
				case lvl == logRowsPerQuery:
					dst, outOff = t.layers, y0
				case cur == leaves:
					dst = other
				}
				encodeCompress(b, dev, cur, dst, h.rc, n, c, 0, outOff)
				cur = dst
			}
		}
	}
	for d := 1; d <= t.depth; d++ {
		n := qs >> d
		encodeCompress(b, dev, t.layers, t.layers, h.rc, n, 1, layerOffset(qs, d-1), layerOffset(qs, d))
	}
	if err := b.Err(); err != nil {
		return fail(err)
	}
	return t, nil
}

// merkleScratchDigests caps the leaf scratch of a tree with query groups (digests; 32 MiB): a
// larger tree hashes its leaves and compresses its group levels chunk by chunk of query groups
// (keccakf-1024's codeword: 2^22 leaves in four chunks, 48 MiB of scratch instead of 201 MiB). A
// variable for tests.
var merkleScratchDigests = 1 << 20

// merkleChunk is the number of consecutive query groups a chunk of EncodeMerkleTree takes: a
// power of two dividing qs, at least MSL_LANES' 16 rows a slab (the host's lane groups), whose
// 2^k leaves fit merkleScratchDigests.
func merkleChunk(qs, logRPQ int) int {
	c := qs
	for c > 16 && c<<logRPQ > merkleScratchDigests {
		c >>= 1
	}
	return c
}

// MerkleScratch returns the scratch digests EncodeMerkleTree takes for a tree of height rows with
// 2^logRowsPerQuery rows per query group (the leaves and the group levels of a chunk), for the
// memory estimate.
func MerkleScratch(height, logRowsPerQuery int) (leaves, groups int) {
	if logRowsPerQuery == 0 {
		return 0, 0
	}
	c := merkleChunk(height>>logRowsPerQuery, logRowsPerQuery)
	if logRowsPerQuery > 1 {
		groups = c << (logRowsPerQuery - 1)
	}
	return c << logRowsPerQuery, groups
}

// encodeHashRows encodes the row hashes of items [0, n) of matrix into digests (item i: row
// (i >> logSlab)·slabStride + slabFirst + i mod 2^logSlab; logSlab = log2 height, slabFirst 0:
// row i), in dispatches of at most maxPermsPerDispatch permutations.
func encodeHashRows(b *gpu.Batch, dev *gpu.Device, matrix *gpu.Array[Mont], digests *gpu.Array[MontDigest], rc *gpu.Array[Mont],
	height, width, n, logSlab, slabStride, slabFirst int) {
	step := chunkItems(n, (width+7)/8)
	for r := 0; r < n; r += step {
		end := min(r+step, n)
		g, tp := shapeFor(dev, "merkle_hash_rows", end-r)
		dispatchMerkleHashRows(b, g, tp, matrix.Buffer, digests.Buffer, rc.Buffer,
			merkleRowParams{height: uint32(height), width: uint32(width), rowBegin: uint32(r), rowEnd: uint32(end),
				logSlab: uint32(logSlab), slabStride: uint32(slabStride), slabFirst: uint32(slabFirst)})
	}
}

// maxPermsPerDispatch bounds the Poseidon2 permutations of one Merkle dispatch: larger layers are
// split into dispatches over ranges of rows (digests). A dispatch cannot be interrupted, and on a
// Mac driving a display macOS stops command buffers that run too long (the Metal backend closes
// command buffers between dispatches, never inside one). 2^24 permutations take about 8 ms on an
// H100 (2.2·10^9/s measured) and, estimated from the ALU rates, a few hundred ms on the smallest
// Apple GPU (unverified on Apple hardware). Only layers of more than 2^24 permutations are split
// (2^22 rows of 42 columns: into two dispatches). A variable for tests.
var maxPermsPerDispatch = 1 << 24

// chunkItems returns how many of n items (rows, digests) of permsPerItem permutations each one
// dispatch takes: a power of two ≥ 1024 (whole lane groups on the host device) within
// maxPermsPerDispatch, or n.
func chunkItems(n, permsPerItem int) int {
	c := max(maxPermsPerDispatch/max(permsPerItem, 1), 1)
	c = max(1<<(bits.Len(uint(c))-1), 1024)
	return max(min(c, n), 1)
}

// encodeCompress encodes out[outOff + i] = compress(in[inOff + 2x·qs + y], in[inOff + (2x+1)·qs + y])
// for i < n (x = i/qs, y = i mod qs; offsets in digests), in dispatches of at most
// maxPermsPerDispatch digests.
func encodeCompress(b *gpu.Batch, dev *gpu.Device, in, out *gpu.Array[MontDigest], rc *gpu.Array[Mont], n, qs, inOff, outOff int) {
	step := chunkItems(n, 1)
	for i := 0; i < n; i += step {
		end := min(i+step, n)
		g, tp := shapeFor(dev, "merkle_compress", end-i)
		dispatchMerkleCompress(b, g, tp, in.Buffer, out.Buffer, rc.Buffer, merkleCompressParams{begin: uint32(i), end: uint32(end),
			qs: uint32(qs), inOff: uint32(inOff), outOff: uint32(outOff)})
	}
}

// Free frees the layers (not the matrix).
func (t *MerkleTree) Free() {
	if t.layers != nil {
		t.layers.Free()
	}
	t.layers = nil
	t.freeScratch()
}

// freeScratch frees the buffers only the tree's own batch used; call it after a download.
func (t *MerkleTree) freeScratch() {
	for _, s := range t.scratch {
		s.Free()
	}
	t.scratch = nil
}

// Depth is the number of layers below the root (log2 qs).
func (t *MerkleTree) Depth() int { return t.depth }

// QueryStride is qs = height / 2^k.
func (t *MerkleTree) QueryStride() int { return t.height >> t.logRPQ }

func digestsOf(v []MontDigest) []poseidon2.Digest {
	out := make([]poseidon2.Digest, len(v))
	for i, m := range v {
		for k := range m {
			out[i][k] = CanonicalOf(m[k])
		}
	}
	return out
}

// Root downloads the root (32 bytes), canonical.
func (t *MerkleTree) Root() (poseidon2.Digest, error) {
	var v [1]MontDigest
	if err := t.layers.Read(v[:], layerOffset(t.QueryStride(), t.depth)); err != nil {
		return poseidon2.Digest{}, err
	}
	t.freeScratch()
	return digestsOf(v[:])[0], nil
}

// Layer downloads layer i (0: the query-group digests), canonical.
func (t *MerkleTree) Layer(i int) ([]poseidon2.Digest, error) {
	if i < 0 || i > t.depth {
		return nil, fmt.Errorf("kernels: MerkleTree.Layer(%d): %d layers", i, t.depth+1)
	}
	v := make([]MontDigest, t.QueryStride()>>i)
	if err := t.layers.Read(v, layerOffset(t.QueryStride(), i)); err != nil {
		return nil, err
	}
	t.freeScratch()
	return digestsOf(v), nil
}

// Opening answers one query: the 2^k rows y + t·qs in order of t (canonical) and the siblings
// from layer 0 up to, excluding, the root (as cpuref.MerkleOpening).
type Opening struct {
	Index int
	Rows  [][]field.Fp
	Proof []poseidon2.Digest
}

// Open returns the opening of query index y (one gather dispatch and sync, then small
// downloads).
func (t *MerkleTree) Open(y int) (*Opening, error) {
	if t.matrix == nil {
		return nil, errNoMatrix
	}
	qs := t.QueryStride()
	if y < 0 || y >= qs {
		return nil, fmt.Errorf("kernels: MerkleTree.Open: index %d not in [0, %d)", y, qs)
	}
	nrows := 1 << t.logRPQ
	buf, err := gpu.AllocArray[field.Fp](t.dev, "merkle opened rows", nrows*t.width)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	b := t.dev.Batch()
	g, tp := shapeFor(t.dev, "merkle_gather_rows", nrows*t.width)
	dispatchMerkleGatherRows(b, g, tp, t.matrix.Buffer, buf.Buffer,
		merkleGatherParams{height: uint32(t.height), width: uint32(t.width), qs: uint32(qs), y: uint32(y), nrows: uint32(nrows)})
	if err := b.Wait(); err != nil {
		return nil, err
	}
	t.freeScratch()
	flat, err := buf.ReadAll()
	if err != nil {
		return nil, err
	}
	o := &Opening{Index: y, Rows: make([][]field.Fp, nrows)}
	for i := range o.Rows {
		o.Rows[i] = flat[i*t.width : (i+1)*t.width : (i+1)*t.width]
	}
	idx := y
	for d := range t.depth {
		var v [1]MontDigest
		if err := t.layers.Read(v[:], layerOffset(qs, d)+(idx^1)); err != nil {
			return nil, err
		}
		o.Proof = append(o.Proof, digestsOf(v[:])[0])
		idx >>= 1
	}
	return o, nil
}

// BatchOpening answers several queries: Rows[q][t][col] (canonical) are the 2^k opened rows of
// query q in order of t, Paths[q] its sibling digests from layer 0 up to, excluding, the root.
type BatchOpening struct {
	Rows  [][][]field.Fp
	Paths [][]poseidon2.Digest
}

// QueryIndices are query indices uploaded once (as uint32) for the batched openings of one or
// more trees (EncodeOpenBatch); each tree checks them against its own query stride.
type QueryIndices struct {
	ys  []int
	buf *gpu.Array[uint32] // nil when there are no indices
}

// UploadQueryIndices uploads ys (each in [0, 2^31)) for EncodeOpenBatch.
func UploadQueryIndices(dev *gpu.Device, ys []int) (*QueryIndices, error) {
	v := make([]uint32, len(ys))
	for i, y := range ys {
		if y < 0 || y >= maxElems {
			return nil, fmt.Errorf("kernels: query index %d (#%d) not in [0, 2^31)", y, i)
		}
		v[i] = uint32(y)
	}
	q := &QueryIndices{ys: append([]int(nil), ys...)}
	if len(v) > 0 {
		var err error
		if q.buf, err = gpu.UploadArray(dev, "merkle query indices", v); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Len is the number of query indices.
func (q *QueryIndices) Len() int { return len(q.ys) }

// Free frees the device copy; call it once every batch using q is done.
func (q *QueryIndices) Free() {
	if q.buf != nil {
		q.buf.Free()
	}
}

// PendingOpening is a batched opening encoded into a batch (EncodeOpenBatch); Read returns it.
type PendingOpening struct {
	tree    *MerkleTree
	queries int
	// out holds the opened rows, queries·2^k·width canonical values (query, row, column), then
	// the paths, queries·depth digests of 8 canonical values (query, layer).
	out *gpu.Array[field.Fp]
}

// EncodeOpenBatch encodes the gathers of a batched opening at the indices q into b: one
// dispatch for every query's rows, one for every query's sibling path, into one output buffer.
// Several trees (of any shapes) can be opened in the same batch at the same indices; after the
// batch (one sync, or none: Read's download waits for encoded work) each PendingOpening's Read
// is a single download. Every index must be below the tree's query stride.
func (t *MerkleTree) EncodeOpenBatch(b *gpu.Batch, q *QueryIndices) (*PendingOpening, error) {
	if t.matrix == nil {
		return nil, errNoMatrix
	}
	return t.EncodeOpenBatchOf(b, t.matrix, q)
}

// errNoMatrix: the tree let its matrix go (ReleaseMatrix).
var errNoMatrix = fmt.Errorf("kernels: MerkleTree: the matrix was released; open with EncodeOpenBatchOf")

// ReleaseMatrix makes the tree forget its matrix, which the caller may then free: openings then
// take the matrix as an argument (EncodeOpenBatchOf), typically rebuilt for them. Call it once the
// tree's own batch is known to be done (after Root), since that batch reads the matrix.
func (t *MerkleTree) ReleaseMatrix() { t.matrix = nil }

// EncodeOpenBatchOf is EncodeOpenBatch with the rows gathered from matrix, which must hold the
// values the tree was built from (height × width, column-major Montgomery): a codeword rebuilt
// after ReleaseMatrix. matrix must stay allocated until the opening's batch is done.
func (t *MerkleTree) EncodeOpenBatchOf(b *gpu.Batch, matrix *gpu.Array[Mont], q *QueryIndices) (*PendingOpening, error) {
	if err := checkColumns("MerkleTree.EncodeOpenBatchOf", matrix, t.height*t.width); err != nil {
		return nil, err
	}
	if t.layers == nil {
		return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatch: tree was freed")
	}
	qs := t.QueryStride()
	for i, y := range q.ys {
		if y < 0 || y >= qs {
			return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatch: index %d (#%d) not in [0, %d)", y, i, qs)
		}
	}
	nq := len(q.ys)
	p := &PendingOpening{tree: t, queries: nq}
	if nq == 0 {
		return p, nil
	}
	nrows := 1 << t.logRPQ
	rowElems := nq * nrows * t.width
	pathElems := nq * t.depth * 8
	if rowElems+pathElems >= maxElems {
		return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatch: %d queries of %d rows × %d columns exceed 2^31 values", nq, nrows, t.width)
	}
	var err error
	if p.out, err = gpu.AllocArray[field.Fp](t.dev, "merkle batch opening", rowElems+pathElems); err != nil {
		return nil, err
	}
	g, tp := shapeFor(t.dev, "merkle_gather_query_rows", rowElems)
	dispatchMerkleGatherQueryRows(b, g, tp, matrix.Buffer, q.buf.Buffer, p.out.Buffer, merkleGatherQueryRowsParams{height: uint32(t.height), width: uint32(t.width), qs: uint32(qs), nrows: uint32(nrows), queries: uint32(nq)})
	if pathElems > 0 {
		g, tp := shapeFor(t.dev, "merkle_gather_paths", pathElems)
		dispatchMerkleGatherPaths(b, g, tp, t.layers.Buffer, q.buf.Buffer, p.out.Buffer, merkleGatherPathsParams{qs: uint32(qs), depth: uint32(t.depth), queries: uint32(nq), outOff: uint32(rowElems)})
	}
	if err := b.Err(); err != nil {
		p.Free()
		return nil, err
	}
	return p, nil
}

// Read downloads the opening (one download; it waits for the batch if that was not waited
// for) and frees the output buffer. Call it once.
func (p *PendingOpening) Read() (*BatchOpening, error) {
	t := p.tree
	o := &BatchOpening{Rows: make([][][]field.Fp, p.queries), Paths: make([][]poseidon2.Digest, p.queries)}
	if p.queries == 0 {
		return o, nil
	}
	if p.out == nil {
		return nil, fmt.Errorf("kernels: PendingOpening.Read: already read or freed")
	}
	flat, err := p.out.ReadAll()
	p.Free()
	if err != nil {
		return nil, err
	}
	t.freeScratch()
	nrows := 1 << t.logRPQ
	vals := flat[:p.queries*nrows*t.width]
	paths := make([]poseidon2.Digest, p.queries*t.depth)
	for i := range paths {
		copy(paths[i][:], flat[len(vals)+8*i:])
	}
	for q := range p.queries {
		rows := make([][]field.Fp, nrows)
		for r := range rows {
			at := (q*nrows + r) * t.width
			rows[r] = vals[at : at+t.width : at+t.width]
		}
		o.Rows[q] = rows
		o.Paths[q] = paths[q*t.depth : (q+1)*t.depth : (q+1)*t.depth]
	}
	return o, nil
}

// Free frees the output buffer (Read does); freeing twice is harmless.
func (p *PendingOpening) Free() {
	if p.out != nil {
		p.out.Free()
		p.out = nil
	}
}

// OpenBatch returns the openings of the query indices ys, equal to Open(y) for each y: the
// indices are uploaded once, two gather dispatches, one sync, one download.
func (t *MerkleTree) OpenBatch(ys []int) (*BatchOpening, error) {
	q, err := UploadQueryIndices(t.dev, ys)
	if err != nil {
		return nil, err
	}
	defer q.Free()
	b := t.dev.Batch()
	p, err := t.EncodeOpenBatch(b, q)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	if p.queries > 0 {
		if err := b.Wait(); err != nil {
			return nil, err
		}
	}
	return p.Read()
}
