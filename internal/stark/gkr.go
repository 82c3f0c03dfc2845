package stark

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/transcript"
)

// LogUp set-up and the GKR fractional sumcheck (spec B §3.3–§3.6, verifier §6.2 items 2–4;
// OpenVM prover/logup_zerocheck/{mod.rs, fractional_sumcheck_gkr.rs},
// verifier/{batch_constraints.rs, fractional_sumcheck_gkr.rs}).

// Errors of the LogUp-GKR stage. Every error of this stage wraps ErrGkr; the PoW failure also
// wraps ErrPow and a shape failure also wraps ErrShape.
var (
	ErrGkr = errors.New("stark: LogUp-GKR")
	// ErrDeviceTranscript: a backend's copy of the transcript on the device sampled another
	// challenge than the stage's (GkrDeviceLayers): a defect of the backend, never of the input.
	ErrDeviceTranscript = errors.New("stark: the device transcript diverged from the stage's")
	// ErrGkrInput: the parameters or traces are unusable (prover and verifier).
	ErrGkrInput = fmt.Errorf("%w: invalid input", ErrGkr)
	// ErrGkrShape: a GKR proof list has the wrong length (IncorrectLayerCount, …).
	ErrGkrShape = fmt.Errorf("%w: proof shape", ErrGkr)
	// ErrLogupPow: the LogUp proof-of-work witness is invalid (InvalidLogupPowWitness).
	ErrLogupPow = &stageError{ErrGkr, ErrPow, "LogUp proof-of-work"}
	// ErrGkrZeroRound: without interactions q0_claim must be 1 (InvalidZeroRoundValue).
	ErrGkrZeroRound = fmt.Errorf("%w: q0_claim must be 1 without interactions", ErrGkr)
	// ErrGkrRootNumerator: the LogUp sum is not zero. Verifier: P0·Q1 + P1·Q0 of the layer-1
	// claims ≠ 0 (ZeroCheckFailed). Prover: the root numerator p_0 ≠ 0, i.e. the buses do not
	// balance (NonZeroRootSum).
	ErrGkrRootNumerator = fmt.Errorf("%w: root numerator is not zero", ErrGkr)
	// ErrGkrRootDenominator: Q0·Q1 of the layer-1 claims ≠ q0_claim (RootConsistencyCheckFailed).
	ErrGkrRootDenominator = fmt.Errorf("%w: layer-1 claims do not match q0_claim", ErrGkr)
	// ErrGkrSumcheck: a layer's sumcheck does not end at its claims (LayerConsistencyCheckFailed).
	ErrGkrSumcheck = fmt.Errorf("%w: layer sumcheck does not match the layer claims", ErrGkr)
)

// maxGkrLayers bounds L = l_skip + n_logup so that total_interactions fits an int64.
const maxGkrLayers = 62

// NewGkrLayout is the interactions layout of spec B §3.3 (StackedLayout::new(0, L, [(K_T,
// l+ñ_T)])) for traces in trace order with log heights logHeights and numInteractions[i]
// interactions. It also returns n_max. Heights must be non-increasing. The batch constraint
// stage takes the block rows for eq3b_{T,k} (spec B §3.6) from it.
func NewGkrLayout(lSkip int, logHeights, numInteractions []int) (*GkrLayout, int, error) {
	if lSkip < 0 || lSkip >= maxGkrLayers {
		return nil, 0, fmt.Errorf("%w: l_skip = %d", ErrGkrInput, lSkip)
	}
	if len(logHeights) == 0 {
		return nil, 0, fmt.Errorf("%w: no traces", ErrGkrInput)
	}
	g := &GkrLayout{LSkip: lSkip}
	nMax := 0
	for i, h := range logHeights {
		k := numInteractions[i]
		if h < 0 || h >= maxGkrLayers || k < 0 {
			return nil, 0, fmt.Errorf("%w: trace %d: log height %d, %d interactions", ErrGkrInput, i, h, k)
		}
		if i > 0 && h > logHeights[i-1] {
			return nil, 0, fmt.Errorf("%w: trace %d: log height %d after %d (traces must be in trace order)", ErrGkrInput, i, h, logHeights[i-1])
		}
		nMax = max(nMax, h-lSkip)
		lifted := max(h, lSkip)
		for j := range k {
			g.Blocks = append(g.Blocks, GkrBlock{Trace: i, Interaction: j, Row: int(g.Total), LogSize: lifted})
			g.Total += 1 << lifted
			if g.Total >= 1<<maxGkrLayers {
				return nil, 0, fmt.Errorf("%w: total interactions exceed 2^%d", ErrGkrInput, maxGkrLayers)
			}
		}
	}
	if g.Total > 0 {
		// calculate_n_logup: bitlen(total) − l_skip (≥ 1 since total ≥ 2^l_skip).
		g.NLogup = bits.Len64(g.Total) - lSkip
	}
	return g, nMax, nil
}

