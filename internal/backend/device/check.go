package device

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// The pre-proof trace check on the device (stark.Checker): the device evaluates every constraint
// on every row of the resident traces and finds each trace's first failing row (the rows family:
// per group the smallest failing (row, constraint), then the minimum over the groups; no
// atomics), and computes the LogUp sum of all interactions with random challenges (the GKR leaves
// and tree). The host then writes stark.HostChecker's report from those rows only, and runs the
// exact interaction check only when the sum is not zero (stark.ReportTraces).

// CheckTraces implements stark.Checker.
func (b *Backend) CheckTraces(pk *stark.ProvingKey, inputs []stark.AirTraces, maxFailures int) error {
	if pk == nil || pk.VK == nil || pk.VK.MVK == nil {
		return fmt.Errorf("%w: no proving key", stark.ErrProveInput)
	}
	p := pk.Params()
	traces, err := stark.AirInputs(pk, inputs, p)
	if err != nil {
		return err
	}
	first, err := b.FirstFailures(traces)
	if err != nil {
		return err
	}
	balanced, err := b.InteractionsBalance(p.LSkip, traces)
	if err != nil {
		return err
	}
	screen := &stark.TraceScreen{FirstFailure: make([]int, len(inputs)), Unbalanced: !balanced}
	for i := range screen.FirstFailure {
		screen.FirstFailure[i] = -1
	}
	for t, in := range traces {
		screen.FirstFailure[in.AirIndex] = first[t]
	}
	return stark.ReportTraces(pk, inputs, maxFailures, screen)
}

// FirstFailures returns, per trace, the first row on which one of its constraints does not vanish
// (−1 when none does), every trace evaluated on the device; one sync.
func (b *Backend) FirstFailures(traces []*stark.AirInput) ([]int, error) {
	out := make([]int, len(traces))
	var evals []*rowEval
	var which []int // trace of each eval
	defer func() {
		for _, e := range evals {
			e.free()
		}
	}()
	for t, in := range traces {
		out[t] = -1
		e, err := b.newRowEval(in, constraints.Constraints, func(*kernels.Program) int { return 0 })
		if err != nil {
			return nil, fmt.Errorf("%w: trace check: %w", stark.ErrProveInput, err)
		}
		if e.prog.NumConstraints == 0 {
			e.free()
			continue
		}
		evals, which = append(evals, e), append(which, t)
		if b.usePieces(e.prog) {
			if err := e.usePieces(b, in, constraints.Constraints); err != nil {
				return nil, err
			}
		}
	}
	if len(evals) == 0 {
		return out, nil
	}
	sc, err := allocRowScratch(b.dev, evals, checkExtra)
	if err != nil {
		return nil, err
	}
	defer sc.free()
	per := make([]int, len(evals)) // partial pairs per run
	total := 0
	for i, e := range evals {
		per[i] = e.checkGroups(b.dev)
		total += per[i] * (e.height / e.points())
	}
	partials, err := gpu.AllocArray[uint32](b.dev, "check partials", 2*total)
	if err != nil {
		return nil, err
	}
	defer partials.Free()
	result, err := gpu.AllocArray[uint32](b.dev, "check result", 2*len(evals))
	if err != nil {
		return nil, err
	}
	defer result.Free()
	batch := b.dev.Batch()
	at := 0
	for i, e := range evals {
		first := at
		if err := e.encodeRuns(batch, b.dev, sc.slots, sc.regs, func(run kernels.RowRun) error {
			var err error
			if e.pieces != nil {
				err = run.EncodeCheckPieces(batch, b.dev, e.pieces, sc.extra, sc.regs, partials, at)
			} else {
				err = run.EncodeCheckPartials(batch, b.dev, partials, at)
			}
			at += per[i]
			return err
		}); err != nil {
			return nil, err
		}
		if err := kernels.EncodeMinPairs(batch, b.dev, partials, result, first, at-first, i); err != nil {
			return nil, err
		}
	}
	res, err := result.ReadAll()
	if err != nil {
		return nil, err
	}
	for i, t := range which {
		if row := res[2*i]; row != 0xffffffff {
			out[t] = int(row)
		}
	}
	return out, nil
}

// checkExtra is the check's scratch of e per run besides slots and registers: the pieces' slots.
func checkExtra(e *rowEval) int {
	if e.pieces == nil {
		return 0
	}
	s, _ := e.pieces.Scratch()
	return s
}

// checkGroups is the number of (row, output) pairs the check of one run of e writes.
func (e *rowEval) checkGroups(dev *gpu.Device) int {
	if e.pieces != nil {
		return e.pieces.PartialGroups()
	}
	return kernels.CheckPartialGroups(dev, e.points())
}

// InteractionsBalance reports whether the interactions of traces (any order) balance, from their
// LogUp sum Σ count/(α + fingerprint(message, bus)) over every row, with α, β drawn at random: the
// GKR leaves and tree on the device, one sync. A sum that is not zero proves an imbalance; a zero
// sum means balance except with negligible probability (the sum is a rational function of α and β
// that vanishes identically exactly when every (bus, message) balances). It also returns false,
// for the host to decide, when a denominator vanishes or the tree exceeds what the device
// indexes.
func (b *Backend) InteractionsBalance(lSkip int, traces []*stark.AirInput) (bool, error) {
	order := slices.Clone(traces)
	slices.SortStableFunc(order, func(x, y *stark.AirInput) int { return y.Height() - x.Height() })
	logH := make([]int, len(order))
	numInter := make([]int, len(order))
	for i, in := range order {
		if in == nil || in.VK == nil || in.VK.DAG == nil || in.Common == nil {
			return false, fmt.Errorf("%w: trace check: trace without verifying key or common main trace", stark.ErrProveInput)
		}
		logH[i], numInter[i] = in.LogHeight(), len(in.VK.DAG.Interactions)
	}
	layout, _, err := stark.NewGkrLayout(lSkip, logH, numInter)
	if err != nil {
		return false, err
	}
	if layout.Total == 0 {
		return true, nil
	}
	if layout.NumLayers() > maxGkrLayers {
		return false, nil
	}
	r, err := challengeRand()
	if err != nil {
		return false, err
	}
	alpha, beta := randomFp4(r), randomFp4(r)
	g, err := b.NewGkrProver(params.SystemParams{LSkip: lSkip}, order, layout, alpha, beta)
	if err != nil {
		return false, err
	}
	defer g.Release()
	p, q, err := g.Root()
	if err != nil {
		return false, err
	}
	return p.IsZero() && !q.IsZero(), nil
}

// challengeRand is a generator seeded by the operating system: the check's challenges must not be
// predictable from the traces.
func challengeRand() (*rand.Rand, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("backend/device: trace check: random challenges: %w", err)
	}
	return rand.New(rand.NewChaCha8(seed)), nil
}

func randomFp4(r *rand.Rand) field.Fp4 {
	var x field.Fp4
	for i := range x {
		x[i] = field.Fp(r.Uint32N(field.P))
	}
	return x
}
