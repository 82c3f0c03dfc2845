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
// (internal/kernels/piececode), built at run time into modules of the template
// shaders/rap/zerocheck_pieces.metal (kernel zc_uni_generated): the kernels read a slice's
// slot-value table (zc_uni_values) as zc_uni_pieces does and write the same partial rows, with
// the same parameters; they need no scratch, since a piece's values stay in registers.

// piecesTemplate is the module template of the generated piece code.
const piecesTemplate = "pieces"

// GeneratedPieces is the generated code of a program's pieces built on one device: one module
// per range of pieces (piececode.Modules).
type GeneratedPieces struct {
	modules []*gpu.Module
	ranges  []piececode.Module // First and Count of each module (Code dropped once built)
	Report  GeneratedReport
}

// GeneratedReport says what BuildGenerated built: for which AIR, how many modules and pieces,
// how many were compiled rather than found in a cache, the compile's wall time, and where the
// backend keeps the results.
type GeneratedReport struct {
	AIR          string        `json:"air"`
	Pieces       int           `json:"pieces"`
	Instructions int           `json:"instructions"`
	Modules      int           `json:"modules"`
	Compiled     int           `json:"compiled"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	Cache        string        `json:"cache,omitempty"`
}

// GeneratedModules writes the code of pp's pieces, module by module (piececode.Modules), as the
// sources of the modules BuildGenerated builds; air names the AIR for the log and the code's
// comments. The IDs are digests of the code.
func GeneratedModules(air string, pp *ProgramPieces) ([]driver.ModuleSource, []piececode.Module, error) {
	ms, err := piececode.Modules(pp.programs, "AIR "+air)
	if err != nil {
		return nil, nil, err
	}
	srcs := make([]driver.ModuleSource, len(ms))
	for i, m := range ms {
		h := sha256.New()
		h.Write([]byte(piecesTemplate + "\x00"))
		h.Write([]byte(m.Code))
		srcs[i] = driver.ModuleSource{
			ID:       piecesTemplate + "-" + hex.EncodeToString(h.Sum(nil)[:12]),
			Template: piecesTemplate,
			Code:     m.Code,
			What:     fmt.Sprintf("constraint code of AIR %s, pieces %d-%d of %d (%d instructions)", air, m.First, m.First+m.Count-1, len(pp.programs), m.Instructions),
		}
		ms[i].Code = ""
	}
	return srcs, ms, nil
}

// BuildGenerated builds the generated code of pp's pieces on dev (which must build modules:
// gpu.Device.BuildsModules): compiled in parallel by the backend, or loaded from its cache.
func BuildGenerated(dev *gpu.Device, air string, pp *ProgramPieces) (*GeneratedPieces, error) {
	srcs, ranges, err := GeneratedModules(air, pp)
	if err != nil {
		return nil, err
	}
	return BuildGeneratedFrom(dev, air, pp, srcs, ranges)
}

// BuildGeneratedFrom is BuildGenerated of the sources GeneratedModules wrote.
func BuildGeneratedFrom(dev *gpu.Device, air string, pp *ProgramPieces, srcs []driver.ModuleSource, ranges []piececode.Module) (*GeneratedPieces, error) {
	if len(srcs) != len(ranges) {
		return nil, fmt.Errorf("kernels: %d module sources for %d ranges", len(srcs), len(ranges))
	}
	start := time.Now()
	mods, err := dev.BuildModules(srcs)
	if err != nil {
		return nil, fmt.Errorf("kernels: constraint code of AIR %s: %w", air, err)
	}
	g := &GeneratedPieces{modules: mods, ranges: ranges}
	g.Report = GeneratedReport{AIR: air, Pieces: pp.NumPieces(), Modules: len(mods), Elapsed: time.Since(start)}
	for i, m := range mods {
		g.Report.Instructions += ranges[i].Instructions
		b := m.Build()
		if !b.Cached {
			g.Report.Compiled++
		}
		if b.CachePath != "" && g.Report.Cache == "" {
			g.Report.Cache = b.CachePath
		}
	}
	return g, nil
}

// UseGenerated makes round 0 run g, the generated code of these pieces (BuildGenerated of pp).
func (pp *ProgramPieces) UseGenerated(g *GeneratedPieces) error {
	n := 0
	for _, r := range g.ranges {
		if r.First != n {
			return fmt.Errorf("kernels: generated code: modules out of order")
		}
		n += r.Count
	}
	if n != pp.NumPieces() {
		return fmt.Errorf("kernels: generated code of %d pieces for %d", n, pp.NumPieces())
	}
	pp.Generated = g
	return nil
}

// encodeUniGenerated encodes the round-0 kernels of the generated pieces g over one slice: one
// dispatch per module over the same grid, the first zeroing the partial rows where params says.
func (z *Zerocheck) encodeUniGenerated(b *gpu.Batch, g *GeneratedPieces, groups, tpg gpu.Dim3, t *ZcTrace, eq *gpu.Array[uint32],
	params zcUniPiecesParams) error {
	for _, m := range g.modules {
		dispatchZcUniGenerated(b, m, groups, tpg, t.pieces.cp.Buffer, t.pieces.table.Buffer, t.weights.Buffer, z.vals.Buffer,
			eq.Buffer, z.partials.Buffer, params)
		params.zero = 0
	}
	return b.Err()
}

// generatedGroup is the group size of zc_uni_generated: the smallest of its modules' limits.
func (g *GeneratedPieces) groupLimit() int {
	lim := 0
	for _, m := range g.modules {
		if l := m.KernelLimits("zc_uni_generated").MaxThreadsPerGroup; l > 0 && (lim == 0 || l < lim) {
			lim = l
		}
	}
	return lim
}
