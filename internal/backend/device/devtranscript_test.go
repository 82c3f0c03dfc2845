package device_test

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// The device backend's provers with one value of a device-transcript run changed after it ran
// (as a defective kernel would): the stage must refuse the proof (stark.ErrDeviceTranscript).

type tamperConstraints struct {
	inner  stark.ConstraintBackend
	tamper func(polys [][]field.Fp4, r []field.Fp4)
}

func (b tamperConstraints) NewConstraintProver(p params.SystemParams, traces []*stark.AirInput, ch *stark.ConstraintChallenges) (stark.ConstraintProver, error) {
	cp, err := b.inner.NewConstraintProver(p, traces, ch)
	if err != nil {
		return nil, err
	}
	return tamperConstraintProver{cp, b.tamper}, nil
}

type tamperConstraintProver struct {
	stark.ConstraintProver
	tamper func(polys [][]field.Fp4, r []field.Fp4)
}

func (cp tamperConstraintProver) ProveRounds(tr *transcript.Transcript, m *stark.ConstraintRoundMix) ([][]field.Fp4, []field.Fp4, error) {
	polys, r, err := cp.ConstraintProver.(stark.ConstraintDeviceRounds).ProveRounds(tr, m)
	if err == nil {
		cp.tamper(polys, r)
	}
	return polys, r, err
}

// tamperStacking wraps a stacking backend whose provers run round 0 and the rounds on the device
// (stark.StackingDeviceFirstRound); f changes what ProveFirstRounds returns.
type tamperStacking struct {
	inner stark.StackingBackend
	f     func(coeffs *[]field.Fp4, u0 *field.Fp4, polys [][2]field.Fp4, u []field.Fp4)
}

func (b tamperStacking) NewStackingProver(p params.SystemParams, commits []stark.Committed, r []field.Fp4) (stark.StackingProver, error) {
	sp, err := b.inner.NewStackingProver(p, commits, r)
	if err != nil {
		return nil, err
	}
	return tamperStackingProver{sp, b.f}, nil
}

type tamperStackingProver struct {
	stark.StackingProver
	f func(coeffs *[]field.Fp4, u0 *field.Fp4, polys [][2]field.Fp4, u []field.Fp4)
}

func (sp tamperStackingProver) ProveRounds(tr *transcript.Transcript, n int) ([][2]field.Fp4, []field.Fp4, error) {
	return sp.StackingProver.(stark.StackingDeviceRounds).ProveRounds(tr, n)
}

func (sp tamperStackingProver) ProveFirstRounds(batch *stark.StackingBatch, tr *transcript.Transcript, n int) ([]field.Fp4, field.Fp4, [][2]field.Fp4, []field.Fp4, error) {
	coeffs, u0, polys, u, err := sp.StackingProver.(stark.StackingDeviceFirstRound).ProveFirstRounds(batch, tr, n)
	if err == nil {
		sp.f(&coeffs, &u0, polys, u)
	}
	return coeffs, u0, polys, u, err
}

// tamperWhir wraps a WHIR backend: with chain set its provers run the rounds as one chain
// (stark.WhirDeviceChain) and chain changes the run; without it they hide the chain, so that
// the stage runs the rounds one by one (rounds and commit change those). final changes the last
// round's query phase from the device: the chain's (WhirChainRun.Final) or, without a chain,
// FinalQueries'.
type tamperWhir struct {
	inner  stark.WhirBackend
	rounds func(polys [][2]field.Fp4, ws []field.Fp, alphas []field.Fp4)
	commit func(z *field.Fp4, w *field.Fp)
	chain  func(run *stark.WhirChainRun)
	final  func(fq *stark.WhirFinalQueries)
}

func (b tamperWhir) NewWhirProver(p params.SystemParams, commits []stark.Committed, mu field.Fp4, uCube []field.Fp4) (stark.WhirProver, error) {
	wp, err := b.inner.NewWhirProver(p, commits, mu, uCube)
	if err != nil {
		return nil, err
	}
	switch {
	case b.chain != nil:
		return tamperChainProver{tamperFinalProver{tamperWhirProver{wp, b}}}, nil
	case b.final != nil:
		return tamperFinalProver{tamperWhirProver{wp, b}}, nil
	}
	return tamperWhirProver{wp, b}, nil
}

