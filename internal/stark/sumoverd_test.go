package stark

import (
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// TestSumOverDProduct: the sum over D of a product from its coefficients at multiples of N
// equals sumOverD of the whole product, for lengths around N and factors with zero
// coefficients (an AIR without interactions) or empty.
func TestSumOverDProduct(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	rnd := func(n int, zeros bool) []field.Fp4 {
		v := make([]field.Fp4, n)
		for i := range v {
			if zeros && r.IntN(3) == 0 {
				continue
			}
			for k := range v[i] {
				v[i][k] = field.New(r.Uint32())
			}
		}
		return v
	}
	for _, n := range []int{1, 2, 4, 16} {
		for _, la := range []int{0, 1, n - 1, n, 3*n + 1, 46} {
			for _, lb := range []int{0, 1, n, 2*n - 1, 16} {
				for _, zeros := range []bool{false, true} {
					a, b := rnd(la, zeros), rnd(lb, false)
					if got, want := sumOverDProduct(a, b, n), sumOverD(polyMul(a, b), n); got != want {
						t.Fatalf("N %d, lengths %d and %d (zeros %v): %v, want %v", n, la, lb, zeros, got, want)
					}
				}
			}
		}
	}
}
