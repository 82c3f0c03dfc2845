package device_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// liveWithPrefix counts dev's live buffers whose names start with prefix.
func liveWithPrefix(dev *gpu.Device, prefix string) int {
	n := 0
	for _, b := range dev.LiveBuffers() {
		if strings.HasPrefix(b.Name, prefix) {
			n++
		}
	}
	return n
}

// The commitment stacks its traces straight into the codeword (the roots equal cpuref's, short
// traces spread with strides included), keeps no stacked matrix, stacks Q again on demand (equal
// to cpuref's), and pins its traces: a trace freed by its owner keeps its buffer until the
// commitment is freed, and the commitment keeps working meanwhile.
func TestCommitStacksFromPinnedTraces(t *testing.T) {
	for _, c := range whirCases(t) {
		t.Run(c.name, func(t *testing.T) {
			be, dev := openHost(t)
			r := rand.New(rand.NewPCG(43, uint64(len(c.name))))
			ms := randomTraces(r, c.logHeights[0], c.widths[0])
			dts := make([]stark.Trace, len(ms))
			rts := make([]stark.Trace, len(ms))
			for i := range ms {
				var err error
				if dts[i], err = be.LoadTrace(fmt.Sprintf("pinned %d", i), &ms[i]); err != nil {
					t.Fatal(err)
				}
				if rts[i], err = (cpuref.Backend{}).LoadTrace("", &ms[i]); err != nil {
					t.Fatal(err)
				}
			}
			traces := liveWithPrefix(dev, "trace pinned")
			dc, err := be.Commit(c.p, dts)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := cpuref.Backend{}.Commit(c.p, rts)
			if err != nil {
				t.Fatal(err)
			}
			if dc.Root() != rc.Root() {
				t.Fatal("commitment roots differ")
			}
			if n := liveWithPrefix(dev, "stacked"); n != 0 {
				t.Errorf("%d stacked matrices or codewords live after the commit, want 0", n)
			}
			for _, tr := range dts {
				tr.Free()
			}
			if n := liveWithPrefix(dev, "trace pinned"); n != traces {
				t.Errorf("%d trace buffers live after the owner freed them, want %d (pinned)", n, traces)
			}
			q, err := dc.(*device.Committed).StackedMatrix()
			if err != nil {
				t.Fatal(err)
			}
			want := rc.(*cpuref.Committed).Data.Matrix
			if q.Width != want.Width || q.Height != want.Height {
				t.Fatalf("Q is %d×%d, want %d×%d", q.Height, q.Width, want.Height, want.Width)
			}
			for i := range want.Values {
				if q.Values[i] != want.Values[i] {
					t.Fatalf("Q value %d (column %d): got %d, want %d", i, i/q.Height, q.Values[i], want.Values[i])
				}
			}
			if n := liveWithPrefix(dev, "stacked"); n != 0 {
				t.Errorf("%d stacked matrices live after StackedMatrix, want 0", n)
			}
			dc.Free()
			if n := liveWithPrefix(dev, "trace pinned"); n != 0 {
				t.Errorf("%d trace buffers live after the commitment was freed, want 0", n)
			}
		})
	}
}

// CommitGrind (stark.CommitGrinder) finds the LogUp witness behind the commitment: whole proofs
// equal cpuref's byte for byte, the GKR stage no longer searches (no sync of its own without
// interactions, the layers' one with them), and a grind the device does not do in one go leaves
// the commitment as Commit makes it, with no witness.
func TestCommitGrindBehindCommitment(t *testing.T) {
	be, dev := openHost(t)
	p := testParams(t)
	p.Logup.PowBits = 12
	for name, ins := range map[string][]testair.Instance{
		"fibonacci":        {testair.Fibonacci(1, 1, 64)},
		"interaction pair": testair.InteractionPair(64, 5),
	} {
		t.Run(name, func(t *testing.T) {
			st := setUp(t, be.Stages(), p, ins)
			rst := setUp(t, cpuref.New(), p, ins)
			want, err := stark.ProveTraces(rst.pk, rst.ld, p, cpuref.New(), nil)
			if err != nil {
				t.Fatal(err)
			}
			syncs := map[string]int{}
			po := stark.DefaultProveOptions()
			po.OnStage = func(r stark.StageReport) { syncs[r.Stage] = r.Syncs }
			got, err := stark.ProveTraces(st.pk, st.ld, p, be.Stages(), po)
			if err != nil {
				t.Fatal(err)
			}
			wb, _ := want.MarshalBinary()
			gb, _ := got.MarshalBinary()
			if !bytes.Equal(gb, wb) {
				t.Fatal("the proof differs from cpuref's")
			}
			gkr := 0
			if name == "interaction pair" {
				gkr = 1
			}
			if syncs[stark.StageGkr] != gkr {
				t.Errorf("GKR stage: %d syncs, want %d", syncs[stark.StageGkr], gkr)
			}
			var tr transcript.Transcript
			commons := []stark.Trace{st.in[0].Common}
			c, err := be.Commit(p, commons)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Free()
			for _, bits := range []int{0, 25} {
				s0 := dev.Stats().Syncs
				g, w, found, err := be.CommitGrind(p, commons, &tr, []field.Fp{1, 2}, bits, nil)
				if err != nil {
					t.Fatal(err)
				}
				if found || w != 0 || g.Root() != c.Root() || dev.Stats().Syncs-s0 != 1 {
					t.Errorf("%d bits: found %t (witness %d), root %v against %v, %d syncs", bits, found, w, g.Root(), c.Root(), dev.Stats().Syncs-s0)
				}
				g.Free()
			}
		})
	}
}
