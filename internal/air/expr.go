package air

import (
	"fmt"
	"strings"

	"github.com/metalprove/metalprove/internal/field"
)

// Entry says which part of the trace (or which kind of value) a symbolic variable reads.
// The numeric values are the serde variant indices of OpenVM's `Entry` (B §1.2).
type Entry uint8

// Entry kinds.
const (
	EntryPreprocessed Entry = 0 // preprocessed column, Offset 0 or 1
	EntryMain         Entry = 1 // main column of part PartIndex (DAG numbering), Offset 0 or 1
	EntryPublic       Entry = 2 // public value Index
	EntryChallenge    Entry = 3 // unsupported by the prover; kept for completeness
)

// Var is a symbolic variable `(entry, index)`. PartIndex is used only for EntryMain and Offset
// only for EntryPreprocessed / EntryMain; they are zero otherwise (so Var is a valid map key).
type Var struct {
	Entry     Entry
	PartIndex int
	Offset    int
	Index     int
}

// DegreeMultiple is 1 for trace columns and 0 for public values / challenges.
func (v Var) DegreeMultiple() int {
	if v.Entry == EntryPreprocessed || v.Entry == EntryMain {
		return 1
	}
	return 0
}

// String prints pre[i], m<part>[i] (a trailing ' marks the next row), pub[i] or ch[i].
func (v Var) String() string {
	next := ""
	if v.Offset == 1 {
		next = "'"
	} else if v.Offset > 1 {
		next = fmt.Sprintf("'%d", v.Offset)
	}
	switch v.Entry {
	case EntryPreprocessed:
		return fmt.Sprintf("pre[%d]%s", v.Index, next)
	case EntryMain:
		return fmt.Sprintf("m%d[%d]%s", v.PartIndex, v.Index, next)
	case EntryPublic:
		return fmt.Sprintf("pub[%d]", v.Index)
	default:
		return fmt.Sprintf("ch[%d]", v.Index)
	}
}

// Op is the kind of an expression or DAG node. The numeric values are the serde variant indices
// of OpenVM's `SymbolicExpressionNode` (B §1.8).
type Op uint8

// Expression / node kinds.
const (
	OpVariable     Op = 0
	OpIsFirstRow   Op = 1
	OpIsLastRow    Op = 2
	OpIsTransition Op = 3
	OpConstant     Op = 4
	OpAdd          Op = 5
	OpSub          Op = 6
	OpNeg          Op = 7
	OpMul          Op = 8
)

