package device_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/transcript"
)

// constraintSet is a set of AIR instances proved together (trace values replaced by random ones:
// with interactions the prover does not need valid traces, and random values make every sum
// non-zero). valid: the instances' own traces, which satisfy their constraints: a set without
// interactions runs round 0 on the shifted domain, which finds only the quotient of a polynomial
// that vanishes on the N-th roots (kernels.ZcRound0Domain).
type constraintSet struct {
	name   string
	params func() (params.SystemParams, error)
	ins    func() []testair.Instance
	valid  bool
}

func keccakInstance(perms int) testair.Instance {
	ex, err := examples.Lookup("keccakf")
	if err != nil {
		panic(err)
	}
	secs, err := ex.Generate(examples.Options{Perms: perms})
	if err != nil {
		panic(err)
	}
	ti, err := secs[0].TraceInput()
	if err != nil {
		panic(err)
	}
	return testair.Instance{Air: secs[0].Air, Trace: ti}
}

var constraintSets = []constraintSet{
	// Every program shape of spec B §8: rotations, selectors, public values, preprocessed and
	// cached parts, interactions, traces shorter than 2^l_skip (heights 1 and 2), height 1.
	{"test-airs", preset("test", 0), func() []testair.Instance {
		ins := []testair.Instance{testair.Fibonacci(0, 1, 64), testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8),
			testair.PreprocessedCached(2, 16)}
		ins = append(ins, testair.InteractionsFixture11(true)...)
		ins = append(ins, testair.SelfInteraction([]int{3, 7}, 32, 5)...)
		return append(ins, testair.ShortTraces()...)
	}, false},
	{"app-keccak-4", preset("app-100bit", 12), func() []testair.Instance {
		return []testair.Instance{keccakInstance(4), testair.Fibonacci(0, 1, 16), testair.Fibonacci(0, 1, 1),
			testair.Fibonacci(0, 1, 4)}
	}, true},
	// The shifted domain over the other program shapes: rotations, selectors, public values,
	// preprocessed and cached parts, heights 1 and 2 below 2^l_skip, l_skip 0.
	{"no-interactions-lskip2", small(2, 6, 2), func() []testair.Instance {
		return append([]testair.Instance{testair.Fibonacci(0, 1, 64), testair.FibonacciSelector(7, 3, 8),
			testair.PreprocessedCached(2, 16)}, testair.ShortTraces()[:3]...)
	}, true},
	{"no-interactions-lskip0", small(0, 8, 2), func() []testair.Instance {
		return []testair.Instance{testair.Fibonacci(0, 1, 32), testair.Fibonacci(0, 1, 1), testair.FibonacciSelector(7, 3, 4)}
	}, true},
	{"lskip0", small(0, 8, 2), func() []testair.Instance {
		return append([]testair.Instance{testair.Fibonacci(0, 1, 32), testair.Fibonacci(0, 1, 1)}, testair.InteractionsFixture11(true)...)
	}, false},
	{"lskip1", small(1, 7, 2), func() []testair.Instance {
		return append([]testair.Instance{testair.Fibonacci(0, 1, 8)}, testair.SelfInteraction([]int{2}, 16, 1)...)
	}, false},
	{"lskip5", small(5, 3, 2), func() []testair.Instance {
		return append([]testair.Instance{testair.Fibonacci(0, 1, 128), testair.Fibonacci(0, 1, 8), testair.PreprocessedCached(1, 32)},
			testair.SelfInteraction([]int{4}, 64, 2)...)
	}, false},
}

// randomize replaces an instance's trace values (common and cached parts) with random ones.
func randomize(r *rand.Rand, in testair.Instance) stark.AirProvingInput {
	rnd := func(m air.Matrix) air.Matrix {
		out := air.NewMatrix(m.Width, m.Height)
		copy(out.Values, fieldrand.Fps(r, len(out.Values)))
		return out
	}
	ai := stark.AirProvingInput{Common: rnd(in.Trace.CommonMain), Public: fieldrand.Fps(r, len(in.Trace.Public))}
	ai.Common.Height = in.Height()
	for _, c := range in.Trace.CachedMains {
		ai.Cached = append(ai.Cached, rnd(c))
	}
	return ai
}

