package stark_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

func presetParams(t testing.TB, name string) params.SystemParams {
	t.Helper()
	p, _, err := params.Preset(name, params.DefaultAppLogStackedHeight)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// statement turns test-AIR instances into a key's AIRs and proving inputs (all present).
func statement(ins []testair.Instance) ([]air.Air, []stark.AirProvingInput) {
	airs := make([]air.Air, len(ins))
	inputs := make([]stark.AirProvingInput, len(ins))
	for i, in := range ins {
		airs[i] = in.Air
		h := in.Height()
		inputs[i] = stark.AirProvingInput{Common: (in.Trace.CommonMain), Public: append([]field.Fp(nil), in.Trace.Public...)}
		inputs[i].Common.Height = h
		for _, c := range in.Trace.CachedMains {
			inputs[i].Cached = append(inputs[i].Cached, (c))
		}
	}
	return airs, inputs
}

func keccakStatement(perms int) ([]air.Air, []stark.AirProvingInput) {
	h, cols := keccakf.GenerateTrace(keccakf.RandomInputs(42, perms))
	return []air.Air{keccakf.Air{}}, []stark.AirProvingInput{{Common: air.Matrix{Values: cols, Width: keccakf.NumCols, Height: h}}}
}

type proved struct {
	p     params.SystemParams
	pk    *stark.ProvingKey
	proof *stark.Proof
	enc   []byte
}

func proveOK(t testing.TB, p params.SystemParams, airs []air.Air, inputs []stark.AirProvingInput) *proved {
	t.Helper()
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatalf("keygen: %v", err)
	}
	proof, err := stark.Prove(pk, inputs, p, cpuref.New(), nil)
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	enc, err := proof.MarshalBinary()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return &proved{p: p, pk: pk, proof: proof, enc: enc}
}

// verifyEncoded decodes b with the parameters' limits and verifies it against a key rebuilt from
// the AIRs (as a verifier would).
func verifyEncoded(t testing.TB, p params.SystemParams, airs []air.Air, b []byte) error {
	t.Helper()
	lim := stark.LimitsFor(p)
	proof, err := stark.DecodeProof(b, &lim)
	if err != nil {
		return err
	}
	vkpk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatalf("verifier keygen: %v", err)
	}
	return stark.Verify(vkpk.VK, proof, p)
}

func endToEnd(t *testing.T, p params.SystemParams, airs []air.Air, inputs []stark.AirProvingInput) *proved {
	t.Helper()
	start := time.Now()
	pr := proveOK(t, p, airs, inputs)
	mid := time.Now()
	if err := verifyEncoded(t, p, airs, pr.enc); err != nil {
		t.Fatalf("verify: %v", err)
	}
	t.Logf("prove %v, verify %v, proof %d bytes", mid.Sub(start).Round(time.Millisecond), time.Since(mid).Round(time.Millisecond), len(pr.enc))
	return pr
}

func TestProveVerifyTestAirs(t *testing.T) {
	p := presetParams(t, "test")
	cases := []struct {
		name string
		ins  []testair.Instance
	}{
		{"fibonacci", []testair.Instance{testair.Fibonacci(0, 1, 16)}},
		{"interactions", testair.InteractionsFixture11(false)},
		{"interaction-pair", testair.InteractionPair(8, 3)},
		{"cached", testair.InteractionsFixture11(true)},
		{"preprocessed", []testair.Instance{testair.FibonacciSelector(7, 3, 16)}},
		{"preprocessed-cached", []testair.Instance{testair.PreprocessedCached(2, 16)}},
		{"short-traces", testair.ShortTraces()},
		{"mixture", testair.Mixture(16)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			airs, inputs := statement(c.ins)
			endToEnd(t, p, airs, inputs)
		})
	}
}

func TestProveVerifyAbsentAir(t *testing.T) {
	p := presetParams(t, "test")
	airs, inputs := statement(append([]testair.Instance{testair.Fibonacci(0, 1, 8)}, testair.InteractionPair(4, 1)...))
	airs = append(airs, testair.FibonacciAir{})
	inputs = append(inputs, stark.AirProvingInput{}) // absent
	pr := endToEnd(t, p, airs, inputs)
	if pr.proof.TraceVData[3] != nil {
		t.Fatal("absent AIR has trace data")
	}
}

