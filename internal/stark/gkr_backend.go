package stark

import (
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
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
