package keccakf

import (
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"runtime"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/stdrng"
)

// plonky3Input is the Plonky3 test input in[i] = i·0x0123456789ABCDEF (keccak-air.md §11).
func plonky3Input() [25]uint64 {
	var in [25]uint64
	for i := range in {
		in[i] = uint64(i) * 0x0123456789ABCDEF
	}
	return in
}

// FIPS 202 Algorithm 5 (rc) and Algorithm 6 step 2: RC[ir] has bit 2^j−1 = rc(j + 7·ir).
func TestRCFromLFSR(t *testing.T) {
	rc := func(t int) uint64 {
		if t%255 == 0 {
			return 1
		}
		r := uint(1) // R = 10000000, R[0] is the least significant bit
		for i := 1; i <= t%255; i++ {
			r <<= 1 // R = 0 || R
			if r&0x100 != 0 {
				r ^= 0x100 | 0x71 // R[0,4,5,6] ^= R[8]; truncate to 8 bits
			}
		}
		return uint64(r & 1)
	}
	for ir := 0; ir < NumRounds; ir++ {
		var want uint64
		for j := 0; j <= 6; j++ {
			want |= rc(j+7*ir) << ((1 << j) - 1)
		}
		if RC[ir] != want {
			t.Errorf("RC[%d] = %016x, LFSR gives %016x", ir, RC[ir], want)
		}
	}
}

// FIPS 202 Algorithm 2: offsets (t+1)(t+2)/2 mod 64 along (x,y) → (y, 2x+3y).
func TestROTFromRecurrence(t *testing.T) {
	var want [5][5]int
	x, y := 1, 0
	for i := 0; i < 24; i++ {
		want[x][y] = ((i + 1) * (i + 2) / 2) % 64
		x, y = y, (2*x+3*y)%5
	}
	if ROT != want {
		t.Fatalf("ROT = %v, recurrence gives %v", ROT, want)
	}
	if ROT[0][1] != 36 || ROT[1][0] != 1 {
		t.Fatalf("ROT indexing is not [x][y]")
	}
}

func TestLayoutTiles(t *testing.T) {
	next, sum := 0, 0
	for _, g := range Groups {
		if g.First != next {
			t.Fatalf("group %s starts at %d, want %d", g.Name, g.First, next)
		}
		next += g.Width()
		sum += g.Width()
	}
	if next != NumCols || sum != 2633 || NumCols != 2633 {
		t.Fatalf("groups cover [0,%d), NumCols = %d, want 2633", next, NumCols)
	}
	// Every helper lands inside its group and each group's helper is a bijection onto it.
	byName := map[string]Group{}
	for _, g := range Groups {
		byName[g.Name] = g
	}
	seen := make([]int, NumCols)
	mark := func(group string, c int) {
		g := byName[group]
		if c < g.First || c >= g.First+g.Width() {
			t.Fatalf("%s column %d outside [%d,%d)", group, c, g.First, g.First+g.Width())
		}
		seen[c]++
	}
	for r := 0; r < 24; r++ {
		mark("step_flags", ColStepFlag(r))
	}
	mark("export", ColExport)
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			for l := 0; l < 4; l++ {
				mark("preimage", ColPreimage(x, y, l))
				mark("a", ColA(x, y, l))
				mark("a_prime_prime", ColAPrimePrime(x, y, l))
			}
			for z := 0; z < 64; z++ {
				mark("a_prime", ColAPrime(x, y, z))
			}
		}
	}
	for x := 0; x < 5; x++ {
		for z := 0; z < 64; z++ {
			mark("c", ColC(x, z))
			mark("c_prime", ColCPrime(x, z))
		}
	}
	for z := 0; z < 64; z++ {
		mark("a_prime_prime_0_0_bits", ColAPrimePrime00Bit(z))
	}
	for l := 0; l < 4; l++ {
		mark("a_prime_prime_prime_0_0_limbs", ColAPrimePrimePrime00Limb(l))
	}
	for c, n := range seen {
		if n != 1 {
			t.Fatalf("column %d addressed %d times", c, n)
		}
	}
	// Spot values from keccak-air.md §2.
	for _, tc := range []struct{ got, want int }{
		{ColPreimage(4, 4, 3), 124}, {ColA(0, 0, 0), 125}, {ColC(4, 63), 544},
		{ColCPrime(0, 0), 545}, {ColAPrime(4, 4, 63), 2464}, {ColAPrimePrime(0, 0, 0), 2465},
		{ColAPrimePrime00Bit(63), 2628}, {ColAPrimePrimePrime00Limb(3), 2632},
		{ColOut(0, 0, 0), 2629}, {ColOut(1, 0, 0), 2469},
	} {
		if tc.got != tc.want {
			t.Errorf("column %d, want %d", tc.got, tc.want)
		}
	}
}

