package stark

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
)

// sectionFParams are the section F parameters (spec A §6.9): l_skip=2 n_stack=5 log_blowup=1 k=2,
// num_queries [3 2 2].
func sectionFParams() params.SystemParams {
	return params.SystemParams{
		LSkip: 2, NStack: 5, WStack: 8, LogBlowup: 1,
		Whir: params.WhirConfig{K: 2, Rounds: []params.WhirRoundConfig{{NumQueries: 3}, {NumQueries: 2}, {NumQueries: 2}},
			MuPowBits: 2, QueryPhasePowBits: 3, FoldingPowBits: 1, Proximity: params.UniqueDecoding()},
		Logup:               params.LogUpSecurityParameters{MaxInteractionCount: 1 << 20, LogMaxMessageLength: 7, PowBits: 1},
		MaxConstraintDegree: 3,
	}
}

func codecPreset(t testing.TB, name string, h int) params.SystemParams {
	t.Helper()
	p, _, err := params.Preset(name, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type codecGen struct{ r *rand.Rand }

func (g codecGen) fp() field.Fp { return field.Fp(g.r.Uint32N(field.P)) }
func (g codecGen) fp4() field.Fp4 {
	return field.Fp4{g.fp(), g.fp(), g.fp(), g.fp()}
}
func (g codecGen) digest() (d Digest) {
	for i := range d {
		d[i] = g.fp()
	}
	return d
}
func (g codecGen) fps(n int) []field.Fp {
	v := make([]field.Fp, n)
	for i := range v {
		v[i] = g.fp()
	}
	return v
}
func (g codecGen) fp4s(n int) []field.Fp4 {
	v := make([]field.Fp4, n)
	for i := range v {
		v[i] = g.fp4()
	}
	return v
}
func (g codecGen) digests(n int) []Digest {
	v := make([]Digest, n)
	for i := range v {
		v[i] = g.digest()
	}
	return v
}

// whir returns a random WhirProof of the exact shape of p and widths.
func (g codecGen) whir(p params.SystemParams, widths []int) WhirProof {
	R, k := p.NumWhirRounds(), p.Whir.K
	m := p.LogStackedHeight()
	w := WhirProof{
		MuPowWitness:             g.fp(),
		WhirSumcheckPolys:        make([][2]field.Fp4, R*k),
		CodewordCommits:          g.digests(R - 1),
		OODValues:                g.fp4s(R - 1),
		FoldingPowWitnesses:      g.fps(R * k),
		QueryPhasePowWitnesses:   g.fps(R),
		InitialRoundOpenedRows:   make([][][][]field.Fp, len(widths)),
		InitialRoundMerkleProofs: make([][][]Digest, len(widths)),
		CodewordOpenedValues:     make([][][]field.Fp4, R-1),
		CodewordMerkleProofs:     make([][][]Digest, R-1),
		FinalPoly:                g.fp4s(1 << p.LogFinalPolyLen()),
	}
	for i := range w.WhirSumcheckPolys {
		w.WhirSumcheckPolys[i] = [2]field.Fp4{g.fp4(), g.fp4()}
	}
	nq0 := p.Whir.Rounds[0].NumQueries
	for j, wd := range widths {
		w.InitialRoundOpenedRows[j] = make([][][]field.Fp, nq0)
		w.InitialRoundMerkleProofs[j] = make([][]Digest, nq0)
		for q := range nq0 {
			rows := make([][]field.Fp, 1<<k)
			for t := range rows {
				rows[t] = g.fps(wd)
			}
			w.InitialRoundOpenedRows[j][q] = rows
			w.InitialRoundMerkleProofs[j][q] = g.digests(m + p.LogBlowup - k)
		}
	}
	for r := 1; r < R; r++ {
		nq := p.Whir.Rounds[r].NumQueries
		w.CodewordOpenedValues[r-1] = make([][]field.Fp4, nq)
		w.CodewordMerkleProofs[r-1] = make([][]Digest, nq)
		for q := range nq {
			w.CodewordOpenedValues[r-1][q] = g.fp4s(1 << k)
			w.CodewordMerkleProofs[r-1][q] = g.digests(m + p.LogBlowup - k - r)
		}
	}
	return w
}

func (g codecGen) stacking(p params.SystemParams, widths []int) StackingProof {
	st := StackingProof{
		UnivariateRoundCoeffs: g.fp4s(2*((1<<p.LSkip)-1) + 1),
		SumcheckRoundPolys:    make([][2]field.Fp4, p.NStack),
		StackingOpenings:      make([][]field.Fp4, len(widths)),
	}
	for i := range st.SumcheckRoundPolys {
		st.SumcheckRoundPolys[i] = [2]field.Fp4{g.fp4(), g.fp4()}
	}
	for j, w := range widths {
		st.StackingOpenings[j] = g.fp4s(w)
	}
	return st
}

// codecShape describes the VK-dependent part of a random proof.
type codecShape struct {
	widths     []int   // stacked widths of the commitments (common main first)
	present    []bool  // per AIR
	cached     []int   // cached commitments per AIR
	pvs        []int   // public values per AIR
	gkrLayers  int     // L
	nMax       int     // batch sumcheck rounds
	partCounts [][]int // openings per part, per present AIR
}

func codecSmallShape() codecShape {
	return codecShape{
		widths:     []int{2, 1},
		present:    []bool{true, false, true, false, true},
		cached:     []int{0, 0, 1, 0, 0},
		pvs:        []int{2, 0, 0, 0, 1},
		gkrLayers:  4,
		nMax:       2,
		partCounts: [][]int{{2}, {4, 2}, {1}},
	}
}

func (g codecGen) proof(p params.SystemParams, s codecShape) *Proof {
	pr := &Proof{
		CommonMainCommit: g.digest(),
		TraceVData:       make([]*TraceVData, len(s.present)),
		PublicValues:     make([][]field.Fp, len(s.present)),
	}
	P := 0
	for i, ok := range s.present {
		pr.PublicValues[i] = g.fps(s.pvs[i])
		if ok {
			P++
			pr.TraceVData[i] = &TraceVData{LogHeight: g.r.IntN(p.LogStackedHeight() + 1), CachedCommitments: g.digests(s.cached[i])}
		}
	}
	pr.GKR = GkrProof{LogupPowWitness: g.fp(), Q0Claim: g.fp4(), ClaimsPerLayer: make([]GkrLayerClaims, s.gkrLayers),
		SumcheckPolys: make([][][3]field.Fp4, max(s.gkrLayers-1, 0))}
	for i := range pr.GKR.ClaimsPerLayer {
		pr.GKR.ClaimsPerLayer[i] = GkrLayerClaims{g.fp4(), g.fp4(), g.fp4(), g.fp4()}
	}
	for i := range pr.GKR.SumcheckPolys {
		l := make([][3]field.Fp4, i+1)
		for j := range l {
			l[j] = [3]field.Fp4{g.fp4(), g.fp4(), g.fp4()}
		}
		pr.GKR.SumcheckPolys[i] = l
	}
	d := p.MaxConstraintDegree
	bc := BatchConstraintProof{
		NumeratorTermPerAir:   g.fp4s(P),
		DenominatorTermPerAir: g.fp4s(P),
		UnivariateRoundCoeffs: g.fp4s((d+1)*((1<<p.LSkip)-1) + 1),
		SumcheckRoundPolys:    make([][]field.Fp4, s.nMax),
		ColumnOpenings:        make([][][]field.Fp4, P),
	}
	for i := range bc.SumcheckRoundPolys {
		bc.SumcheckRoundPolys[i] = g.fp4s(d + 1)
	}
	for i := range P {
		bc.ColumnOpenings[i] = make([][]field.Fp4, len(s.partCounts[i]))
		for j, n := range s.partCounts[i] {
			bc.ColumnOpenings[i][j] = g.fp4s(n)
		}
	}
	pr.BatchConstraint = bc
	pr.Stacking = g.stacking(p, s.widths)
	pr.Whir = g.whir(p, s.widths)
	return pr
}

func newCodecGen(seed uint64) codecGen { return codecGen{rand.New(rand.NewPCG(seed, 0x5eed))} }

func codecCheckShapes(t *testing.T, p params.SystemParams, s codecShape, pr *Proof) {
	t.Helper()
	if err := CheckWhirShape(p, s.widths, &pr.Whir); err != nil {
		t.Fatal(err)
	}
	if err := CheckStackingShape(p, s.widths, &pr.Stacking); err != nil {
		t.Fatal(err)
	}
	if err := CheckGkrShape(s.gkrLayers, &pr.GKR); err != nil {
		t.Fatal(err)
	}
	if err := CheckBatchConstraintShape(p, p.MaxConstraintDegree, len(s.partCounts), s.nMax, s.partCounts, &pr.BatchConstraint); err != nil {
		t.Fatal(err)
	}
}

func TestProofRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		p    params.SystemParams
		s    codecShape
	}{
		{"toy", sectionFParams(), codecSmallShape()},
		{"test", codecPreset(t, "test", 0), codecSmallShape()},
		{"test-3commits", codecPreset(t, "test", 0), codecShape{widths: []int{5, 1, 2}, present: []bool{true, true, false, false, false, false, false, false, true},
			cached: []int{1, 0, 0, 0, 0, 0, 0, 0, 1}, pvs: []int{0, 3, 0, 0, 0, 0, 0, 0, 0}, gkrLayers: 0, nMax: 0, partCounts: [][]int{{3, 1}, {7}, {2, 4}}}},
		{"app-100bit(21)", codecPreset(t, "app-100bit", 21), codecShape{widths: []int{3, 1}, present: []bool{true, true},
			cached: []int{1, 0}, pvs: []int{8, 0}, gkrLayers: 22, nMax: 17, partCounts: [][]int{{6, 2}, {10}}}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newCodecGen(uint64(i))
			pr := g.proof(c.p, c.s)
			codecCheckShapes(t, c.p, c.s, pr)
			b, err := pr.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			lim := LimitsFor(c.p)
			got, err := DecodeProof(b, &lim)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, pr) {
				t.Fatal("decoded proof differs")
			}
			b2, err := got.MarshalBinary()
			if err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs (err %v)", err)
			}
			var u Proof
			if err := u.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(&u, pr) {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			// parts on their own
			wb, err := EncodeWhirProof(&pr.Whir)
			if err != nil {
				t.Fatal(err)
			}
			w, err := DecodeWhirProof(wb, &lim)
			if err != nil || !reflect.DeepEqual(w, &pr.Whir) {
				t.Fatalf("whir round trip: %v", err)
			}
			sb, err := EncodeStackingProof(&pr.Stacking)
			if err != nil {
				t.Fatal(err)
			}
			st, err := DecodeStackingProof(sb, &lim)
			if err != nil || !reflect.DeepEqual(st, &pr.Stacking) {
				t.Fatalf("stacking round trip: %v", err)
			}
			if !bytes.HasSuffix(b, wb) {
				t.Fatal("proof encoding does not end with the WHIR encoding")
			}
			t.Logf("%d bytes (whir %d)", len(b), len(wb))
		})
	}
}

