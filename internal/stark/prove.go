package stark

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// The whole prover (spec B §3.1–§3.2, A §3.7): inputs and trace sorting, the common-main and
// cached commitments, the preamble, then LogUp-GKR → batch constraint sumcheck → stacked
// opening reduction → WHIR.

var (
	// ErrProveInput: the proving inputs do not fit the proving key (count, widths, heights,
	// public values, parameters).
	ErrProveInput = errors.New("stark: invalid proving input")
	// ErrInvalidTrace: the trace checker found a constraint that does not vanish or a bus that
	// does not balance (the error is a *TraceCheckError).
	ErrInvalidTrace = errors.New("stark: trace does not satisfy its AIR")
)

// AirProvingInput is one AIR's input to Prove, by AIR index. The zero value is an absent AIR.
// Matrices are column-major (air.Matrix); all parts of a present AIR have the trace height, a
// power of two. An AIR without common main columns still gives Common.Height.
type AirProvingInput struct {
	Common air.Matrix
	// Cached are the cached main traces in part (DAG) order.
	Cached []air.Matrix
	Public []field.Fp
}

// Present reports whether the AIR has a trace.
func (in *AirProvingInput) Present() bool { return in.Height() > 0 }

// Height is the trace height (0 for an absent AIR).
func (in *AirProvingInput) Height() int {
	if in.Common.Height > 0 {
		return in.Common.Height
	}
	if len(in.Cached) > 0 {
		return in.Cached[0].Height
	}
	return 0
}

// Stage names reported to ProveOptions.OnStageStart and OnStage, in the order they run.
const (
	StageLoad        = "load"
	StageCheck       = "check"
	StageCommit      = "commit"
	StageGkr         = "gkr"
	StageConstraints = "constraints"
	StageOpenings    = "openings"
)

// ProveOptions tune Prove. A nil *ProveOptions means DefaultProveOptions().
type ProveOptions struct {
	// CheckConstraints runs the backend's trace checker (Backend.Checker; HostChecker when nil)
	// on every present trace before proving, and refuses invalid traces with a *TraceCheckError.
	// Turning it off lets an invalid trace through: the proof it yields does not verify.
	CheckConstraints bool
	// MaxFailures bounds the failures reported by the checker (≤ 0: 10).
	MaxFailures int
	// Context, when set, cancels the proof between stages and inside proof-of-work searches;
	// Prove then returns its error.
	Context context.Context
	// OnStageStart, when set, is called as each stage begins, with its name (Stage*).
	OnStageStart func(stage string)
	// OnStage, when set, is called after each stage with what it cost.
	OnStage func(StageReport)
}

// DefaultProveOptions has the checker on.
func DefaultProveOptions() *ProveOptions { return &ProveOptions{CheckConstraints: true} }

// StageReport is what one stage of a proof cost: its wall time and, when the backend has a
// Meter, the work counted while it ran (MemoryPeak is the peak device memory during the stage).
type StageReport struct {
	Stage string        `json:"stage"`
	Wall  time.Duration `json:"wall_ns"`
	Counters
	// Parts break a stage down where it has parts (openings: stacking, whir), each with its own
	// wall time and counters (MemoryPeak: the stage's).
	Parts []StageReport `json:"parts,omitempty"`
}

// stages runs the stages of one proof, reporting each.
type stages struct {
	ctx   context.Context
	opts  *ProveOptions
	meter Meter
	parts []StageReport // of the stage running
	// grinding is the wall time spent in proof-of-work searches since the last reset.
	grinding time.Duration
}

func newStages(opts *ProveOptions, be *Backend) *stages {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return &stages{ctx: ctx, opts: opts, meter: be.Meter}
}

// run runs stage name (f), unless the context has ended, and reports it.
func (s *stages) run(name string, f func() error) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.opts.OnStageStart != nil {
		s.opts.OnStageStart(name)
	}
	if s.meter != nil {
		s.meter.ResetPeak()
	}
	s.parts = nil
	rep, err := s.measure(name, f)
	if err != nil {
		return err
	}
	rep.Parts, s.parts = s.parts, nil
	if s.opts.OnStage != nil {
		s.opts.OnStage(rep)
	}
	return nil
}

