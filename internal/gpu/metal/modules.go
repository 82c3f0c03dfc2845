package metal

// Modules built at run time (driver.ModuleBuilder): the plain Go half, with no build tag so that
// its tests run on every OS. metal_darwin.go and modules_darwin.go supply the Metal half: the
// embedded templates and one call of the bridge that compiles a batch of modules side by side
// (mp_modules_build).
//
// Caching. A module's compiled pipelines are kept in memory for the life of the backend, by the
// SHA-256 of its instantiated source (moduleSet): a module built before, under any ID, is not
// compiled again, and two BuildModules calls that want the same source at once compile it once.
// Nothing is written to disk by this package. Metal keeps its own cache of compiled pipelines
// per app, which Apple's MTLBinaryArchive.h describes as populated as compilation occurs and
// accelerating pipeline creation after the first time; the same header says that updating an
// MTLBinaryArchive at run time "requires corruption resiliency, careful storage space management
// and may cache hard-to-reproduce errors", and an archive would not spare the source compile
// (newLibraryWithSource) anyway, only the pipelines'. With no Apple hardware here to test an
// archive's failure modes, this backend has no disk cache of its own: ModuleBuild's CachePath is
// "", and Cached means built by this backend before (or by a call in flight). How much Metal's
// cache saves a second process is unmeasured.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// moduleTemplateFile is the file scripts/mslgen writes a module template to, for this target.
func moduleTemplateFile(template string) string { return "module_" + template + ".gen.metal" }

// templateKernels are the names of the kernel table's kernels of a module template, in table
// order.
func templateKernels(template string) []string {
	var names []string
	for i := range driver.Kernels {
		if template != "" && driver.Kernels[i].Module == template {
			names = append(names, driver.Kernels[i].Name)
		}
	}
	return names
}

// mainKernels are the names of the kernels of the main library (shaders.gen.metal): the kernel
// table less the module templates' kernels.
func mainKernels() []string {
	var names []string
	for i := range driver.Kernels {
		if driver.Kernels[i].Module == "" {
			names = append(names, driver.Kernels[i].Name)
		}
	}
	return names
}

// moduleJob is one module of a BuildModules call, ready to compile.
type moduleJob struct {
	id, template, what string
	source             string   // the template with the module's code in place of the marker
	digest             string   // sourceHash(source): the in-memory cache's key
	kernels            []string // the template's kernels: one pipeline each
}

// planModules instantiates each module's template (read by template, e.g. from the embedded
// files) and lists the kernels to make pipelines of. Errors name the module.
func planModules(ms []driver.ModuleSource, template func(name string) (string, error)) ([]moduleJob, error) {
	jobs := make([]moduleJob, len(ms))
	for i, m := range ms {
		if m.ID == "" {
			return nil, fmt.Errorf("metal: module %d of %d has no ID", i+1, len(ms))
		}
		kernels := templateKernels(m.Template)
		if len(kernels) == 0 {
			return nil, fmt.Errorf("metal: module %s: the kernel table has no kernel of module template %q", m.ID, m.Template)
		}
		tmpl, err := template(m.Template)
		if err != nil {
			return nil, fmt.Errorf("metal: module %s: %w", m.ID, err)
		}
		// Metal compiles a module as one source: its units, then its main code, in place of the
		// template's marker.
		src, err := driver.Combined(tmpl, m.Units, m.Code)
		if err != nil {
			return nil, fmt.Errorf("metal: module %s: template %s (%s): %w", m.ID, m.Template, moduleTemplateFile(m.Template), err)
		}
		jobs[i] = moduleJob{id: m.ID, template: m.Template, what: m.What, source: src, digest: sourceHash(src), kernels: kernels}
	}
	return jobs, nil
}

// kernelModule says where k's pipeline is: "" for the main library, else the ID of the built
// module that a dispatch of a template's kernel names (k.Built). A template's kernel without
// Built has no pipeline: the main library does not contain it.
func kernelModule(k *driver.KernelInfo) (string, error) {
	switch {
	case k.Built != "":
		return k.Built, nil
	case k.Module != "":
		return "", fmt.Errorf("metal: kernel %s of module template %q runs only from a module built from it (BuildModules)", k.Name, k.Module)
	}
	return "", nil
}

// kernelLabel names k in errors and in its encoder's label (a failed command buffer names it):
// a built module's kernel with its module, since every module of a template has the same names.
func kernelLabel(k *driver.KernelInfo) string {
	if k.Built != "" {
		return k.Name + " (module " + k.Built + ")"
	}
	return k.Name
}

// moduleResult is what compiling one module gave: a pipeline per kernel, or an error.
type moduleResult[P any] struct {
	pipes   map[string]P
	elapsed time.Duration
	err     error
}

// compileFunc compiles a batch of modules (side by side where it can) and returns one result per
// job, in order.
type compileFunc[P any] func(jobs []moduleJob) []moduleResult[P]

// moduleEntry is a module source being built or built: done is closed when pipes or err is set.
type moduleEntry[P any] struct {
	done    chan struct{}
	pipes   map[string]P
	elapsed time.Duration
	err     error
}

// moduleSet holds a backend's built modules: by source digest (built or being built) and by
// module ID. Its methods may be called from several goroutines.
type moduleSet[P any] struct {
	mu     sync.Mutex
	bySrc  map[string]*moduleEntry[P]
	byID   map[string]*moduleEntry[P]
	closed bool
}

