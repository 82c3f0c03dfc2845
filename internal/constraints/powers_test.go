package constraints

import (
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// TestPowersFp4MatchesSequential: the chunked powers (long lists) are field.PowersFp4's, at
// the chunk boundaries too.
func TestPowersFp4MatchesSequential(t *testing.T) {
	a := field.Fp4{12345, 678, 91011, 1213}
	for _, n := range []int{0, 1, 5, 2048, 2049, 3182, 5000} {
		x, y := field.PowersFp4(a, n), powersFp4(a, n)
		for i := range x {
			if x[i] != y[i] {
				t.Fatal(n, i)
			}
		}
		if len(x) != len(y) {
			t.Fatal(n)
		}
	}
}