// keccak-air.md §7 examples.
func TestRateLimbCols(t *testing.T) {
	for _, tc := range []struct{ i, in, out int }{{0, 25, 2629}, {4, 29, 2469}, {67, 92, 2532}} {
		if got := InputLimbCol(tc.i); got != tc.in {
			t.Errorf("InputLimbCol(%d) = %d, want %d", tc.i, got, tc.in)
		}
		if got := OutputLimbCol(tc.i); got != tc.out {
			t.Errorf("OutputLimbCol(%d) = %d, want %d", tc.i, got, tc.out)
		}
	}
}

// ColB against a direct reading of the definition: bit z of ROTL(v, r) is bit (z−r) mod 64 of v.
func TestColB(t *testing.T) {
	ap := plonky3Input() // any lanes, standing in for A'
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			a := (x + 3*y) % 5
			b := bits.RotateLeft64(ap[a+5*x], ROT[a][x])
			for z := 0; z < 64; z++ {
				c := ColB(x, y, z) - ColAPrime(0, 0, 0)
				lane, bit := c/64, c%64
				if (ap[lane]>>bit)&1 != (b>>z)&1 {
					t.Fatalf("ColB(%d,%d,%d) = %d reads the wrong bit", x, y, z, ColB(x, y, z))
				}
			}
		}
	}
	if ColB(0, 1, 0) != 865+64*(5*0+3)+(64-ROT[3][0])%64 {
		t.Fatalf("ColB(0,1,0) = %d", ColB(0, 1, 0))
	}
}

func TestHeight(t *testing.T) {
	for _, tc := range []struct{ n, h int }{{0, 1}, {1, 32}, {2, 64}, {3, 128}, {5, 128}, {1024, 32768}, {4096, 131072}, {16384, 524288}} {
		if got := Height(tc.n); got != tc.h {
			t.Errorf("Height(%d) = %d, want %d", tc.n, got, tc.h)
		}
	}
}

// The marshaled SHAKE state layout the oracle relies on.
func TestStdlibShakeFormat(t *testing.T) {
	h := sha3.NewSHAKE128()
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 207 || string(b[:4]) != "sha\x09" || b[4] != 168 || b[205] != 0 || b[206] != 0 {
		t.Fatalf("fresh SHAKE128 state: len %d, header %q, n %d, dir %d", len(b), b[:5], b[205], b[206])
	}
	// Absorbing 3 bytes puts them in lanes 0 and advances n.
	h.Write([]byte{1, 2, 3})
	b, _ = h.MarshalBinary()
	if len(b) != 207 || b[5] != 1 || b[6] != 2 || b[7] != 3 || b[205] != 3 || b[206] != 0 {
		t.Fatalf("after absorbing 3 bytes: state %x, n %d, dir %d", b[5:8], b[205], b[206])
	}
	if err := checkShakeFormat(b); err != nil {
		t.Fatal(err)
	}
	if err := checkShakeFormat(b[:206]); err == nil {
		t.Fatal("short state accepted")
	}
}

