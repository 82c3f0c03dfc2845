package cpuref

import (
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

// evalPLE evaluates the prismalinear extension q̂ of the stacked column q (spec A §5.4) at
// (u[0], u[1..n]): per block x, the Z-coefficients (naive IDFT over D) evaluated at u[0] give the
// hypercube table v[x], whose multilinear extension is then evaluated at u[1..n] (last
// coordinate folded first, bit t−1 of x ↔ X_t).
func evalPLE(lSkip int, q []field.Fp, u []field.Fp4) field.Fp4 {
	b := 1 << lSkip
	v := make([]field.Fp4, len(q)/b)
	for x := range v {
		coeffs, err := NaiveIDFT(q[x*b : (x+1)*b])
		if err != nil {
			panic(err)
		}
		var acc field.Fp4
		for i := len(coeffs) - 1; i >= 0; i-- {
			acc = acc.Mul(u[0]).AddBase(coeffs[i])
		}
		v[x] = acc
	}
	for j := len(u) - 1; j >= 1; j-- {
		half := len(v) / 2
		for i := 0; i < half; i++ {
			v[i] = v[i].Add(v[i+half].Sub(v[i]).Mul(u[j]))
		}
		v = v[:half]
	}
	return v[0]
}

// naiveCoeffTable returns the coefficient table c of §5.4: per block the Z-coefficients, then
// the Möbius transform along the X bits (index bits ≥ lSkip), computed directly.
func naiveCoeffTable(lSkip int, q []field.Fp) []field.Fp {
	b := 1 << lSkip
	c := make([]field.Fp, len(q))
	for x := 0; x < len(q)/b; x++ {
		z, _ := NaiveIDFT(q[x*b : (x+1)*b])
		copy(c[x*b:], z)
	}
	// c[i0 + b·S] = Σ_{T ⊆ S} (−1)^{|S∖T|} z[i0 + b·T]
	out := make([]field.Fp, len(q))
	nx := len(q) / b
	for i0 := 0; i0 < b; i0++ {
		for s := 0; s < nx; s++ {
			var acc field.Fp
			for tt := s; ; tt = (tt - 1) & s {
				v := c[i0+b*tt]
				if popcount(s^tt)%2 == 1 {
					v = v.Neg()
				}
				acc = acc.Add(v)
				if tt == 0 {
					break
				}
			}
			out[i0+b*s] = acc
		}
	}
	return out
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// subsetSums returns E[b] = Σ_{S ⊆ b} c[S] by enumeration.
func subsetSums(c []field.Fp) []field.Fp {
	out := make([]field.Fp, len(c))
	for b := range c {
		var acc field.Fp
		for s := b; ; s = (s - 1) & b {
			acc = acc.Add(c[s])
			if s == 0 {
				break
			}
		}
		out[b] = acc
	}
	return out
}

// evalCoeffMLE returns Σ_S c[S]·Π_{i∈S} u_i.
func evalCoeffMLE(c []field.Fp, u []field.Fp4) field.Fp4 {
	v := make([]field.Fp4, len(c))
	for i, x := range c {
		v[i] = field.Lift(x)
	}
	for j := len(u) - 1; j >= 0; j-- {
		half := len(v) / 2
		for i := 0; i < half; i++ {
			v[i] = v[i].Add(v[i+half].Mul(u[j]))
		}
		v = v[:half]
	}
	return v[0]
}

func randFp4(r interface{ Uint32N(uint32) uint32 }) field.Fp4 {
	return field.Fp4{field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P))}
}

func TestZetaMobius(t *testing.T) {
	r := newRNG(10)
	for logN := 0; logN <= 8; logN++ {
		c := randVec(r, 1<<logN)
		e := append([]field.Fp(nil), c...)
		CoeffsToEvals(e)
		eqVec(t, "zeta", e, subsetSums(c))
		EvalsToCoeffs(e)
		eqVec(t, "möbius∘zeta", e, c)
	}
}

