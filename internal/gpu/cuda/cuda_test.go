package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// fakeBuf stands for a device buffer in the pure-Go tests.
type fakeBuf struct {
	ptr  uint64
	size int
}

func (b *fakeBuf) Size() int { return b.size }

func fakePtr(x driver.Buffer) (uint64, error) {
	b, ok := x.(*fakeBuf)
	if !ok {
		return 0, errors.New("not a fake buffer")
	}
	return b.ptr, nil
}

// A kernel whose declaration order differs from its slot order, with a value slot and two
// threadgroup arrays, as cmd/mslgen would describe it.
var packKernel = driver.KernelInfo{
	Name: "k", Pos: "shaders/k.metal:3", NBuf: 3, NTG: 2,
	Params: []driver.Param{
		{Name: "out", Type: "device uint*", Kind: driver.ParamBuffer, Index: 2},
		{Name: "scratch1", Type: "threadgroup uint*", Kind: driver.ParamThreadgroup, Index: 1},
		{Name: "in", Type: "device const uint*", Kind: driver.ParamBuffer, Index: 0},
		{Name: "p", Type: "constant P&", Kind: driver.ParamValue, Index: 1, ValueSize: 12},
		{Name: "gid", Type: "uint", Kind: driver.ParamBuiltin, Index: 4, Builtin: "thread_position_in_grid"},
		{Name: "scratch0", Type: "threadgroup uint*", Kind: driver.ParamThreadgroup, Index: 0},
	},
}

func TestPackParams(t *testing.T) {
	in := &fakeBuf{ptr: 0x7f0000001000, size: 64}
	out := &fakeBuf{ptr: 0x7f0000002000, size: 64}
	val := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}
	args := []driver.Arg{{Buf: in}, {Bytes: val}, {Buf: out}}
	lp, err := packParams(&packKernel, args, []uint32{100, 20}, fakePtr)
	if err != nil {
		t.Fatal(err)
	}
	// order: in (slot 0), p (slot 1), out (slot 2), tg_off_0, tg_off_1
	wantOffs := []uint32{0, 8, 24, 32, 40}
	if !slices.Equal(lp.offs, wantOffs) {
		t.Fatalf("offsets %v, want %v", lp.offs, wantOffs)
	}
	get64 := func(off uint32) uint64 { return binary.LittleEndian.Uint64(lp.blob[off:]) }
	get32 := func(off uint32) uint32 { return binary.LittleEndian.Uint32(lp.blob[off:]) }
	if get64(0) != in.ptr || get64(24) != out.ptr {
		t.Errorf("pointers %#x %#x", get64(0), get64(24))
	}
	if !bytes.Equal(lp.blob[8:20], val) {
		t.Errorf("value bytes %v", lp.blob[8:20])
	}
	// tg 0: 100 bytes → offset 0, rounded to 112; tg 1 at 112, 20 → 32; total 144
	if get32(32) != 0 || get32(40) != 112 || lp.smem != 144 {
		t.Errorf("tg offsets %d %d, smem %d; want 0 112 144", get32(32), get32(40), lp.smem)
	}
	if !slices.Equal(lp.tgOff, []uint32{0, 112}) {
		t.Errorf("tgOff %v", lp.tgOff)
	}
	for _, o := range lp.offs {
		if o%8 != 0 {
			t.Errorf("offset %d not 8-aligned", o)
		}
	}
}

// TestPackReusesItsBuffers: a backend packs every launch into one launchParams; a launch after a
// longer one must leave nothing of it (offsets, blob, threadgroup layout), and the result equals
// a fresh packParams.
func TestPackReusesItsBuffers(t *testing.T) {
	in := &fakeBuf{ptr: 0x7f0000001000, size: 64}
	out := &fakeBuf{ptr: 0x7f0000002000, size: 64}
	small := driver.KernelInfo{Name: "s", NBuf: 1, Params: []driver.Param{{Name: "in", Kind: driver.ParamBuffer, Index: 0}}}
	launches := []struct {
		k    *driver.KernelInfo
		args []driver.Arg
		tg   []uint32
	}{
		{&packKernel, []driver.Arg{{Buf: in}, {Bytes: make([]byte, 12)}, {Buf: out}}, []uint32{100, 20}},
		{&small, []driver.Arg{{Buf: out}}, nil},
		{&packKernel, []driver.Arg{{Buf: out}, {Bytes: []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2}}, {Buf: in}}, []uint32{4, 300}},
	}
	var lp launchParams
	for i, l := range launches {
		o, err := orderParams(l.k)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.pack(&lp, l.args, l.tg, fakePtr); err != nil {
			t.Fatal(err)
		}
		want, err := packParams(l.k, l.args, l.tg, fakePtr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lp.blob, want.blob) || !slices.Equal(lp.offs, want.offs) || !slices.Equal(lp.tgOff, want.tgOff) || lp.smem != want.smem {
			t.Fatalf("launch %d: reused %+v, fresh %+v", i, lp, want)
		}
	}
}

