package transcript

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

var update = flag.Bool("update", false, "rewrite testdata/transcript_golden.txt")

const (
	vectorsFile = "testdata/poseidon2_babybear16_vectors.txt"
	goldenFile  = "testdata/transcript_golden.txt"
)

// readVectors returns the "key = values" lines of the given sections of the spec's vectors file,
// in file order (keys may repeat, e.g. "samples" in section D).
func readVectors(t testing.TB, sections ...string) []struct{ key, value string } {
	t.Helper()
	f, err := os.Open(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	var out []struct{ key, value string }
	section := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "## "); ok {
			section, _, _ = strings.Cut(rest, ".")
			continue
		}
		if !want[section] || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, " = "); ok {
			out = append(out, struct{ key, value string }{strings.TrimSpace(k), v})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseUints reads whitespace-separated decimals, ignoring brackets and a "(comment)".
func parseUints(t testing.TB, s string) []uint32 {
	t.Helper()
	if i := strings.Index(s, "("); i >= 0 {
		s = s[:i]
	}
	s = strings.NewReplacer("[", " ", "]", " ").Replace(s)
	var out []uint32
	for _, w := range strings.Fields(s) {
		v, err := strconv.ParseUint(w, 10, 32)
		if err != nil {
			t.Fatalf("bad value %q: %v", w, err)
		}
		out = append(out, uint32(v))
	}
	return out
}

func fps(v []uint32) []field.Fp {
	out := make([]field.Fp, len(v))
	for i, x := range v {
		out[i] = field.Fp(x)
	}
	return out
}

func observeRange(t *Transcript, lo, hi uint32) {
	for x := lo; x <= hi; x++ {
		t.Observe(field.Fp(x))
	}
}

// TestVectorsD replays the transcript scripts of section D (their comments in the file).
func TestVectorsD(t *testing.T) {
	vs := readVectors(t, "D")
	keys := []string{"samples", "sample_ext", "samples", "sample_bits18"}
	if len(vs) != len(keys) {
		t.Fatalf("section D has %d vectors, want %d", len(vs), len(keys))
	}
	for i, k := range keys {
		if vs[i].key != k {
			t.Fatalf("section D vector %d is %q, want %q", i, vs[i].key, k)
		}
	}

	// fresh transcript, 10 x sample()
	var tr Transcript
	var got []field.Fp
	for range 10 {
		got = append(got, tr.Sample())
	}
	if want := fps(parseUints(t, vs[0].value)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fresh samples %v, want %v", got, want)
	}

	// fresh; observe 1..5; sample_ext()
	tr = New()
	observeRange(&tr, 1, 5)
	if got, want := tr.SampleExt(), field.Fp4(fps(parseUints(t, vs[1].value))); got != want {
		t.Errorf("sample_ext %v, want %v", got, want)
	}
	// continue: observe 6..20; sample() x3
	observeRange(&tr, 6, 20)
	got = got[:0]
	for range 3 {
		got = append(got, tr.Sample())
	}
	if want := fps(parseUints(t, vs[2].value)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("samples after observing 6..20: %v, want %v", got, want)
	}
	// continue: sample_bits(18)
	if got, want := tr.SampleBits(18), parseUints(t, vs[3].value)[0]; got != want {
		t.Errorf("sample_bits(18) = %d, want %d", got, want)
	}
}

// TestVectorsE: fresh; observe 1,2,3; grind(bits) returns the smallest witness; then sample.
func TestVectorsE(t *testing.T) {
	vals := map[string]uint32{}
	for _, v := range readVectors(t, "E") {
		vals[v.key] = parseUints(t, v.value)[0]
	}
	if len(vals) != 4 {
		t.Fatalf("section E has %d vectors, want 4", len(vals))
	}
	for _, bits := range []int{8, 12} {
		name := fmt.Sprintf("pow%d", bits)
		want, ok := vals[name+".witness"]
		if !ok {
			t.Fatalf("missing %s.witness", name)
		}
		var tr Transcript
		observeRange(&tr, 1, 3)
		before := tr
		w := tr.Grind(bits)
		if uint32(w) != want {
			t.Errorf("%s: witness %d, want %d", name, w, want)
		}
		if got := tr.Sample(); uint32(got) != vals[name+".next_sample_after"] {
			t.Errorf("%s: next sample %d, want %d", name, got, vals[name+".next_sample_after"])
		}
		// Smallest: no smaller witness passes, on clones of the pre-grind transcript.
		for c := uint32(0); c < want; c++ {
			cl := before
			if cl.CheckWitness(bits, field.Fp(c)) {
				t.Fatalf("%s: %d < %d also passes", name, c, want)
			}
		}
		// A verifier replaying CheckWitness ends in the same state.
		v := before
		if !v.CheckWitness(bits, field.Fp(want)) {
			t.Fatalf("%s: CheckWitness rejects the witness", name)
		}
		if got := v.Sample(); uint32(got) != vals[name+".next_sample_after"] {
			t.Errorf("%s: verifier next sample %d", name, got)
		}
	}
}

// TestGrindWorkerCounts: the grinder's answer does not depend on the number of workers.
func TestGrindWorkerCounts(t *testing.T) {
	var tr Transcript
	observeRange(&tr, 1, 3)
	for _, bits := range []int{1, 4, 8, 10} {
		var first field.Fp
		for i, workers := range []int{1, 2, 3, 7} {
			w, err := findWitness(context.Background(), tr.state, int(tr.absorbIdx), bits, workers)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = w
			} else if w != first {
				t.Fatalf("bits %d: %d workers found %d, 1 worker found %d", bits, workers, w, first)
			}
		}
	}
}

