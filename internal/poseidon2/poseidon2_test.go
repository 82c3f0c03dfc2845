package poseidon2

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

const vectorsFile = "testdata/poseidon2_babybear16_vectors.txt"

// vector is one "key = values" line of the vectors file.
type vector struct {
	section string // e.g. "A", "E2"
	key     string
	value   string // raw right-hand side
	line    int
}

// readVectors parses the "key = values" lines of the spec's vectors file. Headings "## X. ..."
// set the section; other '#' lines are comments.
func readVectors(t testing.TB, path string) []vector {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []vector
	section := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "## "); ok {
			section, _, _ = strings.Cut(rest, ".")
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			continue // e.g. hex continuation lines of section F
		}
		out = append(out, vector{section, strings.TrimSpace(k), strings.TrimSpace(v), ln})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseFps reads whitespace-separated canonical values, ignoring '[', ']', ',' and a trailing
// "(comment)".
func parseFps(t testing.TB, s string) []field.Fp {
	t.Helper()
	if i := strings.Index(s, "("); i >= 0 {
		s = s[:i]
	}
	s = strings.NewReplacer("[", " ", "]", " ", ",", " ").Replace(s)
	var out []field.Fp
	for _, w := range strings.Fields(s) {
		v, err := strconv.ParseUint(w, 10, 32)
		if err != nil {
			t.Fatalf("bad value %q: %v", w, err)
		}
		x, err := field.FromCanonical(uint32(v))
		if err != nil {
			t.Fatalf("bad value %q: %v", w, err)
		}
		out = append(out, x)
	}
	return out
}

func toState(t testing.TB, v []field.Fp) [Width]field.Fp {
	t.Helper()
	if len(v) != Width {
		t.Fatalf("state has %d values, want %d", len(v), Width)
	}
	return [Width]field.Fp(v)
}

func toDigest(t testing.TB, v []field.Fp) Digest {
	t.Helper()
	if len(v) != DigestSize {
		t.Fatalf("digest has %d values, want %d", len(v), DigestSize)
	}
	return Digest(v)
}

// TestVectors checks sections A (Plonky3 KAT), B (permutations) and C (hash_slice, compress).
func TestVectors(t *testing.T) {
	vs := readVectors(t, vectorsFile)
	inputs := map[string][Width]field.Fp{}
	counts := map[string]int{}
	for _, v := range vs {
		switch v.section {
		case "A", "B":
			name, tag, _ := strings.Cut(v.key, "[")
			tag = "[" + tag
			switch name {
			case "perm.input":
				inputs[tag] = toState(t, parseFps(t, v.value))
			case "perm.output":
				in, ok := inputs[tag]
				if !ok {
					t.Fatalf("line %d: output without input", v.line)
				}
				want := toState(t, parseFps(t, v.value))
				got := in
				Permute(&got)
				if got != want {
					t.Errorf("line %d: Permute(%v) = %v, want %v", v.line, in, got, want)
				}
				counts[v.section]++
			default:
				t.Fatalf("line %d: unexpected key %q", v.line, v.key)
			}
		case "C":
			want := toDigest(t, parseFps(t, v.value))
			switch {
			case strings.HasPrefix(v.key, "hash_slice("):
				arg := strings.TrimSuffix(strings.TrimPrefix(v.key, "hash_slice("), ")")
				in := parseFps(t, arg)
				if got := HashSlice(in); got != want {
					t.Errorf("line %d: HashSlice(%v) = %v, want %v", v.line, in, got, want)
				}
			case strings.HasPrefix(v.key, "compress("):
				arg := strings.TrimSuffix(strings.TrimPrefix(v.key, "compress("), ")")
				l, r, ok := strings.Cut(arg, "],")
				if !ok {
					t.Fatalf("line %d: cannot split %q", v.line, arg)
				}
				ld, rd := toDigest(t, parseFps(t, l)), toDigest(t, parseFps(t, r))
				if got := Compress(ld, rd); got != want {
					t.Errorf("line %d: Compress = %v, want %v", v.line, got, want)
				}
			default:
				t.Fatalf("line %d: unexpected key %q", v.line, v.key)
			}
			counts["C"]++
		}
	}
	// The file has 1 KAT in A, 2 permutations in B, 6 hash_slice + 1 compress in C.
	if counts["A"] != 1 || counts["B"] != 2 || counts["C"] != 7 {
		t.Fatalf("checked %v vectors, want A:1 B:2 C:7", counts)
	}
}

