package poseidon2

import "github.com/metalprove/metalprove/internal/field"

// Constants returns copies of the permutation's tables (canonical form), for implementations
// on other devices (internal/kernels uploads them in Montgomery form): the round constants of
// the 4 initial full rounds, of the 13 partial rounds, of the 4 final full rounds, and the
// diagonal V of the internal layer M_I = J + diag(V).
func Constants() (extInitial [4][Width]field.Fp, internal [13]field.Fp, extFinal [4][Width]field.Fp, diag [Width]field.Fp) {
	return rcExternalInitial, rcInternal, rcExternalFinal, internalDiag
}
