package selftest

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

func fieldChecks() []Check {
	return []Check{
		{Name: "field/fp4-kat", Run: checkFp4KAT},
	}
}

// checkFp4KAT: extension multiplication and inverse against the spec's vectors
// (poseidon2_babybear16_vectors.txt §E2).
func checkFp4KAT() error {
	a := field.Fp4{1, 2, 3, 4}
	if got, want := a.Mul(field.Fp4{5, 6, 7, 8}), (field.Fp4{676, 588, 386, 60}); got != want {
		return fmt.Errorf("[1 2 3 4]·[5 6 7 8] = %v, want %v", got, want)
	}
	if got, want := a.Inverse(), (field.Fp4{1587469345, 920666518, 1160282443, 647153706}); got != want {
		return fmt.Errorf("[1 2 3 4]^-1 = %v, want %v", got, want)
	}
	return nil
}