func TestGrindWithCancelled(t *testing.T) {
	var tr Transcript
	tr.Observe(5)
	before := tr
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.GrindWith(ctx, HostGrinder{}, 20); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !tr.Same(&before) {
		t.Fatal("cancelled grind modified the transcript")
	}
	// Cancellation during the search: 30 bits would take minutes.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := tr.GrindWith(ctx, HostGrinder{}, 30); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	if !tr.Same(&before) {
		t.Fatal("cancelled grind modified the transcript")
	}
}

func TestBitsZero(t *testing.T) {
	var tr Transcript
	observeRange(&tr, 1, 3)
	before := tr
	if w := tr.Grind(0); w != 0 {
		t.Fatalf("Grind(0) = %d, want 0", w)
	}
	if !tr.Same(&before) {
		t.Fatal("Grind(0) touched the transcript")
	}
	for _, w := range []field.Fp{0, 1, 12345} {
		if !tr.CheckWitness(0, w) {
			t.Fatalf("CheckWitness(0, %d) = false", w)
		}
	}
	if !tr.Same(&before) {
		t.Fatal("CheckWitness(0) touched the transcript")
	}
	// SampleBits(0) still consumes a sample.
	if tr.SampleBits(0) != 0 || tr.Same(&before) {
		t.Fatal("SampleBits(0) must return 0 and consume a sample")
	}
	for _, bits := range []int{-1, 31, 32} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SampleBits(%d) did not panic", bits)
				}
			}()
			tr.SampleBits(bits)
		}()
	}
}

// TestWitnessConditionMatchesCheckWitness: the grinder's direct condition equals CheckWitness on a
// clone, for every absorb position.
func TestWitnessConditionMatchesCheckWitness(t *testing.T) {
	for pending := 0; pending < 8; pending++ {
		var tr Transcript
		observeRange(&tr, 100, 107) // permuted; sample_idx = 8
		tr.Sample()                 // partially read outputs, then pending observes
		observeRange(&tr, 200, 200+uint32(pending)-1)
		if int(tr.absorbIdx) != pending {
			t.Fatalf("absorb_idx %d, want %d", tr.absorbIdx, pending)
		}
		for _, bits := range []int{1, 2, 3} {
			mask := uint32(1)<<bits - 1
			hits := 0
			for w := uint32(0); w < 150; w++ {
				x := field.Fp(w * 13421771 % field.P)
				cl := tr
				want := cl.CheckWitness(bits, x)
				if got := WitnessOK(&tr.state, int(tr.absorbIdx), mask, x); got != want {
					t.Fatalf("pending %d bits %d w %d: fast %v, CheckWitness %v", pending, bits, x, got, want)
				}
				if want {
					hits++
				}
			}
			if hits == 0 {
				t.Fatalf("pending %d bits %d: no hits, test is vacuous", pending, bits)
			}
		}
	}
}

func TestCopyClones(t *testing.T) {
	var a Transcript
	observeRange(&a, 1, 11)
	b := a
	a.Observe(99)
	x := a.Sample()
	b.Observe(99)
	if y := b.Sample(); x != y {
		t.Fatalf("clone diverged: %d vs %d", x, y)
	}
	c := a
	c.Observe(1)
	if a.Sample() == c.Sample() {
		t.Fatal("clone and original should differ after different observes")
	}
}

