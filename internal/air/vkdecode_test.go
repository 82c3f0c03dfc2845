package air

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/postcard"
)

// OpenVM's own keys (internal/cmd/testdata/openvm-v2.0.1, made by stark-backend v2.0.1).
func openvmKey(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cmd", "testdata", "openvm-v2.0.1", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digestOf(xs ...uint32) poseidon2.Digest {
	var d poseidon2.Digest
	for i, x := range xs {
		d[i] = field.Fp(x)
	}
	return d
}

func TestDecodeOpenVMKeys(t *testing.T) {
	for _, tc := range []struct {
		file    string
		airs    int
		preHash poseidon2.Digest
	}{
		// pre_hash values from the vectors' README.
		{"fib.vk.postcard", 1, digestOf(471505953, 1807114792, 170193425, 441704158, 1816165566, 828129030, 622714888, 981876475)},
		{"keccakf.vk.postcard", 1, digestOf(898758304, 1269476524, 1587838634, 212117637, 976402962, 1227319903, 82372460, 1279797633)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := openvmKey(t, tc.file)
			m, pre, err := DecodeMultiVerifyingKey(b)
			if err != nil {
				t.Fatal(err)
			}
			if pre != tc.preHash {
				t.Fatalf("pre_hash %v, want %v", pre, tc.preHash)
			}
			if len(m.PerAir) != tc.airs {
				t.Fatalf("%d AIRs, want %d", len(m.PerAir), tc.airs)
			}
			if got := m.AppendKeyPostcard(nil, pre); !bytes.Equal(got, b) {
				t.Fatalf("re-encoding differs: %d bytes, want %d", len(got), len(b))
			}
		})
	}
}

// encodeKey writes m with its own pre_hash (what a tampering test needs to get past the hash).
func encodeKey(m *MultiVerifyingKey0) []byte { return m.AppendKeyPostcard(nil, m.PreHash()) }

func TestDecodeRejectsTruncatedAndTrailing(t *testing.T) {
	b := openvmKey(t, "fib.vk.postcard")
	for n := 0; n < len(b); n++ {
		if _, _, err := DecodeMultiVerifyingKey(b[:n]); !errors.Is(err, postcard.ErrFormat) {
			t.Fatalf("prefix of %d bytes: err %v, want a format error", n, err)
		}
	}
	_, _, err := DecodeMultiVerifyingKey(append(bytes.Clone(b), 0))
	if !errors.Is(err, postcard.ErrFormat) || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestDecodeRejectsEveryByteChange(t *testing.T) {
	b := openvmKey(t, "fib.vk.postcard")
	for i := range b {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= x
			if _, _, err := DecodeMultiVerifyingKey(c); err == nil {
				t.Fatalf("byte %d ^ %#x: accepted", i, x)
			}
		}
	}
}

func TestDecodeRejectsOverlongVarint(t *testing.T) {
	b := openvmKey(t, "fib.vk.postcard")
	// l_skip (first byte, a small value) written in two bytes.
	c := append([]byte{b[0] | 0x80, 0}, b[1:]...)
	if _, _, err := DecodeMultiVerifyingKey(c); err == nil || !strings.Contains(err.Error(), "overlong") {
		t.Fatalf("overlong varint: %v", err)
	}
}

func TestDecodeRejectsAlteredContentWithStalePreHash(t *testing.T) {
	m, pre, err := DecodeMultiVerifyingKey(openvmKey(t, "fib.vk.postcard"))
	if err != nil {
		t.Fatal(err)
	}
	m.PerAir[0].NumPublicValues++
	_, _, err = DecodeMultiVerifyingKey(m.AppendKeyPostcard(nil, pre))
	if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "pre_hash") {
		t.Fatalf("stale pre_hash: %v", err)
	}
}

