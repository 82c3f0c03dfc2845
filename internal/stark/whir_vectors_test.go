package stark_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// Section F of /work/shared/spec/poseidon2_babybear16_vectors.txt (spec A §6.9): PROVISIONAL toy
// WHIR run from the spec author's Python model (not yet confirmed against the Rust code).
// params: l_skip=2 n_stack=5 log_blowup=1 k_whir=2 num_queries=[3, 2, 2] mu_pow_bits=2
// folding_pow_bits=1 query_phase_pow_bits=3.
var (
	secFOpenings = [][]field.Fp4{ // stacking_opening[c][j]
		{{761129362, 1517708905, 817310618, 1882307968}, {392370449, 1134204732, 1970490099, 1320623171}},
		{{1898718794, 2003573700, 1395039656, 1366484532}},
	}
	secFMuPowWitness = field.Fp(0)     // whir.mu_pow_witness
	secFSumcheck     = [][2]field.Fp4{ // whir.sumcheck[i] = s(1), s(2)
		{{291558917, 1665721504, 1442929055, 1967490617}, {39624809, 1067151084, 1872171359, 1720460364}},
		{{1086931810, 228722735, 1979210706, 530698432}, {684087821, 13144870, 1332554001, 950705358}},
		{{439567297, 13479012, 532847133, 493400936}, {1754534383, 259308785, 1511614153, 115647706}},
		{{178876260, 952989435, 1087506172, 347786308}, {1423833085, 1255461897, 1405823971, 1225123186}},
		{{1078413630, 1596801900, 1500225768, 875110671}, {478426940, 757863457, 1492492308, 39401747}},
		{{496562101, 117853660, 429197525, 1077085693}, {624699627, 1190720112, 997670117, 515769755}},
	}
	secFFoldingPow  = []field.Fp{5, 2, 0, 2, 0, 0} // whir.folding_pow_witnesses
	secFCodewordCom = []poseidon2.Digest{          // whir.codeword_commit[0..1]
		{903137019, 1436920514, 1903144788, 1512915950, 1375109073, 1397759246, 1385293738, 236088520},
		{1329076439, 721641520, 1283807479, 1966115318, 1264836898, 957300646, 87424650, 1833946676},
	}
	secFOOD = []field.Fp4{ // whir.ood_value[0..1]
		{121027207, 681224496, 1642196857, 1927330400},
		{740268458, 1327129976, 168978788, 1256991589},
	}
	secFQueryPow  = []field.Fp{4, 16, 2} // whir.query_phase_pow_witnesses
	secFFinalPoly = []field.Fp4{         // whir.final_poly
		{1076175716, 1881670909, 333611629, 1052754246},
		{263370833, 554273071, 171098390, 716504069},
	}
	secFNextSample = field.Fp(1586783126) // after_whir.next_sample
	// whir.encoded.len, whir.encoded.sha256
	secFEncodedLen    = 2532
	secFEncodedSHA256 = "3f1d3964d9aa892cdf6576143ef55ddc651bcd986aa5a2708f3203ef87d0a095"
)

func secFParams() params.SystemParams {
	return params.SystemParams{LSkip: 2, NStack: 5, LogBlowup: 1, WStack: 16, Whir: params.WhirConfig{
		K: 2, Rounds: []params.WhirRoundConfig{{NumQueries: 3}, {NumQueries: 2}, {NumQueries: 2}},
		MuPowBits: 2, FoldingPowBits: 1, QueryPhasePowBits: 3,
	}}
}

func secFCommits(t *testing.T, p params.SystemParams) []stark.Committed {
	t.Helper()
	t0 := air.NewMatrix(2, 64)
	for c := 0; c < 2; c++ {
		for i := 0; i < 64; i++ {
			t0.Values[c*64+i] = field.Fp(1000*(c+1) + i)
		}
	}
	t1 := air.Matrix{Values: []field.Fp{7, 9}, Width: 1, Height: 2}
	t2 := air.NewMatrix(1, 128)
	for i := 0; i < 128; i++ {
		t2.Values[i] = field.Fp(5*i*i + 3)
	}
	c0, err := cpuref.CommitMatrices(p, []air.Matrix{t0, t1})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := cpuref.CommitMatrices(p, []air.Matrix{t2})
	if err != nil {
		t.Fatal(err)
	}
	return []stark.Committed{c0, c1}
}

