// Package piececode writes the straight-line code of a constraint program's pieces
// (constraints.Split with constraints.DevicePieces): one function per piece that evaluates it
// over the base field at one point, reading the piece's slot values from the round-0 slot-value
// table ([slot][point], zc_uni_values) and adding its outputs, weighted, to the sums of their
// kinds, as the interpreter's ProgCombineLanes (program_lanes.h) does. Values live in local
// variables (registers) instead of the interpreter's device scratch, and nothing is decoded:
// that is what the generated code is for.
//
// The code is written at run time, per proving key, for any AIR, and split into modules of
// consecutive pieces (Modules) that the device backends compile in parallel into modules of the
// template shaders/rap/zerocheck_pieces.metal (the code stands in for shaders/include/air_pieces.h
// there). Each piece is its own function (PIECE_FN, shaders/include/pieces.h: not inlined on
// CUDA and the host) so that compilers see a few hundred operations at a time: their time grows
// faster than linearly with a function's size. Every value gets its own name (the program reuses
// registers by liveness; compilers build SSA form anyway). The output depends on the pieces
// alone, so a module's digest names its compiled code in the backends' caches.
package piececode

import (
	"bytes"
	"fmt"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

// ModuleInstructions is the size modules are cut to, in instructions: Keccak-f's 42,743 make 16
// modules, which NVRTC compiles side by side on a 16-core host in the time of one.
const ModuleInstructions = 2800

// Module is the code of the pieces First .. First+Count-1 of a program, for the generated-code
// marker of the module template (air_pieces.h's interface: AIR_PIECE_FIRST, AIR_PIECE_COUNT,
// air_piece and one air_piece_K per piece).
type Module struct {
	First, Count int
	Instructions int
	Code         string
}

// Modules splits the pieces ps into modules of consecutive pieces of about ModuleInstructions
// instructions each (at least one piece each) and writes each one's code; desc says what the
// program is (a comment of the code).
func Modules(ps []*constraints.Program, desc string) ([]Module, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("piececode: no pieces")
	}
	var out []Module
	for first := 0; first < len(ps); {
		n, instr := 0, 0
		for first+n < len(ps) && (n == 0 || instr+len(ps[first+n].Code) <= ModuleInstructions) {
			instr += len(ps[first+n].Code)
			n++
		}
		code, err := Code(ps, first, n, desc)
		if err != nil {
			return nil, err
		}
		out = append(out, Module{First: first, Count: n, Instructions: instr, Code: code})
		first += n
	}
	return out, nil
}

// Code writes the code of the pieces first .. first+count-1 of ps (see Module).
func Code(ps []*constraints.Program, first, count int, desc string) (string, error) {
	if first < 0 || count < 1 || first+count > len(ps) {
		return "", fmt.Errorf("piececode: pieces %d..%d of %d", first, first+count-1, len(ps))
	}
	var b bytes.Buffer
	total := 0
	for _, p := range ps[first : first+count] {
		total += len(p.Code)
	}
	fmt.Fprintf(&b, `#line 1 "<generated: %s, pieces %d-%d of %d>"
// The constraint program of %s, pieces %d to %d of %d (constraints.Split, %d instructions),
// as straight-line code over the base field, one function per piece, for one point: slot s of
// point pt is vals[s·P + pt] (the round-0 slot-value table), constants are literals (Montgomery
// form), public value i is cp[consts + i] (the piece's cp buffer), output o weighted by
// w[4o..4o+3] (Program.Weights) is added to sums[kind] (0 constraints, 1 counts, 2 messages, as
// ProgCombine). Written by internal/kernels/piececode.
#define AIR_PIECE_FIRST %du
#define AIR_PIECE_COUNT %du

`, cQuote(desc), first, first+count-1, len(ps), desc, first, first+count-1, len(ps), total, first, count)
	for k := first; k < first+count; k++ {
		if err := piece(&b, k, ps[k]); err != nil {
			return "", fmt.Errorf("piececode: piece %d: %v", k, err)
		}
	}
	b.WriteString("// Runs piece k (AIR_PIECE_FIRST ≤ k < AIR_PIECE_FIRST + AIR_PIECE_COUNT).\n")
	b.WriteString("MSL_FN void air_piece(uint k, PG_DEVICE const uint* vals, uint P, uint pt, PG_DEVICE const uint* cp, PG_DEVICE const uint* w, PG_THREAD bb4* sums) {\n")
	b.WriteString("  switch (k) {\n")
	for k := first; k < first+count; k++ {
		fmt.Fprintf(&b, "    case %du:\n      air_piece_%d(vals, P, pt, cp, w, sums);\n      break;\n", k, k)
	}
	b.WriteString("    default:\n      break;\n  }\n}\n")
	return b.String(), nil
}

