package stark

import (
	"github.com/metalprove/metalprove/internal/field"
)

// Polynomial kernels shared by the stacked opening reduction and WHIR (OpenVM
// crates/stark-backend/src/poly_common.rs; spec A §1.5, B §2.3). All vectors are little-endian:
// coordinate i ↔ bit i of a hypercube index.

// EqMLE is eval_eq_mle: Π_i (1 − x_i − y_i + 2·x_i·y_i). len(x) must equal len(y).
func EqMLE(x, y []field.Fp4) field.Fp4 {
	acc := field.Fp4One
	for i := range x {
		acc = acc.Mul(eqFactor(x[i], y[i]))
	}
	return acc
}

func eqFactor(x, y field.Fp4) field.Fp4 {
	return field.Fp4One.Sub(y).Sub(x).Add(x.Mul(y).Double())
}

// MobiusEqMLE is eval_mobius_eq_mle: Π_i ((1 − 2u_i)(1 − x_i) + u_i·x_i).
func MobiusEqMLE(u, x []field.Fp4) field.Fp4 {
	acc := field.Fp4One
	for i := range u {
		w0 := field.Fp4One.Sub(u[i].Double())
		acc = acc.Mul(w0.Mul(field.Fp4One.Sub(x[i])).Add(u[i].Mul(x[i])))
	}
	return acc
}

// EvalMLEEvals is eval_mle_evals_at_point on a copy of evals (length 2^len(x)): the multilinear
// extension of the hypercube table evals at x, folding the last coordinate first.
func EvalMLEEvals(evals, x []field.Fp4) field.Fp4 {
	e := append([]field.Fp4(nil), evals...)
	n := len(e)
	for j := len(x) - 1; j >= 0; j-- {
		n >>= 1
		one := field.Fp4One.Sub(x[j])
		for i := 0; i < n; i++ {
			e[i] = e[i].Mul(one).Add(e[i+n].Mul(x[j]))
		}
	}
	if len(e) == 0 {
		return field.Fp4{}
	}
	return e[0]
}

// EvalsEqHypercube returns the table E[b] = eq(x, bits(b)), length 2^len(x).
func EvalsEqHypercube(x []field.Fp4) []field.Fp4 {
	out := make([]field.Fp4, 1<<len(x))
	out[0] = field.Fp4One
	for i, xi := range x {
		h := 1 << i
		one := field.Fp4One.Sub(xi)
		for j := 0; j < h; j++ {
			out[j+h] = out[j].Mul(xi)
			out[j] = out[j].Mul(one)
		}
	}
	return out
}

// EvalsMobiusEqHypercube returns K(u, b) = Π_i (bit_i(b) ? u_i : 1 − 2u_i), length 2^len(u)
// (evals_mobius_eq_hypercube).
func EvalsMobiusEqHypercube(u []field.Fp4) []field.Fp4 {
	out := make([]field.Fp4, 1<<len(u))
	out[0] = field.Fp4One
	for i, ui := range u {
		h := 1 << i
		w0 := field.Fp4One.Sub(ui.Double())
		for j := 0; j < h; j++ {
			out[j+h] = out[j].Mul(ui)
			out[j] = out[j].Mul(w0)
		}
	}
	return out
}

// InvPow2 returns 2^(−l).
func InvPow2(l int) field.Fp { return field.InvTwo.Exp(uint64(l)) }

// EqUni is eval_eq_uni: the Lagrange kernel eq_D(x, y) of the subgroup of order 2^l.
func EqUni(l int, x, y field.Fp4) field.Fp4 {
	res := field.Fp4One
	xp, yp := x, y
	for i := 0; i < l; i++ {
		res = xp.Add(yp).Mul(res).Add(xp.Sub(field.Fp4One).Mul(yp.Sub(field.Fp4One)))
		xp, yp = xp.Square(), yp.Square()
	}
	return res.MulBase(InvPow2(l))
}

// EqUniAtOne is eval_eq_uni_at_one: eq_D(x, 1) = 2^(−l)·Π_{i<l} (x^(2^i) + 1).
func EqUniAtOne(l int, x field.Fp4) field.Fp4 {
	res := field.Fp4One
	xp := x
	for i := 0; i < l; i++ {
		res = res.Mul(xp.AddBase(field.One))
		xp = xp.Square()
	}
	return res.MulBase(InvPow2(l))
}

// EqUniCoeffs is eq_uni_poly: the coefficients (constant first, length 2^l) of Z ↦ eq_D(x, Z):
// c_0 = 2^(−l), c_j = x^(2^l − j)·2^(−l).
func EqUniCoeffs(l int, x field.Fp4) []field.Fp4 {
	n := 1 << l
	inv := InvPow2(l)
	out := make([]field.Fp4, n)
	out[0] = field.Lift(inv)
	pw := x.MulBase(inv) // x^1 / N goes to index N−1
	for j := n - 1; j >= 1; j-- {
		out[j] = pw
		pw = pw.Mul(x)
	}
	return out
}