// TestWhirSize checks the §7.8 size bookkeeping for app(21) with widths W_j.
func TestWhirSize(t *testing.T) {
	p := codecPreset(t, "app-100bit", 21)
	widths := []int{3, 1}
	w := newCodecGen(9).whir(p, widths)
	b, err := EncodeWhirProof(&w)
	if err != nil {
		t.Fatal(err)
	}
	C, sumW := 2, 4
	want := 193*16*4*sumW + C*193*18*32 + 88*16*16 + 81*16*16 + 88*17*32 + 81*16*32 + 512*16
	// fixed part: mu 4, S 4 + 12·32, commits 4 + 2·32, ood 2·16, fold 12·4, qpow 3·4, C 4, nq0 4,
	// depth0 4, widths 2·4, nq1 4, nq2 4, depth1 4, final len 4
	want += 4 + 4 + 12*32 + 4 + 2*32 + 2*16 + 12*4 + 3*4 + 4 + 4 + 4 + 2*4 + 4 + 4 + 4 + 4
	if len(b) != want {
		t.Fatalf("app(21) WHIR encoding is %d bytes, §7.8 bookkeeping gives %d", len(b), want)
	}
}

func readSectionF(t testing.TB) []byte {
	t.Helper()
	f, err := os.Open("testdata/whir_section_f.hex")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			sb.WriteString(l)
		}
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSectionFWhirEncoding(t *testing.T) {
	b := readSectionF(t)
	if len(b) != 2532 {
		t.Fatalf("section F: %d bytes, want 2532", len(b))
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != "3f1d3964d9aa892cdf6576143ef55ddc651bcd986aa5a2708f3203ef87d0a095" {
		t.Fatal("section F sha256 mismatch")
	}
	p := sectionFParams()
	lim := LimitsFor(p)
	w, err := DecodeWhirProof(b, &lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWhirShape(p, []int{2, 1}, w); err != nil {
		t.Fatal(err)
	}
	if w.MuPowWitness != 0 || !reflect.DeepEqual(w.FoldingPowWitnesses, []field.Fp{5, 2, 0, 2, 0, 0}) ||
		!reflect.DeepEqual(w.QueryPhasePowWitnesses, []field.Fp{4, 16, 2}) {
		t.Fatalf("PoW witnesses: %v %v %v", w.MuPowWitness, w.FoldingPowWitnesses, w.QueryPhasePowWitnesses)
	}
	if w.WhirSumcheckPolys[0][0] != (field.Fp4{291558917, 1665721504, 1442929055, 1967490617}) ||
		w.CodewordCommits[1] != (Digest{1329076439, 721641520, 1283807479, 1966115318, 1264836898, 957300646, 87424650, 1833946676}) ||
		w.OODValues[1] != (field.Fp4{740268458, 1327129976, 168978788, 1256991589}) ||
		!reflect.DeepEqual(w.FinalPoly, []field.Fp4{{1076175716, 1881670909, 333611629, 1052754246}, {263370833, 554273071, 171098390, 716504069}}) {
		t.Fatal("decoded section F values differ from the listed ones")
	}
	b2, err := EncodeWhirProof(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatal("section F re-encoding differs")
	}
}

// smallProofBytes is a small valid encoding used by the robustness tests and fuzz seeds.
func smallProofBytes(t testing.TB) []byte {
	p := sectionFParams()
	p.Whir.Rounds = []params.WhirRoundConfig{{NumQueries: 2}, {NumQueries: 1}, {NumQueries: 1}}
	s := codecSmallShape()
	s.gkrLayers = 3
	b, err := newCodecGen(42).proof(p, s).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func asDecodeError(t *testing.T, err error, what string) *DecodeError {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("%s: error %v (%T) is not a *DecodeError", what, err, err)
	}
	return de
}

func TestDecodeTruncations(t *testing.T) {
	b := smallProofBytes(t)
	for n := range len(b) {
		_, err := UnmarshalProof(b[:n])
		if err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(b))
		}
		de := asDecodeError(t, err, "truncation")
		if de.Offset > n {
			t.Fatalf("prefix %d: offset %d beyond the input", n, de.Offset)
		}
	}
	wb := readSectionF(t)
	for n := range len(wb) {
		if _, err := DecodeWhirProof(wb[:n], nil); err == nil {
			t.Fatalf("WHIR prefix of %d bytes decoded", n)
		} else {
			asDecodeError(t, err, "whir truncation")
		}
	}
}

