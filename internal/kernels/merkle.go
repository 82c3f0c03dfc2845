package kernels

import (
	"fmt"
	"math/bits"
	"unsafe"

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
// openings) and must outlive the tree. A tree streamed a chunk of columns at a time
// (EncodeMerkleTreeStreamed) has no matrix: its openings write it again
// (EncodeOpenBatchStreamed).
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
	// extra is scratch of other types freed with it: a streamed tree's chunk and sponge states.
	extra []*gpu.Array[Mont]
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
	// merkle_hash_rows and the gathers of the openings index the matrix with unsigned 32-bit
	// arithmetic (exact below 2^32): it may be a codeword beyond 2^31 elements.
	if err := checkColumns("MerkleTree", matrix, height*width); err != nil {
		return nil, err
	}
	t, err := h.newTree(matrix, height, width, logRowsPerQuery)
	if err != nil {
		return nil, err
	}
	if err := h.encodeLeavesAndLevels(b, t, matrix, width, nil); err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}

// newTree checks the shape of a tree and allocates its layers.
func (h *Poseidon2) newTree(matrix *gpu.Array[Mont], height, width, logRowsPerQuery int) (*MerkleTree, error) {
	logH, err := log2Exact("MerkleTree", height)
	if err != nil {
		return nil, err
	}
	if width <= 0 || logRowsPerQuery < 0 || logRowsPerQuery > logH {
		return nil, fmt.Errorf("kernels: MerkleTree: width %d, 2^%d rows per query, height 2^%d", width, logRowsPerQuery, logH)
	}
	if 8*height >= maxElems {
		return nil, fmt.Errorf("kernels: MerkleTree: %d rows exceed 2^28", height)
	}
	qs := height >> logRowsPerQuery
	t := &MerkleTree{dev: h.dev, matrix: matrix, height: height, width: width, logRPQ: logRowsPerQuery, depth: logH - logRowsPerQuery}
	if t.layers, err = gpu.AllocArray[MontDigest](h.dev, "merkle layers", 2*qs-1); err != nil {
		return nil, err
	}
	return t, nil
}

// scratchOf allocates a scratch buffer the tree frees after its first download.
func (t *MerkleTree) scratchOf(name string, n int) (*gpu.Array[MontDigest], error) {
	a, err := gpu.AllocArrayUninit[MontDigest](t.dev, name, n) // written before each read
	if err == nil {
		t.scratch = append(t.scratch, a)
	}
	return a, err
}

