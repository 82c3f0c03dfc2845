package selftest

import (
	"fmt"
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend"
	"github.com/metalprove/metalprove/internal/backend/backendtest"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// DeviceBackendChecks returns the checks of the device backend on dev: the conformance suite
// (internal/backend/backendtest: every stage beside the reference, round by round, and whole
// proofs byte for byte), and the steady
// state of a commitment of random resident traces (mixed heights, some below 2^l_skip, a
// width-0 trace): root equal to cpuref's, no upload, one sync, one download (the 32-byte root).
// Names are "stark-device/<what> [<device kind>]". Each check frees what it allocates.
func DeviceBackendChecks(dev *gpu.Device) []Check {
	tag := " [" + string(dev.Kind()) + "]"
	var out []Check
	probe, err := backend.Device(dev, nil)
	if err != nil {
		return []Check{{Name: "stark-device/open" + tag, Run: func() error { return err }}}
	}
	suite := backendtest.Checks(backendtest.Subject{Backend: probe.Stages()})
	probe.Close()
	for _, c := range suite {
		name := c.Name
		out = append(out, Check{Name: "stark-device/" + name + tag, Run: func() error {
			be, err := backend.Device(dev, nil)
			if err != nil {
				return err
			}
			defer be.Close()
			for _, cc := range backendtest.Checks(backendtest.Subject{Backend: be.Stages()}) {
				if cc.Name == name {
					return cc.Run()
				}
			}
			return fmt.Errorf("no conformance check %q", name)
		}})
	}
	type trace struct{ logH, width int }
	cases := []struct {
		name   string
		preset string
		logH   int
		traces []trace // in trace order
	}{
		{"test-mixed", "test", 0, []trace{{10, 3}, {9, 0}, {7, 2}, {2, 4}, {1, 2}, {0, 1}}},
		{"test-below-lskip", "test", 0, []trace{{1, 5}, {0, 3}}},
		{"app100-2^11-mixed", "app-100bit", 11, []trace{{11, 5}, {8, 3}, {4, 2}, {3, 1}, {0, 2}}},
		{"app100-2^14-wide", "app-100bit", 14, []trace{{14, 6}, {12, 9}, {5, 3}}},
	}
	for i, c := range cases {
		out = append(out, Check{Name: "stark-device/commit-root-" + c.name + tag, Run: func() error {
			p, _, err := params.Preset(c.preset, c.logH)
			if err != nil {
				return err
			}
			r := rand.New(rand.NewPCG(uint64(i), 0xdb))
			traces := make([]air.Matrix, len(c.traces))
			for j, t := range c.traces {
				traces[j] = air.Matrix{Width: t.width, Height: 1 << t.logH, Values: fieldrand.Fps(r, t.width<<t.logH)}
			}
			return checkDeviceCommit(dev, p, traces)
		}})
	}
	return append(out, stackingChecks(dev, tag)...)
}

func checkDeviceCommit(dev *gpu.Device, p params.SystemParams, traces []air.Matrix) error {
	ref := cpuref.New()
	want, err := ref.Committer.Commit(p, loadAll(ref.Loader, traces))
	if err != nil {
		return err
	}
	be, err := device.New(dev, device.Options{})
	if err != nil {
		return err
	}
	defer be.Close()
	dts := make([]stark.Trace, len(traces))
	for i := range traces {
		if dts[i], err = be.LoadTrace(fmt.Sprint("selftest ", i), &traces[i]); err != nil {
			return err
		}
	}
	// The first commit uploads the NTT twiddle tables; the second shows the steady state.
	warm, err := be.Commit(p, dts)
	if err != nil {
		return err
	}
	warm.Free()
	before := dev.Stats()
	got, err := be.Commit(p, dts)
	if err != nil {
		return err
	}
	defer got.Free()
	after := dev.Stats()
	if got.Root() != want.Root() {
		return fmt.Errorf("root %v, cpuref says %v", got.Root(), want.Root())
	}
	if got.Layout().Width != want.Layout().Width {
		return fmt.Errorf("stacked width %d, cpuref says %d", got.Layout().Width, want.Layout().Width)
	}
	if d, b := after.Downloads-before.Downloads, after.BytesFromDevice-before.BytesFromDevice; d != 1 || b != 32 {
		return fmt.Errorf("commit downloaded %d times, %d B; want the 32 B root only", d, b)
	}
	if u := after.Uploads - before.Uploads; u != 0 {
		return fmt.Errorf("commit uploaded %d times; the traces are resident", u)
	}
	if s := after.Syncs - before.Syncs; s != 1 {
		return fmt.Errorf("commit synchronised %d times, want 1 (the root's download)", s)
	}
	return nil
}

// loadAll loads host matrices on a reference loader (which cannot fail on valid matrices).
func loadAll(l stark.TraceLoader, ms []air.Matrix) []stark.Trace {
	out := make([]stark.Trace, len(ms))
	for i := range ms {
		t, err := l.LoadTrace("selftest", &ms[i])
		if err != nil {
			panic(err)
		}
		out[i] = t
	}
	return out
}
