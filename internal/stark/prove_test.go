package stark_test

import (
	"bytes"
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
