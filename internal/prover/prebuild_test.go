package prover

import (
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/keyfile"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// The verifying keys the prebuild writes on the host alone give the constraint code of the key
// stark.Keygen makes (the code a GPU's backend builds for it: device's TestGPUConstraintSources);
// an AIR with a preprocessed trace is left to the backend.
func TestBuiltinVKs(t *testing.T) {
	p, _, err := sp.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	airs := []air.Air{testair.FibonacciSelectorAir{Sels: []bool{true, false, true, false}}, keccakf.Air{}, testair.FibonacciAir{}}
	names, vks := builtinVKs(p, airs)
	if vks[0] != nil || vks[1] == nil || vks[2] == nil || names[1] != "keccakf" {
		t.Fatalf("names %q, keys %v", names, vks)
	}
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Free()
	got, err := device.GPUConstraintSources(names, vks, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The key's own, but for the preprocessed AIR's (Keccak-f's pieces and Fibonacci's whole program).
	want, err := device.GPUConstraintSources([]string{pk.AirName(0), pk.AirName(1), pk.AirName(2)},
		[]*air.VerifyingKey{nil, pk.VK.MVK.PerAir[1], pk.VK.MVK.PerAir[2]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("the prebuild's sources (%d) are not those of the key (%d)", len(got), len(want))
	}
	// A proving-key file's keys are its own, named as the proving key names them.
	k := &Key{Airs: []air.Air{keccakf.Air{}, nil}, File: &keyfile.File{MVK: &air.MultiVerifyingKey0{PerAir: pk.VK.MVK.PerAir[1:]}}}
	kn, kv := keyVKs(k)
	if !reflect.DeepEqual(kn, []string{"keccakf", "AIR 1"}) || len(kv) != 2 || kv[0] != pk.VK.MVK.PerAir[1] {
		t.Fatalf("key names %q, keys %v", kn, kv)
	}
}

// Where the device cannot build modules ahead (the host device; CUDA without a GPU, as here), the
// prebuild returns at once without writing any code.
func TestPrebuildConstraintCodeElsewhere(t *testing.T) {
	log := zerolog.Nop()
	kinds := []string{"host", "metal"}
	if !gpu.CanPrebuild(gpu.KindCUDA, 0) {
		kinds = append(kinds, "cuda", "")
	}
	for _, kind := range kinds {
		called := false
		PrebuildConstraintCode(&cmdutil.Settings{Device: kind}, 0, func() ([]string, []*air.VerifyingKey) {
			called = true
			return nil, nil
		}, nil, &log)
		if called {
			t.Errorf("device %q: the constraint code was written for a device that cannot build it ahead", kind)
		}
	}
}
