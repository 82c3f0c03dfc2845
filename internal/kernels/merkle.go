package kernels

import (
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// MerkleTree is a Merkle commitment built on the device by shaders/merkle.metal, equal to
// cpuref.NewMerkleTree: leaf[r] = hash_slice(row r of the column-major matrix, in column order);
// query group y < qs = height/2^k is tree_compress(leaf[y + t·qs], t < 2^k); a binary tree of
// compress above the qs group digests. Layers stay on the device (Montgomery digests, 8 uints
// each): Layer(0) has the qs group digests, the last layer the root. The matrix is borrowed
// (the tree reads it for openings) and must outlive the tree.
type MerkleTree struct {
	dev                   *gpu.Device
	matrix                *gpu.Array[uint32]
	height, width, logRPQ int
	layers                []*gpu.Array[uint32]
	// scratch holds the leaf digests and group levels below layer 0 until the tree's batch is
	// known to be done (the first download: Root or Open), then it is freed.
	scratch []*gpu.Array[uint32]
}

// MerkleTree commits to the column-major Montgomery matrix (height rows, a power of two; width
// ≥ 1 columns) with 2^logRowsPerQuery rows per query group, in one batch (one sync).
func (h *Poseidon2) MerkleTree(matrix *gpu.Array[uint32], height, width, logRowsPerQuery int) (*MerkleTree, error) {
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

// EncodeMerkleTree encodes MerkleTree into b: the layers are allocated now and valid once b's
// work is done (the tree's Root and Open wait for it). On an error the tree is freed.
func (h *Poseidon2) EncodeMerkleTree(b *gpu.Batch, matrix *gpu.Array[uint32], height, width, logRowsPerQuery int) (*MerkleTree, error) {
	logH, err := log2Exact("MerkleTree", height)
	if err != nil {
		return nil, err
	}
	if width <= 0 || logRowsPerQuery < 0 || logRowsPerQuery > logH {
		return nil, fmt.Errorf("kernels: MerkleTree: width %d, 2^%d rows per query, height 2^%d", width, logRowsPerQuery, logH)
	}
	if err := checkArray("MerkleTree", matrix, height*width); err != nil {
		return nil, err
	}
	if 8*height >= maxElems {
		return nil, fmt.Errorf("kernels: MerkleTree: %d rows exceed 2^28", height)
	}
	dev := h.dev
	qs := height >> logRowsPerQuery
	t := &MerkleTree{dev: dev, matrix: matrix, height: height, width: width, logRPQ: logRowsPerQuery}
	alloc := func(name string, n int, keep bool) (*gpu.Array[uint32], error) {
		a, err := gpu.AllocArray[uint32](dev, name, 8*n)
		if err != nil {
			return nil, err
		}
		if keep {
			t.layers = append(t.layers, a)
		} else {
			t.scratch = append(t.scratch, a)
		}
		return a, nil
	}
	fail := func(err error) (*MerkleTree, error) {
		t.Free()
		return nil, err
	}
	// Leaves; with k = 0 they are layer 0.
	leaves, err := alloc("merkle leaves", height, logRowsPerQuery == 0)
	if err != nil {
		return fail(err)
	}
	step := chunkItems(height, (width+7)/8)
	for r := 0; r < height; r += step {
		end := min(r+step, height)
		g, tp := shapeFor(dev, "merkle_hash_rows", end-r)
		dispatchMerkleHashRows(b, g, tp, matrix.Buffer, leaves.Buffer, h.rc.Buffer,
			merkleRowParams{height: uint32(height), width: uint32(width), rowBegin: uint32(r), rowEnd: uint32(end)})
	}
	// The k group levels, ping-ponging between the leaves and one scratch buffer; the last
	// level writes layer 0.
	cur := leaves
	var other *gpu.Array[uint32]
	for lvl := 1; lvl <= logRowsPerQuery; lvl++ {
		n := height >> lvl
		var dst *gpu.Array[uint32]
		switch {
		case lvl == logRowsPerQuery:
			if dst, err = alloc("merkle layer 0", n, true); err != nil {
				return fail(err)
			}
		case cur == leaves:
			if other == nil {
				if other, err = alloc("merkle group scratch", n, false); err != nil {
					return fail(err)
				}
			}
			dst = other
		default:
			dst = leaves
		}
		encodeCompress(b, dev, cur, dst, h.rc, n, qs)
		cur = dst
	}
	for n := qs / 2; n >= 1; n /= 2 {
		dst, err := alloc(fmt.Sprintf("merkle layer %d", len(t.layers)), n, true)
		if err != nil {
			return fail(err)
		}
		encodeCompress(b, dev, cur, dst, h.rc, n, 1)
		cur = dst
	}
	if err := b.Err(); err != nil {
		return fail(err)
	}
	return t, nil
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

// encodeCompress encodes out[i] = compress(in[2x·qs + y], in[(2x+1)·qs + y]) for i < n (x = i/qs,
// y = i mod qs), in dispatches of at most maxPermsPerDispatch digests.
func encodeCompress(b *gpu.Batch, dev *gpu.Device, in, out, rc *gpu.Array[uint32], n, qs int) {
	step := chunkItems(n, 1)
	for i := 0; i < n; i += step {
		end := min(i+step, n)
		g, tp := shapeFor(dev, "merkle_compress", end-i)
		dispatchMerkleCompress(b, g, tp, in.Buffer, out.Buffer, rc.Buffer, merkleCompressParams{begin: uint32(i), end: uint32(end), qs: uint32(qs)})
	}
}

// Free frees the layers (not the matrix).
func (t *MerkleTree) Free() {
	for _, l := range t.layers {
		l.Free()
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
func (t *MerkleTree) Depth() int { return len(t.layers) - 1 }

// QueryStride is qs = height / 2^k.
func (t *MerkleTree) QueryStride() int { return t.height >> t.logRPQ }

func digestsOf(v []uint32) []poseidon2.Digest {
	out := make([]poseidon2.Digest, len(v)/8)
	for i := range out {
		for k := 0; k < 8; k++ {
			out[i][k] = CanonicalOf(v[8*i+k])
		}
	}
	return out
}

// Root downloads the root (32 bytes), canonical.
func (t *MerkleTree) Root() (poseidon2.Digest, error) {
	var v [8]uint32
	if err := t.layers[len(t.layers)-1].Read(v[:], 0); err != nil {
		return poseidon2.Digest{}, err
	}
	t.freeScratch()
	return digestsOf(v[:])[0], nil
}

// Layer downloads layer i (0: the query-group digests), canonical.
func (t *MerkleTree) Layer(i int) ([]poseidon2.Digest, error) {
	if i < 0 || i >= len(t.layers) {
		return nil, fmt.Errorf("kernels: MerkleTree.Layer(%d): %d layers", i, len(t.layers))
	}
	v, err := t.layers[i].ReadAll()
	if err != nil {
		return nil, err
	}
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
	qs := t.QueryStride()
	if y < 0 || y >= qs {
		return nil, fmt.Errorf("kernels: MerkleTree.Open: index %d not in [0, %d)", y, qs)
	}
	nrows := 1 << t.logRPQ
	buf, err := gpu.AllocArray[uint32](t.dev, "merkle opened rows", nrows*t.width)
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
		row := make([]field.Fp, t.width)
		for c := range row {
			row[c] = field.Fp(flat[i*t.width+c])
		}
		o.Rows[i] = row
	}
	idx := y
	for _, l := range t.layers[:t.Depth()] {
		var v [8]uint32
		if err := l.Read(v[:], 8*(idx^1)); err != nil {
			return nil, err
		}
		o.Proof = append(o.Proof, digestsOf(v[:])[0])
		idx >>= 1
	}
	return o, nil
}