// TestGeneratedConstantsUpToDate re-reads data/ and compares with constants_gen.go, so a data
// change without `go generate` fails.
func TestGeneratedConstantsUpToDate(t *testing.T) {
	f, err := os.Open("data/poseidon2_babybear16_constants.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := map[string][]field.Fp{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# SECTION "); ok {
			cur, _, _ = strings.Cut(rest, ":")
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sections[cur] = append(sections[cur], parseFps(t, line)...)
	}
	var ei, ef []field.Fp
	for r := range rcExternalInitial {
		ei = append(ei, rcExternalInitial[r][:]...)
		ef = append(ef, rcExternalFinal[r][:]...)
	}
	for _, c := range []struct {
		name string
		got  []field.Fp
	}{
		{"EXTERNAL_INITIAL", ei},
		{"INTERNAL", rcInternal[:]},
		{"EXTERNAL_FINAL", ef},
		{"INTERNAL_DIAGONAL", internalDiag[:]},
		{"EXTERNAL_MAT4", []field.Fp{2, 3, 1, 1, 1, 2, 3, 1, 1, 1, 2, 3, 3, 1, 1, 2}},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(sections[c.name]) {
			t.Errorf("section %s differs from the generated table; run go generate ./internal/poseidon2", c.name)
		}
	}
}

// TestInternalDiagonal checks V against the fractions of spec A §2.4.
func TestInternalDiagonal(t *testing.T) {
	inv2 := field.InvTwo
	pow := func(k int) field.Fp { return inv2.Exp(uint64(k)) } // 1/2^k
	want := [Width]field.Fp{
		field.NewInt(-2), 1, 2, pow(1), 3, 4, pow(1).Neg(), field.NewInt(-3), field.NewInt(-4),
		pow(8), pow(2), pow(3), pow(27), pow(8).Neg(), pow(4).Neg(), pow(27).Neg(),
	}
	if internalDiag != want {
		t.Fatalf("internal diagonal %v, want %v", internalDiag, want)
	}
}

// refPermute is a direct transcription of spec A §2.2–2.4 with field.Fp arithmetic (matrix
// products written out), independent of the lazy-reduction code in Permute.
func refPermute(s *[Width]field.Fp) {
	m4 := [4][4]field.Fp{{2, 3, 1, 1}, {1, 2, 3, 1}, {1, 1, 2, 3}, {3, 1, 1, 2}}
	ext := func() {
		var y [Width]field.Fp
		for i := 0; i < Width; i++ {
			for j := 0; j < Width; j++ {
				c := m4[i%4][j%4]
				if i/4 == j/4 {
					c = c.Double()
				}
				y[i] = y[i].Add(c.Mul(s[j]))
			}
		}
		*s = y
	}
	ext()
	for r := 0; r < 4; r++ {
		for i := range s {
			s[i] = s[i].Add(rcExternalInitial[r][i]).Exp(7)
		}
		ext()
	}
	for r := 0; r < 13; r++ {
		s[0] = s[0].Add(rcInternal[r]).Exp(7)
		var sum field.Fp
		for _, x := range s {
			sum = sum.Add(x)
		}
		for i := range s {
			s[i] = sum.Add(internalDiag[i].Mul(s[i]))
		}
	}
	for r := 0; r < 4; r++ {
		for i := range s {
			s[i] = s[i].Add(rcExternalFinal[r][i]).Exp(7)
		}
		ext()
	}
}

func TestPermuteMatchesReference(t *testing.T) {
	var s [Width]field.Fp
	for trial := 0; trial < 50; trial++ {
		for i := range s {
			s[i] = field.NewU64(uint64(trial)*0x9E3779B97F4A7C15 + uint64(i)*0xD1B54A32D192ED03)
		}
		if trial == 1 {
			for i := range s {
				s[i] = field.Fp(field.P - 1) // maximal lanes stress the lazy reduction bounds
			}
		}
		a, b := s, s
		Permute(&a)
		refPermute(&b)
		if a != b {
			t.Fatalf("trial %d: Permute %v, reference %v", trial, a, b)
		}
	}
}