// asProvingInput is an instance's own trace as proving input.
func asProvingInput(in testair.Instance) stark.AirProvingInput {
	ai := stark.AirProvingInput{Common: in.Trace.CommonMain, Public: in.Trace.Public}
	ai.Common.Height = in.Height()
	ai.Cached = append(ai.Cached, in.Trace.CachedMains...)
	return ai
}

// constraintInputs builds the keys and loads the inputs on one backend; the result is in trace
// order.
func constraintInputs(t testing.TB, be *stark.Backend, p params.SystemParams, ins []testair.Instance, inputs []stark.AirProvingInput) []*stark.AirInput {
	t.Helper()
	var airs []air.Air
	for _, in := range ins {
		airs = append(airs, in.Air)
	}
	pk, err := stark.Keygen(p, airs, nil, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pk.Free)
	ld, err := stark.LoadInputs(be, pk, inputs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stark.FreeTraces(ld) })
	out, err := stark.AirInputs(pk, ld, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// randomChallenges draws λ, β, ξ and eq3b and computes the programs' weights, as the stage does.
func randomChallenges(t testing.TB, r *rand.Rand, p params.SystemParams, in []*stark.AirInput) *stark.ConstraintChallenges {
	t.Helper()
	nMax := 0
	for _, a := range in {
		nMax = max(nMax, a.LogHeight()-p.LSkip)
	}
	ch := &stark.ConstraintChallenges{Lambda: fieldrand.Fp4(r), Beta: fieldrand.Fp4(r)}
	for range p.LSkip + nMax + 1 {
		ch.Xi = append(ch.Xi, fieldrand.Fp4(r))
	}
	for _, a := range in {
		eq := make([]field.Fp4, len(a.Program.Interactions))
		for i := range eq {
			eq[i] = fieldrand.Fp4(r)
		}
		w, err := a.Program.Weights(ch.Lambda, ch.Beta, eq)
		if err != nil {
			t.Fatal(err)
		}
		ch.Eq3b = append(ch.Eq3b, eq)
		ch.Programs = append(ch.Programs, a.Program)
		ch.Weights = append(ch.Weights, w)
	}
	return ch
}

func sameTriples(t *testing.T, what string, got, want []stark.ConstraintTriple) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d traces, want %d", what, len(got), len(want))
	}
	for tr := range want {
		for _, f := range []struct {
			name string
			g, w []field.Fp4
		}{{"Zc", got[tr].Zc, want[tr].Zc}, {"Num", got[tr].Num, want[tr].Num}, {"Den", got[tr].Den, want[tr].Den}} {
			if len(f.g) != len(f.w) {
				t.Fatalf("%s trace %d %s: %d values, want %d", what, tr, f.name, len(f.g), len(f.w))
			}
			for i := range f.w {
				if f.g[i] != f.w[i] {
					t.Fatalf("%s trace %d %s[%d] = %v, want %v", what, tr, f.name, i, f.g[i], f.w[i])
				}
			}
		}
	}
}

// TestConstraintProverMatchesCpuref drives the device constraint prover and cpuref's through a
// whole batch constraint sumcheck (ProveBatchConstraints' call sequence, random challenges) and
// compares every output; UnivariateRound and every Round sync once, BindUnivariate and Bind never,
// Openings at most once; Release frees every buffer but the programs (once per backend).
// both returns the set's parameters, its inputs on the device backend be and on cpuref (the AIRs'
// traces, or random values where the set is not valid) and random challenges for each (the same
// values; cpuref's with its own programs).
func (set constraintSet) both(t *testing.T, be *device.Backend, r *rand.Rand) (params.SystemParams, []*stark.AirInput, []*stark.AirInput, *stark.ConstraintChallenges, *stark.ConstraintChallenges) {
	t.Helper()
	p, err := set.params()
	if err != nil {
		t.Fatal(err)
	}
	ins := set.ins()
	var inputs []stark.AirProvingInput
	for _, in := range ins {
		if set.valid {
			inputs = append(inputs, asProvingInput(in))
		} else {
			inputs = append(inputs, randomize(r, in))
		}
	}
	dIn := constraintInputs(t, be.Stages(), p, ins, inputs)
	rIn := constraintInputs(t, cpuref.New(), p, ins, inputs)
	ch := randomChallenges(t, r, p, dIn)
	chR := *ch
	chR.Programs = nil
	for _, a := range rIn {
		chR.Programs = append(chR.Programs, a.Program)
	}
	return p, dIn, rIn, ch, &chR
}

