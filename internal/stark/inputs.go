package stark

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

// AirInput is one present AIR's proving input: its verifying key and its trace parts, loaded on
// the backend. Stages after the preamble receive the present AIRs in trace order (common-main
// height descending, ties by AIR index ascending; spec A §3.7, B §3.1).
type AirInput struct {
	// AirIndex is the AIR's position in the verifying key; Name is the AIR's name (logs: a
	// backend's compile of the AIR's constraint code names it).
	AirIndex int
	Name     string
	VK       *air.VerifyingKey
	// Program is VK's constraint program (compiled at keygen); nil: compiled when needed.
	Program *constraints.Program
	// Common is the common main trace; its height is the trace height (a power of two). An AIR
	// without common main columns has a width-0 trace of that height.
	Common Trace
	// Preprocessed is nil when the AIR has no preprocessed trace.
	Preprocessed Trace
	// Cached are the cached main traces, in part order.
	Cached []Trace
	Public []field.Fp
}

// Height is the trace height.
func (a *AirInput) Height() int { return a.Common.Height() }

// LogHeight is log2 of the trace height.
func (a *AirInput) LogHeight() int {
	n, _ := field.Log2(a.Common.Height())
	return n
}

// TraceShape is what the verifier knows of one present AIR, in trace order.
type TraceShape struct {
	AirIndex int
	VK       *air.VerifyingKey
	// Program is VK's constraint program (compiled at keygen); nil: compiled when needed.
	Program   *constraints.Program
	LogHeight int
	Public    []field.Fp
}

// GkrOutcome hands the LogUp-GKR stage's results to the batch constraint sumcheck (spec B §3.6).
type GkrOutcome struct {
	// Alpha and Beta are the LogUp challenges (sampled even without interactions).
	Alpha, Beta field.Fp4
	// NLogup is the number of GKR variables beyond l_skip (0 without interactions).
	NLogup int
	// Xi is the full point, extended by sampling to l_skip + max(n_max, n_logup) coordinates.
	Xi []field.Fp4
	// PClaim and QClaim are p̂_L(ξ) and q̂_L(ξ) (zero and α's contribution as the spec defines
	// them when there are no interactions).
	PClaim, QClaim field.Fp4
}