// part runs one part of the running stage and records it in the stage's report.
func (s *stages) part(name string, f func() error) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	rep, err := s.measure(name, f)
	if err == nil {
		s.parts = append(s.parts, rep)
	}
	return err
}

// measure runs f and returns its wall time and counters (MemoryPeak: the peak since the stage
// began).
func (s *stages) measure(name string, f func() error) (StageReport, error) {
	var before Counters
	if s.meter != nil {
		before = s.meter.Counters()
	}
	start := time.Now()
	if err := f(); err != nil {
		return StageReport{}, err
	}
	rep := StageReport{Stage: name, Wall: time.Since(start)}
	if s.meter != nil {
		rep.Counters = s.meter.Counters().Since(before)
	}
	return rep, nil
}

// TraceCheckError lists what the trace checker found wrong.
type TraceCheckError struct {
	// AirIndex[i] is the AIR index of Failures[i] (verifying-key order).
	AirIndex   []int
	Failures   []air.Failure
	Imbalances []air.Imbalance
}

func (e *TraceCheckError) Error() string {
	var sb strings.Builder
	sb.WriteString(ErrInvalidTrace.Error())
	sb.WriteString(": ")
	var parts []string
	for i, f := range e.Failures {
		parts = append(parts, fmt.Sprintf("AIR %d (%s): row %d: constraint %d = %v: %s", e.AirIndex[i], f.Air, f.Row, f.Constraint, f.Value, f.Expr))
	}
	for _, im := range e.Imbalances {
		parts = append(parts, "interactions do not balance: "+im.String())
	}
	sb.WriteString(strings.Join(parts, "; "))
	return sb.String()
}

func (e *TraceCheckError) Unwrap() error { return ErrInvalidTrace }

func inputErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProveInput, fmt.Sprintf(format, args...))
}

// AirTraces is one AIR's input once loaded on a backend (LoadInputs), by AIR index. The zero
// value (Common == nil) is an absent AIR.
type AirTraces struct {
	// Common is the common main trace (width 0 for an AIR without common main columns); its
	// height is the trace height.
	Common Trace
	// Cached are the cached main traces in part (DAG) order.
	Cached []Trace
	Public []field.Fp
}

// Present reports whether the AIR has a trace.
func (in *AirTraces) Present() bool { return in.Common != nil }

// LoadInputs is the transport step of a proof: it loads every trace of inputs (AIR order) onto
// be's Loader, checking each matrix's shape. The caller frees the result with FreeTraces.
func LoadInputs(be *Backend, pk *ProvingKey, inputs []AirProvingInput) ([]AirTraces, error) {
	if be == nil || be.Loader == nil {
		return nil, inputErr("the backend has no trace loader")
	}
	out := make([]AirTraces, len(inputs))
	load := func(i int, part string, m *air.Matrix) (Trace, error) {
		name := fmt.Sprintf("AIR %d", i)
		if pk != nil && i < len(pk.Airs) && pk.Airs[i] != nil {
			name = pk.Airs[i].Name()
		}
		if err := m.Check(); err != nil {
			return nil, inputErr("AIR %d (%s): %s: %v", i, name, part, err)
		}
		t, err := be.Loader.LoadTrace(name+" "+part, m)
		if err != nil {
			return nil, fmt.Errorf("stark: load AIR %d (%s) %s: %w", i, name, part, err)
		}
		return t, nil
	}
	for i := range inputs {
		in := &inputs[i]
		if !in.Present() {
			if len(in.Public) != 0 || len(in.Cached) != 0 || len(in.Common.Values) != 0 {
				FreeTraces(out)
				return nil, inputErr("absent AIR %d has trace data or public values", i)
			}
			continue
		}
		common := in.Common
		if common.Height == 0 && common.Width == 0 {
			common.Height = in.Height() // no common main columns: the trace height only
		}
		c, err := load(i, "common main", &common)
		if err != nil {
			FreeTraces(out)
			return nil, err
		}
		out[i] = AirTraces{Common: c, Public: in.Public}
		for j := range in.Cached {
			t, err := load(i, fmt.Sprintf("cached main %d", j), &in.Cached[j])
			if err != nil {
				FreeTraces(out)
				return nil, err
			}
			out[i].Cached = append(out[i].Cached, t)
		}
	}
	return out, nil
}

