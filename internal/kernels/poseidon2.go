package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// Poseidon2 launches shaders/commit/poseidon2.metal (and is the hasher merkle.go builds trees with):
// the Poseidon2-BabyBear-16 permutation of internal/poseidon2, on Montgomery lanes. It owns the
// round-constant buffer (RoundConstants: poseidon2.h's 157 uints, then the 208 of
// poseidon2_group.h's partial rounds), uploaded once by NewPoseidon2.
type Poseidon2 struct {
	dev *gpu.Device
	rc  *gpu.Array[Mont]
}

// poseidon2RCLen is the length of shaders/include/poseidon2.h's constants (P2_RC_LEN), p2gRCLen
// that of the whole buffer, which poseidon2_group.h's kernels read (P2G_RC_LEN).
const (
	poseidon2RCLen = 4*16 + 13 + 4*16 + 16
	p2gRCLen       = poseidon2RCLen + 12*16 + 16
)

// RoundConstants returns the constant buffer of the Poseidon2 kernels in Montgomery form: first
// shaders/include/poseidon2.h's (the 4×16 initial full-round constants, the 13 partial-round
// constants, the 4×16 final full-round constants, the 16 diagonal entries V of M_I), then the
// tables of poseidon2_group.h's partial rounds by moments: V_k^j for j = 1..12 (16 words each, k
// = 0..15), and W_j = Σ_{i=1..15} V_i^j for j = 0..11, four zeros after them.
func RoundConstants() []Mont {
	ei, in, ef, diag := poseidon2.Constants()
	out := make([]Mont, 0, p2gRCLen)
	for _, r := range ei {
		out = append(out, MontSlice(r[:])...)
	}
	out = append(out, MontSlice(in[:])...)
	for _, r := range ef {
		out = append(out, MontSlice(r[:])...)
	}
	out = append(out, MontSlice(diag[:])...)
	// One pass over the powers: row j of the table is V^(j+1), and W_j sums V_i^j over i ≥ 1.
	var pow, w [16]field.Fp
	for k := range pow {
		pow[k] = field.One
	}
	for j := 0; j < 12; j++ {
		for k := 1; k < 16; k++ {
			w[j] = w[j].Add(pow[k])
		}
		for k := range pow {
			pow[k] = pow[k].Mul(diag[k])
		}
		out = append(out, MontSlice(pow[:])...)
	}
	return append(out, MontSlice(w[:])...)
}

// HostAbsorber is poseidon2.Absorb on a SIMD permutation of one state on the host: package
// poseidon2's own (AVX-512, x86-64) where the CPU has it, else the host device's with these
// constants (internal/gpu/host.NewAbsorber), nil where the build has neither. poseidon2's took
// 523–542 ns a permutation on the H200 machine's host (Xeon, 2.1 GHz) against 866–916 ns for the
// host device's, 516 against 632 ns on the 2-vCPU VM: keccakf-1024's column openings are 2,633
// permutations in sequence. The device backend gives it to the transcript and keygen
// (stark.Backend.Absorber); nothing installs it globally.
var HostAbsorber poseidon2.Absorber = hostAbsorber()

func hostAbsorber() poseidon2.Absorber {
	if a := poseidon2.SIMDAbsorber(); a != nil {
		return a
	}
	return host.NewAbsorber(RoundConstantWords())
}

// HostWitnessSearch is the proof-of-work search on the host's SIMD permutation with these
// constants (internal/gpu/host.NewWitnessSearch): the device backend's small searches.
var HostWitnessSearch = host.NewWitnessSearch(RoundConstantWords())

// RoundConstantWords is RoundConstants as raw words, as the host device's permutations take them.
func RoundConstantWords() []uint32 {
	rc := RoundConstants()
	out := make([]uint32, len(rc))
	for i, m := range rc {
		out[i] = uint32(m)
	}
	return out
}

// NewPoseidon2 uploads the round constants to dev.
func NewPoseidon2(dev *gpu.Device) (*Poseidon2, error) {
	rc, err := gpu.UploadArray(dev, "poseidon2 round constants", RoundConstants())
	if err != nil {
		return nil, err
	}
	return &Poseidon2{dev: dev, rc: rc}, nil
}

// Close frees the constants.
func (h *Poseidon2) Close() { h.rc.Free() }

// EncodePermute encodes the permutation of n states in place: states[16i .. 16i+16) (Montgomery).
func (h *Poseidon2) EncodePermute(b *gpu.Batch, states *gpu.Array[Mont], n int) error {
	if n < 0 {
		return fmt.Errorf("kernels: Permute: %d states", n)
	}
	if err := checkArray("Permute", states, 16*n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	g, t := shapeFor(h.dev, "p2_permute_states", n)
	dispatchP2PermuteStates(b, g, t, states.Buffer, h.rc.Buffer, uint32(n))
	return b.Err()
}

// Permute permutes n states in place in one batch (one sync).
func (h *Poseidon2) Permute(states *gpu.Array[Mont], n int) error {
	b := h.dev.Batch()
	if err := h.EncodePermute(b, states, n); err != nil {
		return err
	}
	return b.Wait()
}