func checkGkrParams(p params.SystemParams) error {
	if b := p.Logup.PowBits; b < 0 || b > transcript.MaxBits {
		return fmt.Errorf("%w: logup.pow_bits = %d", ErrGkrInput, b)
	}
	return nil
}

// GkrProveOptions change the prover's behaviour for tests and diagnostics.
type GkrProveOptions struct {
	// AllowNonZeroRoot makes the prover send a proof for an unbalanced bus instead of failing
	// with ErrGkrRootNumerator (the transcript still omits p_0, as for a balanced one); the
	// verifier rejects such a proof with ErrGkrRootNumerator.
	AllowNonZeroRoot bool
	// Defer, where set, takes the check of a device run that gave its final transcript state
	// (GkrLayersRun.Final): the stage adopts that state and returns without waiting for its
	// replay, which runs in a goroutine; the caller must call check (ErrDeviceTranscript on a
	// divergence) before it uses the proof. Unset, the stage replays before it returns.
	Defer func(check func() error)
	// Prepared, where set, is the backend's PrepareGkr of these traces and their layout
	// (GkrLayoutOf): the stage starts it with α and β instead of calling NewGkrProver. The stage
	// releases it.
	Prepared PreparedGkr
}

// GkrLayoutOf checks traces (trace order) for the stage and returns their interactions layout
// (NewGkrLayout) and n_max.
func GkrLayoutOf(p params.SystemParams, traces []*AirInput) (*GkrLayout, int, error) {
	logHeights := make([]int, len(traces))
	numInter := make([]int, len(traces))
	for i, t := range traces {
		if t == nil || t.VK == nil || t.VK.DAG == nil {
			return nil, 0, fmt.Errorf("%w: trace %d has no verifying key", ErrGkrInput, i)
		}
		if t.Common == nil {
			return nil, 0, fmt.Errorf("%w: trace %d has no common main trace", ErrGkrInput, i)
		}
		if h := t.Height(); h < 1 || h&(h-1) != 0 {
			return nil, 0, fmt.Errorf("%w: trace %d: height %d is not a power of two", ErrGkrInput, i, h)
		}
		logHeights[i] = t.LogHeight()
		numInter[i] = len(t.VK.DAG.Interactions)
	}
	return NewGkrLayout(p.LSkip, logHeights, numInter)
}

// ProveGkr runs the LogUp set-up and the GKR fractional sumcheck on traces (trace order) and
// completes ξ (spec B §3.3–§3.6). It starts at the LogUp proof-of-work; the preamble must
// already be on tr. An unbalanced bus (root numerator ≠ 0) is an ErrGkrRootNumerator error.
func ProveGkr(be GkrBackend, g transcript.Grinder, tr *transcript.Transcript, p params.SystemParams, traces []*AirInput) (GkrProof, *GkrOutcome, error) {
	return ProveGkrWithOptions(be, g, tr, p, traces, GkrProveOptions{})
}

