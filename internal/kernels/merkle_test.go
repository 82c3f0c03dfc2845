package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// merkleCase builds a random width × 2^logH matrix (edge values in the first rows), its device
// tree with 2^k rows per query and the reference tree.
func merkleCase(t *testing.T, h *Poseidon2, r *rand.Rand, logH, width, k int) (*MerkleTree, *cpuref.MerkleTree) {
	t.Helper()
	m := air.NewMatrix(width, 1<<logH)
	copy(m.Values, fieldrand.Fps(r, len(m.Values)))
	for i, v := range []field.Fp{0, 1, field.Fp(field.P - 1)} {
		if i < len(m.Values) {
			m.Values[i] = v
		}
	}
	want, err := cpuref.NewMerkleTree(m, 1<<k)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := h.MerkleTree(upload(t, m.Values), m.Height, m.Width, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Free)
	return tree, want
}

// queryIndices returns the edge indices 0, 1, qs−2, qs−1, qs/2 (those < qs), a repeat and
// random ones, in no particular order.
func queryIndices(r *rand.Rand, qs int) []int {
	var ys []int
	for _, y := range []int{0, qs - 1, 1, qs / 2, qs - 2} {
		if y >= 0 && y < qs {
			ys = append(ys, y)
		}
	}
	ys = append(ys, qs-1)
	for range 7 {
		ys = append(ys, r.IntN(qs))
	}
	return ys
}

func checkBatchOpening(t *testing.T, tree *MerkleTree, want *cpuref.MerkleTree, ys []int, got *BatchOpening) {
	t.Helper()
	if len(got.Rows) != len(ys) || len(got.Paths) != len(ys) {
		t.Fatalf("%d rows, %d paths for %d queries", len(got.Rows), len(got.Paths), len(ys))
	}
	root := want.Root()
	for q, y := range ys {
		wo, err := want.Open(y)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Rows[q]) != fmt.Sprint(wo.Rows) {
			t.Fatalf("query %d (y=%d): rows differ from cpuref", q, y)
		}
		if len(got.Paths[q]) != len(wo.Proof) || fmt.Sprint(got.Paths[q]) != fmt.Sprint(wo.Proof) {
			t.Fatalf("query %d (y=%d): path differs from cpuref", q, y)
		}
		if tree.matrix != nil {
			o, err := tree.Open(y)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Rows[q]) != fmt.Sprint(o.Rows) || fmt.Sprint(got.Paths[q]) != fmt.Sprint(o.Proof) {
				t.Fatalf("query %d (y=%d): differs from Open", q, y)
			}
		}
		if err := cpuref.VerifyOpening(root, want.RowsPerQuery, want.Backing.Width,
			&cpuref.MerkleOpening{Index: y, Rows: got.Rows[q], Proof: got.Paths[q]}); err != nil {
			t.Fatalf("query %d (y=%d): %v", q, y, err)
		}
	}
}

func TestMerkleOpenBatch(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(17, 18))
	for width := 1; width <= 50; width++ {
		k := width % 5
		for _, logH := range []int{k, k + 1, k + 3 + width%4} {
			t.Run(fmt.Sprintf("2^%dx%d/k=%d", logH, width, k), func(t *testing.T) {
				tree, want := merkleCase(t, h, r, logH, width, k)
				ys := queryIndices(r, tree.QueryStride())
				before := testDev.Stats()
				got, err := tree.OpenBatch(ys)
				if err != nil {
					t.Fatal(err)
				}
				after := testDev.Stats()
				if s, d := after.Syncs-before.Syncs, after.Downloads-before.Downloads; s != 1 || d != 1 {
					t.Errorf("%d syncs, %d downloads; want 1 and 1", s, d)
				}
				if n := after.Dispatches - before.Dispatches; n > 2 {
					t.Errorf("%d dispatches, want at most 2", n)
				}
				if u := after.Uploads - before.Uploads; u != 1 {
					t.Errorf("%d uploads, want 1", u)
				}
				checkBatchOpening(t, tree, want, ys, got)
			})
		}
	}
}

// TestMerkleEncodeOpenBatchSeveralTrees opens trees of different shapes at the same indices in
// one batch: one upload of the indices, one sync, one download per tree.
func TestMerkleEncodeOpenBatchSeveralTrees(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(19, 20))
	type pair struct {
		tree *MerkleTree
		want *cpuref.MerkleTree
	}
	// Every tree has qs = 2^5 query groups.
	var trees []pair
	for _, c := range []struct{ logH, width, k int }{{5, 3, 0}, {7, 16, 2}, {9, 1, 4}, {6, 50, 1}} {
		tree, want := merkleCase(t, h, r, c.logH, c.width, c.k)
		trees = append(trees, pair{tree, want})
	}
	ys := queryIndices(r, 32)
	before := testDev.Stats()
	q, err := UploadQueryIndices(testDev, ys)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Free()
	b := testDev.Batch()
	var pending []*PendingOpening
	for _, p := range trees {
		po, err := p.tree.EncodeOpenBatch(b, q)
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, po)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	var got []*BatchOpening
	for _, po := range pending {
		o, err := po.Read()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	after := testDev.Stats()
	if s, d, u := after.Syncs-before.Syncs, after.Downloads-before.Downloads, after.Uploads-before.Uploads; s != 1 || d != len(trees) || u != 1 {
		t.Errorf("%d syncs, %d downloads, %d uploads; want 1, %d, 1", s, d, u, len(trees))
	}
	for i, p := range trees {
		checkBatchOpening(t, p.tree, p.want, ys, got[i])
	}
}