func TestDecodeTrailingBytes(t *testing.T) {
	b := smallProofBytes(t)
	for _, x := range []byte{0, 1, 0x7f, 0xff} {
		_, err := UnmarshalProof(append(bytes.Clone(b), x))
		de := asDecodeError(t, err, "extension")
		if de.Offset != len(b) || !strings.Contains(de.Msg, "trailing") {
			t.Fatalf("extension by %#x: %v", x, err)
		}
	}
	wb := readSectionF(t)
	if _, err := DecodeWhirProof(append(wb, 0), nil); err == nil {
		t.Fatal("WHIR with a trailing byte decoded")
	}
}

// TestDecodeMutations flips every byte several ways: the decoder must fail with a DecodeError or
// return a proof that re-encodes to the mutated bytes; never panic, never allocate much.
func TestDecodeMutations(t *testing.T) {
	b := smallProofBytes(t)
	lim := LimitsFor(sectionFParams())
	mut := make([]byte, len(b))
	for i := range b {
		for _, f := range []func(byte) byte{
			func(x byte) byte { return x ^ 1 }, func(x byte) byte { return x ^ 0x80 },
			func(byte) byte { return 0xff }, func(byte) byte { return 0 },
		} {
			copy(mut, b)
			mut[i] = f(mut[i])
			for _, l := range []*DecodeLimits{nil, &lim} {
				pr, err := DecodeProof(mut, l)
				if err != nil {
					asDecodeError(t, err, "mutation")
					continue
				}
				b2, err := pr.MarshalBinary()
				if err != nil || !bytes.Equal(b2, mut) {
					t.Fatalf("byte %d mutated: decoded, but re-encoding differs (err %v)", i, err)
				}
			}
		}
	}
}

