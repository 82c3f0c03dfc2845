// Package gpu owns the device runtime: Open chooses a backend (host, cuda, metal), and Device
// adds what every backend shares: named buffers, memory accounting, explicit counted
// host↔device copies, batches of dispatches synchronised once, and validation of every launch
// against the generated kernel table, so errors name the kernel, parameter or buffer at fault.
// It does no math.
package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Kind names a backend as the --device flag does.
type Kind string

const (
	KindAuto  Kind = "auto"
	KindHost  Kind = "host"
	KindCUDA  Kind = "cuda"
	KindMetal Kind = "metal"
)

// Kinds lists the accepted --device values.
var Kinds = []Kind{KindAuto, KindMetal, KindCUDA, KindHost}

// Dim3 and D1 are re-exported from driver for launchers.
type Dim3 = driver.Dim3

// D1 is a one-dimensional size.
func D1(x uint32) Dim3 { return driver.D1(x) }

// ErrOutOfMemory is wrapped by allocation errors when the device is out of memory.
var ErrOutOfMemory = driver.ErrOutOfMemory

// ErrUnavailable is wrapped by Open when the requested backend cannot be used here.
var ErrUnavailable = driver.ErrUnavailable

// Error is a device error naming what failed.
type Error struct {
	Op     string // "alloc", "upload", "download", "copy", "dispatch", "sync", "open"
	Kernel string // kernel name, when a dispatch failed
	Buffer string // buffer name, when a buffer was involved
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("gpu: ")
	b.WriteString(e.Op)
	if e.Kernel != "" {
		b.WriteString(" kernel " + e.Kernel)
	}
	if e.Buffer != "" {
		b.WriteString(" buffer " + strconvQuote(e.Buffer))
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// Stats counts the work a device has done since it was opened (or since ResetStats).
type Stats struct {
	Dispatches      int            `json:"dispatches"`
	Syncs           int            `json:"syncs"`
	Uploads         int            `json:"uploads"`
	BytesToDevice   int64          `json:"bytes_to_device"`
	Downloads       int            `json:"downloads"`
	BytesFromDevice int64          `json:"bytes_from_device"`
	Copies          int            `json:"copies"`
	BytesCopied     int64          `json:"bytes_copied"`
	MemoryInUse     int64          `json:"memory_in_use"`
	MemoryPeak      int64          `json:"memory_peak"`
	PerKernel       map[string]int `json:"per_kernel"`
	// SyncWait is the time the host spent blocked in syncs (Batch.Wait, downloads that waited for
	// work): the device was busy and the host had nothing else to do.
	SyncWait time.Duration `json:"sync_wait_ns"`
	// HostGap is the time from the end of each sync to the next kernel or copy encoded: the
	// device's queue was empty and waited on the host (round trips: reading results, the
	// transcript, encoding the next launches). Uploads do not end a gap (no kernel runs). Stats
	// closes an open gap at the time of the call, so that differences of two Stats split a gap
	// between the intervals it spans.
	HostGap time.Duration `json:"host_gap_ns"`
}

// Device is an open device. Its methods may be called from several goroutines; work is
// serialised.
type Device struct {
	kind     Kind
	be       driver.Backend
	limits   driver.Limits
	fallback string
	// per kernel of the table (read-only after newDevice), and what every kernel allows
	kernelLimits map[string]driver.KernelLimits
	commonLimits driver.KernelLimits

	mu    sync.Mutex
	stats Stats
	live  map[*Buffer]struct{}
	// pending is set by an encoded dispatch or copy and cleared by a sync: a download with work
	// pending waits for it, and counts as a sync.
	pending bool
	// idleSince is when the last sync ended while no work has been encoded since (zero: work is
	// queued, or no sync yet): the start of an open HostGap.
	idleSince time.Time
	// modules are the modules built from templates (BuildModules), by ID.
	modules map[string]*Module
}

// NewDevice makes a Device of an open backend (Open does this for the built-in backends; tests
// use it to wrap one). It asks the backend for the limits of every kernel of the table
// (driver.KernelLimiter), which makes a backend that compiles kernels lazily compile them now;
// on error the backend is closed.
func NewDevice(kind Kind, be driver.Backend) (*Device, error) {
	return newDevice(kind, be, "")
}

func newDevice(kind Kind, be driver.Backend, fallback string) (*Device, error) {
	d := &Device{
		kind: kind, be: be, limits: be.Limits(), fallback: fallback,
		kernelLimits: make(map[string]driver.KernelLimits, len(driver.Kernels)),
		stats:        Stats{PerKernel: map[string]int{}},
		live:         map[*Buffer]struct{}{},
	}
	dev := driver.KernelLimits{MaxThreadsPerGroup: d.limits.MaxThreadsPerGroup, SIMDWidth: d.limits.SIMDWidth}
	d.commonLimits = dev
	kl, _ := be.(driver.KernelLimiter)
	for i := range driver.Kernels {
		k := &driver.Kernels[i]
		if k.Module != "" {
			continue // a module template's kernel: its limits are those of each built module
		}
		l := dev
		if kl != nil {
			var err error
			if l, err = kl.KernelLimits(k); err != nil {
				be.Close()
				return nil, &Error{Op: "open", Kernel: k.Name, Err: err}
			}
			if l.MaxThreadsPerGroup <= 0 || (dev.MaxThreadsPerGroup > 0 && l.MaxThreadsPerGroup > dev.MaxThreadsPerGroup) {
				l.MaxThreadsPerGroup = dev.MaxThreadsPerGroup
			}
			if l.SIMDWidth <= 0 {
				l.SIMDWidth = dev.SIMDWidth
			}
		}
		d.kernelLimits[k.Name] = l
		c := &d.commonLimits
		if l.MaxThreadsPerGroup > 0 && (c.MaxThreadsPerGroup <= 0 || l.MaxThreadsPerGroup < c.MaxThreadsPerGroup) {
			c.MaxThreadsPerGroup = l.MaxThreadsPerGroup
		}
		c.StaticThreadgroupMemory = max(c.StaticThreadgroupMemory, l.StaticThreadgroupMemory)
	}
	return d, nil
}

// Kind is the backend in use (never KindAuto).
func (d *Device) Kind() Kind { return d.kind }

// Name describes the device.
func (d *Device) Name() string { return d.be.Name() }

// Limits are the device's limits.
func (d *Device) Limits() driver.Limits { return d.limits }

// AvailableMemory is the device memory an allocation may still take: the device's memory
// (Limits().MemoryBytes, capped by Options.MemoryLimit) less what this Device has allocated, and
// at most what the driver reports free now where it can (CUDA: other processes' allocations
// deducted). known is false when the device does not say how much memory it has.
func (d *Device) AvailableMemory() (avail uint64, known bool) {
	d.mu.Lock()
	total, inUse := d.limits.MemoryBytes, uint64(d.stats.MemoryInUse)
	d.mu.Unlock()
	if total == 0 {
		return 0, false
	}
	if inUse < total {
		avail = total - inUse
	}
	if r, ok := d.be.(driver.FreeMemoryReporter); ok {
		if free, err := r.FreeMemory(); err == nil && free < avail {
			avail = free
		}
	}
	return avail, true
}

// DriverUsedMemory is the device memory the driver says is in use now, by every process
// (driver.UsedMemoryReporter; known false where it does not say).
func (d *Device) DriverUsedMemory() (used uint64, known bool) {
	r, ok := d.be.(driver.UsedMemoryReporter)
	if !ok {
		return 0, false
	}
	used, err := r.UsedMemory()
	return used, err == nil
}

// DriverPoolPeak is the driver's count of the device memory pool's high-water marks since the
// last ResetDriverPoolPeak (or the device's opening): used, the bytes handed out to allocations
// at once; reserved, the bytes the pool held (driver.PoolPeakReporter; known false where the
// device does not say: the host device, Metal, CUDA without pools).
func (d *Device) DriverPoolPeak() (used, reserved uint64, known bool) {
	r, ok := d.be.(driver.PoolPeakReporter)
	if !ok {
		return 0, 0, false
	}
	used, reserved, err := r.PoolPeak()
	return used, reserved, err == nil
}

// ResetDriverPoolPeak starts the driver's high-water marks of DriverPoolPeak afresh from the
// pool's current use (nothing where the device does not keep them).
func (d *Device) ResetDriverPoolPeak() {
	if r, ok := d.be.(driver.PoolPeakReporter); ok {
		_ = r.ResetPoolPeak()
	}
}

// KernelLimits are the limits of kernel name as compiled for this device (its Metal pipeline or
// CUDA function): launchers clamp their group sizes to MaxThreadsPerGroup. For "" (or a name not
// in the kernel table) they are the limits every kernel satisfies: the smallest
// MaxThreadsPerGroup of all, the largest static threadgroup memory.
func (d *Device) KernelLimits(name string) driver.KernelLimits {
	if l, ok := d.kernelLimits[name]; ok {
		return l
	}
	return d.commonLimits
}

// FallbackReason says why --device auto did not choose a GPU ("" when it did, or when a kind
// was named explicitly).
func (d *Device) FallbackReason() string { return d.fallback }

// Stats returns a copy of the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.totalsLocked()
	s.PerKernel = make(map[string]int, len(d.stats.PerKernel))
	for k, v := range d.stats.PerKernel {
		s.PerKernel[k] = v
	}
	return s
}

// Totals returns a copy of the counters without PerKernel (nil), so without copying that map: a
// proof reads the counters at every stage boundary.
func (d *Device) Totals() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.totalsLocked()
}

