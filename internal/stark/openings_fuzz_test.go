package stark_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/stark"
)

// FuzzDecodeVerifyOpenings decodes a stacking and a WHIR proof (with the parameters' limits) and,
// when both decode, runs the shape checks and VerifyOpenings against the fixed roots, layouts and
// claims of a small opening fixture (the "test" preset). Nothing may panic; a shape-check failure
// must make the verifier fail; a proof that verifies must re-encode to the input.
//
// The WHIR proof-of-work bits are 0 here: with the preset's bits (μ 3, folding 2 per round) a
// mutation that changes the transcript is rejected by a PoW check with probability about 1 − 2^-21
// before the query phase, so the Merkle, folding and final-polynomial checks would go unfuzzed.
func FuzzDecodeVerifyOpenings(f *testing.F) {
	p := testPreset(f)
	p.Whir.MuPowBits, p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits = 0, 0, 0
	fx := newFixture(f, p, 31, 2)
	sp, wp, _ := fx.prove(f)
	spb, err := stark.EncodeStackingProof(&sp)
	if err != nil {
		f.Fatal(err)
	}
	wpb, err := stark.EncodeWhirProof(&wp)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := fx.verify(&sp, &wp, fx.claims); err != nil {
		f.Fatalf("seed proof rejected: %v", err)
	}
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i%len(c)] ^= 0x01
		return c
	}
	f.Add(spb, wpb)
	f.Add(spb[:len(spb)/2], wpb)
	f.Add(spb, wpb[:len(wpb)-1])
	f.Add(flip(spb, len(spb)/2), wpb)            // a stacking value
	f.Add(spb, flip(wpb, 4))                     // the WHIR sumcheck count
	f.Add(spb, flip(wpb, len(wpb)/2))            // an opened row or Merkle sibling
	f.Add(spb, flip(wpb, len(wpb)-3))            // the final polynomial
	f.Add(flip(spb, 0), wpb)                     // the univariate coefficient count
	f.Add(wpb, spb)                              // swapped
	f.Add([]byte{}, append(bytes.Clone(wpb), 0)) // empty, trailing byte

	lim := stark.LimitsFor(p)
	widths := make([]int, len(fx.layouts))
	for i, l := range fx.layouts {
		widths[i] = l.Width
	}
	f.Fuzz(func(t *testing.T, spIn, wpIn []byte) {
		dsp, err := stark.DecodeStackingProof(spIn, &lim)
		if err != nil {
			return
		}
		dwp, err := stark.DecodeWhirProof(wpIn, &lim)
		if err != nil {
			return
		}
		stShape := stark.CheckStackingShape(p, widths, dsp)
		whShape := stark.CheckWhirShape(p, widths, dwp)
		_, err = fx.verify(dsp, dwp, fx.claims)
		if stShape != nil && !(errors.Is(err, stark.ErrStackingShape) && errors.Is(err, stark.ErrShape)) {
			t.Fatalf("stacking shape error %v, verifier said %v", stShape, err)
		}
		if whShape != nil && err == nil {
			t.Fatalf("WHIR shape error %v, verifier accepted", whShape)
		}
		if err != nil {
			return
		}
		if b, err := stark.EncodeStackingProof(dsp); err != nil || !bytes.Equal(b, spIn) {
			t.Fatalf("verified stacking proof does not re-encode to the input (%v)", err)
		}
		if b, err := stark.EncodeWhirProof(dwp); err != nil || !bytes.Equal(b, wpIn) {
			t.Fatalf("verified WHIR proof does not re-encode to the input (%v)", err)
		}
	})
}
