package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

func TestPermuteMatchesGo(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 9, 1001, 1024, 1025, 1 << 16} {
		v := fieldrand.Fps(r, 16*n)
		if n == 9 { // edge states: all zero, all one, all p−1
			for i := 0; i < 16; i++ {
				v[i], v[16+i], v[32+i] = 0, 1, field.Fp(field.P-1)
			}
		}
		a := upload(t, v)
		if k := syncs(t, func() error { return h.Permute(a, n) }); k != 1 {
			t.Errorf("%d syncs", k)
		}
		got := readBack(t, a)
		for i := 0; i < n; i++ {
			var s [16]field.Fp
			copy(s[:], v[16*i:])
			poseidon2.Permute(&s)
			if i := firstDiff(got[16*i:16*i+16], s[:]); i >= 0 {
				t.Fatalf("n=%d state %d lane %d differs", n, i, i)
			}
		}
	}
}

func TestMerkleTreeMatchesCpuref(t *testing.T) {
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(15, 16))
	cases := []struct{ logH, width, k int }{
		{0, 1, 0}, {1, 1, 1}, {3, 9, 0}, {4, 8, 2}, {4, 16, 4}, {5, 7, 3}, {10, 42, 4}, {11, 1, 1}, {12, 17, 2}, {16, 3, 4},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("2^%dx%d/k=%d", c.logH, c.width, c.k), func(t *testing.T) {
			m := air.NewMatrix(c.width, 1<<c.logH)
			copy(m.Values, fieldrand.Fps(r, len(m.Values)))
			want, err := cpuref.NewMerkleTree(m, 1<<c.k)
			if err != nil {
				t.Fatal(err)
			}
			a := upload(t, m.Values)
			var tree *MerkleTree
			if n := syncs(t, func() (err error) {
				tree, err = h.MerkleTree(a, m.Height, m.Width, c.k)
				return err
			}); n != 1 {
				t.Errorf("%d syncs, want 1", n)
			}
			defer tree.Free()
			root, err := tree.Root()
			if err != nil {
				t.Fatal(err)
			}
			if root != want.Root() {
				t.Fatalf("root %v, want %v", root, want.Root())
			}
			if tree.Depth() != want.ProofDepth() {
				t.Fatalf("depth %d, want %d", tree.Depth(), want.ProofDepth())
			}
			l0, err := tree.Layer(0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range l0 {
				if l0[i] != want.DigestLayers[0][i] {
					t.Fatalf("layer 0 digest %d differs", i)
				}
			}
			for _, y := range []int{0, tree.QueryStride() - 1, tree.QueryStride() / 3} {
				o, err := tree.Open(y)
				if err != nil {
					t.Fatal(err)
				}
				wo, _ := want.Open(y)
				if fmt.Sprint(o.Rows) != fmt.Sprint(wo.Rows) || fmt.Sprint(o.Proof) != fmt.Sprint(wo.Proof) {
					t.Fatalf("opening %d differs", y)
				}
				if err := cpuref.VerifyOpening(root, 1<<c.k, c.width, &cpuref.MerkleOpening{Index: o.Index, Rows: o.Rows, Proof: o.Proof}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestMerkleTreeSplitDispatches: with a tiny permutation budget per dispatch the leaf hashing and
// the compress layers are split into dispatches over row (digest) ranges; the tree is unchanged.
func TestMerkleTreeSplitDispatches(t *testing.T) {
	old := maxPermsPerDispatch
	maxPermsPerDispatch = 1 // chunks of 1024 rows (digests)
	defer func() { maxPermsPerDispatch = old }()
	h, err := NewPoseidon2(testDev)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(17, 18))
	m := air.NewMatrix(17, 1<<12)
	copy(m.Values, fieldrand.Fps(r, len(m.Values)))
	want, err := cpuref.NewMerkleTree(m, 4)
	if err != nil {
		t.Fatal(err)
	}
	a := upload(t, m.Values)
	before := testDev.Stats().PerKernel
	tree, err := h.MerkleTree(a, m.Height, m.Width, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Free()
	after := testDev.Stats().PerKernel
	// 4096 rows: 4 leaf dispatches; group levels of 2048 and 1024 digests: 2 + 1; then 512 … 1: 10.
	if n := after["merkle_hash_rows"] - before["merkle_hash_rows"]; n != 4 {
		t.Errorf("%d merkle_hash_rows dispatches, want 4", n)
	}
	if n := after["merkle_compress"] - before["merkle_compress"]; n != 13 {
		t.Errorf("%d merkle_compress dispatches, want 13", n)
	}
	root, err := tree.Root()
	if err != nil || root != want.Root() {
		t.Fatalf("root %v (%v), want %v", root, err, want.Root())
	}
	l0, err := tree.Layer(0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range l0 {
		if l0[i] != want.DigestLayers[0][i] {
			t.Fatalf("layer 0 digest %d differs", i)
		}
	}
}

func TestChunkItems(t *testing.T) {
	for _, c := range []struct{ n, perms, want int }{
		{1 << 22, 6, 1 << 21}, // 2^24 / 6 → 2^21 rows of 42 columns
		{1 << 20, 6, 1 << 20}, // fits
		{100, 1000, 100},      // a small matrix is never split
		{1 << 20, 1 << 30, 1024},
		{0, 1, 1},
	} {
		if got := chunkItems(c.n, c.perms); got != c.want {
			t.Errorf("chunkItems(%d, %d) = %d, want %d", c.n, c.perms, got, c.want)
		}
	}
}

// The group permutation (poseidon2_group.h) carries element 0 through the partial rounds as
// Σ_{i≥1} x_i − s0, which holds because the diagonal's first entry V_0 is −2.
func TestRoundConstantsDiagonalStartsAtMinusTwo(t *testing.T) {
	rc := RoundConstants()
	if len(rc) != p2gRCLen {
		t.Fatalf("%d round constants, want %d", len(rc), p2gRCLen)
	}
	v0 := rc[poseidon2RCLen-16]
	if want := MontOf(field.NewInt(-2)); v0 != want {
		t.Fatalf("V_0 = %v in Montgomery form, want −2 (%v)", v0, want)
	}
}

// poseidon2_group.h runs the 13 partial rounds by moments m_j = Σ_{i≥1} V_i^j·x_i, one a thread,
// with the tables RoundConstants appends (V_k^j for j = 1..12, W_j = Σ_{i≥1} V_i^j). The same
// recurrence here, in the field, against the rounds as defined, on random and edge states.
func TestPartialRoundsByMoments(t *testing.T) {
	rc := CanonicalSlice(RoundConstants())
	internal := rc[64:77]
	diag := rc[poseidon2RCLen-16 : poseidon2RCLen]
	pow := func(j, k int) field.Fp { // V_k^j from the table (j ≥ 1)
		return rc[poseidon2RCLen+16*(j-1)+k]
	}
	w := rc[poseidon2RCLen+192 : p2gRCLen]
	rng := rand.New(rand.NewPCG(5, 7))
	for trial := 0; trial < 200; trial++ {
		var x [16]field.Fp
		for i := range x {
			switch trial {
			case 0:
				x[i] = 0
			case 1:
				x[i] = field.Fp(field.P - 1)
			default:
				x[i] = field.Fp(rng.Uint32N(field.P))
			}
		}
		want := x
		for r := 0; r < 13; r++ {
			s0 := sbox7(want[0].Add(internal[r]))
			sum := s0
			for i := 1; i < 16; i++ {
				sum = sum.Add(want[i])
			}
			want[0] = sum.Add(diag[0].Mul(s0))
			for i := 1; i < 16; i++ {
				want[i] = sum.Add(diag[i].Mul(want[i]))
			}
		}
		var m [16]field.Fp // thread j's moment; the recurrence reads m_{j+1} of the round before
		for j := 0; j < 13; j++ {
			for i := 1; i < 16; i++ {
				v := x[i]
				if j > 0 {
					v = pow(j, i).Mul(x[i])
				}
				m[j] = m[j].Add(v)
			}
		}
		got := x
		for r := 0; r < 13; r++ {
			s0 := sbox7(got[0].Add(internal[r]))
			c := s0.Add(m[0])
			got[0] = m[0].Sub(s0)
			for i := 1; i < 16; i++ {
				got[i] = c.Add(diag[i].Mul(got[i]))
			}
			for j := 0; j < 15; j++ {
				m[j] = c.Mul(w[j]).Add(m[j+1])
			}
		}
		if got != want {
			t.Fatalf("trial %d: moments give %v, the rounds %v", trial, got, want)
		}
	}
}

func sbox7(x field.Fp) field.Fp {
	x2 := x.Mul(x)
	return x2.Mul(x2).Mul(x2.Mul(x))
}