// ProveGkrWithOptions is ProveGkr with options.
func ProveGkrWithOptions(be GkrBackend, g transcript.Grinder, tr *transcript.Transcript, p params.SystemParams, traces []*AirInput, opt GkrProveOptions) (GkrProof, *GkrOutcome, error) {
	if opt.Prepared != nil {
		defer opt.Prepared.Release()
	}
	if err := checkGkrParams(p); err != nil {
		return GkrProof{}, nil, err
	}
	layout, nMax, err := GkrLayoutOf(p, traces)
	if err != nil {
		return GkrProof{}, nil, err
	}

	var proof GkrProof
	if proof.LogupPowWitness, err = tr.GrindWith(context.Background(), g, p.Logup.PowBits); err != nil {
		return GkrProof{}, nil, err
	}
	out := &GkrOutcome{NLogup: layout.NLogup}
	out.Alpha = tr.SampleExt()
	out.Beta = tr.SampleExt()

	if layout.Total == 0 {
		proof.Q0Claim = field.Fp4One
		proof.ClaimsPerLayer = make([]GkrLayerClaims, 0)
		proof.SumcheckPolys = make([][][3]field.Fp4, 0)
		out.PClaim, out.QClaim = field.Fp4{}, out.Alpha
	} else {
		L := layout.NumLayers()
		var gp GkrProver
		if opt.Prepared != nil {
			gp, err = opt.Prepared.Start(out.Alpha, out.Beta)
		} else {
			gp, err = be.NewGkrProver(p, traces, layout, out.Alpha, out.Beta)
		}
		if err != nil {
			return GkrProof{}, nil, err
		}
		defer gp.Release()
		proof.ClaimsPerLayer = make([]GkrLayerClaims, L)
		proof.SumcheckPolys = make([][][3]field.Fp4, L-1)
		checkRoot := func(p0, q0 field.Fp4) error {
			if !p0.IsZero() && !opt.AllowNonZeroRoot {
				return fmt.Errorf("%w: prover: root fraction %v / %v (unbalanced bus)", ErrGkrRootNumerator, p0, q0)
			}
			// G0: p_0 is asserted zero and not observed.
			proof.Q0Claim = q0
			return nil
		}
		// A backend that runs the layers' rounds with the transcript on the device returns every
		// value at once, the root's fraction first (observed there: no sync between the tree
		// and the layers); the stage replays them through tr, checking each sample (replayGkrRun).
		var xi []field.Fp4
		if dl, ok := gp.(GkrDeviceLayers); ok {
			run, err := dl.ProveLayers(tr)
			if err != nil {
				return GkrProof{}, nil, err
			}
			if err := run.check(L); err != nil {
				return GkrProof{}, nil, err
			}
			if err := checkRoot(run.Root[0], run.Root[1]); err != nil {
				return GkrProof{}, nil, err
			}
			for j := 1; j <= L; j++ {
				if j > 1 {
					proof.SumcheckPolys[j-2] = run.Polys[j-1]
				}
				c := run.Claims[j-1]
				proof.ClaimsPerLayer[j-1] = c
				out.PClaim, out.QClaim = reduceLayerClaims(&c, run.Mu[j-1])
				xi = append([]field.Fp4{run.Mu[j-1]}, run.Rho[j-1]...)
			}
			if f := run.Final; f != nil && opt.Defer != nil {
				replay := *tr
				if err := tr.SetState(f.Sponge, f.AbsorbIdx, f.SampleIdx); err != nil {
					return GkrProof{}, nil, fmt.Errorf("%w: the device's final state: %v", ErrDeviceTranscript, err)
				}
				final := *tr // tr goes on with the next stages
				done := make(chan error, 1)
				go func() { done <- replayGkrRun(&replay, run, &final) }()
				opt.Defer(func() error { return <-done })
			} else if err := replayGkrRun(tr, run, nil); err != nil {
				return GkrProof{}, nil, err
			}
		} else {
			p0, q0, err := gp.Root()
			if err != nil {
				return GkrProof{}, nil, err
			}
			if err := checkRoot(p0, q0); err != nil {
				return GkrProof{}, nil, err
			}
			tr.ObserveExt(q0)
			for j := 1; j <= L; j++ {
				var lambda field.Fp4
				if j > 1 {
					lambda = tr.SampleExt()
				}
				if err := gp.BeginLayer(j, xi, lambda); err != nil {
					return GkrProof{}, nil, err
				}
				rho := make([]field.Fp4, j-1)
				if j > 1 {
					polys := make([][3]field.Fp4, j-1)
					for t := range j - 1 {
						s, err := gp.Round()
						if err != nil {
							return GkrProof{}, nil, err
						}
						for _, v := range s {
							tr.ObserveExt(v)
						}
						polys[t] = s
						rho[t] = tr.SampleExt()
						if err := gp.Bind(rho[t]); err != nil {
							return GkrProof{}, nil, err
						}
					}
					proof.SumcheckPolys[j-2] = polys
				}
				c, err := gp.LayerClaims()
				if err != nil {
					return GkrProof{}, nil, err
				}
				proof.ClaimsPerLayer[j-1] = c
				observeLayerClaims(tr, &c)
				mu := tr.SampleExt()
				out.PClaim, out.QClaim = reduceLayerClaims(&c, mu)
				xi = append([]field.Fp4{mu}, rho...)
			}
		}
		out.Xi = xi
	}
	out.Xi = completeXi(tr, out.Xi, p.LSkip+max(nMax, layout.NLogup))
	return proof, out, nil
}

