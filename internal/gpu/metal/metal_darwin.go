//go:build darwin && cgo

package metal

// CoreGraphics: Apple's MTLCreateSystemDefaultDevice documentation says that on macOS a command-line
// tool must link it for the system to provide a default device.

/*
#cgo CFLAGS: -fobjc-arc -Wall
#cgo LDFLAGS: -framework Metal -framework Foundation -framework CoreGraphics
#include "bridge.h"
*/
import "C"

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// metallibFS always holds metallib/README.md; `make` on macOS adds metallib/metalprove.metallib
// and its stamp (policy.go).
//
//go:embed metallib
var metallibFS embed.FS

// shaderSource is the amalgamated MSL of shaders/*.metal, compiled when no metallib built from it
// is embedded.
//
//go:embed shaders.gen.metal
var shaderSource string

// simdWidth is the SIMD-group width of every Apple GPU (pipelines report it as threadExecutionWidth).
const simdWidth = 32

// minGPUCores stands in for the GPU core count, which Metal does not expose: the smallest Apple
// Silicon GPU (M1) has 7 or 8 cores. Launchers use it only to size grids.
const minGPUCores = 8

type backend struct {
	ctx     *C.mp_context
	log     zerolog.Logger
	budget  cbBudget // of the command buffer being encoded (policy.go)
	commits int      // command buffers committed by the budget before a Sync (tests)
	devName string
	family  []string // supported MTLGPUFamily names (policy.go gpuFamilies)
	from    string   // where the kernels came from: "metallib" or "source"
	limits  driver.Limits
	maxBuf  uint64
	pipes   map[string]*pipeline // the main library's, by kernel name: made by Open, then only read
	// modules are the modules built at run time (BuildModules) and their pipelines, by module
	// ID: a template's kernel has the same name in each (modules.go).
	modules moduleSet[*pipeline]
}

var _ driver.KernelLimiter = (*backend)(nil)

type pipeline struct {
	p    *C.mp_pipeline
	info C.mp_pipeline_info
}

// buffer is an MTLBuffer in shared storage; data is its contents, seen by the CPU and the GPU.
type buffer struct {
	b    *C.mp_buffer
	data []byte
}

func (b *buffer) Size() int { return len(b.data) }

// takeErr turns a bridge error string into Go text and frees it.
func takeErr(e *C.char) string {
	if e == nil {
		return "unknown error"
	}
	s := C.GoString(e)
	C.mp_free(unsafe.Pointer(e))
	return s
}

// Open opens the system default Metal device and loads the kernels: the embedded metallib when it
// was built from the embedded source (and METALPROVE_METAL_SOURCE is not 1), else the embedded
// source, compiled now.
func Open(opts Options) (driver.Backend, error) {
	budget, err := newBudget(os.Getenv(cbBudgetEnv))
	if err != nil {
		return nil, err
	}
	be, err := newBackend()
	if err != nil {
		return nil, err
	}
	be.log, be.budget = opts.Logger, budget
	if err := be.loadKernels(opts.Logger); err != nil {
		be.Close()
		return nil, err
	}
	// The module templates' kernels are not in the main library: BuildModules makes their
	// pipelines, per module.
	if err := be.buildPipelines(mainKernels()); err != nil {
		be.Close()
		return nil, err
	}
	return be, nil
}

func newBackend() (*backend, error) {
	var cerr *C.char
	ctx := C.mp_context_create(&cerr)
	if ctx == nil {
		return nil, unavailableError("metal: " + takeErr(cerr))
	}
	budget, _ := newBudget("")
	be := &backend{ctx: ctx, pipes: map[string]*pipeline{}, budget: budget}
	name := C.mp_device_name(ctx)
	be.devName = C.GoString(name)
	C.mp_free(unsafe.Pointer(name))
	be.family = familyNames(func(id int64) bool { return C.mp_device_supports_family(ctx, C.int64_t(id)) != 0 })
	var l C.mp_limits
	C.mp_device_limits(ctx, &l)
	be.maxBuf = uint64(l.max_buffer_length)
	be.limits = driver.Limits{
		MaxThreadsPerGroup:   int(l.max_threads_per_group),
		MaxThreadgroupMemory: int(l.max_threadgroup_memory),
		SIMDWidth:            simdWidth,
		MemoryBytes:          uint64(l.working_set),
		ComputeUnits:         minGPUCores,
	}
	return be, nil
}

