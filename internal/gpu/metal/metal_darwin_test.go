//go:build darwin && cgo

// These tests need a Metal device: they run on the macOS CI runner and skip elsewhere.

package metal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// testSource is independent of shaders/ so that these tests exercise the bridge alone.
const testSource = `
#include <metal_stdlib>
using namespace metal;

struct AddParams { uint n; uint k; };

// out[i] = a[i'] + k, where i' mirrors i inside its threadgroup (exercises threadgroup memory and
// a barrier).
kernel void mp_test_mirror_add(device const uint* a [[buffer(0)]], device uint* out [[buffer(1)]],
                               constant AddParams& p [[buffer(2)]], threadgroup uint* tmp [[threadgroup(0)]],
                               uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                               uint tpg [[threads_per_threadgroup]]) {
    tmp[lid] = gid < p.n ? a[gid] : 0u;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (gid < p.n) {
        out[gid] = tmp[tpg - 1 - lid] + p.k;
    }
}

// Writes far past the end of out: only dispatched under MTL_SHADER_VALIDATION=1.
kernel void mp_test_oob(device uint* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {
    out[gid + (1u << 24)] = gid;
}
`

var mirrorAdd = &driver.KernelInfo{
	Name: "mp_test_mirror_add", NBuf: 3, NTG: 1,
	Params: []driver.Param{
		{Name: "a", Kind: driver.ParamBuffer, Index: 0},
		{Name: "out", Kind: driver.ParamBuffer, Index: 1},
		{Name: "p", Kind: driver.ParamValue, Index: 2, ValueSize: 8},
		{Name: "tmp", Kind: driver.ParamThreadgroup, Index: 0},
	},
}

var oob = &driver.KernelInfo{
	Name: "mp_test_oob", NBuf: 1,
	Params: []driver.Param{{Name: "out", Kind: driver.ParamBuffer, Index: 0}},
}

func openTest(t *testing.T) *backend {
	t.Helper()
	be, err := newBackend()
	if errors.Is(err, driver.ErrUnavailable) {
		noDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := be.loadSource(testSource); err != nil {
		t.Fatal(err)
	}
	if err := be.buildPipelines([]string{mirrorAdd.Name, oob.Name}); err != nil {
		t.Fatal(err)
	}
	return be
}

func u32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// TestDeviceReport logs what the macOS workflow runs on (it runs this test first, with -v): the
// device, its GPU families and limits. Hosted runners expose a paravirtual GPU.
func TestDeviceReport(t *testing.T) {
	be, err := newBackend()
	if errors.Is(err, driver.ErrUnavailable) {
		noDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	be.from = "(not loaded)"
	t.Logf("Metal device: %s", be.Name())
	t.Logf("limits: %+v; maxBufferLength %d", be.Limits(), be.maxBuf)
}

func TestLimits(t *testing.T) {
	be := openTest(t)
	l := be.Limits()
	t.Logf("%s: %+v", be.Name(), l)
	if l.MaxThreadsPerGroup < 256 || l.MaxThreadgroupMemory < 16<<10 || l.MemoryBytes == 0 {
		t.Fatalf("implausible limits %+v", l)
	}
}

func TestDispatchMirrorAdd(t *testing.T) {
	be := openTest(t)
	const n, tpg = 1000, 64 // the last group is partial: the kernel bound-checks
	groups := uint32((n + tpg - 1) / tpg)
	in := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(in[4*i:], uint32(i*7+1))
	}
	a, err := be.Alloc(len(in))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(a)
	out, err := be.Alloc(len(in))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(out)
	if err := be.Upload(a, 0, in); err != nil {
		t.Fatal(err)
	}
	params := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, n), 5)
	args := []driver.Arg{{Buf: a}, {Buf: out}, {Bytes: params}}
	if err := be.Dispatch(mirrorAdd, driver.D1(groups), driver.D1(tpg), args, []uint32{4 * tpg}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(in))
	if err := be.Download(got, out, 0); err != nil { // syncs first
		t.Fatal(err)
	}
	g := u32s(got)
	for i := range n {
		base, lid := i/tpg*tpg, i%tpg
		src := base + tpg - 1 - lid
		want := uint32(5)
		if src < n {
			want += uint32(src*7 + 1)
		}
		if g[i] != want {
			t.Fatalf("out[%d] = %d, want %d", i, g[i], want)
		}
	}
}