func TestRSMessageDefinition(t *testing.T) {
	r := newRNG(11)
	for _, tc := range []struct{ lSkip, m int }{{0, 0}, {0, 3}, {1, 1}, {2, 2}, {2, 5}, {3, 7}, {4, 6}} {
		q := randVec(r, 1<<tc.m)
		msg, err := RSMessage(tc.lSkip, q)
		if err != nil {
			t.Fatal(err)
		}
		c := naiveCoeffTable(tc.lSkip, q)
		// M = hypercube evaluation table of P_c.
		eqVec(t, "rs message", msg, subsetSums(c))

		// PLE identity: q̂(u_prism) = P_c(u_cube), u_cube = (u0, u0², …, u0^{2^{l_skip−1}}, u1..un).
		u := make([]field.Fp4, 1+tc.m-tc.lSkip)
		for i := range u {
			u[i] = randFp4(r)
		}
		ucube := make([]field.Fp4, 0, tc.m)
		p := u[0]
		for i := 0; i < tc.lSkip; i++ {
			ucube = append(ucube, p)
			p = p.Square()
		}
		ucube = append(ucube, u[1:]...)
		pc := evalCoeffMLE(c, ucube)
		if tc.lSkip > 0 || tc.m > 0 {
			if got := evalPLE(tc.lSkip, q, u); got != pc {
				t.Fatalf("l_skip=%d m=%d: q̂(u_prism) %v != P_c(u_cube) %v", tc.lSkip, tc.m, got, pc)
			}
		}
		// Decoder kernel identity (§5.5): P_c(u) = Σ_b F̂(b)·K(u,b), F̂(b) = Σ_{S⊆b} M[S],
		// K(u,b) = Π_i (bit_i(b) ? u_i : 1 − 2u_i).
		fhat := subsetSums(msg)
		var sum field.Fp4
		for b, fb := range fhat {
			k := field.Lift(1)
			for i, ui := range ucube {
				if b>>i&1 == 1 {
					k = k.Mul(ui)
				} else {
					k = k.Mul(field.Lift(1).Sub(ui.Double()))
				}
			}
			sum = sum.Add(k.MulBase(fb))
		}
		if sum != pc {
			t.Fatalf("l_skip=%d m=%d: kernel identity fails", tc.lSkip, tc.m)
		}
		// PLE interpolates q on D × {0,1}^n.
		if tc.m <= 5 {
			wD := field.TwoAdicGenerator(tc.lSkip)
			for i := range q {
				a, x := i&(1<<tc.lSkip-1), i>>tc.lSkip
				pt := make([]field.Fp4, len(u))
				pt[0] = field.Lift(wD.Exp(uint64(a)))
				for j := 1; j < len(pt); j++ {
					pt[j] = field.Lift(field.Fp(x >> (j - 1) & 1))
				}
				if got := evalPLE(tc.lSkip, q, pt); got != field.Lift(q[i]) {
					t.Fatalf("q̂ at row %d = %v, want %d", i, got, q[i])
				}
			}
		}
	}
}

func TestRSEncodeLowDegree(t *testing.T) {
	r := newRNG(12)
	for _, tc := range []struct{ lSkip, m, lb int }{{0, 0, 0}, {0, 0, 2}, {2, 4, 1}, {3, 6, 2}, {4, 8, 1}, {2, 7, 0}} {
		q := randVec(r, 1<<tc.m)
		msg, _ := RSMessage(tc.lSkip, q)
		cw, err := RSEncode(tc.lSkip, tc.lb, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(cw) != 1<<(tc.m+tc.lb) {
			t.Fatalf("codeword length %d", len(cw))
		}
		// Spot-check C[r] = f(g^r), f(X) = Σ M[b] X^b.
		g := field.TwoAdicGenerator(tc.m + tc.lb)
		for _, row := range []int{0, len(cw) / 2, len(cw) - 1, 1 % len(cw)} {
			x := g.Exp(uint64(row))
			var acc field.Fp
			for b := len(msg) - 1; b >= 0; b-- {
				acc = acc.Mul(x).Add(msg[b])
			}
			if cw[row] != acc {
				t.Fatalf("C[%d] = %d, want %d", row, cw[row], acc)
			}
		}
		// Low degree: IDFT(codeword) = M followed by a zero tail.
		back := append([]field.Fp(nil), cw...)
		_ = IDFT(back)
		eqVec(t, "coeffs head", back[:len(msg)], msg)
		for i := len(msg); i < len(back); i++ {
			if back[i] != 0 {
				t.Fatalf("coefficient %d = %d, want 0", i, back[i])
			}
		}
	}
}

func TestRSEncodeMatrixPerColumn(t *testing.T) {
	r := newRNG(13)
	q := randMatrix(r, 7, 1<<6)
	cw, err := RSEncodeMatrix(3, 2, q)
	if err != nil {
		t.Fatal(err)
	}
	if cw.Width != 7 || cw.Height != 1<<8 {
		t.Fatalf("shape %d×%d", cw.Height, cw.Width)
	}
	for j := 0; j < q.Width; j++ {
		want, _ := RSEncode(3, 2, q.Column(j))
		eqVec(t, "column", cw.Column(j), want)
	}
}

func TestRSErrors(t *testing.T) {
	if _, err := RSMessage(3, make([]field.Fp, 4)); err == nil {
		t.Error("l_skip > m accepted")
	}
	if _, err := RSMessage(1, make([]field.Fp, 6)); err == nil {
		t.Error("length 6 accepted")
	}
	if _, err := RSEncode(1, 20, make([]field.Fp, 1<<8)); err == nil {
		t.Error("codeword 2^28 accepted")
	}
	if _, err := RSEncodeMatrix(1, 1, air.Matrix{Values: make([]field.Fp, 5), Width: 2, Height: 4}); err == nil {
		t.Error("inconsistent matrix accepted")
	}
}