// FreeTraces frees every trace of ts.
func FreeTraces(ts []AirTraces) {
	for _, t := range ts {
		if t.Common != nil {
			t.Common.Free()
		}
		for _, c := range t.Cached {
			c.Free()
		}
	}
}

// checkInputs validates the loaded inputs against the key and returns the present AIR indices in
// trace order (height descending, ties by AIR index ascending).
func checkInputs(pk *ProvingKey, inputs []AirTraces, p params.SystemParams) ([]int, error) {
	if pk == nil || pk.VK == nil || pk.VK.MVK == nil {
		return nil, inputErr("no proving key")
	}
	if !p.Equal(pk.Params()) {
		return nil, inputErr("system parameters differ from the proving key's")
	}
	n := pk.VK.NumAirs()
	if len(inputs) != n {
		return nil, inputErr("%d inputs for %d AIRs", len(inputs), n)
	}
	heights := make([]int, n) // -1: absent
	for i := range inputs {
		heights[i] = -1
		in := &inputs[i]
		vk := pk.VK.MVK.PerAir[i]
		name := pk.Airs[i].Name()
		if !in.Present() {
			if vk.IsRequired {
				return nil, inputErr("AIR %d (%s) is required but has no trace", i, name)
			}
			if len(in.Public) != 0 || len(in.Cached) != 0 {
				return nil, inputErr("absent AIR %d (%s) has trace data or public values", i, name)
			}
			continue
		}
		h := in.Common.Height()
		if h <= 0 || h&(h-1) != 0 {
			return nil, inputErr("AIR %d (%s): height %d is not a power of two", i, name, h)
		}
		if log2Exact(h) > p.LogStackedHeight() {
			return nil, inputErr("AIR %d (%s): height %d exceeds the stacked height 2^%d", i, name, h, p.LogStackedHeight())
		}
		check := func(part string, m Trace, width int) error {
			if m == nil || m.Width() != width || m.Height() != h {
				w, hh := 0, 0
				if m != nil {
					w, hh = m.Width(), m.Height()
				}
				return inputErr("AIR %d (%s): %s is %d×%d, want %d×%d", i, name, part, hh, w, h, width)
			}
			return nil
		}
		if err := check("common main", in.Common, vk.Width.CommonMain); err != nil {
			return nil, err
		}
		if len(in.Cached) != len(vk.Width.CachedMains) {
			return nil, inputErr("AIR %d (%s): %d cached mains, want %d", i, name, len(in.Cached), len(vk.Width.CachedMains))
		}
		for j := range in.Cached {
			if err := check(fmt.Sprintf("cached main %d", j), in.Cached[j], vk.Width.CachedMains[j]); err != nil {
				return nil, err
			}
		}
		if len(in.Public) != vk.NumPublicValues {
			return nil, inputErr("AIR %d (%s): %d public values, want %d", i, name, len(in.Public), vk.NumPublicValues)
		}
		if pre := pk.Preprocessed[i]; pre != nil && pre.Height() != h {
			return nil, inputErr("AIR %d (%s): trace height %d, but the preprocessed trace has height %d", i, name, h, pre.Height())
		}
		heights[i] = h
	}
	present := TraceOrder(heights)
	if len(present) == 0 {
		return nil, inputErr("no AIR has a trace")
	}
	return present, nil
}

// AirInputs validates loaded inputs against the key and returns the present AIRs in trace order
// (B §3.1 item 2: height descending, ties by AIR index), as the stages after the preamble take
// them.
func AirInputs(pk *ProvingKey, inputs []AirTraces, p params.SystemParams) ([]*AirInput, error) {
	order, err := checkInputs(pk, inputs, p)
	if err != nil {
		return nil, err
	}
	traces := make([]*AirInput, len(order))
	for t, i := range order {
		in := &inputs[i]
		traces[t] = &AirInput{AirIndex: i, Name: pk.AirName(i), VK: pk.VK.MVK.PerAir[i], Program: pk.VK.program(i), Common: in.Common,
			Preprocessed: pk.Preprocessed[i], Cached: in.Cached, Public: in.Public}
	}
	return traces, nil
}

