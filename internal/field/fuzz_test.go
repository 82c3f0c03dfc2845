package field

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"testing"
)

var fuzzEdges = append(append([]uint32(nil), edgeValues...), P, P+1, 2*P, math.MaxUint32)

func FuzzFpArith(f *testing.F) {
	for i, a := range fuzzEdges {
		f.Add(a, fuzzEdges[(i*7+3)%len(fuzzEdges)])
		f.Add(a, a)
	}
	f.Fuzz(func(t *testing.T, x, y uint32) {
		a, b := New(x), New(y)
		A := new(big.Int).Mod(new(big.Int).SetUint64(uint64(x)), bigP)
		B := new(big.Int).Mod(new(big.Int).SetUint64(uint64(y)), bigP)
		if uint64(a) != A.Uint64() || uint64(b) != B.Uint64() {
			t.Fatalf("New(%d), New(%d) = %d, %d", x, y, a, b)
		}
		check := func(name string, got Fp, want *big.Int) {
			t.Helper()
			want.Mod(want, bigP)
			if uint32(got) >= P || uint64(got) != want.Uint64() {
				t.Fatalf("%s(%d, %d) = %d, want %v", name, a, b, got, want)
			}
		}
		check("Mul", a.Mul(b), new(big.Int).Mul(A, B))
		check("Add", a.Add(b), new(big.Int).Add(A, B))
		check("Sub", a.Sub(b), new(big.Int).Sub(A, B))
		if a == 0 {
			check("Inverse", a.Inverse(), new(big.Int))
		} else {
			check("Inverse", a.Inverse(), new(big.Int).ModInverse(A, bigP))
		}
	})
}

func FuzzFp4Mul(f *testing.F) {
	n := len(fuzzEdges)
	for i := range n {
		e := func(k int) uint32 { return fuzzEdges[(i+k*5)%n] }
		f.Add(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7))
		v := fuzzEdges[i]
		f.Add(v, v, v, v, v, v, v, v)
	}
	for _, c := range fp4HardCases(f) {
		a, b := c[0], c[1]
		f.Add(uint32(a[0]), uint32(a[1]), uint32(a[2]), uint32(a[3]), uint32(b[0]), uint32(b[1]), uint32(b[2]), uint32(b[3]))
	}
	f.Fuzz(func(t *testing.T, a0, a1, a2, a3, b0, b1, b2, b3 uint32) {
		a := Fp4{New(a0), New(a1), New(a2), New(a3)}
		b := Fp4{New(b0), New(b1), New(b2), New(b3)}
		got := a.Mul(b)
		if want := bigFp4Mul(a, b); got != want {
			t.Fatalf("%v · %v = %v, want %v", a, b, got, want)
		}
		if !a.IsZero() && a.Mul(a.Inverse()) != Fp4One {
			t.Fatalf("%v · %v^-1 != 1", a, a)
		}
	})
}

func FuzzDecodeFp4(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(AppendFp4(nil, Fp4{1, 2, 3, 4}))
	f.Add(append(AppendFp4(nil, Fp4{Fp(P - 1), 0, Fp(1 << 27), 11}), 0xFF))
	for _, v := range []uint32{P, P + 1, math.MaxUint32} {
		for c := range 4 {
			var x [4]uint32
			x[c] = v
			buf := AppendFp(AppendFp(AppendFp(AppendFp(nil, Fp(x[0])), Fp(x[1])), Fp(x[2])), Fp(x[3]))
			f.Add(buf)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeFp4(b)
		if err != nil {
			if !a.IsZero() {
				t.Fatalf("error %v with non-zero value %v", err, a)
			}
			var re *RangeError
			if len(b) >= Fp4Bytes && !errors.As(err, &re) {
				t.Fatalf("16+ bytes but error is not a *RangeError: %v", err)
			}
			return
		}
		checkCanon4(t, "DecodeFp4", a)
		if len(b) < Fp4Bytes || !bytes.Equal(AppendFp4(nil, a), b[:Fp4Bytes]) {
			t.Fatalf("DecodeFp4(%x) = %v does not re-encode to the input", b, a)
		}
	})
}