// TestHugeLengthsDoNotAllocate writes 0xFFFFFFFF (and other large values) over every 4-byte
// window of a valid encoding and checks that decoding allocates little.
func TestHugeLengthsDoNotAllocate(t *testing.T) {
	b := smallProofBytes(t)
	mut := make([]byte, len(b))
	var before, after runtime.MemStats
	worst := uint64(0)
	for i := 0; i+4 <= len(b); i++ {
		for _, v := range []uint32{0xFFFFFFFF, 0x7FFFFFFF, 1 << 16, 1 << 20} {
			copy(mut, b)
			binary.LittleEndian.PutUint32(mut[i:], v)
			runtime.ReadMemStats(&before)
			_, _ = UnmarshalProof(mut)
			runtime.ReadMemStats(&after)
			worst = max(worst, after.TotalAlloc-before.TotalAlloc)
		}
	}
	if limit := uint64(64*len(b) + 1<<20); worst > limit {
		t.Fatalf("a decode allocated %d bytes for a %d-byte input (limit %d)", worst, len(b), limit)
	}
	t.Logf("worst allocation %d bytes for a %d-byte input", worst, len(b))

	// A bare 0xFFFFFFFF length prefix: S of a WHIR proof.
	in := []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	allocs := testing.AllocsPerRun(10, func() { _, _ = DecodeWhirProof(in, nil) })
	if allocs > 10 {
		t.Fatalf("%v allocations", allocs)
	}
	_, err := DecodeWhirProof(in, nil)
	if de := asDecodeError(t, err, "huge S"); de.Offset != 4 {
		t.Fatalf("offset %d, want 4: %v", de.Offset, err)
	}
}

