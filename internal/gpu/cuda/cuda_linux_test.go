//go:build linux && cgo

package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// These tests run everywhere; the ones that need a GPU skip (saying why) when none is usable,
// unless METALPROVE_REQUIRE_CUDA=1, which turns the skip into a failure (for the GPU runs).

func TestMissingLibraries(t *testing.T) {
	err := loadCUDA("libcuda-metalprove-missing.so.1")
	if !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "libcuda-metalprove-missing.so.1 not found") {
		t.Errorf("missing libcuda: %v", err)
	}
	err = loadNVRTC([]string{"libnvrtc-metalprove-missing.so", "/nonexistent/libnvrtc.so.13"})
	if !errors.Is(err, driver.ErrUnavailable) || !strings.HasPrefix(err.Error(), "libnvrtc not found (tried libnvrtc-metalprove-missing.so, /nonexistent/libnvrtc.so.13") {
		t.Errorf("missing nvrtc: %v", err)
	}
	if len(nvrtcCandidates()) == 0 {
		t.Error("no NVRTC candidates")
	}
}

// TestOpenWithoutGPU checks the error Open gives on a machine without CUDA.
func TestOpenWithoutGPU(t *testing.T) {
	be, err := Open(Options{CacheDir: t.TempDir()})
	if err == nil {
		be.Close()
		t.Skip("a CUDA device is present: " + be.Name())
	}
	t.Logf("Open: %v", err)
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("error %v does not match driver.ErrUnavailable", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "libcuda.so.1 not found") && !strings.Contains(msg, "no CUDA device") &&
		!strings.Contains(msg, "libnvrtc not found") && !strings.Contains(msg, "CUDA driver") {
		t.Errorf("message does not say what is missing: %q", msg)
	}
}

