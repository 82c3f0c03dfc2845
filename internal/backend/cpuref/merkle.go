package cpuref

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
)

// MerkleTree is the tree over a codeword matrix with RowsPerQuery = 2^k rows per query group
// (spec A §5.6, stacked_pcs.rs MerkleTree::new). Backing is the hashed matrix, column-major, in
// base field: an extension-field matrix is stored flattened (see NewMerkleTreeFp4).
// DigestLayers[0] holds the qs = Height/RowsPerQuery query-group digests; the last layer holds
// the root alone. The per-row leaf hashes and the k intermediate group levels are not kept (as in
// Rust).
type MerkleTree struct {
	Backing      air.Matrix
	DigestLayers [][]poseidon2.Digest
	RowsPerQuery int
}

// RowHashes returns leaf[r] = hash_slice(row r) for every row of the column-major matrix m: the
// row's entries in column order.
func RowHashes(m air.Matrix) []poseidon2.Digest {
	out := make([]poseidon2.Digest, m.Height)
	row := make([]field.Fp, m.Width)
	for r := range out {
		for j := range row {
			row[j] = m.Values[j*m.Height+r]
		}
		out[r] = poseidon2.HashSlice(row)
	}
	return out
}

// GroupDigests compresses the leaves into query-group digests: group y ∈ [0, qs), qs =
// len(leaves)/rowsPerQuery, is tree_compress(leaves[y], leaves[y+qs], …, leaves[y+(G−1)qs]).
// It is computed level by level exactly as the Rust code: at each of the k levels, new entry
// i = x·qs + y is compress(prev[2x·qs + y], prev[(2x+1)·qs + y]).
func GroupDigests(leaves []poseidon2.Digest, rowsPerQuery int) ([]poseidon2.Digest, error) {
	logG, err := Log2Exact(rowsPerQuery)
	if err != nil || rowsPerQuery > len(leaves) {
		return nil, fmt.Errorf("%w: rows per query %d, rows %d", ErrMerkleRowsPerQuery, rowsPerQuery, len(leaves))
	}
	if _, err := Log2Exact(len(leaves)); err != nil {
		return nil, err
	}
	qs := len(leaves) / rowsPerQuery
	layer := leaves
	for lvl := 0; lvl < logG; lvl++ {
		next := make([]poseidon2.Digest, len(layer)/2)
		for i := range next {
			x, y := i/qs, i%qs
			next[i] = poseidon2.Compress(layer[2*x*qs+y], layer[(2*x+1)*qs+y])
		}
		layer = next
	}
	if logG == 0 {
		layer = append([]poseidon2.Digest(nil), leaves...)
	}
	return layer, nil
}

// NewMerkleTree builds the tree over the base-field codeword matrix m (height a power of two)
// with rowsPerQuery (a power of two ≤ height) rows per query group.
func NewMerkleTree(m air.Matrix, rowsPerQuery int) (*MerkleTree, error) {
	if err := checkMatrix("NewMerkleTree", m); err != nil {
		return nil, err
	}
	if _, err := Log2Exact(m.Height); err != nil {
		return nil, err
	}
	layer0, err := GroupDigests(RowHashes(m), rowsPerQuery)
	if err != nil {
		return nil, err
	}
	layers := [][]poseidon2.Digest{layer0}
	for cur := layer0; len(cur) > 1; {
		next := make([]poseidon2.Digest, len(cur)/2)
		for i := range next {
			next[i] = poseidon2.Compress(cur[2*i], cur[2*i+1])
		}
		layers = append(layers, next)
		cur = next
	}
	return &MerkleTree{Backing: m, DigestLayers: layers, RowsPerQuery: rowsPerQuery}, nil
}

// FlattenFp4 turns a column-major extension-field matrix (values[col*height+row]) into the
// base-field matrix whose rows are the flattened rows: column 4j+c holds coefficient c of
// extension column j. Hashing its rows equals hashing the extension rows with every entry
// written as c0, c1, c2, c3 (as_basis_coefficients_slice, spec A §5.6 step 1).
func FlattenFp4(values []field.Fp4, height int) (air.Matrix, error) {
	if height <= 0 || len(values)%height != 0 {
		return air.Matrix{}, fmt.Errorf("cpuref: FlattenFp4: %d values, height %d", len(values), height)
	}
	w := len(values) / height
	m := air.NewMatrix(4*w, height)
	for j := 0; j < w; j++ {
		for r := 0; r < height; r++ {
			e := values[j*height+r]
			for c := 0; c < 4; c++ {
				m.Values[(4*j+c)*height+r] = e[c]
			}
		}
	}
	return m, nil
}

