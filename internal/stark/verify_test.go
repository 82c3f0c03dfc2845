package stark_test

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// tamperStatement is a multi-AIR statement with interactions, a preprocessed and a cached trace,
// heights 4..16: every stage and every proof list is non-trivial.
func tamperStatement() ([]air.Air, []stark.AirProvingInput) {
	ins := append([]testair.Instance{testair.FibonacciSelector(7, 3, 16)}, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.Fibonacci(0, 1, 4))
	return statement(ins)
}

func decodeFresh(t *testing.T, p params.SystemParams, b []byte) *stark.Proof {
	t.Helper()
	lim := stark.LimitsFor(p)
	proof, err := stark.DecodeProof(b, &lim)
	if err != nil {
		t.Fatal(err)
	}
	return proof
}

func bump(x *field.Fp)      { *x = x.Add(field.One) }
func bump4(x *field.Fp4)    { *x = x.Add(field.Fp4One) }
func bumpD(d *stark.Digest) { d[0] = d[0].Add(field.One) }

func TestVerifyRejectsTampering(t *testing.T) {
	p := presetParams(t, "test")
	airs, inputs := tamperStatement()
	pr := proveOK(t, p, airs, inputs)
	vk := pr.pk.VK
	if err := stark.Verify(vk, decodeFresh(t, p, pr.enc), p); err != nil {
		t.Fatalf("untampered proof: %v", err)
	}
	cases := []struct {
		name   string
		tamper func(pf *stark.Proof)
		want   error
	}{
		// preamble
		{"common main commit", func(pf *stark.Proof) { bumpD(&pf.CommonMainCommit) }, nil},
		{"cached commitment", func(pf *stark.Proof) { bumpD(&pf.TraceVData[2].CachedCommitments[0]) }, nil},
		{"public value", func(pf *stark.Proof) { bump(&pf.PublicValues[0][1]) }, nil},
		{"log height", func(pf *stark.Proof) { pf.TraceVData[3].LogHeight++ }, nil},
		{"preprocessed log height", func(pf *stark.Proof) { pf.TraceVData[0].LogHeight-- }, stark.ErrShape},
		{"log height > m", func(pf *stark.Proof) { pf.TraceVData[3].LogHeight = 40 }, stark.ErrShape},
		{"absent", func(pf *stark.Proof) { pf.TraceVData[3] = nil }, nil},
		{"all absent", func(pf *stark.Proof) {
			for i := range pf.TraceVData {
				pf.TraceVData[i] = nil
				pf.PublicValues[i] = nil
			}
		}, stark.ErrNoTraces},
		{"public count", func(pf *stark.Proof) { pf.PublicValues[0] = pf.PublicValues[0][:2] }, stark.ErrShape},
		{"AIR count", func(pf *stark.Proof) { pf.TraceVData = pf.TraceVData[:3] }, stark.ErrShape},
		// GKR
		{"logup pow", func(pf *stark.Proof) { bump(&pf.GKR.LogupPowWitness) }, stark.ErrGkr},
		{"q0 claim", func(pf *stark.Proof) { bump4(&pf.GKR.Q0Claim) }, stark.ErrGkr},
		{"layer claim", func(pf *stark.Proof) { bump4(&pf.GKR.ClaimsPerLayer[1].QXi1) }, stark.ErrGkr},
		{"gkr sumcheck", func(pf *stark.Proof) { bump4(&pf.GKR.SumcheckPolys[2][1][2]) }, stark.ErrGkr},
		{"gkr layers", func(pf *stark.Proof) { pf.GKR.ClaimsPerLayer = pf.GKR.ClaimsPerLayer[1:] }, stark.ErrGkr},
		// batch constraint sumcheck
		{"numerator term", func(pf *stark.Proof) { bump4(&pf.BatchConstraint.NumeratorTermPerAir[1]) }, stark.ErrBatchConstraint},
		{"denominator term", func(pf *stark.Proof) { bump4(&pf.BatchConstraint.DenominatorTermPerAir[0]) }, stark.ErrBatchConstraint},
		{"univariate", func(pf *stark.Proof) { bump4(&pf.BatchConstraint.UnivariateRoundCoeffs[3]) }, stark.ErrBatchConstraint},
		{"round poly", func(pf *stark.Proof) { bump4(&pf.BatchConstraint.SumcheckRoundPolys[1][2]) }, stark.ErrBatchConstraint},
		{"column opening", func(pf *stark.Proof) { bump4(&pf.BatchConstraint.ColumnOpenings[0][1][0]) }, nil},
		{"column opening (last part)", func(pf *stark.Proof) {
			o := pf.BatchConstraint.ColumnOpenings
			part := o[len(o)-1][len(o[len(o)-1])-1]
			bump4(&part[len(part)-1])
		}, nil},
		{"column openings shape", func(pf *stark.Proof) {
			pf.BatchConstraint.ColumnOpenings[1][0] = pf.BatchConstraint.ColumnOpenings[1][0][1:]
		}, stark.ErrShape},
		// stacking
		{"stacking univariate", func(pf *stark.Proof) { bump4(&pf.Stacking.UnivariateRoundCoeffs[0]) }, stark.ErrStacking},
		{"stacking round", func(pf *stark.Proof) { bump4(&pf.Stacking.SumcheckRoundPolys[3][1]) }, stark.ErrStacking},
		{"stacking opening", func(pf *stark.Proof) { bump4(&pf.Stacking.StackingOpenings[0][0]) }, nil},
		{"stacking opening (cached)", func(pf *stark.Proof) { bump4(&pf.Stacking.StackingOpenings[2][0]) }, nil},
		{"stacking shape", func(pf *stark.Proof) { pf.Stacking.StackingOpenings = pf.Stacking.StackingOpenings[1:] }, stark.ErrShape},
		// WHIR
		{"mu pow", func(pf *stark.Proof) { bump(&pf.Whir.MuPowWitness) }, nil},
		{"whir sumcheck", func(pf *stark.Proof) { bump4(&pf.Whir.WhirSumcheckPolys[1][0]) }, nil},
		{"codeword commit", func(pf *stark.Proof) { bumpD(&pf.Whir.CodewordCommits[0]) }, nil},
		{"ood value", func(pf *stark.Proof) { bump4(&pf.Whir.OODValues[0]) }, nil},
		{"opened row", func(pf *stark.Proof) { bump(&pf.Whir.InitialRoundOpenedRows[1][0][1][0]) }, stark.ErrWhir},
		{"merkle proof", func(pf *stark.Proof) { bumpD(&pf.Whir.InitialRoundMerkleProofs[0][2][1]) }, stark.ErrWhir},
		{"codeword value", func(pf *stark.Proof) { bump4(&pf.Whir.CodewordOpenedValues[0][0][0]) }, stark.ErrWhir},
		{"final poly", func(pf *stark.Proof) { bump4(&pf.Whir.FinalPoly[0]) }, nil},
		{"whir shape", func(pf *stark.Proof) { pf.Whir.FinalPoly = pf.Whir.FinalPoly[1:] }, stark.ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pf := decodeFresh(t, p, pr.enc)
			c.tamper(pf)
			err := stark.Verify(vk, pf, p)
			if err == nil {
				t.Fatal("tampered proof verifies")
			}
			if errors.Is(err, stark.ErrVerifierInternal) {
				t.Fatalf("verifier fault: %v", err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("error %v, want one wrapping %v", err, c.want)
			}
			t.Logf("%v", err)
		})
	}
	// Parameters and key mismatches.
	if err := stark.Verify(vk, decodeFresh(t, p, pr.enc), presetParams(t, "app-100bit")); !errors.Is(err, stark.ErrParamsMismatch) {
		t.Errorf("other parameters: %v", err)
	}
	other, _ := tamperStatement()
	other[3] = testair.SumAir{W: 2}
	otherPK, err := stark.Keygen(p, other, nil, cpuref.New())
	if err == nil {
		if err := stark.Verify(otherPK.VK, decodeFresh(t, p, pr.enc), p); err == nil {
			t.Error("proof verifies under another key")
		}
	}
}

// FuzzDecodeVerify feeds whole encoded proofs (seeded with a small valid proof) to the decoder
// and the verifier: nothing may panic, and a decoded proof either verifies or is rejected with a
// stage error.
func FuzzDecodeVerify(f *testing.F) {
	p := presetParams(f, "test")
	airs, inputs := statement(append([]testair.Instance{testair.Fibonacci(0, 1, 4)}, testair.InteractionsFixture11(false)...))
	pr := proveOK(f, p, airs, inputs)
	f.Add(pr.enc)
	f.Add(pr.enc[:len(pr.enc)/2])
	vk := pr.pk.VK
	lim := stark.LimitsFor(p)
	f.Fuzz(func(t *testing.T, b []byte) {
		proof, err := stark.DecodeProof(b, &lim)
		if err != nil {
			return
		}
		if err := stark.Verify(vk, proof, p); errors.Is(err, stark.ErrVerifierInternal) {
			t.Fatalf("verifier fault: %v", err)
		}
	})
}