func testSource(t *testing.T, name string) string {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openGPU(t *testing.T, opts Options) *backend {
	t.Helper()
	be, err := Open(opts)
	if err != nil {
		if errors.Is(err, driver.ErrUnavailable) && os.Getenv("METALPROVE_REQUIRE_CUDA") == "" {
			t.Skipf("no usable CUDA device: %v", err)
		}
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	return be.(*backend)
}

func u32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func bytesOf(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

var (
	kMul = driver.KernelInfo{Name: "t_mul", Pos: "testdata/test_kernels.metal:11", NBuf: 4, Params: []driver.Param{
		{Name: "a", Kind: driver.ParamBuffer, Index: 0}, {Name: "b", Kind: driver.ParamBuffer, Index: 1},
		{Name: "out", Kind: driver.ParamBuffer, Index: 2}, {Name: "p", Kind: driver.ParamValue, Index: 3, ValueSize: 8},
		{Name: "gid", Kind: driver.ParamBuiltin, Index: 4, Builtin: "thread_position_in_grid"}}}
	kGroupSum = driver.KernelInfo{Name: "t_group_sum", NBuf: 4, NTG: 2, Params: []driver.Param{
		{Name: "in", Kind: driver.ParamBuffer, Index: 0}, {Name: "out", Kind: driver.ParamBuffer, Index: 1},
		{Name: "offs", Kind: driver.ParamBuffer, Index: 2}, {Name: "n", Kind: driver.ParamValue, Index: 3, ValueSize: 4},
		{Name: "tag", Kind: driver.ParamThreadgroup, Index: 1}, {Name: "vals", Kind: driver.ParamThreadgroup, Index: 0}}}
	kBigTG = driver.KernelInfo{Name: "t_big_tg", NBuf: 2, NTG: 1, Params: []driver.Param{
		{Name: "out", Kind: driver.ParamBuffer, Index: 0}, {Name: "words", Kind: driver.ParamValue, Index: 1, ValueSize: 4},
		{Name: "m", Kind: driver.ParamThreadgroup, Index: 0}}}
	kMissing = driver.KernelInfo{Name: "t_not_there", Pos: "testdata/x.metal:1"}
)

func TestGPUKernels(t *testing.T) {
	b := openGPU(t, Options{CacheDir: t.TempDir(), Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"})
	lim := b.Limits()
	t.Logf("device %s; limits %+v; NVRTC %s (%s), target %s, archs %v", b.Name(), lim, rtcVersion, rtcPath, b.target, rtcArchs)
	if lim.MaxThreadsPerGroup < 1024 || lim.SIMDWidth != 32 || lim.ComputeUnits < 1 || lim.MemoryBytes < 1<<30 || lim.MaxThreadgroupMemory < 48<<10 {
		t.Errorf("implausible limits %+v", lim)
	}
	alloc := func(n int) driver.Buffer {
		buf, err := b.Alloc(n)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		t.Cleanup(func() { b.Free(buf) })
		return buf
	}
	download := func(buf driver.Buffer, n int) []uint32 {
		out := make([]byte, 4*n)
		if err := b.Download(out, buf, 0); err != nil {
			t.Fatalf("Download: %v", err)
		}
		return u32s(out)
	}

	// zeroed allocation
	const n = 100_003
	z := alloc(4 * n)
	for i, v := range download(z, n) {
		if v != 0 {
			t.Fatalf("Alloc not zeroed at %d: %d", i, v)
		}
	}

	// vector multiply with a value struct
	a, bb := make([]uint32, n), make([]uint32, n)
	for i := range a {
		a[i], bb[i] = uint32(i)*2654435761, uint32(i)^0x5bd1e995
	}
	da, db, dout := alloc(4*n), alloc(4*n), alloc(4*n)
	if err := b.Upload(da, 0, bytesOf(a)); err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(db, 0, bytesOf(bb)); err != nil {
		t.Fatal(err)
	}
	if err := b.Dispatch(&kMul, driver.D1(97), driver.D1(256), []driver.Arg{{Buf: da}, {Buf: db}, {Buf: dout}, {Bytes: bytesOf([]uint32{n, 7})}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, v := range download(dout, n) {
		if want := a[i]*bb[i] + 7; v != want {
			t.Fatalf("t_mul[%d] = %d, want %d", i, v, want)
		}
	}

	// device copy at offsets, then a partial download at an offset
	cp := alloc(4 * n)
	if err := b.Copy(cp, 8, dout, 4, 4*1000); err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 4*1000)
	if err := b.Download(part, cp, 8); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(part) {
		if want := a[i+1]*bb[i+1] + 7; v != want {
			t.Fatalf("copy[%d] = %d, want %d", i, v, want)
		}
	}

	// two threadgroup arrays: offsets and 16-byte alignment
	const tpg, groups = 128, 50
	in := make([]uint32, tpg*groups-5)
	for i := range in {
		in[i] = uint32(i * i)
	}
	din, dsum, doffs := alloc(4*len(in)), alloc(4*groups), alloc(16*groups)
	if err := b.Upload(din, 0, bytesOf(in)); err != nil {
		t.Fatal(err)
	}
	tgLen := []uint32{4*tpg + 4, 4} // 516 → 528
	if err := b.Dispatch(&kGroupSum, driver.D1(groups), driver.D1(tpg), []driver.Arg{{Buf: din}, {Buf: dsum}, {Buf: doffs}, {Bytes: bytesOf([]uint32{uint32(len(in))})}}, tgLen); err != nil {
		t.Fatal(err)
	}
	sums, offs := download(dsum, groups), download(doffs, 4*groups)
	for g := 0; g < groups; g++ {
		want := uint32(1000 * g)
		for i := g * tpg; i < (g+1)*tpg && i < len(in); i++ {
			want += in[i]
		}
		if sums[g] != want {
			t.Fatalf("group %d sum %d, want %d", g, sums[g], want)
		}
		if o := offs[4*g : 4*g+4]; o[0] != 0 || o[1] != 528 || o[2] != 0 || o[3] != 0 {
			t.Fatalf("group %d: tg offsets/alignments %v, want [0 528 0 0]", g, o)
		}
	}

	// more than 48 KiB of threadgroup memory (opt-in through cuFuncSetAttribute)
	words := uint32(min(lim.MaxThreadgroupMemory, 200<<10) / 4)
	if words*4 <= defaultDynSmem {
		t.Fatalf("device allows only %d bytes of threadgroup memory", lim.MaxThreadgroupMemory)
	}
	const bigGroups = 3
	dbig := alloc(int(4 * words * bigGroups))
	if err := b.Dispatch(&kBigTG, driver.D1(bigGroups), driver.D1(1024), []driver.Arg{{Buf: dbig}, {Bytes: bytesOf([]uint32{words})}}, []uint32{4 * words}); err != nil {
		t.Fatal(err)
	}
	big := download(dbig, int(words*bigGroups))
	for g := uint32(0); g < bigGroups; g++ {
		for k := uint32(0); k < words; k++ {
			if want := (words-1-k)*3 + g; big[g*words+k] != want {
				t.Fatalf("big tg group %d word %d = %d, want %d", g, k, big[g*words+k], want)
			}
		}
	}
	t.Logf("threadgroup memory: %d bytes in one group ok", 4*words)

	// errors name the kernel and the call
	err := b.Dispatch(&kMissing, driver.D1(1), driver.D1(1), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "cuModuleGetFunction (kernel mslk_t_not_there)") {
		t.Errorf("missing kernel: %v", err)
	}
	t.Logf("missing kernel: %v", err)
	err = b.Dispatch(&kMul, driver.D1(1), driver.D1(4096), []driver.Arg{{Buf: da}, {Buf: db}, {Buf: dout}, {Bytes: bytesOf([]uint32{n, 7})}}, nil)
	if err == nil || !strings.Contains(err.Error(), "cuLaunchKernel (kernel mslk_t_mul)") || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_VALUE") {
		t.Errorf("bad launch: %v", err)
	}
	t.Logf("bad launch: %v", err)
	if err := b.Sync(); err != nil {
		t.Errorf("Sync after a rejected launch: %v", err)
	}
	_, err = b.Alloc(1 << 50)
	if !errors.Is(err, driver.ErrOutOfMemory) {
		t.Errorf("huge Alloc: %v, want ErrOutOfMemory", err)
	}
	t.Logf("huge alloc: %v", err)
}

// forgetImages makes this process forget the module images it has loaded, as a new process
// would (the tests before this one loaded the same source).
func forgetImages() {
	loadMu.Lock()
	clear(imagesByKey)
	loadMu.Unlock()
	modFlights.forget()
}

func TestGPUCache(t *testing.T) {
	forgetImages()
	dir := t.TempDir()
	opts := Options{CacheDir: dir, Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"}
	b1 := openGPU(t, opts)
	if !b1.compiled || b1.cacheHit || b1.cacheErr != nil {
		t.Fatalf("first open: compiled %v hit %v cache error %v", b1.compiled, b1.cacheHit, b1.cacheErr)
	}
	file := b1.cacheFile
	b1.Close()
	b2 := openGPU(t, opts)
	if b2.compiled || !b2.cacheHit || b2.cacheFile != file {
		t.Fatalf("second open: compiled %v hit %v", b2.compiled, b2.cacheHit)
	}
	runMul(t, b2)
	b2.Close()

	// a corrupt entry is recompiled and replaced (by a new process: this one has the image
	// in memory, which comes before the disk)
	forgetImages()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b3 := openGPU(t, opts)
	if !b3.compiled || b3.cacheHit {
		t.Fatalf("corrupt entry: compiled %v hit %v", b3.compiled, b3.cacheHit)
	}
	runMul(t, b3)
	b3.Close()
	if _, _, err := readCache(dir, strings.TrimSuffix(file[len(dir)+1:], ".mpcuda")); err != nil {
		t.Fatalf("entry not rewritten: %v", err)
	}
	// a different source is another entry
	opts.Source += "\n// changed\n"
	b4 := openGPU(t, opts)
	if !b4.compiled || b4.cacheFile == file {
		t.Fatalf("changed source reused the entry")
	}
}

func runMul(t *testing.T, b *backend) {
	t.Helper()
	const n = 1000
	bufs := make([]driver.Buffer, 3)
	for i := range bufs {
		var err error
		if bufs[i], err = b.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
		defer b.Free(bufs[i])
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = uint32(i)
	}
	b.Upload(bufs[0], 0, bytesOf(v))
	b.Upload(bufs[1], 0, bytesOf(v))
	if err := b.Dispatch(&kMul, driver.D1(4), driver.D1(256), []driver.Arg{{Buf: bufs[0]}, {Buf: bufs[1]}, {Buf: bufs[2]}, {Bytes: bytesOf([]uint32{n, 1})}}, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := b.Download(out, bufs[2], 0); err != nil {
		t.Fatal(err)
	}
	for i, x := range u32s(out) {
		if x != uint32(i*i+1) {
			t.Fatalf("out[%d] = %d", i, x)
		}
	}
}

func TestGPUCompileError(t *testing.T) {
	_, err := Open(Options{CacheDir: t.TempDir(), Source: testSource(t, "bad_kernel.cu"), SourceName: "bad_kernel.cu"})
	if err != nil && errors.Is(err, driver.ErrUnavailable) && os.Getenv("METALPROVE_REQUIRE_CUDA") == "" {
		t.Skipf("no usable CUDA device: %v", err)
	}
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CompileError, got %v", err)
	}
	t.Logf("compile error:\n%v", err)
	if !strings.Contains(err.Error(), "testdata/bad.metal:4: error") || !strings.Contains(err.Error(), "undefined_symbol") {
		t.Errorf("compile error does not name testdata/bad.metal:4: %v", err)
	}
}

// TestGPUEmbedded compiles the embedded kernels.gen.cu (the real kernels once generated) and
// checks that every kernel of the table has its entry point, with plausible limits.
func TestGPUEmbedded(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	b := openGPU(t, Options{CacheDir: dir})
	compileTime := time.Since(start)
	t.Logf("embedded kernels.gen.cu: %d bytes compiled for %s in %v; %d kernels in the table", len(kernelsSource), b.target, compileTime, len(driver.Kernels))
	if !strings.Contains(kernelsSource, "__global__") {
		t.Skip("kernels.gen.cu is still the placeholder")
	}
	for i := range driver.Kernels {
		k := &driver.Kernels[i]
		if k.Module != "" {
			continue // a module template's kernel: in the modules built from it (TestGPUBuildModules)
		}
		l, err := b.KernelLimits(k)
		if err != nil {
			t.Errorf("%s (%s): %v", k.Name, k.Pos, err)
			continue
		}
		t.Logf("%s: %+v", k.Name, l)
		if l.MaxThreadsPerGroup < 32 || l.MaxThreadsPerGroup > b.limits.MaxThreadsPerGroup || l.SIMDWidth != b.limits.SIMDWidth {
			t.Errorf("%s: implausible function limits %+v (device %+v)", k.Name, l, b.limits)
		}
	}
	b.Close()
	start = time.Now()
	b2 := openGPU(t, Options{CacheDir: dir})
	t.Logf("second open (cache hit %v) in %v", b2.cacheHit, time.Since(start))
	if !b2.cacheHit {
		t.Error("second open missed the cache")
	}
}

// TestGPUPoolReuseIsZeroed checks the stream-ordered allocator: a buffer freed after a write and
// allocated again (the pool hands the same memory back) reads as zeros, and the pool's unused
// memory counts as free.
func TestGPUPoolReuseIsZeroed(t *testing.T) {
	b := openGPU(t, Options{CacheDir: t.TempDir(), Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"})
	t.Logf("stream-ordered allocation: %v", b.usePool)
	const n = 1 << 20
	before, err := b.FreeMemory()
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		buf, err := b.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := b.Download(got, buf, 0); err != nil {
			t.Fatal(err)
		}
		for i, x := range got {
			if x != 0 {
				t.Fatalf("round %d: byte %d of a new buffer is %#x, want 0", round, i, x)
			}
		}
		ones := make([]byte, n)
		for i := range ones {
			ones[i] = 0xff
		}
		if err := b.Upload(buf, 0, ones); err != nil {
			t.Fatal(err)
		}
		b.Free(buf)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	after, err := b.FreeMemory()
	if err != nil {
		t.Fatal(err)
	}
	// other processes may allocate meanwhile; only a loss of our own freed buffer is an error
	if b.usePool && before > after+64<<20 {
		t.Errorf("free memory fell from %d to %d bytes after every buffer was freed", before, after)
	}
}

// TestGPUStagedUpload checks uploads through the pinned staging buffers: sizes around the
// threshold and the chunk, odd lengths, a non-zero offset, each read back.
func TestGPUStagedUpload(t *testing.T) {
	b := openGPU(t, Options{CacheDir: t.TempDir(), Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"})
	const off = 12
	size := off + 5*stagingChunk + 3
	buf, err := b.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(buf)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{stagedUploadMin - 1, stagedUploadMin, stagedUploadMin + 5, 4*stagingChunk + 1, 5*stagingChunk + 3} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		if err := b.Upload(buf, off, src); err != nil {
			t.Fatalf("upload of %d bytes: %v", n, err)
		}
		got := make([]byte, n)
		if err := b.Download(got, buf, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("upload of %d bytes: read back differs", n)
		}
	}
	t.Logf("staging buffers: %d of %d bytes", len(b.stage.bufs), stagingChunk)
}

// TestGPUStreams: several backends of one GPU (one stream each, as bench --concurrency opens
// them) work at the same time: the module image is compiled at most once in the process, and
// each stream's allocations (zeroed on the stream, stream-ordered frees when pooled), uploads,
// launches and downloads stay correct while the others run, over many allocate/free rounds.
func TestGPUStreams(t *testing.T) {
	dir := t.TempDir()
	src := testSource(t, "test_kernels.cu")
	const queues = 4
	bes := make([]*backend, queues)
	for i := range bes {
		bes[i] = openGPU(t, Options{CacheDir: dir, Source: src, SourceName: "test_kernels.cu"})
		if i > 0 && (bes[i].compiled || !bes[i].cacheHit) {
			t.Errorf("backend %d compiled its module again (compiled %v, cache hit %v)", i, bes[i].compiled, bes[i].cacheHit)
		}
	}
	t.Logf("%s: %d streams, pooled allocation %v", bes[0].Name(), queues, bes[0].usePool)
	errs := make(chan error, queues)
	for q, b := range bes {
		go func() {
			errs <- func() error {
				const n = 1 << 18
				for round := range 20 {
					a, c := make([]uint32, n), make([]uint32, n)
					for i := range a {
						a[i], c[i] = uint32(i*(q+1)+round), uint32(i)^uint32(q<<20|round)
					}
					bufs := make([]driver.Buffer, 3)
					for i := range bufs {
						buf, err := b.Alloc(4 * n)
						if err != nil {
							return err
						}
						defer b.Free(buf)
						bufs[i] = buf
					}
					zero := make([]byte, 4*n)
					if err := b.Download(zero, bufs[2], 0); err != nil {
						return err
					}
					for i, v := range u32s(zero) {
						if v != 0 {
							return fmt.Errorf("stream %d round %d: a new buffer is not zero at %d: %d", q, round, i, v)
						}
					}
					if err := b.Upload(bufs[0], 0, bytesOf(a)); err != nil {
						return err
					}
					if err := b.Upload(bufs[1], 0, bytesOf(c)); err != nil {
						return err
					}
					if err := b.Dispatch(&kMul, driver.D1(n/256), driver.D1(256), []driver.Arg{{Buf: bufs[0]}, {Buf: bufs[1]}, {Buf: bufs[2]}, {Bytes: bytesOf([]uint32{n, uint32(q)})}}, nil); err != nil {
						return err
					}
					out := make([]byte, 4*n)
					if err := b.Download(out, bufs[2], 0); err != nil {
						return err
					}
					for i, v := range u32s(out) {
						if want := a[i]*c[i] + uint32(q); v != want {
							return fmt.Errorf("stream %d round %d: t_mul[%d] = %d, want %d", q, round, i, v, want)
						}
					}
					for _, buf := range bufs {
						b.Free(buf) // freed now (the deferred frees are no-ops): the next round reuses the memory
					}
				}
				return b.Sync()
			}()
		}()
	}
	for range queues {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestGPUSettledDownload: a settled download (second stream) reads what a synced launch wrote,
// through the bounce buffer and without it, while later launches are still queued; the plain
// download after it sees those launches' results.
func TestGPUSettledDownload(t *testing.T) {
	b := openGPU(t, Options{CacheDir: t.TempDir(), Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"})
	for _, n := range []int{1000, bounceBytes / 4, 2*bounceBytes/4 + 256} {
		a, c := make([]uint32, n), make([]uint32, n)
		for i := range a {
			a[i], c[i] = uint32(3*i+1), uint32(i)^0x5a5a
		}
		bufs := allocBuffers(t, b, 4, 4*n)
		if err := b.Upload(bufs[0], 0, bytesOf(a)); err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(bufs[1], 0, bytesOf(c)); err != nil {
			t.Fatal(err)
		}
		mul := func(out driver.Buffer, add uint32) {
			groups := uint32(n+255) / 256
			if err := b.Dispatch(&kMul, driver.D1(groups), driver.D1(256), []driver.Arg{{Buf: bufs[0]}, {Buf: bufs[1]}, {Buf: out}, {Bytes: bytesOf([]uint32{uint32(n), add})}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		mul(bufs[2], 7)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		for range 50 {
			mul(bufs[3], 9)
		}
		got := make([]byte, 4*n)
		if err := b.DownloadSettled(got, bufs[2], 0); err != nil {
			t.Fatal(err)
		}
		if b.settled == nil {
			t.Fatal("no second stream")
		}
		for i, v := range u32s(got) {
			if want := a[i]*c[i] + 7; v != want {
				t.Fatalf("%d words: settled t_mul[%d] = %d, want %d", n, i, v, want)
			}
		}
		if err := b.Download(got, bufs[3], 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range u32s(got) {
			if want := a[i]*c[i] + 9; v != want {
				t.Fatalf("%d words: t_mul[%d] = %d after the settled download, want %d", n, i, v, want)
			}
		}
	}
}

// TestGPUQueuedUpload: a queued upload into a fresh buffer behind queued kernels is seen by the
// kernels after it, its source may change once it returns, two in a row reuse the pinned area,
// and one larger than the area goes as a plain upload.
func TestGPUQueuedUpload(t *testing.T) {
	b := openGPU(t, Options{CacheDir: t.TempDir(), Source: testSource(t, "test_kernels.cu"), SourceName: "test_kernels.cu"})
	for _, n := range []int{1000, queuedBytes / 4, queuedBytes/4 + 1} {
		a, c := make([]uint32, n), make([]uint32, n)
		for i := range a {
			a[i], c[i] = uint32(5*i+3), uint32(i)^0x3c3c
		}
		bufs := allocBuffers(t, b, 4, 4*n)
		if err := b.Upload(bufs[0], 0, bytesOf(a)); err != nil {
			t.Fatal(err)
		}
		mul := func(x, out driver.Buffer, add uint32) {
			groups := uint32(n+255) / 256
			if err := b.Dispatch(&kMul, driver.D1(groups), driver.D1(256), []driver.Arg{{Buf: bufs[0]}, {Buf: x}, {Buf: out}, {Bytes: bytesOf([]uint32{uint32(n), add})}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 50 {
			mul(bufs[0], bufs[3], 1) // queued work the uploads do not wait for
		}
		src := bytesOf(c)
		if err := b.UploadQueued(bufs[1], 0, src); err != nil {
			t.Fatal(err)
		}
		clear(src) // the source may change once the call returns
		d := make([]uint32, n)
		for i := range d {
			d[i] = uint32(7 * i)
		}
		if err := b.UploadQueued(bufs[2], 0, bytesOf(d)); err != nil { // the area again
			t.Fatal(err)
		}
		if b.queued.ptr == nil {
			t.Fatal("no pinned area for queued uploads")
		}
		mul(bufs[1], bufs[3], 9)
		got := make([]byte, 4*n)
		if err := b.Download(got, bufs[3], 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range u32s(got) {
			if want := a[i]*(uint32(i)^0x3c3c) + 9; v != want {
				t.Fatalf("%d words: t_mul[%d] = %d after a queued upload, want %d", n, i, v, want)
			}
		}
		if err := b.Download(got, bufs[2], 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range u32s(got) {
			if v != d[i] {
				t.Fatalf("%d words: the second queued upload's word %d is %d, want %d", n, i, v, d[i])
			}
		}
	}
}

// allocBuffers allocates k buffers of size bytes on b, freed when the test ends.
func allocBuffers(t *testing.T, b *backend, k, size int) []driver.Buffer {
	t.Helper()
	bufs := make([]driver.Buffer, k)
	for i := range bufs {
		buf, err := b.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(buf) })
		bufs[i] = buf
	}
	return bufs
}
