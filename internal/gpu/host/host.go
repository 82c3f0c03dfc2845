// Package host is the CPU "host device": the kernels of shaders/*.metal compiled as C++ (the
// generated kernels_host.gen.h, included by the trampolines of kernels_host.gen.cpp and of the
// instruction-set copies kernels_host_{lanes,v3,v4}.gen.cpp, which go build compiles in
// parallel) and run by a small emulator of Metal's dispatchThreadgroups
// (hd_runtime.cpp): threadgroups spread over a thread pool; barrier-free kernels run each group
// as a plain loop, kernels with threadgroup memory or barriers run each work item on a fiber
// that threadgroup_barrier() switches away from (hand-written switch on x86-64 and aarch64,
// ucontext elsewhere). It implements driver.Backend; package gpu registers it as KindHost.
//
// It also implements driver.ModuleBuilder: the kernels of a module template (modules/*.gen.cpp,
// e.g. zc_uni_generated) run from modules built at run time, the template completed with code
// generated for one AIR, compiled by the system's C++ compiler (CXX, else c++, g++, clang++) into
// shared libraries, cached on disk by digest (os.UserCacheDir()/metalprove/host, or
// $METALPROVE_HOST_CACHE) and loaded with dlopen (modules.go). The host device's round 0 runs its interpreter unless a test asks for the
// generated code, so a binary needs no compiler otherwise.
//
// Buffers are C memory (the C++ side keeps their addresses), so Upload, Download and Copy are
// plain memory copies and Dispatch runs to completion before it returns.
package host