// cQuote makes s safe inside a C string literal of a #line directive.
func cQuote(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('_')
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// montOf is x in Montgomery form (x·2^32 mod p), as device buffers and kernels hold it.
func montOf(x field.Fp) uint32 { return uint32((uint64(x) << 32) % uint64(field.P)) }

// piece writes piece k's function.
func piece(b *bytes.Buffer, k int, p *constraints.Program) error {
	lo, hi := -1, -1
	slots := 0
	for _, in := range p.Code {
		if in.Op == constraints.OpEmit {
			if lo < 0 {
				lo = int(in.Dst)
			}
			hi = int(in.Dst)
		}
	}
	for _, u := range p.Used {
		if u {
			slots++
		}
	}
	fmt.Fprintf(b, "// Piece %d: outputs %d..%d, %d instructions, %d slots, %d registers.\n", k, lo, hi, len(p.Code), slots, p.NumRegs)
	fmt.Fprintf(b, "PIECE_FN void air_piece_%d(PG_DEVICE const uint* vals, uint P, uint pt, PG_DEVICE const uint* cp, PG_DEVICE const uint* w, PG_THREAD bb4* sums) {\n", k)
	// The weighted sums of the piece's outputs by kind (ProgCombine's zc, num, den), added to
	// sums[kind] once at the end: the accumulators stay in registers.
	var kinds [3]bool
	for _, in := range p.Code {
		if in.Op == constraints.OpEmit {
			kinds[outKind(p, in.Dst)] = true
		}
	}
	for kd, used := range kinds {
		if used {
			fmt.Fprintf(b, "  bb4 a%d = bb4_zero();\n", kd)
		}
	}
	regName := make([]string, p.NumRegs) // the variable holding each register's current value
	loaded := map[int]bool{}
	var err error
	operand := func(o constraints.Operand) string {
		i := o.Index()
		switch o.Kind() {
		case constraints.KindReg:
			if i >= len(regName) || regName[i] == "" {
				err = fmt.Errorf("register %d read before it is written", i)
				return "0"
			}
			return regName[i]
		case constraints.KindSlot:
			if !loaded[i] {
				loaded[i] = true
				fmt.Fprintf(b, "  uint s%d = vals[%du * P + pt];\n", i, i)
			}
			return fmt.Sprintf("s%d", i)
		case constraints.KindConst:
			return fmt.Sprintf("0x%08xu", montOf(p.Consts[i]))
		default:
			return fmt.Sprintf("cp[%du]", len(p.Consts)+i)
		}
	}
	for j, in := range p.Code {
		a := operand(in.A)
		if in.Op == constraints.OpEmit {
			kd := outKind(p, in.Dst)
			fmt.Fprintf(b, "  a%d = pg_emit(a%d, w + %du, %s);\n", kd, kd, 4*in.Dst, a)
			continue
		}
		var expr string
		switch in.Op {
		case constraints.OpAdd:
			expr = fmt.Sprintf("pg_add(%s, %s)", a, operand(in.B))
		case constraints.OpSub:
			expr = fmt.Sprintf("pg_sub(%s, %s)", a, operand(in.B))
		case constraints.OpMul:
			expr = fmt.Sprintf("pg_mul(%s, %s)", a, operand(in.B))
		case constraints.OpNeg:
			expr = fmt.Sprintf("pg_neg(%s)", a)
		default:
			return fmt.Errorf("instruction %d: op %v", j, in.Op)
		}
		v := fmt.Sprintf("v%d", j)
		fmt.Fprintf(b, "  uint %s = %s;\n", v, expr)
		if int(in.Dst) >= len(regName) {
			return fmt.Errorf("instruction %d: register %d of %d", j, in.Dst, len(regName))
		}
		regName[in.Dst] = v
	}
	for kd, used := range kinds {
		if used {
			fmt.Fprintf(b, "  sums[%d] = bb4_add(sums[%d], a%d);\n", kd, kd, kd)
		}
	}
	b.WriteString("}\n\n")
	return err
}

// outKind is the sum output o adds to (PROG_OUT_* of program.h, ProgCombine): 0 the constraints,
// 1 the interaction counts, 2 the message fields.
func outKind(p *constraints.Program, o uint32) int {
	switch p.Outputs[o].Kind {
	case constraints.OutConstraint:
		return 0
	case constraints.OutCount:
		return 1
	default:
		return 2
	}
}