func TestStdlibKeccakFVectors(t *testing.T) {
	out, err := StdlibKeccakF([25]uint64{})
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != 0xF1258F7940E1DDE7 {
		t.Fatalf("Keccak-f(0)[0] = %016x", out[0])
	}
	out, err = StdlibKeccakF(plonky3Input())
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != 0xd68a506cf64b9e07 || out[1] != 0x82589e1590ac8145 || out[24] != 0xc3c420a7841c8d70 {
		t.Fatalf("Keccak-f(plonky3 input) lanes 0,1,24 = %016x %016x %016x", out[0], out[1], out[24])
	}
	// Permute gives the same.
	st := plonky3Input()
	Permute(&st)
	if st != out {
		t.Fatalf("Permute(plonky3 input) differs from the oracle")
	}
	st = [25]uint64{}
	Permute(&st)
	if st[0] != 0xF1258F7940E1DDE7 {
		t.Fatalf("Permute(0)[0] = %016x", st[0])
	}
}

// Hash-level cross-check of the oracle itself: SHAKE128 of the empty message is Keccak-f of the
// state with the padding 0x1F at byte 0 and 0x80 at byte 167, squeezed.
func TestOracleAgainstShakeHash(t *testing.T) {
	var st [25]uint64
	st[0] = 0x1F
	st[20] = 0x80 << 56 // byte 167 = lane 20 byte 7
	out, err := StdlibKeccakF(st)
	if err != nil {
		t.Fatal(err)
	}
	var want [16]byte
	h := sha3.NewSHAKE128()
	h.Read(want[:])
	var got [16]byte
	binary.LittleEndian.PutUint64(got[:], out[0])
	binary.LittleEndian.PutUint64(got[8:], out[1])
	if got != want {
		t.Fatalf("oracle %x, SHAKE128(\"\") %x", got, want)
	}
}

func TestPermuteVsOracle(t *testing.T) {
	r := stdrng.SeedFromU64(1)
	for k := 0; k < 200; k++ {
		in := r.Lanes25()
		want, err := StdlibKeccakF(in)
		if err != nil {
			t.Fatal(err)
		}
		got := in
		Permute(&got)
		if got != want {
			t.Fatalf("input %d: Permute differs from the oracle", k)
		}
	}
}

func TestTraceDigests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inputs [][25]uint64
		height int
		want   string
	}{
		{"N=1 plonky3", [][25]uint64{plonky3Input()}, 32, "fe93c3e6caf9c4ea8faaaa122563c47031bba77879ef7062add211d57a45144a"},
		{"N=1 zero", [][25]uint64{{}}, 32, "ad4adf2819f8a2ad13c2e91070134b885ce7d4e36f6ee6f61ee6bfee962ffbfc"},
		{"N=2 plonky3,zero", [][25]uint64{plonky3Input(), {}}, 64, "ae078a88347429181803002262640865b0359e96f7cae2e0b1c7070643a5b6d7"},
		{"N=0", nil, 1, "d91cb818bde3599eac34987564533fb91b279eeb9984a1e1880ef6e600f03930"},
	} {
		h, cols := GenerateTrace(tc.inputs)
		if h != tc.height {
			t.Errorf("%s: height %d, want %d", tc.name, h, tc.height)
			continue
		}
		d := TraceDigest(h, cols)
		if got := hex.EncodeToString(d[:]); got != tc.want {
			t.Errorf("%s: digest %s, want %s", tc.name, got, tc.want)
		}
	}
}

