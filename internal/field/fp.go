package field

import (
	"fmt"
	"math/bits"
)

// P is the BabyBear modulus 2^31 − 2^27 + 1.
const P uint32 = 2013265921

// TwoAdicity is the largest b with 2^b dividing p − 1.
const TwoAdicity = 27

// Fp is a BabyBear element: its canonical value in [0, P).
type Fp uint32

// Constants of the field.
const (
	Zero Fp = 0
	One  Fp = 1
	Two  Fp = 2
	// Generator is Plonky3's multiplicative generator of F* (spec A §1.1).
	Generator Fp = 31
	// InvTwo is (p+1)/2.
	InvTwo Fp = 1006632961
)

// New returns v mod p.
func New(v uint32) Fp {
	if v >= P {
		v -= P // v < 2^32 < 3p, so at most two subtractions
		if v >= P {
			v -= P
		}
	}
	return Fp(v)
}

// NewU64 returns v mod p.
func NewU64(v uint64) Fp { return Fp(v % uint64(P)) }

// NewInt returns v mod p for a signed integer (negative values wrap to p − |v| mod p).
func NewInt(v int64) Fp {
	r := v % int64(P)
	if r < 0 {
		r += int64(P)
	}
	return Fp(r)
}

// FromCanonical validates a canonical value: v ≥ p is an error.
func FromCanonical(v uint32) (Fp, error) {
	if v >= P {
		return 0, &RangeError{Value: v}
	}
	return Fp(v), nil
}

// RangeError reports a value that is not a canonical field element.
type RangeError struct{ Value uint32 }

func (e *RangeError) Error() string {
	return fmt.Sprintf("field: value %d is not canonical (must be < p = %d)", e.Value, P)
}

// Uint32 returns the canonical value.
func (a Fp) Uint32() uint32 { return uint32(a) }

// IsZero reports whether a == 0.
func (a Fp) IsZero() bool { return a == 0 }

// String formats the canonical value in decimal.
func (a Fp) String() string { return fmt.Sprint(uint32(a)) }

// Add returns a + b.
func (a Fp) Add(b Fp) Fp {
	s := uint32(a) + uint32(b) // < 2p < 2^32
	if s >= P {
		s -= P
	}
	return Fp(s)
}

// Sub returns a − b.
func (a Fp) Sub(b Fp) Fp {
	d := uint32(a) - uint32(b)
	if uint32(a) < uint32(b) {
		d += P
	}
	return Fp(d)
}

// Neg returns −a.
func (a Fp) Neg() Fp {
	if a == 0 {
		return 0
	}
	return Fp(P - uint32(a))
}

// Double returns 2a.
func (a Fp) Double() Fp { return a.Add(a) }

// Halve returns a/2.
func (a Fp) Halve() Fp {
	v := uint32(a)
	if v&1 == 0 {
		return Fp(v >> 1)
	}
	return Fp((v >> 1) + (P+1)/2) // (v + p)/2 without overflow
}

// Mul returns a·b.
func (a Fp) Mul(b Fp) Fp { return Fp(reduce(uint64(a) * uint64(b))) }

// Barrett reduction with an exact quotient. barrettM = ⌈2^93/p⌉ (63 bits) and
// barrettErr = barrettM·p − 2^93. For x < 2^93/barrettErr ≈ 1.3846·10^19 (which covers any
// sum of three products of canonical values, 3(p−1)² ≈ 1.216·10^19),
// ⌊x·barrettM / 2^93⌋ = ⌊x/p⌋, because x·barrettErr/2^93 < 1. This is one 64×64→128 multiply,
// a shift, a multiply and a subtraction; the compiler's code for x % p has to handle every
// x < 2^64 (a 65-bit magic number) and is measurably slower.
const (
	barrettM   = 4919131750545854593
	barrettErr = 715231361
)

// reduce returns x mod p for x ≤ reduceMax.
func reduce(x uint64) uint32 {
	hi, _ := bits.Mul64(x, barrettM)
	return uint32(x - (hi>>29)*uint64(P))
}

// reduceMax is the largest input reduce handles exactly: ⌊(2^93 − 1)/barrettErr⌋.
const reduceMax = 13846596855647444406

// reduce4 returns x mod p for any x < 2^64 (in particular a sum of four products of canonical
// values). The quotient estimate of reduce may then exceed ⌊x/p⌋ by one (x·barrettErr/2^93 <
// 2^64·barrettErr/2^93 < 1.34), never more, so a negative remainder is corrected by adding p.
func reduce4(x uint64) uint32 {
	hi, _ := bits.Mul64(x, barrettM)
	r := x - (hi>>29)*uint64(P)
	if int64(r) < 0 {
		r += uint64(P)
	}
	return uint32(r)
}

// Square returns a².
func (a Fp) Square() Fp { return a.Mul(a) }

// Exp returns a^e (0^0 = 1).
func (a Fp) Exp(e uint64) Fp {
	r := One
	for i := 63 - bits.LeadingZeros64(e); i >= 0; i-- {
		r = r.Square()
		if (e>>uint(i))&1 == 1 {
			r = r.Mul(a)
		}
	}
	return r
}

// Inverse returns a^−1, and 0 for a = 0 (callers that must reject zero check IsZero first).
func (a Fp) Inverse() Fp { return a.Exp(uint64(P) - 2) }

// BatchInverse writes src[i]^−1 to dst[i] with one field inversion (Montgomery's trick).
// Zeros map to zero. dst and src may be the same slice; they must have equal length.
func BatchInverse(dst, src []Fp) {
	if len(dst) != len(src) {
		panic("field: BatchInverse length mismatch")
	}
	if len(src) == 0 {
		return
	}
	prefix := make([]Fp, len(src))
	acc := One
	for i, x := range src {
		prefix[i] = acc
		if x != 0 {
			acc = acc.Mul(x)
		}
	}
	inv := acc.Inverse()
	for i := len(src) - 1; i >= 0; i-- {
		x := src[i]
		if x == 0 {
			dst[i] = 0
			continue
		}
		dst[i] = inv.Mul(prefix[i])
		inv = inv.Mul(x)
	}
}

// Powers returns [1, a, a², …, a^(n−1)].
func Powers(a Fp, n int) []Fp {
	out := make([]Fp, n)
	acc := One
	for i := range out {
		out[i] = acc
		acc = acc.Mul(a)
	}
	return out
}
