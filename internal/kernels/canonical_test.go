package kernels

import (
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// TestCanonicalOf: the Montgomery reduction gives m·2⁻³² mod p (and MontOf's inverse) for the
// edge values and a stride through [0, p).
func TestCanonicalOf(t *testing.T) {
	check := func(m Mont) {
		if got, want := CanonicalOf(m), field.Fp(uint32(m)).Mul(rInv); got != want {
			t.Fatalf("CanonicalOf(%d) = %d, want %d", m, got, want)
		}
		if MontOf(CanonicalOf(m)) != m {
			t.Fatalf("MontOf(CanonicalOf(%d)) = %d", m, MontOf(CanonicalOf(m)))
		}
	}
	for _, m := range []Mont{0, 1, 2, Mont(field.P - 1), Mont(field.P - 2), 0x0ffffffe} {
		check(m)
	}
	for m := Mont(3); m < Mont(field.P); m += 99991 {
		check(m)
	}
}
