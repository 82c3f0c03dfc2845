package selftest

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// proveStatementBytes is the encoded size of the proof of proveStatement under the test preset:
// the proof shape is fixed by the parameters and the statement (AIR widths, heights,
// interactions), so any other size is a shape bug.
const proveStatementBytes = 16753

func proveChecks() []Check {
	return []Check{
		{Name: fmt.Sprintf("prove/cpuref-multi-air-e2e-test-preset-%d-bytes", proveStatementBytes), Run: checkProveVerify},
	}
}

// proveStatement is a small multi-AIR statement: traces of heights 4..16, a preprocessed trace,
// cached parts and two buses of interactions.
func proveStatement() ([]air.Air, []stark.AirProvingInput) {
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.SelfInteraction([]int{3}, 4, 5)...)
	airs := make([]air.Air, len(ins))
	inputs := make([]stark.AirProvingInput, len(ins))
	for i, in := range ins {
		airs[i] = in.Air
		cm := in.Trace.CommonMain
		inputs[i] = stark.AirProvingInput{Common: air.Matrix{Values: cm.Values, Width: cm.Width, Height: in.Height()}, Public: in.Trace.Public}
		for _, c := range in.Trace.CachedMains {
			inputs[i].Cached = append(inputs[i].Cached, air.Matrix{Values: c.Values, Width: c.Width, Height: c.Height})
		}
	}
	return airs, inputs
}

// checkProveVerify proves proveStatement on the CPU reference backend, checks the encoded size,
// decodes and verifies it against a verifying key generated independently, and checks that a
// proof with one public value changed is rejected.
func checkProveVerify() error {
	p, _, err := params.Preset("test", 0)
	if err != nil {
		return err
	}
	airs, inputs := proveStatement()
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		return err
	}
	proof, err := stark.Prove(pk, inputs, p, cpuref.New(), nil)
	if err != nil {
		return err
	}
	b, err := proof.MarshalBinary()
	if err != nil {
		return err
	}
	if len(b) != proveStatementBytes {
		return fmt.Errorf("proof is %d bytes, want %d", len(b), proveStatementBytes)
	}
	vk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		return err
	}
	if vk.VK.PreHash != pk.VK.PreHash {
		return errors.New("verifying key prehash is not deterministic")
	}
	lim := stark.LimitsFor(p)
	dec, err := stark.DecodeProof(b, &lim)
	if err != nil {
		return err
	}
	if err := stark.Verify(vk.VK, dec, p); err != nil {
		return fmt.Errorf("valid proof rejected: %w", err)
	}
	dec.PublicValues[0][2] = dec.PublicValues[0][2].Add(field.One)
	if err := stark.Verify(vk.VK, dec, p); err == nil {
		return errors.New("proof with a changed public value verifies")
	}
	return nil
}
