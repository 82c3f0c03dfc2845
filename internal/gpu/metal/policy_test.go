package metal

// These tests run on every OS: they check the backend's decisions (policy.go) and, with stand-ins
// for uname and xcrun, what scripts/build-metallib.sh writes, against the real embedded source.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func readSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("shaders.gen.metal")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestChooseLibrary(t *testing.T) {
	src := readSource(t)
	good := []byte(sourceHash(src) + "  shaders.gen.metal\n")
	lib := []byte("MTLB fake metallib")
	other := sourceHash(src + "// edited\n")
	cases := []struct {
		name         string
		lib, stamp   []byte
		force        bool
		use, warn    bool
		whyMentions  string
		sourceEdited bool
	}{
		{name: "no metallib", stamp: good, whyMentions: "no metallib embedded"},
		{name: "no metallib, no stamp", whyMentions: "no metallib embedded"},
		{name: "matching stamp", lib: lib, stamp: good, use: true, whyMentions: "built from the embedded source"},
		{name: "upper-case hex", lib: lib, stamp: []byte(strings.ToUpper(sourceHash(src))), use: true},
		{name: "forced source", lib: lib, stamp: good, force: true, whyMentions: SourceEnv + "=1"},
		{name: "no stamp", lib: lib, warn: true, whyMentions: "no stamp"},
		{name: "empty stamp", lib: lib, stamp: []byte{}, warn: true, whyMentions: "malformed"},
		{name: "short hash", lib: lib, stamp: []byte("abc123  shaders.gen.metal\n"), warn: true, whyMentions: "malformed"},
		{name: "not hex", lib: lib, stamp: []byte(strings.Repeat("z", 64)), warn: true, whyMentions: "malformed"},
		{name: "stale", lib: lib, stamp: []byte(other + "  shaders.gen.metal\n"), warn: true, whyMentions: "stale"},
		{name: "source edited after the build", lib: lib, stamp: good, sourceEdited: true, warn: true, whyMentions: "stale"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := src
			if c.sourceEdited {
				s += "\n"
			}
			got := chooseLibrary(c.lib, c.stamp, s, c.force)
			if got.useMetallib != c.use || got.warn != c.warn || !strings.Contains(got.why, c.whyMentions) {
				t.Fatalf("chooseLibrary = %+v; want use %v, warn %v, why mentioning %q", got, c.use, c.warn, c.whyMentions)
			}
			if !got.useMetallib && !strings.Contains(got.why, "compiling the embedded source") {
				t.Fatalf("why %q does not say that the source is compiled", got.why)
			}
		})
	}
}

