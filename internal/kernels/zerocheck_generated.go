package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// Round 0 of the batch constraint sumcheck by an AIR's generated piece code
// (internal/kernels/piececode), built at run time into a module of the template
// shaders/constraints/zerocheck_pieces.metal (kernel zc_uni_generated): the kernels read a slice's
// slot-value table (zc_uni_values) as zc_uni_pieces does and write the same partial rows, with
// the same parameters; they need no scratch, since a piece's values stay in registers.

// piecesTemplate is the module template of the generated piece code.
const piecesTemplate = "pieces"

// GeneratedPieces is the generated code of a program's pieces built on one device: one module,
// linked from units of pieces compiled in parallel (piececode.Units) and the main code
// (piececode.Main).
type GeneratedPieces struct {
	module *gpu.Module
	Report GeneratedReport
}

// GeneratedReport says what BuildGenerated (or BuildWhole) built: for which AIR, how many units
// of how many pieces and instructions (a whole program: one unit, no pieces), whether the module
// was compiled rather than found in a cache, the build's wall time, and where the backend keeps
// the result.
type GeneratedReport struct {
	AIR          string        `json:"air"`
	Pieces       int           `json:"pieces"`
	Instructions int           `json:"instructions"`
	Units        int           `json:"units"`
	Compiled     bool          `json:"compiled"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	Cache        string        `json:"cache,omitempty"`
}

// GeneratedModule writes the code of pp's pieces (piececode.Units and Main) as the source of the
// module BuildGenerated builds; air names the AIR for the log and the code's comments. The ID is
// a digest of the code.
func GeneratedModule(air string, pp *ProgramPieces) (driver.ModuleSource, []piececode.Unit, error) {
	desc := "AIR " + air
	us, err := piececode.Units(pp.programs, desc)
	if err != nil {
		return driver.ModuleSource{}, nil, err
	}
	main, err := piececode.Main(us, len(pp.programs), desc)
	if err != nil {
		return driver.ModuleSource{}, nil, err
	}
	src := driver.ModuleSource{Template: piecesTemplate, Code: main}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", piecesTemplate, len(us))
	instr := 0
	for i := range us {
		src.Units = append(src.Units, us[i].Code)
		fmt.Fprintf(h, "%d:", len(us[i].Code))
		h.Write([]byte(us[i].Code))
		instr += us[i].Instructions
		us[i].Code = ""
	}
	h.Write([]byte(main))
	src.ID = piecesTemplate + "-" + hex.EncodeToString(h.Sum(nil)[:12])
	src.What = fmt.Sprintf("constraint code of AIR %s: %d pieces, %d instructions, %d units", air, len(pp.programs), instr, len(us))
	return src, us, nil
}

// BuildGenerated builds the generated code of pp's pieces on dev (which must build modules:
// gpu.Device.BuildsModules): its units compiled in parallel by the backend, or the module loaded
// from its cache.
func BuildGenerated(dev *gpu.Device, air string, pp *ProgramPieces) (*GeneratedPieces, error) {
	src, units, err := GeneratedModule(air, pp)
	if err != nil {
		return nil, err
	}
	return BuildGeneratedFrom(dev, air, pp, src, units)
}

// BuildGeneratedFrom is BuildGenerated of the source GeneratedModule wrote.
func BuildGeneratedFrom(dev *gpu.Device, air string, pp *ProgramPieces, src driver.ModuleSource, units []piececode.Unit) (*GeneratedPieces, error) {
	start := time.Now()
	mods, err := dev.BuildModules([]driver.ModuleSource{src})
	if err != nil {
		return nil, fmt.Errorf("kernels: constraint code of AIR %s: %w", air, err)
	}
	b := mods[0].Build()
	g := &GeneratedPieces{module: mods[0]}
	g.Report = GeneratedReport{AIR: air, Pieces: pp.NumPieces(), Units: len(units), Compiled: !b.Cached,
		Elapsed: time.Since(start), Cache: b.CachePath}
	for _, u := range units {
		g.Report.Instructions += u.Instructions
	}
	return g, nil
}

// UseGenerated makes round 0 run g, the generated code of these pieces (BuildGenerated of pp).
func (pp *ProgramPieces) UseGenerated(g *GeneratedPieces) error {
	if g.Report.Pieces != pp.NumPieces() {
		return fmt.Errorf("kernels: generated code of %d pieces for %d", g.Report.Pieces, pp.NumPieces())
	}
	pp.Generated = g
	return nil
}

// encodeUniGenerated encodes the round-0 kernel of the generated pieces g over one slice.
func (z *Zerocheck) encodeUniGenerated(b *gpu.Batch, g *GeneratedPieces, groups, tpg gpu.Dim3, t *ZcTrace, eq *gpu.Array[Mont4],
	params zcUniPiecesParams) error {
	dispatchZcUniGenerated(b, g.module, groups, tpg, t.pieces.cp.Buffer, t.pieces.table.Buffer, t.weights.Buffer, z.vals.Buffer,
		eq.Buffer, z.partials.Buffer, params)
	return b.Err()
}

// groupLimit is zc_uni_generated's largest group on the device (0: no limit of its own).
func (g *GeneratedPieces) groupLimit() int {
	return g.module.KernelLimits("zc_uni_generated").MaxThreadsPerGroup
}
