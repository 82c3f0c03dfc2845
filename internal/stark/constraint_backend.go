package stark

import (
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// ConstraintChallenges are the values the batch constraint sumcheck's backend work depends on
// (spec B §4.1): everything else (μ_b, the eq factors of round 0, the tails) stays in the stage
// code.
type ConstraintChallenges struct {
	// Lambda is λ_c, the constraint batching challenge (power k multiplies the constraint at
	// position k of the DAG's sorted constraint list).
	Lambda field.Fp4
	// Beta is the LogUp fingerprint challenge β.
	Beta field.Fp4
	// Xi is the full point ξ (length l_skip + n_global); the backend uses ξ_{l..l+ñ_T−1} for the
	// cube eq tables e_T.
	Xi []field.Fp4
	// Eq3b[t][k] is eq3b_{T,k} of interaction k of trace t (trace order).
	Eq3b [][]field.Fp4
	// Programs and Weights (one per trace, trace order) are the traces' constraint programs
	// (compiled once per verifying key) and, when non-nil, their weights for Lambda, Beta and
	// Eq3b (a backend computes missing ones itself); a backend uses them read-only.
	Programs []*constraints.Program
	Weights  []*constraints.Weights
}

// ConstraintTriple holds one value list per polynomial family of a trace: the λ_c-batched
// constraints (Zc), the eq3b-weighted LogUp numerators (Num, without norm_T) and denominators
// (Den, the fingerprints without α).
type ConstraintTriple struct {
	Zc, Num, Den []field.Fp4
}

// ConstraintBackend performs the heavy work of the batch constraint sumcheck (spec B §4) on
// tables that stay on the backend.
type ConstraintBackend interface {
	// NewConstraintProver prepares the per-trace tables (all parts, rotated copies and the three
	// selector columns, periodic lift for traces shorter than 2^l_skip) of traces given in trace
	// order.
	NewConstraintProver(p params.SystemParams, traces []*AirInput, ch *ConstraintChallenges) (ConstraintProver, error)
}

// ConstraintProver holds one batch constraint sumcheck's tables on the backend. Rounds are
// numbered as in spec B §4.4: round 0 is the univariate round, rounds j = 1..n_max the
// multilinear ones.
type ConstraintProver interface {
	// UnivariateRound returns, per trace, the coefficients (constant first, each list of length
	// d·(2^l_skip − 1) + 1, d = params.max_constraint_degree) of
	//   Zc_T(Z) = Σ_x e_T(x)·C_T(Z; x),  Num_T(Z) = Σ_x e_T(x)·Num_T(Z; x),  Den_T(Z) = Σ_x e_T(x)·Den_T(Z; x).
	UnivariateRound() ([]ConstraintTriple, error)
	// BindUnivariate folds every table of every trace at Z = r0.
	BindUnivariate(r0 field.Fp4) error
	// Round returns, for round j (= 1 + the number of Bind calls so far), the values at
	// X = 1..d+1 of Σ_y e'(y)·{C_T, Num_T, Den_T}(r_0; r_1..r_{j−1}, X, y) for each trace with
	// ñ_T ≥ j (e'(y) = eq(ξ_{l+j..l+ñ_T−1}, y)); the entry of every other trace is zero-valued.
	Round() ([]ConstraintTriple, error)
	// Bind fixes the current round's variable to r in the tables of the traces with ñ_T ≥ j.
	Bind(r field.Fp4) error
	// Openings returns trace t's column openings in proof layout (spec B §4.5): per part
	// [common main, preprocessed, cached 0, …], need_rot ? [t_0, t_0^rot, t_1, …] : [t_0, t_1, …].
	// Valid once BindUnivariate and ñ_T Binds have run.
	Openings(t int) ([][]field.Fp4, error)
	// Release frees backend resources.
	Release()
}

// ConstraintDeviceRounds is a ConstraintProver that runs multilinear rounds with a copy of the
// stage's transcript on its device (kernels.DeviceTranscript), so that they follow one another
// without waiting for the host. ProveBatchConstraints replays what ProveRounds returns through its
// own transcript and checks every sample against the device's (ErrDeviceTranscript).
type ConstraintDeviceRounds interface {
	// ProveRounds runs rounds m.From .. m.To (the next round first: m.From − 1 Binds so far) from
	// tr's state (tr is not changed): per round j the values R_T(1..d+1) of every trace in the
	// round (as Round), combined by m into s_j(1..d+1), observed, r_j sampled and bound (as
	// Bind). It returns each round's s_j and r_j; Openings of a trace exhausted in a round of the
	// run, and a later ProveRounds, follow.
	ProveRounds(tr *transcript.Transcript, m *ConstraintRoundMix) (polys [][]field.Fp4, r []field.Fp4, err error)
}

// ConstraintRoundMix is how the stage combines the traces' round values (spec B §4.4) over rounds
// From..To: for X = 1..d+1
//
//	s_j(X) = eqAtSmall(ξ_{l+j−1}, X)·(Eqz·Σ_T Zc_T·R^Zc_T(X) + Eqs·Σ_T(Num_T·R^Num_T(X) + Den_T·R^Den_T(X))) + Tail·X
//
// over the traces in round j (ñ_T ≥ j), with Eqz and Eqs multiplied by eqFactor(ξ_{l+j−1}, r_j)
// and Tail by r_j after each round; the values are those at round From.
type ConstraintRoundMix struct {
	From, To       int
	Zc, Num, Den   []field.Fp4 // per trace, trace order
	Eqz, Eqs, Tail field.Fp4
}