func TestPermuteDistinctOutputs(t *testing.T) {
	seen := map[[Width]field.Fp]int{}
	for k := 0; k < 64; k++ {
		var s [Width]field.Fp
		s[k%Width] = field.Fp(k / Width) // unit-like inputs differing in one lane
		s[(k*7)%Width] = s[(k*7)%Width].Add(field.Fp(k))
		in := s
		Permute(&s)
		for i := range s {
			if s[i] >= field.Fp(field.P) {
				t.Fatalf("non-canonical output lane %d: %d", i, s[i])
			}
		}
		if j, dup := seen[s]; dup {
			t.Fatalf("inputs %d and %d (%v) collide", j, k, in)
		}
		seen[s] = k
	}
}

func TestHashSliceEdgeCases(t *testing.T) {
	if HashSlice(nil) != (Digest{}) {
		t.Fatal("empty input must hash to zero")
	}
	// A partial final block keeps the previous permutation output in s[len..8).
	v := make([]field.Fp, 11)
	for i := range v {
		v[i] = field.Fp(i + 100)
	}
	var s [Width]field.Fp
	copy(s[:], v[:8])
	Permute(&s)
	copy(s[:], v[8:])
	Permute(&s)
	if got := HashSlice(v); got != Digest(s[:8]) {
		t.Fatalf("HashSlice(11) = %v, want %v", got, Digest(s[:8]))
	}
	// HashSlice must not modify its input.
	for i := range v {
		if v[i] != field.Fp(i+100) {
			t.Fatal("input modified")
		}
	}
}

func TestTreeCompress(t *testing.T) {
	var h [4]Digest
	for i := range h {
		h[i] = HashSlice([]field.Fp{field.Fp(i)})
	}
	if got := TreeCompress(h[:1]); got != h[0] {
		t.Fatalf("1 leaf: %v", got)
	}
	if got, want := TreeCompress(h[:2]), Compress(h[0], h[1]); got != want {
		t.Fatalf("2 leaves: %v, want %v", got, want)
	}
	want := Compress(Compress(h[0], h[1]), Compress(h[2], h[3]))
	orig := h
	if got := TreeCompress(h[:]); got != want {
		t.Fatalf("4 leaves: %v, want %v", got, want)
	}
	if h != orig {
		t.Fatal("TreeCompress modified its input")
	}
	for _, n := range []int{0, 3, 6} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("TreeCompress(%d leaves) did not panic", n)
				}
			}()
			TreeCompress(make([]Digest, n))
		}()
	}
}

func BenchmarkPermute(b *testing.B) {
	var s [Width]field.Fp
	for i := range s {
		s[i] = field.Fp(i)
	}
	for b.Loop() {
		Permute(&s)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "perms/s")
}

func BenchmarkHashSlice(b *testing.B) {
	const n = 2633 // a Keccak trace row width
	v := make([]field.Fp, n)
	for i := range v {
		v[i] = field.Fp(i)
	}
	b.SetBytes(4 * n)
	for b.Loop() {
		HashSlice(v)
	}
	perms := (n + Rate - 1) / Rate
	b.ReportMetric(float64(b.N*perms)/b.Elapsed().Seconds(), "perms/s")
}

func BenchmarkCompress(b *testing.B) {
	var l, r Digest
	for i := range l {
		l[i], r[i] = field.Fp(i), field.Fp(i+8)
	}
	for b.Loop() {
		l = Compress(l, r)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "perms/s")
}

// TestHashSliceAbsorbPath: HashSliceWith's path through an absorber (here Absorb itself) gives the digest of its block loop at every length around the
// block size, and Absorb returns the loop's index and state.
func TestHashSliceAbsorbPath(t *testing.T) {
	v := make([]field.Fp, 70)
	for i := range v {
		v[i] = field.Fp(uint32(i) * 2654435761 % field.P)
	}
	v[5], v[17] = field.Fp(field.P-1), 0
	want := make([]Digest, len(v)+1)
	for n := range want {
		want[n] = HashSlice(v[:n])
	}
	for n := range want {
		if got := HashSliceWith(Absorb, v[:n]); got != want[n] {
			t.Fatalf("n=%d: %v through the absorber, %v through the block loop", n, got, want[n])
		}
	}
}
