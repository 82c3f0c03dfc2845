package field

import (
	"fmt"
	"math/bits"
)

// twoAdicGenerators[b] has multiplicative order 2^b; twoAdicGenerators[b]^2 = twoAdicGenerators[b−1].
// Source: Plonky3 v0.4.3 baby-bear TWO_ADIC_GENERATORS, as listed in the project spec
// (protocol-a.md §1.4 and poseidon2_babybear16_constants.txt, section BABYBEAR_TWO_ADIC_GENERATORS).
var twoAdicGenerators = [TwoAdicity + 1]Fp{
	0x1, 0x78000000, 0x67055c21, 0x5ee99486, 0x0bb4c4e4, 0x2d4cc4da, 0x669d6090,
	0x17b56c64, 0x67456167, 0x688442f9, 0x145e952d, 0x4fe61226, 0x4c734715,
	0x11c33e2a, 0x62c3d2b1, 0x77cad399, 0x54c131f4, 0x4cabd6a6, 0x5cf5713f,
	0x3e9430e8, 0x0ba067a3, 0x18adc27d, 0x21fd55bc, 0x4b859b3d, 0x3bd57996,
	0x4483d85a, 0x3a26eef8, 0x1a427a41,
}

// TwoAdicGenerator returns g_bits, the generator of the subgroup of order 2^bits used by every
// DFT and domain of the protocol. It panics for bits > 27: no such subgroup exists, so asking is a
// programming error.
func TwoAdicGenerator(bits int) Fp {
	if bits < 0 || bits > TwoAdicity {
		panic(fmt.Sprintf("field: no two-adic subgroup of order 2^%d", bits))
	}
	return twoAdicGenerators[bits]
}

// RootsOfUnity returns [1, g, g², …, g^(2^bits − 1)] for g = TwoAdicGenerator(bits), i.e. the
// subgroup of order 2^bits in natural order.
func RootsOfUnity(bits int) []Fp {
	return Powers(TwoAdicGenerator(bits), 1<<bits)
}

// Log2 returns k with 2^k = n for a power of two n in [1, 2^TwoAdicity] (every size of a
// domain, trace or table in the protocol), and ok = false for any other n. It is the project's
// one log2 of a size.
func Log2(n int) (k int, ok bool) {
	if n <= 0 || n&(n-1) != 0 || n > 1<<TwoAdicity {
		return 0, false
	}
	return bits.TrailingZeros(uint(n)), true
}