// NewMerkleTreeFp4 builds the tree over a column-major Fp4 matrix (WHIR rounds ≥ 1 use width 1).
// Its Backing is the flattened base matrix of FlattenFp4; use Fp4Row to regroup opened rows.
func NewMerkleTreeFp4(values []field.Fp4, height, rowsPerQuery int) (*MerkleTree, error) {
	m, err := FlattenFp4(values, height)
	if err != nil {
		return nil, err
	}
	return NewMerkleTree(m, rowsPerQuery)
}

// Fp4Row regroups a flattened opened row (length a multiple of 4) into extension elements.
func Fp4Row(row []field.Fp) []field.Fp4 {
	out := make([]field.Fp4, len(row)/4)
	for i := range out {
		out[i] = field.Fp4{row[4*i], row[4*i+1], row[4*i+2], row[4*i+3]}
	}
	return out
}

// Root returns the commitment (the single digest of the last layer).
func (t *MerkleTree) Root() poseidon2.Digest { return t.DigestLayers[len(t.DigestLayers)-1][0] }

// QueryStride is qs = rows / RowsPerQuery, the number of query indices.
func (t *MerkleTree) QueryStride() int { return len(t.DigestLayers[0]) }

// ProofDepth is the number of siblings in a proof: log2(qs).
func (t *MerkleTree) ProofDepth() int { return len(t.DigestLayers) - 1 }

// OpenedRows returns the RowsPerQuery rows y + t·qs (t = 0..G−1), each complete, in order of t.
func (t *MerkleTree) OpenedRows(y int) ([][]field.Fp, error) {
	qs := t.QueryStride()
	if y < 0 || y >= qs {
		return nil, fmt.Errorf("%w: %d not in [0, %d)", ErrMerkleQueryIndex, y, qs)
	}
	rows := make([][]field.Fp, t.RowsPerQuery)
	for i := range rows {
		rows[i] = t.Backing.Row(y + i*qs)
	}
	return rows, nil
}

// Proof returns the siblings of query index y from layer 0 up to, excluding, the root:
// [layer_0[y^1], layer_1[(y>>1)^1], …] (query_merkle_proof).
func (t *MerkleTree) Proof(y int) ([]poseidon2.Digest, error) {
	qs := t.QueryStride()
	if y < 0 || y >= qs {
		return nil, fmt.Errorf("%w: %d not in [0, %d)", ErrMerkleQueryIndex, y, qs)
	}
	proof := make([]poseidon2.Digest, 0, t.ProofDepth())
	idx := y
	for _, layer := range t.DigestLayers[:t.ProofDepth()] {
		proof = append(proof, layer[idx^1])
		idx >>= 1
	}
	return proof, nil
}

// MerkleOpening is the answer to one query: the opened rows and the sibling path.
type MerkleOpening struct {
	Index int
	Rows  [][]field.Fp
	Proof []poseidon2.Digest
}

// Open returns the opening of query index y.
func (t *MerkleTree) Open(y int) (*MerkleOpening, error) {
	rows, err := t.OpenedRows(y)
	if err != nil {
		return nil, err
	}
	proof, err := t.Proof(y)
	if err != nil {
		return nil, err
	}
	return &MerkleOpening{Index: y, Rows: rows, Proof: proof}, nil
}

// VerifyOpening checks an opening against root with the verifier's path check (stark.MerkleRoot).
// rowsPerQuery and width fix the expected shape (hash_slice is only injective per fixed width),
// which is checked first.
func VerifyOpening(root poseidon2.Digest, rowsPerQuery, width int, o *MerkleOpening) error {
	if _, err := Log2Exact(len(o.Rows)); err != nil || len(o.Rows) != rowsPerQuery {
		return fmt.Errorf("%w: %d rows, want %d (a power of two)", ErrMerkleOpeningLength, len(o.Rows), rowsPerQuery)
	}
	for i, r := range o.Rows {
		if len(r) != width {
			return fmt.Errorf("%w: row %d has %d entries, want %d", ErrMerkleOpeningLength, i, len(r), width)
		}
	}
	if stark.MerkleRoot(o.Rows, o.Index, o.Proof) != root {
		return ErrMerkleVerify
	}
	return nil
}