func TestConstraintProverMatchesCpuref(t *testing.T) {
	for _, opts := range []kernels.ZcOptions{{}, {Pieces: true}, {Pieces: true, Interpreted: true},
		{GeneratedWhole: true, PointMode: true, UnitItems: true}, {Pieces: true, Levels: true, LevelThreads: 2}} {
		t.Run(fmt.Sprintf("pieces=%v/interpreted=%v/whole=%v/levels=%v", opts.Pieces, opts.Interpreted, opts.GeneratedWhole, opts.Levels), func(t *testing.T) {
			levels := testDev.Stats().PerKernel["zc_round_levels"]
			before := testDev.Stats().PerKernel["zc_uni_whole"]
			constraintProverMatchesCpuref(t, opts)
			// The short programs' round 0 ran their generated code (GPU plan: a point per lane)
			// only when asked (the host device interprets by default).
			if ran := testDev.Stats().PerKernel["zc_uni_whole"] > before; ran != opts.GeneratedWhole && testDev.Kind() == gpu.KindHost {
				t.Errorf("zc_uni_whole ran: %v", ran)
			}
			// The rounds ran level-scheduled (the test AIRs' pieces: Keccak-f's registers, 16
			// lanes a thread, exceed the host's group memory) only when asked.
			if ran := testDev.Stats().PerKernel["zc_round_levels"] > levels; ran != opts.Levels && testDev.Kind() == gpu.KindHost {
				t.Errorf("zc_round_levels ran: %v", ran)
			}
		})
	}
}

// constraintProverMatchesCpuref is TestConstraintProverMatchesCpuref with the kernels' strategies
// forced by opts (Pieces: the program split into pieces for every round j ≥ 1, as GPUs run the
// rounds with few pairs).
func constraintProverMatchesCpuref(t *testing.T, opts kernels.ZcOptions) {
	be, err := device.New(testDev, device.Options{Zerocheck: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Stages().Constraints == nil {
		t.Fatal("the device backend does not list its Constraints stage")
	}
	for si, set := range constraintSets {
		t.Run(set.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(si), 0xc0))
			p, dIn, rIn, ch, chR := set.both(t, be, r)
			// The programs are uploaded once per backend (kept until Close): a first prover
			// uploads them, the memory of the second must come back entirely at Release. The
			// second keeps the first's traces (a key's programs) with other challenges, and
			// computes their weights itself (Weights nil): stale weights would fail round 0.
			warm, err := be.NewConstraintProver(p, dIn, randomChallenges(t, r, p, dIn))
			if err != nil {
				t.Fatal(err)
			}
			warm.Release()
			mem := testDev.Stats().MemoryInUse
			chD := *ch
			chD.Weights = nil
			dp, err := be.NewConstraintProver(p, dIn, &chD)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := cpuref.Backend{}.NewConstraintProver(p, rIn, chR)
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Release()

			var got []stark.ConstraintTriple
			if n := syncsOf(t, func() (err error) { got, err = dp.UnivariateRound(); return err }); n != 1 {
				t.Errorf("UnivariateRound: %d syncs, want 1", n)
			}
			want, err := rp.UnivariateRound()
			if err != nil {
				t.Fatal(err)
			}
			sameTriples(t, "round 0", got, want)
			nMax := 0
			for _, a := range dIn {
				nMax = max(nMax, a.LogHeight()-p.LSkip)
			}
			openings := func(j int) {
				for tr, a := range dIn {
					if max(a.LogHeight()-p.LSkip, 0) != j {
						continue
					}
					var o [][]field.Fp4
					if n := syncsOf(t, func() (err error) { o, err = dp.Openings(tr); return err }); n > 1 {
						t.Errorf("Openings(%d): %d syncs, want at most 1", tr, n)
					}
					or, err := rp.Openings(tr)
					if err != nil {
						t.Fatal(err)
					}
					if len(o) != len(or) {
						t.Fatalf("openings of trace %d: %d parts, want %d", tr, len(o), len(or))
					}
					for q := range or {
						if fmt.Sprint(o[q]) != fmt.Sprint(or[q]) {
							t.Fatalf("openings of trace %d part %d = %v, want %v", tr, q, o[q], or[q])
						}
					}
				}
			}
			r0 := fieldrand.Fp4(r)
			if n := syncsOf(t, func() error { return dp.BindUnivariate(r0) }); n != 0 {
				t.Errorf("BindUnivariate: %d syncs, want 0", n)
			}
			if err := rp.BindUnivariate(r0); err != nil {
				t.Fatal(err)
			}
			openings(0)
			for j := 1; j <= nMax; j++ {
				if n := syncsOf(t, func() (err error) { got, err = dp.Round(); return err }); n != 1 {
					t.Errorf("round %d: %d syncs, want 1", j, n)
				}
				if want, err = rp.Round(); err != nil {
					t.Fatal(err)
				}
				sameTriples(t, fmt.Sprint("round ", j), got, want)
				rj := fieldrand.Fp4(r)
				if n := syncsOf(t, func() error { return dp.Bind(rj) }); n != 0 {
					t.Errorf("Bind %d: %d syncs, want 0", j, n)
				}
				if err := rp.Bind(rj); err != nil {
					t.Fatal(err)
				}
				openings(j)
			}
			dp.Release()
			if _, err := dp.Round(); err == nil {
				t.Error("Round after Release: no error")
			}
			if m := testDev.Stats().MemoryInUse; m != mem {
				t.Errorf("Release left %d bytes in use (before: %d)", m-mem, mem)
			}
		})
	}
}