// observePreamble is P0–P2 of spec B §3.2 (prover and verifier): the vk prehash, the common-main
// commitment and, per AIR in vk order, presence, preprocessed commit or log height, cached
// commitments and public values.
func observePreamble(tr *transcript.Transcript, vk *VerifyingKey, proof *Proof) {
	tr.ObserveDigest(vk.PreHash)
	tr.ObserveDigest(proof.CommonMainCommit)
	for _, v := range preambleTail(vk, proof) {
		tr.Observe(v)
	}
}

// preambleTail is what observePreamble observes after the common-main root: per AIR its
// presence (optional AIRs), its preprocessed commitment or log height, its cached commitments,
// its public values.
func preambleTail(vk *VerifyingKey, proof *Proof) []field.Fp {
	var tail []field.Fp
	for i, avk := range vk.MVK.PerAir {
		td := proof.TraceVData[i]
		if !avk.IsRequired {
			if td != nil {
				tail = append(tail, field.One)
			} else {
				tail = append(tail, field.Zero)
			}
		}
		if td != nil {
			if avk.Preprocessed != nil {
				tail = append(tail, avk.Preprocessed.Commit[:]...)
			} else {
				tail = append(tail, field.New(uint32(td.LogHeight)))
			}
			for _, c := range td.CachedCommitments {
				tail = append(tail, c[:]...)
			}
		}
		tail = append(tail, proof.PublicValues[i]...)
	}
	return tail
}

