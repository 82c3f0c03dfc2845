package device

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels"
)

// GPUConstraintSources are the module sources of the generated round-0 code that the backend of
// a GPU builds for AIRs of these verifying keys (BuildConstraintCode with the default options:
// generates for a program of at least minPiecesCode instructions, run in pieces; generatesWhole
// for a shorter one, run whole): one per AIR, made as buildGenerated or buildWhole makes it
// (names[i] is AIR i's name, as the proving key gives it: ProvingKey.AirName); none when
// ConstraintCodeEnv asks for the interpreter. They are written on the host
// alone, from the verifying keys, so that a prover can have them compiled (gpu.Prebuild) while
// its device opens and its key is made; a nil key is skipped. shared (nil: none) keeps the
// programs and their split for the backends given the same Shared.
func GPUConstraintSources(names []string, vks []*air.VerifyingKey, shared *Shared) ([]driver.ModuleSource, error) {
	if len(names) != len(vks) {
		return nil, fmt.Errorf("backend/device: %d names for %d verifying keys", len(names), len(vks))
	}
	if shared == nil {
		shared = NewShared()
	}
	var out []driver.ModuleSource
	if interp, err := envInterpreted(); interp || err != nil {
		return nil, err
	}
	for i, vk := range vks {
		if vk == nil || vk.DAG == nil {
			continue
		}
		pg, err := shared.compile(vk, constraints.All)
		if err != nil {
			return nil, fmt.Errorf("backend/device: AIR %s: %w", names[i], err)
		}
		if len(pg.Code) < minPiecesCode {
			// Runs whole on GPUs, by its generated code.
			src, err := kernels.WholeModule(names[i], pg)
			if err != nil {
				return nil, err
			}
			out = append(out, src)
			continue
		}
		ps, err := shared.pieces(vk, constraints.All, constraints.DevicePieces)
		if err != nil {
			return nil, fmt.Errorf("backend/device: AIR %s: %w", names[i], err)
		}
		src, err := kernels.GeneratedModuleOf(names[i], ps)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}
