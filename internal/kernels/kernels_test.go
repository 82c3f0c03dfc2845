package kernels

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

var testDev *gpu.Device

func TestMain(m *testing.M) {
	// The modules the host device builds (generated round-0 code) are cached in the directory
	// $METALPROVE_HOST_CACHE names (make test: one for all its runs, whose keys are the modules'
	// sources and flags), else in a directory of this test binary's: compiled once per run
	// (Keccak-f's too), never taken from the user's cache.
	var tmp string
	if os.Getenv(host.CacheEnv) == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "metalprove-kernels-test-"); err != nil {
			panic(err)
		}
		os.Setenv(host.CacheEnv, tmp)
	}
	d, err := gpu.Open(gpu.KindHost, gpu.Options{})
	if err != nil {
		panic(err)
	}
	testDev = d
	code := m.Run()
	d.Close()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// syncs runs f and returns the number of syncs it caused.
func syncs(t *testing.T, f func() error) int {
	t.Helper()
	before := testDev.Stats().Syncs
	if err := f(); err != nil {
		t.Fatal(err)
	}
	return testDev.Stats().Syncs - before
}

func upload(t *testing.T, v []field.Fp) *gpu.Array[Mont] {
	t.Helper()
	return uploadMontOn(t, testDev, v)
}

func uploadMontOn(t *testing.T, dev *gpu.Device, v []field.Fp) *gpu.Array[Mont] {
	t.Helper()
	a, err := UploadMont(dev, "test input", v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func readBack(t *testing.T, a *gpu.Array[Mont]) []field.Fp {
	t.Helper()
	v, err := ReadCanonical(a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func firstDiff(a, b []field.Fp) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return len(a)
	}
	return -1
}

func TestMontgomeryHelpers(t *testing.T) {
	for _, x := range []field.Fp{0, 1, 2, field.Fp(field.P - 1), 12345} {
		if got := CanonicalOf(MontOf(x)); got != x {
			t.Fatalf("round trip %d -> %d", x, got)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	v := fieldrand.Fps(r, 1001)
	a := upload(t, v)
	b := testDev.Batch()
	if err := EncodeFromMont(b, testDev, a, len(v)); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got, _ := a.ReadAll()
	for i := range v {
		if field.Fp(got[i]) != v[i] {
			t.Fatalf("fo_from_mont[%d] = %d, want %d", i, got[i], v[i])
		}
	}
}

// montWords is v as raw words, for the kernels that take words (bench, families not typed yet).
func montWords(v []Mont) []uint32 {
	out := make([]uint32, len(v))
	for i, m := range v {
		out[i] = uint32(m)
	}
	return out
}

func uploadU32(v []uint32) (*gpu.Array[uint32], error) {
	return gpu.UploadArray(testDev, "test input", v)
}

func TestBenchKernels(t *testing.T) {
	n := 1025
	src, _ := uploadU32(montWords(MontSlice(fieldrand.Fps(rand.New(rand.NewPCG(1, 1)), n))))
	dst, err := gpu.AllocArray[uint32](testDev, "dst", n)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := gpu.AllocArray[Mont](testDev, "out", n)
	b := testDev.Batch()
	if err := EncodeCopy(b, testDev, dst, src, n); err != nil {
		t.Fatal(err)
	}
	if err := EncodeMulChain(b, testDev, out, n, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	a, _ := src.ReadAll()
	c, _ := dst.ReadAll()
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("copy differs at %d", i)
		}
	}
	o, _ := out.ReadAll()
	for _, i := range []int{0, 1024} {
		mul := CanonicalOf(0x12345678)
		var sum field.Fp
		for _, s := range []uint32{1, 2, 3, 5} {
			x := field.Fp(uint32(i) + s)
			for k := 0; k < 3; k++ {
				x = x.Mul(mul)
			}
			sum = sum.Add(x)
		}
		if CanonicalOf(o[i]) != sum {
			t.Fatalf("mul chain item %d: %d, want %d", i, CanonicalOf(o[i]), sum)
		}
	}
	src.Free()
	dst.Free()
	out.Free()

	// Elements of several words: n elements are 4n words, all copied.
	v := make([]Mont4, 37)
	for i := range v {
		v[i] = Mont4{Mont(4 * i), Mont(4*i + 1), Mont(4*i + 2), Mont(4*i + 3)}
	}
	src4, err := gpu.UploadArray(testDev, "src4", v)
	if err != nil {
		t.Fatal(err)
	}
	defer src4.Free()
	dst4, err := gpu.AllocArray[Mont4](testDev, "dst4", len(v))
	if err != nil {
		t.Fatal(err)
	}
	defer dst4.Free()
	b = testDev.Batch()
	if err := EncodeCopy(b, testDev, dst4, src4, len(v)); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if got, _ := dst4.ReadAll(); !slices.Equal(got, v) {
		t.Fatalf("Fp4 copy: %v, want %v", got, v)
	}
}