// encodeLeavesAndLevels encodes the row hashes of matrix (width columns: the whole matrix, or the
// last chunk of a streamed one, whose rows' sponges continue from states), the query groups'
// levels and the binary tree above them.
func (h *Poseidon2) encodeLeavesAndLevels(b *gpu.Batch, t *MerkleTree, matrix *gpu.Array[Mont], width int, states *gpu.Array[Mont]) error {
	dev, height, logRowsPerQuery := h.dev, t.height, t.logRPQ
	logH := t.depth + logRowsPerQuery
	qs := height >> logRowsPerQuery
	// Leaves; with k = 0 they are layer 0, hashed straight into it.
	if logRowsPerQuery == 0 {
		encodeHashRows(b, dev, matrix, t.layers, h.rc, height, width, height, logH, 0, 0, states, nil)
	} else {
		// The query groups chunk by chunk of c consecutive group indices y (MerkleScratch): the
		// 2^k slabs of c rows y0 + t·qs + [0, c) hashed into the leaf scratch, then the k group
		// levels (qs = c there), the last into layer 0 at y0; the scratch reused by each chunk.
		c := merkleChunk(qs, logRowsPerQuery)
		logC := bits.TrailingZeros(uint(c))
		leaves, err := t.scratchOf("merkle leaves", c<<logRowsPerQuery)
		if err != nil {
			return err
		}
		var other *gpu.Array[MontDigest]
		if logRowsPerQuery > 1 {
			if other, err = t.scratchOf("merkle group scratch", c<<(logRowsPerQuery-1)); err != nil {
				return err
			}
		}
		for y0 := 0; y0 < qs; y0 += c {
			encodeHashRows(b, dev, matrix, leaves, h.rc, height, width, c<<logRowsPerQuery, logC, qs, y0, states, nil)
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
	h.encodeBinaryLayers(b, t.layers, qs, t.depth)
	return b.Err()
}

// merkleGroupMax: on GPUs, binary layers of at most this many compressions run
// merkle_compress_top (16 threads a compression: a permutation ≈ 4 µs, against ≈ 15 µs on one
// thread, for ≈ 2.7× the instructions), wider ones merkle_compress. H200, keccakf-1024: every
// merkle_compress launch of ≤ 2^14 compressions took 15–23 µs, its permutation's latency. A
// variable for tests.
var merkleGroupMax = 1 << 13

// merkleTopOnHost, for tests: the host device's threads a group for merkle_compress_top's
// one-layer and all-layers launches (zero: the host keeps merkle_compress).
var merkleTopOnHost [2]int

// encodeBinaryLayers encodes layers 1..depth of a tree with qs digests in layer 0: wide layers
// one launch each with a thread a compression; on GPUs the narrow ones with 16 threads a
// compression, one launch each, and the last ones (as narrow as one threadgroup's states) in one
// launch of one threadgroup. The host device keeps merkle_compress throughout: its work items
// are fibers, and its lanes already permute 16 states side by side.
func (h *Poseidon2) encodeBinaryLayers(b *gpu.Batch, layers *gpu.Array[MontDigest], qs, depth int) {
	dev := h.dev
	group, top := merkleTopOnHost[0], merkleTopOnHost[1]
	if !isHost(dev) {
		// The last launch has the one-layer launches' group, 16 states: each layer one
		// permutation's latency (H200: 1024 threads, 64 states, took 12 µs a layer; a launch of
		// one layer takes 8 µs).
		group = h.topGroup(gpuGroup)
		top = group
	}
	if group < 16 || top < 16 { // no threadgroup of whole 16-thread states
		group, top = 0, 0
	}
	d := 1
	for ; d <= depth && (group == 0 || qs>>d > merkleGroupMax); d++ {
		encodeCompress(b, dev, layers, layers, h.rc, qs>>d, 1, layerOffset(qs, d-1), layerOffset(qs, d))
	}
	for ; d <= depth && qs>>d > top/16; d++ { // one layer a launch, 16 threads a compression
		groups := (16*(qs>>d) + group - 1) / group
		dispatchMerkleCompressTop(b, gpu.D1(uint32(groups)), gpu.D1(uint32(group)), layers.Buffer, h.rc.Buffer,
			merkleTopParams{qs: uint32(qs), dFirst: uint32(d), dLast: uint32(d)}, merkleTopScratch(group))
	}
	if d <= depth {
		dispatchMerkleCompressTop(b, gpu.D1(1), gpu.D1(uint32(top)), layers.Buffer, h.rc.Buffer,
			merkleTopParams{qs: uint32(qs), dFirst: uint32(d), dLast: uint32(depth)}, merkleTopScratch(top))
	}
}

// topGroup is merkle_compress_top's threadgroup size on a GPU: want threads clamped by the
// kernel's limit and by the threadgroup memory (merkleTopScratch), in whole SIMD groups
// (p2gGroup); below 16 when not even one state fits.
func (h *Poseidon2) topGroup(want int) int {
	n := groupSize(h.dev, "merkle_compress_top", want)
	if lim := h.dev.Limits().MaxThreadgroupMemory; lim > 0 {
		n = min(n, (lim/4-p2gRCLen)/2)
	}
	return p2gGroup(h.dev, "merkle_compress_top", n)
}

// p2gGroup is the largest group of at most n threads a kernel permuting with
// poseidon2_group.h may have on dev: on GPUs, whole SIMD groups of 32 threads (a state's 16
// threads exchange by shuffles within one SIMD group, lanes (tid & 16) + k: Apple's and NVIDIA's
// width), else 0; on the host device any multiple of 16.
func p2gGroup(dev *gpu.Device, kernel string, n int) int {
	if isHost(dev) {
		return n &^ 15
	}
	if w := dev.KernelLimits(kernel).SIMDWidth; w != 32 {
		return 0
	}
	return n &^ 31
}

// merkleTopScratch is merkle_compress_top's threadgroup memory for tpg threads: the round
// constants and two exchange halves of 16 words per state.
func merkleTopScratch(tpg int) uint32 { return uint32(4 * (p2gRCLen + 2*tpg)) }

// FillColumns encodes into b the columns [colBegin, colBegin + cols) of a matrix that is never
// whole on the device into chunk (column-major, the matrix's height; every word of the first
// cols columns written): a codeword encoded a few columns at a time (EncodeMerkleTreeStreamed,
// EncodeOpenBatchStreamed).
type FillColumns func(b *gpu.Batch, chunk *gpu.Array[Mont], colBegin, cols int) error

// StreamChunkColumns returns the columns a streamed tree of width columns takes at a time: all of
// them (one chunk, no sponge states) when that is at most three rate blocks, whose memory the
// chunks and the sponge states of a narrower stream would take anyway; else one rate block.
func StreamChunkColumns(width int) int {
	if width <= 3*poseidon2.Rate {
		return width
	}
	return poseidon2.Rate
}

// StreamScratch returns the words EncodeMerkleTreeStreamed allocates besides the tree's own
// scratch (MerkleScratch) for height rows of width columns: the chunk and the rows' sponge
// states, for the memory estimate.
func StreamScratch(height, width int) (chunk, states int) {
	cc := StreamChunkColumns(width)
	if cc < width {
		states = 16 * height
	}
	return height * cc, states
}

// EncodeMerkleTreeStreamed encodes the tree of a height × width matrix that is never whole on the
// device: fill writes it StreamChunkColumns(width) columns at a time into one chunk buffer, and
// each row's sponge carries from chunk to chunk in a buffer of 16 words a row (the leaf hash
// absorbs 8 columns a permutation, so a chunk of 8 columns is one permutation a row). The tree is
// equal to EncodeMerkleTree's of the whole matrix. It has no matrix: open it with
// EncodeOpenBatchStreamed. The chunk and the states are freed with the tree's scratch.
func (h *Poseidon2) EncodeMerkleTreeStreamed(b *gpu.Batch, height, width, logRowsPerQuery int, fill FillColumns) (*MerkleTree, error) {
	cc := StreamChunkColumns(width)
	if height*cc >= maxColumnElems || 16*height >= maxColumnElems {
		return nil, fmt.Errorf("kernels: MerkleTree: %d rows of %d-column chunks exceed the limit of 32-bit indexing (%s)", height, cc, limitString(maxColumnElems))
	}
	t, err := h.newTree(nil, height, width, logRowsPerQuery)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*MerkleTree, error) {
		t.Free()
		return nil, err
	}
	chunkWords, stateWords := StreamScratch(height, width)
	chunk, err := gpu.AllocArrayUninit[Mont](h.dev, "streamed codeword chunk", chunkWords)
	if err != nil {
		return fail(err)
	}
	t.extra = append(t.extra, chunk)
	var states *gpu.Array[Mont]
	if stateWords > 0 {
		if states, err = gpu.AllocArrayUninit[Mont](h.dev, "merkle row sponges", stateWords); err != nil {
			return fail(err)
		}
		t.extra = append(t.extra, states)
	}
	logH := bits.TrailingZeros(uint(height))
	for c0 := 0; c0 < width; c0 += cc {
		n := min(cc, width-c0)
		if err := fill(b, chunk, c0, n); err != nil {
			return fail(err)
		}
		in := states
		if c0 == 0 {
			in = nil
		}
		if c0+n < width { // absorb: every row's state after these columns
			encodeHashRows(b, h.dev, chunk, nil, h.rc, height, n, height, logH, 0, 0, in, states)
			continue
		}
		if err := h.encodeLeavesAndLevels(b, t, chunk, n, in); err != nil {
			return fail(err)
		}
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
// row i), in dispatches of at most maxPermsPerDispatch permutations. The rows' sponges start
// from statesIn where it is not nil (a streamed matrix's earlier columns); where statesOut is not
// nil, the states after matrix's columns are written there instead of digests (nil then).
func encodeHashRows(b *gpu.Batch, dev *gpu.Device, matrix *gpu.Array[Mont], digests *gpu.Array[MontDigest], rc *gpu.Array[Mont],
	height, width, n, logSlab, slabStride, slabFirst int, statesIn, statesOut *gpu.Array[Mont]) {
	step := chunkItems(n, (width+7)/8)
	p := merkleRowParams{height: uint32(height), width: uint32(width), logSlab: uint32(logSlab), slabStride: uint32(slabStride), slabFirst: uint32(slabFirst)}
	states := matrix.Buffer // bound, never read nor written without states
	if statesIn != nil {    // statesOut, where set too, is the same buffer: each row's state in place
		states, p.stateIn = statesIn.Buffer, 1
	}
	var out *gpu.Buffer
	if statesOut != nil {
		states, p.stateOut = statesOut.Buffer, 1
		out = statesOut.Buffer
	} else {
		out = digests.Buffer
	}
	for r := 0; r < n; r += step {
		end := min(r+step, n)
		g, tp := shapeFor(dev, "merkle_hash_rows", end-r)
		p.rowBegin, p.rowEnd = uint32(r), uint32(end)
		dispatchMerkleHashRows(b, g, tp, matrix.Buffer, out, rc.Buffer, p, states)
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

// ReleaseScratch frees the buffers only the tree's own kernels use, once they are encoded (frees
// are in queue order on GPUs, and the host device runs work as it is encoded): for a tree whose
// root is not downloaded before other work (the first download does it otherwise).
func (t *MerkleTree) ReleaseScratch() { t.freeScratch() }

// freeScratch frees the buffers only the tree's own batch used.
func (t *MerkleTree) freeScratch() {
	for _, s := range t.scratch {
		s.Free()
	}
	for _, s := range t.extra {
		s.Free()
	}
	t.scratch, t.extra = nil, nil
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

// EncodeCopyRoot encodes a copy of the root (8 Montgomery words) to dst at byte offset off, for a
// caller that downloads it with other values.
func (t *MerkleTree) EncodeCopyRoot(b *gpu.Batch, dst *gpu.Buffer, off int) error {
	if t.layers == nil {
		return fmt.Errorf("kernels: MerkleTree.EncodeCopyRoot: tree was freed")
	}
	return b.Copy(dst, off, t.layers.Buffer, 32*layerOffset(t.QueryStride(), t.depth), 32).Err()
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
	ys  []int // nil for indices the device made (DeviceQueryIndices)
	n   int
	buf *gpu.Array[uint32] // nil when there are no indices
	// device: buf is the caller's (DeviceQueryIndices)
	device bool
}

// DeviceQueryIndices are the first n indices of buf, written there by encoded work (a device
// transcript's samples, each below every opened tree's query stride: not checked here). buf
// stays the caller's (Free does not free it).
func DeviceQueryIndices(buf *gpu.Array[uint32], n int) (*QueryIndices, error) {
	if n < 0 || n > buf.Len() {
		return nil, fmt.Errorf("kernels: %d query indices in a buffer of %d", n, buf.Len())
	}
	return &QueryIndices{n: n, buf: buf, device: true}, nil
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
	q := &QueryIndices{ys: append([]int(nil), ys...), n: len(ys)}
	if len(v) > 0 {
		var err error
		if q.buf, err = gpu.UploadArray(dev, "merkle query indices", v); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Len is the number of query indices.
func (q *QueryIndices) Len() int { return q.n }

// Free frees the device copy (not a DeviceQueryIndices' buffer); call it once every batch using
// q is done.
func (q *QueryIndices) Free() {
	if q.buf != nil && !q.device {
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
	// flat is out's content once fetched (Fetch), until Read.
	flat []field.Fp
	// chunk is the streamed opening's codeword chunk (EncodeOpenBatchStreamed) while it is encoded.
	chunk *gpu.Array[Mont]
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
	p, err := t.newPendingOpening(q)
	if err != nil || p.out == nil {
		return p, err
	}
	t.encodeGatherRows(b, p, t.matrix, q, 0, t.width)
	return p, t.encodeGatherPaths(b, p, q)
}

// errNoMatrix: a streamed tree has no matrix on the device.
var errNoMatrix = fmt.Errorf("kernels: MerkleTree: a streamed tree has no matrix; open it with EncodeOpenBatchStreamed")

// EncodeOpenBatchStreamed is EncodeOpenBatch for a matrix that is not on the device (a tree of
// EncodeMerkleTreeStreamed): fill writes it again, chunkCols
// columns at a time, into one chunk buffer, and each chunk's part of the opened rows is gathered
// from it. The chunk is freed once the gathers are encoded.
func (t *MerkleTree) EncodeOpenBatchStreamed(b *gpu.Batch, q *QueryIndices, chunkCols int, fill FillColumns) (*PendingOpening, error) {
	chunkCols = min(chunkCols, t.width)
	if chunkCols <= 0 || t.height*chunkCols >= maxColumnElems {
		return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatchStreamed: chunks of %d columns of %d rows", chunkCols, t.height)
	}
	p, err := t.newPendingOpening(q)
	if err != nil || p.out == nil {
		return p, err
	}
	if p.chunk, err = gpu.AllocArrayUninit[Mont](t.dev, "streamed codeword chunk", t.height*chunkCols); err != nil {
		p.Free()
		return nil, err
	}
	for c0 := 0; c0 < t.width; c0 += chunkCols {
		n := min(chunkCols, t.width-c0)
		if err := fill(b, p.chunk, c0, n); err != nil {
			p.Free()
			return nil, err
		}
		t.encodeGatherRows(b, p, p.chunk, q, c0, n)
	}
	if err := t.encodeGatherPaths(b, p, q); err != nil {
		p.Free()
		return nil, err
	}
	// The chunk's last reader is encoded: frees are in queue order on GPUs, and the host device
	// runs work as it is encoded.
	p.chunk.Free()
	p.chunk = nil
	return p, nil
}

// newPendingOpening checks the query indices and allocates the opening's output (none for no
// queries).
func (t *MerkleTree) newPendingOpening(q *QueryIndices) (*PendingOpening, error) {
	if t.layers == nil {
		return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatch: tree was freed")
	}
	qs := t.QueryStride()
	for i, y := range q.ys {
		if y < 0 || y >= qs {
			return nil, fmt.Errorf("kernels: MerkleTree.EncodeOpenBatch: index %d (#%d) not in [0, %d)", y, i, qs)
		}
	}
	nq := q.n
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
	return p, nil
}

// encodeGatherRows gathers the opened rows' columns [colBegin, colBegin + cols) from m, which
// holds those columns.
func (t *MerkleTree) encodeGatherRows(b *gpu.Batch, p *PendingOpening, m *gpu.Array[Mont], q *QueryIndices, colBegin, cols int) {
	nrows := 1 << t.logRPQ
	g, tp := shapeFor(t.dev, "merkle_gather_query_rows", p.queries*nrows*cols)
	dispatchMerkleGatherQueryRows(b, g, tp, m.Buffer, q.buf.Buffer, p.out.Buffer, merkleGatherQueryRowsParams{height: uint32(t.height), width: uint32(t.width),
		qs: uint32(t.QueryStride()), nrows: uint32(nrows), queries: uint32(p.queries), colBegin: uint32(colBegin), cols: uint32(cols)})
}

// encodeGatherPaths gathers the sibling paths after the rows; on an error p is freed.
func (t *MerkleTree) encodeGatherPaths(b *gpu.Batch, p *PendingOpening, q *QueryIndices) error {
	rowElems := p.queries * (1 << t.logRPQ) * t.width
	if pathElems := p.queries * t.depth * 8; pathElems > 0 {
		g, tp := shapeFor(t.dev, "merkle_gather_paths", pathElems)
		dispatchMerkleGatherPaths(b, g, tp, t.layers.Buffer, q.buf.Buffer, p.out.Buffer, merkleGatherPathsParams{qs: uint32(t.QueryStride()), depth: uint32(t.depth), queries: uint32(p.queries), outOff: uint32(rowElems)})
	}
	if err := b.Err(); err != nil {
		p.Free()
		return err
	}
	return nil
}

// Fetch downloads the opening (one download; it waits for the batch if that was not waited
// for) and frees the output buffer, so that a caller may encode more work before the host's
// part of Read. Read fetches when Fetch was not called. Call each once.
func (p *PendingOpening) Fetch() error { return p.fetch(false) }

// FetchSettled is Fetch for an opening whose gathers a sync has already waited for: its
// download does not wait for the work encoded since (gpu.Device.DownloadSettled).
func (p *PendingOpening) FetchSettled() error { return p.fetch(true) }

func (p *PendingOpening) fetch(settled bool) error {
	if p.queries == 0 || p.flat != nil {
		return nil
	}
	if p.out == nil {
		return fmt.Errorf("kernels: PendingOpening: already read or freed")
	}
	flat := make([]field.Fp, p.out.Len())
	var err error
	if settled {
		err = p.out.ReadSettled(flat, 0)
	} else {
		err = p.out.Read(flat, 0)
	}
	p.Free()
	if err != nil {
		return err
	}
	p.tree.freeScratch()
	p.flat = flat
	return nil
}

// Read returns the opening (Fetch first, when not yet fetched).
func (p *PendingOpening) Read() (*BatchOpening, error) {
	t := p.tree
	o := &BatchOpening{Rows: make([][][]field.Fp, p.queries), Paths: make([][]poseidon2.Digest, p.queries)}
	if p.queries == 0 {
		return o, nil
	}
	if err := p.Fetch(); err != nil {
		return nil, err
	}
	flat := p.flat
	p.flat = nil
	nrows := 1 << t.logRPQ
	vals := flat[:p.queries*nrows*t.width]
	// The paths' digests lie in flat as consecutive runs of poseidon2.DigestSize values, the
	// layout of []poseidon2.Digest: a view, not a copy (the proof keeps both, read-only).
	var paths []poseidon2.Digest
	if n := p.queries * t.depth; n > 0 {
		paths = unsafe.Slice((*poseidon2.Digest)(unsafe.Pointer(&flat[len(vals)])), n)
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
	if p.chunk != nil {
		p.chunk.Free()
		p.chunk = nil
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
	if err := b.Err(); err != nil {
		return nil, err
	}
	return p.Read() // its download waits for the gathers: the one sync
}
