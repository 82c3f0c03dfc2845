package field

import (
	"fmt"
	"math/bits"
)

// W is the non-residue of the extension: X^4 = W.
const W Fp = 11

// Fp4 is an element c0 + c1·X + c2·X² + c3·X³ of Fp[X]/(X^4 − 11).
type Fp4 [4]Fp

// Fp4 constants.
var (
	Fp4Zero = Fp4{}
	Fp4One  = Fp4{1, 0, 0, 0}
)

// Lift embeds a base element: x ↦ [x, 0, 0, 0].
func Lift(x Fp) Fp4 { return Fp4{x, 0, 0, 0} }

// IsZero reports whether a == 0.
func (a Fp4) IsZero() bool { return a == Fp4{} }

// IsBase reports whether a lies in the base field (components 1..3 zero).
func (a Fp4) IsBase() bool { return a[1] == 0 && a[2] == 0 && a[3] == 0 }

// String formats a as [c0 c1 c2 c3].
func (a Fp4) String() string { return fmt.Sprintf("[%d %d %d %d]", a[0], a[1], a[2], a[3]) }

// Add returns a + b.
func (a Fp4) Add(b Fp4) Fp4 {
	return Fp4{a[0].Add(b[0]), a[1].Add(b[1]), a[2].Add(b[2]), a[3].Add(b[3])}
}

// Sub returns a − b.
func (a Fp4) Sub(b Fp4) Fp4 {
	return Fp4{a[0].Sub(b[0]), a[1].Sub(b[1]), a[2].Sub(b[2]), a[3].Sub(b[3])}
}

// Neg returns −a.
func (a Fp4) Neg() Fp4 { return Fp4{a[0].Neg(), a[1].Neg(), a[2].Neg(), a[3].Neg()} }

// Double returns 2a.
func (a Fp4) Double() Fp4 { return a.Add(a) }

// Halve returns a/2 (every coefficient halved).
func (a Fp4) Halve() Fp4 { return Fp4{a[0].Halve(), a[1].Halve(), a[2].Halve(), a[3].Halve()} }

// MulBase returns a·b for a base element b.
func (a Fp4) MulBase(b Fp) Fp4 { return Fp4{a[0].Mul(b), a[1].Mul(b), a[2].Mul(b), a[3].Mul(b)} }

// AddBase returns a + b for a base element b.
func (a Fp4) AddBase(b Fp) Fp4 { return Fp4{a[0].Add(b), a[1], a[2], a[3]} }

// Mul returns a·b, reducing with X^4 = 11 (spec A §1.3). Products are accumulated as uint64 and
// reduced once per coefficient. Bounds (every product < p² < 2^62): the W-scaled inner sums
// (at most three products) are reduced first, so r0, r1, r2 are at most three products plus
// 11(p−1), within reduceMax; r3 is four products (< 2^64) and uses reduce4.
func (a Fp4) Mul(b Fp4) Fp4 {
	a0, a1, a2, a3 := uint64(a[0]), uint64(a[1]), uint64(a[2]), uint64(a[3])
	b0, b1, b2, b3 := uint64(b[0]), uint64(b[1]), uint64(b[2]), uint64(b[3])
	w := uint64(W)
	r0 := a0*b0 + w*uint64(reduce(a1*b3+a2*b2+a3*b1))
	r1 := a0*b1 + a1*b0 + w*uint64(reduce(a2*b3+a3*b2))
	r2 := a0*b2 + a1*b1 + a2*b0 + w*uint64(reduce(a3*b3))
	r3 := a0*b3 + a1*b2 + a2*b1 + a3*b0
	return Fp4{Fp(reduce(r0)), Fp(reduce(r1)), Fp(reduce(r2)), Fp(reduce4(r3))}
}

// Square returns a².
func (a Fp4) Square() Fp4 { return a.Mul(a) }

// Exp returns a^e (a^0 = 1).
func (a Fp4) Exp(e uint64) Fp4 {
	r := Fp4One
	for i := 63 - bits.LeadingZeros64(e); i >= 0; i-- {
		r = r.Square()
		if (e>>uint(i))&1 == 1 {
			r = r.Mul(a)
		}
	}
	return r
}

// Inverse returns a^−1 (and 0 for a = 0). With Y = X², a = E(Y) + X·O(Y) and ā = E − X·O,
// a·ā = b0 + b2·Y lies in Fp[Y]/(Y² − W), whose norm b0² − W·b2² lies in Fp; so
// a^−1 = ā·(b0 − b2·Y) / (b0² − W·b2²) needs one base-field inversion.
func (a Fp4) Inverse() Fp4 {
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	b0 := a0.Square().Add(W.Mul(a2.Square())).Sub(W.Mul(a1.Mul(a3)).Double())
	b2 := a0.Mul(a2).Double().Sub(a1.Square()).Sub(W.Mul(a3.Square()))
	n := b0.Square().Sub(W.Mul(b2.Square()))
	ninv := n.Inverse()
	c0 := b0.Mul(ninv)
	c2 := b2.Mul(ninv).Neg()
	return Fp4{
		a0.Mul(c0).Add(W.Mul(a2.Mul(c2))),
		a1.Mul(c0).Add(W.Mul(a3.Mul(c2))).Neg(),
		a0.Mul(c2).Add(a2.Mul(c0)),
		a1.Mul(c2).Add(a3.Mul(c0)).Neg(),
	}
}

// BatchInverseFp4 writes src[i]^−1 to dst[i] with one extension inversion; zeros map to zero.
// dst and src may be the same slice; they must have equal length.
func BatchInverseFp4(dst, src []Fp4) {
	if len(dst) != len(src) {
		panic("field: BatchInverseFp4 length mismatch")
	}
	if len(src) == 0 {
		return
	}
	prefix := make([]Fp4, len(src))
	acc := Fp4One
	for i, x := range src {
		prefix[i] = acc
		if !x.IsZero() {
			acc = acc.Mul(x)
		}
	}
	inv := acc.Inverse()
	for i := len(src) - 1; i >= 0; i-- {
		x := src[i]
		if x.IsZero() {
			dst[i] = Fp4{}
			continue
		}
		dst[i] = inv.Mul(prefix[i])
		inv = inv.Mul(x)
	}
}

// PowersFp4 returns [1, a, a², …, a^(n−1)].
func PowersFp4(a Fp4, n int) []Fp4 {
	out := make([]Fp4, n)
	// Long lists as eight chains side by side, out[c·m + j] = a^(c·m)·a^j: a product no longer
	// waits for the one before it (the constraint stage waits for λ's thousands of powers).
	const chains = 8
	m := n / chains
	acc := [chains]Fp4{Fp4One}
	if m >= 16 {
		am := a.Exp(uint64(m))
		for c := 1; c < chains; c++ {
			acc[c] = acc[c-1].Mul(am)
		}
		for j := range m {
			for c := range chains {
				out[c*m+j] = acc[c]
				acc[c] = acc[c].Mul(a)
			}
		}
		acc[0] = acc[chains-1] // a^(chains·m)
	} else {
		m = 0
	}
	for i := chains * m; i < n; i++ {
		out[i] = acc[0]
		acc[0] = acc[0].Mul(a)
	}
	return out
}
