package cpuref

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

func TestMerkleTinyByHand(t *testing.T) {
	// 8 rows × 3 columns, 2 rows per query: qs = 4, groups {y, y+4}.
	m := air.NewMatrix(3, 8)
	for i := range m.Values {
		m.Values[i] = field.Fp(i*i + 1)
	}
	var leaf [8]poseidon2.Digest
	for r := 0; r < 8; r++ {
		leaf[r] = poseidon2.HashSlice([]field.Fp{m.Values[r], m.Values[8+r], m.Values[16+r]})
	}
	var l0 [4]poseidon2.Digest
	for y := 0; y < 4; y++ {
		l0[y] = poseidon2.Compress(leaf[y], leaf[y+4])
	}
	want := poseidon2.Compress(poseidon2.Compress(l0[0], l0[1]), poseidon2.Compress(l0[2], l0[3]))
	tree, err := NewMerkleTree(m, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Root() != want {
		t.Fatalf("root %v, want %v", tree.Root(), want)
	}
	if tree.QueryStride() != 4 || tree.ProofDepth() != 2 || len(tree.DigestLayers) != 3 {
		t.Fatalf("shape qs=%d depth=%d", tree.QueryStride(), tree.ProofDepth())
	}
	for y := 0; y < 4; y++ {
		if tree.DigestLayers[0][y] != l0[y] {
			t.Fatalf("layer0[%d]", y)
		}
	}
	// 4 rows per query: group y = tree_compress(leaf[y], leaf[y+2], leaf[y+4], leaf[y+6]).
	tree4, _ := NewMerkleTree(m, 4)
	g0 := poseidon2.TreeCompress([]poseidon2.Digest{leaf[0], leaf[2], leaf[4], leaf[6]})
	g1 := poseidon2.TreeCompress([]poseidon2.Digest{leaf[1], leaf[3], leaf[5], leaf[7]})
	if tree4.Root() != poseidon2.Compress(g0, g1) {
		t.Fatal("k=2 root")
	}
	// All rows in one group: qs = 1, the root is tree_compress of all leaves, proofs are empty.
	tree8, _ := NewMerkleTree(m, 8)
	if tree8.Root() != poseidon2.TreeCompress(leaf[:]) || tree8.ProofDepth() != 0 {
		t.Fatal("k=3 root")
	}
	// One row per query: a plain binary tree over the leaves.
	tree1, _ := NewMerkleTree(m, 1)
	if tree1.Root() != poseidon2.TreeCompress(leaf[:]) {
		t.Fatal("k=0 root")
	}
}

func TestMerkleOpenings(t *testing.T) {
	r := newRNG(30)
	for _, tc := range []struct{ logN, k, w int }{{0, 0, 1}, {3, 0, 2}, {4, 2, 9}, {6, 3, 17}, {6, 6, 4}, {7, 1, 8}} {
		m := randMatrix(r, tc.w, 1<<tc.logN)
		tree, err := NewMerkleTree(m, 1<<tc.k)
		if err != nil {
			t.Fatal(err)
		}
		root := tree.Root()
		qs := tree.QueryStride()
		if qs != 1<<(tc.logN-tc.k) || tree.ProofDepth() != tc.logN-tc.k {
			t.Fatalf("qs %d depth %d", qs, tree.ProofDepth())
		}
		for y := 0; y < qs; y++ {
			o, err := tree.Open(y)
			if err != nil {
				t.Fatal(err)
			}
			for tt, row := range o.Rows {
				eqVec(t, "opened row", row, m.Row(y+tt*qs))
			}
			if err := VerifyOpening(root, 1<<tc.k, tc.w, o); err != nil {
				t.Fatalf("logN=%d k=%d y=%d: %v", tc.logN, tc.k, y, err)
			}
			// Tampered value.
			bad := cloneOpening(o)
			bad.Rows[len(bad.Rows)-1][tc.w-1] = bad.Rows[len(bad.Rows)-1][tc.w-1].Add(1)
			if err := VerifyOpening(root, 1<<tc.k, tc.w, bad); !errors.Is(err, ErrMerkleVerify) {
				t.Fatalf("tampered value accepted: %v", err)
			}
			// Swapped rows (order of t matters) when G ≥ 2.
			if len(o.Rows) >= 2 {
				bad = cloneOpening(o)
				bad.Rows[0], bad.Rows[1] = bad.Rows[1], bad.Rows[0]
				if VerifyOpening(root, 1<<tc.k, tc.w, bad) == nil {
					t.Fatal("swapped rows accepted")
				}
			}
			// Tampered sibling, wrong index.
			if len(o.Proof) > 0 {
				bad = cloneOpening(o)
				bad.Proof[len(bad.Proof)-1][0] = bad.Proof[len(bad.Proof)-1][0].Add(1)
				if VerifyOpening(root, 1<<tc.k, tc.w, bad) == nil {
					t.Fatal("tampered sibling accepted")
				}
				bad = cloneOpening(o)
				bad.Index ^= 1
				if VerifyOpening(root, 1<<tc.k, tc.w, bad) == nil {
					t.Fatal("wrong index accepted")
				}
			}
			// Wrong shape.
			bad = cloneOpening(o)
			bad.Rows[0] = bad.Rows[0][:tc.w-1]
			if !errors.Is(VerifyOpening(root, 1<<tc.k, tc.w, bad), ErrMerkleOpeningLength) {
				t.Fatal("short row accepted")
			}
		}
		if _, err := tree.Open(qs); !errors.Is(err, ErrMerkleQueryIndex) {
			t.Fatalf("out-of-range query: %v", err)
		}
	}
}

func cloneOpening(o *MerkleOpening) *MerkleOpening {
	c := &MerkleOpening{Index: o.Index, Proof: append([]poseidon2.Digest(nil), o.Proof...)}
	for _, r := range o.Rows {
		c.Rows = append(c.Rows, append([]field.Fp(nil), r...))
	}
	return c
}

func TestMerkleFp4(t *testing.T) {
	r := newRNG(31)
	vals := make([]field.Fp4, 2*16) // width 2, height 16
	for i := range vals {
		vals[i] = randFp4(r)
	}
	tree, err := NewMerkleTreeFp4(vals, 16, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Leaf of row 5 = hash_slice(c0..c3 of entry (5,0), c0..c3 of entry (5,1)).
	e0, e1 := vals[5], vals[16+5]
	want := poseidon2.HashSlice([]field.Fp{e0[0], e0[1], e0[2], e0[3], e1[0], e1[1], e1[2], e1[3]})
	if RowHashes(tree.Backing)[5] != want {
		t.Fatal("Fp4 row flattening")
	}
	o, _ := tree.Open(1)
	if got := Fp4Row(o.Rows[2]); got[0] != vals[1+2*4] || got[1] != vals[16+1+2*4] {
		t.Fatal("Fp4Row regroup")
	}
	if err := VerifyOpening(tree.Root(), 4, 8, o); err != nil {
		t.Fatal(err)
	}
}

func TestMerkleErrors(t *testing.T) {
	m := randMatrix(newRNG(32), 2, 8)
	for _, g := range []int{0, 3, 16} {
		if _, err := NewMerkleTree(m, g); !errors.Is(err, ErrMerkleRowsPerQuery) {
			t.Errorf("rows per query %d: %v", g, err)
		}
	}
	if _, err := NewMerkleTree(randMatrix(newRNG(1), 2, 6), 2); err == nil {
		t.Error("height 6 accepted")
	}
}
