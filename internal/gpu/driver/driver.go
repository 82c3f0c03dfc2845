// Package driver is the contract between the device runtime (package gpu) and its backends
// (gpu/host, gpu/cuda, gpu/metal), in the manner of database/sql/driver: backends implement
// Backend and know nothing of accounting, naming or argument validation, which package gpu does
// once for all of them. It also holds the generated table of every kernel in shaders/*.metal with
// its argument slots (kernels.gen.go), so each backend and the launchers agree on signatures.
package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Dim3 is a grid or threadgroup size (Metal's MTLSize).
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional size.
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

// Count is X·Y·Z.
func (d Dim3) Count() uint64 { return uint64(d.X) * uint64(d.Y) * uint64(d.Z) }

// ParamKind says how a kernel parameter is bound.
type ParamKind uint8

const (
	// ParamBuffer is `device T*` or `constant T*` with [[buffer(i)]]: bound to a Buffer.
	ParamBuffer ParamKind = iota
	// ParamValue is `constant T&` with [[buffer(i)]]: bound to the bytes of a small value
	// (Metal's setBytes; passed by value on CUDA and host).
	ParamValue
	// ParamThreadgroup is `threadgroup T*` with [[threadgroup(i)]]: sized at dispatch.
	ParamThreadgroup
	// ParamBuiltin is a Metal built-in such as thread_position_in_grid.
	ParamBuiltin
)

// Param is one kernel parameter as declared in the .metal source.
type Param struct {
	Name  string
	Type  string // as written, e.g. "device const uint*", "constant NttParams&"
	Kind  ParamKind
	Index int // buffer or threadgroup index; for built-ins, the position in the parameter list
	// ValueSize is sizeof(T) of a ParamValue slot (all such structs are made of 32-bit fields).
	ValueSize int
	// Builtin names the built-in attribute of a ParamBuiltin (e.g. "thread_position_in_grid").
	Builtin string
}

// KernelInfo describes one kernel of shaders/*.metal.
type KernelInfo struct {
	Name   string
	Family string // base name of the .metal file, e.g. "ntt"
	// Module is the module template the kernel belongs to ("": the main copies, loaded when the
	// device opens). A template's kernels run only from modules built from it at run time
	// (ModuleBuilder): the template completed with generated code.
	Module string
	// Built is the module (ModuleSource.ID) a dispatch runs a template's kernel from: set on the
	// copies package gpu passes to Dispatch and KernelLimits, "" in the table.
	Built       string
	Pos         string // file:line of the declaration
	UsesBarrier bool
	NBuf        int // 1 + highest [[buffer]] index
	NTG         int // 1 + highest [[threadgroup]] index
	Params      []Param
}

// Buffer is a backend's device allocation.
type Buffer interface {
	Size() int
}

// Arg binds one [[buffer(i)]] slot: Buf for a ParamBuffer slot, Bytes for a ParamValue slot.
type Arg struct {
	Buf   Buffer
	Bytes []byte
}

// Limits are the device limits kernels and launchers must respect.
type Limits struct {
	MaxThreadsPerGroup   int    // e.g. 1024
	MaxThreadgroupMemory int    // bytes; Apple: 32 KiB
	SIMDWidth            int    // 32 on Apple and NVIDIA; 1 on the host device
	MemoryBytes          uint64 // device memory (host: physical RAM)
	ComputeUnits         int    // SMs, GPU cores, or CPU threads
}

// ErrUnavailable is matched (errors.Is) by a backend's Open error when that backend cannot be
// used on this machine or by this binary (wrong OS, built without cgo, no driver, no device). It is
// the project's one such sentinel: package gpu re-exports it.
var ErrUnavailable = errors.New("device unavailable")

// KernelLimits are the limits of one compiled kernel (a Metal compute pipeline, a CUDA function),
// which may be tighter than the device's: a register-heavy kernel allows fewer threads per group.
type KernelLimits struct {
	// MaxThreadsPerGroup: Metal maxTotalThreadsPerThreadgroup, CUDA
	// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; at most Limits.MaxThreadsPerGroup.
	MaxThreadsPerGroup int
	// SIMDWidth: Metal threadExecutionWidth, CUDA the warp size; 1 on the host device. Group sizes
	// that are multiples of it fill every SIMD group.
	SIMDWidth int
	// StaticThreadgroupMemory is threadgroup memory the compiled kernel holds besides its
	// [[threadgroup(i)]] arrays (Metal staticThreadgroupMemoryLength, CUDA static shared memory;
	// 0 for kernels that follow KERNELS.md): it counts against Limits.MaxThreadgroupMemory.
	StaticThreadgroupMemory int
}

// KernelLimiter is implemented by backends whose limits differ per kernel. Package gpu asks for
// every kernel of the table once, when the device opens, so a backend that builds kernels
// lazily builds them then (never inside a timed Dispatch); an error (a kernel missing from the
// compiled library) fails the open. A backend without it allows Limits() for every kernel.
type KernelLimiter interface {
	KernelLimits(k *KernelInfo) (KernelLimits, error)
}

// FreeMemoryReporter is implemented by backends that can say how much device memory is free now,
// allocations of other processes deducted (CUDA: cuMemGetInfo). Package gpu uses it to tell the
// memory a request may still take (Device.AvailableMemory).
type FreeMemoryReporter interface {
	FreeMemory() (uint64, error)
}

// UsedMemoryReporter is implemented by backends whose driver can say how much of the device's
// memory is in use now, by every process (CUDA: cuMemGetInfo's total less free): besides this
// process's buffers, what the driver holds for it (context, code, stacks, the memory pool's
// reserve). On a device the process has alone it is the process's own device memory.
type UsedMemoryReporter interface {
	UsedMemory() (uint64, error)
}

// PoolPeakReporter is implemented by backends that allocate from a driver-managed memory pool
// whose high-water marks the driver keeps (CUDA: the stream-ordered pool's USED_MEM_HIGH and
// RESERVED_MEM_HIGH): the bytes handed out to allocations and the bytes the pool held, since the
// last ResetPoolPeak. Both return ErrNoPool where the backend allocates without one.
type PoolPeakReporter interface {
	PoolPeak() (used, reserved uint64, err error)
	ResetPoolPeak() error
}

// ErrNoPool is returned by a PoolPeakReporter whose device allocates outside a memory pool.
var ErrNoPool = errors.New("no driver memory pool")

// ErrOutOfMemory is returned (wrapped) by Alloc when the device cannot satisfy a request.
var ErrOutOfMemory = errors.New("out of device memory")

// Backend is one device implementation. Methods are called from one goroutine at a time.
//
// Ordering: Dispatch and Copy are encoded into the current batch and may run asynchronously;
// Sync submits the batch and waits for it. Upload and Download are synchronous and ordered after
// everything encoded before them (a backend may implement that by syncing first; package gpu
// counts every sync).
type Backend interface {
	// Name describes the device, e.g. "NVIDIA H100 80GB HBM3 (sm_90)" or "host (16 threads)".
	Name() string
	Limits() Limits
	// Alloc returns a zeroed buffer of size bytes (size ≥ 1).
	Alloc(size int) (Buffer, error)
	Free(b Buffer)
	Upload(dst Buffer, offset int, src []byte) error
	Download(dst []byte, src Buffer, offset int) error
	// Copy encodes a device-to-device copy of n bytes.
	Copy(dst Buffer, dstOffset int, src Buffer, srcOffset int, n int) error
	// Dispatch encodes groups threadgroups of tpg threads each (dispatchThreadgroups semantics:
	// every group is full; kernels bound-check). args has k.NBuf entries, already validated
	// against k by package gpu; tgLen[i] is the byte length of [[threadgroup(i)]].
	Dispatch(k *KernelInfo, groups, tpg Dim3, args []Arg, tgLen []uint32) error
	// Sync submits the encoded work and waits for it to finish.
	Sync() error
	Close() error
}

// SettledDownloader is implemented by backends that can copy out of a buffer without waiting
// for the work encoded since the last sync (CUDA: on a second stream; unified memory: a plain
// copy): for results that a sync has already waited for, read while the device runs what was
// encoded after it. The caller guarantees that no work encoded since that sync writes the range.
type SettledDownloader interface {
	DownloadSettled(dst []byte, src Buffer, offset int) error
}

// QueuedUploader is implemented by backends that can upload in queue order without waiting for
// the work queued before (CUDA: from a pinned buffer of its own, an event after the copy; shared
// or host memory: a plain copy): for buffers no work queued before the upload reads or writes (a
// fresh one), so that the host need not wait for the device to fill them. src may be reused as
// soon as the call returns; work encoded after it sees the bytes.
type QueuedUploader interface {
	UploadQueued(dst Buffer, offset int, src []byte) error
}

// UninitAllocator is implemented by backends that can allocate without zeroing: for buffers
// the kernels write in full before they read them (scratch, outputs), so that neither the
// device nor the host spends time clearing them. A backend without it zeroes (Backend.Alloc).
type UninitAllocator interface {
	// AllocUninit returns a buffer of size bytes (size ≥ 1) with unspecified contents.
	AllocUninit(size int) (Buffer, error)
}

// CheckRange reports an error when the n bytes from offset do not lie inside a buffer of size
// bytes. Package gpu checks every range before a backend sees it; backends check again so that
// they stay safe when used directly.
func CheckRange(offset, n, size int) error {
	if offset < 0 || n < 0 || offset+n > size {
		return fmt.Errorf("range [%d, %d) outside the buffer's %d bytes", offset, offset+n, size)
	}
	return nil
}

// GeneratedCodeMarker is the line of a module template (scripts/mslgen) that Instantiate
// replaces by the code generated at run time.
const GeneratedCodeMarker = "// mslgen:generated-code"

// ModuleSource is a module to build at run time: a module template (KernelInfo.Module of its
// kernels) completed with code generated for one AIR (internal/kernels/piececode).
type ModuleSource struct {
	// ID names the built module: it must differ whenever Template or Code does (a digest).
	ID       string
	Template string
	// Code replaces the template's GeneratedCodeMarker line; it is written in the kernels'
	// dialect (shaders/include/pieces.h), valid for every target.
	Code string
	// Units are code compiled on their own, each after the template's preamble (Preamble), and
	// linked with the module (CUDA: -rdc and cuLink; the host: one shared library), or placed
	// before Code in one source (Metal: Combined): Code calls functions they define. They are
	// what lets a long module compile in parallel.
	Units []string
	// What the code is, for the log: e.g. "constraint code of AIR keccakf, pieces 0-7 of 126".
	What string
}

// ModuleBuild says how a module was obtained.
type ModuleBuild struct {
	ID string
	// Cached: loaded from the disk cache or this process's earlier build, not compiled.
	Cached bool
	// Elapsed is the compile's time (0 when cached); CachePath where the result is kept ("": not
	// cached).
	Elapsed   time.Duration
	CachePath string
}

// ModuleBuilder is implemented by backends that compile module templates at run time (CUDA:
// NVRTC; Metal: newLibraryWithSource; the host device: the system's C++ compiler).
type ModuleBuilder interface {
	// BuildModules compiles the modules, in parallel where the backend can, or loads them from its
	// cache (a corrupt or stale entry is detected by its digest and rebuilt). Afterwards the
	// modules' kernels are dispatched with KernelInfo.Built set to their ID. It may be called
	// while other goroutines dispatch.
	BuildModules(ms []ModuleSource) ([]ModuleBuild, error)
}

// Instantiate returns template with code in place of its GeneratedCodeMarker line.
func Instantiate(template, code string) (string, error) {
	return Combined(template, nil, code)
}

// Preamble returns template up to its GeneratedCodeMarker line: what a unit's code follows.
func Preamble(template string) (string, error) {
	i := strings.Index(template, "\n"+GeneratedCodeMarker+"\n")
	if i < 0 {
		return "", errors.New("module template without the generated-code marker")
	}
	return template[:i+1], nil
}

// Combined returns template with the units and then code in place of its GeneratedCodeMarker
// line: one source for backends that compile a module at once.
func Combined(template string, units []string, code string) (string, error) {
	pre, err := Preamble(template)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(pre)
	for _, u := range append(units, code) {
		b.WriteString(u)
		if !strings.HasSuffix(u, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString(template[len(pre)+len(GeneratedCodeMarker)+1:])
	return b.String(), nil
}