// loadKernels loads the embedded metallib when chooseLibrary accepts it (its stamp names the
// embedded source), else compiles the embedded source, and logs which and why.
func (be *backend) loadKernels(log zerolog.Logger) error {
	lib, err := metallibFS.ReadFile(metallibPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("metal: reading the embedded metallib: %w", err)
	}
	stamp, err := metallibFS.ReadFile(metallibStampPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("metal: reading the embedded metallib's stamp: %w", err)
	}
	c := chooseLibrary(lib, stamp, shaderSource, os.Getenv(SourceEnv) == "1")
	if c.useMetallib {
		libErr := be.loadMetallib(lib)
		if libErr == nil {
			log.Debug().Str("why", c.why).Msg("metal: kernels from the embedded metallib")
			return nil
		}
		c = libraryChoice{warn: true, why: libErr.Error() + ": compiling the embedded source instead"}
	}
	ev := log.Info()
	if c.warn {
		ev = log.Warn()
	}
	ev.Str("why", c.why).Msg("metal: kernels compiled from the embedded source")
	return be.loadSource(shaderSource)
}

func (be *backend) loadMetallib(lib []byte) error {
	var cerr *C.char
	if C.mp_library_from_data(be.ctx, unsafe.Pointer(&lib[0]), C.size_t(len(lib)), &cerr) != 0 {
		return fmt.Errorf("metal: loading the embedded %s: %s", metallibPath, takeErr(cerr))
	}
	be.from = "metallib"
	return nil
}

// loadSource compiles MSL source; a failure's text is the Metal compiler's log.
func (be *backend) loadSource(src string) error {
	csrc := C.CString(src)
	defer C.mp_free(unsafe.Pointer(csrc))
	var cerr *C.char
	if C.mp_library_from_source(be.ctx, csrc, &cerr) != 0 {
		return fmt.Errorf("metal: compiling the kernel source: %s", takeErr(cerr))
	}
	be.from = "source"
	return nil
}

// Name is the device name, its GPU families and where the kernels came from, e.g.
// "Apple M1 (Metal; families apple7 mac2; kernels from metallib)".
func (be *backend) Name() string {
	fam := strings.Join(be.family, " ")
	if fam == "" {
		fam = "none of " + fmt.Sprint(len(gpuFamilies)) + " known"
	}
	return be.devName + " (Metal; families " + fam + "; kernels from " + be.from + ")"
}

func (be *backend) Limits() driver.Limits { return be.limits }

// buildPipelines makes the compute pipeline of each kernel of names that has none yet. Open
// builds every kernel of the table but the module templates' (mainKernels): making a pipeline
// compiles the kernel for this GPU (milliseconds each, more without Metal's shader cache), which
// must not land inside the first Dispatch of a kernel, in some timed region.
func (be *backend) buildPipelines(names []string) error {
	for _, name := range names {
		if _, ok := be.pipes[name]; ok {
			continue
		}
		cname := C.CString(name)
		p := &pipeline{}
		var cerr *C.char
		p.p = C.mp_pipeline_create(be.ctx, cname, &p.info, &cerr)
		C.mp_free(unsafe.Pointer(cname))
		if p.p == nil {
			return fmt.Errorf("metal: pipeline for kernel %s: %s", name, takeErr(cerr))
		}
		be.pipes[name] = p
	}
	return nil
}

// pipeline returns the compute pipeline of kernel name, built by buildPipelines (never here).
func (be *backend) pipeline(name string) (*pipeline, error) {
	if p, ok := be.pipes[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("metal: kernel %s has no pipeline (Open builds those of the kernel table outside module templates)", name)
}

// pipelineFor returns k's pipeline: the main library's, or that of the module k.Built for a
// module template's kernel (BuildModules made it; never here).
func (be *backend) pipelineFor(k *driver.KernelInfo) (*pipeline, error) {
	id, err := kernelModule(k)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return be.pipeline(k.Name)
	}
	return be.modules.pipeline(id, k.Name)
}

// KernelLimits are the limits of the kernel's pipeline: maxTotalThreadsPerThreadgroup (lower than
// the device's maxThreadsPerThreadgroup for kernels that need many registers),
// threadExecutionWidth and staticThreadgroupMemoryLength. A built module's kernel (k.Built) has
// the limits of its module's pipeline.
func (be *backend) KernelLimits(k *driver.KernelInfo) (driver.KernelLimits, error) {
	p, err := be.pipelineFor(k)
	if err != nil {
		return driver.KernelLimits{}, err
	}
	return driver.KernelLimits{
		MaxThreadsPerGroup:      int(p.info.max_threads),
		SIMDWidth:               int(p.info.simd_width),
		StaticThreadgroupMemory: int(p.info.static_tg_memory),
	}, nil
}

