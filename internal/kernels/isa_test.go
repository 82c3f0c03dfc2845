package kernels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

// openISA opens a host device whose kernels run the copies compiled for isa.
func openISA(t *testing.T, isa string) *gpu.Device {
	t.Helper()
	d, err := gpu.Open(gpu.KindHost, gpu.Options{HostISA: isa})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if want := isa + " kernels"; !strings.Contains(d.Name(), want) {
		t.Fatalf("device %q does not say %q", d.Name(), want)
	}
	return d
}

// edgeFps returns n random values whose first 48 are 0, 1 and p−1 in a pattern that puts each
// of them in each of 16 consecutive positions (every SIMD lane of a 16-row load).
func edgeFps(r *rand.Rand, n int) []field.Fp {
	v := fieldrand.Fps(r, n)
	edges := []field.Fp{0, 1, field.Fp(field.P - 1)}
	for i := 0; i < min(n, 48); i++ {
		v[i] = edges[(i/16+i)%3]
	}
	return v
}

// hotKernelOutputs runs the lane kernels that dominate a proof on the host device (Poseidon2
// permutations, NTT passes of both plans' shapes, the RS encoder, Merkle trees, grinding) on
// inputs made from seed and returns every output by name, as Montgomery words.
func hotKernelOutputs(t *testing.T, d *gpu.Device, seed uint64) map[string][]uint32 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string][]uint32{}
	up := func(v []field.Fp) *gpu.Array[Mont] {
		a, err := UploadMont(d, "isa test input", v)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Free)
		return a
	}
	read := func(a *gpu.Array[Mont]) []uint32 {
		v, err := a.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return montWords(v)
	}
	h, err := NewPoseidon2(d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	// Poseidon2: 1025 states (64 full lane groups and a partial one); states 0..2 are all 0,
	// all 1, all p−1, then every state mixes the edges into lanes.
	n := 1025
	v := fieldrand.Fps(r, 16*n)
	edges := []field.Fp{0, 1, field.Fp(field.P - 1)}
	for i := 0; i < 16*n; i++ {
		if i < 48 {
			v[i] = edges[i/16]
		} else if i%7 == 0 {
			v[i] = edges[i%3]
		}
	}
	states := up(v)
	if err := h.Permute(states, n); err != nil {
		t.Fatal(err)
	}
	out["poseidon2 1025 states"] = read(states)

	nt := NewNTT(d)
	defer nt.Close()
	for _, c := range []struct {
		logH, width int
		inverse     bool
	}{{0, 3, false}, {4, 16, false}, {10, 5, true}, {12, 16, false}, {16, 4, true}, {18, 2, false}} {
		a := up(edgeFps(r, c.width<<c.logH))
		if err := nt.DFTColumns(a, 1<<c.logH, c.width, c.inverse); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("ntt 2^%d×%d inverse=%v", c.logH, c.width, c.inverse)] = read(a)
	}
	for _, c := range []struct{ logH, width, lSkip, logBlowup int }{{10, 7, 4, 1}, {14, 3, 2, 2}} {
		q := up(edgeFps(r, c.width<<c.logH))
		cw, err := nt.RSEncodeMatrix("isa test codeword", q, 1<<c.logH, c.width, c.lSkip, c.logBlowup, false)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("rs 2^%d×%d", c.logH, c.width)] = read(cw)
		cw.Free()
	}

	for _, c := range []struct{ logH, width, k int }{{0, 1, 0}, {5, 7, 3}, {12, 17, 2}, {14, 42, 4}} {
		tree, err := h.MerkleTree(up(edgeFps(r, c.width<<c.logH)), 1<<c.logH, c.width, c.k)
		if err != nil {
			t.Fatal(err)
		}
		var words []uint32
		for i := 0; i <= tree.Depth(); i++ {
			l, err := tree.Layer(i)
			if err != nil {
				t.Fatal(err)
			}
			for _, dg := range l {
				for _, x := range dg {
					words = append(words, uint32(x))
				}
			}
		}
		tree.Free()
		out[fmt.Sprintf("merkle 2^%d×%d k=%d", c.logH, c.width, c.k)] = words
	}

	g, err := h.NewGrind()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var st [poseidon2.Width]field.Fp
	copy(st[:], fieldrand.Fps(r, poseidon2.Width))
	for _, bits := range []int{1, 9, 14} {
		w, ok, err := g.Search(context.Background(), st, 5, bits)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("grind %d bits", bits)] = []uint32{uint32(w), map[bool]uint32{false: 0, true: 1}[ok]}
	}
	return out
}

// TestISAVariantsAgree: the kernel copies for each instruction set this CPU runs (x86-64-v4,
// x86-64-v3) compute exactly what the baseline copy computes, on random inputs with 0, 1 and
// p−1 in every lane. The proof tests (cpuref conformance) run only the best copy; this test is
// what covers the others on a machine that has them.
func TestISAVariantsAgree(t *testing.T) {
	isas := host.ISAs()
	if len(isas) == 1 {
		t.Skipf("this CPU and build run only the %s kernels", isas[0])
	}
	if isas[len(isas)-1] != host.BaselineISA {
		t.Fatalf("ISAs() = %v does not end with the baseline %s", isas, host.BaselineISA)
	}
	want := hotKernelOutputs(t, openISA(t, host.BaselineISA), 77)
	for _, isa := range isas[:len(isas)-1] {
		t.Run(isa, func(t *testing.T) {
			got := hotKernelOutputs(t, openISA(t, isa), 77)
			if len(got) != len(want) {
				t.Fatalf("%d outputs, baseline %d", len(got), len(want))
			}
			for name, w := range want {
				g := got[name]
				if i := slices.Compare(g, w); i != 0 {
					k := 0
					for k < min(len(g), len(w)) && g[k] == w[k] {
						k++
					}
					t.Errorf("%s: word %d of %d differs from the baseline copy's", name, k, len(w))
				}
			}
		})
	}
}
