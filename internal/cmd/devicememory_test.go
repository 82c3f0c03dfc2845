package cmd

import (
	"encoding/json"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/prover"
)

// TestDeviceMemoryPreflight: prove and bench report the device-memory estimate beside the
// measured peak, and refuse, before proving, a proof that does not fit in the memory allowed
// (--device-memory or METALPROVE_DEVICE_MEMORY), naming what it needs and what is available,
// with exit status 5 and no proof file.
func TestDeviceMemoryPreflight(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr := filepath.Join(dir, "pair.trace")
	expect(t, cmdutil.ExitOK, nil, "trace", "--example", "interaction-pair", "--rows", "256", "-o", tr)
	proof := filepath.Join(dir, "pair.proof")
	prove1 := []string{"--device", "host", "prove", "--trace", tr, "-o", proof, "--preset", "test", "--allow-insecure", "--json"}

	out, _ := expect(t, cmdutil.ExitOK, nil, prove1...)
	var rep prover.ProveReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("prove --json: %v\n%s", err, out)
	}
	if rep.DeviceMemory == nil || rep.PeakMemory <= 0 || rep.EstimateBytes < rep.PeakMemory || rep.EstimateStep == "" || rep.AvailableBytes == 0 {
		t.Fatalf("prove --json: peak %d, device memory %+v: want an estimate ≥ the peak, its step and the memory available", rep.PeakMemory, rep.DeviceMemory)
	}
	pr := rep.Process
	parts := pr.StartMS + pr.SetupMS + pr.ReadMS + pr.WaitMS + pr.ProveMS + pr.CloseMS
	if pr.DeviceOpenMS <= 0 || pr.ReadMS <= 0 || pr.ProveMS < rep.TimesMS["commit"] || pr.CloseMS <= 0 ||
		runtime.GOOS == "linux" && (pr.StartMS <= 0 || math.Abs(pr.TotalMS-parts) > 0.01) {
		t.Errorf("prove --json: process %+v: want the parts of the process's life, total_ms their sum", pr)
	}
	top := int64(0)
	for _, s := range rep.EstimateSteps {
		top = max(top, s.Peak)
	}
	if len(rep.EstimateSteps) == 0 || top != rep.EstimateBytes {
		t.Errorf("prove --json: memory_estimate_steps %+v: want the steps, the largest the estimate %d", rep.EstimateSteps, rep.EstimateBytes)
	}
	for _, s := range rep.Stages {
		if s.PeakMemory > rep.PeakMemory {
			t.Errorf("stage %s peak %d above the report's %d", s.Stage, s.PeakMemory, rep.PeakMemory)
		}
	}

	// The same proof with less device memory than it needs: refused before proving.
	small := filepath.Join(dir, "small.proof")
	args := slices.Clone(prove1)
	args[slices.Index(args, proof)] = small
	t.Setenv("METALPROVE_DEVICE_MEMORY", "64KiB")
	_, errOut := expect(t, cmdutil.ExitDevice, []string{"not enough device memory", "proving " + tr + " needs about", "bytes) of device memory at its",
		"bytes) available (capped at 65.5 kB by METALPROVE_DEVICE_MEMORY"}, args...)
	if strings.Contains(errOut, "stage started") {
		t.Errorf("a refused proof started:\n%s", errOut)
	}
	if names := entries(t, dir); slices.Contains(names, "small.proof") || len(names) != 2 {
		t.Errorf("files after the refusal: %v (want the trace and the first proof only)", names)
	}
	// A malformed size is a usage error.
	t.Setenv("METALPROVE_DEVICE_MEMORY", "lots")
	expect(t, cmdutil.ExitUsage, []string{"METALPROVE_DEVICE_MEMORY"}, args...)
	// 0 is refused, not read as "no limit".
	t.Setenv("METALPROVE_DEVICE_MEMORY", "0")
	expect(t, cmdutil.ExitUsage, []string{"must be more than 0"}, args...)

	// bench: the same refusal from the flag, and the estimate in its report.
	t.Setenv("METALPROVE_DEVICE_MEMORY", "")
	expect(t, cmdutil.ExitDevice, []string{"not enough device memory", "interaction-pair needs about", "by --device-memory)"},
		"--device", "host", "--device-memory", "100kB", "bench", "--example", "interaction-pair", "--rows", "256", "--preset", "test", "--allow-insecure",
		"--warmup", "0", "--runs", "1")
	b := benchJSON(t, "--example", "interaction-pair", "--rows", "256", "--preset", "test", "--allow-insecure", "--device", "host", "--warmup", "0", "--runs", "1")
	if b.DeviceMemory == nil || b.PeakMemory <= 0 || b.EstimateBytes < b.PeakMemory {
		t.Errorf("bench --json: peak %d, device memory %+v: want an estimate ≥ the peak", b.PeakMemory, b.DeviceMemory)
	}
}