func TestPackParamsErrors(t *testing.T) {
	in := &fakeBuf{ptr: 1, size: 4}
	val := make([]byte, 12)
	cases := []struct {
		name  string
		args  []driver.Arg
		tg    []uint32
		check string
	}{
		{"missing buffer", []driver.Arg{{}, {Bytes: val}, {Buf: in}}, []uint32{4, 4}, "argument 0 (device const uint* in) needs a buffer"},
		{"value size", []driver.Arg{{Buf: in}, {Bytes: val[:8]}, {Buf: in}}, []uint32{4, 4}, "takes 12 bytes by value, got 8"},
		{"buffer for value", []driver.Arg{{Buf: in}, {Buf: in}, {Buf: in}}, []uint32{4, 4}, "argument 1 (constant P& p)"},
		{"arg count", []driver.Arg{{Buf: in}}, []uint32{4, 4}, "1 buffer arguments for 3 slots"},
		{"tg count", []driver.Arg{{Buf: in}, {Bytes: val}, {Buf: in}}, []uint32{4}, "1 threadgroup lengths for 2"},
		{"foreign buffer", []driver.Arg{{Buf: in}, {Bytes: val}, {Buf: otherBuf{}}}, []uint32{4, 4}, "argument 2 (out): not a fake buffer"},
	}
	for _, c := range cases {
		_, err := packParams(&packKernel, c.args, c.tg, fakePtr)
		if err == nil || !strings.Contains(err.Error(), c.check) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.check)
		}
	}
	dup := driver.KernelInfo{Name: "d", NBuf: 1, Params: []driver.Param{
		{Name: "a", Kind: driver.ParamBuffer, Index: 0}, {Name: "b", Kind: driver.ParamBuffer, Index: 0}}}
	if _, err := packParams(&dup, []driver.Arg{{Buf: in}}, nil, fakePtr); err == nil || !strings.Contains(err.Error(), "share index 0") {
		t.Errorf("duplicate index: %v", err)
	}
}

type otherBuf struct{}

func (otherBuf) Size() int { return 1 }

func TestPackParamsNoParams(t *testing.T) {
	k := driver.KernelInfo{Name: "empty"}
	lp, err := packParams(&k, nil, nil, fakePtr)
	if err != nil || len(lp.offs) != 0 || lp.smem != 0 {
		t.Fatalf("%+v %v", lp, err)
	}
}

func TestTGLayout(t *testing.T) {
	offs, total := tgLayout(nil, []uint32{0, 1, 16, 17})
	if !slices.Equal(offs, []uint32{0, 0, 16, 32}) || total != 64 {
		t.Fatalf("offs %v total %d", offs, total)
	}
}

func TestCacheRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub", "cuda")
	key := cacheKey("src", "sm_90", "13.0", []string{"-std=c++17"})
	if _, _, err := readCache(dir, key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty cache: %v", err)
	}
	payload := []byte("\x7fELF cubin bytes")
	if err := writeCache(dir, key, kindCubin, payload); err != nil {
		t.Fatal(err)
	}
	kind, got, err := readCache(dir, key)
	if err != nil || kind != kindCubin || !bytes.Equal(got, payload) {
		t.Fatalf("read back %c %q %v", kind, got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("cache dir holds %d files, want 1 (no temporaries left)", len(ents))
	}
	// corruptions are detected
	raw, _ := os.ReadFile(cachePath(dir, key))
	for name, bad := range map[string][]byte{
		"truncated":   raw[:len(raw)-3],
		"flipped":     append(append([]byte{}, raw[:len(raw)-1]...), raw[len(raw)-1]^1),
		"bad magic":   append([]byte("XXXXXXXX"), raw[8:]...),
		"empty":       {},
		"header only": raw[:cacheHeader],
	} {
		if _, _, err := decodeEntry(bad); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", name, err)
		}
	}
}