// TestConstraintDeviceRoundsMatchCpuref: the multilinear rounds run with the transcript on the
// device (stark.ConstraintDeviceRounds), from one trace's exhaustion to the next as the stage runs
// them, give the round polynomials and challenges of cpuref's Round values combined by the
// stage's formula and a host transcript, one sync a run, and the same openings without a sync of
// their own. Round after them is refused.
func TestConstraintDeviceRoundsMatchCpuref(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for si, set := range constraintSets {
		t.Run(set.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(si), 0x7c0))
			p, dIn, rIn, ch, chR := set.both(t, be, r)
			dp, err := be.NewConstraintProver(p, dIn, ch)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			rp, err := cpuref.Backend{}.NewConstraintProver(p, rIn, chR)
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Release()
			for _, cp := range []stark.ConstraintProver{dp, rp} {
				if _, err := cp.UnivariateRound(); err != nil {
					t.Fatal(err)
				}
			}
			r0 := fieldrand.Fp4(r)
			for _, cp := range []stark.ConstraintProver{dp, rp} {
				if err := cp.BindUnivariate(r0); err != nil {
					t.Fatal(err)
				}
			}
			T := len(dIn)
			nLift := make([]int, T)
			nMax := 0
			for i, a := range dIn {
				nLift[i] = max(a.LogHeight()-p.LSkip, 0)
				nMax = max(nMax, nLift[i])
			}
			if nMax == 0 {
				t.Skip("no multilinear rounds")
			}
			dr, ok := dp.(stark.ConstraintDeviceRounds)
			if !ok {
				t.Fatal("the device constraint prover does not run its rounds on the device")
			}
			m := &stark.ConstraintRoundMix{Zc: make([]field.Fp4, T), Num: make([]field.Fp4, T), Den: make([]field.Fp4, T)}
			for i := range T {
				m.Zc[i], m.Num[i], m.Den[i] = fieldrand.Fp4(r), fieldrand.Fp4(r), fieldrand.Fp4(r)
			}
			tr := transcript.New()
			for range 5 + si {
				tr.Observe(fieldrand.Fp(r))
			}
			tr.SampleExt()
			l, d := p.LSkip, p.MaxConstraintDegree
			for j := 1; j <= nMax; {
				to := j
				for ; to < nMax && !slices.Contains(nLift, to); to++ {
				}
				m.From, m.To = j, to
				m.Eqz, m.Eqs, m.Tail = fieldrand.Fp4(r), fieldrand.Fp4(r), fieldrand.Fp4(r)
				before := tr
				var polys [][]field.Fp4
				var rs []field.Fp4
				if n := syncsOf(t, func() (err error) { polys, rs, err = dr.ProveRounds(&tr, m); return err }); n != 1 {
					t.Errorf("rounds %d..%d: %d syncs, want 1", j, to, n)
				}
				if !tr.Same(&before) {
					t.Error("ProveRounds changed the caller's transcript")
				}
				if len(polys) != to-j+1 || len(rs) != to-j+1 {
					t.Fatalf("rounds %d..%d: %d polynomials and %d challenges", j, to, len(polys), len(rs))
				}
				eqz, eqs, tail := m.Eqz, m.Eqs, m.Tail
				for k := j; k <= to; k++ {
					evals, err := rp.Round()
					if err != nil {
						t.Fatal(err)
					}
					xi := ch.Xi[l+k-1]
					want := make([]field.Fp4, d+1)
					for x := 1; x <= d+1; x++ {
						var hz, hl field.Fp4
						for i, e := range evals {
							if nLift[i] < k {
								continue
							}
							hz = hz.Add(m.Zc[i].Mul(e.Zc[x-1]))
							hl = hl.Add(m.Num[i].Mul(e.Num[x-1])).Add(m.Den[i].Mul(e.Den[x-1]))
						}
						fx := field.Lift(field.Fp(uint32(x)))
						eqx := field.Fp4One.Sub(xi).Mul(field.Fp4One.Sub(fx)).Add(xi.Mul(fx))
						want[x-1] = eqx.Mul(eqz.Mul(hz).Add(eqs.Mul(hl))).Add(tail.MulBase(field.Fp(uint32(x))))
					}
					if fmt.Sprint(polys[k-j]) != fmt.Sprint(want) {
						t.Fatalf("round %d: s = %v, want %v", k, polys[k-j], want)
					}
					tr.ObserveSlice(flattenFp4(want))
					rk := tr.SampleExt()
					if rs[k-j] != rk {
						t.Fatalf("round %d: r = %v, want %v", k, rs[k-j], rk)
					}
					if err := rp.Bind(rk); err != nil {
						t.Fatal(err)
					}
					ef := field.Fp4One.Sub(rk).Sub(xi).Add(xi.Mul(rk).Double())
					eqz, eqs, tail = eqz.Mul(ef), eqs.Mul(ef), tail.Mul(rk)
				}
				for i := range dIn {
					if nLift[i] != to {
						continue
					}
					var o [][]field.Fp4
					if n := syncsOf(t, func() (err error) { o, err = dp.Openings(i); return err }); n != 0 {
						t.Errorf("Openings(%d) after the rounds: %d syncs, want 0", i, n)
					}
					or, err := rp.Openings(i)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(o) != fmt.Sprint(or) {
						t.Fatalf("openings of trace %d = %v, want %v", i, o, or)
					}
				}
				j = to + 1
			}
			if _, err := dp.Round(); !errors.Is(err, device.ErrProverState) {
				t.Errorf("Round after ProveRounds: %v, want ErrProverState", err)
			}
			m.From, m.To = nMax+1, nMax+1
			if _, _, err := dr.ProveRounds(&tr, m); !errors.Is(err, device.ErrProverState) {
				t.Errorf("ProveRounds past the last round: %v, want ErrProverState", err)
			}
		})
	}
}