var opNames = [...]string{"Variable", "IsFirstRow", "IsLastRow", "IsTransition", "Constant", "Add", "Sub", "Neg", "Mul"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Expr is an immutable symbolic expression tree (OpenVM `SymbolicExpression`). Compound nodes carry
// the degree_multiple computed when they were built (B §1.2), never recomputed after simplification.
// Build expressions with V, Const, Add, Sub, Neg, Mul and the selector constructors; a nil *Expr
// is invalid everywhere.
type Expr struct {
	op   Op
	v    Var
	c    field.Fp
	x, y *Expr
	dm   int
}

var (
	exprIsFirstRow   = &Expr{op: OpIsFirstRow, dm: 1}
	exprIsLastRow    = &Expr{op: OpIsLastRow, dm: 1}
	exprIsTransition = &Expr{op: OpIsTransition, dm: 1}
)

// V returns the leaf expression of variable v.
func V(v Var) *Expr { return &Expr{op: OpVariable, v: v, dm: v.DegreeMultiple()} }

// Const returns the constant leaf c (degree_multiple 0).
func Const(c field.Fp) *Expr { return &Expr{op: OpConstant, c: c} }

// ConstInt returns the constant leaf v mod p (negative values wrap: ConstInt(-1) = p−1).
func ConstInt(v int64) *Expr { return Const(field.NewInt(v)) }

// Zero, One and NegOne are Plonky3's Expr::ZERO, Expr::ONE and Expr::NEG_ONE (fresh leaves).
func Zero() *Expr   { return Const(field.Zero) }
func One() *Expr    { return Const(field.One) }
func NegOne() *Expr { return Const(field.Fp(field.P - 1)) }

// IsFirstRow, IsLastRow and IsTransition are the selector leaves (degree_multiple 1).
func IsFirstRow() *Expr   { return exprIsFirstRow }
func IsLastRow() *Expr    { return exprIsLastRow }
func IsTransition() *Expr { return exprIsTransition }

// Add returns Add(x, y) with degree_multiple max(dx, dy).
func Add(x, y *Expr) *Expr { return &Expr{op: OpAdd, x: x, y: y, dm: max(x.dm, y.dm)} }

// Sub returns Sub(x, y) with degree_multiple max(dx, dy).
func Sub(x, y *Expr) *Expr { return &Expr{op: OpSub, x: x, y: y, dm: max(x.dm, y.dm)} }

// Neg returns Neg(x) with degree_multiple dx. (Plonky3's `NEG_ONE * e` is Mul(NegOne(), e), not Neg.)
func Neg(x *Expr) *Expr { return &Expr{op: OpNeg, x: x, dm: x.dm} }

// Mul returns Mul(x, y) with degree_multiple dx + dy.
func Mul(x, y *Expr) *Expr { return &Expr{op: OpMul, x: x, y: y, dm: x.dm + y.dm} }

// Sum is Rust's `Iterator::sum` on expressions: reduce with Add starting from the first element,
// `Add(Add(x0, x1), x2)…`; Zero() for an empty list.
func Sum(xs ...*Expr) *Expr {
	if len(xs) == 0 {
		return Zero()
	}
	acc := xs[0]
	for _, x := range xs[1:] {
		acc = Add(acc, x)
	}
	return acc
}

// FoldSum is `fold(xs, Expr::ZERO, |acc, x| acc + x)`: Add(Add(Add(Constant(0), x0), x1), …).
func FoldSum(xs ...*Expr) *Expr {
	acc := Zero()
	for _, x := range xs {
		acc = Add(acc, x)
	}
	return acc
}

// Product is Rust's `Iterator::product`: reduce with Mul; One() for an empty list.
func Product(xs ...*Expr) *Expr {
	if len(xs) == 0 {
		return One()
	}
	acc := xs[0]
	for _, x := range xs[1:] {
		acc = Mul(acc, x)
	}
	return acc
}

// Op returns the node kind.
func (e *Expr) Op() Op { return e.op }

// Var returns the variable of an OpVariable leaf.
func (e *Expr) Var() Var { return e.v }

// Constant returns the value of an OpConstant leaf.
func (e *Expr) Constant() field.Fp { return e.c }

// Left returns x of Add/Sub/Mul(x, y) and of Neg(x); nil for leaves.
func (e *Expr) Left() *Expr { return e.x }

// Right returns y of Add/Sub/Mul(x, y); nil otherwise.
func (e *Expr) Right() *Expr { return e.y }

// DegreeMultiple returns the degree_multiple stored in (or implied by) the node.
func (e *Expr) DegreeMultiple() int { return e.dm }

// String prints the tree fully parenthesised, e.g. "(IsFirstRow * (m0[0] - pub[0]))".
// Constants print canonically. Trees that share subtrees (limb folds) print exponentially
// long: use Abbrev for reports.
func (e *Expr) String() string {
	var sb strings.Builder
	e.write(&sb, -1)
	return sb.String()
}

// Abbrev prints like String but stops after about maxLen bytes, ending with "…", so a failing
// constraint can be reported without printing its whole (possibly huge) tree.
func (e *Expr) Abbrev(maxLen int) string {
	var sb strings.Builder
	if !e.write(&sb, maxLen) {
		sb.WriteString("…")
	}
	return sb.String()
}

// write appends the tree to sb; with limit ≥ 0 it stops descending once sb holds more than limit
// bytes and reports false (something was left out).
func (e *Expr) write(sb *strings.Builder, limit int) bool {
	if limit >= 0 && sb.Len() > limit {
		return false
	}
	switch e.op {
	case OpVariable:
		sb.WriteString(e.v.String())
	case OpConstant:
		sb.WriteString(e.c.String())
	case OpIsFirstRow, OpIsLastRow, OpIsTransition:
		sb.WriteString(e.op.String())
	case OpNeg:
		sb.WriteString("-")
		return e.x.write(sb, limit)
	default:
		sym := map[Op]string{OpAdd: " + ", OpSub: " - ", OpMul: " * "}[e.op]
		sb.WriteByte('(')
		if !e.x.write(sb, limit) {
			return false
		}
		sb.WriteString(sym)
		if !e.y.write(sb, limit) {
			return false
		}
		sb.WriteByte(')')
	}
	return true
}

// Valuation supplies the values of leaves when evaluating an expression or a DAG over F.
type Valuation interface {
	Var(v Var) field.Fp
	IsFirstRow() field.Fp
	IsLastRow() field.Fp
	IsTransition() field.Fp
}

// Eval evaluates the tree over F (no simplification; same value as the DAG node it becomes).
func (e *Expr) Eval(val Valuation) field.Fp {
	switch e.op {
	case OpVariable:
		return val.Var(e.v)
	case OpConstant:
		return e.c
	case OpIsFirstRow:
		return val.IsFirstRow()
	case OpIsLastRow:
		return val.IsLastRow()
	case OpIsTransition:
		return val.IsTransition()
	case OpAdd:
		return e.x.Eval(val).Add(e.y.Eval(val))
	case OpSub:
		return e.x.Eval(val).Sub(e.y.Eval(val))
	case OpNeg:
		return e.x.Eval(val).Neg()
	case OpMul:
		return e.x.Eval(val).Mul(e.y.Eval(val))
	}
	panic(fmt.Sprintf("air: invalid expression op %d", e.op))
}
