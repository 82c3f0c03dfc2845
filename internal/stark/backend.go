package stark

import (
	"errors"
	"fmt"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Backend is the heavy work of the prover, one interface per stage. The stage code of this
// package owns the transcript: everything observed, sampled or sent is decided here; a stage
// backend only computes, taking and returning handles and small values so that a device
// implementation keeps traces, matrices and tables on the device from load to the end of a proof.
//
// A backend package fills every field with its own implementation; a composition may take some
// stages from one backend and the rest from another, provided the handles one stage makes are
// the ones the next accepts (Loader's traces feed Committer, Gkr and Constraints; Committer's
// commitments feed Stacking and Whir).
type Backend struct {
	// Name describes the backend in reports ("cpuref", "device (NVIDIA H200, cuda)").
	Name        string
	Loader      TraceLoader
	Committer   Committer
	Gkr         GkrBackend
	Constraints ConstraintBackend
	Stacking    StackingBackend
	Whir        WhirBackend
	Grinder     transcript.Grinder
	// Checker is the pre-proof trace check (ProveOptions.CheckConstraints); nil means
	// HostChecker.
	Checker Checker
	// Meter, when set, gives the counters of per-stage reports (ProveOptions.OnStage).
	Meter Meter
	// Absorber, when set, takes the transcript's long observes and keygen's pre_hash (the host
	// device's SIMD permutation); nil keeps them pure Go. Its results are Absorb's.
	Absorber poseidon2.Absorber
}

// Trace is a trace matrix loaded onto a backend by its TraceLoader: commit, GKR and the
// constraint sumcheck take these handles, so that a device backend uploads every trace once.
type Trace interface {
	Width() int
	Height() int
	// Host returns the matrix the trace was loaded from (the caller's, not a copy): the host-side
	// trace check and the reference backend read it.
	Host() *air.Matrix
	// Free releases the backend's copy; the handle must not be used afterwards. Freeing twice is
	// harmless.
	Free()
}

// TraceLoader is the transport step: it makes a host matrix resident on the backend.
type TraceLoader interface {
	// LoadTrace loads m (column-major, canonical values) under name (used in memory reports). m
	// must stay unchanged while the trace is in use. Width-0 matrices are allowed.
	LoadTrace(name string, m *air.Matrix) (Trace, error)
}

// Committed is a backend's opaque handle to one stacked commitment (stacked matrix, its codeword
// and Merkle tree), kept wherever the backend keeps its data (host or device).
type Committed interface {
	Root() Digest
	Layout() *StackedLayout
	// Free releases the backend's data; the handle must not be used afterwards. Freeing twice is
	// harmless.
	Free()
}

// Committer makes stacked commitments.
type Committer interface {
	// Commit stacks traces (given in trace order), RS-encodes and Merkle-commits them
	// (stacked_commit, spec A §5.8).
	Commit(p params.SystemParams, traces []Trace) (Committed, error)
}

// CommitGrinder is a Committer that can go on, behind a commitment on its device, with the rest
// of the proof's preamble and the LogUp proof of work (the GKR stage's first step), so that the
// root and the witness come back with one sync. Prove uses it where the commitment's root is the
// only value of the preamble the host does not know beforehand (no cached main traces); the GKR
// stage is then given the witness, which its transcript checks.
type CommitGrinder interface {
	// CommitGrind is Commit, then from tr's state (tr is not changed) the root observed, then
	// tail, and the smallest witness of the bits-bit proof of work searched from there. found
	// is false where the backend did not search (the bits) or found none: the stage grinds.
	// behind, if not nil, runs on the calling goroutine once the commitment and the search are
	// queued and before the sync that brings the root back, so that host work there overlaps
	// the device's (Prove prepares the GKR prover in it: GkrPreparer); it may not run at all.
	CommitGrind(p params.SystemParams, traces []Trace, tr *transcript.Transcript, tail []field.Fp, bits int, behind func()) (c Committed, witness field.Fp, found bool, err error)
}

// StackingBackend runs the stacked opening reduction (spec B §5).
type StackingBackend interface {
	// NewStackingProver prepares the stacked opening reduction over commits at the batch-sumcheck
	// point r = (r_0; r_1, …), at least 1 + max ñ long: all of it that the batching weights do not
	// enter (Prove builds it beside the transcript's absorb of the column openings, before λ is
	// sampled). UnivariateRound takes λ.
	NewStackingProver(p params.SystemParams, commits []Committed, r []field.Fp4) (StackingProver, error)
}

// WhirBackend runs WHIR (spec A §6.3).
type WhirBackend interface {
	// NewWhirProver prepares WHIR (spec A §6.3 step 2): f = Σ_i μ^i·F̂_i over all stacked columns
	// of commits (commitment-major), w = K(uCube, ·).
	NewWhirProver(p params.SystemParams, commits []Committed, mu field.Fp4, uCube []field.Fp4) (WhirProver, error)
}

// StackingBatch is the batching of the stacked reduction's opening claims (spec B §5.3): the
// claim of sorted column i of commitment c, the k-th in (commitment, column) order, has the eq
// weight λ^(2k) and, where its matrix needs the rotation, the rotation weight λ^(2k+1) (else 0).
// The backend computes the weights it needs (the device backend on the device, so that nothing
// but λ waits for the transcript's absorb of the column openings).
type StackingBatch struct {
	Lambda field.Fp4
	// NeedRot[c][i] says whether sorted column i of commitment c has a rotation claim.
	NeedRot [][]bool
}

// Weights returns the eq and rotation weights of every sorted column ([c][i]).
func (b *StackingBatch) Weights() (eqW, rotW [][]field.Fp4) {
	lsq := b.Lambda.Square()
	pw := field.Fp4One
	eqW = make([][]field.Fp4, len(b.NeedRot))
	rotW = make([][]field.Fp4, len(b.NeedRot))
	for c, cols := range b.NeedRot {
		eqW[c] = make([]field.Fp4, len(cols))
		rotW[c] = make([]field.Fp4, len(cols))
		for i, rot := range cols {
			eqW[c][i] = pw
			if rot {
				rotW[c][i] = pw.Mul(b.Lambda)
			}
			pw = pw.Mul(lsq)
		}
	}
	return eqW, rotW
}

// Weight returns the eq and rotation weights of sorted column i of commitment c alone.
func (b *StackingBatch) Weight(c, i int) (eq, rot field.Fp4) {
	k := i
	for _, cols := range b.NeedRot[:c] {
		k += len(cols)
	}
	eq = b.Lambda.Exp(2 * uint64(k))
	if b.NeedRot[c][i] {
		rot = eq.Mul(b.Lambda)
	}
	return eq, rot
}

// CheckStackingBatch checks that b has a rotation flag for every sorted column of every
// commitment (layouts in commitment-list order).
func CheckStackingBatch(b *StackingBatch, layouts []*StackedLayout) error {
	if b == nil || len(b.NeedRot) != len(layouts) {
		return fmt.Errorf("%w: stacking batch does not match %d commitments", ErrOpeningInput, len(layouts))
	}
	for c, l := range layouts {
		if len(b.NeedRot[c]) != len(l.Cols) {
			return fmt.Errorf("%w: commitment %d: %d rotation flags for %d columns", ErrOpeningInput, c, len(b.NeedRot[c]), len(l.Cols))
		}
	}
	return nil
}

// StackingProver runs the stacked reduction's sumcheck rounds on the backend.
type StackingProver interface {
	// UnivariateRound returns the 2(2^l_skip − 1) + 1 coefficients of s_0(Z) (constant first)
	// with the batching of b.
	UnivariateRound(b *StackingBatch) ([]field.Fp4, error)
	// BindUnivariate fixes Z = u_0.
	BindUnivariate(u0 field.Fp4) error
	// Round returns s_j(1), s_j(2) of the next multilinear round.
	Round() (s1, s2 field.Fp4, err error)
	// Bind fixes the round's variable to u.
	Bind(u field.Fp4) error
	// Openings returns q_{c,m}(u) for every commitment c and stacked column m (after n_stack binds).
	Openings() ([][]field.Fp4, error)
	// Release frees backend resources.
	Release()
}

// StackingDeviceRounds is a StackingProver that runs the multilinear rounds with a copy of the
// stage's transcript on its device (kernels.DeviceTranscript), so that the rounds follow one
// another without waiting for the host. ProveStacking replays what ProveRounds returns through
// its own transcript and checks every sample against the device's (ErrDeviceTranscript).
type StackingDeviceRounds interface {
	// ProveRounds runs rounds 1 .. n after BindUnivariate, from tr's state (tr is not changed):
	// per round s_j(1), s_j(2) observed and u_j sampled and bound, as the stage's loop does with
	// Round and Bind. It returns the rounds' sums and the bound values; Openings follows.
	ProveRounds(tr *transcript.Transcript, n int) (polys [][2]field.Fp4, u []field.Fp4, err error)
}

// StackingDeviceFirstRound is a StackingDeviceRounds prover that runs round 0's transcript step
// on its device too: round 0's coefficients observed and u_0 sampled there, so that round 0, the
// bind and the multilinear rounds follow one another with one sync for all. ProveStacking
// replays them (ErrDeviceTranscript).
type StackingDeviceFirstRound interface {
	// ProveFirstRounds runs UnivariateRound with batch's weights, its coefficients observed and
	// u_0 sampled from tr's state (tr is not changed), BindUnivariate at that u_0, then rounds
	// 1 .. n as ProveRounds does. It returns round 0's coefficients, u_0, and ProveRounds' sums
	// and bound values; Openings follows. It returns ErrDeviceRoundsUnsupported, having done
	// nothing, where the device cannot (then the stage calls UnivariateRound).
	ProveFirstRounds(batch *StackingBatch, tr *transcript.Transcript, n int) (coeffs []field.Fp4, u0 field.Fp4, polys [][2]field.Fp4, u []field.Fp4, err error)
}

// WhirDeviceRounds is a WhirProver that runs a WHIR round's k sumcheck rounds, folding proofs of
// work included, with a copy of the stage's transcript on its device. ProveWhir replays what
// SumcheckRounds returns through its own transcript (each witness checked, each bound value
// compared: ErrDeviceTranscript).
type WhirDeviceRounds interface {
	// SumcheckRounds runs k rounds from tr's state (tr is not changed): per round s(1), s(2)
	// observed, the smallest witness of a bits-bit proof of work ground (none for 0 bits), the
	// bound value sampled and the tables folded at it, as the stage's loop does with
	// SumcheckRound, its grinder and Fold. It returns ErrDeviceRoundsUnsupported, having done
	// nothing, where the device cannot (then the stage runs the rounds itself).
	SumcheckRounds(tr *transcript.Transcript, k, bits int) (polys [][2]field.Fp4, witnesses []field.Fp, alphas []field.Fp4, err error)
}

// ErrDeviceRoundsUnsupported: a backend cannot run these rounds on its device (the stage runs
// them round by round).
var ErrDeviceRoundsUnsupported = errors.New("stark: these rounds do not run on the device")

// WhirDeviceChain is a WhirProver that runs WHIR's rounds one after another with a copy of the
// stage's transcript on its device, without returning to the host between them. ProveWhir
// replays the run through its own transcript (every sample compared, every witness checked:
// ErrDeviceTranscript) and takes the openings from it.
type WhirDeviceChain interface {
	// ChainRounds runs, from tr's state after μ was sampled (tr is not changed; for a prover of
	// NewWhirProverMu, tr's state before μ's proof of work, which the device continues), every round but
	// the last as the stage's loop does (the sumcheck rounds with their folding proofs of work,
	// the commitment, z, y, the query-phase proof of work, the query indices, γ, the next round's
	// weight terms, the openings), then the last round's sumcheck rounds, its tables folded at
	// their last bound value as Fold does, and, where the device can, the last round's query
	// phase behind them (WhirChainRun.Final). It returns ErrDeviceRoundsUnsupported, having done
	// nothing, where the device cannot (then the stage runs the rounds one by one).
	ChainRounds(tr *transcript.Transcript, p params.SystemParams) (*WhirChainRun, error)
}

// WhirDeviceMu is a WhirBackend whose provers make μ on the device: its proof of work ground
// and μ sampled from a copy of the stage's transcript, its powers batching the columns there.
// Such a prover runs its rounds with ChainRounds (WhirDeviceChain), whose run brings back μ's
// witness and μ for ProveWhir to replay first.
type WhirDeviceMu interface {
	// NewWhirProverMu is NewWhirProver with μ made on the device from tr's state after the
	// stacking openings (tr is not changed). It returns ErrDeviceRoundsUnsupported, having done
	// nothing, where the device cannot run the rounds as a chain.
	NewWhirProverMu(p params.SystemParams, commits []Committed, tr *transcript.Transcript, uCube []field.Fp4) (WhirProver, error)
}

// WhirDeviceFinal is a WhirProver that runs the last WHIR round's query phase with a copy of the
// stage's transcript on its device: the proof of work, the query indices, γ and the openings of
// the last committed codeword, one sync for all. ProveWhir replays it (ErrDeviceTranscript).
type WhirDeviceFinal interface {
	// FinalQueries runs, from tr's state after the final polynomial was observed (tr is not
	// changed), the last round's query phase as the stage's loop does: the proof of work ground,
	// its witness observed, the query indices and γ sampled, the last committed codeword opened
	// at the indices. It returns ErrDeviceRoundsUnsupported, having done nothing, where the
	// device cannot (then the stage does it).
	FinalQueries(tr *transcript.Transcript, p params.SystemParams) (*WhirFinalQueries, error)
}

// WhirFinalQueries is what FinalQueries did.
type WhirFinalQueries struct {
	Witness      field.Fp
	QueryIndices []int
	Gamma        field.Fp4
	Codeword     []CodewordOpening
}

// WhirPendingFinal is the last WHIR round's query phase running on the device behind a chain
// (WhirChainRun.Final), as FinalQueries runs it.
type WhirPendingFinal interface {
	// Wait waits for the query phase and returns what it did (one sync). Call it once.
	Wait() (*WhirFinalQueries, error)
}

// WhirChainRun is what ChainRounds did: μ's witness and μ when the prover made them
// (MuOnDevice: NewWhirProverMu), Rounds for every round but the last, then the last round's
// sumcheck rounds. Where the device also runs the last round's query phase behind the chain
// (from the transcript's state after the last sumcheck round with the final polynomial
// observed), FinalPoly is that polynomial and Final the query phase, still running when
// ChainRounds returns: ProveWhir replays the chain meanwhile and waits for it at the last round.
// Both are nil otherwise.
type WhirChainRun struct {
	MuOnDevice    bool
	MuWitness     field.Fp
	Mu            field.Fp4
	Rounds        []WhirChainRound
	LastPolys     [][2]field.Fp4
	LastWitnesses []field.Fp
	LastAlphas    []field.Fp4
	FinalPoly     []field.Fp4
	Final         WhirPendingFinal
}

// WhirChainRound is one round of a WhirChainRun: per sumcheck round s(1), s(2), the folding
// witness and the bound value; the commitment's root, z, y; the query-phase witness, the query
// indices and γ; the openings at the indices (Initial in round 0, Codeword in later rounds).
type WhirChainRound struct {
	Polys        [][2]field.Fp4
	Witnesses    []field.Fp
	Alphas       []field.Fp4
	Root         Digest
	Z, Y         field.Fp4
	QueryWitness field.Fp
	QueryIndices []int
	Gamma        field.Fp4
	Initial      []InitialOpening
	Codeword     []CodewordOpening
}

// InitialOpening is the answer to one WHIR query of round 0: per commitment (commitment-list
// order) the 2^k opened rows of its codeword (Rows[c][t][col], canonical) and the Merkle path.
type InitialOpening struct {
	Rows  [][][]field.Fp
	Paths [][]Digest
}

// CodewordOpening is the answer to one WHIR query of a later round: the 2^k opened values of the
// folded codeword and the Merkle path.
type CodewordOpening struct {
	Values []field.Fp4
	Path   []Digest
}

// WhirProver holds the WHIR tables f, w and the folded codewords on the backend.
type WhirProver interface {
	// SumcheckRound returns s(1), s(2) of Σ_y f·w over the lowest variable.
	SumcheckRound() (s1, s2 field.Fp4, err error)
	// Fold fixes the lowest variable of f and w to alpha.
	Fold(alpha field.Fp4) error
	// CommitFolded RS-encodes the coefficient table of the current f on the subgroup of order
	// 2^logDomain and Merkle-commits it with 2^k rows per query; the codeword gets the next
	// codeword index (0, 1, …).
	CommitFolded(logDomain int) (Digest, error)
	// EvalFolded returns Σ_b gc[b]·z^b for the coefficient table gc of the current f.
	EvalFolded(z field.Fp4) (field.Fp4, error)
	// FinalPoly returns the coefficient table of the current f.
	FinalPoly() ([]field.Fp4, error)
	// OpenInitial answers the round-0 queries ys (query-group indices) on every initial
	// commitment, in the order of ys.
	OpenInitial(ys []int) ([]InitialOpening, error)
	// OpenCodeword answers the queries ys on codeword idx, in the order of ys.
	OpenCodeword(idx int, ys []int) ([]CodewordOpening, error)
	// AccumulateWeight adds Σ_i coefs[i]·eq(pow_d(points[i]), ·) to w (d = current variables).
	AccumulateWeight(coefs, points []field.Fp4) error
	// Release frees backend resources.
	Release()
}

// Checker is the pre-proof trace check: every constraint of every present AIR on every row, and
// the balance of the interactions of all AIRs.
type Checker interface {
	// CheckTraces checks the present traces of inputs (AIR order, loaded on the backend) against
	// pk's AIRs. It returns nil for valid traces, a *TraceCheckError exactly as HostChecker's
	// (at most maxFailures constraint failures in (AIR, row, constraint) order, ≤ 0 meaning 10,
	// and at most maxFailures imbalances), or another error: an input that does not fit pk
	// (ErrProveInput), a device error.
	CheckTraces(pk *ProvingKey, inputs []AirTraces, maxFailures int) error
}

// Counters are a backend's cumulative work counters, read by Meter.
type Counters struct {
	Dispatches      int   `json:"dispatches"`
	Syncs           int   `json:"syncs"`
	BytesToDevice   int64 `json:"bytes_to_device"`
	BytesFromDevice int64 `json:"bytes_from_device"`
	// MemoryPeak is the peak device memory (bytes) since the last ResetPeak.
	MemoryPeak int64 `json:"memory_peak"`
	// SyncWait is the time the host spent blocked waiting for the device (syncs).
	SyncWait time.Duration `json:"sync_wait_ns"`
	// HostGap is the time the device's queue stood empty after a sync until the host encoded the
	// next kernel or copy: the device waited on the host (round trips).
	HostGap time.Duration `json:"host_gap_ns"`
}

// Since returns the counters accumulated between before and c; MemoryPeak is c's (the peak since
// the last ResetPeak).
func (c Counters) Since(before Counters) Counters {
	return Counters{
		Dispatches:      c.Dispatches - before.Dispatches,
		Syncs:           c.Syncs - before.Syncs,
		BytesToDevice:   c.BytesToDevice - before.BytesToDevice,
		BytesFromDevice: c.BytesFromDevice - before.BytesFromDevice,
		MemoryPeak:      c.MemoryPeak,
		SyncWait:        c.SyncWait - before.SyncWait,
		HostGap:         c.HostGap - before.HostGap,
	}
}

// Meter reads a backend's counters for per-stage reports.
type Meter interface {
	Counters() Counters
	// ResetPeak restarts MemoryPeak from the memory in use now.
	ResetPeak()
}

// WhirDeviceCommit is a WhirProver that runs a WHIR round's commitment and the transcript's
// steps after it with a copy of the stage's transcript on its device. ProveWhir replays what
// CommitRound returns through its own transcript (the sample compared, the witness checked:
// ErrDeviceTranscript).
type WhirDeviceCommit interface {
	// CommitRound is CommitFolded(logDomain), then from tr's state (tr is not changed): the root
	// observed, z sampled, y = EvalFolded(z) observed, and the smallest witness of a bits-bit
	// proof of work ground (0 for no bits), as the stage's loop does.
	CommitRound(tr *transcript.Transcript, logDomain, bits int) (root Digest, z, y field.Fp4, w field.Fp, err error)
}
