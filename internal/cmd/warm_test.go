package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

// warm on the host device: nothing to compile (it interprets the constraint programs), said in
// words and in --json; bad flags and a bad key are refused with their exit codes.
func TestWarm(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir := t.TempDir()
	pk := filepath.Join(dir, "fib.pk")
	mustRun(t, cmdutil.ExitOK, "keygen", "--example", "fibonacci", "--preset", "test", "--allow-insecure", "-o", pk)
	out, _ := mustRun(t, cmdutil.ExitOK, "--device", "host", "warm", "--key", pk, "--allow-insecure")
	if !strings.Contains(out, "nothing to compile") {
		t.Errorf("host warm: %q", out)
	}
	out, _ = mustRun(t, cmdutil.ExitOK, "--device", "host", "warm", "--key", pk, "--allow-insecure", "--json")
	var rep struct {
		Key, Device, Note string
		AIRs              []json.RawMessage `json:"airs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Key != pk || rep.Note == "" || rep.AIRs == nil || len(rep.AIRs) != 0 {
		t.Errorf("--json: %v, %+v", err, rep)
	}
	mustRun(t, cmdutil.ExitUsage, "warm")
	mustRun(t, cmdutil.ExitUsage, "warm", "--key", pk, "--gpu", "-1")
	_, errOut := mustRun(t, cmdutil.ExitBadInput, "--device", "host", "warm", "--key", filepath.Join(dir, "missing.pk"))
	if !strings.Contains(errOut, "missing.pk") {
		t.Errorf("missing key: stderr %q", errOut)
	}
	// A test-preset key without --allow-insecure is refused.
	mustRun(t, cmdutil.ExitUsage, "--device", "host", "warm", "--key", pk)
}