func TestCopy(t *testing.T) {
	be := openTest(t)
	src, _ := be.Alloc(64)
	dst, _ := be.Alloc(64)
	defer be.Free(src)
	defer be.Free(dst)
	data := make([]byte, 64)
	for i := range data {
		data[i] = byte(i + 1)
	}
	if err := be.Upload(src, 0, data); err != nil {
		t.Fatal(err)
	}
	// An aligned blit, then an unaligned copy (done on the CPU after a sync).
	if err := be.Copy(dst, 8, src, 0, 16); err != nil {
		t.Fatal(err)
	}
	if err := be.Copy(dst, 33, src, 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if err := be.Download(got, dst, 0); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64)
	copy(want[8:], data[:16])
	copy(want[33:], data[1:6])
	if !bytes.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestAllocZeroed(t *testing.T) {
	be := openTest(t)
	b, err := be.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(b)
	got := make([]byte, 1<<20)
	if err := be.Download(got, b, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatal("a new buffer is not zero")
	}
}

func TestTooManyThreadsNamesKernel(t *testing.T) {
	be := openTest(t)
	a, _ := be.Alloc(16)
	defer be.Free(a)
	args := []driver.Arg{{Buf: a}, {Buf: a}, {Bytes: make([]byte, 8)}}
	err := be.Dispatch(mirrorAdd, driver.D1(1), driver.Dim3{X: 4096, Y: 1, Z: 1}, args, []uint32{16})
	if err == nil || !strings.Contains(err.Error(), "mp_test_mirror_add") || !strings.Contains(err.Error(), "maxTotalThreadsPerThreadgroup") {
		t.Fatalf("err = %v, want one naming the kernel and the pipeline limit", err)
	}
}

func TestMissingKernel(t *testing.T) {
	be := openTest(t)
	k := &driver.KernelInfo{Name: "no_such_kernel"}
	err := be.Dispatch(k, driver.D1(1), driver.D1(1), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Fatalf("err = %v, want one naming the kernel", err)
	}
}

func TestCompileErrorHasLog(t *testing.T) {
	be := openTest(t)
	err := be.loadSource("kernel void broken(device uint* p [[buffer(0)]]) { p[0] = undefined_name; }")
	if err == nil || !strings.Contains(err.Error(), "undefined_name") {
		t.Fatalf("err = %v, want the compiler's log naming undefined_name", err)
	}
}

// TestOpenBuildsEveryKernel opens the backend as package gpu does (metallib or source): Open has
// made the pipeline of every kernel of the main library in the generated table, and reports its
// limits; a module template's kernel has none until a module is built from it.
func TestOpenBuildsEveryKernel(t *testing.T) {
	for _, env := range []string{"", "1"} {
		t.Run("source="+env, func(t *testing.T) {
			t.Setenv(SourceEnv, env)
			dbe, err := Open(Options{})
			if errors.Is(err, driver.ErrUnavailable) {
				noDevice(t, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			be := dbe.(*backend)
			defer be.Close()
			t.Logf("%s", be.Name())
			if len(be.pipes) != len(mainKernels()) {
				t.Errorf("Open built %d pipelines, the kernel table has %d kernels outside module templates", len(be.pipes), len(mainKernels()))
			}
			for i := range driver.Kernels {
				k := &driver.Kernels[i]
				l, err := be.KernelLimits(k)
				if k.Module != "" {
					if err == nil {
						t.Errorf("%s (module template %s) has limits %+v before any module is built", k.Name, k.Module, l)
					}
					continue
				}
				if err != nil {
					t.Error(err)
					continue
				}
				t.Logf("%s: %+v", k.Name, l)
				if l.MaxThreadsPerGroup < 32 || l.MaxThreadsPerGroup > be.Limits().MaxThreadsPerGroup || l.SIMDWidth < 1 {
					t.Errorf("%s: implausible pipeline limits %+v", k.Name, l)
				}
			}
		})
	}
}

// TestBuildModules builds the generated constraint code of a test AIR as modules of the pieces
// template (the run-time compile path of issue 23): each module's kernel gets a pipeline of its
// own, found by KernelInfo.Built; a second call is served from memory; a module that does not
// compile fails with its ID and the compiler's log. (The kernels' results are checked by
// selftest's conformance suite, which runs the generated path where the device builds modules.)
func TestBuildModules(t *testing.T) {
	dbe, err := Open(Options{})
	if errors.Is(err, driver.ErrUnavailable) {
		noDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	be := dbe.(*backend)
	defer be.Close()
	ms := fibModules(t)
	builds, err := be.BuildModules(ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range builds {
		t.Logf("%s: %+v", ms[i].What, b)
		if b.ID != ms[i].ID || b.Cached || b.Elapsed <= 0 || b.CachePath != "" {
			t.Errorf("build %d = %+v", i, b)
		}
	}
	for i := range driver.Kernels {
		if driver.Kernels[i].Module != "pieces" {
			continue
		}
		for _, m := range ms {
			k := driver.Kernels[i] // as package gpu passes a built module's kernel
			k.Built = m.ID
			l, err := be.KernelLimits(&k)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s in %s: %+v", k.Name, m.ID, l)
			if l.MaxThreadsPerGroup < 32 || l.SIMDWidth < 1 {
				t.Errorf("%s in %s: implausible pipeline limits %+v", k.Name, m.ID, l)
			}
		}
	}
	again, err := be.BuildModules(ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range again {
		if !b.Cached || b.Elapsed != 0 {
			t.Errorf("second build %d = %+v, want it from memory", i, b)
		}
	}
	broken := driver.ModuleSource{ID: "pieces-broken", Template: "pieces", Code: "this_is_not_msl;\n", What: "a broken module"}
	_, err = be.BuildModules([]driver.ModuleSource{broken})
	t.Logf("broken module: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pieces-broken") || !strings.Contains(err.Error(), "this_is_not_msl") {
		t.Errorf("err = %v, want one naming the module and carrying the compiler's log", err)
	}
}

func TestDoubleCloseAndFree(t *testing.T) {
	be, err := newBackend()
	if errors.Is(err, driver.ErrUnavailable) {
		noDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(b)
	be.Free(b)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchSplitIntoCommandBuffers: with a 1 MiB budget every dispatch over 4 MiB of buffers goes
// into a command buffer of its own, committed without waiting; Sync waits for all, and each
// dispatch sees the writes of the one before it.
func TestBatchSplitIntoCommandBuffers(t *testing.T) {
	be := openTest(t)
	var err error
	if be.budget, err = newBudget("1"); err != nil {
		t.Fatal(err)
	}
	const n, tpg, rounds = 1 << 19, 64, 5 // 2 MiB buffers, zero at first
	a, _ := be.Alloc(4 * n)
	b, _ := be.Alloc(4 * n)
	defer be.Free(a)
	defer be.Free(b)
	params := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, n), 1)
	src, dst := a, b
	for range rounds {
		args := []driver.Arg{{Buf: src}, {Buf: dst}, {Bytes: params}}
		if err := be.Dispatch(mirrorAdd, driver.D1(n/tpg), driver.D1(tpg), args, []uint32{4 * tpg}); err != nil {
			t.Fatal(err)
		}
		src, dst = dst, src
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if be.commits != rounds-1 {
		t.Errorf("%d command buffers committed before the sync, want %d", be.commits, rounds-1)
	}
	got := make([]byte, 4*n)
	if err := be.Download(got, src, 0); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(got) { // every round adds 1 to a constant array
		if v != rounds {
			t.Fatalf("out[%d] = %d, want %d", i, v, rounds)
		}
	}
}

// TestFailedCommandBufferNamesKernel: under Metal's shader validation an out-of-bounds store makes
// the command buffer fail; the error names the kernel through its encoder's label.
func TestFailedCommandBufferNamesKernel(t *testing.T) {
	if os.Getenv("MTL_SHADER_VALIDATION") != "1" {
		t.Skip("needs MTL_SHADER_VALIDATION=1 (the macOS workflow sets it)")
	}
	be := openTest(t)
	out, _ := be.Alloc(16)
	defer be.Free(out)
	if err := be.Dispatch(oob, driver.D1(1), driver.D1(32), []driver.Arg{{Buf: out}}, nil); err != nil {
		t.Fatal(err)
	}
	err := be.Sync()
	t.Logf("sync: %v", err)
	if err == nil || !strings.Contains(err.Error(), "mp_test_oob") {
		t.Fatalf("err = %v, want a failed command buffer naming mp_test_oob", err)
	}
}

// noDevice skips a test that needs a Metal device, or fails it when METALPROVE_REQUIRE_METAL=1
// (the macOS workflow), so that a green run cannot mean that nothing ran.
func noDevice(t *testing.T, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("no Metal device, and %s=1: %v", RequireEnv, err)
	}
	t.Skipf("no Metal device: %v", err)
}
