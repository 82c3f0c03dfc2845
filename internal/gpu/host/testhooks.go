package host

import (
	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Hooks for this package's tests, which are all an external test package (host_test): with a
// test file of the package itself (an export_test.go), `go test` compiles the package again for
// it, C++ kernels included: about two minutes on 2 cores, in every fresh `make test` twice (the
// unit tests and the portable-lane run of scripts/host-isa-check.sh).
var (
	// CTable returns the C kernel table (name, entry) the Go side dispatches through.
	CTable = cTable
	// SetUcontextFibers makes new groups' fibers switch with ucontext (true) or the hand-written
	// routine.
	SetUcontextFibers = setUcontextFibers
	// DecodeEntry decodes a module cache file's bytes.
	DecodeEntry = decodeEntry
)

// RecycleMin is the smallest buffer the backend recycles (and maps with mmap).
const RecycleMin = recycleMin

// ForgetModules drops the libraries this process has loaded from its table (they stay mapped),
// so that the next build reads the disk cache.
func ForgetModules() {
	libMu.Lock()
	libs = map[string]*moduleLib{}
	libMu.Unlock()
}

// BufferMapping reports a buffer of this backend: its aligned start, the size asked for, and the
// bytes mapped for it (0: allocated by the C library).
func BufferMapping(b driver.Buffer) (start uintptr, size, mapped int) {
	buf := b.(*buffer)
	if buf.segs == nil {
		return uintptr(buf.p), buf.n, 0
	}
	return uintptr(buf.p), buf.n, buf.size
}

// RecycleGranule: a recycled buffer takes a multiple of this many bytes.
const RecycleGranule = recycleGranule

// RecyclerStats reports h's recycler: bytes of buffers live, bytes cached, the most of both
// together so far, the free pieces, the moves of pages between mappings (mremap) and the bytes
// of fresh mappings so far.
func RecyclerStats(h *Backend) (live, cached, peak, pieces, moves, fresh int) {
	return h.rec.stats()
}
