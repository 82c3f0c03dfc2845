package stark

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// GkrBlock is one (trace, interaction) block of the LogUp leaf column (spec B §3.3 item 4): leaves
// [Row, Row + 2^LogSize) hold interaction Interaction of trace Trace (trace order), LogSize =
// l_skip + ñ_T. A trace shorter than 2^l_skip is repeated 2^(LogSize − h_T) times in its block.
type GkrBlock struct {
	Trace, Interaction int
	Row                int
	LogSize            int
}

// GkrLayout is the LogUp interaction layout: the blocks in leaf order, Total = Σ block sizes
// (total_interactions) and the 2^(LSkip+NLogup) leaves of the GKR tree (padding after Total).
type GkrLayout struct {
	LSkip, NLogup int
	Total         uint64
	Blocks        []GkrBlock
}

// NumLayers is L = l_skip + n_logup, the GKR depth (0 without interactions).
func (g *GkrLayout) NumLayers() int {
	if g.Total == 0 {
		return 0
	}
	return g.LSkip + g.NLogup
}

// GkrBackend builds the LogUp-GKR fraction tree and runs its layer sumchecks (spec B §3.4–§3.5).
// The stage code (gkr.go) owns the transcript; the backend only computes, keeping the leaves,
// the tree and the sumcheck tables wherever it keeps its data.
type GkrBackend interface {
	// NewGkrProver evaluates the leaves of layout (layout.Total > 0) from the traces (trace
	// order) with the LogUp challenges: p_i = norm_T·count, q_i = α + h_β(message, bus) on the
	// unlifted rows, padding (0, α) (spec B §3.4); then builds the fraction tree.
	NewGkrProver(p params.SystemParams, traces []*AirInput, layout *GkrLayout, alpha, beta field.Fp4) (GkrProver, error)
}

// GkrPreparer is a GkrBackend that can do the part of NewGkrProver that α and β do not enter
// (the traces' programs, the interaction tables, the buffers) before the LogUp challenges exist:
// stark.Prove calls it behind the commitment (CommitGrinder), while the device hashes, so that
// the stage's first kernels follow the commitment at once.
type GkrPreparer interface {
	PrepareGkr(p params.SystemParams, traces []*AirInput, layout *GkrLayout) (PreparedGkr, error)
}

// PreparedGkr is what PrepareGkr made: NewGkrProver's remaining part.
type PreparedGkr interface {
	// Start is NewGkrProver with the prepared arguments and α, β. Once; the prover owns what
	// was prepared.
	Start(alpha, beta field.Fp4) (GkrProver, error)
	// Release frees what was prepared unless Start took it (idempotent).
	Release()
}

// GkrProver holds one fraction tree of L = layout.NumLayers() layers below the root.
type GkrProver interface {
	// Root returns the root fraction (p_0, q_0).
	Root() (p, q field.Fp4, err error)
	// BeginLayer starts the sumcheck of layer j ∈ [1, L]: the eq table of xi (len j−1, bit k ↔
	// xi[k]) and the columns p_j(2y), q_j(2y), p_j(2y+1), q_j(2y+1) over y ∈ {0,1}^(j−1),
	// batched with lambda (unused for j = 1, which has no rounds).
	BeginLayer(j int, xi []field.Fp4, lambda field.Fp4) error
	// Round returns s_t(1), s_t(2), s_t(3) of the next of the layer's j−1 rounds:
	// Σ_y' eq·(p0·q1 + p1·q0 + λ·q0·q1) with the lowest remaining variable set to X.
	Round() ([3]field.Fp4, error)
	// Bind fixes the lowest remaining variable of the layer's tables to r.
	Bind(r field.Fp4) error
	// LayerClaims returns (p̂_j(0;ρ), p̂_j(1;ρ), q̂_j(0;ρ), q̂_j(1;ρ)) once all j−1 rounds are bound.
	LayerClaims() (GkrLayerClaims, error)
	// Release frees backend resources.
	Release()
}

// GkrDeviceLayers is a GkrProver that runs the layers' sumchecks with a copy of the stage's
// transcript on its device, so that the rounds follow one another without waiting for the host
// (the stage's loop otherwise waits for every round's sums before it samples the bound value).
// The stage replays what ProveLayers returns through its own transcript and checks every sample
// against the device's (ErrDeviceTranscript): the protocol's order stays the stage's. Where the
// run carries the device transcript's final state, stark.Prove goes on from that state and runs
// the replay beside the next stages (GkrProveOptions.Defer), returning the proof only after it.
type GkrDeviceLayers interface {
	// ProveLayers runs layers 1 .. L from tr's state before the root's q_0 is observed (tr is
	// not changed), doing what the stage does after NewGkrProver: observe q_0 (Root's), sample
	// λ (j ≥ 2), then per round observe s(1), s(2), s(3) and sample the bound value, then observe
	// the claims and sample μ. The prover's per-layer methods fail afterwards.
	ProveLayers(tr *transcript.Transcript) (*GkrLayersRun, error)
}

// GkrLayersRun holds what ProveLayers computed and sampled: the root's fraction (p_0, q_0), and
// per layer j at index j − 1: λ (zero for j = 1), the rounds' s(1), s(2), s(3) and bound values
// (j − 1 each), the claims and μ.
type GkrLayersRun struct {
	Root   *[2]field.Fp4
	Lambda []field.Fp4
	Polys  [][][3]field.Fp4
	Rho    [][]field.Fp4
	Claims []GkrLayerClaims
	Mu     []field.Fp4
	// Final is the device transcript after the last μ (nil where the backend does not give it).
	// With it and GkrProveOptions.Defer, the stage takes this state and goes on while its replay
	// of the run, which must end in the same state, runs beside the next stages.
	Final *TranscriptState
}

// TranscriptState is a transcript's sponge and indices (transcript.Transcript.State's form).
type TranscriptState struct {
	Sponge               [poseidon2.Width]field.Fp
	AbsorbIdx, SampleIdx int
}

// check reports whether r has the shape of L layers.
func (r *GkrLayersRun) check(L int) error {
	if r == nil || r.Root == nil || len(r.Lambda) != L || len(r.Polys) != L || len(r.Rho) != L || len(r.Claims) != L || len(r.Mu) != L {
		return fmt.Errorf("%w: the device's layers do not have %d layers", ErrDeviceTranscript, L)
	}
	for j := 1; j <= L; j++ {
		if len(r.Polys[j-1]) != j-1 || len(r.Rho[j-1]) != j-1 {
			return fmt.Errorf("%w: layer %d: %d rounds' sums and %d bound values, want %d", ErrDeviceTranscript, j, len(r.Polys[j-1]), len(r.Rho[j-1]), j-1)
		}
	}
	return nil
}