/*
// -O3: the lane loops of the kernels are vectorised (prelude.h); -g0: debug information for the
// generated kernels doubled the package's compile time (59 s → 34 s with GCC 12); -Wno-psabi:
// GCC notes about vector arguments of always-inline helpers, which cross no ABI boundary.
// The C++ runtime: libstdc++ on Linux; macOS SDKs ship only libc++ (no -lstdc++ there: "library
// not found"). scripts/check-metal.sh checks the darwin flags. No -Werror in shipped flags.
#cgo CXXFLAGS: -std=c++17 -O3 -g0 -Wno-psabi
#cgo !darwin LDFLAGS: -pthread -lstdc++
#cgo darwin LDFLAGS: -lc++
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE // mremap
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "hd_runtime.h"

// hd_map: a mapping of size fresh zero bytes (a multiple of 2 MiB) starting on a 2 MiB boundary
// (the slack mapped for the alignment is unmapped again), NULL if mmap fails. On Linux the
// mapping is marked for transparent huge pages: where the kernel's policy is "madvise" (the
// default of many distributions) a proof's gigabytes of buffers would otherwise fault in 4 KiB at
// a time and miss the TLB on every strided pass of the NTT and the Merkle hashing.
static void* hd_map(size_t size) {
	const size_t huge = (size_t)2 << 20;
	char* p = (char*)mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
	if (p == (char*)MAP_FAILED) return NULL;
	size_t off = (huge - (size_t)p % huge) % huge;
	if (off > 0) munmap(p, off);
	munmap(p + off + size, huge - off);
	p += off;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	madvise(p, size, MADV_HUGEPAGE);
#endif
	return p;
}
static void hd_unmap(void* p, size_t len) { munmap(p, len); }

// hd_move moves the pages of [src, src+len) (one mapping) to dst, replacing what was mapped
// there (Linux's mremap: the page tables move, the memory is neither copied nor faulted in
// again); 0 on success, -1 where it failed or the OS has no mremap.
static int hd_move(void* src, size_t len, void* dst) {
#if defined(__linux__) && defined(MREMAP_FIXED)
	return mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == dst ? 0 : -1;
#else
	return -1;
#endif
}
static int hd_can_move(void) {
#if defined(__linux__) && defined(MREMAP_FIXED)
	return 1;
#else
	return 0;
#endif
}
static int hd_kcount(void) { return hd_nkernels; }
static const hd_kernel* hd_kentry(int i) { return &hd_kernels[i]; }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Limits of the host device. The threadgroup memory limit is Apple's, deliberately: kernels and
// launchers tested here then fit a Mac.
const (
	MaxThreadsPerGroup   = 1024
	MaxThreadgroupMemory = 32768
	bufferAlign          = 64
)

// Backend is the host device. The thread pool is process-wide: opening a second host backend
// with another thread count resizes it for both. The instruction set is per backend.
type Backend struct {
	threads int
	isa     C.int                   // highest instruction-set level of the kernel copies that run
	ids     map[string]*C.hd_kernel // kernel name -> entry of the C table (the main kernels)
	rec     *recycler

	cacheDir string // of the modules (BuildModules)
	// modMu guards built: modules are built while other goroutines dispatch.
	modMu sync.RWMutex
	built map[string]*moduleLib // by driver.ModuleSource.ID
}

// Options configure OpenOptions.
type Options struct {
	// Threads is the number of worker threads, the caller's included (0: one per CPU).
	Threads int
	// ISA caps the instruction set of the kernels that run: "" for $METALPROVE_HOST_ISA (ISAEnv)
	// when set, else the best that the CPU, the OS and this build support (ISAs()[0]); one of
	// ISAs() to force a lower one: BaselineISA is the copy every CPU of the architecture runs
	// (tests compare the copies' outputs; scripts/host-isa-check.sh runs the tests and times the
	// kernels once per copy through the variable).
	ISA string
	// CacheDir holds the modules built at run time (BuildModules); "" means $METALPROVE_HOST_CACHE
	// (CacheEnv), else os.UserCacheDir()/metalprove/host.
	CacheDir string
}

// BaselineISA names the kernel copy compiled for the architecture's baseline: "x86-64" (SSE2)
// on x86-64, "aarch64" (NEON) on arm64.
var BaselineISA = C.GoString(C.hd_isa_name(C.HD_ISA_BASELINE))

// ISAs lists the instruction sets whose kernel copies this CPU can run, best first, ending with
// BaselineISA: on x86-64 with AVX-512 "x86-64-v4", "x86-64-v3", "x86-64". Kernels written
// without lanes have only the baseline copy (compiled with -O3 for the baseline).
func ISAs() []string {
	var out []string
	for l := C.hd_isa_supported(); l >= C.HD_ISA_BASELINE; l-- {
		out = append(out, C.GoString(C.hd_isa_name(l)))
	}
	return out
}

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.KernelLimiter = (*Backend)(nil)
	_ driver.ModuleBuilder = (*Backend)(nil)
)

// Open starts the host device with threads worker threads (the caller's included; 0: one per
// CPU). It fails if the C++ kernels and the Go kernel table disagree (rerun go generate).
func Open(threads int) (*Backend, error) {
	return OpenOptions(Options{Threads: threads})
}

// ISAEnv names the environment variable that caps the host device's instruction set when
// Options.ISA is empty (gpu.Open passes none unless asked): one of ISAs().
const ISAEnv = "METALPROVE_HOST_ISA"

// OpenOptions is Open with options; an ISA this CPU cannot run is an error.
func OpenOptions(o Options) (*Backend, error) {
	threads := o.Threads
	if threads < 0 {
		return nil, fmt.Errorf("host: %d threads", threads)
	}
	isa := C.hd_isa_supported()
	want, from := o.ISA, "instruction set"
	if want == "" {
		want, from = os.Getenv(ISAEnv), ISAEnv
	}
	if want != "" {
		names := ISAs()
		i := 0
		for i < len(names) && names[i] != want {
			i++
		}
		if i == len(names) {
			return nil, fmt.Errorf("host: %s %q: this CPU and build run %v", from, want, names)
		}
		isa -= C.int(i)
	}
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	ids, err := matchTables()
	if err != nil {
		return nil, err
	}
	if int(C.hd_workers()) != threads {
		C.hd_set_workers(C.int(threads))
	}
	dir := o.CacheDir
	if dir == "" {
		dir = defaultCacheDir()
	}
	return &Backend{threads: threads, isa: isa, ids: ids, rec: newRecycler(), cacheDir: dir, built: map[string]*moduleLib{}}, nil
}

// cKernel is one entry of the generated C table.
type cKernel struct {
	Name        string
	NBuf, NTG   int
	UsesBarrier bool
	ValueSizes  []int // per buffer slot; 0 for pointers
}

func cTable() []cKernel {
	n := int(C.hd_kcount())
	out := make([]cKernel, n)
	for i := range out {
		out[i] = cKernelOf(C.hd_kentry(C.int(i)))
	}
	return out
}

// cKernelOf describes one entry of a C table (the main one or a module's).
func cKernelOf(e *C.hd_kernel) cKernel {
	k := cKernel{Name: C.GoString(e.name), NBuf: int(e.nbuf), NTG: int(e.ntg), UsesBarrier: e.uses_barrier != 0}
	if k.NBuf > 0 && k.NBuf <= 64 {
		for _, v := range unsafe.Slice(e.val_size, k.NBuf) {
			k.ValueSizes = append(k.ValueSizes, int(v))
		}
	}
	return k
}

// sameKernel reports whether compiled kernel c is g as the driver table declares it.
func sameKernel(c cKernel, g *driver.KernelInfo) error {
	vs := make([]int, g.NBuf)
	for _, p := range g.Params {
		if p.Kind == driver.ParamValue {
			vs[p.Index] = p.ValueSize
		}
	}
	if c.Name != g.Name || c.NBuf != g.NBuf || c.NTG != g.NTG || c.UsesBarrier != g.UsesBarrier || fmt.Sprint(c.ValueSizes) != fmt.Sprint(vs) {
		return fmt.Errorf("host: compiled kernel %s does not match the driver table entry %s; rerun go generate", c.Name, g.Name)
	}
	return nil
}

// matchTables checks that the C table and driver.Kernels describe the same kernels, those of
// module templates aside (they are in the modules built from the templates).
func matchTables() (map[string]*C.hd_kernel, error) {
	ct := cTable()
	var main []*driver.KernelInfo
	for i := range driver.Kernels {
		if driver.Kernels[i].Module == "" {
			main = append(main, &driver.Kernels[i])
		}
	}
	if len(ct) != len(main) {
		return nil, fmt.Errorf("host: %d compiled kernels, driver table has %d; rerun go generate", len(ct), len(main))
	}
	ids := make(map[string]*C.hd_kernel, len(ct))
	for i, c := range ct {
		if err := sameKernel(c, main[i]); err != nil {
			return nil, err
		}
		ids[c.Name] = C.hd_kentry(C.int(i))
	}
	return ids, nil
}

// Name describes the device, e.g. "host (2 threads, x86-64 fibers, x86-64-v4 kernels)".
func (h *Backend) Name() string {
	return fmt.Sprintf("host (%d threads, %s fibers, %s kernels)", int(C.hd_workers()), C.GoString(C.hd_fiber_impl()), h.ISA())
}

// ISA names the instruction set of the kernel copies this backend runs (one of ISAs()).
func (h *Backend) ISA() string { return C.GoString(C.hd_isa_name(h.isa)) }

// Limits reports the host device limits (SIMD width 1, memory = physical RAM).
func (h *Backend) Limits() driver.Limits {
	return driver.Limits{
		MaxThreadsPerGroup:   MaxThreadsPerGroup,
		MaxThreadgroupMemory: MaxThreadgroupMemory,
		SIMDWidth:            1,
		MemoryBytes:          uint64(C.hd_physical_memory()),
		ComputeUnits:         int(C.hd_workers()),
	}
}

// KernelLimits: every kernel allows MaxThreadsPerGroup work items per group (the fibers of a
// barrier kernel's group are made per dispatch, so no compiled property lowers it) and has no
// static threadgroup memory; the SIMD width is 1 (SIMD lanes live inside the kernels).
func (h *Backend) KernelLimits(k *driver.KernelInfo) (driver.KernelLimits, error) {
	if _, err := h.kernel(k); err != nil {
		return driver.KernelLimits{}, err
	}
	return driver.KernelLimits{MaxThreadsPerGroup: MaxThreadsPerGroup, SIMDWidth: 1}, nil
}

// kernel returns the compiled kernel k: of the main table, or of the module k.Built.
func (h *Backend) kernel(k *driver.KernelInfo) (*C.hd_kernel, error) {
	switch {
	case k.Built != "":
		return h.moduleKernel(k)
	case k.Module != "":
		return nil, fmt.Errorf("host: %s is a kernel of module template %q: it runs from a module built from it", k.Name, k.Module)
	}
	e, ok := h.ids[k.Name]
	if !ok {
		return nil, fmt.Errorf("host: no compiled kernel %s", k.Name)
	}
	return e, nil
}

// buffer is C memory: from calloc, aligned to 64 bytes, or (recyclable sizes) pages of mappings
// of the recycler, on a 2 MiB boundary.
type buffer struct {
	raw  unsafe.Pointer // as returned by calloc, or p for a mapped buffer; nil once freed
	p    unsafe.Pointer // aligned start
	n    int            // size asked for
	size int            // usable bytes from p (≥ n: a mapped buffer's multiple of recycleGranule)
	segs []seg          // a mapped buffer's pieces in address order, each in one mapping (nil: calloc'd)
}

// release returns b's memory to the C library or the kernel.
func (b *buffer) release() {
	if b.segs != nil {
		C.hd_unmap(b.p, C.size_t(b.size)) // munmap spans the pieces' mappings
	} else {
		C.free(b.raw)
	}
}

func (b *buffer) Size() int { return b.n }

func (b *buffer) bytes(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(b.p, off)), n)
}

func callocBuffer(n, size int) *buffer {
	raw := C.calloc(1, C.size_t(size)+bufferAlign)
	if raw == nil {
		return nil
	}
	p := unsafe.Add(raw, (bufferAlign-uintptr(raw)%bufferAlign)%bufferAlign)
	return &buffer{raw: raw, p: p, n: n, size: size}
}

// recycleMin: buffers of at least this many bytes are recycled (recycler).
const recycleMin = 1 << 20

// recycleGranule: a recycled buffer takes a multiple of 2 MiB (a huge page), so that every piece
// the recycler splits off or moves starts on a huge-page boundary.
const recycleGranule = 2 << 20

// seg is a piece of a mapping held by the recycler: size bytes (a multiple of recycleGranule)
// from p. Pieces with the same id lie in one mapping of the kernel (one VMA on Linux: a fresh
// mapping, or pages moved there by one hd_move): adjacent free pieces merge only then, because
// hd_move moves a range of one mapping only.
type seg struct {
	p    unsafe.Pointer
	size int
	id   uint64
}

// recycler keeps freed large buffers' pages mapped for later allocations. A proof allocates
// gigabytes of device memory (keccakf-1024: 1.8 GB at its peak) and frees it at the end; on this
// project's VM the fresh pages of the next proof cost 0.2-1.7 s per GB in page faults (the
// hypervisor takes freed memory back within seconds: free page reporting), against 0.03 s per
// GB to zero a recycled buffer.
//
// An allocation takes the smallest free piece that holds it (the rest stays free); where none
// does, it gathers free pieces, smallest first, into a fresh mapping with hd_move (Linux's
// mremap: the pages keep their memory, nothing faults) and maps fresh pages only for what the
// free pieces lack. Without hd_move (other OSes) free pieces are released, smallest first, before
// a fresh mapping, until live + cached + new ≤ the peak. Either way the bytes the process holds
// never exceed the most it held live (in whole granules), and proofs after the first of a
// process map no fresh pages as long as they allocate no more than the peak in all: a first fit
// by size alone (the buffers of one proof are not freed in the order of the last) let the
// constraints and openings of keccakf-1024 map 1.47 GB fresh in every proof.
type recycler struct {
	mu      sync.Mutex
	free    []seg
	cached  int    // bytes of free
	live    int    // bytes of recyclable buffers handed out and not freed
	peak    int    // the most live + cached bytes so far
	ids     uint64 // the last seg.id handed out
	closed  bool   // Close released the cache: Free releases at once
	canMove bool   // hd_move works here
	moves   int    // hd_move calls (tests)
	fresh   int    // bytes of fresh mappings (tests)
}

func newRecycler() *recycler { return &recycler{canMove: C.hd_can_move() != 0} }

// takeFree removes free piece i and returns its first size bytes; the rest stays free.
func (r *recycler) takeFree(i, size int) seg {
	s := r.free[i]
	if s.size > size {
		r.free[i] = seg{unsafe.Add(s.p, size), s.size - size, s.id}
		s.size = size
	} else {
		r.free = append(r.free[:i], r.free[i+1:]...)
	}
	r.cached -= size
	return s
}

// get returns a buffer of n bytes (size: n rounded up to recycleGranule) and how many bytes
// from its start may hold stale values (the rest are fresh zero pages); nil if mmap fails.
func (r *recycler) get(n, size int) (*buffer, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := -1
	for i, s := range r.free {
		if s.size >= size && (best < 0 || s.size < r.free[best].size) {
			best = i
		}
	}
	if best >= 0 {
		s := r.takeFree(best, size)
		r.live += size
		return &buffer{raw: s.p, p: s.p, n: n, size: size, segs: []seg{s}}, size
	}
	if !r.canMove {
		// Make room: release free pieces, smallest first, while live + cached + size > peak.
		for len(r.free) > 0 && r.live+r.cached+size > r.peak {
			small := 0
			for i, s := range r.free {
				if s.size < r.free[small].size {
					small = i
				}
			}
			s := r.takeFree(small, r.free[small].size)
			C.hd_unmap(s.p, C.size_t(s.size))
		}
	}
	p := C.hd_map(C.size_t(size))
	if p == nil {
		return nil, 0
	}
	b := &buffer{raw: p, p: p, n: n, size: size}
	r.ids++
	id := r.ids
	off, stale := 0, 0
	for r.canMove && off < size && len(r.free) > 0 {
		small := 0
		for i, s := range r.free {
			if s.size < r.free[small].size {
				small = i
			}
		}
		s := r.takeFree(small, min(r.free[small].size, size-off))
		dst := unsafe.Add(p, off)
		if C.hd_move(s.p, C.size_t(s.size), dst) == 0 {
			r.moves++
			r.ids++
			b.segs = append(b.segs, seg{dst, s.size, r.ids})
			stale = off + s.size
		} else { // the fresh pages at dst stay; s goes back to the kernel
			C.hd_unmap(s.p, C.size_t(s.size))
			b.segs = append(b.segs, seg{dst, s.size, id})
			r.fresh += s.size
		}
		off += s.size
	}
	if off < size {
		b.segs = append(b.segs, seg{unsafe.Add(p, off), size - off, id})
		r.fresh += size - off
	}
	r.live += size
	r.peak = max(r.peak, r.live+r.cached)
	return b, stale
}

// put takes the pieces of a freed recyclable buffer; false: the caller releases it.
func (r *recycler) put(b *buffer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live -= b.size
	if r.closed {
		return false
	}
	for _, s := range b.segs {
		for i := 0; i < len(r.free); {
			f := r.free[i]
			if f.id == s.id && (unsafe.Add(f.p, f.size) == s.p || unsafe.Add(s.p, s.size) == f.p) {
				if uintptr(f.p) < uintptr(s.p) {
					s.p = f.p
				}
				s.size += f.size
				r.free = append(r.free[:i], r.free[i+1:]...)
				continue
			}
			i++
		}
		r.free = append(r.free, s)
	}
	r.cached += b.size
	return true
}

// release frees every cached piece; later Frees release at once.
func (r *recycler) release() {
	r.mu.Lock()
	drop := r.free
	r.free, r.cached, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, s := range drop {
		C.hd_unmap(s.p, C.size_t(s.size))
	}
}

// stats reports the recycler's bytes live, cached and at the peak, its free pieces, hd_move
// calls and bytes of fresh mappings so far.
func (r *recycler) stats() (live, cached, peak, pieces, moves, fresh int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live, r.cached, r.peak, len(r.free), r.moves, r.fresh
}

// Alloc returns size zeroed bytes: calloc for small buffers; for large ones the recycler's pages
// (zeroed with memset where they held an earlier buffer) or fresh zero pages.
func (h *Backend) Alloc(size int) (driver.Buffer, error) { return h.alloc(size, true) }

// AllocUninit implements driver.UninitAllocator: a recycled buffer is handed out as it was left
// (a fresh mapping is zero anyway), which saves a single-threaded memset of its size.
func (h *Backend) AllocUninit(size int) (driver.Buffer, error) { return h.alloc(size, false) }

func (h *Backend) alloc(size int, zero bool) (driver.Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("host: alloc of %d bytes", size)
	}
	if size < recycleMin {
		if b := callocBuffer(size, size); b != nil {
			return b, nil
		}
		return nil, fmt.Errorf("host: %w (calloc of %d bytes failed)", driver.ErrOutOfMemory, size)
	}
	b, stale := h.rec.get(size, (size+recycleGranule-1)/recycleGranule*recycleGranule)
	if b == nil {
		return nil, fmt.Errorf("host: %w (mmap of %d bytes failed)", driver.ErrOutOfMemory, size)
	}
	if zero && stale > 0 {
		C.memset(b.p, 0, C.size_t(min(size, stale)))
	}
	return b, nil
}

func (h *Backend) buf(b driver.Buffer) (*buffer, error) {
	hb, ok := b.(*buffer)
	switch {
	case !ok:
		return nil, fmt.Errorf("host: buffer %T is not a host buffer", b)
	case hb.raw == nil:
		return nil, errors.New("host: buffer was freed")
	}
	return hb, nil
}

// Free releases b (a second Free does nothing).
func (h *Backend) Free(b driver.Buffer) {
	if hb, ok := b.(*buffer); ok && hb.raw != nil {
		kept := *hb
		if hb.segs == nil || !h.rec.put(&kept) {
			kept.release()
		}
		hb.raw, hb.p = nil, nil
	}
}

func checkRange(b *buffer, off, n int) error {
	if err := driver.CheckRange(off, n, b.n); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// Upload copies src into dst at offset.
func (h *Backend) Upload(dst driver.Buffer, offset int, src []byte) error {
	d, err := h.buf(dst)
	if err == nil {
		err = checkRange(d, offset, len(src))
	}
	if err != nil {
		return err
	}
	copy(d.bytes(offset, len(src)), src)
	return nil
}

// Download copies len(dst) bytes of src from offset.
func (h *Backend) Download(dst []byte, src driver.Buffer, offset int) error {
	s, err := h.buf(src)
	if err == nil {
		err = checkRange(s, offset, len(dst))
	}
	if err != nil {
		return err
	}
	copy(dst, s.bytes(offset, len(dst)))
	return nil
}

// UploadQueued is Upload (driver.QueuedUploader): work runs as it is encoded here, so a copy
// now is in queue order.
func (h *Backend) UploadQueued(dst driver.Buffer, offset int, src []byte) error {
	return h.Upload(dst, offset, src)
}

// DownloadSettled is Download (driver.SettledDownloader): work runs as it is encoded here, so
// there is nothing to wait for either way.
func (h *Backend) DownloadSettled(dst []byte, src driver.Buffer, offset int) error {
	return h.Download(dst, src, offset)
}

// Copy copies n bytes (memmove: the ranges may overlap).
func (h *Backend) Copy(dst driver.Buffer, dstOffset int, src driver.Buffer, srcOffset int, n int) error {
	d, err := h.buf(dst)
	if err != nil {
		return err
	}
	s, err := h.buf(src)
	if err != nil {
		return err
	}
	if err := checkRange(d, dstOffset, n); err != nil {
		return err
	}
	if err := checkRange(s, srcOffset, n); err != nil {
		return err
	}
	if n > 0 {
		C.memmove(unsafe.Add(d.p, dstOffset), unsafe.Add(s.p, srcOffset), C.size_t(n))
	}
	return nil
}

// Dispatch runs the kernel to completion. args were validated by package gpu; the checks here
// keep the C++ side safe when the backend is used directly.
func (h *Backend) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	ck, err := h.kernel(k)
	if err != nil {
		return err
	}
	if len(args) != k.NBuf || len(tgLen) != k.NTG {
		return fmt.Errorf("host: %s: %d args and %d threadgroup lengths, kernel has %d and %d", k.Name, len(args), len(tgLen), k.NBuf, k.NTG)
	}
	// One C block: the slot pointers, then the inline value bytes, then threadgroup lengths.
	inline := 0
	for _, a := range args {
		inline += (len(a.Bytes) + 15) &^ 15
	}
	ptrs := 8 * (k.NBuf + 1)
	block := C.malloc(C.size_t(ptrs + inline + 4*(k.NTG+1)))
	if block == nil {
		return fmt.Errorf("host: %w (argument block)", driver.ErrOutOfMemory)
	}
	defer C.free(block)
	slots := unsafe.Slice((*unsafe.Pointer)(block), k.NBuf+1)
	data := unsafe.Slice((*byte)(unsafe.Add(block, ptrs)), inline)
	tgl := unsafe.Slice((*C.uint)(unsafe.Add(block, ptrs+inline)), k.NTG+1)
	off := 0
	for _, p := range k.Params {
		a := args[min(p.Index, len(args)-1)]
		switch p.Kind {
		case driver.ParamBuffer:
			b, err := h.buf(a.Buf)
			if err != nil {
				return fmt.Errorf("%s: argument %d (%s): %w", k.Name, p.Index, p.Name, err)
			}
			slots[p.Index] = b.p
		case driver.ParamValue:
			if len(a.Bytes) != p.ValueSize {
				return fmt.Errorf("host: %s: argument %d (%s) takes %d bytes, got %d", k.Name, p.Index, p.Name, p.ValueSize, len(a.Bytes))
			}
			copy(data[off:], a.Bytes)
			slots[p.Index] = unsafe.Pointer(&data[off])
			off += (len(a.Bytes) + 15) &^ 15
		}
	}
	for i, l := range tgLen {
		tgl[i] = C.uint(l)
	}
	var errbuf [256]C.char
	rc := C.hd_dispatch_kernel(ck, h.isa, C.hd_u3{C.uint(groups.X), C.uint(groups.Y), C.uint(groups.Z)},
		C.hd_u3{C.uint(tpg.X), C.uint(tpg.Y), C.uint(tpg.Z)},
		(*unsafe.Pointer)(block), &tgl[0], &errbuf[0], C.int(len(errbuf)))
	if rc != 0 {
		return fmt.Errorf("host: %s", C.GoString(&errbuf[0]))
	}
	return nil
}

// Sync does nothing: Dispatch and Copy complete before they return.
func (h *Backend) Sync() error { return nil }

// Close releases the recycled buffers (buffers are freed by their owner; the thread pool lives on
// for the process).
func (h *Backend) Close() error {
	h.rec.release()
	return nil
}

// setUcontextFibers selects the portable ucontext fiber switch instead of the hand-written one
// (for tests and benchmarks).
func setUcontextFibers(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.hd_set_fiber_impl(C.int(v))
}