// tamperWhirMu is tamperWhir whose provers make μ on the device (stark.WhirDeviceMu).
type tamperWhirMu struct{ tamperWhir }

func (b tamperWhirMu) NewWhirProverMu(p params.SystemParams, commits []stark.Committed, tr *transcript.Transcript, uCube []field.Fp4) (stark.WhirProver, error) {
	wp, err := b.inner.(stark.WhirDeviceMu).NewWhirProverMu(p, commits, tr, uCube)
	if err != nil {
		return nil, err
	}
	return tamperChainProver{tamperFinalProver{tamperWhirProver{wp, b.tamperWhir}}}, nil
}

// tamperFinalProver runs the last round's query phase on the device (stark.WhirDeviceFinal);
// tamperChainProver runs the rounds as a chain too.
type tamperFinalProver struct{ tamperWhirProver }

type tamperChainProver struct{ tamperFinalProver }

// tamperPending changes the chain's last-round query phase when it is waited for.
type tamperPending struct {
	inner stark.WhirPendingFinal
	final func(fq *stark.WhirFinalQueries)
}

func (p tamperPending) Wait() (*stark.WhirFinalQueries, error) {
	fq, err := p.inner.Wait()
	if err == nil {
		p.final(fq)
	}
	return fq, err
}

func (wp tamperFinalProver) FinalQueries(tr *transcript.Transcript, p params.SystemParams) (*stark.WhirFinalQueries, error) {
	fq, err := wp.WhirProver.(stark.WhirDeviceFinal).FinalQueries(tr, p)
	if err == nil && wp.b.final != nil {
		wp.b.final(fq)
	}
	return fq, err
}

func (wp tamperChainProver) ChainRounds(tr *transcript.Transcript, p params.SystemParams) (*stark.WhirChainRun, error) {
	run, err := wp.WhirProver.(stark.WhirDeviceChain).ChainRounds(tr, p)
	if err == nil {
		if run.Final != nil && wp.b.final != nil {
			run.Final = tamperPending{run.Final, wp.b.final}
		}
		wp.b.chain(run)
	}
	return run, err
}

type tamperWhirProver struct {
	stark.WhirProver
	b tamperWhir
}

func (wp tamperWhirProver) SumcheckRounds(tr *transcript.Transcript, k, bits int) ([][2]field.Fp4, []field.Fp, []field.Fp4, error) {
	polys, ws, alphas, err := wp.WhirProver.(stark.WhirDeviceRounds).SumcheckRounds(tr, k, bits)
	if err == nil && wp.b.rounds != nil {
		wp.b.rounds(polys, ws, alphas)
	}
	return polys, ws, alphas, err
}

func (wp tamperWhirProver) CommitRound(tr *transcript.Transcript, logDomain, bits int) (stark.Digest, field.Fp4, field.Fp4, field.Fp, error) {
	root, z, y, w, err := wp.WhirProver.(stark.WhirDeviceCommit).CommitRound(tr, logDomain, bits)
	if err == nil && wp.b.commit != nil {
		wp.b.commit(&z, &w)
	}
	return root, z, y, w, err
}