func secFPoint() []field.Fp4 {
	u := []field.Fp4{{11, 12, 13, 14}}
	for j := 1; j <= 5; j++ {
		b := field.Fp(100 + 4*(j-1))
		u = append(u, field.Fp4{b, b + 1, b + 2, b + 3})
	}
	return u
}

func secFTranscript() transcript.Transcript {
	tr := transcript.New()
	for _, col := range secFOpenings {
		for _, v := range col {
			tr.ObserveExt(v)
		}
	}
	return tr
}

func TestWhirSectionFVectors(t *testing.T) {
	p := secFParams()
	commits := secFCommits(t, p)
	uCube := stark.UCube(p.LSkip, secFPoint())
	tr := secFTranscript()
	proof, err := stark.ProveWhir(cpuref.Backend{}, transcript.HostGrinder{}, &tr, p, commits, uCube)
	if err != nil {
		t.Fatal(err)
	}
	if proof.MuPowWitness != secFMuPowWitness {
		t.Errorf("mu_pow_witness = %v, want %v", proof.MuPowWitness, secFMuPowWitness)
	}
	for i, s := range secFSumcheck {
		if proof.WhirSumcheckPolys[i] != s {
			t.Errorf("sumcheck[%d] = %v, want %v", i, proof.WhirSumcheckPolys[i], s)
		}
	}
	eq := func(name string, got, want any) {
		t.Helper()
		if !deepEq(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	eq("folding_pow_witnesses", proof.FoldingPowWitnesses, secFFoldingPow)
	eq("codeword_commits", proof.CodewordCommits, secFCodewordCom)
	eq("ood_values", proof.OODValues, secFOOD)
	eq("query_phase_pow_witnesses", proof.QueryPhasePowWitnesses, secFQueryPow)
	eq("final_poly", proof.FinalPoly, secFFinalPoly)
	if got := tr.Sample(); got != secFNextSample {
		t.Errorf("after_whir.next_sample = %v, want %v", got, secFNextSample)
	}

	// whir.encoded.sha256: the whole proof (opened rows and Merkle paths included) in the §7.6
	// encoding (EncodeWhirProof is the codec's).
	enc, err := stark.EncodeWhirProof(&proof)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(enc)); len(enc) != secFEncodedLen || got != secFEncodedSHA256 {
		t.Errorf("encoded WHIR proof: %d bytes sha256 %s, want %d bytes %s", len(enc), got, secFEncodedLen, secFEncodedSHA256)
	}

	// The verifier gets the decoded proof.
	lim := stark.LimitsFor(p)
	dec, err := stark.DecodeWhirProof(enc, &lim)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	roots := []stark.Digest{commits[0].Root(), commits[1].Root()}
	vt := secFTranscript()
	if err := stark.VerifyWhir(&vt, p, roots, secFOpenings, uCube, dec); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !vt.Same(&tr) {
		// tr sampled once more above
		vt.Sample()
		if !vt.Same(&tr) {
			t.Error("verifier transcript differs from the prover's")
		}
	}
	// A tampered opening (same transcript) fails the final check.
	bad := [][]field.Fp4{append([]field.Fp4(nil), secFOpenings[0]...), secFOpenings[1]}
	bad[0][1] = bad[0][1].AddBase(1)
	vt = secFTranscript()
	if err := stark.VerifyWhir(&vt, p, roots, bad, uCube, dec); !errors.Is(err, stark.ErrWhirFinal) {
		t.Fatalf("tampered opening: got %v, want ErrWhirFinal", err)
	}
}