// TestZeroSizeElementsBounded: nq0 queries of zero-width rows and zero-depth paths cost no
// bytes; the allocation budget must stop them.
func TestZeroSizeElementsBounded(t *testing.T) {
	le := binary.LittleEndian
	var in []byte
	in = le.AppendUint32(in, 0)             // mu
	in = le.AppendUint32(in, 0)             // S = 0
	in = le.AppendUint32(in, 0)             // no codeword commits: R = 1, k = 0
	in = le.AppendUint32(in, 0)             // query PoW
	in = le.AppendUint32(in, 1<<16)         // C
	in = le.AppendUint32(in, 1<<16)         // nq0
	in = le.AppendUint32(in, 0)             // depth0
	in = append(in, make([]byte, 4<<16)...) // widths, all 0
	in = le.AppendUint32(in, 0)             // depth1
	in = le.AppendUint32(in, 0)             // final poly
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeWhirProof(in, nil)
	runtime.ReadMemStats(&after)
	de := asDecodeError(t, err, "zero-size")
	if !strings.Contains(de.Msg, "budget") {
		t.Fatalf("unexpected error %v", err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 64*uint64(len(in))+1<<20 {
		t.Fatalf("allocated %d bytes", a)
	}
	// With the toy limits the commitment count alone is rejected.
	lim := LimitsFor(sectionFParams())
	_, err = DecodeWhirProof(in, &lim)
	if de := asDecodeError(t, err, "limits"); de.Field != "whir.num_commits" {
		t.Fatalf("unexpected error %v", err)
	}
}

func TestDecodeRejectsNonCanonical(t *testing.T) {
	b := smallProofBytes(t)
	mut := bytes.Clone(b)
	binary.LittleEndian.PutUint32(mut[4:], field.P) // common_main_commit[0]
	_, err := UnmarshalProof(mut)
	de := asDecodeError(t, err, "value ≥ p")
	var re *field.RangeError
	if de.Offset != 4 || de.Field != "common_main_commit" || !errors.As(err, &re) || re.Value != field.P {
		t.Fatalf("got %v", err)
	}
	// a value deep inside the WHIR openings of section F
	wb := readSectionF(t)
	off := len(wb) - 16 // last final_poly coefficient block
	binary.LittleEndian.PutUint32(wb[off:], 0xFFFFFFFF)
	_, err = DecodeWhirProof(wb, nil)
	if de := asDecodeError(t, err, "value ≥ p"); de.Offset != off || de.Field != "whir.final_poly" {
		t.Fatalf("got %v", err)
	}
}

func TestDecodeRejectsBitmapPadding(t *testing.T) {
	b := smallProofBytes(t) // 5 AIRs: bitmap byte at offset 4+32+4, bits 5..7 are padding
	const off = 4 + 32 + 4
	if binary.LittleEndian.Uint32(b[36:]) != 5 || b[off] != 0b10101 {
		t.Fatalf("unexpected layout: num_airs %d bitmap %08b", binary.LittleEndian.Uint32(b[36:]), b[off])
	}
	for bit := 5; bit < 8; bit++ {
		mut := bytes.Clone(b)
		mut[off] |= 1 << bit
		_, err := UnmarshalProof(mut)
		if de := asDecodeError(t, err, "padding"); de.Offset != off || !strings.Contains(de.Msg, "padding") {
			t.Fatalf("bit %d: %v", bit, err)
		}
	}
}

func TestDecodeRejectsVersionAndStructure(t *testing.T) {
	b := smallProofBytes(t)
	mut := bytes.Clone(b)
	mut[0] = 2
	if de := asDecodeError(t, errOf(UnmarshalProof(mut)), "version"); de.Offset != 0 || de.Field != "codec_version" {
		t.Fatalf("got %v", de)
	}
	le := binary.LittleEndian
	whirHead := func(S, nc, C int) []byte {
		var in []byte
		in = le.AppendUint32(in, 0)
		in = le.AppendUint32(in, uint32(S))
		in = append(in, make([]byte, 32*S)...)
		in = le.AppendUint32(in, uint32(nc))
		in = append(in, make([]byte, 32*nc+16*nc+4*S+4*(nc+1))...)
		return le.AppendUint32(in, uint32(C))
	}
	// S mod R ≠ 0
	_, err := DecodeWhirProof(append(whirHead(3, 1, 1), make([]byte, 16)...), nil)
	if de := asDecodeError(t, err, "S mod R"); de.Offset != 4 || !strings.Contains(de.Msg, "multiple") {
		t.Fatalf("got %v", err)
	}
	// C = 0
	in := whirHead(2, 1, 0)
	_, err = DecodeWhirProof(append(in, make([]byte, 16)...), nil)
	if de := asDecodeError(t, err, "C = 0"); de.Offset != len(in)-4 {
		t.Fatalf("got %v", err)
	}
	// R = 1, nq0 = 0: depth1 must be 0
	in = whirHead(1, 0, 1)
	in = le.AppendUint32(in, 0) // nq0
	in = le.AppendUint32(in, 7) // depth1
	in = le.AppendUint32(in, 0) // final poly
	_, err = DecodeWhirProof(in, nil)
	if de := asDecodeError(t, err, "depth1"); de.Field != "whir.codeword_merkle_depth" {
		t.Fatalf("got %v", err)
	}
	in[len(in)-8] = 0
	if w, err := DecodeWhirProof(in, nil); err != nil {
		t.Fatal(err)
	} else if b2, err := EncodeWhirProof(w); err != nil || !bytes.Equal(b2, in) {
		t.Fatalf("nq0 = 0 round trip: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

func TestEncodeRejectsUnrepresentable(t *testing.T) {
	p := sectionFParams()
	s := codecSmallShape()
	g := newCodecGen(3)
	cases := map[string]func(pr *Proof){
		"S mod R":        func(pr *Proof) { pr.Whir.WhirSumcheckPolys = pr.Whir.WhirSumcheckPolys[:5] },
		"C = 0":          func(pr *Proof) { pr.Whir.InitialRoundOpenedRows = nil },
		"ragged rows":    func(pr *Proof) { pr.Whir.InitialRoundOpenedRows[1][2][3] = nil },
		"ragged queries": func(pr *Proof) { pr.Whir.InitialRoundMerkleProofs[1] = pr.Whir.InitialRoundMerkleProofs[1][:1] },
		"path depth":     func(pr *Proof) { pr.Whir.CodewordMerkleProofs[1][0] = pr.Whir.CodewordMerkleProofs[1][0][1:] },
		"query pow":      func(pr *Proof) { pr.Whir.QueryPhasePowWitnesses = pr.Whir.QueryPhasePowWitnesses[:2] },
		"round1 empty":   func(pr *Proof) { pr.Whir.CodewordOpenedValues[0], pr.Whir.CodewordMerkleProofs[0] = nil, nil },
		"gkr layers":     func(pr *Proof) { pr.GKR.SumcheckPolys = pr.GKR.SumcheckPolys[:1] },
		"gkr layer len":  func(pr *Proof) { pr.GKR.SumcheckPolys[1] = pr.GKR.SumcheckPolys[1][:1] },
		"denominators":   func(pr *Proof) { pr.BatchConstraint.DenominatorTermPerAir = nil },
		"batch rounds":   func(pr *Proof) { pr.BatchConstraint.SumcheckRoundPolys[1] = nil },
		"column airs":    func(pr *Proof) { pr.BatchConstraint.ColumnOpenings = pr.BatchConstraint.ColumnOpenings[:1] },
		"value ≥ p":      func(pr *Proof) { pr.Stacking.StackingOpenings[0][0][2] = field.Fp(field.P) },
		"negative":       func(pr *Proof) { pr.TraceVData[0].LogHeight = -1 },
	}
	for name, f := range cases {
		pr := g.proof(p, s)
		f(pr)
		if _, err := pr.MarshalBinary(); !errors.Is(err, ErrUnencodable) {
			t.Errorf("%s: got %v", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