func TestCacheKey(t *testing.T) {
	base := cacheKey("src", "sm_90", "13.0", []string{"-a", "-b"})
	for _, k := range []string{
		cacheKey("src2", "sm_90", "13.0", []string{"-a", "-b"}),
		cacheKey("src", "sm_80", "13.0", []string{"-a", "-b"}),
		cacheKey("src", "sm_90", "12.8", []string{"-a", "-b"}),
		cacheKey("src", "sm_90", "13.0", []string{"-a"}),
		cacheKey("src", "sm_90", "13.0", []string{"-a-b"}),
	} {
		if k == base {
			t.Errorf("key collision")
		}
	}
	if base != cacheKey("src", "sm_90", "13.0", []string{"-a", "-b"}) || len(base) != 64 {
		t.Errorf("key not deterministic or not SHA-256 hex")
	}
}

func TestRewriteLog(t *testing.T) {
	log := "shaders/ntt.metal(12): error: identifier \"x\" is undefined\n\n1 error detected in the compilation of \"kernels.gen.cu\".\n\x00"
	got := rewriteLog(log)
	if !strings.HasPrefix(got, "shaders/ntt.metal:12: error: identifier") || strings.Contains(got, "\x00") {
		t.Errorf("rewriteLog: %q", got)
	}
}

func TestChooseTarget(t *testing.T) {
	cases := []struct {
		maj, min int
		archs    []int
		cubin    bool
		want     string
		wantBin  bool
		err      bool
	}{
		{9, 0, []int{75, 80, 86, 89, 90, 100}, true, "sm_90", true, false},
		{9, 0, nil, true, "sm_90", true, false},
		{9, 0, nil, false, "compute_90", false, false},
		{9, 0, []int{75, 80, 90}, false, "compute_90", false, false},
		{12, 0, []int{75, 80, 90}, true, "compute_90", false, false}, // device newer than NVRTC
		{5, 2, []int{75, 80}, true, "", false, true},                 // device older than NVRTC supports
	}
	for _, c := range cases {
		got, bin, err := chooseTarget(c.maj, c.min, c.archs, c.cubin)
		if (err != nil) != c.err || got != c.want || bin != c.wantBin {
			t.Errorf("chooseTarget(%d.%d, %v, %v) = %q %v %v", c.maj, c.min, c.archs, c.cubin, got, bin, err)
		}
	}
}

func TestErrors(t *testing.T) {
	oom := &Error{Op: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	if !errors.Is(oom, driver.ErrOutOfMemory) {
		t.Error("OOM does not match driver.ErrOutOfMemory")
	}
	launch := &Error{Op: "cuLaunchKernel", Kernel: "mslk_x", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Desc: "invalid argument"}
	if errors.Is(launch, driver.ErrOutOfMemory) {
		t.Error("invalid value matches ErrOutOfMemory")
	}
	if got := launch.Error(); got != "cuLaunchKernel (kernel mslk_x): CUDA_ERROR_INVALID_VALUE: invalid argument" {
		t.Errorf("message %q", got)
	}
	u := &UnavailableError{Reason: "libcuda.so.1 not found", Err: errors.New("dlopen failed")}
	if !errors.Is(u, driver.ErrUnavailable) || u.Error() != "libcuda.so.1 not found: dlopen failed" {
		t.Errorf("unavailable: %v", u)
	}
}

// The backend launches with programmatic stream serialization only kernels that wait for the
// previous grid first: in every generated source, each kernel's first statement is the glue's
// msl_grid_order, which holds the marker the backend looks for.
func TestKernelsBeginWithGridOrder(t *testing.T) {
	for name, src := range map[string]string{"kernels.gen.cu": kernelsSource, "kernels_pieces.gen.cu": piecesSource, "kernels_whole.gen.cu": wholeSource} {
		if !strings.Contains(src, "__global__") {
			t.Logf("%s is still the placeholder", name)
			continue
		}
		if !strings.Contains(src, gridOrderMarker) {
			t.Errorf("%s lacks %q", name, gridOrderMarker)
		}
		n := 0
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, `extern "C" __global__ void mslk_`) {
				continue
			}
			n++
			i := strings.Index(src, line+"\n")
			body := src[i+len(line)+1:]
			if first, _, _ := strings.Cut(body, "\n"); strings.TrimSpace(first) != "msl_grid_order();" {
				t.Errorf("%s: %s… begins with %q", name, line[:min(len(line), 60)], first)
			}
		}
		if n == 0 {
			t.Errorf("%s: no kernels found", name)
		}
	}
}
