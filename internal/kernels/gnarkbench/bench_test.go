package gnarkbench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/consensys/gnark-crypto/field/babybear"
	gfft "github.com/consensys/gnark-crypto/field/babybear/fft"
	gp2 "github.com/consensys/gnark-crypto/field/babybear/poseidon2"
	"github.com/consensys/gnark-crypto/utils"

	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

var (
	devOnce sync.Once
	dev     *gpu.Device
	devErr  error
)

// hostDevice opens the host device once (all cores) for the whole test binary.
func hostDevice(b testing.TB) *gpu.Device {
	devOnce.Do(func() { dev, devErr = gpu.Open(gpu.KindHost, gpu.Options{}) })
	if devErr != nil {
		b.Fatal(devErr)
	}
	return dev
}

func randomFp(seed uint64, n int) []field.Fp {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]field.Fp, n)
	for i := range v {
		v[i] = field.Fp(r.Uint32N(field.P))
	}
	return v
}

// perElem reports ns per element (the one metric every NTT benchmark shares).
func perElem(b *testing.B, elems int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(elems), "ns/elem")
}

// perPerm reports permutations per second.
func perPerm(b *testing.B, perms int) {
	b.ReportMetric(float64(b.N)*float64(perms)/b.Elapsed().Seconds(), "perms/s")
}

// --- NTT --------------------------------------------------------------------------------------

var nttShapes = []struct{ logN, width int }{{16, 1}, {16, 16}, {20, 1}, {20, 16}}

func benchNTTHost(b *testing.B, logN, width int) {
	d := hostDevice(b)
	n := 1 << logN
	a, err := kernels.UploadMont(d, "bench", randomFp(1, n*width))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Free()
	ntt := kernels.NewNTT(d)
	defer ntt.Close()
	if err := ntt.DFTColumns(a, n, width, false); err != nil { // builds the twiddle tables
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := ntt.DFTColumns(a, n, width, false); err != nil {
			b.Fatal(err)
		}
	}
	perElem(b, n*width)
}

func benchNTTGnark(b *testing.B, logN, width int) {
	n := 1 << logN
	dom := gfft.NewDomain(uint64(n))
	v := randomFp(1, n*width)
	data := make([]babybear.Element, len(v))
	for i, x := range v {
		data[i].SetUint64(uint64(x))
	}
	b.ResetTimer()
	for b.Loop() {
		for c := range width {
			col := data[c*n : (c+1)*n]
			dom.FFT(col, gfft.DIF) // natural in, bit-reversed out
			utils.BitReverse(col)  // natural out, as ours
		}
	}
	perElem(b, n*width)
}

func benchNTTGo(b *testing.B, logN, width int) {
	n := 1 << logN
	data := randomFp(1, n*width)
	b.ResetTimer()
	for b.Loop() {
		if err := cpuref.DFTColumns(data, n); err != nil {
			b.Fatal(err)
		}
	}
	perElem(b, n*width)
}

// BenchmarkNTT: forward DFT of width columns of 2^logN elements, natural order in and out.
func BenchmarkNTT(b *testing.B) {
	for _, s := range nttShapes {
		name := fmt.Sprintf("2^%dx%d", s.logN, s.width)
		b.Run(name+"/host", func(b *testing.B) { benchNTTHost(b, s.logN, s.width) })
		b.Run(name+"/gnark", func(b *testing.B) { benchNTTGnark(b, s.logN, s.width) })
		b.Run(name+"/go", func(b *testing.B) { benchNTTGo(b, s.logN, s.width) })
	}
}

// TestNTTAgreesWithGnark checks that both sides compute the same transform (same generator):
// the benchmark compares like with like.
func TestNTTAgreesWithGnark(t *testing.T) {
	const n = 1 << 10
	v := randomFp(2, n)
	g := make([]babybear.Element, n)
	for i, x := range v {
		g[i].SetUint64(uint64(x))
	}
	gfft.NewDomain(n).FFT(g, gfft.DIF)
	utils.BitReverse(g)
	if err := cpuref.DFT(v); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if uint64(v[i]) != g[i].Uint64() {
			t.Fatalf("element %d: cpuref %d, gnark %d (different root of unity?)", i, v[i], g[i].Uint64())
		}
	}
}