// errModulesClosed is returned by build after close.
var errModulesClosed = errors.New("metal: the backend is closed")

// build returns the modules of jobs: those whose source this set has built (under any ID) or is
// building (in another call) as they are, Cached; the others compiled by one call of compile,
// Elapsed its time for each. Sources that fail are forgotten (a later call tries again); the
// error names each failed module with what it is. log gets one record before a compile (what,
// how many modules, how much source) and one after (how long).
func (s *moduleSet[P]) build(jobs []moduleJob, compile compileFunc[P], log zerolog.Logger) (builds []driver.ModuleBuild, err error) {
	builds = make([]driver.ModuleBuild, len(jobs))
	entries := make([]*moduleEntry[P], len(jobs))
	var todo []int // jobs whose source this call compiles, one per distinct source
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errModulesClosed
	}
	if s.bySrc == nil {
		s.bySrc, s.byID = map[string]*moduleEntry[P]{}, map[string]*moduleEntry[P]{}
	}
	for i, j := range jobs {
		builds[i] = driver.ModuleBuild{ID: j.id, Cached: true}
		if e := s.bySrc[j.digest]; e != nil {
			entries[i] = e
			continue
		}
		e := &moduleEntry[P]{done: make(chan struct{})}
		s.bySrc[j.digest] = e
		entries[i] = e
		todo = append(todo, i)
		builds[i].Cached = false
	}
	s.mu.Unlock()

	if len(todo) > 0 {
		s.compile(jobs, entries, todo, compile, log)
		for _, i := range todo {
			builds[i].Elapsed = entries[i].elapsed
		}
	}

	var errs []error
	seen := map[*moduleEntry[P]]bool{}
	for i, e := range entries {
		<-e.done
		if e.err != nil && !seen[e] {
			seen[e] = true
			errs = append(errs, fmt.Errorf("metal: module %s (%s): %w", jobs[i].id, jobs[i].what, e.err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errModulesClosed // close has taken the pipelines to release
	}
	for i, j := range jobs {
		s.byID[j.id] = entries[i]
	}
	return builds, nil
}

// compile compiles jobs[i] for i in todo and completes their entries, also when compile panics
// (so that no other call waits forever).
func (s *moduleSet[P]) compile(jobs []moduleJob, entries []*moduleEntry[P], todo []int, compile compileFunc[P], log zerolog.Logger) {
	batch := make([]moduleJob, len(todo))
	srcBytes := 0
	for n, i := range todo {
		batch[n] = jobs[i]
		srcBytes += len(jobs[i].source)
	}
	log.Info().Int("modules", len(batch)).Str("what", batch[0].what).Int("source_bytes", srcBytes).
		Msg("metal: compiling modules with newLibraryWithSource, side by side (kept in memory for this process; Metal keeps its own shader cache)")
	start := time.Now()
	var results []moduleResult[P]
	defer func() {
		failed := 0
		for n, i := range todo {
			e := entries[i]
			switch {
			case n >= len(results):
				e.err = errors.New("the Metal bridge returned no result for it")
			case results[n].err != nil:
				e.err = results[n].err
			default:
				e.pipes, e.elapsed = results[n].pipes, results[n].elapsed
				for _, k := range jobs[i].kernels {
					if _, ok := e.pipes[k]; !ok {
						e.err = fmt.Errorf("the Metal bridge returned no pipeline for kernel %s", k)
					}
				}
			}
			if e.err != nil {
				failed++
				e.pipes = nil
				s.mu.Lock()
				if s.bySrc[jobs[i].digest] == e {
					delete(s.bySrc, jobs[i].digest)
				}
				s.mu.Unlock()
			}
			close(e.done)
		}
		ev := log.Info()
		if failed > 0 {
			ev = log.Warn().Int("failed", failed)
		}
		ev.Int("modules", len(batch)).Str("elapsed", time.Since(start).Round(time.Millisecond).String()).Msg("metal: modules compiled")
	}()
	results = compile(batch)
}

// pipeline returns the pipeline of kernel name in the built module id.
func (s *moduleSet[P]) pipeline(id, name string) (P, error) {
	s.mu.Lock()
	e := s.byID[id]
	s.mu.Unlock()
	var zero P
	if e == nil {
		return zero, fmt.Errorf("metal: module %s is not built on this device (BuildModules builds it)", id)
	}
	p, ok := e.pipes[name] // set before the entry reached byID, never changed after
	if !ok {
		return zero, fmt.Errorf("metal: module %s has no kernel %s", id, name)
	}
	return p, nil
}

// close refuses later builds, waits for builds in flight and returns every pipeline built, once
// each, for the caller to release.
func (s *moduleSet[P]) close() []P {
	s.mu.Lock()
	s.closed = true
	entries := make([]*moduleEntry[P], 0, len(s.bySrc))
	for _, e := range s.bySrc {
		entries = append(entries, e)
	}
	s.bySrc, s.byID = nil, nil
	s.mu.Unlock()
	var out []P
	for _, e := range entries {
		<-e.done
		for _, p := range e.pipes {
			out = append(out, p)
		}
	}
	return out
}

// modulePipeKeys lists "ID/kernel" for every kernel of every module built: for tests and logs.
func (s *moduleSet[P]) modulePipeKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for id, e := range s.byID {
		for k := range e.pipes {
			keys = append(keys, id+"/"+k)
		}
	}
	return keys
}
