package piececode

import (
	"bytes"
	"fmt"

	"github.com/metalprove/metalprove/internal/constraints"
)

// dialect is how a program's straight-line code is spelt: the value type, the field operations
// (functions of one or two values), a slot's load (a declaration of variable s<slot>), and the
// expressions of a constant (Montgomery form) and of public value i (index into cp).
type dialect struct {
	indent, typ        string
	add, sub, mul, neg string
	load               func(slot int) string
	konst              func(mont uint32) string
	public             func(i int) string
}

// writeBody writes the instructions of p in dialect d: every value a variable of its own (v<j> for
// instruction j; the program reuses registers by liveness, compilers build SSA form anyway),
// every slot loaded once, before its first use; an output goes to emit (its index and value).
func writeBody(b *bytes.Buffer, p *constraints.Program, d dialect, emit func(o uint32, v string)) error {
	regName := make([]string, p.NumRegs) // the variable holding each register's current value
	loaded := map[int]bool{}
	var err error
	operand := func(o constraints.Operand) string {
		i := o.Index()
		switch o.Kind() {
		case constraints.KindReg:
			if i >= len(regName) || regName[i] == "" {
				err = fmt.Errorf("register %d read before it is written", i)
				return "R"
			}
			return regName[i]
		case constraints.KindSlot:
			if !loaded[i] {
				loaded[i] = true
				fmt.Fprintf(b, "%s%s s%d = %s;\n", d.indent, d.typ, i, d.load(i))
			}
			return fmt.Sprintf("s%d", i)
		case constraints.KindConst:
			if i >= len(p.Consts) {
				err = fmt.Errorf("constant %d of %d", i, len(p.Consts))
				return "C"
			}
			return d.konst(montOf(p.Consts[i]))
		default:
			if i >= p.NumPublic {
				err = fmt.Errorf("public value %d of %d", i, p.NumPublic)
			}
			return d.public(len(p.Consts) + i)
		}
	}
	for j, in := range p.Code {
		a := operand(in.A)
		if in.Op == constraints.OpEmit {
			if int(in.Dst) >= len(p.Outputs) {
				return fmt.Errorf("instruction %d: output %d of %d", j, in.Dst, len(p.Outputs))
			}
			emit(in.Dst, a)
			continue
		}
		var expr string
		switch in.Op {
		case constraints.OpAdd:
			expr = fmt.Sprintf("%s(%s, %s)", d.add, a, operand(in.B))
		case constraints.OpSub:
			expr = fmt.Sprintf("%s(%s, %s)", d.sub, a, operand(in.B))
		case constraints.OpMul:
			expr = fmt.Sprintf("%s(%s, %s)", d.mul, a, operand(in.B))
		case constraints.OpNeg:
			expr = fmt.Sprintf("%s(%s)", d.neg, a)
		default:
			return fmt.Errorf("instruction %d: op %v", j, in.Op)
		}
		if int(in.Dst) >= len(regName) {
			return fmt.Errorf("instruction %d: register %d of %d", j, in.Dst, len(regName))
		}
		v := fmt.Sprintf("v%d", j)
		fmt.Fprintf(b, "%s%s %s = %s;\n", d.indent, d.typ, v, expr)
		regName[in.Dst] = v
	}
	return err
}