// golden runs a fixed script of operations and writes every output as a line.
func golden() []byte {
	var b bytes.Buffer
	var tr Transcript
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# transcript golden script; regenerate with: go test ./internal/transcript -update")
	p("sample = %d", tr.Sample())
	tr.Observe(7)
	p("observe 7; sample = %d", tr.Sample())
	p("sample_ext = %v", tr.SampleExt())
	tr.ObserveExt(field.Fp4{1, 2, 3, field.Fp(field.P - 1)})
	p("observe_ext [1 2 3 p-1]; sample_bits(5) = %d", tr.SampleBits(5))
	d := poseidon2.HashSlice([]field.Fp{10, 20, 30})
	tr.ObserveDigest(d)
	p("observe_digest hash_slice([10 20 30]); sample = %d", tr.Sample())
	for i := range 9 {
		p("sample[%d] = %d", i, tr.Sample())
	}
	for _, bits := range []int{0, 1, 3, 6, 10} {
		p("grind(%d) = %d; sample = %d", bits, tr.Grind(bits), tr.Sample())
	}
	tr.Observe(1)
	tr.Observe(2)
	p("observe 1 2; grind(7) = %d; sample_ext = %v", tr.Grind(7), tr.SampleExt())
	for i := range 7 {
		tr.Observe(field.Fp(i))
	}
	p("observe 0..6; grind(9) = %d; sample_bits(30) = %d", tr.Grind(9), tr.SampleBits(30))
	p("check_witness(4, 0) = %v; sample = %d", tr.CheckWitness(4, 0), tr.Sample())
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	got := golden()
	if *update {
		if err := os.WriteFile(goldenFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("transcript golden output differs:\n--- got\n%s--- want\n%s", got, want)
	}
}

// runOps interprets data as a sequence of operations on tr, returning their outputs.
func runOps(tr *Transcript, data []byte) []uint64 {
	var out []uint64
	for i := 0; i < len(data); i++ {
		op := data[i]
		arg := uint32(0)
		if i+1 < len(data) {
			arg = uint32(data[i+1])
		}
		switch op % 7 {
		case 0:
			tr.Observe(field.New(arg * 0x01000193))
			i++
		case 1:
			out = append(out, uint64(tr.Sample()))
		case 2:
			tr.ObserveExt(field.Fp4{field.Fp(arg), 1, 2, 3})
			i++
		case 3:
			for _, c := range tr.SampleExt() {
				out = append(out, uint64(c))
			}
		case 4:
			out = append(out, uint64(tr.SampleBits(int(arg%(MaxBits+1)))))
			i++
		case 5:
			out = append(out, uint64(tr.Grind(int(arg%5))))
			i++
		case 6:
			ok := tr.CheckWitness(int(arg%4), field.Fp(arg))
			out = append(out, map[bool]uint64{false: 0, true: 1}[ok])
			i++
		}
	}
	return out
}

func FuzzTranscript(f *testing.F) {
	f.Add([]byte{0, 1, 1, 3, 5, 4, 4, 30}, uint8(3))
	f.Add([]byte{2, 9, 2, 9, 5, 3, 6, 2, 1}, uint8(0))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		if len(data) > 256 {
			data = data[:256]
		}
		k := min(int(cut), len(data))
		var tr Transcript
		runOps(&tr, data[:k])
		clone := tr
		a := runOps(&tr, data[k:])
		b := runOps(&clone, data[k:])
		if fmt.Sprint(a) != fmt.Sprint(b) || !tr.Same(&clone) {
			t.Fatalf("clone diverged: %v vs %v", a, b)
		}
		if tr.absorbIdx >= rate || tr.sampleIdx > rate {
			t.Fatalf("bad indices %d %d", tr.absorbIdx, tr.sampleIdx)
		}
	})
}

func BenchmarkObserveSample(b *testing.B) {
	var tr Transcript
	for b.Loop() {
		tr.Observe(1)
		tr.Sample()
	}
}

// BenchmarkGrind16 grinds 16 bits from a fixed state (so every iteration does the same work) and
// reports candidates per second: (smallest witness + 1) per grind, a lower bound on the
// permutations done, since a chunk may evaluate a few candidates past the witness.
func BenchmarkGrind16(b *testing.B) {
	var tr Transcript
	observeRange(&tr, 1, 3)
	cl := tr
	w := cl.Grind(16)
	for b.Loop() {
		cl = tr
		cl.Grind(16)
	}
	b.ReportMetric(float64(w)+1, "witness+1")
	b.ReportMetric(float64(uint64(w)+1)*float64(b.N)/b.Elapsed().Seconds(), "witnesses/s")
}