// Keys that decode but cannot be proved with name what is wrong.
func TestDecodeRejectsUnsupportedKeys(t *testing.T) {
	fresh := func() *MultiVerifyingKey0 {
		m, _, err := DecodeMultiVerifyingKey(openvmKey(t, "fib.vk.postcard"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	firstVar := func(m *MultiVerifyingKey0) *Node {
		for i := range m.PerAir[0].DAG.Nodes {
			if n := &m.PerAir[0].DAG.Nodes[i]; n.Op == OpVariable && n.Var.Entry == EntryMain {
				return n
			}
		}
		t.Fatal("no main variable")
		return nil
	}
	for _, tc := range []struct {
		name, want string
		edit       func(m *MultiVerifyingKey0)
	}{
		{"challenge", "challenge", func(m *MultiVerifyingKey0) { firstVar(m).Var = Var{Entry: EntryChallenge} }},
		{"offset 2", "unsupported rotation", func(m *MultiVerifyingKey0) { firstVar(m).Var.Offset = 2 }},
		{"column out of range", "has width", func(m *MultiVerifyingKey0) { firstVar(m).Var.Index = 99 }},
		{"part out of range", "main parts", func(m *MultiVerifyingKey0) { firstVar(m).Var.PartIndex = 3 }},
		{"public out of range", "public value", func(m *MultiVerifyingKey0) { firstVar(m).Var = Var{Entry: EntryPublic, Index: 7} }},
		{"next row without need_rot", "need_rot", func(m *MultiVerifyingKey0) { m.PerAir[0].NeedRot = false }},
		{"forward reference", "topological", func(m *MultiVerifyingKey0) {
			g := m.PerAir[0].DAG
			for i := range g.Nodes {
				if g.Nodes[i].Op == OpAdd || g.Nodes[i].Op == OpSub || g.Nodes[i].Op == OpMul {
					g.Nodes[i].L = len(g.Nodes) - 1
					return
				}
			}
		}},
		{"unsorted constraints", "strictly increasing", func(m *MultiVerifyingKey0) {
			c := m.PerAir[0].DAG.ConstraintIdx
			c[0], c[1] = c[1], c[0]
		}},
		{"degree above the key's", "max_constraint_degree", func(m *MultiVerifyingKey0) { m.PerAir[0].MaxConstraintDegree = 0 }},
		{"degree above the parameters'", "exceeds the parameters", func(m *MultiVerifyingKey0) { m.PerAir[0].MaxConstraintDegree = 200 }},
		{"no constraints", "no constraint", func(m *MultiVerifyingKey0) { m.PerAir[0].DAG.ConstraintIdx = []int{} }},
		{"zero width", "zero main trace width", func(m *MultiVerifyingKey0) { m.PerAir[0].Width.CommonMain = 0 }},
		{"preprocessed data without width", "preprocessed", func(m *MultiVerifyingKey0) {
			m.PerAir[0].Preprocessed = &PreprocessedVK{HypercubeDim: 1, StackingWidth: 1}
		}},
		{"height constraint width", "coefficients", func(m *MultiVerifyingKey0) {
			m.TraceHeightConstraints = append(m.TraceHeightConstraints, LinearConstraint{Coefficients: []uint32{1, 2}, Threshold: 5})
		}},
		{"bad parameters", "parameters", func(m *MultiVerifyingKey0) { m.Params.WStack = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fresh()
			tc.edit(m)
			_, _, err := DecodeMultiVerifyingKey(encodeKey(m))
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrInvalidKey mentioning %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "AIR 0") && tc.name != "height constraint width" && tc.name != "bad parameters" {
				t.Fatalf("err %v does not name the AIR", err)
			}
		})
	}
}

// The imported AIR replays its DAG: the checks' DAG evaluates like the key's on any row.
func TestKeyedAirReplaysItsDAG(t *testing.T) {
	m, _, err := DecodeMultiVerifyingKey(openvmKey(t, "keccakf.vk.postcard"))
	if err != nil {
		t.Fatal(err)
	}
	vk := m.PerAir[0]
	a, err := NewKeyedAir("keccakf", vk, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Symbolic(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Constraints) != len(vk.DAG.ConstraintIdx) || len(sc.Interactions) != len(vk.DAG.Interactions) {
		t.Fatalf("%d constraints / %d interactions, want %d / %d", len(sc.Constraints), len(sc.Interactions), len(vk.DAG.ConstraintIdx), len(vk.DAG.Interactions))
	}
	// The rebuilt DAG may be numbered differently (the builder simplifies as it interns), but
	// every constraint and interaction value is the key's, on random rows and on edge values.
	dag, raw := BuildDAG(sc.Constraints, sc.Interactions)
	for _, val := range []Valuation{hashVal{seed: 1}, hashVal{seed: 2}, hashVal{edge: true}} {
		got, want := dag.EvalNodes(val, nil), vk.DAG.EvalNodes(val, nil)
		for k, c := range vk.DAG.ConstraintIdx {
			if got[raw[k]] != want[c] {
				t.Fatalf("constraint %d: replay %v, key %v", k, got[raw[k]], want[c])
			}
		}
		for k, it := range vk.DAG.Interactions {
			ri := dag.Interactions[k]
			if got[ri.Count] != want[it.Count] || ri.Bus != it.Bus || ri.CountWeight != it.CountWeight {
				t.Fatalf("interaction %d differs", k)
			}
			for j := range it.Message {
				if got[ri.Message[j]] != want[it.Message[j]] {
					t.Fatalf("interaction %d message %d differs", k, j)
				}
			}
		}
	}
	if _, err := NewKeyedAir("x", vk, &Matrix{Width: 1, Height: 1, Values: []field.Fp{0}}); !errors.Is(err, ErrPreprocessedData) {
		t.Fatalf("preprocessed trace for an AIR without one: %v", err)
	}
}

func FuzzDecodeMultiVerifyingKey(f *testing.F) {
	f.Add(openvmKey(f, "fib.vk.postcard"))
	f.Add(openvmKey(f, "fib.vk.postcard")[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, pre, err := DecodeMultiVerifyingKey(b)
		if err != nil {
			return
		}
		if got := m.AppendKeyPostcard(nil, pre); !bytes.Equal(got, b) {
			t.Fatalf("decoded key re-encodes to other bytes")
		}
	})
}

// hashVal gives every variable a pseudo-random value (or p−1 / 0 / 1 edge values).
type hashVal struct {
	seed uint64
	edge bool
}

func (h hashVal) Var(v Var) field.Fp {
	x := h.seed*0x9e3779b97f4a7c15 ^ uint64(v.Entry)<<56 ^ uint64(v.PartIndex)<<40 ^ uint64(v.Offset)<<32 ^ uint64(v.Index)
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	if h.edge {
		return [...]field.Fp{0, 1, field.Fp(field.P - 1)}[x%3]
	}
	return field.NewU64(x)
}
func (h hashVal) IsFirstRow() field.Fp   { return h.Var(Var{Index: 1 << 30}) }
func (h hashVal) IsLastRow() field.Fp    { return h.Var(Var{Index: 1<<30 + 1}) }
func (h hashVal) IsTransition() field.Fp { return h.Var(Var{Index: 1<<30 + 2}) }
