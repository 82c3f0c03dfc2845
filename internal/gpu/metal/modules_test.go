package metal

// These tests run on every OS: the plain Go half of BuildModules (modules.go) with the real
// module templates and generated code, and a stand-in for the Metal compile.

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// templateNames are the module templates of the kernel table.
func templateNames() []string {
	var names []string
	for i := range driver.Kernels {
		if m := driver.Kernels[i].Module; m != "" && !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// diskTemplate reads a template as the darwin build embeds it (module_NAME.gen.metal).
func diskTemplate(name string) (string, error) {
	b, err := os.ReadFile(moduleTemplateFile(name))
	return string(b), err
}

var kernelDecl = regexp.MustCompile(`(?m)^kernel void (\w+)\(`)

// Every module template of the kernel table has its Metal file, with one generated-code marker
// line, declaring exactly the table's kernels of that template; the main library declares every
// other kernel and none of the templates'.
func TestModuleTemplates(t *testing.T) {
	names := templateNames()
	if len(names) == 0 {
		t.Fatal("the kernel table has no module template")
	}
	main, err := os.ReadFile("shaders.gen.metal")
	if err != nil {
		t.Fatal(err)
	}
	var mainDecls []string
	for _, m := range kernelDecl.FindAllStringSubmatch(string(main), -1) {
		mainDecls = append(mainDecls, m[1])
	}
	slices.Sort(mainDecls)
	want := mainKernels()
	slices.Sort(want)
	if !slices.Equal(mainDecls, want) {
		t.Errorf("shaders.gen.metal declares %d kernels, the table has %d outside module templates", len(mainDecls), len(want))
	}
	for _, name := range names {
		src, err := diskTemplate(name)
		if err != nil {
			t.Fatalf("template %s: %v", name, err)
		}
		if n := strings.Count(src, "\n"+driver.GeneratedCodeMarker+"\n"); n != 1 {
			t.Errorf("%s: %d generated-code marker lines, want 1", moduleTemplateFile(name), n)
		}
		if !strings.Contains(src, "// mslgen:module "+name+"\n") {
			t.Errorf("%s does not say it is module template %s", moduleTemplateFile(name), name)
		}
		var decls []string
		for _, m := range kernelDecl.FindAllStringSubmatch(src, -1) {
			decls = append(decls, m[1])
		}
		if !slices.Equal(decls, templateKernels(name)) {
			t.Errorf("%s declares kernels %v, the table lists %v for it", moduleTemplateFile(name), decls, templateKernels(name))
		}
		for _, k := range decls {
			if slices.Contains(mainDecls, k) {
				t.Errorf("template %s's kernel %s is in shaders.gen.metal too", name, k)
			}
		}
	}
}

// fibModules are ModuleSources of the Fibonacci test AIR's generated code: each unit as the code
// of a module of its own (the bookkeeping tests only place and digest the code).
func fibModules(t *testing.T) []driver.ModuleSource {
	t.Helper()
	vk, err := air.Keygen(testair.FibonacciAir{}, 255, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := constraints.Split(vk, constraints.All, constraints.DevicePieces)
	if err != nil {
		t.Fatal(err)
	}
	us, err := piececode.Units(ps, "fib")
	if err != nil {
		t.Fatal(err)
	}
	var out []driver.ModuleSource
	for i, u := range us {
		out = append(out, driver.ModuleSource{ID: fmt.Sprintf("pieces-fib%d", i), Template: "pieces", Code: u.Code, What: fmt.Sprintf("fib pieces %d+%d", u.First, u.Count)})
	}
	return out
}

func TestPlanModules(t *testing.T) {
	ms := fibModules(t)
	jobs, err := planModules(ms, diskTemplate)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _ := diskTemplate("pieces")
	for i, j := range jobs {
		if j.id != ms[i].ID || j.template != "pieces" || j.what != ms[i].What {
			t.Errorf("job %d = %+v", i, j)
		}
		if strings.Contains(j.source, driver.GeneratedCodeMarker) || !strings.Contains(j.source, ms[i].Code) {
			t.Errorf("%s: the marker is not replaced by the module's code", j.id)
		}
		code := ms[i].Code
		if !strings.HasSuffix(code, "\n") {
			code += "\n"
		}
		if want := len(tmpl) - len(driver.GeneratedCodeMarker) - 1 + len(code); len(j.source) != want {
			t.Errorf("%s: source of %d bytes, want %d", j.id, len(j.source), want)
		}
		if j.digest != sourceHash(j.source) || !slices.Equal(j.kernels, []string{"zc_uni_generated"}) {
			t.Errorf("%s: digest %s, kernels %v", j.id, j.digest, j.kernels)
		}
	}

	bad := func(edit func(*driver.ModuleSource), tmpl func(string) (string, error), wantErr ...string) {
		t.Helper()
		m := ms[0]
		edit(&m)
		_, err := planModules([]driver.ModuleSource{m}, tmpl)
		for _, w := range wantErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("planModules(%+v) = %v, want an error mentioning %q", m.ID, err, w)
			}
		}
	}
	bad(func(m *driver.ModuleSource) { m.ID = "" }, diskTemplate, "no ID")
	bad(func(m *driver.ModuleSource) { m.Template = "nosuch" }, diskTemplate, "pieces-fib0", `"nosuch"`)
	bad(func(*driver.ModuleSource) {}, func(string) (string, error) { return "kernel void f() {}\n", nil },
		"pieces-fib0", "marker", "module_pieces.gen.metal")
	bad(func(*driver.ModuleSource) {}, func(string) (string, error) { return "", errors.New("not embedded") },
		"pieces-fib0", "not embedded")
}

func TestKernelModule(t *testing.T) {
	main := &driver.KernelInfo{Name: "ntt_fwd"}
	tmpl := &driver.KernelInfo{Name: "zc_uni_generated", Module: "pieces"}
	built := &driver.KernelInfo{Name: "zc_uni_generated", Module: "pieces", Built: "pieces-abc"}
	if id, err := kernelModule(main); id != "" || err != nil {
		t.Errorf("main kernel: %q, %v", id, err)
	}
	if id, err := kernelModule(built); id != "pieces-abc" || err != nil {
		t.Errorf("built kernel: %q, %v", id, err)
	}
	if _, err := kernelModule(tmpl); err == nil || !strings.Contains(err.Error(), "zc_uni_generated") || !strings.Contains(err.Error(), "BuildModules") {
		t.Errorf("template kernel without a module: %v", err)
	}
	if kernelLabel(main) != "ntt_fwd" || kernelLabel(built) != "zc_uni_generated (module pieces-abc)" {
		t.Errorf("labels %q, %q", kernelLabel(main), kernelLabel(built))
	}
	for _, k := range mainKernels() {
		if slices.Contains(templateKernels("pieces"), k) {
			t.Errorf("%s is both a main and a template kernel", k)
		}
	}
	if templateKernels("") != nil {
		t.Error(`templateKernels("") lists kernels`)
	}
}

// fakePipe stands in for a Metal pipeline: which source and kernel made it.
type fakePipe struct {
	digest, kernel string
}

// fakeCompiler compiles by rules: a source containing "BROKEN" fails with a compiler log; calls
// are counted and recorded.
type fakeCompiler struct {
	mu      sync.Mutex
	calls   [][]string // the IDs of each call's batch
	gate    chan struct{}
	started chan struct{}
	omit    bool // return a result without pipelines
}

func (f *fakeCompiler) compile(jobs []moduleJob) []moduleResult[*fakePipe] {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	f.mu.Lock()
	f.calls = append(f.calls, ids)
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	out := make([]moduleResult[*fakePipe], len(jobs))
	for i, j := range jobs {
		out[i].elapsed = time.Duration(i+1) * time.Millisecond
		if strings.Contains(j.source, "BROKEN") {
			out[i].err = errors.New("[MTLDevice newLibraryWithSource:options:completionHandler:]: program_source:12:3: error: use of undeclared identifier 'BROKEN'")
			continue
		}
		out[i].pipes = map[string]*fakePipe{}
		if f.omit {
			continue
		}
		for _, k := range j.kernels {
			out[i].pipes[k] = &fakePipe{digest: j.digest, kernel: k}
		}
	}
	return out
}

func (f *fakeCompiler) nCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func plan(t *testing.T, ms ...driver.ModuleSource) []moduleJob {
	t.Helper()
	jobs, err := planModules(ms, diskTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// The in-memory cache: one compile per distinct source, by digest, whatever the IDs; Cached for
// the rest; each module's pipelines found by its ID.
func TestModuleSetBuild(t *testing.T) {
	ms := fibModules(t)
	a := ms[0]
	b := driver.ModuleSource{ID: "pieces-other", Template: "pieces", Code: a.Code + "// other\n", What: "other"}
	sameAsA := driver.ModuleSource{ID: "pieces-alias", Template: "pieces", Code: a.Code, What: "a again"}
	var s moduleSet[*fakePipe]
	fc := &fakeCompiler{}
	log := zerolog.Nop()

	builds, err := s.build(plan(t, a, b, sameAsA), fc.compile, log)
	if err != nil {
		t.Fatal(err)
	}
	if fc.nCalls() != 1 || !slices.Equal(fc.calls[0], []string{a.ID, b.ID}) {
		t.Fatalf("compile calls %v, want one of [%s %s]", fc.calls, a.ID, b.ID)
	}
	for i, want := range []driver.ModuleBuild{
		{ID: a.ID, Elapsed: time.Millisecond}, {ID: b.ID, Elapsed: 2 * time.Millisecond}, {ID: sameAsA.ID, Cached: true},
	} {
		if builds[i] != want {
			t.Errorf("build %d = %+v, want %+v", i, builds[i], want)
		}
	}
	pa, err := s.pipeline(a.ID, "zc_uni_generated")
	if err != nil {
		t.Fatal(err)
	}
	palias, _ := s.pipeline(sameAsA.ID, "zc_uni_generated")
	pb, _ := s.pipeline(b.ID, "zc_uni_generated")
	if pa != palias || pa == pb || pa.kernel != "zc_uni_generated" {
		t.Errorf("pipelines %+v %+v %+v: want one for a and its alias, another for b", pa, palias, pb)
	}
	if _, err := s.pipeline("pieces-nosuch", "zc_uni_generated"); err == nil || !strings.Contains(err.Error(), "not built") {
		t.Errorf("unknown module: %v", err)
	}
	if _, err := s.pipeline(a.ID, "ntt_fwd"); err == nil || !strings.Contains(err.Error(), "no kernel ntt_fwd") {
		t.Errorf("unknown kernel: %v", err)
	}

	// Again, and under a new ID: nothing compiled.
	c := driver.ModuleSource{ID: "pieces-third", Template: "pieces", Code: b.Code, What: "b again"}
	builds, err = s.build(plan(t, a, c), fc.compile, log)
	if err != nil || fc.nCalls() != 1 || !builds[0].Cached || !builds[1].Cached || builds[1].Elapsed != 0 {
		t.Fatalf("rebuild: %+v, %v, %d compile calls", builds, err, fc.nCalls())
	}
	if p, _ := s.pipeline(c.ID, "zc_uni_generated"); p != pb {
		t.Error("a new ID of a built source does not get its pipelines")
	}
	if keys := s.modulePipeKeys(); len(keys) != 4 {
		t.Errorf("pipeline keys %v, want 4 modules' one kernel", keys)
	}

	// close gives back each pipeline once, and refuses later builds.
	pipes := s.close()
	if len(pipes) != 2 || !slices.Contains(pipes, pa) || !slices.Contains(pipes, pb) {
		t.Errorf("close returned %v, want the two pipelines", pipes)
	}
	if _, err := s.build(plan(t, a), fc.compile, log); !errors.Is(err, errModulesClosed) {
		t.Errorf("build after close: %v", err)
	}
	if _, err := s.pipeline(a.ID, "zc_uni_generated"); err == nil {
		t.Error("a pipeline found after close")
	}
}

// A failed compile names the module and what it is, carries the compiler's log, makes the call
// fail, and is tried again by a later call; the module that compiled is kept.
func TestModuleSetBuildError(t *testing.T) {
	ms := fibModules(t)
	good := ms[0]
	broken := driver.ModuleSource{ID: "pieces-broken", Template: "pieces", Code: "BROKEN\n", What: "constraint code of AIR x, pieces 0-3 of 9"}
	var s moduleSet[*fakePipe]
	fc := &fakeCompiler{}
	_, err := s.build(plan(t, good, broken), fc.compile, zerolog.Nop())
	if err == nil {
		t.Fatal("a broken module built")
	}
	for _, w := range []string{"metal: module pieces-broken (constraint code of AIR x, pieces 0-3 of 9)", "newLibraryWithSource", "undeclared identifier 'BROKEN'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), good.ID) {
		t.Errorf("error %q names the module that compiled", err)
	}
	if _, err := s.pipeline(broken.ID, "zc_uni_generated"); err == nil {
		t.Error("a failed module has pipelines")
	}
	// The good module is reused; the broken one is compiled again (and fails again).
	if _, err := s.build(plan(t, good, broken), fc.compile, zerolog.Nop()); err == nil || fc.nCalls() != 2 || !slices.Equal(fc.calls[1], []string{broken.ID}) {
		t.Fatalf("retry: %v; compile calls %v", err, fc.calls)
	}
	builds, err := s.build(plan(t, good), fc.compile, zerolog.Nop())
	if err != nil || !builds[0].Cached || fc.nCalls() != 2 {
		t.Fatalf("good module after failures: %+v, %v, %v", builds, err, fc.calls)
	}

	// A result without a kernel's pipeline is an error, not a nil pipeline at dispatch.
	var s2 moduleSet[*fakePipe]
	if _, err := s2.build(plan(t, good), (&fakeCompiler{omit: true}).compile, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "no pipeline for kernel zc_uni_generated") {
		t.Errorf("missing pipeline: %v", err)
	}

	// A compile that panics leaves no call waiting: the panic reaches its caller, the source
	// can be built again.
	var s3 moduleSet[*fakePipe]
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		s3.build(plan(t, good), func([]moduleJob) []moduleResult[*fakePipe] { panic("bridge crashed") }, zerolog.Nop())
	}()
	if _, err := s3.build(plan(t, good), fc.compile, zerolog.Nop()); err != nil {
		t.Errorf("build after a panicked compile: %v", err)
	}
}

// Calls that want the same source at once compile it once: the second waits for the first.
func TestModuleSetConcurrent(t *testing.T) {
	ms := fibModules(t)
	var s moduleSet[*fakePipe]
	fc := &fakeCompiler{gate: make(chan struct{}), started: make(chan struct{}, 4)}
	var wg sync.WaitGroup
	var cached atomic.Int32
	errs := make(chan error, 2)
	first, second := ms[0], ms[0]
	first.ID, second.ID = "pieces-first", "pieces-second"
	jobs := map[string][]moduleJob{first.ID: plan(t, first), second.ID: plan(t, second)}
	run := func(id string) {
		defer wg.Done()
		builds, err := s.build(jobs[id], fc.compile, zerolog.Nop())
		if err != nil {
			errs <- err
			return
		}
		if builds[0].Cached {
			cached.Add(1)
		}
	}
	wg.Add(1)
	go run("pieces-first")
	<-fc.started // the first call is compiling
	wg.Add(1)
	go run("pieces-second")
	// Let the second call reach its wait (it must not compile: started would get a second send).
	time.Sleep(20 * time.Millisecond)
	close(fc.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if fc.nCalls() != 1 || cached.Load() != 1 {
		t.Errorf("%d compiles, %d cached; want 1 and 1", fc.nCalls(), cached.Load())
	}
	p1, err1 := s.pipeline("pieces-first", "zc_uni_generated")
	p2, err2 := s.pipeline("pieces-second", "zc_uni_generated")
	if err1 != nil || err2 != nil || p1 != p2 {
		t.Errorf("pipelines %v %v (%v, %v)", p1, p2, err1, err2)
	}

	// close waits for a build in flight and releases what it made.
	var s2 moduleSet[*fakePipe]
	fc2 := &fakeCompiler{gate: make(chan struct{}), started: make(chan struct{}, 1)}
	done := make(chan error, 1)
	job := plan(t, ms[0])
	go func() {
		_, err := s2.build(job, fc2.compile, zerolog.Nop())
		done <- err
	}()
	<-fc2.started
	closed := make(chan []*fakePipe, 1)
	go func() { closed <- s2.close() }()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("close returned with a build in flight")
	default:
	}
	close(fc2.gate)
	if pipes := <-closed; len(pipes) != 1 {
		t.Errorf("close returned %d pipelines, want the one built in flight", len(pipes))
	}
	if err := <-done; !errors.Is(err, errModulesClosed) {
		t.Errorf("a build that finished after close: %v", err)
	}
}