// Alloc returns a shared buffer. Metal's newBufferWithLength allocates "a new zero-filled buffer".
func (be *backend) Alloc(size int) (driver.Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("metal: buffer size %d must be positive", size)
	}
	if uint64(size) > be.maxBuf {
		return nil, fmt.Errorf("%w: %d bytes exceeds the device's maxBufferLength %d", driver.ErrOutOfMemory, size, be.maxBuf)
	}
	var contents unsafe.Pointer
	var cerr *C.char
	b := C.mp_buffer_create(be.ctx, C.size_t(size), &contents, &cerr)
	if b == nil {
		return nil, fmt.Errorf("%w: %s", driver.ErrOutOfMemory, takeErr(cerr))
	}
	return &buffer{b: b, data: unsafe.Slice((*byte)(contents), size)}, nil
}

func (be *backend) Free(db driver.Buffer) {
	b, ok := db.(*buffer)
	if !ok || b.b == nil {
		return
	}
	// Pending command buffers retain the MTLBuffer, so this is safe with work in flight.
	C.mp_release(unsafe.Pointer(b.b))
	*b = buffer{}
}

func asBuffer(db driver.Buffer) (*buffer, error) {
	b, ok := db.(*buffer)
	if !ok || b == nil {
		return nil, fmt.Errorf("metal: buffer %T does not belong to the Metal backend", db)
	}
	if b.b == nil {
		return nil, errors.New("metal: buffer was freed")
	}
	return b, nil
}

// syncPending finishes encoded work so that CPU access to shared memory is ordered after it.
func (be *backend) syncPending() error {
	if C.mp_pending(be.ctx) == 0 {
		return nil
	}
	return be.Sync()
}

func (be *backend) Upload(dst driver.Buffer, offset int, src []byte) error {
	b, err := asBuffer(dst)
	if err != nil {
		return err
	}
	if err := checkSpan("upload", offset, len(src), len(b.data)); err != nil {
		return err
	}
	if err := be.syncPending(); err != nil {
		return err
	}
	copy(b.data[offset:offset+len(src)], src)
	return nil
}

func (be *backend) Download(dst []byte, src driver.Buffer, offset int) error {
	b, err := asBuffer(src)
	if err != nil {
		return err
	}
	if err := checkSpan("download", offset, len(dst), len(b.data)); err != nil {
		return err
	}
	if err := be.syncPending(); err != nil {
		return err
	}
	copy(dst, b.data[offset:offset+len(dst)])
	return nil
}

// UploadQueued copies without syncing first (driver.QueuedUploader): with shared storage the
// command buffers encoded after it read what the CPU wrote, and the caller guarantees that none
// encoded before touches the range.
func (be *backend) UploadQueued(dst driver.Buffer, offset int, src []byte) error {
	b, err := asBuffer(dst)
	if err != nil {
		return err
	}
	if err := checkSpan("upload", offset, len(src), len(b.data)); err != nil {
		return err
	}
	copy(b.data[offset:offset+len(src)], src)
	return nil
}

// DownloadSettled copies without syncing first (driver.SettledDownloader): with shared storage
// the bytes that completed command buffers wrote are visible to the CPU, and the caller
// guarantees that no command buffer since writes the range.
func (be *backend) DownloadSettled(dst []byte, src driver.Buffer, offset int) error {
	b, err := asBuffer(src)
	if err != nil {
		return err
	}
	if err := checkSpan("download", offset, len(dst), len(b.data)); err != nil {
		return err
	}
	copy(dst, b.data[offset:offset+len(dst)])
	return nil
}

