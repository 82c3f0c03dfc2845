package stark

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// The whole prover (spec B §3.1–§3.2, A §3.7): inputs and trace sorting, the common-main and
// cached commitments, the preamble, then LogUp-GKR → batch constraint sumcheck → stacked
// opening reduction → WHIR.

var (
	// ErrProveInput: the proving inputs do not fit the proving key (count, widths, heights,
	// public values, parameters).
	ErrProveInput = errors.New("stark: invalid proving input")
	// ErrInvalidTrace: the host checker found a constraint that does not vanish or a bus that
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

// Stage names reported to ProveOptions.OnStage.
const (
	StageCheck       = "check"
	StageCommit      = "commit"
	StageGkr         = "gkr"
	StageConstraints = "constraints"
	StageOpenings    = "openings"
)

// ProveOptions tune Prove. A nil *ProveOptions means DefaultProveOptions().
type ProveOptions struct {
	// CheckConstraints runs the host constraint and interaction checker on every present trace
	// before proving, and refuses invalid traces with a *TraceCheckError. Turning it off lets an
	// invalid trace through: the proof it yields does not verify.
	CheckConstraints bool
	// MaxFailures bounds the failures reported by the checker (≤ 0: 10).
	MaxFailures int
	// OnStage, when set, is called after each stage with its name (Stage*) and duration.
	OnStage func(stage string, elapsed time.Duration)
}

// DefaultProveOptions has the checker on.
func DefaultProveOptions() *ProveOptions { return &ProveOptions{CheckConstraints: true} }

// TraceCheckError lists what the host checker found wrong.
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

// checkInputs validates the inputs against the key and returns the present AIR indices in trace
// order (height descending, ties by AIR index ascending).
func checkInputs(pk *ProvingKey, inputs []AirProvingInput, p params.SystemParams) ([]int, error) {
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
			if len(in.Public) != 0 || len(in.Cached) != 0 || len(in.Common.Values) != 0 {
				return nil, inputErr("absent AIR %d (%s) has trace data or public values", i, name)
			}
			continue
		}
		h := in.Height()
		if h&(h-1) != 0 {
			return nil, inputErr("AIR %d (%s): height %d is not a power of two", i, name, h)
		}
		if log2Exact(h) > p.LogStackedHeight() {
			return nil, inputErr("AIR %d (%s): height %d exceeds the stacked height 2^%d", i, name, h, p.LogStackedHeight())
		}
		check := func(part string, m *air.Matrix, width int) error {
			if m.Width != width || m.Height != h || len(m.Values) != width*h {
				return inputErr("AIR %d (%s): %s is %d×%d (%d values), want %d×%d", i, name, part, m.Height, m.Width, len(m.Values), h, width)
			}
			return nil
		}
		if err := check("common main", &in.Common, vk.Width.CommonMain); err != nil {
			return nil, err
		}
		if len(in.Cached) != len(vk.Width.CachedMains) {
			return nil, inputErr("AIR %d (%s): %d cached mains, want %d", i, name, len(in.Cached), len(vk.Width.CachedMains))
		}
		for j := range in.Cached {
			if err := check(fmt.Sprintf("cached main %d", j), &in.Cached[j], vk.Width.CachedMains[j]); err != nil {
				return nil, err
			}
		}
		if len(in.Public) != vk.NumPublicValues {
			return nil, inputErr("AIR %d (%s): %d public values, want %d", i, name, len(in.Public), vk.NumPublicValues)
		}
		if pre := pk.Preprocessed[i]; pre != nil && pre.Height != h {
			return nil, inputErr("AIR %d (%s): trace height %d, but the preprocessed trace has height %d", i, name, h, pre.Height)
		}
		heights[i] = h
	}
	present := TraceOrder(heights)
	if len(present) == 0 {
		return nil, inputErr("no AIR has a trace")
	}
	return present, nil
}

func toAirMatrix(m *air.Matrix) air.Matrix {
	return air.Matrix{Width: m.Width, Height: m.Height, Values: m.Values}
}

// checkTraces runs the host checker on the present AIRs (AIR order).
func checkTraces(pk *ProvingKey, inputs []AirProvingInput, maxFailures int) error {
	if maxFailures <= 0 {
		maxFailures = 10
	}
	e := &TraceCheckError{}
	var busAirs []air.Air
	var busInputs []air.TraceInput
	for i := range inputs {
		in := &inputs[i]
		if !in.Present() {
			continue
		}
		ti := air.TraceInput{CommonMain: toAirMatrix(&in.Common), Public: in.Public}
		if pre := pk.Preprocessed[i]; pre != nil {
			m := toAirMatrix(pre)
			ti.Preprocessed = &m
		}
		for j := range in.Cached {
			ti.CachedMains = append(ti.CachedMains, toAirMatrix(&in.Cached[j]))
		}
		if len(e.Failures) < maxFailures {
			fs, err := air.CheckConstraints(pk.Airs[i], ti, maxFailures-len(e.Failures))
			if err != nil {
				return inputErr("AIR %d: %v", i, err)
			}
			for _, f := range fs {
				e.Failures = append(e.Failures, f)
				e.AirIndex = append(e.AirIndex, i)
			}
		}
		if len(pk.VK.MVK.PerAir[i].DAG.Interactions) > 0 {
			busAirs = append(busAirs, pk.Airs[i])
			busInputs = append(busInputs, ti)
		}
	}
	if len(busAirs) > 0 {
		ims, err := air.CheckInteractions(busAirs, busInputs)
		if err != nil {
			return inputErr("%v", err)
		}
		if len(ims) > maxFailures {
			ims = ims[:maxFailures]
		}
		e.Imbalances = ims
	}
	if len(e.Failures) > 0 || len(e.Imbalances) > 0 {
		return e
	}
	return nil
}

