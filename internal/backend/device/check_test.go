package device_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// corrupt returns ins with part q (0: common main, 1: first cached main) of instance i changed
// at (row, col) by adding d.
func corrupt(ins []testair.Instance, i, q, row, col int, d uint32) []testair.Instance {
	out := append([]testair.Instance(nil), ins...)
	tr := out[i].Trace
	m := &tr.CommonMain
	if q == 1 {
		tr.CachedMains = append([]air.Matrix(nil), tr.CachedMains...)
		m = &tr.CachedMains[0]
	}
	c := *m
	c.Values = append([]field.Fp(nil), c.Values...)
	c.Set(row, col, c.At(row, col).Add(field.New(d)))
	*m = c
	out[i].Trace = tr
	return out
}

type checkCase struct {
	name string
	p    params.SystemParams
	ins  []testair.Instance
	// valid: the host checker accepts the statement
	valid bool
}

func checkCases(t *testing.T) []checkCase {
	test := testParams(t)
	app, _, err := params.Preset("app-100bit", 12)
	if err != nil {
		t.Fatal(err)
	}
	mix := testair.Mixture(16)
	pair := testair.InteractionPair(256, 9)
	h, cols := keccakf.GenerateTrace(keccakf.RandomInputs(2, 5))
	kec := []testair.Instance{{Air: keccakf.Air{}, Trace: keccakf.TraceInput(h, cols)}}
	var manyBad []testair.Instance // failures on several rows of several AIRs
	manyBad = corrupt(mix, 0, 0, 3, 0, 1)
	for r := 5; r < 16; r += 3 {
		manyBad = corrupt(manyBad, 0, 0, r, 1, 2)
	}
	manyBad = corrupt(manyBad, 5, 0, 9, 1, 1)
	return []checkCase{
		{"mixture", test, mix, true},
		{"pair", app, pair, true},
		{"short-traces", test, testair.ShortTraces(), true},
		{"keccakf-2", app, kec, true},
		{"fibonacci row 7", test, corrupt(mix, 0, 0, 7, 1, 1), false},
		{"fibonacci last row", test, corrupt(mix, 0, 0, 15, 0, 4), false},
		{"selector fibonacci row 0", test, corrupt(mix, 5, 0, 0, 0, 1), false},
		{"many", test, manyBad, false},
		{"keccakf row 40", app, corrupt(kec, 0, 0, 40, 100, 1), false},
		{"unbalanced count", test, corrupt(mix, 1, 0, 2, 0, 1), false},
		{"unbalanced cached field", test, corrupt(mix, 3, 1, 1, 0, 7), false},
		{"unbalanced pair", app, corrupt(pair, 1, 0, 300, 0, 1), false},
		{"both", test, corrupt(corrupt(mix, 0, 0, 7, 1, 1), 1, 0, 2, 0, 1), false},
	}
}

// TestCheckTracesMatchesHost: the device checker's result equals the host checker's — nil for
// valid statements, the same *TraceCheckError (AIR, row, constraint, value, expression; imbalanced
// messages) otherwise — for several failure limits.
func TestCheckTracesMatchesHost(t *testing.T) {
	// Pieces: every program in pieces (rows_check_pieces), as GPUs run Keccak-f's.
	for _, opts := range []device.Options{{}, {Zerocheck: kernels.ZcOptions{Pieces: true}}} {
		t.Run(fmt.Sprintf("pieces=%v", opts.Zerocheck.Pieces), func(t *testing.T) { checkTracesMatchesHost(t, opts) })
	}
}

func checkTracesMatchesHost(t *testing.T, opts device.Options) {
	be, err := device.New(testDev, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Stages().Checker == nil {
		t.Fatal("the device backend does not list its Checker stage")
	}
	for _, tc := range checkCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			st := setUp(t, be.Stages(), tc.p, tc.ins)
			for _, maxF := range []int{0, 1, 3, 100} {
				got := be.CheckTraces(st.pk, st.ld, maxF)
				want := stark.HostChecker{}.CheckTraces(st.pk, st.ld, maxF)
				if (want == nil) != tc.valid {
					t.Fatalf("host checker: %v (valid: %v)", want, tc.valid)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("max %d: device checker\n%v\nhost checker\n%v", maxF, got, want)
				}
				var ge, we *stark.TraceCheckError
				if errors.As(got, &ge) != errors.As(want, &we) || (ge != nil && !reflect.DeepEqual(ge, we)) {
					t.Fatalf("max %d: device %#v, host %#v", maxF, got, want)
				}
				if got != nil && !errors.Is(got, stark.ErrInvalidTrace) {
					t.Errorf("device checker error %v does not wrap ErrInvalidTrace", got)
				}
			}
		})
	}
}

// TestFirstFailuresAndBalance: the device's screen on its own: the first failing row of every
// trace (one sync) and the LogUp balance.
func TestFirstFailuresAndBalance(t *testing.T) {
	be, err := device.New(testDev, device.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p := testParams(t)
	mix := testair.Mixture(16)
	st := setUp(t, be.Stages(), p, corrupt(corrupt(mix, 0, 0, 11, 1, 1), 5, 0, 6, 0, 1))
	var first []int
	if n := syncsOf(t, func() (err error) { first, err = be.FirstFailures(st.in); return err }); n != 1 {
		t.Errorf("FirstFailures: %d syncs, want 1", n)
	}
	failing := 0
	for tr, in := range st.in {
		ti := air.TraceInput{CommonMain: *in.Common.Host(), Public: in.Public}
		if in.Preprocessed != nil {
			ti.Preprocessed = in.Preprocessed.Host()
		}
		for _, c := range in.Cached {
			ti.CachedMains = append(ti.CachedMains, *c.Host())
		}
		fs, err := constraints.Check(st.pk.Airs[in.AirIndex], ti, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := -1
		if len(fs) > 0 {
			want = fs[0].Row
			failing++
		}
		if first[tr] != want {
			t.Errorf("AIR %d (%s): first failing row %d, want %d", in.AirIndex, st.pk.Airs[in.AirIndex].Name(), first[tr], want)
		}
	}
	if failing != 2 {
		t.Errorf("%d AIRs fail, want 2", failing)
	}
	ok, err := be.InteractionsBalance(p.LSkip, st.in)
	if err != nil || !ok {
		t.Errorf("balanced mixture: %v, %v", ok, err)
	}
	bad := setUp(t, be.Stages(), p, corrupt(mix, 2, 0, 1, 0, 1))
	if ok, err := be.InteractionsBalance(0, bad.in); err != nil || ok {
		t.Errorf("unbalanced mixture: %v, %v", ok, err)
	}
	fib := setUp(t, be.Stages(), p, []testair.Instance{testair.Fibonacci(0, 1, 8)})
	if ok, err := be.InteractionsBalance(p.LSkip, fib.in); err != nil || !ok {
		t.Errorf("no interactions: %v, %v", ok, err)
	}
}