// Copy encodes a blit. macOS requires offsets and size to be multiples of 4, and overlapping
// ranges of one buffer are not allowed in a blit: those cases sync and copy on the CPU (canBlit).
func (be *backend) Copy(dst driver.Buffer, dstOffset int, src driver.Buffer, srcOffset int, n int) error {
	d, err := asBuffer(dst)
	if err != nil {
		return err
	}
	s, err := asBuffer(src)
	if err != nil {
		return err
	}
	if err := checkSpan("copy to", dstOffset, n, len(d.data)); err != nil {
		return err
	}
	if err := checkSpan("copy from", srcOffset, n, len(s.data)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if !canBlit(dstOffset, srcOffset, n, d == s) {
		if err := be.syncPending(); err != nil {
			return err
		}
		copy(d.data[dstOffset:dstOffset+n], s.data[srcOffset:srcOffset+n])
		return nil
	}
	if be.budget.admit(2 * int64(n)) {
		C.mp_commit(be.ctx)
		be.commits++
	}
	var cerr *C.char
	if C.mp_copy(be.ctx, d.b, C.size_t(dstOffset), s.b, C.size_t(srcOffset), C.size_t(n), &cerr) != 0 {
		return fmt.Errorf("metal: copy: %s", takeErr(cerr))
	}
	return nil
}

// Dispatch encodes k into the command buffer being encoded, with its pipeline (pipelineFor: the
// main library's, or its built module's when k.Built is set).
func (be *backend) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	p, err := be.pipelineFor(k)
	if err != nil {
		return err
	}
	label := kernelLabel(k)
	if lim := uint64(p.info.max_threads); tpg.Count() > lim {
		return fmt.Errorf("metal: kernel %s: %d threads per threadgroup (%d×%d×%d) exceeds the pipeline's maxTotalThreadsPerThreadgroup %d",
			label, tpg.Count(), tpg.X, tpg.Y, tpg.Z, lim)
	}
	tgTotal := uint64(p.info.static_tg_memory)
	for _, l := range tgLen {
		tgTotal += max(16, (uint64(l)+15)&^15)
	}
	if lim := uint64(be.limits.MaxThreadgroupMemory); tgTotal > lim {
		return fmt.Errorf("metal: kernel %s: %d bytes of threadgroup memory (with %d static) exceeds maxThreadgroupMemoryLength %d",
			label, tgTotal, p.info.static_tg_memory, lim)
	}
	slots := make([]C.mp_slot, len(args))
	ids := make([]uintptr, len(args))
	sizes := make([]int, len(args))
	var values []byte
	for i, a := range args {
		switch {
		case a.Buf != nil:
			b, err := asBuffer(a.Buf)
			if err != nil {
				return fmt.Errorf("kernel %s argument %d: %w", label, i, err)
			}
			slots[i].buf = b.b
			ids[i], sizes[i] = uintptr(unsafe.Pointer(b.b)), len(b.data)
		case len(a.Bytes) > 0:
			// setBytes is meant for small values (< 4 KiB); kernel parameter structs are a few words.
			slots[i].value_off = C.uint32_t(len(values))
			slots[i].value_len = C.uint32_t(len(a.Bytes))
			values = append(values, a.Bytes...)
		}
	}
	var slotPtr *C.mp_slot
	if len(slots) > 0 {
		slotPtr = &slots[0]
	}
	var valPtr *C.uint8_t
	if len(values) > 0 {
		valPtr = (*C.uint8_t)(unsafe.Pointer(&values[0]))
	}
	var tgPtr *C.uint32_t
	if len(tgLen) > 0 {
		tgPtr = (*C.uint32_t)(unsafe.Pointer(&tgLen[0]))
	}
	g := [3]C.uint32_t{C.uint32_t(groups.X), C.uint32_t(groups.Y), C.uint32_t(groups.Z)}
	t := [3]C.uint32_t{C.uint32_t(tpg.X), C.uint32_t(tpg.Y), C.uint32_t(tpg.Z)}
	if be.budget.admit(dispatchCost(ids, sizes)) {
		C.mp_commit(be.ctx)
		be.commits++
	}
	cname := C.CString(label) // the encoder's label: a failed command buffer names it
	defer C.mp_free(unsafe.Pointer(cname))
	var cerr *C.char
	if C.mp_dispatch(be.ctx, p.p, cname, slotPtr, C.int(len(slots)), valPtr, tgPtr, C.int(len(tgLen)), &g[0], &t[0], &cerr) != 0 {
		return fmt.Errorf("metal: kernel %s: %s", label, takeErr(cerr))
	}
	return nil
}

// Sync commits the command buffer being encoded and waits for every one committed since the last
// Sync (the batch, split by the budget of policy.go). A failure names the command buffer and the
// kernels whose encoders faulted. A command buffer that ran longer than watchdogWarnSeconds is
// logged: macOS may stop longer ones on a GPU that drives a display.
func (be *backend) Sync() error {
	be.budget.reset()
	var cerr *C.char
	var longest C.double
	rc := C.mp_sync(be.ctx, &longest, &cerr)
	if float64(longest) > watchdogWarnSeconds {
		be.log.Warn().Float64("seconds", float64(longest)).Str("budget_env", cbBudgetEnv).
			Msg("metal: a command buffer ran long on the GPU; macOS stops those that run too long on a GPU driving a display")
	}
	if rc != 0 {
		return fmt.Errorf("metal: %s", takeErr(cerr))
	}
	return nil
}

// Close waits for pending work and for module builds in flight, then releases the pipelines
// (the modules' too) and the device. Buffers are freed by their owner (package gpu frees every
// live buffer before Close).
func (be *backend) Close() error {
	if be.ctx == nil {
		return nil
	}
	err := be.syncPending()
	for _, p := range be.modules.close() {
		C.mp_release(unsafe.Pointer(p.p))
	}
	for name, p := range be.pipes {
		C.mp_release(unsafe.Pointer(p.p))
		delete(be.pipes, name)
	}
	C.mp_release(unsafe.Pointer(be.ctx))
	be.ctx = nil
	return err
}