// flattenFp4 lists the coefficients of v in order (as the stage observes an Fp4 slice).
func flattenFp4(v []field.Fp4) []field.Fp {
	out := make([]field.Fp, 0, 4*len(v))
	for _, x := range v {
		out = append(out, x[0], x[1], x[2], x[3])
	}
	return out
}

// TestConstraintProverMisuse: calls out of protocol order and foreign traces are errors.
func TestConstraintProverMisuse(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p, _, err := params.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16)}
	inputs := []stark.AirProvingInput{{Common: ins[0].Trace.CommonMain, Public: ins[0].Trace.Public}}
	dIn := constraintInputs(t, be.Stages(), p, ins, inputs)
	r := rand.New(rand.NewPCG(7, 7))
	ch := randomChallenges(t, r, p, dIn)
	if _, err := be.NewConstraintProver(p, dIn, &stark.ConstraintChallenges{}); err == nil {
		t.Error("missing challenges: no error")
	}
	rIn := constraintInputs(t, cpuref.New(), p, ins, inputs)
	if _, err := be.NewConstraintProver(p, rIn, ch); err == nil {
		t.Error("cpuref traces: no error")
	}
	dp, err := be.NewConstraintProver(p, dIn, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	if _, err := dp.Round(); err == nil {
		t.Error("Round before BindUnivariate: no error")
	}
	if err := dp.Bind(field.Fp4One); err == nil {
		t.Error("Bind before BindUnivariate: no error")
	}
	if _, err := dp.Openings(0); err == nil {
		t.Error("Openings before the binds: no error")
	}
	if _, err := dp.UnivariateRound(); err != nil {
		t.Fatal(err)
	}
	if err := dp.BindUnivariate(field.Fp4One); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.UnivariateRound(); err == nil {
		t.Error("UnivariateRound after BindUnivariate: no error")
	}
	if _, err := dp.Openings(1); err == nil {
		t.Error("Openings of a trace that does not exist: no error")
	}
}

