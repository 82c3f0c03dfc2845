// Package starktest holds reference evaluations shared by the stark tests and the device
// backend's tests; only _test.go files import it.
package starktest

import (
	"math/rand/v2"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/stark"
)

// RandFp4 returns a uniformly random extension element.
func RandFp4(r *rand.Rand) field.Fp4 {
	return field.Fp4{field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P)), field.Fp(r.Uint32N(field.P))}
}

// EvalColumn is the reference PLE evaluation t̂(r) of a trace column (spec B §2.1): for
// h ≥ l_skip Σ_i T[i]·eq_D(r_0, ω^(i mod N))·eq(r_{1..ñ}, bits(i >> l_skip)); for h < l_skip the
// univariate t̂(r_0^(2^(l_skip−h))) on the subgroup of order 2^h.
func EvalColumn(lSkip int, col []field.Fp, r []field.Fp4) field.Fp4 {
	h, _ := field.Log2(len(col))
	var acc field.Fp4
	if h < lSkip {
		z := stark.ExpPow2(r[0], lSkip-h)
		w := field.TwoAdicGenerator(h)
		for i, v := range col {
			acc = acc.Add(stark.EqUni(h, z, field.Lift(w.Exp(uint64(i)))).MulBase(v))
		}
		return acc
	}
	n := 1 << lSkip
	w := field.TwoAdicGenerator(lSkip)
	eqD := make([]field.Fp4, n)
	for a := range eqD {
		eqD[a] = stark.EqUni(lSkip, r[0], field.Lift(w.Exp(uint64(a))))
	}
	eqX := stark.EvalsEqHypercube(r[1 : h-lSkip+1])
	for i, v := range col {
		acc = acc.Add(eqD[i%n].Mul(eqX[i>>lSkip]).MulBase(v))
	}
	return acc
}

// Column returns column j of a trace matrix.
func Column(t air.Matrix, j int) []field.Fp { return t.Values[j*t.Height : (j+1)*t.Height] }

// Rotate returns a copy of col shifted up by one row (the rotated column, row i ↦ col[i+1]).
func Rotate(col []field.Fp) []field.Fp {
	return append(append([]field.Fp(nil), col[1:]...), col[0])
}

// Row evaluates a DAG on one unlifted row of an AIR input: variables at offset o read row
// (Row+o) mod H.
type Row struct {
	In     *stark.AirInput
	Row, H int
}

func (v *Row) Var(x air.Var) field.Fp {
	r := (v.Row + x.Offset) % v.H
	switch x.Entry {
	case air.EntryPreprocessed:
		return v.In.Preprocessed.Host().Values[x.Index*v.H+r]
	case air.EntryMain:
		m := v.In.Common.Host()
		if x.PartIndex < len(v.In.Cached) {
			m = v.In.Cached[x.PartIndex].Host()
		}
		return m.Values[x.Index*v.H+r]
	case air.EntryPublic:
		return v.In.Public[x.Index]
	}
	panic("starktest: unsupported variable entry")
}

func (v *Row) IsFirstRow() field.Fp { return fpBool(v.Row == 0) }
func (v *Row) IsLastRow() field.Fp  { return fpBool(v.Row == v.H-1) }
func (v *Row) IsTransition() field.Fp {
	return field.One.Sub(v.IsLastRow())
}

func fpBool(b bool) field.Fp {
	if b {
		return field.One
	}
	return field.Zero
}