// replayGkrRun observes and samples on tr what the layers' loop does, checking every sample
// against run's (ErrDeviceTranscript); with final set, tr must end in final's state.
func replayGkrRun(tr *transcript.Transcript, run *GkrLayersRun, final *transcript.Transcript) error {
	same := func(what string, j, t int, dev, host field.Fp4) error {
		if dev != host {
			return fmt.Errorf("%w: %s of layer %d (round %d): %v on the device, %v here", ErrDeviceTranscript, what, j, t, dev, host)
		}
		return nil
	}
	tr.ObserveExt(run.Root[1])
	for j := 1; j <= len(run.Mu); j++ {
		if j > 1 {
			if err := same("λ", j, 0, run.Lambda[j-1], tr.SampleExt()); err != nil {
				return err
			}
		}
		for t, s := range run.Polys[j-1] {
			for _, v := range s {
				tr.ObserveExt(v)
			}
			if err := same("bound value", j, t, run.Rho[j-1][t], tr.SampleExt()); err != nil {
				return err
			}
		}
		observeLayerClaims(tr, &run.Claims[j-1])
		if err := same("μ", j, 0, run.Mu[j-1], tr.SampleExt()); err != nil {
			return err
		}
	}
	if final != nil && !tr.Same(final) {
		return fmt.Errorf("%w: the device's transcript after the layers is not the replay's", ErrDeviceTranscript)
	}
	return nil
}

// observeLayerClaims observes one layer's claims in transcript order P0, Q0, P1, Q1 (the struct
// order is P0, P1, Q0, Q1).
func observeLayerClaims(tr *transcript.Transcript, c *GkrLayerClaims) {
	tr.ObserveExt(c.PXi0)
	tr.ObserveExt(c.QXi0)
	tr.ObserveExt(c.PXi1)
	tr.ObserveExt(c.QXi1)
}

// reduceLayerClaims interpolates the claims at their first coordinate μ.
func reduceLayerClaims(c *GkrLayerClaims, mu field.Fp4) (p, q field.Fp4) {
	p = c.PXi0.Add(mu.Mul(c.PXi1.Sub(c.PXi0)))
	q = c.QXi0.Add(mu.Mul(c.QXi1.Sub(c.QXi0)))
	return p, q
}

// layerCrossTerms are P0·Q1 + P1·Q0 and Q0·Q1 (compute_recursive_relations).
func layerCrossTerms(c *GkrLayerClaims) (p, q field.Fp4) {
	return c.PXi0.Mul(c.QXi1).Add(c.PXi1.Mul(c.QXi0)), c.QXi0.Mul(c.QXi1)
}

// completeXi extends xi by sample_ext until it has n coordinates (spec B §3.6).
func completeXi(tr *transcript.Transcript, xi []field.Fp4, n int) []field.Fp4 {
	if xi == nil {
		xi = make([]field.Fp4, 0, n)
	}
	for len(xi) < n {
		xi = append(xi, tr.SampleExt())
	}
	return xi
}

var inv6 = field.New(6).Inverse()

// InterpolateCubic0123 is interpolate_cubic_at_0123: the cubic through (i, e[i]), i = 0..3, at x.
func InterpolateCubic0123(e [4]field.Fp4, x field.Fp4) field.Fp4 {
	s1 := e[1].Sub(e[0])
	s2 := e[2].Sub(e[0])
	s3 := e[3].Sub(e[0])
	d3 := s3.Sub(s2.Sub(s1).MulBase(field.New(3)))
	a := d3.MulBase(inv6)
	b := s2.Sub(d3).Halve().Sub(s1)
	c := s1.Sub(a).Sub(b)
	return a.Mul(x).Add(b).Mul(x).Add(c).Mul(x).Add(e[0])
}

