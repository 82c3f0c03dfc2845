package cpuref

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/metalprove/metalprove/internal/field"
)

// MaxLogSize is the largest supported log2 transform size: BabyBear has two-adicity 27.
const MaxLogSize = field.TwoAdicity

// SizeError reports a transform or matrix size that is not a power of two in [1, 2^MaxLogSize]
// (or otherwise does not fit the operation).
type SizeError struct {
	Op   string
	Size int
	Why  string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("cpuref: %s: bad size %d: %s", e.Op, e.Size, e.Why)
}

// Log2Exact returns log2(n) for a power of two n in [1, 2^MaxLogSize], and an error otherwise.
func Log2Exact(n int) (int, error) {
	l, ok := field.Log2(n)
	if !ok {
		return 0, &SizeError{Op: "log2", Size: n, Why: fmt.Sprintf("not a power of two in [1, 2^%d]", MaxLogSize)}
	}
	return l, nil
}

// BitReverseIndex reverses the low logN bits of i.
func BitReverseIndex(i uint, logN int) uint {
	if logN == 0 {
		return 0
	}
	return bits.Reverse(i) >> (bits.UintSize - logN)
}

// BitReverse permutes c in place so that c'[i] = c[bitrev(i)]; len(c) must be a power of two.
func BitReverse(c []field.Fp) error {
	logN, err := Log2Exact(len(c))
	if err != nil {
		return err
	}
	bitReverse(c, logN)
	return nil
}

func bitReverse(c []field.Fp, logN int) {
	for i := range c {
		j := int(BitReverseIndex(uint(i), logN))
		if i < j {
			c[i], c[j] = c[j], c[i]
		}
	}
}

// twiddles holds, for one size 2^logN, the first half of the powers of g_n and of g_n^{-1}.
type twiddles struct {
	fwd, inv []field.Fp
}

const maxCachedLog = 20

var (
	twMu    sync.Mutex
	twCache [maxCachedLog + 1]*twiddles
)

func getTwiddles(logN int) *twiddles {
	build := func() *twiddles {
		half := (1 << logN) / 2
		g := field.TwoAdicGenerator(logN)
		return &twiddles{fwd: field.Powers(g, half), inv: field.Powers(g.Inverse(), half)}
	}
	if logN > maxCachedLog {
		return build()
	}
	twMu.Lock()
	defer twMu.Unlock()
	if twCache[logN] == nil {
		twCache[logN] = build()
	}
	return twCache[logN]
}

// ntt is the radix-2 decimation-in-time transform: bit-reverse the input, then log n butterfly
// stages. roots[i] = w^i for i < n/2 where w is a primitive n-th root of unity; the result is
// out[i] = Σ_j c_j w^{ij} in natural order.
func ntt(c []field.Fp, logN int, roots []field.Fp) {
	n := len(c)
	if n <= 1 {
		return
	}
	bitReverse(c, logN)
	for half := 1; half < n; half <<= 1 {
		step := n / (2 * half) // twiddle for position j is w_{2·half}^j = w^{j·step}
		for start := 0; start < n; start += 2 * half {
			a := c[start : start+half]
			b := c[start+half : start+2*half]
			for j := range a {
				t := b[j].Mul(roots[j*step])
				u := a[j]
				a[j] = u.Add(t)
				b[j] = u.Sub(t)
			}
		}
	}
}

// DFT replaces c by its DFT over the subgroup of order n = len(c), natural order in and out:
// c'[i] = Σ_j c_j·g_n^{ij}. n must be a power of two ≤ 2^27.
func DFT(c []field.Fp) error {
	logN, err := Log2Exact(len(c))
	if err != nil {
		return err
	}
	ntt(c, logN, getTwiddles(logN).fwd)
	return nil
}

// IDFT is the exact inverse of DFT (including the 1/n factor): c'[j] = n^{-1} Σ_i c_i·g_n^{-ij}.
func IDFT(c []field.Fp) error {
	logN, err := Log2Exact(len(c))
	if err != nil {
		return err
	}
	ntt(c, logN, getTwiddles(logN).inv)
	scale(c, invPow2(logN))
	return nil
}

