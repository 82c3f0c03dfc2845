package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

// Round 0 of the batch constraint sumcheck by an AIR's generated whole-program code
// (piececode.Whole), built at run time into a module of the template
// shaders/constraints/zerocheck_whole.metal (kernel zc_uni_whole): the kernel is zc_uni_eval
// with the AIR's straight-line evaluator in place of the lane interpreter, so it takes the same
// plan, buffers and parameters (planUniWhole) and writes the same partial rows; it reads no
// register scratch. It serves the programs that run whole (too short to split into pieces: every
// test AIR, interaction-pair, most imported AIRs), as GeneratedPieces serves the long ones.

// wholeTemplate is the module template of the generated whole-program code.
const wholeTemplate = "whole"

// GeneratedWhole is the generated code of one whole program built on one device: one module.
type GeneratedWhole struct {
	module *gpu.Module
	// outputs and slots are the program's (UseGenerated checks them with the instructions).
	outputs, slots int
	Report         GeneratedReport
}

// WholeModule writes the code of program pg, whole (piececode.Whole), as the source of the module
// BuildWhole builds; air names the AIR for the log and the code's comments. The ID is a digest of
// the code.
func WholeModule(air string, pg *constraints.Program) (driver.ModuleSource, error) {
	code, err := piececode.Whole(pg, "AIR "+air)
	if err != nil {
		return driver.ModuleSource{}, fmt.Errorf("kernels: constraint code of AIR %s: %w", air, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", wholeTemplate)
	h.Write([]byte(code))
	return driver.ModuleSource{ID: wholeTemplate + "-" + hex.EncodeToString(h.Sum(nil)[:12]), Template: wholeTemplate, Code: code,
		What: fmt.Sprintf("constraint code of AIR %s: whole, %d instructions", air, len(pg.Code))}, nil
}

// BuildWhole builds the generated code of program pg, whole, on dev (which must build modules:
// gpu.Device.BuildsModules), or loads the module from its cache.
func BuildWhole(dev *gpu.Device, air string, pg *constraints.Program) (*GeneratedWhole, error) {
	src, err := WholeModule(air, pg)
	if err != nil {
		return nil, err
	}
	gs, err := BuildWholeFrom(dev, []string{air}, []*constraints.Program{pg}, []driver.ModuleSource{src})
	if err != nil {
		return nil, err
	}
	return gs[0], nil
}

// BuildWholeFrom builds the sources WholeModule wrote for programs pgs of AIRs airs in one
// BuildModules call (the backend compiles them side by side); each report's Elapsed is the
// whole build's.
func BuildWholeFrom(dev *gpu.Device, airs []string, pgs []*constraints.Program, srcs []driver.ModuleSource) ([]*GeneratedWhole, error) {
	if len(airs) != len(pgs) || len(srcs) != len(pgs) {
		return nil, fmt.Errorf("kernels: %d AIRs, %d programs, %d sources", len(airs), len(pgs), len(srcs))
	}
	start := time.Now()
	mods, err := dev.BuildModules(srcs)
	if err != nil {
		return nil, fmt.Errorf("kernels: constraint code of AIRs %s: %w", strings.Join(airs, ", "), err)
	}
	elapsed := time.Since(start)
	out := make([]*GeneratedWhole, len(mods))
	for i, m := range mods {
		b := m.Build()
		out[i] = &GeneratedWhole{module: m, outputs: len(pgs[i].Outputs), slots: pgs[i].NumSlots(), Report: GeneratedReport{
			AIR: airs[i], Instructions: len(pgs[i].Code), Units: 1, Compiled: !b.Cached, Elapsed: elapsed, Cache: b.CachePath}}
	}
	return out, nil
}

// UseGenerated makes round 0 of the traces of this program run g, its generated whole-program
// code (BuildWhole of the program p was uploaded from), where they run the program whole and
// the options do not ask for the interpreter (ZcOptions.Interpreted). Call it before NewZerocheck
// plans the traces.
func (p *Program) UseGenerated(g *GeneratedWhole) error {
	if g == nil || g.module == nil {
		return fmt.Errorf("kernels: program: no generated code")
	}
	if g.Report.Instructions != p.NumCode || g.outputs != p.NumOutput || g.slots != p.NumSlots {
		return fmt.Errorf("kernels: generated code of a program of %d instructions, %d outputs and %d slots for one of %d, %d and %d",
			g.Report.Instructions, g.outputs, g.slots, p.NumCode, p.NumOutput, p.NumSlots)
	}
	p.Generated = g
	return nil
}

// groupLimit is zc_uni_whole's largest group on the device.
func (g *GeneratedWhole) groupLimit() int {
	return g.module.KernelLimits("zc_uni_whole").MaxThreadsPerGroup
}
