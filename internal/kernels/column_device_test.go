package kernels

import (
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// bigValue is element (c, r) of the test matrix of TestCommitPathPast2p31OnDevice: splitmix64 of
// the position, reduced mod p, with an edge value (0, 1, p−1) at one position in 13.
func bigValue(c, r int) field.Fp {
	if (7*r+c)%13 == 0 {
		return fieldrand.Edges[(r+c)%3]
	}
	z := uint64(c)<<32 + uint64(r) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return field.Fp((z ^ z>>31) % uint64(field.P))
}

// TestCommitPathPast2p31OnDevice runs the commitment path at keccakf-16384's shape on a real
// device: a 2^21 × 659 stacked matrix, its 2^22 × 659 RS codeword (2.76·10^9 elements, past 2^31),
// the Merkle tree over it (k = 4) and openings. Checked: the codeword columns on both sides of
// element 2^31 (columns 511 | 512) and the last ones against cpuref (downloads at offsets past
// 8 GB); every opened query verifies against the device root with the verifier's path check (the
// leaf hashes and the gathers index the codeword independently) and its entries in the checked
// columns equal cpuref's; Open equals OpenBatch. About 28 GB of device memory and 6 GB of host
// memory: run only where METALPROVE_TEST_DEVICE names a GPU (e.g. cuda) with that much free,
// skipped otherwise (and on the host device).
func TestCommitPathPast2p31OnDevice(t *testing.T) {
	kind := os.Getenv("METALPROVE_TEST_DEVICE")
	if kind == "" || gpu.Kind(kind) == gpu.KindHost {
		t.Skip("needs METALPROVE_TEST_DEVICE naming a GPU with ~30 GB free")
	}
	dev, err := gpu.Open(gpu.Kind(kind), gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const logM, width, lSkip, logBlowup, k = 21, 659, 4, 1, 4
	height, n := 1<<logM, 1<<(logM+logBlowup)
	if n*width <= maxElems || n*width >= maxColumnElems {
		t.Fatalf("shape %d×%d does not cross 2^31 below the limit", n, width)
	}
	need := uint64(4*height*width + 2*4*n*width + 64*n + 1<<30) // Q, codeword, NTT scratch, Merkle, slack
	if avail, ok := dev.AvailableMemory(); !ok || avail < need {
		t.Skipf("%s: %d bytes available (known: %v), need %d", dev.Name(), avail, ok, need)
	}
	commitPastLimitOnDevice(t, dev, logM, width, lSkip, logBlowup, k)
}

// TestCommitPathPastLimitCheckOnHost runs TestCommitPathPast2p31OnDevice's checks on the host
// device at a small shape, the general limit lowered to 2^13 (so the codeword crosses it at
// column 32): the checks themselves are tested where the big test cannot run.
func TestCommitPathPastLimitCheckOnHost(t *testing.T) {
	lowerLimits(t, 1<<13, 1<<32-maxGridThreads)
	commitPastLimitOnDevice(t, testDev, 7, 40, 4, 1, 2)
}

// commitPastLimitOnDevice: RS codeword, Merkle tree and openings of the matrix bigValue on dev;
// the codeword crosses element maxElems (the general limit) inside it.
func commitPastLimitOnDevice(t *testing.T, dev *gpu.Device, logM, width, lSkip, logBlowup, k int) {
	height, n := 1<<logM, 1<<(logM+logBlowup)
	cross := maxElems / n // the first column at or past element maxElems
	if cross < 2 || cross >= width-2 {
		t.Fatalf("%d×%d codeword does not cross element %d inside", n, width, maxElems)
	}
	// Q in Montgomery form, generated in parallel on the host.
	qm := make([]Mont, height*width)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := w; c < width; c += workers {
				for r := range height {
					qm[c*height+r] = MontOf(bigValue(c, r))
				}
			}
		}()
	}
	wg.Wait()
	qa, err := gpu.UploadArray(dev, "stacked matrix", qm)
	if err != nil {
		t.Fatal(err)
	}
	defer qa.Free()
	qm = nil
	runtime.GC()

	ntt := NewNTT(dev)
	defer ntt.Close()
	cw, err := ntt.RSEncodeMatrix("codeword", qa, height, width, lSkip, logBlowup, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Free()

	// Reference columns: the first, both sides of element maxElems (2^31: column 512 starts
	// there), the last.
	cols := []int{0, 1, cross - 1, cross, cross + 1, width - 2, width - 1}
	ref := map[int][]field.Fp{}
	for _, c := range cols {
		col := air.NewMatrix(1, height)
		for r := range height {
			col.Values[r] = bigValue(c, r)
		}
		want, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, col)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]Mont, n)
		if err := cw.Read(got, c*n); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(CanonicalSlice(got), want.Values); i >= 0 {
			t.Fatalf("codeword column %d row %d (element %d): got %d, want %d", c, i, c*n+i, CanonicalOf(got[i]), want.Values[i])
		}
		ref[c] = want.Values
	}

	h, err := NewPoseidon2(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tree, err := h.MerkleTree(cw, n, width, k)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Free()
	root, err := tree.Root()
	if err != nil {
		t.Fatal(err)
	}
	qs := n >> k
	r := rand.New(rand.NewPCG(uint64(n), uint64(width)))
	ys := []int{0, 1, qs - 1, qs / 2}
	for range 12 {
		ys = append(ys, r.IntN(qs))
	}
	batch, err := tree.OpenBatch(ys)
	if err != nil {
		t.Fatal(err)
	}
	for i, y := range ys {
		o := &cpuref.MerkleOpening{Index: y, Rows: batch.Rows[i], Proof: batch.Paths[i]}
		if err := cpuref.VerifyOpening(root, 1<<k, width, o); err != nil {
			t.Fatalf("query %d: %v", y, err)
		}
		for tt, row := range o.Rows {
			for _, c := range cols {
				if want := ref[c][y+tt*qs]; row[c] != want {
					t.Fatalf("query %d row %d column %d: %d, cpuref %d", y, tt, c, row[c], want)
				}
			}
		}
	}
	for _, q := range []int{0, len(ys) - 1} {
		one, err := tree.Open(ys[q])
		if err != nil {
			t.Fatal(err)
		}
		for tt := range one.Rows {
			if i := firstDiff(one.Rows[tt], batch.Rows[q][tt]); i >= 0 {
				t.Fatalf("Open(%d) row %d differs from OpenBatch at column %d", ys[q], tt, i)
			}
		}
	}
}
