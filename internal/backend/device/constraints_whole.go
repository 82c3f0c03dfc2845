package device

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels"
)

// generatesWhole says whether round 0 of the constraint sumcheck runs generated code for p, a
// short program run whole (fewer than minPiecesCode instructions, not in pieces: usePieces; a
// longer one on the host device stays interpreted): the whole program as straight-line code,
// compiled at run time (kernels.BuildWhole), on devices that build modules and prove on GPUs,
// or on the host device when the options ask for it (ZcOptions.GeneratedWhole; its lane
// interpreter is faster there), unless the options ask for the interpreter.
func (b *Backend) generatesWhole(p *constraints.Program) bool {
	return b.dev.BuildsModules() && !b.zcOpts.Interpreted && !b.usePieces(p) && len(p.Code) < minPiecesCode &&
		(kernels.ZcUsesPieces(b.dev) || b.zcOpts.GeneratedWhole)
}

// wholeBuild is one program of buildWholes: the AIR's name, the program and its upload.
type wholeBuild struct {
	air string
	p   *constraints.Program
	dp  *kernels.Program
}

// buildWholes builds the generated whole-program code of the programs ws that have none yet (once:
// it is kept with the upload for the backend's life), all in one build (the device compiles them
// side by side), and makes round 0 run it; it returns the reports of those built now.
func (b *Backend) buildWholes(ws []wholeBuild, ev *GeneratedEvents) ([]kernels.GeneratedReport, error) {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	var airs []string
	var pgs []*constraints.Program
	var srcs []driver.ModuleSource
	var dps []*kernels.Program
	for _, w := range ws {
		if w.dp.Generated != nil || slices.Contains(dps, w.dp) {
			continue
		}
		src, err := kernels.WholeModule(w.air, w.p)
		if err != nil {
			return nil, err
		}
		if ev != nil && ev.Start != nil {
			ev.Start(w.air, 1, len(w.p.Code))
		}
		airs, pgs, srcs, dps = append(airs, w.air), append(pgs, w.p), append(srcs, src), append(dps, w.dp)
	}
	if len(srcs) == 0 {
		return nil, nil
	}
	gs, err := kernels.BuildWholeFrom(b.dev, airs, pgs, srcs)
	if err != nil {
		return nil, err
	}
	out := make([]kernels.GeneratedReport, len(gs))
	for i, g := range gs {
		if err := dps[i].UseGenerated(g); err != nil {
			return nil, err
		}
		r := g.Report
		b.log.Debug().Str("air", r.AIR).Bool("compiled", r.Compiled).Str("elapsed", r.Elapsed.Round(time.Millisecond).String()).
			Str("cache", r.Cache).Msg("constraint kernels built (whole program)")
		if ev != nil && ev.Done != nil {
			ev.Done(r)
		}
		out[i] = r
	}
	return out, nil
}

// ConstraintCodeEnv names the environment variable that, set to "interpreted", makes every device
// backend of the process run round 0 of the constraint sumcheck by the interpreter
// (ZcOptions.Interpreted) instead of generated code, and builds none: a switch to compare the
// two on a GPU (bench), like METALPROVE_HOST_ISA for the host device's kernel copies. Unset,
// empty or "generated": the default. Any other value is an error naming the variable.
const ConstraintCodeEnv = "METALPROVE_CONSTRAINT_CODE"

// envInterpreted says whether ConstraintCodeEnv asks for the interpreter; an unknown value is
// an error.
func envInterpreted() (bool, error) {
	switch v := os.Getenv(ConstraintCodeEnv); v {
	case "", "generated":
		return false, nil
	case "interpreted":
		return true, nil
	default:
		return false, fmt.Errorf("backend/device: %s=%q: want interpreted or generated", ConstraintCodeEnv, v)
	}
}

// LevelsEnv names the environment variable that sets how the constraint sumcheck's last rounds
// run their pieces level-scheduled (kernels.ZcOptions.NoLevels, LevelThreads, LevelBelow), to
// compare plans on a GPU (bench): "off" walks every piece serially (zc_round_pieces); "K/B" gives
// K threads to a point in the rounds with fewer than B points a piece (0 or empty: the default of
// either). Unset or empty: the defaults. Anything else is an error naming the variable.
const LevelsEnv = "METALPROVE_ZC_LEVELS"

// envLevels applies LevelsEnv to opts.
func envLevels(opts *kernels.ZcOptions) error {
	v := os.Getenv(LevelsEnv)
	switch v {
	case "":
		return nil
	case "off":
		opts.NoLevels = true
		return nil
	}
	k, b, ok := strings.Cut(v, "/")
	var err error
	num := func(s string) int {
		if s == "" || err != nil {
			return 0
		}
		var n int
		if n, err = strconv.Atoi(s); err == nil && n < 0 {
			err = fmt.Errorf("negative")
		}
		return n
	}
	opts.LevelThreads, opts.LevelBelow = num(k), num(b)
	if !ok || err != nil || opts.LevelThreads&(opts.LevelThreads-1) != 0 {
		return fmt.Errorf("backend/device: %s=%q: want off or K/B (K threads a point, a power of two; rounds below B points a piece)", LevelsEnv, v)
	}
	return nil
}

// withEnv is opts with ConstraintCodeEnv and LevelsEnv applied.
func withEnv(opts kernels.ZcOptions) (kernels.ZcOptions, error) {
	interp, err := envInterpreted()
	if interp {
		opts.Interpreted = true
	}
	if err == nil {
		err = envLevels(&opts)
	}
	return opts, err
}