// checkCells checks value ranges and the simple structural facts of a trace.
func checkCells(t *testing.T, height int, cols []field.Fp, inputs [][25]uint64) {
	t.Helper()
	at := func(c, r int) uint32 { return uint32(cols[c*height+r]) }
	for g, grp := range Groups {
		for c := grp.First; c < grp.First+grp.Width(); c++ {
			for r := 0; r < height; r++ {
				v := at(c, r)
				switch grp.Name {
				case "step_flags":
					want := uint32(0)
					if r%24 == c-grp.First {
						want = 1
					}
					if v != want {
						t.Fatalf("row %d step_flags[%d] = %d, want %d", r, c-grp.First, v, want)
					}
				case "export":
					if v != 0 {
						t.Fatalf("row %d export = %d", r, v)
					}
				case "preimage", "a", "a_prime_prime", "a_prime_prime_prime_0_0_limbs":
					if v > 0xFFFF {
						t.Fatalf("row %d column %d (%s) = %d is not a limb", r, c, Groups[g].Name, v)
					}
				default:
					if v > 1 {
						t.Fatalf("row %d column %d (%s) = %d is not a bit", r, c, Groups[g].Name, v)
					}
				}
			}
		}
	}
	for r := 0; r < height; r += 24 {
		for c := 0; c < 100; c++ {
			if at(firstPreimage+c, r) != at(firstA+c, r) {
				t.Fatalf("row %d: a limb %d differs from preimage", r, c)
			}
		}
	}
	for r := 0; r < height; r++ {
		p := r / 24
		var in [25]uint64
		if p < len(inputs) {
			in = inputs[p]
		}
		for i := 0; i < 100; i++ {
			if want := uint32(in[i/4]>>(16*(i%4))) & 0xFFFF; at(firstPreimage+i, r) != want {
				t.Fatalf("row %d preimage limb %d = %d, want %d", r, i, at(firstPreimage+i, r), want)
			}
		}
	}
}

func TestTraceAgainstOracle(t *testing.T) {
	r := stdrng.SeedFromU64(99)
	cases := map[string][][25]uint64{}
	for _, n := range []int{1, 2, 3, 5} {
		in := make([][25]uint64, n)
		for i := range in {
			in[i] = r.Lanes25()
		}
		cases[string(rune('0'+n))] = in
	}
	cases["37 seed 42"] = RandomInputs(42, 37)
	for name, inputs := range cases {
		h, cols := GenerateTrace(inputs)
		if err := CheckTraceAgainstOracle(h, cols, inputs); err != nil {
			t.Fatalf("N=%s: %v", name, err)
		}
		checkCells(t, h, cols, inputs)
		// A single corrupted output limb is caught.
		c := ColOut(2, 3, 1)*h + 24*(len(inputs)-1) + 23
		cols[c] ^= 1
		if err := CheckTraceAgainstOracle(h, cols, inputs); err == nil {
			t.Fatalf("N=%s: corrupted output limb not detected", name)
		}
	}
	if RandomInputs(42, 1)[0][0] != 0x86cc7763222724a2 {
		t.Fatalf("RandomInputs(42) lane 0 = %016x", RandomInputs(42, 1)[0][0])
	}
}

// The intermediate columns follow the step definitions of keccak-air.md §1 (an independent
// per-row recomputation from the round input columns a).
func TestIntermediateColumns(t *testing.T) {
	inputs := RandomInputs(5, 2)
	h, cols := GenerateTrace(inputs)
	at := func(c, r int) uint64 { return uint64(cols[c*h+r]) }
	for r := 0; r < h; r++ {
		var a, ap [25]uint64
		var c, cp [5]uint64
		for i := 0; i < 25; i++ {
			for l := 0; l < 4; l++ {
				a[i] |= at(ColA(i%5, i/5, l), r) << (16 * l)
			}
			for z := 0; z < 64; z++ {
				ap[i] |= at(ColAPrime(i%5, i/5, z), r) << z
			}
		}
		for x := 0; x < 5; x++ {
			for z := 0; z < 64; z++ {
				c[x] |= at(ColC(x, z), r) << z
				cp[x] |= at(ColCPrime(x, z), r) << z
			}
			if c[x] != a[x]^a[x+5]^a[x+10]^a[x+15]^a[x+20] {
				t.Fatalf("row %d: C[%d] wrong", r, x)
			}
		}
		for x := 0; x < 5; x++ {
			if cp[x] != c[x]^c[(x+4)%5]^bits.RotateLeft64(c[(x+1)%5], 1) {
				t.Fatalf("row %d: C'[%d] wrong", r, x)
			}
			for y := 0; y < 5; y++ {
				if ap[x+5*y] != a[x+5*y]^c[x]^cp[x] {
					t.Fatalf("row %d: A'[%d][%d] wrong", r, x, y)
				}
			}
		}
		bit := func(x, y, z int) uint64 { return at(ColB(x, y, z), r) }
		for y := 0; y < 5; y++ {
			for x := 0; x < 5; x++ {
				var app uint64
				for z := 0; z < 64; z++ {
					app |= (bit(x, y, z) ^ ((1 ^ bit((x+1)%5, y, z)) & bit((x+2)%5, y, z))) << z
				}
				var got uint64
				for l := 0; l < 4; l++ {
					got |= at(ColAPrimePrime(x, y, l), r) << (16 * l)
				}
				if got != app {
					t.Fatalf("row %d: A''[%d][%d] = %x, want %x", r, x, y, got, app)
				}
				if x == 0 && y == 0 {
					var bitsV, out uint64
					for z := 0; z < 64; z++ {
						bitsV |= at(ColAPrimePrime00Bit(z), r) << z
					}
					for l := 0; l < 4; l++ {
						out |= at(ColAPrimePrimePrime00Limb(l), r) << (16 * l)
					}
					if bitsV != app || out != app^RC[r%24] {
						t.Fatalf("row %d: A''00 bits / A'''00 limbs wrong", r)
					}
				}
			}
		}
		// Round output feeds the next row's a within a block.
		if r%24 != 23 && r+1 < h {
			for y := 0; y < 5; y++ {
				for x := 0; x < 5; x++ {
					for l := 0; l < 4; l++ {
						if at(ColOut(x, y, l), r) != at(ColA(x, y, l), r+1) {
							t.Fatalf("row %d: OUT(%d,%d,%d) does not feed row %d", r, x, y, l, r+1)
						}
					}
				}
			}
		}
	}
}

