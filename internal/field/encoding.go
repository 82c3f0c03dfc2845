package field

import (
	"encoding/binary"
	"fmt"
)

// Encoded sizes in bytes.
const (
	FpBytes  = 4
	Fp4Bytes = 16
)

// AppendFp appends the canonical little-endian u32 encoding of a.
func AppendFp(b []byte, a Fp) []byte { return binary.LittleEndian.AppendUint32(b, uint32(a)) }

// AppendFp4 appends c0, c1, c2, c3, each as canonical little-endian u32.
func AppendFp4(b []byte, a Fp4) []byte {
	for _, c := range a {
		b = AppendFp(b, c)
	}
	return b
}

// DecodeFp reads one canonical element from the first 4 bytes of b.
func DecodeFp(b []byte) (Fp, error) {
	if len(b) < FpBytes {
		return 0, fmt.Errorf("field: need %d bytes for an element, have %d", FpBytes, len(b))
	}
	return FromCanonical(binary.LittleEndian.Uint32(b))
}

// DecodeFp4 reads one extension element from the first 16 bytes of b.
func DecodeFp4(b []byte) (Fp4, error) {
	if len(b) < Fp4Bytes {
		return Fp4{}, fmt.Errorf("field: need %d bytes for an extension element, have %d", Fp4Bytes, len(b))
	}
	var r Fp4
	for i := range r {
		c, err := DecodeFp(b[4*i:])
		if err != nil {
			return Fp4{}, fmt.Errorf("coefficient %d: %w", i, err)
		}
		r[i] = c
	}
	return r, nil
}

// DecodeFpSlice decodes len(b)/4 elements; len(b) must be a multiple of 4. The error names the
// index of the first non-canonical value.
func DecodeFpSlice(b []byte) ([]Fp, error) {
	if len(b)%FpBytes != 0 {
		return nil, fmt.Errorf("field: %d bytes is not a whole number of elements", len(b))
	}
	out := make([]Fp, len(b)/FpBytes)
	for i := range out {
		v := binary.LittleEndian.Uint32(b[FpBytes*i:])
		if v >= P {
			return nil, fmt.Errorf("element %d (byte offset %d): %w", i, FpBytes*i, &RangeError{Value: v})
		}
		out[i] = Fp(v)
	}
	return out, nil
}
