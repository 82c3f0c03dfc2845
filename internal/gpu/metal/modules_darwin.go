//go:build darwin && cgo

package metal

/*
#include "bridge.h"
*/
import "C"

import (
	"embed"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// moduleFS holds the module templates scripts/mslgen writes for Metal (module_NAME.gen.metal:
// MSL with the includes inlined and the generated-code marker).
//
//go:embed module_*.gen.metal
var moduleFS embed.FS

// moduleTimeout bounds one BuildModules call's wait for Metal's completion handlers: a compile
// that never reports becomes an error instead of a hang.
const moduleTimeout = 30 * time.Minute

var _ driver.ModuleBuilder = (*backend)(nil)

// moduleTemplate returns the embedded template of a module template name.
func moduleTemplate(name string) (string, error) {
	b, err := moduleFS.ReadFile(moduleTemplateFile(name))
	if err != nil {
		return "", fmt.Errorf("no Metal module template %q (%s is not embedded): %w", name, moduleTemplateFile(name), err)
	}
	return string(b), nil
}

// BuildModules implements driver.ModuleBuilder: each module's template completed with its code,
// compiled with the main library's compile options into a library of its own, its kernels'
// pipelines made, all modules side by side (mp_modules_build). Modules are kept in memory by
// their source's digest for the life of the backend (modules.go says why there is no disk cache);
// Dispatch and KernelLimits find a module's pipelines by KernelInfo.Built. It may run while other
// goroutines dispatch.
func (be *backend) BuildModules(ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
	jobs, err := planModules(ms, moduleTemplate)
	if err != nil {
		return nil, err
	}
	return be.modules.build(jobs, be.compileModules, be.log)
}

// compileModules is the compileFunc of BuildModules: one call of mp_modules_build for the batch.
// The jobs, their strings and arrays are C memory (they hold pointers), freed before it returns.
func (be *backend) compileModules(jobs []moduleJob) []moduleResult[*pipeline] {
	n := len(jobs)
	if n == 0 {
		return nil
	}
	var job C.mp_module_job
	cjobs := unsafe.Slice((*C.mp_module_job)(C.malloc(C.size_t(n)*C.size_t(unsafe.Sizeof(job)))), n)
	defer C.mp_free(unsafe.Pointer(&cjobs[0]))
	for i, j := range jobs {
		nk := len(j.kernels)
		cj := &cjobs[i]
		*cj = C.mp_module_job{}
		cj.source = C.CString(j.source)
		names := unsafe.Slice((**C.char)(C.malloc(C.size_t(nk)*C.size_t(unsafe.Sizeof((*C.char)(nil))))), nk)
		for k, name := range j.kernels {
			names[k] = C.CString(name)
		}
		cj.kernels = &names[0]
		cj.nkernels = C.int(nk)
		pipes := unsafe.Slice((**C.mp_pipeline)(C.malloc(C.size_t(nk)*C.size_t(unsafe.Sizeof((*C.mp_pipeline)(nil))))), nk)
		clear(pipes)
		cj.pipelines = &pipes[0]
		var info C.mp_pipeline_info
		cj.infos = (*C.mp_pipeline_info)(C.malloc(C.size_t(nk) * C.size_t(unsafe.Sizeof(info))))
	}
	defer func() {
		for i := range cjobs {
			cj := &cjobs[i]
			C.mp_free(unsafe.Pointer(cj.source))
			for _, name := range unsafe.Slice(cj.kernels, int(cj.nkernels)) {
				C.mp_free(unsafe.Pointer(name))
			}
			C.mp_free(unsafe.Pointer(cj.kernels))
			C.mp_free(unsafe.Pointer(cj.pipelines))
			C.mp_free(unsafe.Pointer(cj.infos))
			C.mp_free(unsafe.Pointer(cj.err))
		}
	}()

	C.mp_modules_build(be.ctx, &cjobs[0], C.int(n), C.double(moduleTimeout.Seconds()))

	out := make([]moduleResult[*pipeline], n)
	for i, j := range jobs {
		cj := &cjobs[i]
		out[i].elapsed = time.Duration(float64(cj.seconds) * float64(time.Second))
		if cj.err != nil {
			out[i].err = errors.New(C.GoString(cj.err)) // the compiler's log, whole
			continue
		}
		pipes := unsafe.Slice(cj.pipelines, len(j.kernels))
		infos := unsafe.Slice(cj.infos, len(j.kernels))
		out[i].pipes = make(map[string]*pipeline, len(j.kernels))
		for k, name := range j.kernels {
			out[i].pipes[name] = &pipeline{p: pipes[k], info: infos[k]}
		}
	}
	return out
}
