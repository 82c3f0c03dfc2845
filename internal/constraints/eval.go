package constraints

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

// Elem is a field the program can be evaluated over: field.Fp or field.Fp4.
type Elem[T any] interface {
	Add(T) T
	Sub(T) T
	Mul(T) T
	Neg() T
}

// Eval runs p at one point: slots are the slot values (NumSlots of them; only Used ones are
// read), public the AIR's public values, lift embeds base-field constants and public values in T,
// and emit receives every output as it is computed (in code order). regs is scratch, reused when
// large enough; the grown scratch is returned.
func Eval[T Elem[T]](p *Program, slots []T, public []field.Fp, lift func(field.Fp) T, emit func(out int, v T), regs []T) []T {
	if cap(regs) < p.NumRegs {
		regs = make([]T, p.NumRegs)
	}
	regs = regs[:p.NumRegs]
	val := func(o Operand) T { return operandValue(o, p, regs, slots, public, lift) }
	for _, in := range p.Code {
		switch in.Op {
		case OpAdd:
			regs[in.Dst] = val(in.A).Add(val(in.B))
		case OpSub:
			regs[in.Dst] = val(in.A).Sub(val(in.B))
		case OpNeg:
			regs[in.Dst] = val(in.A).Neg()
		case OpMul:
			regs[in.Dst] = val(in.A).Mul(val(in.B))
		case OpEmit:
			emit(int(in.Dst), val(in.A))
		}
	}
	return regs
}

func liftBase(x field.Fp) field.Fp { return x }

// Weights are a program's batching weights for one proof (spec B §4.1): per output, λ^K for
// constraint K, eq3b_K for the count of interaction K and eq3b_K·β^J for field J of its message;
// plus DenConst = Σ_K eq3b_K·β^{L_K}·(bus_K + 1), the part of the denominator no row changes.
type Weights struct {
	Out      []field.Fp4
	DenConst field.Fp4
}

// Weights returns p's weights for λ_c, β and the trace's eq3b values (one per interaction).
func (p *Program) Weights(lambda, beta field.Fp4, eq3b []field.Fp4) (*Weights, error) {
	if len(eq3b) != len(p.Interactions) {
		return nil, fmt.Errorf("%w: %d eq3b weights for %d interactions", ErrProgram, len(eq3b), len(p.Interactions))
	}
	lam := field.PowersFp4(lambda, p.NumConstraints)
	bet := field.PowersFp4(beta, p.MaxMsgLen+1)
	w := &Weights{Out: make([]field.Fp4, len(p.Outputs))}
	for o, out := range p.Outputs {
		switch out.Kind {
		case OutConstraint:
			w.Out[o] = lam[out.K]
		case OutCount:
			w.Out[o] = eq3b[out.K]
		case OutMessage:
			w.Out[o] = eq3b[out.K].Mul(bet[out.J])
		}
	}
	w.DenConst = p.denConst(bet, eq3b)
	return w, nil
}

// DenConst is Weights(·, beta, eq3b).DenConst alone: a few products per interaction, for a
// caller whose output weights are made elsewhere (the device's zc_weights).
func (p *Program) DenConst(beta field.Fp4, eq3b []field.Fp4) (field.Fp4, error) {
	if len(eq3b) != len(p.Interactions) {
		return field.Fp4{}, fmt.Errorf("%w: %d eq3b weights for %d interactions", ErrProgram, len(eq3b), len(p.Interactions))
	}
	return p.denConst(field.PowersFp4(beta, p.MaxMsgLen+1), eq3b), nil
}

// denConst is Σ_K eq3b_K·β^{L_K}·(bus_K + 1) from the powers of β.
func (p *Program) denConst(bet, eq3b []field.Fp4) field.Fp4 {
	var d field.Fp4
	for k, in := range p.Interactions {
		d = d.Add(eq3b[k].Mul(bet[len(in.Message)]).MulBase(field.Fp(uint32(in.Bus) + 1)))
	}
	return d
}

// Combined are the three batched values of one point: the λ-combined constraints (Zc), the
// eq3b-weighted LogUp numerators (Num) and denominators without α (Den).
type Combined struct{ Zc, Num, Den field.Fp4 }

// add folds output o of value v·(weight) into c.
func (c *Combined) add(kind OutputKind, wv field.Fp4) {
	switch kind {
	case OutConstraint:
		c.Zc = c.Zc.Add(wv)
	case OutCount:
		c.Num = c.Num.Add(wv)
	case OutMessage:
		c.Den = c.Den.Add(wv)
	}
}

// CombineBase evaluates p on base-field slots and batches the outputs with w. regs is scratch.
func (p *Program) CombineBase(w *Weights, slots []field.Fp, public []field.Fp, regs []field.Fp) (Combined, []field.Fp) {
	var c Combined
	regs = Eval(p, slots, public, liftBase, func(o int, v field.Fp) { c.add(p.Outputs[o].Kind, w.Out[o].MulBase(v)) }, regs)
	if len(p.Interactions) > 0 {
		c.Den = c.Den.Add(w.DenConst)
	}
	return c, regs
}

// CombineExt evaluates p on extension-field slots and batches the outputs with w.
func (p *Program) CombineExt(w *Weights, slots []field.Fp4, public []field.Fp, regs []field.Fp4) (Combined, []field.Fp4) {
	var c Combined
	regs = Eval(p, slots, public, field.Lift, func(o int, v field.Fp4) { c.add(p.Outputs[o].Kind, w.Out[o].Mul(v)) }, regs)
	if len(p.Interactions) > 0 {
		c.Den = c.Den.Add(w.DenConst)
	}
	return c, regs
}

// operandValue is operand o's value for an evaluation of p (Eval, EvalLevels): a register, a slot,
// a constant or a public value, the last two lifted into T.
func operandValue[T Elem[T]](o Operand, p *Program, regs, slots []T, public []field.Fp, lift func(field.Fp) T) T {
	switch o.Kind() {
	case KindReg:
		return regs[o.Index()]
	case KindSlot:
		return slots[o.Index()]
	case KindConst:
		return lift(p.Consts[o.Index()])
	}
	return lift(public[o.Index()])
}
