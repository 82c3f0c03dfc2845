package constraints_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// airs are every test AIR of spec B §8 and Keccak-f.
func airs(t testing.TB) []air.Air {
	t.Helper()
	var out []air.Air
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8), testair.PreprocessedCached(2, 16)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.SelfInteraction([]int{3}, 4, 5)...)
	ins = append(ins, testair.ShortTraces()...)
	ins = append(ins, testair.Mixture(8)...)
	for _, in := range ins {
		out = append(out, in.Air)
	}
	return append(out, keccakf.Air{})
}

func keygen(t testing.TB, a air.Air) *air.VerifyingKey {
	t.Helper()
	var pre *air.PreprocessedVK
	if a.Width().HasPreprocessed() {
		pre = &air.PreprocessedVK{HypercubeDim: 2, StackingWidth: 1}
	}
	vk, err := air.Keygen(a, 3, false, pre)
	if err != nil {
		t.Fatal(err)
	}
	return vk
}

// slotValuation reads DAG variables from the program's slots, as Compile numbers them.
type slotValuation struct {
	p      *constraints.Program
	vk     *air.VerifyingKey
	slots  []field.Fp
	public []field.Fp
}

func (v slotValuation) Var(x air.Var) field.Fp {
	w := v.vk.Width
	hasPre := 0
	if w.HasPreprocessed() {
		hasPre = 1
	}
	part := 0
	switch x.Entry {
	case air.EntryPublic:
		return v.public[x.Index]
	case air.EntryPreprocessed:
		part = 1
	case air.EntryMain:
		if x.PartIndex < len(w.CachedMains) {
			part = 1 + hasPre + x.PartIndex
		}
	}
	return v.slots[2*(v.p.PartStart[part]+x.Index)+x.Offset]
}
func (v slotValuation) IsFirstRow() field.Fp   { return v.slots[v.p.SlotIsFirst()] }
func (v slotValuation) IsLastRow() field.Fp    { return v.slots[v.p.SlotIsLast()] }
func (v slotValuation) IsTransition() field.Fp { return v.slots[v.p.SlotIsTransition()] }

// TestProgramMatchesDAG: on random slot values, every output equals the DAG node it stands for
// (constraints in sorted order, each interaction's count and message fields), for the full
// program and the interactions-only one.
func TestProgramMatchesDAG(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, a := range airs(t) {
		vk := keygen(t, a)
		for _, outs := range []constraints.Outputs{constraints.All, constraints.Constraints, constraints.Interactions} {
			p, err := constraints.Compile(vk, outs)
			if err != nil {
				t.Fatalf("%s: %v", a.Name(), err)
			}
			for range 3 {
				slots := fieldrand.Fps(r, p.NumSlots())
				public := fieldrand.Fps(r, vk.NumPublicValues)
				nodes := vk.DAG.EvalNodes(slotValuation{p, vk, slots, public}, nil)
				var want []field.Fp
				if outs&constraints.Constraints != 0 {
					for _, idx := range vk.DAG.ConstraintIdx {
						want = append(want, nodes[idx])
					}
				}
				if outs&constraints.Interactions != 0 {
					for _, in := range vk.DAG.Interactions {
						want = append(want, nodes[in.Count])
						for _, m := range in.Message {
							want = append(want, nodes[m])
						}
					}
				}
				got := make([]field.Fp, len(p.Outputs))
				seen := make([]bool, len(p.Outputs))
				constraints.Eval(p, slots, public, func(x field.Fp) field.Fp { return x }, func(o int, v field.Fp) {
					got[o], seen[o] = v, true
				}, nil)
				if len(got) != len(want) {
					t.Fatalf("%s: %d outputs, want %d", a.Name(), len(got), len(want))
				}
				for o := range want {
					if !seen[o] || got[o] != want[o] {
						t.Fatalf("%s outputs %d: output %d = %v (emitted %v), DAG says %v", a.Name(), outs, o, got[o], seen[o], want[o])
					}
				}
			}
			if a.Name() == "keccakf" && outs == constraints.All {
				t.Logf("keccakf: %d DAG nodes, %d instructions, %d registers, %d constants", len(vk.DAG.Nodes), len(p.Code), p.NumRegs, len(p.Consts))
				if p.NumRegs*10 > len(vk.DAG.Nodes) {
					t.Errorf("keccakf: %d registers for %d nodes: liveness allocation is not reusing registers", p.NumRegs, len(vk.DAG.Nodes))
				}
			}
		}
	}
}