// totalsLocked is Totals with d.mu held: the host gap brought up to now.
func (d *Device) totalsLocked() Stats {
	if !d.idleSince.IsZero() {
		now := time.Now()
		d.stats.HostGap += now.Sub(d.idleSince)
		d.idleSince = now
	}
	s := d.stats
	s.PerKernel = nil
	return s
}

// ResetStats zeroes the counters except memory in use (the peak restarts from it).
func (d *Device) ResetStats() {
	d.mu.Lock()
	defer d.mu.Unlock()
	inUse := d.stats.MemoryInUse
	d.stats = Stats{PerKernel: map[string]int{}, MemoryInUse: inUse, MemoryPeak: inUse}
	if !d.idleSince.IsZero() {
		d.idleSince = time.Now()
	}
}

// ResetPeak restarts the peak memory counter from the memory in use now (per-stage peaks).
func (d *Device) ResetPeak() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.MemoryPeak = d.stats.MemoryInUse
}

// LiveBuffers lists the names and sizes of buffers not yet freed, largest first (for memory
// reports and leak checks).
func (d *Device) LiveBuffers() []BufferInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]BufferInfo, 0, len(d.live))
	for b := range d.live {
		out = append(out, BufferInfo{Name: b.name, Size: b.size})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Size != out[j].Size {
			return out[i].Size > out[j].Size
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// BufferInfo is one entry of LiveBuffers.
type BufferInfo struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// Close frees every live buffer and closes the backend.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.live {
		d.be.Free(b.b)
		b.b = nil
	}
	d.live = map[*Buffer]struct{}{}
	d.stats.MemoryInUse = 0
	return d.be.Close()
}