func TestProveVerifyKeccak(t *testing.T) {
	airs, inputs := keccakStatement(2)
	endToEnd(t, presetParams(t, "test"), airs, inputs)
}

func TestProveVerifyKeccakApp100(t *testing.T) {
	if testing.Short() {
		t.Skip("app-100bit keccak proof: slow on few cores")
	}
	airs, inputs := keccakStatement(2)
	endToEnd(t, presetParams(t, "app-100bit"), airs, inputs)
}

func TestProveDeterministic(t *testing.T) {
	p := presetParams(t, "test")
	airs, inputs := statement(testair.Mixture(8))
	a := proveOK(t, p, airs, inputs)
	b := proveOK(t, p, airs, inputs)
	if !bytes.Equal(a.enc, b.enc) {
		t.Fatal("two proofs of the same statement differ")
	}
}

// invalid statements: the checker refuses them; with the checker off, either the prover fails
// or the proof does not verify.
func TestProveRefusesInvalidTraces(t *testing.T) {
	p := presetParams(t, "test")
	cases := []struct {
		name   string
		ins    func() []testair.Instance
		breaks func(inputs []stark.AirProvingInput)
		want   string
	}{
		{"constraint", func() []testair.Instance { return []testair.Instance{testair.Fibonacci(0, 1, 16)} },
			func(in []stark.AirProvingInput) { in[0].Common.Values[5] = in[0].Common.Values[5].Add(field.One) }, "row 4"},
		{"public-value", func() []testair.Instance { return []testair.Instance{testair.Fibonacci(0, 1, 16)} },
			func(in []stark.AirProvingInput) { in[0].Public[2] = in[0].Public[2].Add(field.One) }, "row 15"},
		{"bus", func() []testair.Instance { return testair.InteractionPair(8, 5) },
			func(in []stark.AirProvingInput) {
				// receiver count column (column 0): one more on row 0
				in[1].Common.Values[0] = in[1].Common.Values[0].Add(field.One)
			}, "interactions do not balance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			airs, inputs := statement(c.ins())
			c.breaks(inputs)
			pk, err := stark.Keygen(p, airs, nil, cpuref.New())
			if err != nil {
				t.Fatal(err)
			}
			_, err = stark.Prove(pk, inputs, p, cpuref.New(), nil)
			var tce *stark.TraceCheckError
			if !errors.As(err, &tce) || !errors.Is(err, stark.ErrInvalidTrace) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prove: %v; want a TraceCheckError mentioning %q", err, c.want)
			}
			t.Logf("refused: %v", err)
			proof, err := stark.Prove(pk, inputs, p, cpuref.New(), &stark.ProveOptions{CheckConstraints: false})
			if err != nil {
				t.Logf("prover failed without the checker: %v", err)
				return
			}
			enc, err := proof.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			err = verifyEncoded(t, p, airs, enc)
			if err == nil {
				t.Fatal("forged proof of an invalid trace verifies")
			}
			t.Logf("forged proof rejected: %v", err)
		})
	}
}

func TestProveInputErrors(t *testing.T) {
	p := presetParams(t, "test")
	airs, inputs := statement([]testair.Instance{testair.Fibonacci(0, 1, 16)})
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	bad := func(name string, in []stark.AirProvingInput, q params.SystemParams) {
		t.Helper()
		if _, err := stark.Prove(pk, in, q, cpuref.New(), nil); !errors.Is(err, stark.ErrProveInput) {
			t.Errorf("%s: %v, want ErrProveInput", name, err)
		}
	}
	bad("no inputs", nil, p)
	bad("absent", []stark.AirProvingInput{{}}, p)
	short := inputs[0]
	short.Public = short.Public[:2]
	bad("public count", []stark.AirProvingInput{short}, p)
	odd := inputs[0]
	odd.Common = air.Matrix{Values: odd.Common.Values[:6], Width: 2, Height: 3}
	bad("height", []stark.AirProvingInput{odd}, p)
	bad("params", inputs, presetParams(t, "app-100bit"))
}