// FillTrace writes every cell (a dirty buffer gives the same trace) and does not depend on the
// number of workers.
func TestFillTraceDirtyBufferAndWorkers(t *testing.T) {
	inputs := RandomInputs(3, 21) // 504 rows → height 512, several tiles
	h, want := GenerateTrace(inputs)
	for _, procs := range []int{1, 3} {
		old := runtime.GOMAXPROCS(procs)
		dst := make([]field.Fp, len(want))
		for i := range dst {
			dst[i] = 12345
		}
		FillTrace(dst, h, inputs)
		runtime.GOMAXPROCS(old)
		for i := range dst {
			if dst[i] != want[i] {
				t.Fatalf("GOMAXPROCS %d: cell %d (col %d row %d) = %d, want %d", procs, i, i/h, i%h, dst[i], want[i])
			}
		}
	}
}

func FuzzTrace(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := len(data)/200 + 1
		if n > 3 {
			n = 3
		}
		buf := make([]byte, n*200)
		copy(buf, data)
		inputs := make([][25]uint64, n)
		for p := range inputs {
			for i := range inputs[p] {
				inputs[p][i] = binary.LittleEndian.Uint64(buf[200*p+8*i:])
			}
		}
		h, cols := GenerateTrace(inputs)
		if err := CheckTraceAgainstOracle(h, cols, inputs); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkGenerateTrace1024(b *testing.B) {
	inputs := RandomInputs(42, 1024)
	h := Height(len(inputs))
	dst := make([]field.Fp, NumCols*h)
	b.SetBytes(int64(len(dst)) * 4)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		FillTrace(dst, h, inputs)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/op")
}

func BenchmarkGenerateTrace1024Alloc(b *testing.B) {
	inputs := RandomInputs(42, 1024)
	for i := 0; i < b.N; i++ {
		GenerateTrace(inputs)
	}
}

// OpenVM's CPU example trace (1024 seed-42 inputs, 32768×2633): oracle check plus a digest
// measured with this generator — a regression anchor, not an independent value.
func TestOpenVMExampleTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("345 MB trace")
	}
	inputs := RandomInputs(42, 1024)
	h, cols := GenerateTrace(inputs)
	if h != 32768 {
		t.Fatalf("height %d", h)
	}
	if err := CheckTraceAgainstOracle(h, cols, inputs); err != nil {
		t.Fatal(err)
	}
	d := TraceDigest(h, cols)
	const want = "70fec5de8946694c0be3f6c1491c149ba22de53f71f069e65d49c0d3af3bc33b"
	if got := hex.EncodeToString(d[:]); got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}