// TestDeviceTranscriptDivergenceRefused: the device backend's constraint rounds and WHIR rounds
// and commitments run on the device transcript; with their results passed through unchanged the
// proof is the device backend's own, byte for byte; with one sum, bound value, witness or point
// changed the proof is refused with ErrDeviceTranscript.
func TestDeviceTranscriptDivergenceRefused(t *testing.T) {
	be, _ := openHost(t)
	p, err := preset("app-100bit", 16)() // two WHIR rounds: one commitment on the device
	if err != nil {
		t.Fatal(err)
	}
	ins := []testair.Instance{keccakInstance(4), testair.Fibonacci(0, 1, 16)}
	airs := make([]air.Air, len(ins))
	inputs := make([]stark.AirProvingInput, len(ins))
	for i, in := range ins {
		airs[i] = in.Air
		inputs[i] = asProvingInput(in)
	}
	stages := be.Stages()
	pk, err := stark.Keygen(p, airs, nil, stages)
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Free()
	want, err := stark.Prove(pk, inputs, p, stages, nil)
	if err != nil {
		t.Fatal(err)
	}
	one := field.Fp4{1}
	wrapped := func(c func(polys [][]field.Fp4, r []field.Fp4), w tamperWhir) *stark.Backend {
		s := *stages
		if c == nil {
			c = func([][]field.Fp4, []field.Fp4) {}
		}
		s.Constraints = tamperConstraints{stages.Constraints, c}
		w.inner = stages.Whir
		s.Whir = w
		return &s
	}
	withMu := func(f func(run *stark.WhirChainRun)) *stark.Backend {
		s := wrapped(nil, tamperWhir{chain: f})
		s.Whir = tamperWhirMu{s.Whir.(tamperWhir)}
		return s
	}
	wb, _ := want.MarshalBinary()
	passFinal := func(*stark.WhirFinalQueries) {}
	stacking := func(f func(coeffs *[]field.Fp4, u0 *field.Fp4, polys [][2]field.Fp4, u []field.Fp4)) *stark.Backend {
		s := wrapped(nil, tamperWhir{})
		s.Stacking = tamperStacking{stages.Stacking, f}
		return s
	}
	for i, s := range []*stark.Backend{wrapped(nil, tamperWhir{}), wrapped(nil, tamperWhir{final: passFinal}), wrapped(nil, tamperWhir{chain: func(*stark.WhirChainRun) {}}), withMu(func(*stark.WhirChainRun) {}),
		stacking(func(*[]field.Fp4, *field.Fp4, [][2]field.Fp4, []field.Fp4) {})} {
		got, err := stark.Prove(pk, inputs, p, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if gb, _ := got.MarshalBinary(); string(gb) != string(wb) {
			t.Fatalf("the proof through pass-through wrappers %d differs from the backend's own", i)
		}
	}
	chained := func(f func(run *stark.WhirChainRun)) *stark.Backend { return wrapped(nil, tamperWhir{chain: f}) }
	for what, s := range map[string]*stark.Backend{
		"a constraint round's sum":       wrapped(func(polys [][]field.Fp4, _ []field.Fp4) { polys[0][1] = polys[0][1].Add(one) }, tamperWhir{}),
		"a constraint round's challenge": wrapped(func(_ [][]field.Fp4, r []field.Fp4) { r[len(r)-1] = r[len(r)-1].Add(one) }, tamperWhir{}),
		"a WHIR sumcheck's bound value":  wrapped(nil, tamperWhir{rounds: func(_ [][2]field.Fp4, _ []field.Fp, a []field.Fp4) { a[1] = a[1].Add(one) }}),
		"a WHIR folding witness":         wrapped(nil, tamperWhir{rounds: func(_ [][2]field.Fp4, ws []field.Fp, _ []field.Fp4) { ws[0] += 1 }}),
		"a WHIR out-of-domain point":     wrapped(nil, tamperWhir{commit: func(z *field.Fp4, _ *field.Fp) { *z = z.Add(one) }}),
		"a WHIR query-phase witness":     wrapped(nil, tamperWhir{commit: func(_ *field.Fp4, w *field.Fp) { *w += 1 }}),
		"a chained WHIR sum":             chained(func(run *stark.WhirChainRun) { run.Rounds[0].Polys[1][0] = run.Rounds[0].Polys[1][0].Add(one) }),
		"a chained WHIR folding witness": chained(func(run *stark.WhirChainRun) { run.Rounds[0].Witnesses[2] += 1 }),
		"a chained WHIR root":            chained(func(run *stark.WhirChainRun) { run.Rounds[0].Root[3] += 1 }),
		"a chained WHIR point":           chained(func(run *stark.WhirChainRun) { run.Rounds[0].Z = run.Rounds[0].Z.Add(one) }),
		"a chained WHIR evaluation":      chained(func(run *stark.WhirChainRun) { run.Rounds[0].Y = run.Rounds[0].Y.Add(one) }),
		"a chained query-phase witness":  chained(func(run *stark.WhirChainRun) { run.Rounds[0].QueryWitness += 1 }),
		"a chained query index":          chained(func(run *stark.WhirChainRun) { run.Rounds[0].QueryIndices[5] ^= 1 }),
		"a chained γ":                    chained(func(run *stark.WhirChainRun) { run.Rounds[0].Gamma = run.Rounds[0].Gamma.Add(one) }),
		"the last round's bound value":   chained(func(run *stark.WhirChainRun) { run.LastAlphas[0] = run.LastAlphas[0].Add(one) }),
		"a chain without its openings":   chained(func(run *stark.WhirChainRun) { run.Rounds[0].Initial = run.Rounds[0].Initial[1:] }),
		"a chain of too few rounds":      chained(func(run *stark.WhirChainRun) { run.Rounds = nil }),
		"stacking round 0's coefficient": stacking(func(c *[]field.Fp4, _ *field.Fp4, _ [][2]field.Fp4, _ []field.Fp4) { (*c)[3] = (*c)[3].Add(one) }),
		"stacking round 0's length":      stacking(func(c *[]field.Fp4, _ *field.Fp4, _ [][2]field.Fp4, _ []field.Fp4) { *c = (*c)[1:] }),
		"stacking's u_0":                 stacking(func(_ *[]field.Fp4, u0 *field.Fp4, _ [][2]field.Fp4, _ []field.Fp4) { *u0 = u0.Add(one) }),
		"a stacking round's sum": stacking(func(_ *[]field.Fp4, _ *field.Fp4, polys [][2]field.Fp4, _ []field.Fp4) {
			polys[2][1] = polys[2][1].Add(one)
		}),
		"a stacking bound value":         stacking(func(_ *[]field.Fp4, _ *field.Fp4, _ [][2]field.Fp4, u []field.Fp4) { u[1] = u[1].Add(one) }),
		"the final polynomial":           chained(func(run *stark.WhirChainRun) { run.FinalPoly[7] = run.FinalPoly[7].Add(one) }),
		"a short final polynomial":       chained(func(run *stark.WhirChainRun) { run.FinalPoly = run.FinalPoly[1:] }),
		"a final polynomial alone":       chained(func(run *stark.WhirChainRun) { run.Final = nil }),
		"μ from the device":              withMu(func(run *stark.WhirChainRun) { run.Mu = run.Mu.Add(one) }),
		"μ's witness":                    withMu(func(run *stark.WhirChainRun) { run.MuWitness += 1 }),
		"a chain without its μ":          withMu(func(run *stark.WhirChainRun) { run.MuOnDevice = false }),
		"a chain with a μ not asked for": chained(func(run *stark.WhirChainRun) { run.MuOnDevice = true }),
	} {
		if _, err := stark.Prove(pk, inputs, p, s, nil); !errors.Is(err, stark.ErrDeviceTranscript) {
			t.Errorf("%s changed: %v, want ErrDeviceTranscript", what, err)
		}
	}
	// The last round's query phase, behind the chain and on its own (FinalQueries).
	for what, f := range map[string]func(fq *stark.WhirFinalQueries){
		"witness":     func(fq *stark.WhirFinalQueries) { fq.Witness += 1 },
		"query index": func(fq *stark.WhirFinalQueries) { fq.QueryIndices[3] ^= 2 },
		"γ":           func(fq *stark.WhirFinalQueries) { fq.Gamma = fq.Gamma.Add(one) },
		"openings":    func(fq *stark.WhirFinalQueries) { fq.Codeword = fq.Codeword[1:] },
	} {
		for how, s := range map[string]*stark.Backend{
			"behind the chain": wrapped(nil, tamperWhir{chain: func(*stark.WhirChainRun) {}, final: f}),
			"on its own":       wrapped(nil, tamperWhir{final: f}),
		} {
			if _, err := stark.Prove(pk, inputs, p, s, nil); !errors.Is(err, stark.ErrDeviceTranscript) {
				t.Errorf("the last round's %s changed %s: %v, want ErrDeviceTranscript", what, how, err)
			}
		}
	}
}
