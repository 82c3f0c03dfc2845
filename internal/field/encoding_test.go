package field

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEncodeFpRoundTrip(t *testing.T) {
	r := newRand(t)
	for _, a := range testFps(r, 1000) {
		b := AppendFp([]byte{0xAA}, a)
		if len(b) != 1+FpBytes || b[0] != 0xAA || binary.LittleEndian.Uint32(b[1:]) != uint32(a) {
			t.Fatalf("AppendFp(%d) = %x", a, b)
		}
		got, err := DecodeFp(b[1:])
		if err != nil || got != a {
			t.Fatalf("DecodeFp(AppendFp(%d)) = %d, %v", a, got, err)
		}
		// Trailing bytes are ignored.
		if got, err := DecodeFp(append(b[1:], 0xFF, 0xFF)); err != nil || got != a {
			t.Fatalf("DecodeFp with trailing bytes = %d, %v", got, err)
		}
	}
	if got := AppendFp(nil, Fp(0x01020304)); !bytes.Equal(got, []byte{4, 3, 2, 1}) {
		t.Fatalf("AppendFp is not little-endian: %x", got)
	}
}

func TestEncodeFp4RoundTrip(t *testing.T) {
	r := newRand(t)
	for _, a := range testFp4s(r, 1000) {
		b := AppendFp4(nil, a)
		if len(b) != Fp4Bytes {
			t.Fatalf("len(AppendFp4) = %d", len(b))
		}
		for i := range 4 {
			if binary.LittleEndian.Uint32(b[4*i:]) != uint32(a[i]) {
				t.Fatalf("AppendFp4(%v): coefficient %d misplaced: %x", a, i, b)
			}
		}
		got, err := DecodeFp4(b)
		if err != nil || got != a {
			t.Fatalf("DecodeFp4(AppendFp4(%v)) = %v, %v", a, got, err)
		}
	}
	if got := AppendFp4(nil, Fp4{1, 2, 3, 4}); !bytes.Equal(got, []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}) {
		t.Fatalf("AppendFp4 order: %x", got)
	}
}

func TestDecodeShortBuffers(t *testing.T) {
	for n := range FpBytes {
		if _, err := DecodeFp(make([]byte, n)); err == nil {
			t.Fatalf("DecodeFp of %d bytes: no error", n)
		}
	}
	for n := range Fp4Bytes {
		if _, err := DecodeFp4(make([]byte, n)); err == nil {
			t.Fatalf("DecodeFp4 of %d bytes: no error", n)
		}
	}
	for _, n := range []int{1, 2, 3, 5, 7, 9} {
		if _, err := DecodeFpSlice(make([]byte, n)); err == nil {
			t.Fatalf("DecodeFpSlice of %d bytes: no error", n)
		}
	}
	if s, err := DecodeFpSlice(nil); err != nil || len(s) != 0 {
		t.Fatalf("DecodeFpSlice(nil) = %v, %v", s, err)
	}
}

var nonCanonical = []uint32{P, P + 1, 2 * P, math.MaxUint32}

func TestDecodeRejectsNonCanonical(t *testing.T) {
	for _, v := range nonCanonical {
		b := binary.LittleEndian.AppendUint32(nil, v)
		_, err := DecodeFp(b)
		var re *RangeError
		if !errors.As(err, &re) || re.Value != v {
			t.Fatalf("DecodeFp(%d): err = %v, want *RangeError", v, err)
		}
		for coef := range 4 {
			buf := AppendFp4(nil, Fp4{1, 2, 3, 4})
			binary.LittleEndian.PutUint32(buf[4*coef:], v)
			got, err := DecodeFp4(buf)
			re = nil
			if !errors.As(err, &re) || re.Value != v || !got.IsZero() {
				t.Fatalf("DecodeFp4 with %d in coefficient %d: %v, %v", v, coef, got, err)
			}
		}
	}
}

func TestDecodeFpSlice(t *testing.T) {
	r := newRand(t)
	want := testFps(r, 100)
	var buf []byte
	for _, a := range want {
		buf = AppendFp(buf, a)
	}
	got, err := DecodeFpSlice(buf)
	if err != nil || len(got) != len(want) {
		t.Fatalf("DecodeFpSlice: len %d, %v", len(got), err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("DecodeFpSlice[%d] = %d, want %d", i, got[i], want[i])
		}
	}
	for _, v := range nonCanonical {
		for _, idx := range []int{0, 7, len(want) - 1} {
			bad := bytes.Clone(buf)
			binary.LittleEndian.PutUint32(bad[4*idx:], v)
			out, err := DecodeFpSlice(bad)
			var re *RangeError
			if out != nil || !errors.As(err, &re) || re.Value != v {
				t.Fatalf("DecodeFpSlice with %d at %d: %v, %v", v, idx, out, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "element "+itoa(idx)+" ") || !strings.Contains(msg, "byte offset "+itoa(4*idx)) {
				t.Fatalf("DecodeFpSlice error %q does not name element %d / offset %d", msg, idx, 4*idx)
			}
		}
	}
	// The first bad element is reported.
	bad := bytes.Clone(buf)
	binary.LittleEndian.PutUint32(bad[4*3:], P)
	binary.LittleEndian.PutUint32(bad[4*1:], P+5)
	_, err = DecodeFpSlice(bad)
	var re *RangeError
	if !errors.As(err, &re) || re.Value != P+5 || !strings.Contains(err.Error(), "element 1 ") {
		t.Fatalf("DecodeFpSlice did not report the first bad element: %v", err)
	}
}

func itoa(i int) string { return Fp(i).String() }