// VerifyGkr replays the LogUp set-up and verifies the GKR proof (spec B §6.2 items 2–4) for the
// present traces in trace order, then completes ξ. It starts at the LogUp proof-of-work.
func VerifyGkr(tr *transcript.Transcript, p params.SystemParams, traces []TraceShape, proof *GkrProof) (*GkrOutcome, error) {
	if proof == nil {
		return nil, fmt.Errorf("%w: no proof", ErrGkrShape)
	}
	if err := checkGkrParams(p); err != nil {
		return nil, err
	}
	logHeights := make([]int, len(traces))
	numInter := make([]int, len(traces))
	for i := range traces {
		t := &traces[i]
		if t.VK == nil || t.VK.DAG == nil {
			return nil, fmt.Errorf("%w: trace %d has no verifying key", ErrGkrInput, i)
		}
		logHeights[i] = t.LogHeight
		numInter[i] = len(t.VK.DAG.Interactions)
	}
	layout, nMax, err := NewGkrLayout(p.LSkip, logHeights, numInter)
	if err != nil {
		return nil, err
	}
	L := layout.NumLayers()
	if err := CheckGkrShape(L, proof); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGkrShape, err)
	}
	if !tr.CheckWitness(p.Logup.PowBits, proof.LogupPowWitness) {
		return nil, ErrLogupPow
	}
	out := &GkrOutcome{NLogup: layout.NLogup}
	out.Alpha = tr.SampleExt()
	out.Beta = tr.SampleExt()
	if L == 0 {
		if proof.Q0Claim != field.Fp4One {
			return nil, fmt.Errorf("%w: got %v", ErrGkrZeroRound, proof.Q0Claim)
		}
		out.PClaim, out.QClaim = field.Fp4{}, out.Alpha
	} else {
		tr.ObserveExt(proof.Q0Claim)
		c := &proof.ClaimsPerLayer[0]
		observeLayerClaims(tr, c)
		pc, qc := layerCrossTerms(c)
		if !pc.IsZero() {
			return nil, fmt.Errorf("%w: P0·Q1 + P1·Q0 = %v", ErrGkrRootNumerator, pc)
		}
		if qc != proof.Q0Claim {
			return nil, fmt.Errorf("%w: Q0·Q1 = %v, q0_claim = %v", ErrGkrRootDenominator, qc, proof.Q0Claim)
		}
		mu := tr.SampleExt()
		pHat, qHat := reduceLayerClaims(c, mu)
		xi := []field.Fp4{mu}
		for j := 2; j <= L; j++ {
			lambda := tr.SampleExt()
			claim := pHat.Add(lambda.Mul(qHat))
			eq := field.Fp4One
			polys := proof.SumcheckPolys[j-2]
			rho := make([]field.Fp4, j-1)
			for t, s := range polys {
				for _, v := range s {
					tr.ObserveExt(v)
				}
				rho[t] = tr.SampleExt()
				claim = InterpolateCubic0123([4]field.Fp4{claim.Sub(s[0]), s[0], s[1], s[2]}, rho[t])
				eq = eq.Mul(eqFactor(xi[t], rho[t]))
			}
			c := &proof.ClaimsPerLayer[j-1]
			observeLayerClaims(tr, c)
			pc, qc := layerCrossTerms(c)
			if want := pc.Add(lambda.Mul(qc)).Mul(eq); want != claim {
				return nil, fmt.Errorf("%w: layer %d: sumcheck ends at %v, claims give %v", ErrGkrSumcheck, j, claim, want)
			}
			mu := tr.SampleExt()
			pHat, qHat = reduceLayerClaims(c, mu)
			xi = append([]field.Fp4{mu}, rho...)
		}
		out.Xi = xi
		out.PClaim, out.QClaim = pHat, qHat
	}
	out.Xi = completeXi(tr, out.Xi, p.LSkip+max(nMax, layout.NLogup))
	return out, nil
}