// TestCombineExtMatchesBase: the extension evaluator on lifted base values gives the base one's
// combination (the two instantiations of the one evaluator agree).
func TestCombineExtMatchesBase(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, a := range airs(t) {
		vk := keygen(t, a)
		p, err := constraints.Compile(vk, constraints.All)
		if err != nil {
			t.Fatal(err)
		}
		eq3b := make([]field.Fp4, len(p.Interactions))
		for i := range eq3b {
			eq3b[i] = fieldrand.Fp4(r)
		}
		w, err := p.Weights(fieldrand.Fp4(r), fieldrand.Fp4(r), eq3b)
		if err != nil {
			t.Fatal(err)
		}
		slots := fieldrand.Fps(r, p.NumSlots())
		public := fieldrand.Fps(r, vk.NumPublicValues)
		ext := make([]field.Fp4, len(slots))
		for i, s := range slots {
			ext[i] = field.Lift(s)
		}
		cb, _ := p.CombineBase(w, slots, public, nil)
		ce, _ := p.CombineExt(w, ext, public, nil)
		if cb != ce {
			t.Fatalf("%s: base %v, ext %v", a.Name(), cb, ce)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, a := range airs(t) {
		p, err := constraints.Compile(keygen(t, a), constraints.All)
		if err != nil {
			t.Fatal(err)
		}
		words, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		q, err := constraints.Decode(words)
		if err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		if len(q.Code) != len(p.Code) || q.NumRegs != p.NumRegs || len(q.Consts) != len(p.Consts) || len(q.Outputs) != len(p.Outputs) {
			t.Fatalf("%s: decoded program differs", a.Name())
		}
		for i := range p.Code {
			if q.Code[i] != p.Code[i] {
				t.Fatalf("%s: instruction %d: %+v, want %+v", a.Name(), i, q.Code[i], p.Code[i])
			}
		}
		// Each corruption is rejected.
		bads := []func([]uint32) []uint32{
			func(w []uint32) []uint32 { w[0] = constraints.Version + 1; return w },
			func(w []uint32) []uint32 { return w[:len(w)-1] },
			func(w []uint32) []uint32 { w[5] = 2; return w }, // too few slots
		}
		if len(p.Code) > 0 {
			bads = append(bads,
				func(w []uint32) []uint32 { w[constraints.HeaderWords] = 0x7f << 24; return w },      // unknown op
				func(w []uint32) []uint32 { w[constraints.HeaderWords+1] = 1<<30 | 1<<29; return w }, // slot out of range
			)
		}
		for i, bad := range bads {
			c := bad(append([]uint32(nil), words...))
			if _, err := constraints.Decode(c); !errors.Is(err, constraints.ErrProgram) {
				t.Fatalf("%s: corruption %d accepted (%v)", a.Name(), i, err)
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	p, err := constraints.Compile(keygen(f, testair.Fibonacci(0, 1, 8).Air), constraints.All)
	if err != nil {
		f.Fatal(err)
	}
	words, _ := p.Encode()
	b := make([]byte, 4*len(words))
	for i, w := range words {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		w := make([]uint32, len(b)/4)
		for i := range w {
			w[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		}
		q, err := constraints.Decode(w)
		if err != nil {
			return
		}
		// A decoded program runs without panicking.
		slots := make([]field.Fp, 2*q.NumCols+3)
		constraints.Eval(q, slots, make([]field.Fp, q.NumPublic), func(x field.Fp) field.Fp { return x }, func(int, field.Fp) {}, nil)
	})
}

// TestSplit: the pieces of Split emit every output of the whole program exactly once, with the
// same values, and stay near their share of the code.
func TestSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, a := range airs(t) {
		vk := keygen(t, a)
		whole, err := constraints.Compile(vk, constraints.All)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 7, 32} {
			pieces, err := constraints.Split(vk, constraints.All, k)
			if err != nil {
				t.Fatal(err)
			}
			if len(pieces) > k || len(pieces) < 1 {
				t.Fatalf("%s: %d pieces for k = %d", a.Name(), len(pieces), k)
			}
			slots := fieldrand.Fps(r, whole.NumSlots())
			public := fieldrand.Fps(r, vk.NumPublicValues)
			want := make([]field.Fp, len(whole.Outputs))
			constraints.Eval(whole, slots, public, func(x field.Fp) field.Fp { return x }, func(o int, v field.Fp) { want[o] = v }, nil)
			seen := make([]int, len(whole.Outputs))
			code := 0
			for _, p := range pieces {
				code += len(p.Code)
				constraints.Eval(p, slots, public, func(x field.Fp) field.Fp { return x }, func(o int, v field.Fp) {
					seen[o]++
					if v != want[o] {
						t.Fatalf("%s k=%d: output %d = %v, whole program %v", a.Name(), k, o, v, want[o])
					}
				}, nil)
			}
			for o, c := range seen {
				if c != 1 {
					t.Fatalf("%s k=%d: output %d emitted %d times", a.Name(), k, o, c)
				}
			}
			if a.Name() == "keccakf" && k == 32 {
				longest := 0
				for _, p := range pieces {
					longest = max(longest, len(p.Code))
				}
				t.Logf("keccakf in %d pieces: %d instructions in all (whole: %d), the longest %d", len(pieces), code, len(whole.Code), longest)
			}
		}
	}
}

// TestCompileDepthFirst: a DAG that lists K expressions side by side (every first step, then
// every second, then every third) compiles depth first, one expression after another: a couple of
// registers instead of K, and the same outputs; Keccak-f's device pieces keep few registers.
func TestCompileDepthFirst(t *testing.T) {
	const K = 40
	vk := *keygen(t, keccakf.Air{})
	x := func(i int) air.Node {
		return air.Node{Op: air.OpVariable, Var: air.Var{Entry: air.EntryMain, Index: i}, Degree: 1}
	}
	// Nodes: x0, x1, x2, then K constants, K sums x0 + c_k, K products (x0 + c_k)·x1, K
	// differences minus x2 (the constraints).
	dag := &air.DAG{Nodes: []air.Node{x(0), x(1), x(2)}}
	for k := range K {
		dag.Nodes = append(dag.Nodes, air.Node{Op: air.OpConstant, C: field.Fp(k + 2)})
	}
	for k := range K {
		dag.Nodes = append(dag.Nodes, air.Node{Op: air.OpAdd, L: 0, R: 3 + k, Degree: 1})
	}
	for k := range K {
		dag.Nodes = append(dag.Nodes, air.Node{Op: air.OpMul, L: 3 + K + k, R: 1, Degree: 2})
	}
	for k := range K {
		dag.Nodes = append(dag.Nodes, air.Node{Op: air.OpSub, L: 3 + 2*K + k, R: 2, Degree: 2})
		dag.ConstraintIdx = append(dag.ConstraintIdx, len(dag.Nodes)-1)
	}
	vk.DAG = dag
	p, err := constraints.Compile(&vk, constraints.All)
	if err != nil {
		t.Fatal(err)
	}
	if p.NumRegs > 2 || len(p.Code) != 4*K {
		t.Errorf("%d registers and %d instructions, want at most 2 and %d", p.NumRegs, len(p.Code), 4*K)
	}
	r := rand.New(rand.NewPCG(7, 8))
	slots := fieldrand.Fps(r, p.NumSlots())
	x0, x1, x2 := slots[2*p.PartStart[0]], slots[2*p.PartStart[0]+2], slots[2*p.PartStart[0]+4] // columns 0..2, offset 0
	seen := 0
	constraints.Eval(p, slots, nil, func(v field.Fp) field.Fp { return v }, func(o int, v field.Fp) {
		seen++
		if want := x0.Add(field.Fp(o + 2)).Mul(x1).Sub(x2); v != want {
			t.Errorf("output %d = %v, want %v", o, v, want)
		}
	}, nil)
	if seen != K {
		t.Errorf("%d outputs emitted, want %d", seen, K)
	}

	// Keccak-f's device pieces (constraints.Split): 65 and 33 registers at most in the DAG's order.
	for _, k := range []int{constraints.DevicePieces, constraints.DeviceRoundPieces} {
		pieces, err := constraints.Split(keygen(t, keccakf.Air{}), constraints.All, k)
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		for _, p := range pieces {
			most = max(most, p.NumRegs)
		}
		if most > 8 {
			t.Errorf("keccakf in %d pieces: a piece needs %d registers, want at most 8", len(pieces), most)
		}
	}
}