// grindingCommitter is cpuref's committer with CommitGrind (stark.CommitGrinder): the root and
// tail observed on a copy of the transcript, the witness found by the host grinder, plus delta (a
// device's wrong answer).
type grindingCommitter struct {
	stark.Committer
	delta field.Fp
	calls *int
}

func (c grindingCommitter) CommitGrind(p params.SystemParams, traces []stark.Trace, tr *transcript.Transcript, tail []field.Fp, bits int, behind func()) (stark.Committed, field.Fp, bool, error) {
	cm, err := c.Commit(p, traces)
	if err != nil {
		return nil, 0, false, err
	}
	if behind != nil {
		behind()
	}
	*c.calls++
	t := *tr
	t.ObserveDigest(cm.Root())
	for _, v := range tail {
		t.Observe(v)
	}
	st, ai, _ := t.State()
	w, err := transcript.HostGrinder{}.FindWitness(context.Background(), st, ai, bits)
	if err != nil {
		return nil, 0, false, err
	}
	return cm, w.Add(c.delta), true, nil
}

// TestProveWithCommitGrinder: a committer that finds the LogUp witness behind the commitment
// gives cpuref's proof byte for byte (public values, optional and preprocessed AIRs in the
// preamble's tail); a wrong witness fails the proof; with cached main traces it is not asked.
func TestProveWithCommitGrinder(t *testing.T) {
	p := presetParams(t, "test")
	p.Logup.PowBits = 6
	for name, ins := range map[string][]testair.Instance{
		"interaction pair": testair.InteractionPair(16, 7),
		"mixture":          testair.Mixture(16),
		"fibonacci":        {testair.Fibonacci(1, 1, 16), testair.FibonacciSelector(2, 3, 8)},
		"cached":           {testair.PreprocessedCached(2, 16)},
	} {
		airs, inputs := statement(ins)
		pk, err := stark.Keygen(p, airs, nil, cpuref.New())
		if err != nil {
			t.Fatal(err)
		}
		want, err := stark.Prove(pk, inputs, p, cpuref.New(), nil)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		with := func(delta field.Fp) *stark.Backend {
			be := cpuref.New()
			be.Committer = grindingCommitter{Committer: be.Committer, delta: delta, calls: &calls}
			return be
		}
		got, err := stark.Prove(pk, inputs, p, with(0), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wb, _ := want.MarshalBinary()
		gb, _ := got.MarshalBinary()
		if !bytes.Equal(gb, wb) {
			t.Fatalf("%s: the proof with the witness found behind the commitment differs from cpuref's", name)
		}
		cached := false
		for _, in := range inputs {
			cached = cached || len(in.Cached) > 0
		}
		if (calls == 0) != cached {
			t.Fatalf("%s: CommitGrind called %d times", name, calls)
		}
		// A wrong witness fails the transcript's check, or passes it (2^−6) and changes the proof.
		if bad, err := stark.Prove(pk, inputs, p, with(1), nil); !cached && err == nil {
			if bb, _ := bad.MarshalBinary(); bytes.Equal(bb, wb) {
				t.Errorf("%s: a wrong witness accepted", name)
			}
		}
	}
}

// preparingGkr is cpuref's GKR backend with PrepareGkr (stark.GkrPreparer): Start builds the
// prover with the prepared arguments. failPrepare makes PrepareGkr fail; counts records calls.
type preparingGkr struct {
	stark.GkrBackend
	failPrepare bool
	counts      *prepCounts
}

type prepCounts struct{ prepared, started, released, direct int }

func (g preparingGkr) NewGkrProver(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
	g.counts.direct++
	return g.GkrBackend.NewGkrProver(p, traces, layout, alpha, beta)
}

func (g preparingGkr) PrepareGkr(p params.SystemParams, traces []*stark.AirInput, layout *stark.GkrLayout) (stark.PreparedGkr, error) {
	if g.failPrepare {
		return nil, errors.New("no memory behind the commitment")
	}
	g.counts.prepared++
	return &preparedGkr{g: g, p: p, traces: traces, layout: layout}, nil
}

type preparedGkr struct {
	g       preparingGkr
	p       params.SystemParams
	traces  []*stark.AirInput
	layout  *stark.GkrLayout
	started bool
}

func (pg *preparedGkr) Start(alpha, beta field.Fp4) (stark.GkrProver, error) {
	if pg.started {
		return nil, errors.New("started twice")
	}
	pg.started = true
	pg.g.counts.started++
	return pg.g.GkrBackend.NewGkrProver(pg.p, pg.traces, pg.layout, alpha, beta)
}

func (pg *preparedGkr) Release() {
	if !pg.started {
		pg.started = true
		pg.g.counts.released++
	}
}

// TestProveWithPreparedGkr: a GKR backend prepared behind the commitment (GkrPreparer, through
// CommitGrinder's behind) gives cpuref's proof byte for byte and is started once; without
// interactions or with cached main traces nothing is prepared; a failed preparation falls back
// to NewGkrProver; a proof that fails after the preparation releases it.
func TestProveWithPreparedGkr(t *testing.T) {
	p := presetParams(t, "test")
	p.Logup.PowBits = 6
	for _, tc := range []struct {
		name         string
		ins          []testair.Instance
		interactions bool
	}{
		{"interaction pair", testair.InteractionPair(16, 7), true},
		{"mixture", testair.Mixture(16), true},
		{"fibonacci", []testair.Instance{testair.Fibonacci(1, 1, 16)}, false},
	} {
		name, interactions := tc.name, tc.interactions
		airs, inputs := statement(tc.ins)
		pk, err := stark.Keygen(p, airs, nil, cpuref.New())
		if err != nil {
			t.Fatal(err)
		}
		want, err := stark.Prove(pk, inputs, p, cpuref.New(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := want.MarshalBinary()
		cached := false // cached main traces: no CommitGrind, nothing prepared
		for _, in := range inputs {
			cached = cached || len(in.Cached) > 0
		}
		for _, failPrepare := range []bool{false, true} {
			calls := 0
			c := &prepCounts{}
			be := cpuref.New()
			be.Committer = grindingCommitter{Committer: be.Committer, calls: &calls}
			be.Gkr = preparingGkr{GkrBackend: be.Gkr, failPrepare: failPrepare, counts: c}
			got, err := stark.Prove(pk, inputs, p, be, nil)
			if err != nil {
				t.Fatalf("%s (failed preparation %v): %v", name, failPrepare, err)
			}
			if gb, _ := got.MarshalBinary(); !bytes.Equal(gb, wb) {
				t.Fatalf("%s (failed preparation %v): the proof differs from cpuref's", name, failPrepare)
			}
			wantPrep := interactions && !cached && !failPrepare
			if (c.prepared == 1) != wantPrep || c.started != c.prepared || c.released != 0 || (c.direct == 1) != (interactions && !wantPrep) {
				t.Fatalf("%s (failed preparation %v): prepared %d, started %d, released %d, NewGkrProver %d", name, failPrepare, c.prepared, c.started, c.released, c.direct)
			}
		}
		if !interactions || cached {
			continue
		}
		// A wrong witness fails the proof at the GKR stage's check, before Start: the prepared
		// prover is released.
		c := &prepCounts{}
		be := cpuref.New()
		calls := 0
		be.Committer = grindingCommitter{Committer: be.Committer, delta: 1, calls: &calls}
		be.Gkr = preparingGkr{GkrBackend: be.Gkr, counts: c}
		if _, err := stark.Prove(pk, inputs, p, be, nil); err == nil {
			continue // the wrong witness passed the 6-bit check (2^−6): nothing to see
		}
		if c.prepared != 1 || c.started+c.released != 1 {
			t.Fatalf("%s: a failed proof: prepared %d, started %d, released %d", name, c.prepared, c.started, c.released)
		}
	}
}