func TestCheckSpan(t *testing.T) {
	for _, c := range []struct {
		off, n, size int
		ok           bool
	}{
		{0, 0, 0, true}, {0, 16, 16, true}, {8, 8, 16, true}, {16, 0, 16, true},
		{8, 9, 16, false}, {-1, 4, 16, false}, {0, -1, 16, false}, {17, 0, 16, false},
	} {
		err := checkSpan("upload", c.off, c.n, c.size)
		if (err == nil) != c.ok {
			t.Errorf("checkSpan(%d, %d, %d) = %v, want ok %v", c.off, c.n, c.size, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "metal: upload: range [") {
			t.Errorf("error %q does not name the operation and the range", err)
		}
	}
}

func TestCanBlit(t *testing.T) {
	for _, c := range []struct {
		dst, src, n int
		same, ok    bool
	}{
		{0, 0, 16, false, true},
		{8, 0, 16, false, true},
		{33, 1, 5, false, false}, // unaligned
		{0, 4, 6, false, false},  // size not a multiple of 4
		{0, 16, 16, true, true},  // one buffer, disjoint
		{0, 8, 16, true, false},  // one buffer, overlapping
		{8, 0, 16, true, false},
		{8, 8, 4, true, false}, // onto itself
	} {
		if got := canBlit(c.dst, c.src, c.n, c.same); got != c.ok {
			t.Errorf("canBlit(%d, %d, %d, same %v) = %v, want %v", c.dst, c.src, c.n, c.same, got, c.ok)
		}
	}
}

// TestLanguageVersionsAgree: the metallib (build-metallib.sh's -std) and the source fallback
// (bridge.m's MTLCompileOptions.languageVersion) must compile the same MSL version.
func TestLanguageVersionsAgree(t *testing.T) {
	script, err := os.ReadFile("../../../scripts/build-metallib.sh")
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := os.ReadFile("bridge.m")
	if err != nil {
		t.Fatal(err)
	}
	std := regexp.MustCompile(`(?m)^MSL_STD=macos-metal(\d+)\.(\d+)$`).FindSubmatch(script)
	lv := regexp.MustCompile(`opts\.languageVersion = MTLLanguageVersion(\d+)_(\d+);`).FindAllSubmatch(bridge, -1)
	if std == nil || len(lv) != 1 {
		t.Fatalf("found %q in build-metallib.sh and %d languageVersion assignments in bridge.m; want one each", std, len(lv))
	}
	if string(std[1]) != string(lv[0][1]) || string(std[2]) != string(lv[0][2]) {
		t.Fatalf("build-metallib.sh compiles MSL %s.%s, bridge.m's fallback %s.%s", std[1], std[2], lv[0][1], lv[0][2])
	}
}

// fakeTools writes stand-ins for uname (printing Darwin) and, when metal is "ok" or "missing",
// xcrun into a new directory: "ok" runs the Metal compiler (copying its input to -o), "missing"
// acts as Xcode 26 without the Metal Toolchain component (`--find metal` prints a path, running
// the compiler fails).
func fakeTools(t *testing.T, metal string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("uname", "echo Darwin\n")
	switch metal {
	case "ok":
		write("xcrun", `out= ; prev= ; for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done
case " $* " in
*" --find metal "*) echo /fake/metal ;;
*" metal --version "*) echo "Apple metal version 99.0 (fake)" ;;
*" metal -c "*) cat "${@: -1}" >"$out" ;;
*" metallib "*) { printf MTLB; cat "${@: -1}"; } >"$out" ;;
*) echo "fake xcrun: unexpected: $*" >&2; exit 2 ;;
esac
`)
	case "missing":
		write("xcrun", `case " $* " in
*" --find metal "*) echo /Applications/Xcode.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/bin/metal ;;
*) echo "error: cannot execute tool 'metal' due to missing Metal Toolchain; use: xcodebuild -downloadComponent MetalToolchain" >&2; exit 72 ;;
esac
`)
	}
	return dir
}

// runBuildScript runs scripts/build-metallib.sh with the tools of dir first on PATH (only them and
// the system directories when system is false), writing to out.
func runBuildScript(t *testing.T, dir, out string, require, system bool) (string, error) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	if !system {
		path = dir + ":/usr/bin:/bin"
	}
	cmd := exec.Command(bash, "../../../scripts/build-metallib.sh", out)
	cmd.Env = append(os.Environ(), "PATH="+path, "METALPROVE_REQUIRE_METALLIB=0")
	if require {
		cmd.Env = append(cmd.Env, "METALPROVE_REQUIRE_METALLIB=1")
	}
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestBuildMetallibScript checks scripts/build-metallib.sh with stand-in tools: it stamps the
// metallib with the hash that chooseLibrary accepts for the embedded source; without a working
// Metal compiler it removes an old metallib and succeeds with a warning, or fails when
// METALPROVE_REQUIRE_METALLIB=1.
func TestBuildMetallibScript(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("bash script")
	}
	src := readSource(t)
	out := filepath.Join(t.TempDir(), "metalprove.metallib")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	t.Run("compiler runs", func(t *testing.T) {
		log, err := runBuildScript(t, fakeTools(t, "ok"), out, true, true)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		lib, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		stamp, err := os.ReadFile(out + ".sha256")
		if err != nil {
			t.Fatal(err)
		}
		if string(lib) != "MTLB"+src {
			t.Fatalf("the metallib was not built from shaders.gen.metal")
		}
		if c := chooseLibrary(lib, stamp, src, false); !c.useMetallib {
			t.Fatalf("the freshly built metallib is not used: %s\n%s", c.why, log)
		}
		if c := chooseLibrary(lib, stamp, src+"kernel void added() {}\n", false); c.useMetallib || !c.warn {
			t.Fatalf("a metallib built from other shaders is used: %+v", c)
		}
		if !strings.Contains(log, "-std=macos-metal") {
			t.Errorf("log does not name the language version:\n%s", log)
		}
	})

	for _, require := range []bool{false, true} {
		t.Run("no Metal Toolchain, require="+map[bool]string{false: "0", true: "1"}[require], func(t *testing.T) {
			for _, p := range []string{out, out + ".sha256"} {
				if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			log, err := runBuildScript(t, fakeTools(t, "missing"), out, require, true)
			if require {
				if err == nil || !strings.Contains(log, "error:") {
					t.Fatalf("err %v; want a failure with METALPROVE_REQUIRE_METALLIB=1\n%s", err, log)
				}
			} else if err != nil || !strings.Contains(log, "warning:") {
				t.Fatalf("err %v; want success with a warning\n%s", err, log)
			}
			if !strings.Contains(log, "downloadComponent MetalToolchain") {
				t.Errorf("log does not say how to install the toolchain:\n%s", log)
			}
			if exists(out) || exists(out+".sha256") {
				t.Fatal("the old metallib or its stamp survived")
			}
		})
	}

	t.Run("no xcrun", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/xcrun"); err == nil {
			t.Skip("this system has /usr/bin/xcrun")
		}
		log, err := runBuildScript(t, fakeTools(t, "none"), out, false, false)
		if err != nil || !strings.Contains(log, "xcrun not found") {
			t.Fatalf("err %v; want success with a warning naming xcrun\n%s", err, log)
		}
	})
}