// Buffer is a named device allocation.
type Buffer struct {
	dev  *Device
	name string
	size int
	b    driver.Buffer // nil once freed
}

// Name is the buffer's name (used in errors and memory reports).
func (b *Buffer) Name() string { return b.name }

// Size is the buffer's length in bytes.
func (b *Buffer) Size() int { return b.size }

// Alloc returns a zeroed buffer of size bytes called name.
func (d *Device) Alloc(name string, size int) (*Buffer, error) {
	return d.alloc(name, size, false)
}

// AllocUninit is Alloc without the zeroing where the backend can skip it
// (driver.UninitAllocator): for a buffer the kernels write in full before they read it. Its
// contents are unspecified (stale values of earlier buffers).
func (d *Device) AllocUninit(name string, size int) (*Buffer, error) {
	return d.alloc(name, size, true)
}

func (d *Device) alloc(name string, size int, uninit bool) (*Buffer, error) {
	if size <= 0 {
		return nil, &Error{Op: "alloc", Buffer: name, Err: fmt.Errorf("size %d must be positive", size)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.limits.MemoryBytes > 0 && uint64(d.stats.MemoryInUse)+uint64(size) > d.limits.MemoryBytes {
		return nil, &Error{Op: "alloc", Buffer: name, Err: fmt.Errorf("%w: %d bytes requested, %d in use of %d",
			ErrOutOfMemory, size, d.stats.MemoryInUse, d.limits.MemoryBytes)}
	}
	var raw driver.Buffer
	var err error
	if ua, ok := d.be.(driver.UninitAllocator); ok && uninit {
		raw, err = ua.AllocUninit(size)
	} else {
		raw, err = d.be.Alloc(size)
	}
	if err != nil {
		return nil, &Error{Op: "alloc", Buffer: name, Err: fmt.Errorf("%d bytes: %w", size, err)}
	}
	b := &Buffer{dev: d, name: name, size: size, b: raw}
	d.live[b] = struct{}{}
	d.stats.MemoryInUse += int64(size)
	d.stats.MemoryPeak = max(d.stats.MemoryPeak, d.stats.MemoryInUse)
	return b, nil
}

// Free releases b; freeing twice is harmless.
func (b *Buffer) Free() {
	d := b.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.b == nil {
		return
	}
	d.be.Free(b.b)
	b.b = nil
	delete(d.live, b)
	d.stats.MemoryInUse -= int64(b.size)
}

func (d *Device) checkRange(op string, b *Buffer, offset, n int) error {
	switch {
	case b == nil:
		return &Error{Op: op, Err: errors.New("nil buffer")}
	case b.dev != d:
		return &Error{Op: op, Buffer: b.name, Err: errors.New("buffer belongs to another device")}
	case b.b == nil:
		return &Error{Op: op, Buffer: b.name, Err: errors.New("buffer was freed")}
	}
	if err := driver.CheckRange(offset, n, b.size); err != nil {
		return &Error{Op: op, Buffer: b.name, Err: err}
	}
	return nil
}

// Upload copies src into dst at offset (host → device; counted).
func (d *Device) Upload(dst *Buffer, offset int, src []byte) error {
	if err := d.checkRange("upload", dst, offset, len(src)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.be.Upload(dst.b, offset, src); err != nil {
		return &Error{Op: "upload", Buffer: dst.name, Err: err}
	}
	d.stats.Uploads++
	d.stats.BytesToDevice += int64(len(src))
	return nil
}

// UploadQueued is Upload in queue order, without waiting for the work encoded before it: for a
// range no work encoded before it reads or writes (a fresh buffer). Work encoded after it sees
// the bytes; src may be reused at once. A backend without such an upload (driver.QueuedUploader)
// waits as Upload does.
func (d *Device) UploadQueued(dst *Buffer, offset int, src []byte) error {
	qu, ok := d.be.(driver.QueuedUploader)
	if !ok {
		return d.Upload(dst, offset, src)
	}
	if err := d.checkRange("upload", dst, offset, len(src)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := qu.UploadQueued(dst.b, offset, src); err != nil {
		return &Error{Op: "upload", Buffer: dst.name, Err: err}
	}
	d.encoded()
	d.stats.Uploads++
	d.stats.BytesToDevice += int64(len(src))
	return nil
}

// Download copies len(dst) bytes of src from offset (device → host; counted). It waits for
// all work encoded before it; when there was such work, that wait counts as a sync.
func (d *Device) Download(dst []byte, src *Buffer, offset int) error {
	if err := d.checkRange("download", src, offset, len(dst)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	if err := d.be.Download(dst, src.b, offset); err != nil {
		return &Error{Op: "download", Buffer: src.name, Err: err}
	}
	if d.pending {
		d.synced(start)
	}
	d.stats.Downloads++
	d.stats.BytesFromDevice += int64(len(dst))
	return nil
}

// DownloadSettled is Download for bytes that work before the last sync wrote: it does not wait
// for the work encoded since (which may run while it copies) and is not a sync. The caller
// guarantees that no work encoded since the last sync writes the range; otherwise the bytes read
// are unspecified. A backend without such a copy (driver.SettledDownloader) waits as Download
// does (and the wait counts as a sync).
func (d *Device) DownloadSettled(dst []byte, src *Buffer, offset int) error {
	sd, ok := d.be.(driver.SettledDownloader)
	if !ok {
		return d.Download(dst, src, offset)
	}
	if err := d.checkRange("download", src, offset, len(dst)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := sd.DownloadSettled(dst, src.b, offset); err != nil {
		return &Error{Op: "download", Buffer: src.name, Err: err}
	}
	d.stats.Downloads++
	d.stats.BytesFromDevice += int64(len(dst))
	return nil
}

// synced records a sync that began at start and ends now (d.mu held).
func (d *Device) synced(start time.Time) {
	now := time.Now()
	d.stats.Syncs++
	d.stats.SyncWait += now.Sub(start)
	d.pending = false
	d.idleSince = now
}

// encoded records a kernel or copy encoded now (d.mu held): it ends an open host gap.
func (d *Device) encoded() {
	d.pending = true
	if !d.idleSince.IsZero() {
		d.stats.HostGap += time.Since(d.idleSince)
		d.idleSince = time.Time{}
	}
}

// validateDispatch checks a launch against the kernel table and the device limits.
func (d *Device) validateDispatch(k *driver.KernelInfo, groups, tpg Dim3, args []Arg, tgLen []uint32) ([]driver.Arg, error) {
	fail := func(format string, a ...any) error {
		return &Error{Op: "dispatch", Kernel: k.Name, Err: fmt.Errorf(format, a...)}
	}
	if groups.Count() == 0 || tpg.Count() == 0 {
		return nil, fail("empty launch: %d groups of %d threads", groups.Count(), tpg.Count())
	}
	if lim := d.limits.MaxThreadsPerGroup; lim > 0 && tpg.Count() > uint64(lim) {
		return nil, fail("%d threads per threadgroup exceeds the device limit %d", tpg.Count(), lim)
	}
	kl := d.KernelLimits(k.Name)
	if m := d.modules[k.Built]; k.Built != "" && m != nil {
		kl = m.KernelLimits(k.Name)
	}
	if lim := kl.MaxThreadsPerGroup; lim > 0 && tpg.Count() > uint64(lim) {
		return nil, fail("%d threads per threadgroup exceeds this kernel's limit %d on this device (its compiled pipeline's maximum)", tpg.Count(), lim)
	}
	if len(args) != k.NBuf {
		return nil, fail("%d buffer arguments given, kernel has %d slots (%s)", len(args), k.NBuf, k.Pos)
	}
	if len(tgLen) != k.NTG {
		return nil, fail("%d threadgroup lengths given, kernel has %d", len(tgLen), k.NTG)
	}
	tgTotal := uint64(kl.StaticThreadgroupMemory)
	for _, l := range tgLen {
		tgTotal += uint64(l+15) &^ 15
	}
	if lim := d.limits.MaxThreadgroupMemory; lim > 0 && tgTotal > uint64(lim) {
		return nil, fail("%d bytes of threadgroup memory (%d static) exceeds the device limit %d", tgTotal, kl.StaticThreadgroupMemory, lim)
	}
	out := make([]driver.Arg, len(args))
	for _, p := range k.Params {
		if p.Kind != driver.ParamBuffer && p.Kind != driver.ParamValue {
			continue
		}
		a := args[p.Index]
		switch p.Kind {
		case driver.ParamBuffer:
			if a.buf == nil {
				return nil, fail("argument %d (%s %s) needs a buffer", p.Index, p.Type, p.Name)
			}
			if err := d.checkRange("dispatch", a.buf, 0, 0); err != nil {
				return nil, fail("argument %d (%s): %v", p.Index, p.Name, err)
			}
			out[p.Index] = driver.Arg{Buf: a.buf.b}
		case driver.ParamValue:
			if a.buf != nil || a.bytes == nil {
				return nil, fail("argument %d (%s %s) takes a value, not a buffer", p.Index, p.Type, p.Name)
			}
			if len(a.bytes) != p.ValueSize {
				return nil, fail("argument %d (%s %s) takes %d bytes, got %d", p.Index, p.Type, p.Name, p.ValueSize, len(a.bytes))
			}
			out[p.Index] = driver.Arg{Bytes: slices.Clone(a.bytes)}
		}
	}
	return out, nil
}