// TestObserveSliceMatchesObserve: ObserveSlice of any length from any absorb position leaves the
// transcript as the same Observes one by one would, samples included.
func TestObserveSliceMatchesObserve(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b Transcript
	for step := 0; step < 400; step++ {
		xs := make([]field.Fp, r.IntN(40))
		for i := range xs {
			xs[i] = field.Fp(r.Uint32N(field.P))
		}
		a.ObserveSlice(xs)
		for _, x := range xs {
			b.Observe(x)
		}
		if !a.Same(&b) {
			t.Fatalf("step %d (%d values): %+v, want %+v", step, len(xs), a, b)
		}
		if r.IntN(3) == 0 {
			if x, y := a.Sample(), b.Sample(); x != y {
				t.Fatalf("step %d: sample %v, want %v", step, x, y)
			}
		}
	}
}

// TestAbsorberTranscriptMatchesNew: a transcript with an absorber (here poseidon2.Absorb behind a
// counter, and the package's SIMD absorb where the CPU has one) gives New's samples and states
// through any mix of observes, long observes and samples, and its single permutations go
// through the absorber.
func TestAbsorberTranscriptMatchesNew(t *testing.T) {
	calls := 0
	counting := func(state *[poseidon2.Width]field.Fp, idx int, data []field.Fp) int {
		calls++
		return poseidon2.Absorb(state, idx, data)
	}
	absorbers := map[string]poseidon2.Absorber{"counting": counting}
	if a := poseidon2.SIMDAbsorber(); a != nil {
		absorbers["simd"] = a
	}
	for name, a := range absorbers {
		r := rand.New(rand.NewPCG(5, 6))
		ref, got := New(), NewWith(a)
		for step := range 2000 {
			switch r.IntN(4) {
			case 0:
				x := field.Fp(r.Uint32N(field.P))
				ref.Observe(x)
				got.Observe(x)
			case 1:
				xs := make([]field.Fp, r.IntN(3*poseidon2.AbsorbMin))
				for i := range xs {
					xs[i] = field.Fp(r.Uint32N(field.P))
				}
				ref.ObserveSlice(xs)
				got.ObserveSlice(xs)
			case 2:
				if x, y := got.SampleExt(), ref.SampleExt(); x != y {
					t.Fatalf("%s, step %d: SampleExt %v, want %v", name, step, x, y)
				}
			default:
				if x, y := got.Sample(), ref.Sample(); x != y {
					t.Fatalf("%s, step %d: Sample %v, want %v", name, step, x, y)
				}
			}
			if !got.Same(&ref) {
				t.Fatalf("%s, step %d: state %+v, want %+v", name, step, got, ref)
			}
		}
	}
	tr := NewWith(counting)
	calls = 0
	for i := range rate {
		tr.Observe(field.Fp(i))
	}
	tr.Sample()
	tr.Observe(1)
	tr.Sample()
	if calls != 2 {
		t.Errorf("8 observes, a sample, an observe and a sample: %d absorber calls, want 2 (the single permutations)", calls)
	}
}

// TestSetState: a transcript put in another's state (State, then SetState) samples as it does,
// keeps its own absorber, and bad indices or values are refused.
func TestSetState(t *testing.T) {
	var a Transcript
	for i := range 11 {
		a.Observe(field.Fp(i + 1))
	}
	a.Sample()
	st, ai, si := a.State()
	b := NewWith(poseidon2.Absorb)
	if err := b.SetState(st, ai, si); err != nil {
		t.Fatal(err)
	}
	if !b.Same(&a) || b.absorb == nil {
		t.Fatalf("after SetState: %+v, want %+v with the absorber kept", b, a)
	}
	for range 20 {
		if x, y := b.Sample(), a.Sample(); x != y {
			t.Fatalf("sample %v, want %v", x, y)
		}
	}
	bad := st
	bad[3] = field.Fp(field.P)
	for _, c := range []struct {
		st     [poseidon2.Width]field.Fp
		ai, si int
	}{{st, -1, 0}, {st, 8, 0}, {st, 0, 9}, {st, 0, -1}, {bad, 0, 0}} {
		before := b
		if err := b.SetState(c.st, c.ai, c.si); err == nil {
			t.Errorf("SetState(indices %d, %d) accepted", c.ai, c.si)
		}
		if !b.Same(&before) {
			t.Errorf("a refused SetState changed the transcript")
		}
	}
}
