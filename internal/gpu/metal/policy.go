package metal

// The decisions of the Metal backend that need no Metal: which kernel library to load, range
// checks, when a copy can be a blit, when to close a command buffer. They have no build tag, so
// that their tests run on every OS (no machine of this project has Metal); metal_darwin.go calls
// them.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Paths inside the embedded metallib directory. scripts/build-metallib.sh writes the metallib and,
// beside it, its stamp: the SHA-256 of the shaders.gen.metal it was compiled from, in shasum's
// format ("<64 hex digits>  <file name>").
const (
	metallibPath      = "metallib/metalprove.metallib"
	metallibStampPath = metallibPath + ".sha256"
)

// SourceEnv, when set to 1, makes Open compile shaders.gen.metal even if a metallib is embedded.
const SourceEnv = "METALPROVE_METAL_SOURCE"

// sourceHash is the hex SHA-256 of the kernel source, as `shasum -a 256` prints it.
func sourceHash(src string) string {
	h := sha256.Sum256([]byte(src))
	return hex.EncodeToString(h[:])
}

// parseStamp returns the hash recorded in a metallib stamp.
func parseStamp(stamp []byte) (string, error) {
	f := strings.Fields(string(stamp))
	if len(f) == 0 {
		return "", fmt.Errorf("empty")
	}
	h := strings.ToLower(f[0])
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("%q is not a SHA-256 in hex", f[0])
	}
	return h, nil
}

// libraryChoice is chooseLibrary's decision.
type libraryChoice struct {
	useMetallib bool
	why         string // what was decided and why, for the log
	warn        bool   // a metallib is embedded but unusable: worth a warning
}

// chooseLibrary decides where the kernels come from. lib and stamp are the embedded metallib and
// its stamp (nil when absent), source the embedded shaders.gen.metal, forceSource whether
// METALPROVE_METAL_SOURCE=1. The metallib is used only when its stamp names exactly this source:
// `go build` and `go test` embed whatever metallib the work tree holds, which may have been built
// from older shaders.
func chooseLibrary(lib, stamp []byte, source string, forceSource bool) libraryChoice {
	want := sourceHash(source)
	switch {
	case len(lib) == 0:
		return libraryChoice{why: "no metallib embedded (make on macOS builds one when the Metal toolchain is installed): compiling the embedded source"}
	case forceSource:
		return libraryChoice{why: SourceEnv + "=1: compiling the embedded source"}
	case stamp == nil:
		return libraryChoice{warn: true, why: "the embedded metallib has no stamp " + metallibStampPath +
			" (built by an older build-metallib.sh?): compiling the embedded source instead; rebuild the metallib with make"}
	}
	got, err := parseStamp(stamp)
	if err != nil {
		return libraryChoice{warn: true, why: fmt.Sprintf("the embedded metallib's stamp is malformed (%v): compiling the embedded source instead; rebuild the metallib with make", err)}
	}
	if got != want {
		return libraryChoice{warn: true, why: fmt.Sprintf("the embedded metallib is stale (built from a shaders.gen.metal with SHA-256 %.12s…, the embedded one has %.12s…): compiling the embedded source instead; rebuild the metallib with make", got, want)}
	}
	return libraryChoice{useMetallib: true, why: fmt.Sprintf("the embedded metallib was built from the embedded source (SHA-256 %.12s…)", want)}
}

// checkSpan checks that the n bytes from off lie in a buffer of size bytes (the driver contract's
// range check, which every backend repeats so that it stays safe when used directly).
func checkSpan(op string, off, n, size int) error {
	if err := driver.CheckRange(off, n, size); err != nil {
		return fmt.Errorf("metal: %s: %w", op, err)
	}
	return nil
}

// canBlit reports whether a copy of n bytes may be a blit: macOS requires offsets and size to be
// multiples of 4, and a blit must not copy between overlapping ranges of one buffer. Other copies
// are made by the CPU after the pending work finished.
func canBlit(dstOff, srcOff, n int, sameBuffer bool) bool {
	overlap := sameBuffer && dstOff < srcOff+n && srcOff < dstOff+n
	return (dstOff|srcOff|n)%4 == 0 && !overlap
}

