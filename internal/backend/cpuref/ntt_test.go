package cpuref

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

func TestDFTMatchesNaive(t *testing.T) {
	r := newRNG(1)
	for logN := 0; logN <= 10; logN++ {
		n := 1 << logN
		inputs := [][]field.Fp{randVec(r, n), make([]field.Fp, n), make([]field.Fp, n), make([]field.Fp, n)}
		for i := 0; i < n; i++ {
			inputs[2][i] = field.Fp(field.P - 1) // all p−1
		}
		inputs[3][n-1] = 1 // a single 1 at the end: column n−1 of the DFT matrix
		for k, in := range inputs {
			want, err := NaiveDFT(in)
			if err != nil {
				t.Fatal(err)
			}
			got := append([]field.Fp(nil), in...)
			if err := DFT(got); err != nil {
				t.Fatal(err)
			}
			eqVec(t, "DFT", got, want)
			wantInv, _ := NaiveIDFT(in)
			gotInv := append([]field.Fp(nil), in...)
			if err := IDFT(gotInv); err != nil {
				t.Fatal(err)
			}
			eqVec(t, "IDFT", gotInv, wantInv)
			// IDFT∘DFT = id
			if err := IDFT(got); err != nil {
				t.Fatal(err)
			}
			eqVec(t, "IDFT(DFT)", got, in)
			_ = k
		}
	}
}

func TestDFTKnownValues(t *testing.T) {
	// dft(e_1)[i] = g_n^i
	for _, logN := range []int{1, 3, 12} {
		n := 1 << logN
		c := make([]field.Fp, n)
		c[1] = 1
		if err := DFT(c); err != nil {
			t.Fatal(err)
		}
		eqVec(t, "dft(e1)", c, field.RootsOfUnity(logN))
		// dft(1,1,…,1) = (n, 0, …, 0)
		for i := range c {
			c[i] = 1
		}
		_ = DFT(c)
		want := make([]field.Fp, n)
		want[0] = field.Fp(n)
		eqVec(t, "dft(ones)", c, want)
	}
}

func TestDFTBadSizes(t *testing.T) {
	for _, n := range []int{0, 3, 6, 12, 1000} {
		c := make([]field.Fp, n)
		var se *SizeError
		if err := DFT(c); !errors.As(err, &se) {
			t.Errorf("DFT size %d: err %v", n, err)
		}
		if err := IDFT(c); !errors.As(err, &se) {
			t.Errorf("IDFT size %d: err %v", n, err)
		}
		if err := BitReverse(c); err == nil {
			t.Errorf("BitReverse size %d: no error", n)
		}
	}
	if _, err := Log2Exact(1 << 28); err == nil {
		t.Error("2^28 accepted")
	}
	if l, err := Log2Exact(1 << 27); err != nil || l != 27 {
		t.Errorf("2^27: %d %v", l, err)
	}
	if err := DFTColumns(make([]field.Fp, 12), 8); err == nil {
		t.Error("DFTColumns: ragged buffer accepted")
	}
	if err := DFTColumns(make([]field.Fp, 12), 3); err == nil {
		t.Error("DFTColumns: height 3 accepted")
	}
}

func TestBitReverse(t *testing.T) {
	c := fps(0, 1, 2, 3, 4, 5, 6, 7)
	if err := BitReverse(c); err != nil {
		t.Fatal(err)
	}
	eqVec(t, "bitrev", c, fps(0, 4, 2, 6, 1, 5, 3, 7))
	_ = BitReverse(c)
	eqVec(t, "bitrev²", c, fps(0, 1, 2, 3, 4, 5, 6, 7))
	one := fps(9)
	_ = BitReverse(one)
	eqVec(t, "bitrev1", one, fps(9))
}

func TestBatchedEqualsPerColumn(t *testing.T) {
	r := newRNG(2)
	for _, logH := range []int{0, 1, 4, 9} {
		h := 1 << logH
		data := randVec(r, 5*h)
		fw := append([]field.Fp(nil), data...)
		inv := append([]field.Fp(nil), data...)
		if err := DFTColumns(fw, h); err != nil {
			t.Fatal(err)
		}
		if err := IDFTColumns(inv, h); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 5; j++ {
			col := append([]field.Fp(nil), data[j*h:(j+1)*h]...)
			want, _ := NaiveDFT(col)
			eqVec(t, "DFTColumns", fw[j*h:(j+1)*h], want)
			want, _ = NaiveIDFT(col)
			eqVec(t, "IDFTColumns", inv[j*h:(j+1)*h], want)
		}
		blocks := append([]field.Fp(nil), data...)
		if err := IDFTBlocks(blocks, logH); err != nil {
			t.Fatal(err)
		}
		eqVec(t, "IDFTBlocks", blocks, inv)
		if err := DFTBlocks(blocks, logH); err != nil {
			t.Fatal(err)
		}
		eqVec(t, "DFTBlocks∘IDFTBlocks", blocks, data)
	}
}

func TestLargeDFTRoundTrip(t *testing.T) {
	r := newRNG(3)
	logN := 16
	if testing.Short() {
		logN = 12
	}
	in := randVec(r, 1<<logN)
	c := append([]field.Fp(nil), in...)
	_ = DFT(c)
	// spot-check a few outputs against the definition (Horner evaluation at g^i)
	g := field.TwoAdicGenerator(logN)
	for _, i := range []uint64{0, 1, 12345 % (1 << logN), 1<<logN - 1} {
		x := g.Exp(i)
		var acc field.Fp
		for j := len(in) - 1; j >= 0; j-- {
			acc = acc.Mul(x).Add(in[j])
		}
		if c[i] != acc {
			t.Fatalf("DFT 2^%d [%d] = %d, want %d", logN, i, c[i], acc)
		}
	}
	_ = IDFT(c)
	eqVec(t, "roundtrip 2^16", c, in)
}