// Prove proves the traces of inputs (one entry per AIR of pk, absent AIRs as zero values) with
// parameters p (which must be pk's) on backend be: it loads the traces (stage "load"), runs
// ProveTraces and frees them. With the checker on (the default), invalid traces are refused
// with a *TraceCheckError naming the AIR, row and constraint, or the bus message that does not
// balance.
func Prove(pk *ProvingKey, inputs []AirProvingInput, p params.SystemParams, be *Backend, opts *ProveOptions) (*Proof, error) {
	if opts == nil {
		opts = DefaultProveOptions()
	}
	if be == nil {
		return nil, inputErr("no backend")
	}
	if pk != nil && pk.VK != nil && len(inputs) != pk.VK.NumAirs() {
		return nil, inputErr("%d inputs for %d AIRs", len(inputs), pk.VK.NumAirs())
	}
	var traces []AirTraces
	err := newStages(opts, be).run(StageLoad, func() error {
		var err error
		traces, err = LoadInputs(be, pk, inputs)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer FreeTraces(traces)
	return ProveTraces(pk, traces, p, be, opts)
}

// ProveTraces proves traces already loaded on be (LoadInputs), so that a caller proving the same
// statement many times (bench) uploads it once. Stages: check (when opts.CheckConstraints),
// commit, gkr, constraints, openings.
func ProveTraces(pk *ProvingKey, inputs []AirTraces, p params.SystemParams, be *Backend, opts *ProveOptions) (*Proof, error) {
	if opts == nil {
		opts = DefaultProveOptions()
	}
	if err := be.check(); err != nil {
		return nil, err
	}
	traces, err := AirInputs(pk, inputs, p)
	if err != nil {
		return nil, err
	}
	st := newStages(opts, be)
	if opts.CheckConstraints {
		checker := be.Checker
		if checker == nil {
			checker = HostChecker{}
		}
		if err := st.run(StageCheck, func() error { return checker.CheckTraces(pk, inputs, opts.MaxFailures) }); err != nil {
			return nil, err
		}
	}
	vk := pk.VK
	commons := make([]Trace, len(traces))
	for t, in := range traces {
		commons[t] = in.Common
	}
	// Commitment list of the opening proof (B §5.1): common main, then per trace its
	// preprocessed commitment (if any) and its cached commitments. The commitments made here
	// are freed when the proof is done.
	var commits []Committed
	var made []Committed
	defer func() {
		for _, c := range made {
			c.Free()
		}
	}()
	proof := &Proof{
		TraceVData:   make([]*TraceVData, len(inputs)),
		PublicValues: make([][]field.Fp, len(inputs)),
	}
	tr := transcript.NewWith(be.Absorber)
	// Where the backend can, the LogUp proof of work is searched on its device behind the
	// commitment (CommitGrinder): the preamble after the root is known before it when no AIR has
	// cached main traces. The GKR stage is then given the witness (foundWitness).
	var found *foundWitness
	// Behind the commitment the GKR prover is prepared (GkrPreparer), where the commitment can
	// run host work behind it (CommitGrinder). A preparation that fails is dropped: the stage
	// then builds its prover as usual, and reports what fails there.
	var prepared PreparedGkr
	defer func() {
		if prepared != nil {
			prepared.Release()
		}
	}()
	prepareGkr := func() {
		gp, ok := be.Gkr.(GkrPreparer)
		if !ok || checkGkrParams(p) != nil {
			return
		}
		layout, _, err := GkrLayoutOf(p, traces)
		if err != nil || layout.Total == 0 {
			return
		}
		if pg, err := gp.PrepareGkr(p, traces, layout); err == nil {
			prepared = pg
		}
	}
	err = st.run(StageCommit, func() error {
		var common Committed
		var err error
		if cg, ok := be.Committer.(CommitGrinder); ok && !hasCached(traces) {
			setTraceData(proof, inputs, make([][]Digest, len(inputs)))
			pre := tr
			pre.ObserveDigest(vk.PreHash)
			var w field.Fp
			var searched bool
			common, w, searched, err = cg.CommitGrind(p, commons, &pre, preambleTail(vk, proof), p.Logup.PowBits, prepareGkr)
			if err == nil && searched {
				found = &foundWitness{w: w, bits: p.Logup.PowBits}
			}
		} else {
			common, err = be.Committer.Commit(p, commons)
		}
		if err != nil {
			return fmt.Errorf("stark: commit common main traces: %w", err)
		}
		made = append(made, common)
		proof.CommonMainCommit = common.Root()
		commits = append(commits, common)
		cachedRoots := make([][]Digest, len(inputs))
		for _, t := range traces {
			i := t.AirIndex
			if pc := pk.PreprocessedCommit[i]; pc != nil {
				commits = append(commits, pc)
			}
			cachedRoots[i] = make([]Digest, 0, len(t.Cached))
			for j := range t.Cached {
				c, err := be.Committer.Commit(p, t.Cached[j:j+1])
				if err != nil {
					return fmt.Errorf("stark: commit cached main %d of AIR %d: %w", j, i, err)
				}
				made = append(made, c)
				commits = append(commits, c)
				cachedRoots[i] = append(cachedRoots[i], c.Root())
			}
		}
		setTraceData(proof, inputs, cachedRoots)
		observePreamble(&tr, vk, proof)
		if found != nil {
			found.state, found.absorbIdx, _ = tr.State()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	grinder := st.grinder(be)
	if found != nil {
		found.next = grinder
		grinder = found
	}

	// A device run of GKR's layers is replayed beside the next stages (GkrProveOptions.Defer);
	// the proof is returned only once that replay has agreed.
	var outcome *GkrOutcome
	var gkrCheck func() error
	err = st.run(StageGkr, func() error {
		var err error
		opt := GkrProveOptions{Defer: func(check func() error) { gkrCheck = check }, Prepared: prepared}
		prepared = nil // the stage releases it
		proof.GKR, outcome, err = ProveGkrWithOptions(be.Gkr, grinder, &tr, p, traces, opt)
		return err
	})
	if err != nil {
		return nil, err
	}

	// The stacking prover is built beside the constraint stage's absorb of the column openings:
	// all of it but the batching weights, which wait for λ (StackingBackend.NewStackingProver).
	var claims *OpeningClaims
	var stacking StackingProver
	var stackingErr error
	err = st.run(StageConstraints, func() error {
		var err error
		proof.BatchConstraint, claims, err = ProveBatchConstraints(be.Constraints, &tr, p, traces, outcome, func(r []field.Fp4) {
			stacking, stackingErr = be.Stacking.NewStackingProver(p, commits, r)
		})
		return err
	})
	if stacking != nil { // ProveStacking releases it too; this covers the paths that skip it
		defer stacking.Release()
	}
	if err != nil {
		return nil, err
	}

	// Openings (ProveOpenings), reported as two parts: the stacked reduction and WHIR.
	err = st.run(StageOpenings, func() error {
		var u []field.Fp4
		err := st.part("stacking", func() error {
			if stackingErr != nil {
				return stackingErr
			}
			var err error
			proof.Stacking, u, err = ProveStacking(stacking, &tr, p, commits, claims)
			return err
		})
		if err != nil {
			return err
		}
		st.grinding = 0
		err = st.part("whir", func() error {
			var err error
			proof.Whir, err = ProveWhir(be.Whir, st.grinder(be), &tr, p, commits, UCube(p.LSkip, u))
			return err
		})
		if err == nil {
			// The proof-of-work searches inside WHIR (μ, folding, queries): part of its time.
			st.parts = append(st.parts, StageReport{Stage: "whir grinding", Wall: st.grinding})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if gkrCheck != nil {
		if err := gkrCheck(); err != nil {
			return nil, err
		}
	}
	return proof, nil
}

// foundWitness is a Grinder that knows the witness of one search (CommitGrinder's: for the
// transcript state after the preamble) and asks next for any other. The transcript's GrindWith
// checks what it returns.
type foundWitness struct {
	state     [poseidon2.Width]field.Fp
	absorbIdx int
	bits      int
	w         field.Fp
	next      transcript.Grinder
}

func (f *foundWitness) FindWitness(ctx context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, error) {
	if state == f.state && absorbIdx == f.absorbIdx && bits == f.bits {
		return f.w, nil
	}
	return f.next.FindWitness(ctx, state, absorbIdx, bits)
}

// setTraceData sets the proof's per-AIR data and public values of inputs, with the roots of their
// cached main traces (an empty list for nil).
func setTraceData(proof *Proof, inputs []AirTraces, cachedRoots [][]Digest) {
	for i := range inputs {
		proof.PublicValues[i] = []field.Fp{}
		if inputs[i].Present() {
			roots := cachedRoots[i]
			if roots == nil {
				roots = []Digest{}
			}
			proof.TraceVData[i] = &TraceVData{LogHeight: log2Exact(inputs[i].Common.Height()), CachedCommitments: roots}
			proof.PublicValues[i] = slices.Clone(inputs[i].Public)
		}
	}
}

// hasCached reports whether some trace has cached main traces (their roots enter the preamble).
func hasCached(traces []*AirInput) bool {
	for _, t := range traces {
		if len(t.Cached) > 0 {
			return true
		}
	}
	return false
}

// grinder is be's Grinder with the proof's context, its time added to s.grinding.
func (s *stages) grinder(be *Backend) transcript.Grinder { return ctxGrinder{s, be.Grinder} }

// ctxGrinder searches with the proof's context instead of the stage code's.
type ctxGrinder struct {
	s *stages
	g transcript.Grinder
}

func (c ctxGrinder) FindWitness(_ context.Context, state [poseidon2.Width]field.Fp, absorbIdx, bits int) (field.Fp, error) {
	start := time.Now()
	defer func() { c.s.grinding += time.Since(start) }()
	return c.g.FindWitness(c.s.ctx, state, absorbIdx, bits)
}

// check reports a backend that lacks a stage.
func (be *Backend) check() error {
	if be == nil {
		return inputErr("no backend")
	}
	for _, s := range []struct {
		name string
		ok   bool
	}{{"trace loader", be.Loader != nil}, {"committer", be.Committer != nil}, {"GKR", be.Gkr != nil},
		{"constraints", be.Constraints != nil}, {"stacking", be.Stacking != nil}, {"WHIR", be.Whir != nil},
		{"grinder", be.Grinder != nil}} {
		if !s.ok {
			return inputErr("backend %q has no %s stage", be.Name, s.name)
		}
	}
	return nil
}
