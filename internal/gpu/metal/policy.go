package metal

// The decisions of the Metal backend that need no Metal: which kernel library to load, range
// checks, when a copy can be a blit. They have no build tag, so that their tests run on every OS
// (no machine of this project has Metal); metal_darwin.go calls them.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
