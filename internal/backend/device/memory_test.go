package device_test

import (
	"strings"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// TestEstimateProofMemory proves statements on the host device and compares the estimate made
// before each proof with the device's measured peaks: never below them (per step and overall;
// the check's also as a later proof's check sees it, after the first proof), and at most 1.3×
// the overall peak (plus 1 MiB: the estimate's allowance for small buffers, which dominates
// proofs of a few hundred kB; 1.5× for programs in pieces, the GPUs' plans).
func TestEstimateProofMemory(t *testing.T) {
	preset := func(name string, logH int) params.SystemParams {
		p, _, err := params.Preset(name, logH)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	kec := func(perms int) []testair.Instance {
		h, cols := keccakf.GenerateTrace(keccakf.RandomInputs(5, perms))
		return []testair.Instance{{Air: keccakf.Air{}, Trace: keccakf.TraceInput(h, cols)}}
	}
	cases := []struct {
		name string
		p    params.SystemParams
		ins  []testair.Instance
		long bool
		// pieces runs the programs in pieces (the GPUs' plans for long programs) on the host.
		pieces bool
		// absent names an AIR left out of the proof (its key kept).
		absent string
	}{
		{"keccakf-16 app-100bit 2^14", preset("app-100bit", 14), kec(16), false, false, ""},
		{"keccakf-8 test", preset("test", 0), kec(8), false, false, ""},
		{"interaction-pair-4096 app-100bit 2^15", preset("app-100bit", 15), testair.InteractionPair(4096, 3), false, false, ""},
		{"preprocessed-cached-1024 app-100bit 2^14", preset("app-100bit", 14), []testair.Instance{testair.PreprocessedCached(2, 1024)}, false, false, ""},
		{"mixture-64 test", preset("test", 0), testair.Mixture(64), false, false, ""},
		{"keccakf-16 app-100bit", preset("app-100bit", params.DefaultAppLogStackedHeight), kec(16), true, false, ""},
		{"keccakf-16 app-100bit 2^14 in pieces", preset("app-100bit", 14), kec(16), false, true, ""},
		{"mixture-64 test in pieces", preset("test", 0), testair.Mixture(64), false, true, ""},
		{"mixture-64 test without its preprocessed AIR", preset("test", 0), testair.Mixture(64), false, false, "fibonacci-selector"},
	}
	// keep: the commitments keep their codewords (Backend.KeepStacked) in a second run of the
	// cases with preprocessed or cached commitments besides the main one.
	type run struct {
		tc   int
		keep bool
	}
	var runs []run
	for i, tc := range cases {
		runs = append(runs, run{i, false})
		if strings.HasPrefix(tc.name, "mixture-64 test") || strings.HasPrefix(tc.name, "preprocessed-cached") || tc.name == "keccakf-16 app-100bit 2^14" {
			runs = append(runs, run{i, true})
		}
	}
	for _, r := range runs {
		tc := cases[r.tc]
		name := tc.name
		if r.keep {
			name += " keeping codewords"
		}
		t.Run(name, func(t *testing.T) {
			if tc.long && testing.Short() {
				t.Skip("a proof at stacked height 2^21: seconds on the host device")
			}
			be, dev := openHost(t)
			if tc.pieces {
				be.Close()
				var err error
				if be, err = device.New(dev, device.Options{Zerocheck: kernels.ZcOptions{Pieces: true}}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(be.Close)
			}
			be.KeepStacked(r.keep)
			stages := be.Stages()
			airs := make([]air.Air, len(tc.ins))
			inputs := make([]stark.AirProvingInput, len(tc.ins))
			heights := make([]int, len(tc.ins))
			skipped := false
			for i, in := range tc.ins {
				airs[i] = in.Air
				if tc.absent != "" && strings.Contains(in.Air.Name(), tc.absent) {
					skipped = true
					continue
				}
				inputs[i] = stark.AirProvingInput{Common: in.Trace.CommonMain, Cached: in.Trace.CachedMains, Public: in.Trace.Public}
				inputs[i].Common.Height = in.Height()
				heights[i] = in.Height()
			}
			if tc.absent != "" && !skipped {
				t.Fatalf("no AIR named %s", tc.absent)
			}
			pk, err := stark.Keygen(tc.p, airs, nil, stages)
			if err != nil {
				t.Fatal(err)
			}
			defer pk.Free()
			est, err := be.EstimateProofMemory(pk, heights, tc.p, true, false)
			if err != nil {
				t.Fatal(err)
			}
			if est.InUse != dev.Stats().MemoryInUse {
				t.Errorf("estimate counts %d bytes in use, the device %d", est.InUse, dev.Stats().MemoryInUse)
			}
			measured := map[string]int64{}
			var peak int64
			po := stark.DefaultProveOptions()
			po.OnStage = func(r stark.StageReport) {
				measured[r.Stage] = r.MemoryPeak
				peak = max(peak, r.MemoryPeak)
			}
			if _, err := stark.Prove(pk, inputs, tc.p, stages, po); err != nil {
				t.Fatal(err)
			}
			// The check of a later proof (as bench runs them): the traces loaded, what the
			// first proof kept on the device (the NTT's tables and scratch, the constraint
			// sumcheck's per-key data) in use.
			traces, err := stark.LoadInputs(stages, pk, inputs)
			if err != nil {
				t.Fatal(err)
			}
			dev.ResetPeak()
			if err := be.CheckTraces(pk, traces, 1); err != nil {
				t.Fatal(err)
			}
			measured[stark.StageCheck] = max(measured[stark.StageCheck], dev.Stats().MemoryPeak)
			peak = max(peak, measured[stark.StageCheck])
			stark.FreeTraces(traces)
			step := map[string]int64{}
			for _, s := range est.Steps {
				step[s.Step] = s.Peak
			}
			// The openings stage is the stacked reduction and WHIR.
			step[stark.StageOpenings] = max(step["stacking"], step["whir"])
			for _, s := range []string{stark.StageCheck, stark.StageCommit, stark.StageGkr, stark.StageConstraints, stark.StageOpenings} {
				if measured[s] == 0 {
					t.Fatalf("no measured peak for stage %s", s)
				}
				if step[s] < measured[s] {
					t.Errorf("stage %s: estimated %d bytes, measured %d", s, step[s], measured[s])
				}
				t.Logf("%-11s estimated %11d measured %11d (×%.3f)", s, step[s], measured[s], float64(step[s])/float64(measured[s]))
			}
			// Programs in pieces: zcKeyBytes bounds their per-key data loosely (about 4× for
			// mixture-64's short programs: 0.4 MB against 0.1), which shows in proofs of 1 MB.
			ratio := 1.3
			if tc.pieces {
				ratio = 1.5
			}
			if est.Peak < peak || float64(est.Peak) > ratio*float64(peak)+(1<<20) {
				t.Errorf("estimated peak %d bytes (%s), measured %d: ratio %.3f, want in [1, %.1f] (+1 MiB)", est.Peak, est.Step, peak, float64(est.Peak)/float64(peak), ratio)
			}
			t.Logf("estimated %d bytes at %s, measured %d (×%.3f)", est.Peak, est.Step, peak, float64(est.Peak)/float64(peak))
		})
	}
}
