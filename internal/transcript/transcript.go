// Package transcript owns the Fiat–Shamir transcript: the duplex sponge over Poseidon2-16 of
// spec A §3.1 (OpenVM DuplexSponge<F, Perm, 16, 8>, behaviourally Plonky3's
// DuplexChallenger<F, Perm, 16, 8>), the derived operations of §3.2 (ext and digest observes,
// sample_ext, sample_bits) and proof-of-work grinding (§3.3–3.5) with a multi-core grinder that
// always returns the smallest witness.
package transcript

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// rate is the number of state positions written by observe and read by sample.
const rate = 8

// MaxBits is the largest bits argument of SampleBits, CheckWitness and Grind: bits < 32 and
// 2^bits < p.
const MaxBits = 30

// Transcript is the duplex sponge of spec A §3.1. The zero value is the fresh transcript used by
// prover and verifier (all-zero state, no domain-separation constant). It is a plain value:
// assigning it makes an independent clone.
type Transcript struct {
	state     [poseidon2.Width]field.Fp
	absorbIdx uint8 // in [0, 8)
	sampleIdx uint8 // in [0, 8]
	// absorb takes ObserveSlice's long inputs and the single permutations (nil: pure Go): see
	// NewWith.
	absorb poseidon2.Absorber
}

// New returns a fresh transcript (the same as the zero value).
func New() Transcript { return Transcript{} }

// NewWith returns a fresh transcript whose permutations run on a (the host's SIMD permutation:
// kernels.HostAbsorber): long observes (ObserveSlice) and single permutations alike; it behaves
// exactly as New's. The prover's device backend passes one; the reference and the verifier use
// New. (A stage's replay of a device-transcript run is ≈ 2 permutations a sumcheck round: about
// 500 for interaction-pair 2^20's GKR, a quarter of their pure-Go time on AVX-512.)
func NewWith(a poseidon2.Absorber) Transcript { return Transcript{absorb: a} }

// Observe absorbs one base element: s[absorb_idx] ← x (overwrite); after the 8th pending
// element the state is permuted and the 8 outputs become available to Sample.
func (t *Transcript) Observe(x field.Fp) {
	t.state[t.absorbIdx] = x
	t.absorbIdx++
	if t.absorbIdx == rate {
		t.permute()
		t.absorbIdx = 0
		t.sampleIdx = rate
	}
}

// Same reports whether t and u are in the same state (the sponge and its indices; the absorber
// does not change results).
func (t *Transcript) Same(u *Transcript) bool {
	return t.state == u.state && t.absorbIdx == u.absorbIdx && t.sampleIdx == u.sampleIdx
}

// State returns the sponge state and the absorb and sample indices (in [0, 8) and [0, 8]): what
// a copy of the transcript on a device starts from.
func (t *Transcript) State() (state [poseidon2.Width]field.Fp, absorbIdx, sampleIdx int) {
	return t.state, int(t.absorbIdx), int(t.sampleIdx)
}

// SetState puts the transcript in the state of another copy (State's form: a device's copy that
// ran ahead, GkrLayersRun.Final); the absorber stays. Indices outside [0, 8) and [0, 8] are
// refused, values must be canonical.
func (t *Transcript) SetState(state [poseidon2.Width]field.Fp, absorbIdx, sampleIdx int) error {
	if absorbIdx < 0 || absorbIdx >= rate || sampleIdx < 0 || sampleIdx > rate {
		return fmt.Errorf("transcript: SetState: indices %d, %d", absorbIdx, sampleIdx)
	}
	for i, x := range state {
		if uint32(x) >= field.P {
			return fmt.Errorf("transcript: SetState: element %d is %d, not below p", i, uint32(x))
		}
	}
	t.state, t.absorbIdx, t.sampleIdx = state, uint8(absorbIdx), uint8(sampleIdx)
	return nil
}

// ObserveSlice absorbs xs in order: the same as Observe on each element, in one call of
// poseidon2.AbsorbWith (the transcript's absorber, if any, for long inputs).
func (t *Transcript) ObserveSlice(xs []field.Fp) {
	if len(xs) == 0 {
		return
	}
	permutes := int(t.absorbIdx)+len(xs) >= rate
	t.absorbIdx = uint8(poseidon2.AbsorbWith(t.absorb, &t.state, int(t.absorbIdx), xs))
	if permutes {
		t.sampleIdx = rate
	}
}

// permute permutes the state: on the absorber where there is one (absorbing the state's own rate
// lanes from index 0 is exactly one permutation), else in pure Go.
func (t *Transcript) permute() {
	if t.absorb == nil {
		poseidon2.Permute(&t.state)
		return
	}
	blk := [rate]field.Fp(t.state[:rate])
	t.absorb(&t.state, 0, blk[:])
}

// ObserveExt absorbs the coefficients c0, c1, c2, c3 in that order.
func (t *Transcript) ObserveExt(e field.Fp4) {
	for _, c := range e {
		t.Observe(c)
	}
}

// ObserveDigest absorbs the 8 digest elements in index order (observe_commit).
func (t *Transcript) ObserveDigest(d poseidon2.Digest) {
	for _, c := range d {
		t.Observe(c)
	}
}

// Sample squeezes one base element. If observes are pending or the outputs are used up, the
// state is permuted first; outputs are read backwards, s[7], s[6], …, s[0].
func (t *Transcript) Sample() field.Fp {
	if t.absorbIdx != 0 || t.sampleIdx == 0 {
		t.permute()
		t.absorbIdx = 0
		t.sampleIdx = rate
	}
	t.sampleIdx--
	return t.state[t.sampleIdx]
}

// SampleExt squeezes an extension element: c0, c1, c2, c3 are four consecutive samples.
func (t *Transcript) SampleExt() field.Fp4 {
	var e field.Fp4
	for i := range e {
		e[i] = t.Sample()
	}
	return e
}

// SampleBits squeezes one element and returns the low bits of its canonical value (no rejection
// sampling, spec A §3.2). bits must be in [0, MaxBits]; it panics otherwise, since bits always
// come from validated parameters. SampleBits(0) still consumes a sample and returns 0.
func (t *Transcript) SampleBits(bits int) uint32 {
	checkBits(bits)
	return uint32(t.Sample()) & (1<<bits - 1)
}

// CheckWitness is check_witness of spec A §3.2: with bits == 0 it returns true and leaves the
// transcript untouched; otherwise it observes w and accepts iff SampleBits(bits) == 0. It
// panics if bits is outside [0, MaxBits].
func (t *Transcript) CheckWitness(bits int, w field.Fp) bool {
	checkBits(bits)
	if bits == 0 {
		return true
	}
	t.Observe(w)
	return t.SampleBits(bits) == 0
}

func checkBits(bits int) {
	if bits < 0 || bits > MaxBits {
		panic("transcript: bits out of range [0, 30]")
	}
}
