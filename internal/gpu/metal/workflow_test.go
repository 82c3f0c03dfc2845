package metal

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMacOSWorkflow checks, by reading it, what the macOS workflow must do for a green run to mean
// something (issue 14 item 5, issue 12): a runner image that exists, current action majors, the
// Metal compiler probed by running it, a required metallib and Metal device, the validation
// layers, the device report first, and selftest on Metal. Nothing here runs the workflow.
func TestMacOSWorkflow(t *testing.T) {
	b, err := os.ReadFile("../../../.github/workflows/macos.yml")
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	for _, want := range []string{
		`METALPROVE_REQUIRE_METALLIB: "1"`,
		RequireEnv + `: "1"`,
		`MTL_DEBUG_LAYER: "1"`,
		`MTL_SHADER_VALIDATION: "1"`,
		"xcrun -sdk macosx metal --version",
		"xcodebuild -downloadComponent MetalToolchain",
		"selftest --device metal",
		"TestDeviceReport",
		"No usable Metal device",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("the workflow lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^\s*xcrun[^\n]*--find metal\s*$`).MatchString(wf) {
		t.Error("the workflow probes the Metal compiler with --find, which succeeds without the Metal Toolchain")
	}
	if !regexp.MustCompile(`(?m)^\s*runs-on: macos-(15|26)\s*$`).MatchString(wf) {
		t.Error("runs-on is not macos-15 or macos-26")
	}
	for action, min := range map[string]int{"actions/checkout": 5, "actions/setup-go": 6} {
		m := regexp.MustCompile(regexp.QuoteMeta(action) + `@v(\d+)`).FindStringSubmatch(wf)
		if m == nil {
			t.Errorf("the workflow does not use %s", action)
			continue
		}
		if v, _ := strconv.Atoi(m[1]); v < min {
			t.Errorf("%s@v%s: want v%d or later", action, m[1], min)
		}
	}
	report, build := strings.Index(wf, "TestDeviceReport"), strings.Index(wf, "run: |\n          make")
	if report < 0 || build < 0 || report > build {
		t.Error("the device report (name, GPU families) does not come before the build")
	}
}
