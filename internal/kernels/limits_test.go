package kernels

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// limitedBackend is the host device posing as a GPU (SIMD width 32, so launchers take their GPU
// shapes) whose compiled kernels allow fewer threads per group than the device, as a Metal
// pipeline of a register-heavy kernel does: maxThreads per kernel, 1024 for the others. It
// records the largest group each kernel was dispatched with.
type limitedBackend struct {
	*host.Backend
	maxThreads map[string]int
	// computeUnits and tgMemory replace the device's limits when set (else 2 and the host's).
	computeUnits, tgMemory int

	mu      sync.Mutex
	largest map[string]int
}

func (b *limitedBackend) Limits() driver.Limits {
	l := b.Backend.Limits()
	l.SIMDWidth, l.ComputeUnits = 32, 2
	if b.computeUnits > 0 {
		l.ComputeUnits = b.computeUnits
	}
	if b.tgMemory > 0 {
		l.MaxThreadgroupMemory = b.tgMemory
	}
	return l
}

func (b *limitedBackend) KernelLimits(k *driver.KernelInfo) (driver.KernelLimits, error) {
	m, ok := b.maxThreads[k.Name]
	if !ok {
		m = 1024
	}
	return driver.KernelLimits{MaxThreadsPerGroup: m, SIMDWidth: 32}, nil
}

func (b *limitedBackend) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	b.mu.Lock()
	b.largest[k.Name] = max(b.largest[k.Name], int(tpg.Count()))
	b.mu.Unlock()
	return b.Backend.Dispatch(k, groups, tpg, args, tgLen)
}

func openLimited(t *testing.T, maxThreads map[string]int) (*gpu.Device, *limitedBackend) {
	t.Helper()
	return openLimitedWith(t, &limitedBackend{maxThreads: maxThreads})
}

