package field_test

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

func Example() {
	// Base field: arithmetic modulo p = 2013265921; values are always canonical.
	a := field.New(5)
	b := field.NewInt(-3) // p − 3
	fmt.Println(a.Add(b), a.Mul(b), b.Neg())
	fmt.Println(a.Inverse().Mul(a), field.Two.Halve())

	// Extension field Fp[X]/(X^4 − 11): [c0 c1 c2 c3] = c0 + c1·X + c2·X² + c3·X³.
	x := field.Fp4{0, 1, 0, 0}
	fmt.Println(x.Exp(4)) // X^4 = 11
	c := field.Fp4{1, 2, 3, 4}
	fmt.Println(c.Mul(field.Fp4{5, 6, 7, 8}))
	fmt.Println(c.Mul(c.Inverse()))

	// Wire encoding: canonical little-endian u32 per coefficient; non-canonical input is rejected.
	buf := field.AppendFp4(nil, c)
	back, err := field.DecodeFp4(buf)
	fmt.Println(len(buf), back, err)
	_, err = field.DecodeFp([]byte{0x01, 0x00, 0x00, 0x78}) // 0x78000001 = p
	fmt.Println(err)

	// Output:
	// 2 2013265906 3
	// 1 1
	// [11 0 0 0]
	// [676 588 386 60]
	// [1 0 0 0]
	// 16 [1 2 3 4] <nil>
	// field: value 2013265921 is not canonical (must be < p = 2013265921)
}