func TestCommandBufferBudget(t *testing.T) {
	b, err := newBudget("")
	if err != nil || b.maxBytes != 512<<20 || b.maxCmds != 64 {
		t.Fatalf("default budget %+v, %v", b, err)
	}
	const mib = 1 << 20
	b = cbBudget{maxBytes: 100 * mib, maxCmds: 4}
	// cost in MiB -> whether the command buffer is committed before the command
	steps := []struct {
		cost   int64
		commit bool
	}{
		{40, false}, {40, false}, // 80
		{30, true},                         // 110 > 100: a new command buffer holds 30
		{250, true},                        // larger than the budget: a command buffer of its own
		{1, true},                          // after it, a new one
		{1, false}, {1, false}, {1, false}, // 4 commands
		{1, true}, // the fifth: command limit
	}
	for i, s := range steps {
		if got := b.admit(s.cost * mib); got != s.commit {
			t.Fatalf("step %d (cost %d MiB): commit first %v, want %v (budget now %+v)", i, s.cost, got, s.commit, b)
		}
	}
	b.reset()
	if b.admit(250*mib) || !b.admit(0) {
		t.Fatal("after reset: the first command never commits; a command after an oversized one does")
	}

	for env, want := range map[string]int64{"1": mib, "2048": 2048 * mib} {
		if b, err := newBudget(env); err != nil || b.maxBytes != want {
			t.Errorf("newBudget(%q) = %+v, %v", env, b, err)
		}
	}
	for _, env := range []string{"0", "-5", "1.5", "lots", "9999999"} {
		if _, err := newBudget(env); err == nil || !strings.Contains(err.Error(), cbBudgetEnv) {
			t.Errorf("newBudget(%q): err %v, want one naming %s", env, err, cbBudgetEnv)
		}
	}
}

func TestDispatchCost(t *testing.T) {
	// slots: buffer A (100), a value, buffer B (30), A again (in place: counted once)
	if got := dispatchCost([]uintptr{1, 0, 2, 1}, []int{100, 0, 30, 100}); got != 130 {
		t.Fatalf("dispatchCost = %d, want 130", got)
	}
	if got := dispatchCost(nil, nil); got != 0 {
		t.Fatalf("dispatchCost of nothing = %d", got)
	}
}

func TestFamilyNames(t *testing.T) {
	m1 := map[int64]bool{1007: true, 2002: true, 5001: true} // what an M1 on macOS 13+ reports
	if got := strings.Join(familyNames(func(id int64) bool { return m1[id] }), " "); got != "apple7 mac2 metal3" {
		t.Fatalf("familyNames = %q", got)
	}
	if got := familyNames(func(int64) bool { return false }); len(got) != 0 {
		t.Fatalf("familyNames of nothing = %q", got)
	}
}
