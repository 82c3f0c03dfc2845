package kernels

import (
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// TestCanonicalOf: the Montgomery reduction gives m·2⁻³² mod p (and MontOf's inverse) for the
// edge values and a stride through [0, p).
func TestCanonicalOf(t *testing.T) {
	check := func(m uint32) {
		if got, want := CanonicalOf(m), field.Fp(m).Mul(rInv); got != want {
			t.Fatalf("CanonicalOf(%d) = %d, want %d", m, got, want)
		}
		if MontOf(CanonicalOf(m)) != m {
			t.Fatalf("MontOf(CanonicalOf(%d)) = %d", m, MontOf(CanonicalOf(m)))
		}
	}
	for _, m := range []uint32{0, 1, 2, field.P - 1, field.P - 2, 0x0ffffffe} {
		check(m)
	}
	for m := uint32(3); m < field.P; m += 99991 {
		check(m)
	}
}
