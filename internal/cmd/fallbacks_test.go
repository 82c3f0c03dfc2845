package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

// TestNoFallbacks: the fallbacks counter (it could only be 0: there is no fallback path) is gone
// from prove --json, on the CPU reference and on the device backend (bench --json: benchJSON
// decodes strictly).
func TestNoFallbacks(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	tr, flags := smallTrace(t, dir)
	for _, backend := range [][]string{flags, {"--preset", "test", "--allow-insecure", "--device", "host"}} {
		args := append([]string{"prove", "--json", "--trace", tr, "-o", filepath.Join(dir, "f.proof")}, backend...)
		out, _ := expect(t, cmdutil.ExitOK, nil, args...)
		var rep struct {
			Stages []map[string]any `json:"stages"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Stages) == 0 || strings.Contains(out, "fallback") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}
