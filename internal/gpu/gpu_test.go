package gpu_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

func openHost(t *testing.T) *gpu.Device {
	t.Helper()
	k, err := gpu.ParseKind("host")
	if err != nil {
		t.Fatal(err)
	}
	d, err := gpu.Open(k, gpu.Options{HostThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenHost(t *testing.T) {
	d := openHost(t)
	if d.Kind() != gpu.KindHost || d.FallbackReason() != "" || !strings.HasPrefix(d.Name(), "host (") {
		t.Fatalf("kind %s, fallback %q, name %q", d.Kind(), d.FallbackReason(), d.Name())
	}
	if l := d.Limits(); l.MaxThreadsPerGroup != 1024 || l.MaxThreadgroupMemory != 32768 || l.SIMDWidth != 1 || l.ComputeUnits != 2 {
		t.Fatalf("limits %+v", l)
	}
}

func TestParseKind(t *testing.T) {
	for _, k := range gpu.Kinds {
		if got, err := gpu.ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, s := range []string{"", "gpu", "Host", "opencl"} {
		_, err := gpu.ParseKind(s)
		if err == nil || !strings.Contains(err.Error(), "auto, metal, cuda, host") {
			t.Errorf("ParseKind(%q): %v", s, err)
		}
	}
}

func TestOpenAutoFallsBack(t *testing.T) {
	d, err := gpu.Open(gpu.KindAuto, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Kind() != gpu.KindHost {
		t.Skipf("this machine has a GPU: auto chose %s (%s)", d.Kind(), d.Name())
	}
	if d.FallbackReason() == "" {
		t.Fatal("auto fell back to the host device without a reason")
	}
	t.Log("reason:", d.FallbackReason())
}

func TestOpenUnavailable(t *testing.T) {
	// Metal is never usable on this (non-darwin or GPU-less) test machine; CUDA may be.
	d, err := gpu.Open(gpu.KindMetal, gpu.Options{})
	if err == nil {
		d.Close()
		t.Skip("metal opened")
	}
	var ge *gpu.Error
	if !errors.As(err, &ge) || ge.Op != "open" {
		t.Fatalf("error %v (%T), want a *gpu.Error for open", err, err)
	}
}

func TestStatsAndBuffers(t *testing.T) {
	d := openHost(t)
	a, err := gpu.UploadArray(d, "a", []uint32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.UploadArray(d, "b", []uint32{10, 20, 30, 40})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gpu.AllocArray[uint32](d, "out", 4)
	if err != nil {
		t.Fatal(err)
	}
	big, err := d.Alloc("big", 1000)
	if err != nil {
		t.Fatal(err)
	}
	live := d.LiveBuffers()
	if len(live) != 4 || live[0] != (gpu.BufferInfo{Name: "big", Size: 1000}) || live[1].Name != "a" || live[3].Name != "out" {
		t.Fatalf("live buffers %+v", live)
	}
	args := []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(b.Buffer), gpu.Buf(out.Buffer), gpu.U32(4)}
	bt := d.Batch().
		Dispatch("fo_add", gpu.D1(1), gpu.D1(4), args).
		Dispatch("fo_add", gpu.D1(2), gpu.D1(2), args).
		Copy(big, 8, out.Buffer, 0, 16)
	if err := bt.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 11 || got[3] != 44 {
		t.Fatalf("fo_add: %v", got)
	}
	s := d.Stats()
	if s.SyncWait < 0 || s.HostGap < 0 {
		t.Fatalf("sync wait %v, host gap %v", s.SyncWait, s.HostGap)
	}
	s.SyncWait, s.HostGap = 0, 0 // times: TestHostGap
	want := gpu.Stats{Dispatches: 2, Syncs: 1, Uploads: 2, BytesToDevice: 32, Downloads: 1, BytesFromDevice: 16,
		Copies: 1, BytesCopied: 16, MemoryInUse: 1048, MemoryPeak: 1048}
	want.PerKernel = map[string]int{"fo_add": 2}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stats\n got %+v\nwant %+v", s, want)
	}
	tot := d.Totals()
	tot.SyncWait, tot.HostGap = 0, 0
	want.PerKernel = nil
	if !reflect.DeepEqual(tot, want) {
		t.Fatalf("totals\n got %+v\nwant %+v", tot, want)
	}

	big.Free()
	big.Free() // harmless
	if s := d.Stats(); s.MemoryInUse != 48 || s.MemoryPeak != 1048 {
		t.Fatalf("after free: in use %d, peak %d", s.MemoryInUse, s.MemoryPeak)
	}
	if len(d.LiveBuffers()) != 3 {
		t.Fatalf("live after free: %+v", d.LiveBuffers())
	}
	var ge *gpu.Error
	if err := d.Upload(big, 0, []byte{1}); !errors.As(err, &ge) || ge.Buffer != "big" {
		t.Fatalf("upload to freed buffer: %v", err)
	}
	if err := d.Batch().Copy(out.Buffer, 8, a.Buffer, 0, 16).Wait(); !errors.As(err, &ge) || ge.Buffer != "out" {
		t.Fatalf("copy out of range: %v", err)
	}
	d.ResetStats()
	if s := d.Stats(); s.Dispatches != 0 || s.MemoryInUse != 48 || s.MemoryPeak != 48 {
		t.Fatalf("after reset: %+v", s)
	}
	if _, err := d.Alloc("zero", 0); !errors.As(err, &ge) || ge.Op != "alloc" {
		t.Fatalf("alloc 0: %v", err)
	}
	if _, err := d.Alloc("huge", 1<<62); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("huge alloc: %v, want ErrOutOfMemory", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.LiveBuffers()) != 0 || d.Stats().MemoryInUse != 0 {
		t.Fatal("Close left buffers")
	}
	a.Free() // after Close: harmless
}

// TestHostGap: the gap runs from the end of a sync to the next kernel or copy (uploads do not end
// it), Stats closes it at the time of the call, and work already queued opens none.
func TestHostGap(t *testing.T) {
	d := openHost(t)
	a, err := gpu.UploadArray(d, "a", []uint32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gpu.AllocArray[uint32](d, "out", 4)
	if err != nil {
		t.Fatal(err)
	}
	args := []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(a.Buffer), gpu.Buf(out.Buffer), gpu.U32(4)}
	add := func() {
		t.Helper()
		if err := d.Batch().Dispatch("fo_add", gpu.D1(1), gpu.D1(4), args).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const pause = 20 * time.Millisecond
	add()
	time.Sleep(pause) // work queued, no sync yet: no gap
	if g := d.Stats().HostGap; g != 0 {
		t.Fatalf("host gap %v before any sync", g)
	}
	if _, err := out.ReadAll(); err != nil { // a download that waits: a sync
		t.Fatal(err)
	}
	time.Sleep(pause)
	g1 := d.Stats().HostGap
	if g1 < pause {
		t.Fatalf("host gap %v after a %v pause following a sync", g1, pause)
	}
	if err := d.Upload(a.Buffer, 0, make([]byte, 16)); err != nil { // does not end the gap
		t.Fatal(err)
	}
	time.Sleep(pause)
	add() // ends it
	s := d.Stats()
	if s.HostGap < g1+pause {
		t.Fatalf("host gap %v, want at least %v", s.HostGap, g1+pause)
	}
	time.Sleep(pause) // queued work again: no gap
	if g := d.Stats().HostGap; g != s.HostGap {
		t.Fatalf("host gap grew from %v to %v with work queued", s.HostGap, g)
	}
	if err := d.Batch().Wait(); err != nil {
		t.Fatal(err)
	}
	if s := d.Stats(); s.Syncs != 2 || s.SyncWait < 0 {
		t.Fatalf("syncs %d, sync wait %v", s.Syncs, s.SyncWait)
	}
	d.ResetStats()
	if g := d.Stats().HostGap; g >= pause {
		t.Fatalf("host gap %v right after ResetStats", g)
	}
}

// limiter is the host backend with per-kernel limits: max threads per kernel (1024 for the
// others), or err for the kernel called failing.
type limiter struct {
	*host.Backend
	max     map[string]int
	failing string
	closed  bool
}

func (l *limiter) KernelLimits(k *driver.KernelInfo) (driver.KernelLimits, error) {
	if k.Name == l.failing {
		return driver.KernelLimits{}, errors.New("not in the compiled library")
	}
	m, ok := l.max[k.Name]
	if !ok {
		m = 1024
	}
	return driver.KernelLimits{MaxThreadsPerGroup: m, SIMDWidth: 1, StaticThreadgroupMemory: 16}, nil
}

func (l *limiter) Close() error { l.closed = true; return l.Backend.Close() }

func TestKernelLimits(t *testing.T) {
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	d, err := gpu.NewDevice(gpu.KindHost, &limiter{Backend: hb, max: map[string]int{"fo_add": 64, "fo_mul": 4096}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for name, want := range map[string]int{"fo_add": 64, "fo_mul": 1024 /* capped at the device's */, "fo_sub": 1024, "": 64, "no_such": 64} {
		if l := d.KernelLimits(name); l.MaxThreadsPerGroup != want || l.StaticThreadgroupMemory != 16 {
			t.Errorf("KernelLimits(%q) = %+v, want %d threads per group and 16 static bytes", name, l, want)
		}
	}
	// Every kernel of the host device itself allows the device limit.
	hd := openHost(t)
	for _, k := range driver.Kernels {
		if l := hd.KernelLimits(k.Name); l.MaxThreadsPerGroup != 1024 || l.SIMDWidth != 1 {
			t.Fatalf("host KernelLimits(%s) = %+v", k.Name, l)
		}
	}
}

func TestNewDeviceFailsOnMissingKernel(t *testing.T) {
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	l := &limiter{Backend: hb, failing: "ntt_pass"}
	d, err := gpu.NewDevice(gpu.KindHost, l)
	var ge *gpu.Error
	if d != nil || !errors.As(err, &ge) || ge.Op != "open" || ge.Kernel != "ntt_pass" || !l.closed {
		t.Fatalf("NewDevice = %v, %v (closed %v); want an open error naming ntt_pass and the backend closed", d, err, l.closed)
	}
}

// freeReporter is a host backend that reports free device memory as a driver would.
type freeReporter struct {
	*host.Backend
	free uint64
}

func (f *freeReporter) FreeMemory() (uint64, error) { return f.free, nil }

func TestMemoryLimitAndAvailable(t *testing.T) {
	phys := openHost(t).Limits().MemoryBytes
	if phys == 0 {
		t.Fatal("the host device reports no memory")
	}
	d, err := gpu.Open(gpu.KindHost, gpu.Options{HostThreads: 2, MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.Limits().MemoryBytes; got != 1<<20 {
		t.Fatalf("MemoryBytes %d with a 1 MiB limit", got)
	}
	if avail, known := d.AvailableMemory(); !known || avail != 1<<20 {
		t.Fatalf("AvailableMemory = %d, %v; want 1 MiB", avail, known)
	}
	b, err := d.Alloc("half", 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	if avail, _ := d.AvailableMemory(); avail != 512<<10 {
		t.Errorf("AvailableMemory %d after 512 KiB allocated of 1 MiB", avail)
	}
	if _, err := d.Alloc("too much", 600<<10); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Errorf("Alloc past the limit: %v, want ErrOutOfMemory", err)
	}
	b.Free()

	// A limit above the device's memory changes nothing; auto applies the limit too.
	d2, err := gpu.Open(gpu.KindHost, gpu.Options{HostThreads: 2, MemoryLimit: phys + 1<<30})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if d2.Limits().MemoryBytes != phys {
		t.Errorf("MemoryBytes %d with a limit above the physical %d", d2.Limits().MemoryBytes, phys)
	}
	d3, err := gpu.Open(gpu.KindAuto, gpu.Options{HostThreads: 2, MemoryLimit: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	if d3.Kind() == gpu.KindHost && d3.Limits().MemoryBytes != 3<<20 {
		t.Errorf("auto: MemoryBytes %d with a 3 MiB limit", d3.Limits().MemoryBytes)
	}

	// What the driver reports free bounds the available memory.
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	d4, err := gpu.NewDevice(gpu.KindHost, &freeReporter{Backend: hb, free: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer d4.Close()
	if avail, known := d4.AvailableMemory(); !known || avail != 100<<10 {
		t.Errorf("AvailableMemory = %d, %v with 100 KiB free; want 100 KiB", avail, known)
	}
}

// poolReporter is a host backend whose "driver" keeps a memory pool's high-water marks: every
// allocation counts, and a reset starts them from the bytes held now.
type poolReporter struct {
	*host.Backend
	now, peak, resets int
}

func (p *poolReporter) Alloc(size int) (driver.Buffer, error) {
	p.now += size
	p.peak = max(p.peak, p.now)
	return p.Backend.Alloc(size)
}

func (p *poolReporter) PoolPeak() (used, reserved uint64, err error) {
	return uint64(p.peak), uint64(p.peak + 1<<20), nil
}

func (p *poolReporter) ResetPoolPeak() error {
	p.peak = p.now
	p.resets++
	return nil
}

// TestDriverPoolPeak: Device reports a backend's pool high-water marks and resets them; a device
// whose backend keeps none (the host device) says it does not know.
func TestDriverPoolPeak(t *testing.T) {
	if _, _, known := openHost(t).DriverPoolPeak(); known {
		t.Error("the host device reports a driver memory pool")
	}
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	pr := &poolReporter{Backend: hb}
	d, err := gpu.NewDevice(gpu.KindHost, pr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := d.Alloc("a", 3<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	d.ResetDriverPoolPeak()
	b, err := d.Alloc("b", 5<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	used, reserved, known := d.DriverPoolPeak()
	if !known || pr.resets != 1 || used != uint64(pr.peak) || reserved != used+1<<20 {
		t.Fatalf("DriverPoolPeak = %d, %d, %v after %d resets; want %d, %d, true after 1", used, reserved, known, pr.resets, pr.peak, pr.peak+1<<20)
	}
	if used < 8<<10 {
		t.Errorf("pool peak %d below the 8 KiB held", used)
	}
}

// TestCountAndOrdinal: the host device is one device; an ordinal other than 0 is CUDA's only; two
// Opens give independent Devices (own accounting) that work at the same time.
func TestCountAndOrdinal(t *testing.T) {
	if n, err := gpu.Count(gpu.KindHost); err != nil || n != 1 {
		t.Errorf("Count(host) = %d, %v", n, err)
	}
	if _, err := gpu.Open(gpu.KindHost, gpu.Options{Ordinal: 1}); err == nil || !strings.Contains(err.Error(), "only CUDA has several devices") {
		t.Errorf("host device 1: %v", err)
	}
	if n, err := gpu.Count(gpu.KindCUDA); err != nil {
		if !errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("Count(cuda): %v does not match ErrUnavailable", err)
		}
	} else if _, err := gpu.Open(gpu.KindCUDA, gpu.Options{Ordinal: n}); err == nil || !errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("cuda device %d of %d: %v", n, n, err)
	}
	a, b := openHost(t), openHost(t)
	done := make(chan error, 2)
	for i, d := range []*gpu.Device{a, b} {
		go func() {
			done <- func() error {
				for round := range 50 {
					buf, err := d.Alloc("x", 4096)
					if err != nil {
						return err
					}
					src := make([]byte, 4096)
					for j := range src {
						src[j] = byte(i + round + j)
					}
					if err := d.Upload(buf, 0, src); err != nil {
						return err
					}
					got := make([]byte, 4096)
					if err := d.Download(got, buf, 0); err != nil {
						return err
					}
					if string(got) != string(src) {
						return errors.New("download differs from upload")
					}
					buf.Free()
				}
				return nil
			}()
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if a.Stats().Uploads != 50 || b.Stats().Uploads != 50 {
		t.Errorf("uploads %d and %d, want 50 each (separate accounting)", a.Stats().Uploads, b.Stats().Uploads)
	}
}

// plainBackend hides every optional interface of a backend (driver.SettledDownloader among them).
type plainBackend struct{ driver.Backend }

// newDoubled opens a device on be (closed when the test ends) with a = [1 2 3 4] and out = a + a
// encoded (fo_add), waited for where wait is set.
func newDoubled(t *testing.T, be driver.Backend, wait bool) (*gpu.Device, *gpu.Array[uint32], *gpu.Array[uint32]) {
	t.Helper()
	d, err := gpu.NewDevice(gpu.KindHost, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a, err := gpu.UploadArray(d, "a", []uint32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gpu.AllocArray[uint32](d, "out", 4)
	if err != nil {
		t.Fatal(err)
	}
	b := d.Batch().Dispatch("fo_add", gpu.D1(1), gpu.D1(4), []gpu.Arg{gpu.Buf(a.Buffer), gpu.Buf(a.Buffer), gpu.Buf(out.Buffer), gpu.U32(4)})
	if wait {
		err = b.Wait()
	} else {
		err = b.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	return d, a, out
}

// withAndWithout opens two host backends: one as it is, one behind plainBackend.
func withAndWithout(t *testing.T) (driver.Backend, driver.Backend) {
	t.Helper()
	hb, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	return hb, plainBackend{plain}
}

// TestDownloadSettled: a settled download reads what work before the last sync wrote, is not a
// sync and leaves the work encoded since pending (the next plain download waits for it); a
// backend without settled downloads waits as Download does.
func TestDownloadSettled(t *testing.T) {
	hb, plain := withAndWithout(t)
	for _, tc := range []struct {
		name  string
		be    driver.Backend
		syncs int // counted by the settled download
	}{{"settled", hb, 0}, {"plain backend", plain, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			d, a, out := newDoubled(t, tc.be, true)
			later, err := gpu.AllocArray[uint32](d, "later", 4)
			if err != nil {
				t.Fatal(err)
			}
			// Work encoded after the sync that writes another buffer.
			if err := d.Batch().Dispatch("fo_add", gpu.D1(1), gpu.D1(4), []gpu.Arg{gpu.Buf(out.Buffer), gpu.Buf(a.Buffer), gpu.Buf(later.Buffer), gpu.U32(4)}).Err(); err != nil {
				t.Fatal(err)
			}
			before := d.Stats()
			got := make([]uint32, 3)
			if err := out.ReadSettled(got, 1); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, []uint32{4, 6, 8}) {
				t.Fatalf("settled read %v, want [4 6 8]", got)
			}
			s := d.Stats()
			if s.Syncs-before.Syncs != tc.syncs || s.Downloads-before.Downloads != 1 || s.BytesFromDevice-before.BytesFromDevice != 12 {
				t.Fatalf("settled read: %d syncs (want %d), %d downloads, %d bytes", s.Syncs-before.Syncs, tc.syncs, s.Downloads-before.Downloads, s.BytesFromDevice-before.BytesFromDevice)
			}
			v, err := later.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, []uint32{3, 6, 9, 12}) {
				t.Fatalf("later %v, want [3 6 9 12]", v)
			}
			if n := d.Stats().Syncs - s.Syncs; n != 1-tc.syncs {
				t.Fatalf("the download after a settled one: %d syncs, want %d", n, 1-tc.syncs)
			}
			var ge *gpu.Error
			if err := out.ReadSettled(make([]uint32, 5), 0); !errors.As(err, &ge) || ge.Op != "download" {
				t.Fatalf("settled read past the end: %v", err)
			}
		})
	}
}

// TestUploadQueued: a queued upload into a fresh buffer is seen by the work after it, counts as
// an upload and not as a sync, and its source may change once it returns; a backend without
// queued uploads waits as Upload does (the same bytes).
func TestUploadQueued(t *testing.T) {
	hb, plain := withAndWithout(t)
	for _, tc := range []struct {
		name string
		be   driver.Backend
	}{{"queued", hb}, {"plain backend", plain}} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, out := newDoubled(t, tc.be, false)
			fresh, err := gpu.AllocArrayUninit[uint32](d, "fresh", 4)
			if err != nil {
				t.Fatal(err)
			}
			before := d.Stats()
			src := []uint32{10, 20, 30, 40}
			if err := fresh.WriteQueued(0, src); err != nil {
				t.Fatal(err)
			}
			clear(src)
			s := d.Stats()
			if s.Uploads-before.Uploads != 1 || s.BytesToDevice-before.BytesToDevice != 16 || s.Syncs != before.Syncs {
				t.Fatalf("queued upload: %d uploads, %d bytes, %d syncs", s.Uploads-before.Uploads, s.BytesToDevice-before.BytesToDevice, s.Syncs-before.Syncs)
			}
			sum, err := gpu.AllocArray[uint32](d, "sum", 4)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Batch().Dispatch("fo_add", gpu.D1(1), gpu.D1(4), []gpu.Arg{gpu.Buf(out.Buffer), gpu.Buf(fresh.Buffer), gpu.Buf(sum.Buffer), gpu.U32(4)}).Err(); err != nil {
				t.Fatal(err)
			}
			v, err := sum.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, []uint32{12, 24, 36, 48}) {
				t.Fatalf("sum %v, want [12 24 36 48]", v)
			}
			var ge *gpu.Error
			if err := fresh.WriteQueued(1, make([]uint32, 4)); !errors.As(err, &ge) || ge.Op != "upload" {
				t.Fatalf("queued upload past the end: %v", err)
			}
		})
	}
}
