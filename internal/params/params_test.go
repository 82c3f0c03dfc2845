package params

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func rounds(p SystemParams) []int {
	var r []int
	for _, x := range p.Whir.Rounds {
		r = append(r, x.NumQueries)
	}
	return r
}

func mustApp(t *testing.T, h int) SystemParams {
	t.Helper()
	p, err := AppParams(h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApp21 checks every value of the §4.4 app(21) tables.
func TestApp21(t *testing.T) {
	p := mustApp(t, 21)
	want := SystemParams{LSkip: 4, NStack: 17, WStack: 2048, LogBlowup: 1,
		Whir: WhirConfig{K: 4, Rounds: []WhirRoundConfig{{193}, {88}, {81}}, MuPowBits: 15, QueryPhasePowBits: 20,
			FoldingPowBits: 5, Proximity: UniqueDecoding()},
		Logup:               LogUpSecurityParameters{MaxInteractionCount: 2013265921, LogMaxMessageLength: 7, PowBits: 18},
		MaxConstraintDegree: 3}
	if !reflect.DeepEqual(p, want) || !p.Equal(want) {
		t.Fatalf("app(21) = %+v, want %+v", p, want)
	}
	if p.LogStackedHeight() != 21 || p.NumWhirRounds() != 3 || p.NumWhirSumcheckRounds() != 12 ||
		p.LogFinalPolyLen() != 9 || p.KWhir() != 4 || p.LogupPowBits() != 18 {
		t.Fatalf("derived values wrong: m=%d R=%d Rk=%d lf=%d", p.LogStackedHeight(), p.NumWhirRounds(), p.NumWhirSumcheckRounds(), p.LogFinalPolyLen())
	}
	type row struct {
		lir          int
		q, quot      float64
		nq, dom, idx int
	}
	rows := []row{{1, 0.4150375, 192.754, 193, 22, 18}, {4, 0.9125372, 87.668, 88, 21, 17}, {7, 0.9887727, 80.908, 81, 20, 16}}
	tab := p.RoundTable()
	if len(tab) != 3 {
		t.Fatalf("table has %d rows", len(tab))
	}
	for i, w := range rows {
		g := tab[i]
		if g.LogInvRate != w.lir || math.Abs(g.PerQueryBits-w.q) > 5e-8 || math.Abs(80/g.PerQueryBits-w.quot) > 5e-4 ||
			g.NumQueries != w.nq || g.RSDomainLogSize != w.dom || g.QueryIndexBits != w.idx || g.MerkleDepth != w.idx ||
			g.QueryPowBits != 20 || g.FoldingPowBits != 5 || g.Final != (i == 2) || g.Regime != "unique" {
			t.Errorf("round %d: got %+v, want %+v", i, g, w)
		}
	}
	// sec0 of the LogUp pow computation.
	if got := logupSoundness(BabyBearOrder, 7, 0); math.Abs(got-84.72067) > 5e-6 {
		t.Errorf("sec0 = %v, want 84.72067", got)
	}
}

// TestPresetRows checks the "other presets" table of §4.4.
func TestPresetRows(t *testing.T) {
	cases := []struct {
		name                          string
		h                             int
		lb, lSkip, nStack, wStack     int
		fold, mu, query               int
		prox                          WhirProximityStrategy
		rounds                        []int
		logFinal, logupPow, maxDegree int
	}{
		{"app-100bit", 24, 1, 4, 20, 2048, 5, 15, 20, UniqueDecoding(), []int{193, 88, 81, 81}, 8, 18, 3},
		// OpenVM's keccakf example (v2.0.1): app_params_with_100_bits_security(21).
		{"openvm-keccakf", 0, 1, 4, 17, 2048, 5, 15, 20, UniqueDecoding(), []int{193, 88, 81}, 9, 18, 3},
		{"leaf", 0, 2, 4, 17, 2048, 4, 13, 20, UniqueDecoding(), []int{118, 84, 81}, 9, 18, 4},
		{"internal", 0, 3, 2, 17, 512, 18, 20, 20, ListDecoding(2), []int{68, 30, 20}, 7, 19, 4},
		{"root", 0, 4, 2, 18, 18, 15, 15, 15, ListDecoding(1), []int{61, 30, 20}, 8, 18, 4},
		{"hook", 0, 2, 2, 18, 80, 12, 11, 20, ListDecoding(1), []int{193, 42, 24}, 8, 18, 4},
		{"test", 0, 1, 2, 8, 4096, 2, 3, 1, SplitUniqueList(3, 1), []int{10, 4, 2}, 1, 2, 3},
	}
	for _, c := range cases {
		p, info, err := Preset(c.name, c.h)
		if err != nil {
			t.Fatal(err)
		}
		if p.LogBlowup != c.lb || p.LSkip != c.lSkip || p.NStack != c.nStack || p.WStack != c.wStack ||
			p.Whir.FoldingPowBits != c.fold || p.Whir.MuPowBits != c.mu || p.Whir.QueryPhasePowBits != c.query ||
			p.Whir.Proximity != c.prox || !slices.Equal(rounds(p), c.rounds) || p.LogFinalPolyLen() != c.logFinal ||
			p.Logup.PowBits != c.logupPow || p.MaxConstraintDegree != c.maxDegree {
			t.Errorf("%s: got %+v", c.name, p)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", c.name, err)
		}
		s, err := Calculate(p, info.Bounds.Inputs(p))
		if err != nil {
			t.Fatal(err)
		}
		if float64(s.TotalBits) < float64(info.SecurityBits) {
			t.Errorf("%s: total %v < target %d", c.name, s.TotalBits, info.SecurityBits)
		}
		wantErr := info.SecurityBits < 100
		if err := CheckSecurity(s, info.SecurityBits, false); (err != nil) != wantErr {
			t.Errorf("%s: CheckSecurity = %v", c.name, err)
		}
		if err := CheckSecurity(s, info.SecurityBits, true); err != nil {
			t.Errorf("%s: CheckSecurity(allow) = %v", c.name, err)
		}
	}
	if p, _, _ := Preset("openvm-keccakf", 0); !p.Equal(OpenVMKeccakfParams()) {
		t.Error("openvm-keccakf preset")
	}
	if p, _, _ := Preset("test", 0); !p.Equal(TestParamsSmall(2, 8, 3)) {
		t.Error("test preset is not test_system_params_small(2, 8, 3)")
	}
	if !slices.Equal(PresetNames(), []string{"app-100bit", "openvm-keccakf", "leaf", "internal", "root", "hook", "test"}) {
		t.Errorf("PresetNames = %v", PresetNames())
	}
	for _, h := range []int{10, 25, -1} {
		if _, _, err := Preset("app-100bit", h); err == nil {
			t.Errorf("app-100bit(%d) accepted", h)
		}
	}
	if _, _, err := Preset("nope", 21); err == nil || !strings.Contains(err.Error(), "app-100bit") {
		t.Errorf("unknown preset: %v", err)
	}
	for h := 11; h <= 24; h++ {
		if err := mustApp(t, h).Validate(); err != nil {
			t.Errorf("app(%d): %v", h, err)
		}
	}
}

func near(t *testing.T, what string, got Bits, want, tol float64) {
	t.Helper()
	if math.Abs(float64(got)-want) > tol {
		t.Errorf("%s = %.6f, want %.2f (±%g)", what, float64(got), want, tol)
	}
}

// TestSoundnessWorkedExample checks the §4.6 table to its printed precision (half a unit of 0.01).
func TestSoundnessWorkedExample(t *testing.T) {
	p := mustApp(t, 21)
	in := AppVMBounds.Inputs(p)
	if in != AppVMInputs {
		t.Fatalf("AppVMBounds.Inputs(app21) = %+v, want %+v", in, AppVMInputs)
	}
	s, err := Calculate(p, in)
	if err != nil {
		t.Fatal(err)
	}
	const tol = 0.005
	near(t, "logup", s.LogupBits, 102.72, tol)
	near(t, "gkr sumcheck", s.GkrSumcheckBits, 122.04, tol)
	near(t, "gkr batching", s.GkrBatchingBits, 123.63, tol)
	near(t, "zerocheck", s.ZerocheckSumcheckBits, 117.72, tol)
	near(t, "constraint batching", s.ConstraintBatchingBits, 111.33, tol)
	near(t, "stacked reduction", s.StackedReductionBits, 107.75, tol)
	near(t, "μ batching", s.Whir.MuBatchingBits, 105.63, tol)
	near(t, "min fold", s.Whir.FoldRbrBits, 107.63, tol)
	near(t, "round 0 first prox", s.Whir.Rounds[0].FirstProximityGapBits, 107.63, tol)
	for r, w := range []float64{100.10, 100.30, 100.09} {
		near(t, "shift", s.Whir.Rounds[r].ShiftBits, w, tol)
	}
	near(t, "ood 0", *s.Whir.Rounds[0].OODBits, 107.63, tol)
	near(t, "ood 1", *s.Whir.Rounds[1].OODBits, 111.63, tol)
	if s.Whir.Rounds[2].OODBits != nil {
		t.Error("final round has an OOD term")
	}
	near(t, "total", s.TotalBits, 100.09, tol)
	near(t, "whir", s.WhirBits, 100.09, tol)
	if s.Weakest != "whir round 2 query⊕γ" {
		t.Errorf("weakest = %q", s.Weakest)
	}
	// Fixed points of the formulas.
	near(t, "bF", Bits(ChallengeFieldBits), 123.627562385, 1e-9)
	near(t, "eff_pow(20)", Bits(EffectivePowBits(20)), 19.99925, 5e-6)
	if EffectivePowBits(0) != 0 {
		t.Error("eff_pow(0) ≠ 0")
	}
	if err := CheckSecurity(s, 100, false); err != nil {
		t.Error(err)
	}

	p24 := mustApp(t, 24)
	s24, err := Calculate(p24, AppVMBounds.Inputs(p24))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "app(24) total", s24.TotalBits, 100.09, tol)
	near(t, "app(24) μ", s24.Whir.MuBatchingBits, 102.63, tol)

	j, err := json.Marshal(s)
	if err != nil || !bytes.Contains(j, []byte(`"total_bits":100.0898`)) {
		t.Errorf("json: %v %s", err, j)
	}
}

func TestCombineAndBits(t *testing.T) {
	if got := CombineBits(10, 10); got != 9 {
		t.Errorf("combine(10,10) = %v", got)
	}
	if got := CombineBits(math.Inf(1), 7); got != 7 {
		t.Errorf("combine(inf,7) = %v", got)
	}
	j, _ := json.Marshal([]Bits{Bits(math.Inf(1)), Bits(math.Inf(-1)), Bits(math.NaN()), 1.5})
	if string(j) != `["+Inf","-Inf",null,1.5]` {
		t.Errorf("Bits json = %s", j)
	}
	// m = 1 at rate 1/2 is outside the BCHKS25 regime: no security.
	if e, l := ProximityGap(ProximityRegime{List: true, M: 1}, 10, 1, 2); !math.IsInf(e, -1) || !math.IsInf(l, 1) {
		t.Errorf("invalid regime: %v %v", e, l)
	}
}

// TestCeilQuotientBoundary: the builder's ceil has no epsilon. No preset quotient lands within 1e-12
// of an integer (checked below), so the helper is tested at exact integers and their neighbours.
func TestCeilQuotientBoundary(t *testing.T) {
	cases := []struct {
		num, den float64
		want     int
	}{
		{80, 0.5, 160},                    // exact integer quotient
		{80, math.Nextafter(0.5, 1), 160}, // quotient just below 160
		{80, math.Nextafter(0.5, 0), 161}, // quotient just above 160
		{81, 1, 81},
		{math.Nextafter(81, 0), 1, 81},
		{math.Nextafter(81, 100), 1, 82},
		{0, 0.3, 0},
		{0, 0, 0},           // NaN → 0, like Rust's `as usize`
		{5, 0, math.MaxInt}, // +Inf saturates
	}
	for _, c := range cases {
		if got := ceilQuotientToInt(c.num, c.den); got != c.want {
			t.Errorf("ceil(%v/%v) = %d, want %d", c.num, c.den, got, c.want)
		}
	}
	// Through the builder: a regime whose per-query bits are exactly 0.5 would be needed for an
	// integer quotient; none exists, so check the distance of every builder quotient instead.
	minDist := 1.0
	for psl := 1; psl <= 130; psl++ {
		for lir := 1; lir <= 27; lir++ {
			for _, reg := range []ProximityRegime{{}, {List: true, M: 1}, {List: true, M: 2}, {List: true, M: 3}} {
				q := float64(psl) / PerQueryBits(reg, lir)
				if math.IsInf(q, 0) {
					continue // α clamped to 1: no security per query
				}
				d := math.Abs(q - math.Round(q))
				if q == math.Round(q) {
					if NumQueries(reg, psl, lir) != int(q) {
						t.Errorf("exact quotient %v rounded up", q)
					}
					continue
				}
				minDist = min(minDist, d)
			}
		}
	}
	t.Logf("closest builder quotient to an integer: %g", minDist)
	if minDist < 1e-12 {
		t.Errorf("a builder quotient lies within %g of an integer: f64 last-ulp differences could matter", minDist)
	}
	// Exact integer quotients through NumQueries: unique decoding at lir 0 gives α = 1, q = 0 →
	// saturates; ListDecoding at huge lir gives tiny α. psl = 0 gives 0 queries.
	if NumQueries(ProximityRegime{}, 0, 3) != 0 {
		t.Error("psl 0 must give 0 queries")
	}
}

// postcardGolden is the §3.6 serialization of app_params_with_100_bits_security(21).
const postcardGolden = "04 11 80 10 01 04 03 c1 01 58 51 0f 14 05 00 81 80 80 c0 07 07 12 03"

func TestPostcardGolden(t *testing.T) {
	want, _ := hex.DecodeString(strings.ReplaceAll(postcardGolden, " ", ""))
	if got := mustApp(t, 21).AppendPostcard(nil); !bytes.Equal(got, want) || len(got) != 23 {
		t.Fatalf("postcard = % x, want % x", got, want)
	}
	// SplitUniqueList{m: 3, list_start_round: 1} = 01 03 01; logup max 2^30 = 80 80 80 80 04; and
	// AppendPostcard appends.
	want, _ = hex.DecodeString("ff" + "0208802001" + "03030a0402" + "030102" + "010301" + "8080808004" + "07" + "02" + "03")
	if got := TestParamsSmall(2, 8, 3).AppendPostcard([]byte{0xff}); !bytes.Equal(got, want) {
		t.Fatalf("test postcard = % x, want % x", got, want)
	}
	// ListDecoding{m: 1} = 02 01, after mu/query/folding pow 15/15/15.
	if b := RootParams().AppendPostcard(nil); !bytes.Contains(b, []byte{0x0f, 0x0f, 0x0f, 0x02, 0x01}) {
		t.Fatalf("root postcard = % x", b)
	}
}

func TestValidateErrors(t *testing.T) {
	base := mustApp(t, 21)
	cases := []struct {
		mod  func(p *SystemParams)
		want string
	}{
		{func(p *SystemParams) { p.Whir.K = 0 }, "whir.k must be ≥ 1"},
		{func(p *SystemParams) { p.NStack = 23 }, "l_skip + n_stack + log_blowup must be ≤ 27 (two-adicity)"},
		{func(p *SystemParams) { p.LSkip = -1 }, "l_skip must be ≥ 0"},
		{func(p *SystemParams) { p.NStack = -1 }, "n_stack must be ≥ 0"},
		{func(p *SystemParams) { p.WStack = 0 }, "w_stack must be ≥ 1"},
		{func(p *SystemParams) { p.LogBlowup = 0 }, "log_blowup must be ≥ 1"},
		{func(p *SystemParams) { p.MaxConstraintDegree = 0 }, "max_constraint_degree must be ≥ 1"},
		{func(p *SystemParams) { p.Whir.MuPowBits = 31 }, "whir.mu_pow_bits must be ≤ 30"},
		{func(p *SystemParams) { p.Whir.QueryPhasePowBits = 31 }, "whir.query_phase_pow_bits must be ≤ 30"},
		{func(p *SystemParams) { p.Whir.FoldingPowBits = 40 }, "whir.folding_pow_bits must be ≤ 30"},
		{func(p *SystemParams) { p.Logup.PowBits = 31 }, "logup.pow_bits must be ≤ 30"},
		{func(p *SystemParams) { p.Logup.PowBits = -2 }, "logup.pow_bits must be ≥ 0"},
		{func(p *SystemParams) { p.Whir.Rounds[1].NumQueries = 0 }, "whir.rounds[1].num_queries must be ≥ 1"},
		{func(p *SystemParams) { p.Whir.Rounds = nil }, "whir.rounds must have at least one round (R ≥ 1)"},
		{func(p *SystemParams) { p.Whir.Rounds = append(p.Whir.Rounds, p.Whir.Rounds...) }, "log_final_poly_len must be ≥ 0"},
		{func(p *SystemParams) { p.Logup.MaxInteractionCount = 0 }, "logup.max_interaction_count must be ≥ 1"},
		{func(p *SystemParams) { p.Logup.LogMaxMessageLength = 33 }, "logup.log_max_message_length must be ≤ 32"},
		{func(p *SystemParams) { p.Whir.Proximity = ListDecoding(0) }, "whir.proximity.m must be ≥ 1"},
		{func(p *SystemParams) { p.Whir.Proximity = SplitUniqueList(2, -1) }, "whir.proximity.list_start_round must be ≥ 0"},
		{func(p *SystemParams) { p.Whir.Proximity.M = 3 }, "unique_decoding takes no m"},
	}
	for _, c := range cases {
		p := base
		p.Whir.Rounds = slices.Clone(base.Whir.Rounds)
		c.mod(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

func TestSecurityCheck(t *testing.T) {
	p := mustApp(t, 21)
	p.Whir.Rounds = slices.Clone(p.Whir.Rounds)
	p.Whir.Rounds[2].NumQueries = 70
	s, err := Calculate(p, AppVMInputs)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckSecurity(s, 100, false)
	if err == nil || !strings.Contains(err.Error(), "weakest: whir round 2 query⊕γ") {
		t.Fatalf("got %v", err)
	}
	if CheckSecurity(s, 100, true) != nil || !Insecure(s, 100) {
		t.Fatal("allow-insecure not honoured")
	}
	good, _ := Calculate(mustApp(t, 21), AppVMInputs)
	if err := CheckSecurity(good, 99, false); err == nil || !strings.Contains(err.Error(), "below 100") {
		t.Fatalf("target 99: %v", err)
	}
	if _, err := Calculate(p, SoundnessInputs{MaxConstraintsPerAir: 1, NumAirs: 1, NumStackedColumns: 1}); err == nil {
		t.Fatal("n_stacked 1 accepted")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, n := range PresetNames() {
		p, _, _ := Preset(n, 21)
		j, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q SystemParams
		if err := json.Unmarshal(j, &q); err != nil || !q.Equal(p) {
			t.Fatalf("%s: %v %s", n, err, j)
		}
	}
	j, _ := json.Marshal(mustApp(t, 21))
	want := `{"l_skip":4,"n_stack":17,"w_stack":2048,"log_blowup":1,"whir":{"k":4,"rounds":[{"num_queries":193},{"num_queries":88},{"num_queries":81}],"mu_pow_bits":15,"query_phase_pow_bits":20,"folding_pow_bits":5,"proximity":{"kind":"unique_decoding"}},"logup":{"max_interaction_count":2013265921,"log_max_message_length":7,"pow_bits":18},"max_constraint_degree":3}`
	if string(j) != want {
		t.Fatalf("json = %s", j)
	}
}
