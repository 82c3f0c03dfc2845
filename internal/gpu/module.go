package gpu

import (
	"fmt"
	"strings"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Module is a module built at run time from a module template of the kernel table (its kernels'
// KernelInfo.Module) and code generated for one AIR: Batch.DispatchIn runs its kernels.
type Module struct {
	dev     *Device
	src     driver.ModuleSource
	build   driver.ModuleBuild
	kernels map[string]*driver.KernelInfo // the template's kernels, Built set to the module's ID
	limits  map[string]driver.KernelLimits
}

// ID names the module (driver.ModuleSource.ID).
func (m *Module) ID() string { return m.src.ID }

// What says what the module's code is.
func (m *Module) What() string { return m.src.What }

// Build says how the module was obtained (compiled, from the cache).
func (m *Module) Build() driver.ModuleBuild { return m.build }

// KernelLimits are the limits of the module's kernel name on this device.
func (m *Module) KernelLimits(name string) driver.KernelLimits {
	if l, ok := m.limits[name]; ok {
		return l
	}
	return m.dev.commonLimits
}

// BuildsModules says whether the device builds modules at run time (driver.ModuleBuilder).
func (d *Device) BuildsModules() bool {
	_, ok := d.be.(driver.ModuleBuilder)
	return ok
}

// BuildModules builds the modules (the backend compiles them in parallel where it can, or loads
// them from its cache) and returns them in the order of srcs. A module this device has built
// before is returned as it is. It may take seconds to minutes on a first use; it does not hold
// the device, so other goroutines' work goes on meanwhile.
func (d *Device) BuildModules(srcs []driver.ModuleSource) ([]*Module, error) {
	mb, ok := d.be.(driver.ModuleBuilder)
	if !ok {
		return nil, &Error{Op: "build modules", Err: fmt.Errorf("%s does not build modules at run time", d.be.Name())}
	}
	out := make([]*Module, len(srcs))
	var todo []driver.ModuleSource
	var at []int
	d.mu.Lock()
	for i, s := range srcs {
		if err := checkModuleSource(s); err != nil {
			d.mu.Unlock()
			return nil, &Error{Op: "build modules", Err: err}
		}
		if m := d.modules[s.ID]; m != nil {
			out[i] = m
			continue
		}
		todo = append(todo, s)
		at = append(at, i)
	}
	d.mu.Unlock()
	if len(todo) == 0 {
		return out, nil
	}
	builds, err := mb.BuildModules(todo)
	if err != nil {
		return nil, &Error{Op: "build modules", Err: err}
	}
	if len(builds) != len(todo) {
		return nil, &Error{Op: "build modules", Err: fmt.Errorf("backend built %d modules of %d", len(builds), len(todo))}
	}
	kl, _ := d.be.(driver.KernelLimiter)
	for j, s := range todo {
		m := &Module{dev: d, src: s, build: builds[j], kernels: map[string]*driver.KernelInfo{}, limits: map[string]driver.KernelLimits{}}
		for i := range driver.Kernels {
			if driver.Kernels[i].Module != s.Template {
				continue
			}
			k := driver.Kernels[i]
			k.Built = s.ID
			m.kernels[k.Name] = &k
			l := d.commonLimits
			if kl != nil {
				bl, err := kl.KernelLimits(&k)
				if err != nil {
					return nil, &Error{Op: "build modules", Kernel: k.Name, Err: err}
				}
				if bl.MaxThreadsPerGroup > 0 && bl.MaxThreadsPerGroup < l.MaxThreadsPerGroup {
					l.MaxThreadsPerGroup = bl.MaxThreadsPerGroup
				}
				if bl.SIMDWidth > 0 {
					l.SIMDWidth = bl.SIMDWidth
				}
				l.StaticThreadgroupMemory = bl.StaticThreadgroupMemory
			}
			m.limits[k.Name] = l
		}
		out[at[j]] = m
	}
	d.mu.Lock()
	if d.modules == nil {
		d.modules = map[string]*Module{}
	}
	for _, i := range at {
		if prev := d.modules[out[i].src.ID]; prev != nil {
			out[i] = prev
			continue
		}
		d.modules[out[i].src.ID] = out[i]
	}
	d.mu.Unlock()
	return out, nil
}

// checkModuleSource refuses a source whose template is not in the kernel table.
func checkModuleSource(s driver.ModuleSource) error {
	if s.ID == "" || strings.ContainsAny(s.ID, "/\\ \x00") {
		return fmt.Errorf("module ID %q: want a non-empty name without separators", s.ID)
	}
	for i := range driver.Kernels {
		if driver.Kernels[i].Module == s.Template && s.Template != "" {
			return nil
		}
	}
	return fmt.Errorf("module %s: no module template %q in the kernel table", s.ID, s.Template)
}