// Command-buffer budget. macOS stops a command buffer that keeps a GPU driving a display busy for
// too long (a few seconds; the error is MTLCommandBufferErrorTimeout), so a batch is split into
// several command buffers, committed in order to the one queue without waiting (only Sync waits,
// for the last). A command buffer is closed before a command that would take it past
// cbBudgetBytes of bound buffers (the sum, over its commands, of the sizes of the distinct buffers
// each binds, or twice the size of a copy) or past cbBudgetCommands commands; a command larger than
// the budget gets a command buffer of its own. Bound bytes bound the memory a memory-bound kernel
// touches: 512 MiB is about 8 ms at the 68 GB/s of an M1, far below the watchdog, and costs a
// commit (tens of microseconds) per 512 MiB. A compute-bound kernel can take longer per byte: its
// launcher splits the work (internal/kernels: Merkle hashing). Sync logs a warning when a command
// buffer ran longer than watchdogWarnSeconds on the GPU. METALPROVE_METAL_CB_MB sets the byte
// budget in MiB.
const (
	cbBudgetBytes       = 512 << 20
	cbBudgetCommands    = 64
	cbBudgetEnv         = "METALPROVE_METAL_CB_MB"
	watchdogWarnSeconds = 1.0
)

// cbBudget tracks the command buffer being encoded.
type cbBudget struct {
	maxBytes int64
	maxCmds  int
	bytes    int64
	cmds     int
}

// newBudget returns the budget, in MiB from env (METALPROVE_METAL_CB_MB) when it is set.
func newBudget(env string) (cbBudget, error) {
	b := cbBudget{maxBytes: cbBudgetBytes, maxCmds: cbBudgetCommands}
	if env == "" {
		return b, nil
	}
	mb, err := strconv.ParseInt(env, 10, 64)
	if err != nil || mb < 1 || mb > 1<<20 {
		return b, fmt.Errorf("metal: %s=%q: want a whole number of MiB in [1, 1048576]", cbBudgetEnv, env)
	}
	b.maxBytes = mb << 20
	return b, nil
}

// admit accounts a command of cost bytes and reports whether the command buffer being encoded must
// be committed before it (it holds commands and this one would take it past the budget).
func (b *cbBudget) admit(cost int64) (commitFirst bool) {
	if b.cmds > 0 && (b.bytes+cost > b.maxBytes || b.cmds >= b.maxCmds) {
		commitFirst = true
		b.bytes, b.cmds = 0, 0
	}
	b.bytes += cost
	b.cmds++
	return commitFirst
}

// reset starts a new command buffer (after a sync).
func (b *cbBudget) reset() { b.bytes, b.cmds = 0, 0 }

// dispatchCost is the budget cost of a dispatch: the total size of the distinct buffers it binds
// (sizes[i] is the size of the buffer of slot i, ids[i] identifies it; 0 for value slots).
func dispatchCost(ids []uintptr, sizes []int) int64 {
	var cost int64
	for i, id := range ids {
		if id == 0 {
			continue
		}
		dup := false
		for _, prev := range ids[:i] {
			dup = dup || prev == id
		}
		if !dup {
			cost += int64(sizes[i])
		}
	}
	return cost
}

// gpuFamilies are the MTLGPUFamily values the backend reports (MTLDevice.h), newest first within
// each kind; unknown values (Apple10, Metal4 on older systems) are simply not supported.
var gpuFamilies = []struct {
	name string
	id   int64
}{
	{"apple10", 1010}, {"apple9", 1009}, {"apple8", 1008}, {"apple7", 1007}, {"apple6", 1006},
	{"mac2", 2002}, {"metal4", 5002}, {"metal3", 5001},
}

// familyNames lists the names of the families supports says yes to, in gpuFamilies order.
func familyNames(supports func(id int64) bool) []string {
	var out []string
	for _, f := range gpuFamilies {
		if supports(f.id) {
			out = append(out, f.name)
		}
	}
	return out
}
