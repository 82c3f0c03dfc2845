package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// fp4Edge returns a random Fp4, or for small i one made of 0, 1 and p − 1.
func fp4Edge(r *rand.Rand, i int) field.Fp4 {
	edge := []field.Fp{0, 1, field.Fp(field.P - 1)}
	if i < 9 {
		return field.Fp4{edge[i%3], edge[i/3], edge[(i+1)%3], edge[(i+2)%3]}
	}
	return fieldrand.Fp4(r)
}

// allocArray is a zeroed array of n elements of T on dev, freed with the test.
func allocArray[T any](t *testing.T, dev *gpu.Device, n int) *gpu.Array[T] {
	t.Helper()
	a, err := gpu.AllocArray[T](dev, "test array", max(n, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

// uploadArray uploads v to the test device, freed with the test.
func uploadArray[T any](t *testing.T, v []T) *gpu.Array[T] {
	t.Helper()
	a, err := gpu.UploadArray(testDev, "test array", v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

// uploadFractions uploads p_0, q_0, p_1, q_1, … as device fractions.
func uploadFractions(t *testing.T, v []field.Fp4) *gpu.Array[GkrFraction] {
	t.Helper()
	return uploadArray(t, GkrFractionsOf(v))
}

// readFractions downloads a's fractions as p_0, q_0, p_1, q_1, ….
func readFractions(t *testing.T, a *gpu.Array[GkrFraction]) []field.Fp4 {
	t.Helper()
	v, err := a.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return Fp4sOfGkrFractions(v)
}

func fp4s(r *rand.Rand, n int) []field.Fp4 {
	out := make([]field.Fp4, n)
	for i := range out {
		out[i] = fp4Edge(r, i)
	}
	return out
}

// TestGkrLeavesMatchGo: gkr_leaves writes, for every row and interaction, the fraction (norm·count,
// α + Σ β^j·m_j + β^len·(bus+1)) of the host evaluation at base + r + m·h for every repetition m,
// and nothing else; for runs of several lengths, with edge values in the traces.
func TestGkrLeavesMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	ins := append(testair.InteractionsFixture11(false), testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.SelfInteraction([]int{3, 5}, 16, 2)...)
	ins = append(ins, testair.InteractionPair(16, 1)...)
	ins = append(ins, testair.SelfInteraction([]int{2}, 1, 7)...)
	for _, in := range ins {
		parts := instanceParts(in)
		if in.Height() > 1 { // edge values in one column: the counts and fields change, the sums do not matter
			m := *parts[0]
			m.Values = append([]field.Fp(nil), m.Values...)
			for i := range min(3, in.Height()) {
				m.Values[i] = []field.Fp{0, 1, field.Fp(field.P - 1)}[i]
			}
			parts[0] = &m
		}
		f := newRowsFixture(t, in, parts, constraints.Interactions)
		p := f.prog
		h := f.height
		for _, reps := range []int{1, 4} {
			for _, logPoints := range []int{0, 1, 30} {
				lp := min(logPoints, log2(h))
				name := fmt.Sprintf("%s/reps %d/runs of 2^%d", in.Air.Name(), reps, lp)
				alpha, beta := fieldrand.Fp4(r), fieldrand.Fp4(r)
				K := len(p.Interactions)
				bases := make([]int, K)
				for k := range bases {
					bases[k] = 3 + (K-1-k)*reps*h // blocks in reverse order, not at 0
				}
				nLeaves := 3 + K*reps*h + 2
				init := fp4s(r, 2*nLeaves)
				leaves := uploadFractions(t, init)
				words, err := GkrInteractionTable(p, bases)
				if err != nil {
					t.Fatal(err)
				}
				T := 1 << lp
				lv := GkrLeaves{Outs: allocArray[Mont](t, testDev, len(p.Outputs)*T), Inter: uploadWords(t, "inter", words),
					Consts: uploadArray(t, GkrLeafConsts(p, alpha, beta)), NumInteractions: K, MaxMsgLen: p.MaxMsgLen,
					Reps: reps, Leaves: leaves, LeafEnd: 3 + K*reps*h}
				slots := allocArray[Mont](t, testDev, f.dp.NumSlots*T)
				regs := allocArray[Mont](t, testDev, max(f.dp.NumRegs, 1)*T)
				b := testDev.Batch()
				for row0 := 0; row0 < h; row0 += T {
					lv.Run = f.encodeRun(t, b, slots, regs, row0, lp)
					if err := lv.Encode(b, testDev); err != nil {
						t.Fatal(err)
					}
				}
				got := readFractions(t, leaves)
				want := append([]field.Fp4(nil), init...)
				norm := field.New(uint32(reps)).Inverse()
				pows := field.PowersFp4(beta, p.MaxMsgLen+1)
				vals := make([]field.Fp, len(p.Outputs))
				var sl, rg []field.Fp
				for row := range h {
					sl, rg = f.rows.Eval(row, sl, rg, func(o int, v field.Fp) { vals[o] = v })
					for k, it := range p.Interactions {
						d := pows[len(it.Message)].MulBase(field.New(uint32(it.Bus) + 1)).Add(alpha)
						for j, m := range it.Message {
							d = d.Add(pows[j].MulBase(vals[m]))
						}
						for m := range reps {
							i := bases[k] + row + m*h
							want[2*i], want[2*i+1] = field.Lift(vals[it.Count].Mul(norm)), d
						}
					}
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: leaf %d %s = %v, want %v", name, i/2, []string{"p", "q"}[i%2], got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGkrPadAndLayer: gkr_pad writes (0, α) on its range only; gkr_layer adds fraction pairs.
func TestGkrPadAndLayer(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, n := range []int{1, 2, 5, 64, 1000} {
		src := fp4s(r, 4*n)
		a := uploadFractions(t, src)
		dst := allocArray[GkrFraction](t, testDev, n)
		b := testDev.Batch()
		if err := EncodeGkrLayer(b, testDev, a, dst, n); err != nil {
			t.Fatal(err)
		}
		got := readFractions(t, dst)
		for y := range n {
			pa, qa, pb, qb := src[4*y], src[4*y+1], src[4*y+2], src[4*y+3]
			if p, q := pa.Mul(qb).Add(pb.Mul(qa)), qa.Mul(qb); got[2*y] != p || got[2*y+1] != q {
				t.Fatalf("layer of %d: fraction %d = (%v, %v), want (%v, %v)", n, y, got[2*y], got[2*y+1], p, q)
			}
		}
		from, to := n/3, n-n/4
		alpha := fieldrand.Fp4(r)
		b = testDev.Batch()
		if err := EncodeGkrPad(b, testDev, a, from, to, alpha); err != nil {
			t.Fatal(err)
		}
		got = readFractions(t, a)
		for i := range 2 * n {
			want := [2]field.Fp4{src[2*i], src[2*i+1]}
			if i >= from && i < to {
				want = [2]field.Fp4{{}, alpha}
			}
			if got[2*i] != want[0] || got[2*i+1] != want[1] {
				t.Fatalf("pad [%d, %d) of %d: fraction %d = (%v, %v), want %v", from, to, 2*n, i, got[2*i], got[2*i+1], want)
			}
		}
	}
	b := testDev.Batch()
	a := allocArray[GkrFraction](t, testDev, 2)
	if EncodeGkrLayer(b, testDev, a, a, 1) == nil || EncodeGkrLayer(b, testDev, a, allocArray[GkrFraction](t, testDev, 1), 2) == nil ||
		EncodeGkrPad(b, testDev, a, 1, 3, field.Fp4{}) == nil {
		t.Error("out-of-range or in-place launches accepted")
	}
}

// gkrTables is the host reference of a layer sumcheck: columns eq, p0, q0, p1, q1 (cpuref's).
type gkrTables struct{ eq, p0, q0, p1, q1 []field.Fp4 }

func (g *gkrTables) round(lambda field.Fp4) [3]field.Fp4 {
	var s [3]field.Fp4
	cols := [5][]field.Fp4{g.eq, g.p0, g.q0, g.p1, g.q1}
	for y := range len(g.eq) / 2 {
		for i, x := range []field.Fp4{field.Fp4One, field.Lift(field.New(2)), field.Lift(field.New(3))} {
			var v [5]field.Fp4
			for c, col := range cols {
				v[c] = col[2*y].Add(x.Mul(col[2*y+1].Sub(col[2*y])))
			}
			s[i] = s[i].Add(v[0].Mul(v[1].Mul(v[4]).Add(v[3].Mul(v[2])).Add(lambda.Mul(v[2].Mul(v[4])))))
		}
	}
	return s
}

func (g *gkrTables) bind(r field.Fp4) {
	for _, col := range []*[]field.Fp4{&g.eq, &g.p0, &g.q0, &g.p1, &g.q1} {
		t := *col
		for y := range len(t) / 2 {
			t[y] = t[2*y].Add(r.Mul(t[2*y+1].Sub(t[2*y])))
		}
		*col = t[:len(t)/2]
	}
}

// TestGkrRoundsMatchGo: the first round over a layer as built, then fold-and-round passes, give the
// host's round values, and the folded tables are the host's, for tables of 2 to 2^9 rows (edge
// values included), on the host's shapes and on GPU-like shapes.
func TestGkrRoundsMatchGo(t *testing.T) {
	limited, _ := openLimited(t, map[string]int{"gkr_round_partials": 64, "gkr_fold_round_partials": 96})
	for _, dev := range []*gpu.Device{testDev, limited} {
		r := rand.New(rand.NewPCG(55, 56))
		sc, err := NewGkrSumcheck(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		for logRows := 1; logRows <= 9; logRows++ {
			R := 1 << logRows
			frac := fp4s(r, 4*R) // row y: (p0, q0) fraction 2y, (p1, q1) fraction 2y + 1
			eq := fp4s(r, R)
			host := &gkrTables{eq: append([]field.Fp4(nil), eq...)}
			for y := range R {
				host.p0 = append(host.p0, frac[4*y])
				host.q0 = append(host.q0, frac[4*y+1])
				host.p1 = append(host.p1, frac[4*y+2])
				host.q1 = append(host.q1, frac[4*y+3])
			}
			// Layers of the tables: layer k holds tables of 2^(k−1) rows; eq tables at Fp4 index R'.
			layers := make([]*gpu.Array[GkrFraction], logRows+2)
			for k := 1; k <= logRows+1; k++ {
				layers[k] = allocArray[GkrFraction](t, dev, 1<<k)
			}
			if err := layers[logRows+1].Write(0, GkrFractionsOf(frac)); err != nil {
				t.Fatal(err)
			}
			eqBuf := allocArray[Mont4](t, dev, 2*R)
			if err := eqBuf.Write(R, Mont4Slice(eq)); err != nil {
				t.Fatal(err)
			}
			lambda := fp4Edge(r, logRows)
			b := dev.Batch()
			if err := sc.EncodeRound(b, eqBuf, R, layers[logRows+1], logRows, lambda); err != nil {
				t.Fatal(err)
			}
			for cur := logRows + 1; ; cur-- {
				got, err := sc.ReadRound()
				if err != nil {
					t.Fatal(err)
				}
				if want := host.round(lambda); got != want {
					t.Fatalf("tables of 2^%d rows, round with 2^%d rows: %v, want %v", logRows, cur-1, got, want)
				}
				if cur == 2 {
					break
				}
				rr := fp4Edge(r, cur+3)
				host.bind(rr)
				b = dev.Batch()
				if err := sc.EncodeFoldRound(b, eqBuf, 1<<(cur-1), 1<<(cur-2), layers[cur], layers[cur-1], cur-2, lambda, rr); err != nil {
					t.Fatal(err)
				}
				if cur-1 == 2 { // the last folded tables against the host's
					got := readFractions(t, layers[2])
					for y := range 2 {
						want := []field.Fp4{host.p0[y], host.q0[y], host.p1[y], host.q1[y]}
						for c := range 4 {
							if got[4*y+c] != want[c] {
								t.Fatalf("tables of 2^%d rows: folded row %d column %d = %v, want %v", logRows, y, c, got[4*y+c], want[c])
							}
						}
					}
					e, _ := eqBuf.ReadAll()
					if ge := Fp4SliceOf(e[2:4]); ge[0] != host.eq[0] || ge[1] != host.eq[1] {
						t.Fatalf("tables of 2^%d rows: folded eq %v, want %v", logRows, ge, host.eq)
					}
				}
			}
		}
		b := dev.Batch()
		e, a := allocArray[Mont4](t, dev, 16), allocArray[GkrFraction](t, dev, 8)
		if sc.EncodeRound(b, e, 0, a, 0, field.Fp4{}) == nil || sc.EncodeFoldRound(b, e, 0, 1, a, allocArray[GkrFraction](t, dev, 8), 1, field.Fp4{}, field.Fp4{}) == nil ||
			sc.EncodeFoldRound(b, e, 4, 2, a, a, 1, field.Fp4{}, field.Fp4{}) == nil {
			t.Error("bad round launches accepted")
		}
	}
}

// TestGkrTables: the interaction table and constants are laid out as gkr_leaves reads them.
func TestGkrTables(t *testing.T) {
	ins := testair.SelfInteraction([]int{3}, 4, 6)
	_, vk := compileProgram(t, ins[0].Air)
	p, err := constraints.Compile(vk, constraints.Interactions)
	if err != nil {
		t.Fatal(err)
	}
	bases := make([]int, len(p.Interactions))
	for k := range bases {
		bases[k] = 10 * k
	}
	w, err := GkrInteractionTable(p, bases)
	if err != nil {
		t.Fatal(err)
	}
	for k, it := range p.Interactions {
		d := w[4*k : 4*k+4]
		if int(d[0]) != it.Count || int(d[2]) != len(it.Message) || int(d[3]) != bases[k] {
			t.Fatalf("interaction %d: %v", k, d)
		}
		for j, m := range it.Message {
			if int(w[int(d[1])+j]) != m {
				t.Fatalf("interaction %d field %d: output %d, want %d", k, j, w[int(d[1])+j], m)
			}
		}
	}
	if _, err := GkrInteractionTable(p, bases[1:]); err == nil {
		t.Error("missing base accepted")
	}
	alpha, beta := field.Fp4{1, 2, 3, 4}, field.Fp4{5, 6, 7, 8}
	c := Fp4SliceOf(GkrLeafConsts(p, alpha, beta))
	if len(c) != len(p.Interactions)+p.MaxMsgLen || c[len(p.Interactions)+1] != beta {
		t.Fatalf("constants %v", c)
	}
	it := p.Interactions[0]
	if want := field.PowersFp4(beta, len(it.Message)+1)[len(it.Message)].MulBase(field.New(uint32(it.Bus) + 1)).Add(alpha); c[0] != want {
		t.Errorf("d_0 = %v, want %v", c[0], want)
	}
}

// TestGkrTranscriptMatchesHost: the device transcript's round step (the sum of the partial rows,
// observed, a bound value sampled) and its layer ends (claims of layer 1 and of folded tables, μ,
// the next λ, the next layer's eq halves) give what transcript.Transcript and the host's
// arithmetic give, from transcript states with observes pending (the host device runs the
// group sponge of poseidon2_group.h as 16 fibers; GPUs' groups of 32 and 256 threads are checked
// by the CUDA selftest's GKR stages and proofs).
func TestGkrTranscriptMatchesHost(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	for _, pending := range []int{1, 2, 7} {
		r := rand.New(rand.NewPCG(61, uint64(pending)))
		var ht transcript.Transcript
		for i := range 8 + pending {
			ht.Observe(field.New(uint32(r.Uint64() % uint64(field.P))))
			if i == 3 {
				ht.Sample()
			}
		}
		tt, err := h.NewDeviceTranscript(32)
		if err != nil {
			t.Fatal(err)
		}
		defer tt.Close()
		st, ai, si := ht.State()
		if err := tt.SetState(st, ai, si); err != nil {
			t.Fatal(err)
		}
		sc, err := NewGkrSumcheck(testDev)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		const groups = 7
		rows := fp4s(r, 3*groups)
		if err := sc.partials.Write(0, MontFp4Slice(rows)); err != nil {
			t.Fatal(err)
		}
		sc.lastGroups = groups
		first := fp4s(r, 4)  // layer 1: fractions 0 and 1 (p, q each)
		folded := fp4s(r, 8) // a later layer's last tables, two rows: fractions 0..3
		eq2 := fp4s(r, 2)
		tab1, tab2 := uploadFractions(t, first), uploadFractions(t, folded)
		eqBuf := allocArray[Mont4](t, testDev, 2)
		if err := eqBuf.Write(0, Mont4Slice(eq2)); err != nil {
			t.Fatal(err)
		}
		halves := allocArray[Mont4](t, testDev, 4)
		b := testDev.Batch()
		if err := tt.EncodeGkrRound(b, sc, 1); err != nil {
			t.Fatal(err)
		}
		// Layer 1's end at 5, the next layer's λ at 10, its ξ = (μ, the bound value at 4).
		if err := tt.EncodeLayerEnd(b, tab1, GkrLayerEnd{At: 5, Next: true, LambdaAt: 10, RhoAt: 4, RhoStep: 4,
			NXi: 2, LogLo: 1, Halves: halves}); err != nil {
			t.Fatal(err)
		}
		// A later layer's last round (its sums at 11..13, its bound value at 14, λ from 10) and
		// its end in the same launch (the claims folded at that bound value at 15, μ at 19), the
		// last layer.
		if err := tt.EncodeSmallRounds(b, GkrSmallRounds{Eq: eqBuf, Src: tab2, LambdaAt: 10, At: 11, End: GkrLayerEnd{At: 15}}); err != nil {
			t.Fatal(err)
		}
		v, err := tt.ReadLog(20)
		if err != nil {
			t.Fatal(err)
		}

		var sums [3]field.Fp4
		for g := range groups {
			for k := range 3 {
				sums[k] = sums[k].Add(rows[3*g+k])
			}
		}
		for k := range 3 {
			ht.ObserveExt(sums[k])
		}
		rho := ht.SampleExt()
		c1 := [4]field.Fp4{first[0], first[1], first[2], first[3]}
		for _, c := range c1 {
			ht.ObserveExt(c)
		}
		mu := ht.SampleExt()
		lambda := ht.SampleExt()
		tabs := &gkrTables{eq: eq2, p0: []field.Fp4{folded[0], folded[4]}, q0: []field.Fp4{folded[1], folded[5]},
			p1: []field.Fp4{folded[2], folded[6]}, q1: []field.Fp4{folded[3], folded[7]}}
		s2 := tabs.round(lambda)
		for k := range 3 {
			ht.ObserveExt(s2[k])
		}
		rho2 := ht.SampleExt()
		lerp := func(a, b field.Fp4) field.Fp4 { return a.Add(rho2.Mul(b.Sub(a))) }
		c2 := [4]field.Fp4{lerp(folded[0], folded[4]), lerp(folded[1], folded[5]), lerp(folded[2], folded[6]), lerp(folded[3], folded[7])}
		for _, c := range c2 {
			ht.ObserveExt(c)
		}
		mu2 := ht.SampleExt()
		want := map[int]field.Fp4{1: sums[0], 2: sums[1], 3: sums[2], 4: rho, 5: c1[0], 6: c1[1], 7: c1[2], 8: c1[3], 9: mu, 10: lambda,
			11: s2[0], 12: s2[1], 13: s2[2], 14: rho2, 15: c2[0], 16: c2[1], 17: c2[2], 18: c2[3], 19: mu2}
		for i, w := range want {
			if v[i] != w {
				t.Errorf("%d pending: log[%d] = %v, want %v", pending, i, v[i], w)
			}
		}
		lo, hi, logLo := EqTables([]field.Fp4{mu, rho})
		gotHalves := make([]Mont4, 4)
		if err := halves.Read(gotHalves, 0); err != nil {
			t.Fatal(err)
		}
		if logLo != 1 || !slices.Equal(gotHalves, append(lo, hi...)) {
			t.Errorf("%d pending: eq halves %v, want %v then %v", pending, gotHalves, lo, hi)
		}
		words := make([]uint32, poseidon2.Width+2)
		if err := tt.state.Read(words, 0); err != nil {
			t.Fatal(err)
		}
		st, ai, si = ht.State()
		for i, x := range st {
			if CanonicalOf(Mont(words[i])) != x {
				t.Errorf("%d pending: state word %d differs", pending, i)
			}
		}
		if int(words[16]) != ai || int(words[17]) != si {
			t.Errorf("%d pending: indices %d, %d, want %d, %d", pending, words[16], words[17], ai, si)
		}
	}
	tt, err := h.NewDeviceTranscript(8)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	b := testDev.Batch()
	src := uploadFractions(t, fp4s(rand.New(rand.NewPCG(1, 2)), 8))
	eq := allocArray[Mont4](t, testDev, 2)
	small := GkrSmallRounds{Eq: eq, Src: src, LambdaAt: 0, At: 0}
	if tt.SetState([poseidon2.Width]field.Fp{}, 8, 0) == nil ||
		tt.EncodeLayerEnd(b, uploadFractions(t, fp4s(rand.New(rand.NewPCG(1, 2)), 4)), GkrLayerEnd{At: 4}) == nil {
		t.Error("out-of-range transcript calls accepted")
	}
	// A layer's end in the small rounds' launch: its claims past the log, or a next layer's ξ
	// whose bound values run past it.
	for _, end := range []GkrLayerEnd{{At: 4}, {At: 0, Next: true, LambdaAt: 5, RhoAt: 4, RhoStep: 4, NXi: 3, LogLo: 1,
		Halves: allocArray[Mont4](t, testDev, 6)}} {
		small.End = end
		if tt.EncodeSmallRounds(b, small) == nil {
			t.Errorf("small rounds with the layer end %+v accepted in a log of 8", end)
		}
	}
}