// openLimitedWith opens lb (its maxThreads, computeUnits and tgMemory set) over a new host
// backend.
func openLimitedWith(t *testing.T, lb *limitedBackend) (*gpu.Device, *limitedBackend) {
	t.Helper()
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	lb.Backend, lb.largest = hb, map[string]int{}
	dev, err := gpu.NewDevice(gpu.KindHost, lb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev, lb
}

func TestGroupSizeClamps(t *testing.T) {
	dev, _ := openLimited(t, map[string]int{"ntt_pass": 100, "merkle_hash_rows": 64, "fo_add": 1000})
	for _, c := range []struct {
		kernel     string
		want, got  int
		whatIsThis string
	}{
		{"ntt_pass", 256, 96, "limit 100, rounded down to whole SIMD groups"},
		{"ntt_pass", 8, 8, "below one SIMD group: kept"},
		{"merkle_hash_rows", 256, 64, "limit 64"},
		{"fo_add", 1024, 992, "limit 1000, rounded down to whole SIMD groups"},
		{"fo_mul", 256, 256, "no lower limit"},
		{"fo_mul", 0, 1, "at least 1"},
		{"", 256, 64, "what every kernel allows"},
	} {
		if got := groupSize(dev, c.kernel, c.want); got != c.got {
			t.Errorf("groupSize(%q, %d) = %d, want %d (%s)", c.kernel, c.want, got, c.got, c.whatIsThis)
		}
	}
	if _, tpg := shape(dev, 1<<20); tpg.X != 64 {
		t.Errorf("shape: %d threads per group, want 64 (the smallest kernel limit)", tpg.X)
	}
	if g, tpg := shapeFor(dev, "fo_mul", 1<<20); tpg.X != 256 || g.X != 64*2 {
		t.Errorf("shapeFor(fo_mul): %d groups of %d, want 128 of 256", g.X, tpg.X)
	}
	if g, tpg := shapeFor(dev, "merkle_hash_rows", 1<<20); tpg.X != 64 || g.X != 4*64*2 {
		t.Errorf("shapeFor(merkle_hash_rows): %d groups of %d, want 512 of 64 (as many threads as groups of 256)", g.X, tpg.X)
	}
}

// TestLaunchersRespectKernelLimits runs the launchers on a device whose kernels allow fewer
// threads per group than the device (package gpu rejects a launch above a kernel's limit) and
// checks the results against the reference.
func TestLaunchersRespectKernelLimits(t *testing.T) {
	// ntt_pass: 1, the extreme case; also, the host device runs a group of more than one item of
	// a barrier kernel on fibers with 64 KiB stacks, and ntt_pass's frame is larger (GCC 12 -O3).
	limits := map[string]int{
		"ntt_pass": 1, "ntt_message_columns": 64, "merkle_hash_rows": 64,
		"merkle_compress": 32, "merkle_gather_rows": 128, "p2_permute_states": 32,
		"fo_to_mont": 128, "fo_from_mont": 128,
	}
	dev, lb := openLimited(t, limits)
	r := rand.New(rand.NewPCG(21, 22))

	// RS encoding: the message columns (tiled), two-pass DFT (forced), conversions.
	old := maxPassLog
	maxPassLog = 4
	defer func() { maxPassLog = old }()
	ntt := NewNTT(dev)
	defer ntt.Close()
	const logM, width, lSkip, logBlowup = 9, 3, 3, 1
	q := air.NewMatrix(width, 1<<logM)
	copy(q.Values, fieldrand.Fps(r, len(q.Values)))
	a, err := UploadMont(dev, "q", q.Values)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	cw, err := ntt.RSEncodeMatrix("codeword", a, 1<<logM, width, lSkip, logBlowup, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Free()
	got, err := ReadCanonical(cw)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpuref.RSEncodeMatrix(lSkip, logBlowup, q)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want.Values); i >= 0 {
		t.Fatalf("RS codeword element %d differs", i)
	}

	// Merkle tree and an opening, Poseidon2 permutations.
	h, err := NewPoseidon2(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	m := air.NewMatrix(5, 1<<10)
	copy(m.Values, fieldrand.Fps(r, len(m.Values)))
	ma, err := UploadMont(dev, "matrix", m.Values)
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Free()
	tree, err := h.MerkleTree(ma, m.Height, m.Width, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Free()
	wantTree, err := cpuref.NewMerkleTree(m, 4)
	if err != nil {
		t.Fatal(err)
	}
	if root, err := tree.Root(); err != nil || root != wantTree.Root() {
		t.Fatalf("Merkle root %v (%v), want %v", root, err, wantTree.Root())
	}
	if _, err := tree.Open(3); err != nil {
		t.Fatal(err)
	}
	states := fieldrand.Fps(r, 16*100)
	sa, err := UploadMont(dev, "states", states)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Free()
	if err := h.Permute(sa, 100); err != nil {
		t.Fatal(err)
	}
	gotStates, err := ReadCanonical(sa)
	if err != nil {
		t.Fatal(err)
	}
	var s [16]field.Fp
	copy(s[:], states[16*99:])
	poseidon2.Permute(&s)
	if i := firstDiff(gotStates[16*99:], s[:]); i >= 0 {
		t.Fatalf("state 99 element %d differs", i)
	}

	b := dev.Batch()
	if err := EncodeToMont(b, dev, gpu.View[field.Fp](sa), 100); err != nil {
		t.Fatal(err)
	}
	if err := EncodeFromMont(b, dev, sa, 100); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}

	for k, lim := range limits {
		switch got := lb.largest[k]; {
		case got == 0:
			t.Errorf("%s was not dispatched", k)
		case got > lim:
			t.Errorf("%s dispatched with groups of %d threads, its limit is %d", k, got, lim)
		}
	}
}

// TestDispatchAboveKernelLimitFails: package gpu rejects a group larger than the kernel's own
// limit, naming the kernel, before the backend sees it.
func TestDispatchAboveKernelLimitFails(t *testing.T) {
	dev, lb := openLimited(t, map[string]int{"fo_add": 64})
	buf, err := gpu.AllocArray[uint32](dev, "x", 256)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	x := gpu.Buf(buf.Buffer)
	err = dev.Batch().Dispatch("fo_add", gpu.D1(1), gpu.D1(128), []gpu.Arg{x, x, x, gpu.U32(256)}).Wait()
	if err == nil || lb.largest["fo_add"] != 0 {
		t.Fatalf("err %v, dispatched %d: want a refused launch", err, lb.largest["fo_add"])
	}
	for _, s := range []string{"fo_add", "128 threads", "limit 64"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