// --- Poseidon2 --------------------------------------------------------------------------------

const p2LogStates = 16

// parallel runs f over [0, n) split into GOMAXPROCS contiguous chunks.
func parallel(n int, f func(lo, hi int)) {
	k := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for i := range k {
		lo, hi := i*n/k, (i+1)*n/k
		wg.Add(1)
		go func() { defer wg.Done(); f(lo, hi) }()
	}
	wg.Wait()
}

func benchP2Host(b *testing.B) {
	d := hostDevice(b)
	n := 1 << p2LogStates
	a, err := kernels.UploadMont(d, "bench states", randomFp(3, 16*n))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Free()
	h, err := kernels.NewPoseidon2(d)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := h.Permute(a, n); err != nil {
			b.Fatal(err)
		}
	}
	perPerm(b, n)
}

func benchP2Gnark(b *testing.B) {
	n := 1 << p2LogStates
	v := randomFp(3, 16*n)
	data := make([]babybear.Element, len(v))
	for i, x := range v {
		data[i].SetUint64(uint64(x))
	}
	perms := make([]*gp2.Permutation, runtime.GOMAXPROCS(0)) // one per goroutine (buffers)
	for i := range perms {
		perms[i] = gp2.NewDefaultPermutation()
	}
	k := len(perms)
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range k {
			lo, hi := i*n/k, (i+1)*n/k
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := lo; s < hi; s++ {
					if err := perms[i].Permutation(data[16*s : 16*s+16]); err != nil {
						panic(err)
					}
				}
			}()
		}
		wg.Wait()
	}
	perPerm(b, n)
}

func benchP2Go(b *testing.B) {
	n := 1 << p2LogStates
	v := randomFp(3, 16*n)
	states := make([][16]field.Fp, n)
	for i := range states {
		copy(states[i][:], v[16*i:])
	}
	b.ResetTimer()
	for b.Loop() {
		parallel(n, func(lo, hi int) {
			for s := lo; s < hi; s++ {
				poseidon2.Permute(&states[s])
			}
		})
	}
	perPerm(b, n)
}

// BenchmarkPoseidon2: 2^16 width-16 permutations (gnark's constants differ: cost only).
func BenchmarkPoseidon2(b *testing.B) {
	b.Run("host", benchP2Host)
	b.Run("gnark", benchP2Gnark)
	b.Run("go", benchP2Go)
}

// --- summary ----------------------------------------------------------------------------------

// TestSummary runs every benchmark above once more through testing.Benchmark and logs the speed
// ratios ours/gnark (> 1: ours is faster). It takes about a minute, so it runs only with
// GNARKBENCH=1.
func TestSummary(t *testing.T) {
	if os.Getenv("GNARKBENCH") == "" {
		t.Skip("set GNARKBENCH=1 to run the comparison")
	}
	t.Logf("GOMAXPROCS %d, host device %s", runtime.GOMAXPROCS(0), hostDevice(t).Name())
	ns := func(f func(*testing.B)) float64 {
		r := testing.Benchmark(f)
		return float64(r.T.Nanoseconds()) / float64(r.N)
	}
	for _, s := range nttShapes {
		elems := float64(int(1)<<s.logN) * float64(s.width)
		h := ns(func(b *testing.B) { benchNTTHost(b, s.logN, s.width) }) / elems
		g := ns(func(b *testing.B) { benchNTTGnark(b, s.logN, s.width) }) / elems
		o := ns(func(b *testing.B) { benchNTTGo(b, s.logN, s.width) }) / elems
		t.Logf("NTT 2^%d x %2d: host %6.2f ns/elem, go %6.2f, gnark %6.2f; ours/gnark speed: host %.2f, go %.2f",
			s.logN, s.width, h, o, g, g/h, g/o)
	}
	n := float64(int(1) << p2LogStates)
	h := n / ns(benchP2Host) * 1e9
	g := n / ns(benchP2Gnark) * 1e9
	o := n / ns(benchP2Go) * 1e9
	t.Logf("Poseidon2-16 x 2^%d: host %.3g perms/s, go %.3g, gnark %.3g (other constants); ours/gnark speed: host %.2f, go %.2f",
		p2LogStates, h, o, g, h/g, o/g)
}
