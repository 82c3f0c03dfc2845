package postcard

import (
	"errors"
	"strings"
	"testing"
)

func TestVarint(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		bits uint
		want uint64
		err  string // "" for none
	}{
		{[]byte{0}, 32, 0, ""},
		{[]byte{0x7f}, 32, 127, ""},
		{[]byte{0x80, 0x01}, 32, 128, ""},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 32, 1<<32 - 1, ""},
		{[]byte{0xff, 0xff, 0x03}, 16, 1<<16 - 1, ""},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x1f}, 32, 0, "exceeds 32 bits"},
		{[]byte{0xff, 0xff, 0x04}, 16, 0, "exceeds 16 bits"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 32, 0, "longer than 5 bytes"},
		{[]byte{0x80, 0x00}, 32, 0, "overlong"},
		{[]byte{0x81}, 32, 0, "unexpected end"},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 64, 1<<64 - 1, ""},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 64, 0, "exceeds 64 bits"},
	} {
		r := NewReader(tc.in)
		got := r.Varint("v", tc.bits)
		switch err := r.Err(); {
		case tc.err == "" && (err != nil || got != tc.want || r.Remaining() != 0):
			t.Errorf("%x: %d, %v (remaining %d), want %d", tc.in, got, err, r.Remaining(), tc.want)
		case tc.err != "" && (!errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%x: err %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestFlagsLengthsAndVariants(t *testing.T) {
	r := NewReader([]byte{1, 0, 2})
	if !r.Bool("a") || r.Option("b") || r.Bool("c") || !strings.Contains(r.Err().Error(), "bool byte 2") {
		t.Fatalf("bools: %v", r.Err())
	}
	// The first error sticks: later reads give zero values.
	if r.Byte("d") != 0 || r.Offset() != 2 {
		t.Fatalf("after an error: offset %d", r.Offset())
	}
	r = NewReader([]byte{5, 1, 2})
	if n := r.Len("xs", 1, 100); n != 0 || !strings.Contains(r.Err().Error(), "length 5 exceeds") {
		t.Fatalf("a length beyond the bytes left: %d, %v", n, r.Err())
	}
	r = NewReader([]byte{3, 9})
	if v := r.Variant("e", 3); v != 0 || !strings.Contains(r.Err().Error(), "unknown variant 3") {
		t.Fatalf("variant: %d, %v", v, r.Err())
	}
	r = NewReader([]byte{3, 4, 9})
	if a, b := r.Isize("i", 10), r.Isize("j", 10); a != -2 || b != 2 || r.Err() != nil {
		t.Fatalf("zigzag: %d %d %v", a, b, r.Err())
	}
	r.End("x")
	if !strings.Contains(r.Err().Error(), "1 trailing bytes") {
		t.Fatalf("trailing: %v", r.Err())
	}
	r = NewReader([]byte{0x80, 0x01})
	if v := r.Usize("u", 100); v != 0 || !strings.Contains(r.Err().Error(), "exceeds the limit 100") {
		t.Fatalf("usize limit: %d %v", v, r.Err())
	}
}