// ExpPow2 returns x^(2^e).
func ExpPow2(x field.Fp4, e int) field.Fp4 {
	for ; e > 0; e-- {
		x = x.Square()
	}
	return x
}

// InUni is eval_in_uni(l_skip, n, z): for n < 0 eq_D^{(−n)}(z^(2^(l_skip+n)), 1), else 1.
func InUni(lSkip, n int, z field.Fp4) field.Fp4 {
	if n >= 0 {
		return field.Fp4One
	}
	return EqUniAtOne(-n, ExpPow2(z, lSkip+n))
}

// EqPrism is eval_eq_prism: eq_D^{(l)}(x_0, y_0)·eq(x[1..], y[1..]).
func EqPrism(l int, x, y []field.Fp4) field.Fp4 {
	return EqUni(l, x[0], y[0]).Mul(EqMLE(x[1:], y[1:]))
}

// EqRotCube is eval_eq_rot_cube: (eq(x, y), κ_cube(x, y)) where κ_cube is the MLE of
// [int(x) = int(y) + 1 mod 2^n].
func EqRotCube(x, y []field.Fp4) (eq, rot field.Fp4) {
	eq, rot = field.Fp4One, field.Fp4One
	for i := len(x) - 1; i >= 0; i-- {
		omx, omy := field.Fp4One.Sub(x[i]), field.Fp4One.Sub(y[i])
		rot = x[i].Mul(omy).Mul(eq).Add(omx.Mul(y[i]).Mul(rot))
		eq = eq.Mul(x[i].Mul(y[i]).Add(omx.Mul(omy)))
	}
	return eq, rot
}

// RotKernelPrism is eval_rot_kernel_prism: κ_rot^{(l)}(x, y).
func RotKernelPrism(l int, x, y []field.Fp4) field.Fp4 {
	omega := field.TwoAdicGenerator(l)
	eqc, rotc := EqRotCube(x[1:], y[1:])
	y0w := y[0].MulBase(omega)
	return EqUni(l, x[0], y0w).Mul(eqc).Add(EqUniAtOne(l, x[0]).Mul(EqUniAtOne(l, y0w)).Mul(rotc.Sub(eqc)))
}

// Horner evaluates Σ_i c_i·x^i.
func Horner(c []field.Fp4, x field.Fp4) field.Fp4 {
	var acc field.Fp4
	for i := len(c) - 1; i >= 0; i-- {
		acc = acc.Mul(x).Add(c[i])
	}
	return acc
}

// InterpolateQuadratic012 is interpolate_quadratic_at_012.
func InterpolateQuadratic012(e0, e1, e2, x field.Fp4) field.Fp4 {
	s1 := e1.Sub(e0)
	s2 := e2.Sub(e1)
	a := s2.Sub(s1).Halve()
	b := s1.Sub(a)
	return a.Mul(x).Add(b).Mul(x).Add(e0)
}

// PowersOf2 returns (x, x^2, x^4, …), n entries (exp_powers_of_2().take(n)).
func PowersOf2(x field.Fp4, n int) []field.Fp4 {
	out := make([]field.Fp4, n)
	for i := range out {
		out[i] = x
		x = x.Square()
	}
	return out
}

// UCube turns the stacked-reduction point (u_0; u_1..u_n) into the WHIR point
// (u_0, u_0^2, …, u_0^(2^(l_skip−1)), u_1, …, u_n) (spec A §5.4, B §5.5).
func UCube(lSkip int, uPrism []field.Fp4) []field.Fp4 {
	if len(uPrism) == 0 {
		return nil
	}
	return append(PowersOf2(uPrism[0], lSkip), uPrism[1:]...)
}

// BinaryKFold is binary_k_fold (spec A §6.5): values[t] = f(x·ω_k^t), t < 2^k = len(values),
// k = len(alphas); returns g_k(x^(2^k)). values is modified.
func BinaryKFold(values []field.Fp4, alphas []field.Fp4, x field.Fp) field.Fp4 {
	k := len(alphas)
	if k == 0 {
		return values[0]
	}
	n := len(values)
	omega := field.TwoAdicGenerator(k)
	tw := field.Powers(omega, 1<<(k-1))
	itw := field.Powers(omega.Inverse(), 1<<(k-1))
	xp, xip := x, x.Inverse()
	for j, alpha := range alphas {
		h := n >> (j + 1)
		for i := 0; i < h; i++ {
			t := tw[i<<j].Mul(xp)
			ti := itw[i<<j].Mul(xip).Halve()
			values[i] = values[i].Add(alpha.Sub(field.Lift(t)).Mul(values[i].Sub(values[i+h])).MulBase(ti))
		}
		xp, xip = xp.Square(), xip.Square()
	}
	return values[0]
}