// BenchmarkConstraintProver runs one batch constraint sumcheck (the prover calls of
// ProveBatchConstraints, random challenges) on Keccak-f traces of CONSTRAINTS_BENCH_PERMS
// permutations (default 16; app-100bit), on the host device and on cpuref, and reports the
// milliseconds of round 0 and of the rest, wall and CPU time (all threads), the best of the b.N
// runs (the machines these run on are shared):
//
//	CONSTRAINTS_BENCH_PERMS=128 go test ./internal/backend/device -run '^$' -bench ConstraintProver -benchtime 1x
func BenchmarkConstraintProver(b *testing.B) {
	perms := envInt("CONSTRAINTS_BENCH_PERMS", 16)
	in := keccakInstance(perms)
	lh := 0
	for 1<<lh < in.Height() {
		lh++
	}
	p, _, err := params.Preset("app-100bit", max(lh, 12))
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	inputs := []stark.AirProvingInput{{Common: in.Trace.CommonMain, Public: in.Trace.Public}}
	run := func(b *testing.B, be *stark.Backend) {
		ins := constraintInputs(b, be, p, []testair.Instance{in}, inputs)
		ch := randomChallenges(b, r, p, ins)
		uni, rest := time.Duration(1<<62), time.Duration(1<<62)
		uniCPU, restCPU := uni, rest
		for range b.N {
			start, startCPU := time.Now(), cpuTime()
			cp, err := be.Constraints.NewConstraintProver(p, ins, ch)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cp.UnivariateRound(); err != nil {
				b.Fatal(err)
			}
			mid, midCPU := time.Now(), cpuTime()
			if err := cp.BindUnivariate(fieldrand.Fp4(r)); err != nil {
				b.Fatal(err)
			}
			for j := 1; j <= lh-p.LSkip; j++ {
				if _, err := cp.Round(); err != nil {
					b.Fatal(err)
				}
				if err := cp.Bind(fieldrand.Fp4(r)); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := cp.Openings(0); err != nil {
				b.Fatal(err)
			}
			cp.Release()
			uni = min(uni, mid.Sub(start))
			rest = min(rest, time.Since(mid))
			uniCPU = min(uniCPU, midCPU-startCPU)
			restCPU = min(restCPU, cpuTime()-midCPU)
		}
		b.ReportMetric(float64(uni.Microseconds())/1e3, "round0-ms")
		b.ReportMetric(float64(rest.Microseconds())/1e3, "rest-ms")
		b.ReportMetric(float64(uniCPU.Microseconds())/1e3, "round0-cpu-ms")
		b.ReportMetric(float64(restCPU.Microseconds())/1e3, "rest-cpu-ms")
	}
	b.Run(fmt.Sprintf("host/keccakf-%d", perms), func(b *testing.B) {
		be, err := device.New(testDev, device.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		run(b, be.Stages())
	})
	b.Run(fmt.Sprintf("cpuref/keccakf-%d", perms), func(b *testing.B) { run(b, cpuref.New()) })
}

// TestConstraintProverRejectsViolatedConstraints: without interactions round 0 runs on the
// shifted domain, which assumes every row satisfies the constraints; a trace that does not (one
// proved with --no-check) is an input error naming the trace, not a wrong polynomial.
func TestConstraintProverRejectsViolatedConstraints(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p, err := small(2, 6, 2)()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	ins := []testair.Instance{testair.Fibonacci(0, 1, 32), testair.FibonacciSelector(7, 3, 8)}
	inputs := []stark.AirProvingInput{asProvingInput(ins[0]), randomize(r, ins[1])}
	dIn := constraintInputs(t, be.Stages(), p, ins, inputs)
	dp, err := be.NewConstraintProver(p, dIn, randomChallenges(t, r, p, dIn))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	_, err = dp.UnivariateRound()
	if !errors.Is(err, stark.ErrBatchConstraintInput) || !strings.Contains(err.Error(), "trace 1 does not satisfy") {
		t.Fatalf("UnivariateRound on a trace that violates its constraints: %v, want an input error naming trace 1", err)
	}
}