func TestMerkleOpenBatchValidates(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(21, 22))
	tree, _ := merkleCase(t, h, r, 6, 5, 2) // qs = 16
	live := len(testDev.LiveBuffers())
	for _, ys := range [][]int{{16}, {0, 3, -1}, {1 << 40}, {15, 16, 2}} {
		if _, err := tree.OpenBatch(ys); err == nil {
			t.Errorf("OpenBatch(%v): no error", ys)
		}
	}
	if n := len(testDev.LiveBuffers()); n != live {
		t.Errorf("%d live buffers after failed openings, %d before", n, live)
	}
	before := testDev.Stats()
	o, err := tree.OpenBatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 0 || len(o.Paths) != 0 {
		t.Errorf("empty opening has %d rows, %d paths", len(o.Rows), len(o.Paths))
	}
	if s := testDev.Stats(); s.Syncs != before.Syncs || s.Dispatches != before.Dispatches {
		t.Errorf("empty opening did device work")
	}
}

// A tree larger than the leaf scratch (merkleScratchDigests) is built chunk by chunk of query
// groups: the same root, layers and openings as cpuref's, with at most the capped scratch, for
// chunks of at least 16 rows a slab, one to 2^4 rows per query, and the unchunked case.
func TestMerkleTreeInChunks(t *testing.T) {
	defer func(old int) { merkleScratchDigests = old }(merkleScratchDigests)
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ logH, width, k, capDigests, chunks int }{
		{10, 9, 4, 256, 4}, {12, 3, 2, 256, 16}, {9, 17, 1, 64, 8}, {8, 2, 3, 2048, 1}, {9, 8, 4, 16, 2},
	} {
		merkleScratchDigests = c.capDigests
		qs := 1 << (c.logH - c.k)
		if got := qs / merkleChunk(qs, c.k); got != c.chunks {
			t.Fatalf("2^%d rows, k %d, cap %d: %d chunks, want %d", c.logH, c.k, c.capDigests, got, c.chunks)
		}
		tree, want := merkleCase(t, h, r, c.logH, c.width, c.k)
		var scratch int
		for _, b := range testDev.LiveBuffers() {
			if b.Name == "merkle leaves" || b.Name == "merkle group scratch" {
				scratch += b.Size
			}
		}
		leaves, groups := MerkleScratch(1<<c.logH, c.k)
		if scratch != 32*(leaves+groups) || (c.chunks > 1 && leaves > max(c.capDigests, 16<<c.k)) {
			t.Errorf("2^%d×%d k %d: %d bytes of scratch, MerkleScratch says %d+%d digests (cap %d)", c.logH, c.width, c.k, scratch, leaves, groups, c.capDigests)
		}
		root, err := tree.Root()
		if err != nil {
			t.Fatal(err)
		}
		if root != want.Root() {
			t.Fatalf("2^%d×%d k %d in %d chunks: root differs from cpuref", c.logH, c.width, c.k, c.chunks)
		}
		ys := queryIndices(r, qs)
		got, err := tree.OpenBatch(ys)
		if err != nil {
			t.Fatal(err)
		}
		checkBatchOpening(t, tree, want, ys, got)
	}
}