func invPow2(logN int) field.Fp {
	return field.Fp(1 << logN).Inverse()
}

func scale(c []field.Fp, s field.Fp) {
	if s == field.One {
		return
	}
	for i := range c {
		c[i] = c[i].Mul(s)
	}
}

// checkColumns validates a column-major buffer of columns of the given height.
func checkColumns(op string, data []field.Fp, height int) (int, error) {
	logH, err := Log2Exact(height)
	if err != nil {
		return 0, &SizeError{Op: op, Size: height, Why: "height " + err.(*SizeError).Why}
	}
	if len(data)%height != 0 {
		return 0, &SizeError{Op: op, Size: len(data), Why: fmt.Sprintf("not a multiple of the height %d", height)}
	}
	return logH, nil
}

// DFTColumns applies DFT to every column of the column-major buffer data (consecutive runs of
// height elements). height must be a power of two and divide len(data).
func DFTColumns(data []field.Fp, height int) error {
	logH, err := checkColumns("DFTColumns", data, height)
	if err != nil {
		return err
	}
	tw := getTwiddles(logH)
	for off := 0; off < len(data); off += height {
		ntt(data[off:off+height], logH, tw.fwd)
	}
	return nil
}

// IDFTColumns applies IDFT to every column of the column-major buffer data.
func IDFTColumns(data []field.Fp, height int) error {
	logH, err := checkColumns("IDFTColumns", data, height)
	if err != nil {
		return err
	}
	tw := getTwiddles(logH)
	s := invPow2(logH)
	for off := 0; off < len(data); off += height {
		col := data[off : off+height]
		ntt(col, logH, tw.inv)
		scale(col, s)
	}
	return nil
}

// IDFTBlocks applies IDFT independently to each consecutive block of 2^logBlock elements of data
// (the batched small NTT of round 0 and of the RS message, spec A §5.5 step 1: block x is
// q[2^l_skip·x .. 2^l_skip·(x+1)), transformed over D = ⟨g_{l_skip}⟩, natural order).
// len(data) must be a multiple of 2^logBlock.
func IDFTBlocks(data []field.Fp, logBlock int) error {
	if logBlock < 0 || logBlock > MaxLogSize {
		return &SizeError{Op: "IDFTBlocks", Size: logBlock, Why: "log block size out of range"}
	}
	return IDFTColumns(data, 1<<logBlock)
}

// DFTBlocks applies DFT independently to each consecutive block of 2^logBlock elements.
func DFTBlocks(data []field.Fp, logBlock int) error {
	if logBlock < 0 || logBlock > MaxLogSize {
		return &SizeError{Op: "DFTBlocks", Size: logBlock, Why: "log block size out of range"}
	}
	return DFTColumns(data, 1<<logBlock)
}

// NaiveDFT returns Σ_j c_j·g_n^{ij} for every i by the O(n²) definition (for tests only).
// len(c) must be a power of two.
func NaiveDFT(c []field.Fp) ([]field.Fp, error) {
	logN, err := Log2Exact(len(c))
	if err != nil {
		return nil, err
	}
	return naiveTransform(c, field.TwoAdicGenerator(logN)), nil
}

// NaiveIDFT returns n^{-1} Σ_i c_i·g_n^{-ij} by the O(n²) definition (for tests only).
func NaiveIDFT(c []field.Fp) ([]field.Fp, error) {
	logN, err := Log2Exact(len(c))
	if err != nil {
		return nil, err
	}
	out := naiveTransform(c, field.TwoAdicGenerator(logN).Inverse())
	scale(out, invPow2(logN))
	return out, nil
}

func naiveTransform(c []field.Fp, g field.Fp) []field.Fp {
	n := len(c)
	out := make([]field.Fp, n)
	gi := field.One // g^i
	for i := 0; i < n; i++ {
		var acc field.Fp
		x := field.One // g^{ij}
		for j := 0; j < n; j++ {
			acc = acc.Add(c[j].Mul(x))
			x = x.Mul(gi)
		}
		out[i] = acc
		gi = gi.Mul(g)
	}
	return out
}
