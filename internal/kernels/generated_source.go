package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// GeneratedModuleOf is GeneratedModule of pieces that are not uploaded (constraints.Split's
// output, as UploadPieces takes it): the very source BuildGenerated builds for them, written on
// the host alone, so that it can be compiled before a device is open (gpu.Prebuild).
func GeneratedModuleOf(air string, pieces []*constraints.Program) (driver.ModuleSource, error) {
	if len(pieces) == 0 {
		return driver.ModuleSource{}, fmt.Errorf("kernels: constraint code of AIR %s: no pieces", air)
	}
	src, _, err := GeneratedModule(air, &ProgramPieces{programs: pieces, numPublic: pieces[0].NumPublic})
	return src, err
}