// A tree streamed a chunk of columns at a time (EncodeMerkleTreeStreamed: the rows' sponges
// carried across chunks) has cpuref's root and layers, and its streamed openings
// (EncodeOpenBatchStreamed, any chunk width) are cpuref's: widths of one chunk and of several
// (a last chunk of 1 to 8 columns), 1 to 2^4 rows per query, the leaf scratch in chunks of query
// groups or not. The chunk and the sponge states are the scratch StreamScratch counts, freed
// with the tree's scratch.
func TestMerkleTreeStreamed(t *testing.T) {
	defer func(old int) { merkleScratchDigests = old }(merkleScratchDigests)
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ logH, width, k, capDigests, chunks int }{
		{6, 25, 0, 1 << 20, 4}, {8, 42, 4, 256, 6}, {7, 33, 1, 1 << 20, 5}, {9, 24, 2, 64, 1},
		{5, 1, 0, 1 << 20, 1}, {10, 40, 3, 128, 5}, {4, 31, 4, 1 << 20, 4},
	} {
		t.Run(fmt.Sprintf("2^%dx%d/k=%d", c.logH, c.width, c.k), func(t *testing.T) {
			merkleScratchDigests = c.capDigests
			height := 1 << c.logH
			m := air.NewMatrix(c.width, height)
			copy(m.Values, fieldrand.Fps(r, len(m.Values)))
			m.Values[0], m.Values[len(m.Values)-1] = field.Fp(field.P-1), 0
			want, err := cpuref.NewMerkleTree(m, 1<<c.k)
			if err != nil {
				t.Fatal(err)
			}
			whole := upload(t, m.Values)
			fills := 0
			var chunkCols []int
			fill := func(b *gpu.Batch, chunk *gpu.Array[Mont], c0, n int) error {
				fills++
				chunkCols = append(chunkCols, n)
				if n*height > chunk.Len() {
					return fmt.Errorf("chunk of %d words for %d columns", chunk.Len(), n)
				}
				b.Copy(chunk.Buffer, 0, whole.Buffer, 4*c0*height, 4*n*height)
				return b.Err()
			}
			b := testDev.Batch()
			tree, err := h.EncodeMerkleTreeStreamed(b, height, c.width, c.k, fill)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Free()
			if fills != c.chunks {
				t.Errorf("%d chunks (%v), want %d", fills, chunkCols, c.chunks)
			}
			var chunk, states int
			for _, lb := range testDev.LiveBuffers() {
				switch lb.Name {
				case "streamed codeword chunk":
					chunk += lb.Size
				case "merkle row sponges":
					states += lb.Size
				}
			}
			if wc, ws := StreamScratch(height, c.width); chunk != 4*wc || states != 4*ws || (c.chunks > 1) != (ws > 0) {
				t.Errorf("chunk %d and states %d bytes, StreamScratch says %d and %d words", chunk, states, wc, ws)
			}
			root, err := tree.Root() // waits for the batch
			if err != nil {
				t.Fatal(err)
			}
			if root != want.Root() {
				t.Fatalf("root differs from cpuref")
			}
			for _, lb := range testDev.LiveBuffers() {
				if lb.Name == "streamed codeword chunk" || lb.Name == "merkle row sponges" {
					t.Fatalf("%s still allocated after the root", lb.Name)
				}
			}
			for d := 0; d <= tree.Depth(); d++ {
				got, err := tree.Layer(d)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want.DigestLayers[d]) {
					t.Fatalf("layer %d differs from cpuref", d)
				}
			}
			if _, err := tree.OpenBatch([]int{0}); err == nil {
				t.Fatal("a streamed tree opened without its matrix")
			}
			ys := queryIndices(r, tree.QueryStride())
			q, err := UploadQueryIndices(testDev, ys)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Free()
			for _, cc := range []int{1, 3, 8, c.width} {
				b := testDev.Batch()
				p, err := tree.EncodeOpenBatchStreamed(b, q, cc, fill)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.Read()
				if err != nil {
					t.Fatal(err)
				}
				checkBatchOpening(t, tree, want, ys, got)
			}
		})
	}
}

// TestMerkleTopLayers builds trees whose binary layers take all three launch kinds of
// encodeBinaryLayers (merkle_compress, merkle_compress_top one layer a launch over several
// threadgroups, and the last layers in one threadgroup) on the host device with the GPUs' shape
// scaled down, and compares every layer with cpuref.
func TestMerkleTopLayers(t *testing.T) {
	defer func(g int, top [2]int) { merkleGroupMax, merkleTopOnHost = g, top }(merkleGroupMax, merkleTopOnHost)
	merkleGroupMax, merkleTopOnHost = 64, [2]int{32, 64} // 2 states a threadgroup; 4 in the last launch
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(31, 32))
	cases := []struct {
		logH, width, k int
		compress, top  int // launches of merkle_compress (the binary layers') and merkle_compress_top
	}{
		{0, 1, 0, 0, 0}, {1, 3, 0, 0, 1}, {2, 2, 1, 0, 1}, {3, 9, 0, 0, 1}, {5, 5, 2, 0, 1},
		{7, 1, 0, 0, 5}, {10, 2, 0, 3, 5}, {11, 17, 1, 3, 5}, {12, 1, 3, 2, 5},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("2^%dx%d/k=%d", c.logH, c.width, c.k), func(t *testing.T) {
			before := testDev.Stats().PerKernel
			tree, want := merkleCase(t, h, r, c.logH, c.width, c.k)
			after := testDev.Stats().PerKernel
			groupLevels := c.k // merkle_compress launches of the query groups' levels
			if n := after["merkle_compress"] - before["merkle_compress"]; n != c.compress+groupLevels {
				t.Errorf("%d merkle_compress launches, want %d", n, c.compress+groupLevels)
			}
			if n := after["merkle_compress_top"] - before["merkle_compress_top"]; n != c.top {
				t.Errorf("%d merkle_compress_top launches, want %d", n, c.top)
			}
			for d := 0; d <= tree.Depth(); d++ {
				got, err := tree.Layer(d)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want.DigestLayers[d]) {
					t.Fatalf("layer %d of %d differs from cpuref", d, tree.Depth())
				}
			}
		})
	}
}
