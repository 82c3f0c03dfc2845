// Package postcard owns the strict reading of postcard bytes (the serde format OpenVM writes its
// keys in, postcard 1.x): unsigned LEB128 varints for u16/u32/u64/usize, zigzag varints for
// signed integers, one byte for u8, bool and Option tags, a varint length before a Vec, a varint
// variant index before an enum's fields. It is stricter than postcard itself in one way: an
// overlong varint (one with a redundant zero high byte) is rejected, so that bytes that decode
// re-encode to themselves. Lengths are bounded by the bytes left before anything is allocated.
package postcard

import (
	"errors"
	"fmt"
)

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("postcard: malformed bytes")

// Reader reads postcard values from a byte slice. The first error sticks: later reads return
// zero values, and Err reports it with the offset where it happened.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error, nil if none.
func (r *Reader) Err() error { return r.err }

// Offset is the number of bytes read so far.
func (r *Reader) Offset() int { return r.off }

// Remaining is the number of bytes not yet read.
func (r *Reader) Remaining() int { return len(r.b) - r.off }

// Failf records an error at the current offset (what names the value being read) unless one is
// recorded already.
func (r *Reader) Failf(what, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d: %s", ErrFormat, what, r.off, fmt.Sprintf(format, args...))
	}
}

// End fails when bytes are left over (a value must span its input exactly).
func (r *Reader) End(what string) {
	if r.err == nil && r.off != len(r.b) {
		r.Failf(what, "%d trailing bytes", len(r.b)-r.off)
	}
}

// Byte reads one raw byte (u8).
func (r *Reader) Byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.Failf(what, "unexpected end of input")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// Bool reads a bool: one byte, 0 or 1.
func (r *Reader) Bool(what string) bool { return r.flag(what, "bool byte") }

// Option reads an Option tag: false for None, true for Some (one byte, 0 or 1).
func (r *Reader) Option(what string) bool { return r.flag(what, "option tag") }

// flag reads one byte that must be 0 or 1 (kind names it in the error).
func (r *Reader) flag(what, kind string) bool {
	c := r.Byte(what)
	if c > 1 {
		r.off--
		r.Failf(what, "%s %d (want 0 or 1)", kind, c)
		return false
	}
	return c == 1
}

// Varint reads an unsigned LEB128 varint of a value of bits bits (16, 32 or 64): at most
// ceil(bits/7) bytes, the value within bits, no redundant high byte.
func (r *Reader) Varint(what string, bits uint) uint64 {
	if r.err != nil {
		return 0
	}
	maxBytes := int((bits + 6) / 7)
	var v uint64
	start := r.off
	for i := 0; ; i++ {
		if i == maxBytes {
			r.off = start
			r.Failf(what, "varint longer than %d bytes", maxBytes)
			return 0
		}
		if r.off >= len(r.b) {
			r.Failf(what, "unexpected end of input in a varint")
			return 0
		}
		c := r.b[r.off]
		r.off++
		shift := uint(7 * i)
		part := uint64(c & 0x7f)
		if shift+7 > bits && part>>(bits-shift) != 0 {
			r.off = start
			r.Failf(what, "varint exceeds %d bits", bits)
			return 0
		}
		v |= part << shift
		if c&0x80 == 0 {
			if i > 0 && c == 0 {
				r.off = start
				r.Failf(what, "overlong varint")
				return 0
			}
			return v
		}
	}
}

// U16 and U32 read varints of those widths.
func (r *Reader) U16(what string) uint16 { return uint16(r.Varint(what, 16)) }
func (r *Reader) U32(what string) uint32 { return uint32(r.Varint(what, 32)) }

// Usize reads a usize varint (64 bits: OpenVM writes its keys on 64-bit hosts) that must not
// exceed limit.
func (r *Reader) Usize(what string, limit int) int {
	v := r.Varint(what, 64)
	if r.err == nil && v > uint64(limit) {
		r.Failf(what, "value %d exceeds the limit %d", v, limit)
		return 0
	}
	return int(v)
}

// Isize reads a zigzag varint (isize) within [-limit, limit].
func (r *Reader) Isize(what string, limit int) int {
	u := r.Varint(what, 64)
	v := int64(u>>1) ^ -int64(u&1)
	if r.err == nil && (v > int64(limit) || v < -int64(limit)) {
		r.Failf(what, "value %d outside ±%d", v, limit)
		return 0
	}
	return int(v)
}

// Len reads a Vec length whose elements take at least minElemBytes each (≥ 1), so that it is
// bounded by the bytes left; it also must not exceed limit.
func (r *Reader) Len(what string, minElemBytes, limit int) int {
	n := r.Usize(what+" length", limit)
	if r.err == nil && n > r.Remaining()/max(minElemBytes, 1) {
		r.Failf(what, "length %d exceeds what the %d bytes left can hold", n, r.Remaining())
		return 0
	}
	return n
}

// Variant reads an enum variant index (a u32 varint) below n.
func (r *Reader) Variant(what string, n uint32) uint32 {
	v := r.U32(what + " variant")
	if r.err == nil && v >= n {
		r.Failf(what, "unknown variant %d (this build knows %d)", v, n)
		return 0
	}
	return v
}
