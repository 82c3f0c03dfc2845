package metal

// The decisions of the Metal backend that need no Metal: range checks, when a copy can be a blit.
// They have no build tag, so that their tests run on every OS (no machine of this project has
// Metal); metal_darwin.go calls them.

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

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
