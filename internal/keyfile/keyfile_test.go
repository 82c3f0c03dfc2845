package keyfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

func testParams(t testing.TB) params.SystemParams {
	t.Helper()
	p, _, err := params.Preset("test", params.DefaultAppLogStackedHeight)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fileOf is what `keygen` writes for a key made by this program's own keygen.
func fileOf(t testing.TB, pk *stark.ProvingKey) *File {
	t.Helper()
	// Through OpenVM's bytes, as `vk export` → `keygen --openvm-vk` goes.
	mvk, pre, err := air.DecodeMultiVerifyingKey(pk.VK.AppendPostcard(nil))
	if err != nil {
		t.Fatal(err)
	}
	f := &File{MVK: mvk, PreHash: pre, Note: Note{Source: "test"}}
	for _, a := range pk.Airs {
		f.Names = append(f.Names, a.Name())
		var m *air.Matrix
		if pa, ok := a.(air.PreprocessedAir); ok && a.Width().HasPreprocessed() {
			mm := pa.PreprocessedTrace()
			m = &mm
		}
		f.Preprocessed = append(f.Preprocessed, m)
	}
	return f
}

func inputsOf(ins []testair.Instance) ([]air.Air, []stark.AirProvingInput) {
	var airs []air.Air
	var inputs []stark.AirProvingInput
	for _, in := range ins {
		airs = append(airs, in.Air)
		inputs = append(inputs, stark.AirProvingInput{Common: in.Trace.CommonMain, Cached: in.Trace.CachedMains, Public: in.Trace.Public})
	}
	return airs, inputs
}

// Every test AIR (interactions, cached and preprocessed traces, public values) proved from its
// exported and re-imported key gives the built-in path's proof bytes.
func TestImportedKeyProvesAsBuiltIn(t *testing.T) {
	p := testParams(t)
	for name, ins := range map[string][]testair.Instance{
		"mixture":             testair.Mixture(16),
		"preprocessed-cached": {testair.PreprocessedCached(2, 16)},
		"interaction-pair":    testair.InteractionPair(16, 3),
		"short-traces":        testair.ShortTraces(),
	} {
		t.Run(name, func(t *testing.T) {
			airs, inputs := inputsOf(ins)
			be := cpuref.New()
			pk, err := stark.Keygen(p, airs, nil, be)
			if err != nil {
				t.Fatal(err)
			}
			want, err := stark.Prove(pk, inputs, p, be, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Marshal(fileOf(t, pk))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := Marshal(f); !bytes.Equal(again, b) {
				t.Fatal("file does not re-encode to its bytes")
			}
			kairs, err := f.Airs()
			if err != nil {
				t.Fatal(err)
			}
			ipk, err := stark.KeygenFromKey(f.MVK, f.PreHash, kairs, be)
			if err != nil {
				t.Fatal(err)
			}
			if ipk.VK.PreHash != pk.VK.PreHash {
				t.Fatal("pre_hash differs")
			}
			got, err := stark.Prove(ipk, inputs, p, be, nil)
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := got.MarshalBinary()
			wb, _ := want.MarshalBinary()
			if !bytes.Equal(gb, wb) {
				t.Fatal("the proof from the imported key differs from the built-in path's")
			}
			if err := stark.Verify(ipk.VK, got, p); err != nil {
				t.Fatalf("verify: %v", err)
			}
			// A trace that fails its AIR is caught by the check through the replayed DAG.
			if name == "mixture" {
				bad := append([]stark.AirProvingInput(nil), inputs...)
				c := bad[0].Common
				c.Values = append(c.Values[:0:0], c.Values...)
				c.Values[3] = c.Values[3].Add(1)
				bad[0].Common = c
				var tce *stark.TraceCheckError
				if _, err := stark.Prove(ipk, bad, p, be, nil); !errors.As(err, &tce) {
					t.Fatalf("bad trace: %v, want a TraceCheckError", err)
				}
			}
		})
	}
}

func TestKeygenFromKeyRejectsWrongPreprocessedTrace(t *testing.T) {
	p := testParams(t)
	airs, _ := inputsOf([]testair.Instance{testair.FibonacciSelector(7, 3, 16)})
	be := cpuref.New()
	pk, err := stark.Keygen(p, airs, nil, be)
	if err != nil {
		t.Fatal(err)
	}
	f := fileOf(t, pk)
	m := *f.Preprocessed[0]
	m.Values = append(m.Values[:0:0], m.Values...)
	m.Values[0] = 1 - m.Values[0]
	a, err := air.NewKeyedAir(f.Names[0], f.MVK.PerAir[0], &m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = stark.KeygenFromKey(f.MVK, f.PreHash, []air.Air{a}, be)
	if !errors.Is(err, stark.ErrKeygen) || !strings.Contains(err.Error(), "AIR 0 (fibonacci") || !strings.Contains(err.Error(), "commits to") {
		t.Fatalf("err %v", err)
	}
}

func TestUnmarshalRejectsDamage(t *testing.T) {
	p := testParams(t)
	airs, _ := inputsOf(testair.Mixture(16))
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(fileOf(t, pk))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n += 1 + n/16 {
		if _, err := Unmarshal(b[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	for i := 0; i < len(b); i += 7 {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := Unmarshal(c); !errors.Is(err, ErrFormat) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	c := bytes.Clone(b)
	c[8] = 9
	if _, err := Unmarshal(c); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("version: %v", err)
	}
	// Past the checksum: a body whose parts disagree is named.
	body := bytes.Clone(b[:len(b)-sumLen])
	body[12]++ // AIR count
	if _, err := Unmarshal(append(body, sum(body)...)); err == nil || !strings.Contains(err.Error(), "AIRs") {
		t.Fatalf("AIR count: %v", err)
	}
	// Write is atomic and Read gives the file back.
	path := filepath.Join(t.TempDir(), "k.pk")
	if _, err := Write(path, fileOf(t, pk)); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil || len(f.Names) != len(airs) {
		t.Fatalf("read: %v", err)
	}
	if err := os.WriteFile(path, b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), path) {
		t.Fatalf("truncated file: %v", err)
	}
}

func sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func FuzzUnmarshalBody(f *testing.F) {
	p := testParams(f)
	airs, _ := inputsOf([]testair.Instance{testair.FibonacciSelector(7, 3, 4), testair.Fibonacci(0, 1, 4)})
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		f.Fatal(err)
	}
	b, err := Marshal(fileOf(f, pk))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:len(b)-sumLen])
	f.Fuzz(func(t *testing.T, body []byte) {
		fl, err := unmarshalBody(nil, body)
		if err != nil {
			return
		}
		again, err := Marshal(fl)
		if err != nil {
			t.Fatalf("decoded file does not encode: %v", err)
		}
		if !bytes.Equal(again[:len(again)-sumLen], body) {
			t.Fatal("decoded file re-encodes to other bytes")
		}
	})
}

// cachedOnlyAir has no common main: one cached part of two columns (x, x+1 on every row), a
// public value equal to x on the first row. OpenVM's TraceWidth allows common_main = 0.
type cachedOnlyAir struct{}

func (cachedOnlyAir) Name() string { return "cached-only" }
func (cachedOnlyAir) Width() air.TraceWidth {
	return air.TraceWidth{CachedMains: []int{2}}
}
func (cachedOnlyAir) NumPublicValues() int { return 1 }
func (cachedOnlyAir) Eval(b *air.Builder) {
	l, n := b.CachedMain(0, 0), b.CachedMain(0, 1)
	b.AssertEq(air.Add(l[0], air.One()), l[1])
	b.WhenTransition().AssertEq(l[1], n[0])
	b.WhenFirstRow().AssertEq(l[0], b.Public(0))
}

func TestCachedOnlyAirThroughItsKey(t *testing.T) {
	p := testParams(t)
	const h = 8
	m := air.Matrix{Width: 2, Height: h, Values: make([]field.Fp, 2*h)}
	for r := 0; r < h; r++ {
		m.Values[r] = field.Fp(5 + r)
		m.Values[h+r] = field.Fp(6 + r)
	}
	only := []stark.AirProvingInput{{Common: air.Matrix{Height: h}, Cached: []air.Matrix{m}, Public: []field.Fp{5}}}
	be := cpuref.New()
	// Alone, its common-main commitment would have no column: refused, named (what OpenVM does
	// there is not known: docs/SPEC-NOTES.md).
	pk, err := stark.Keygen(p, []air.Air{cachedOnlyAir{}}, nil, be)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stark.Prove(pk, only, p, be, nil); err == nil || !strings.Contains(err.Error(), "width 0") {
		t.Fatalf("statement without common main columns: %v", err)
	}
	// The batch constraint sumcheck needs every present trace to have common main columns
	// (docs/SPEC-NOTES.md): beside another AIR it is refused too, by name.
	fib := testair.Fibonacci(0, 1, 16)
	inputs := []stark.AirProvingInput{only[0], {Common: fib.Trace.CommonMain, Public: fib.Trace.Public}}
	if pk, err = stark.Keygen(p, []air.Air{cachedOnlyAir{}, fib.Air}, nil, be); err != nil {
		t.Fatal(err)
	}
	if _, err := stark.Prove(pk, inputs, p, be, nil); err == nil || !strings.Contains(err.Error(), "no common main columns") {
		t.Fatalf("cached-only AIR beside fibonacci: %v", err)
	}
}
