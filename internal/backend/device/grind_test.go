package device_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

func newBackend(t *testing.T) (*device.Backend, *gpu.Device) {
	t.Helper()
	dev, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := device.New(dev, device.Options{})
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		dev.Close()
	})
	return b, dev
}

// The backend's grinder is registered and agrees with HostGrinder for random states, absorb
// indices and bits 1..16 (below and above the host threshold), and GrindWith accepts it.
func TestFindWitnessMatchesHostGrinder(t *testing.T) {
	b, dev := newBackend(t)
	if b.Stages().Grinder == nil {
		t.Fatal("Stages has no Grinder")
	}
	r := rand.New(rand.NewPCG(41, 42))
	ctx := context.Background()
	for bits := 1; bits <= 16; bits++ {
		n := 4
		if bits > 12 {
			n = 1
		}
		for range n {
			var state [poseidon2.Width]field.Fp
			copy(state[:], fieldrand.Fps(r, poseidon2.Width))
			idx := r.IntN(poseidon2.Rate)
			want, err := transcript.HostGrinder{}.FindWitness(ctx, state, idx, bits)
			if err != nil {
				t.Fatal(err)
			}
			before := dev.Stats().Dispatches
			got, err := b.FindWitness(ctx, state, idx, bits)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("bits %d, idx %d: device %d, HostGrinder %d", bits, idx, got, want)
			}
			if onDevice := dev.Stats().Dispatches > before; onDevice != (bits > 6) {
				t.Errorf("bits %d: ran on the device: %v", bits, onDevice)
			}
		}
	}
	// Through a transcript with pending observes (absorb index 3).
	tr := transcript.New()
	for i := range 11 {
		tr.Observe(field.Fp(i))
	}
	host := tr
	w, err := tr.GrindWith(ctx, b, 12)
	if err != nil {
		t.Fatal(err)
	}
	if hw := host.Grind(12); hw != w || host.Sample() != tr.Sample() {
		t.Fatalf("GrindWith %d, Grind %d", w, hw)
	}
}

func TestFindWitnessZeroAndErrors(t *testing.T) {
	b, _ := newBackend(t)
	r := rand.New(rand.NewPCG(43, 44))
	const bits = 9 // on the device
	for n := 0; ; n++ {
		var state [poseidon2.Width]field.Fp
		copy(state[:], fieldrand.Fps(r, poseidon2.Width))
		if !transcript.WitnessOK(&state, n%8, 1<<bits-1, 0) {
			continue
		}
		if w, err := b.FindWitness(context.Background(), state, n%8, bits); err != nil || w != 0 {
			t.Fatalf("got %d, %v; want 0", w, err)
		}
		break
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.FindWitness(ctx, [16]field.Fp{}, 0, 20); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, c := range [][2]int{{0, 0}, {0, 31}, {8, 10}, {-1, 10}} {
		if _, err := b.FindWitness(context.Background(), [16]field.Fp{}, c[0], c[1]); err == nil {
			t.Errorf("absorb index %d, %d bits: no error", c[0], c[1])
		}
	}
	b.Close()
	if _, err := b.FindWitness(context.Background(), [16]field.Fp{}, 0, 10); err == nil {
		t.Error("FindWitness after Close: no error")
	}
}