// observePreamble is P0–P2 of spec B §3.2 (prover and verifier): the vk prehash, the common-main
// commitment and, per AIR in vk order, presence, preprocessed commit or log height, cached
// commitments and public values.
func observePreamble(tr *transcript.Transcript, vk *VerifyingKey, proof *Proof) {
	tr.ObserveDigest(vk.PreHash)
	tr.ObserveDigest(proof.CommonMainCommit)
	for i, avk := range vk.MVK.PerAir {
		td := proof.TraceVData[i]
		if !avk.IsRequired {
			if td != nil {
				tr.Observe(field.One)
			} else {
				tr.Observe(field.Zero)
			}
		}
		if td != nil {
			if avk.Preprocessed != nil {
				tr.ObserveDigest(avk.Preprocessed.Commit)
			} else {
				tr.Observe(field.New(uint32(td.LogHeight)))
			}
			for _, c := range td.CachedCommitments {
				tr.ObserveDigest(c)
			}
		}
		for _, v := range proof.PublicValues[i] {
			tr.Observe(v)
		}
	}
}

// Prove proves the traces of inputs (one entry per AIR of pk, absent AIRs as zero values) with
// parameters p (which must be pk's) on backend be. With the checker on (the default), invalid
// traces are refused with a *TraceCheckError naming the AIR, row and constraint, or the bus
// message that does not balance.
func Prove(pk *ProvingKey, inputs []AirProvingInput, p params.SystemParams, be Backend, opts *ProveOptions) (*Proof, error) {
	if opts == nil {
		opts = DefaultProveOptions()
	}
	stage := func(name string, start time.Time) {
		if opts.OnStage != nil {
			opts.OnStage(name, time.Since(start))
		}
	}
	order, err := checkInputs(pk, inputs, p)
	if err != nil {
		return nil, err
	}
	if opts.CheckConstraints {
		start := time.Now()
		if err := checkTraces(pk, inputs, opts.MaxFailures); err != nil {
			return nil, err
		}
		stage(StageCheck, start)
	}

	// Trace order (B §3.1 item 2) and the per-trace inputs of the stages.
	start := time.Now()
	vk := pk.VK
	traces := make([]*AirInput, len(order))
	commons := make([]air.Matrix, len(order))
	for t, i := range order {
		in := &inputs[i]
		traces[t] = &AirInput{AirIndex: i, VK: vk.MVK.PerAir[i], Common: in.Common, Preprocessed: pk.Preprocessed[i],
			Cached: in.Cached, Public: in.Public}
		commons[t] = in.Common
	}
	common, err := be.Commit(p, commons)
	if err != nil {
		return nil, fmt.Errorf("stark: commit common main traces: %w", err)
	}
	proof := &Proof{
		CommonMainCommit: common.Root(),
		TraceVData:       make([]*TraceVData, len(inputs)),
		PublicValues:     make([][]field.Fp, len(inputs)),
	}
	// Commitment list of the opening proof (B §5.1): common main, then per trace its
	// preprocessed commitment (if any) and its cached commitments.
	commits := []Committed{common}
	cachedRoots := make([][]Digest, len(inputs))
	for _, tr := range traces {
		i := tr.AirIndex
		if pc := pk.PreprocessedCommit[i]; pc != nil {
			commits = append(commits, pc)
		}
		cachedRoots[i] = make([]Digest, 0, len(tr.Cached))
		for j := range tr.Cached {
			c, err := be.Commit(p, tr.Cached[j:j+1])
			if err != nil {
				return nil, fmt.Errorf("stark: commit cached main %d of AIR %d: %w", j, i, err)
			}
			commits = append(commits, c)
			cachedRoots[i] = append(cachedRoots[i], c.Root())
		}
	}
	for i := range inputs {
		proof.PublicValues[i] = []field.Fp{}
		if inputs[i].Present() {
			proof.TraceVData[i] = &TraceVData{LogHeight: log2Exact(inputs[i].Height()), CachedCommitments: cachedRoots[i]}
			proof.PublicValues[i] = slices.Clone(inputs[i].Public)
		}
	}
	tr := transcript.New()
	observePreamble(&tr, vk, proof)
	stage(StageCommit, start)

	start = time.Now()
	gkr, outcome, err := ProveGkr(be, &tr, p, traces)
	if err != nil {
		return nil, err
	}
	proof.GKR = gkr
	stage(StageGkr, start)

	start = time.Now()
	bc, claims, err := ProveBatchConstraints(be, &tr, p, traces, outcome)
	if err != nil {
		return nil, err
	}
	proof.BatchConstraint = bc
	stage(StageConstraints, start)

	start = time.Now()
	proof.Stacking, proof.Whir, err = ProveOpenings(be, &tr, p, commits, claims)
	if err != nil {
		return nil, err
	}
	stage(StageOpenings, start)
	return proof, nil
}
