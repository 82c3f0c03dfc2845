// Package piececode writes the straight-line code of a constraint program's pieces
// (constraints.Split with constraints.DevicePieces): one function per piece that evaluates it
// over the base field at one point, reading the piece's slot values from the round-0 slot-value
// table ([slot][point], zc_uni_values) and adding its outputs, weighted, to the sums of their
// kinds, as the interpreter's ProgCombineLanes (program_lanes.h) does. Values live in local
// variables (registers) instead of the interpreter's device scratch, and nothing is decoded:
// that is what the generated code is for.
//
// The code is written at run time, per proving key, for any AIR: units of consecutive pieces
// (Units), which the device backends compile in parallel, and the main code (Main), which stands
// in for shaders/include/air_pieces.h in the module template shaders/constraints/zerocheck_pieces.metal
// and calls the units' functions; the backends link them into one module (CUDA: -rdc and
// cuLink; the host: one shared library; Metal: one source). Each piece is its own function (PIECE_FN, shaders/include/pieces.h: not inlined on
// CUDA and the host) so that compilers see a few hundred operations at a time: their time grows
// faster than linearly with a function's size. Every value gets its own name (the program reuses
// registers by liveness; compilers build SSA form anyway). The output depends on the pieces
// alone, so a module's digest names its compiled code in the backends' caches.
//
// A program too short to split (GPUs run it whole) gets its code from Whole (whole.go): the whole
// program as one straight-line evaluator for the round-0 body the interpreter runs in, compiled
// into a module of the template shaders/constraints/zerocheck_whole.metal.
package piececode

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

// UnitInstructions is the size units are cut to, in instructions: Keccak-f's 42,743 make 16
// units, which NVRTC compiles side by side on a 16-core host in the time of one.
const UnitInstructions = 2800

// Unit is the code of the pieces First .. First+Count-1 of a program, compiled on its own: one
// function air_piece_K per piece and air_piece_range_First, a switch over them, defined with
// AIR_UNIT_FN (shaders/include/pieces.h). Main's code calls the units' functions.
type Unit struct {
	First, Count int
	Instructions int
	Code         string
}

// Units splits the pieces ps into units of consecutive pieces of about UnitInstructions
// instructions each (at least one piece each) and writes each one's code; desc says what the
// program is (a comment of the code).
func Units(ps []*constraints.Program, desc string) ([]Unit, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("piececode: no pieces")
	}
	var out []Unit
	for first := 0; first < len(ps); {
		n, instr := 0, 0
		for first+n < len(ps) && (n == 0 || instr+len(ps[first+n].Code) <= UnitInstructions) {
			instr += len(ps[first+n].Code)
			n++
		}
		code, err := UnitCode(ps, first, n, desc)
		if err != nil {
			return nil, err
		}
		out = append(out, Unit{First: first, Count: n, Instructions: instr, Code: code})
		first += n
	}
	return out, nil
}

// params is the parameter list of a piece's function and of a unit's.
const params = "PG_DEVICE const uint* vals, uint P, uint pt, PG_DEVICE const uint* cp, PG_DEVICE const uint* w, PG_THREAD bb4* sums"

// UnitCode writes the code of the unit of pieces first .. first+count-1 of ps (see Unit).
func UnitCode(ps []*constraints.Program, first, count int, desc string) (string, error) {
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

`, cQuote(desc), first, first+count-1, len(ps), desc, first, first+count-1, len(ps), total)
	for k := first; k < first+count; k++ {
		if err := piece(&b, k, ps[k]); err != nil {
			return "", fmt.Errorf("piececode: piece %d: %v", k, err)
		}
	}
	fmt.Fprintf(&b, "// Runs piece k (%d ≤ k < %d).\n", first, first+count)
	fmt.Fprintf(&b, "AIR_UNIT_FN void air_piece_range_%d(uint k, %s) {\n", first, params)
	b.WriteString("  switch (k) {\n")
	for k := first; k < first+count; k++ {
		fmt.Fprintf(&b, "    case %du:\n      air_piece_%d(vals, P, pt, cp, w, sums);\n      break;\n", k, k)
	}
	b.WriteString("    default:\n      break;\n  }\n}\n")
	return b.String(), nil
}

// Main writes the module's main code for the generated-code marker of the template (the
// interface of shaders/include/air_pieces.h): AIR_PIECE_FIRST 0, AIR_PIECE_COUNT npieces, and
// air_piece, which calls the function of the unit holding piece k. units must cover 0 ..
// npieces-1 in order.
func Main(units []Unit, npieces int, desc string) (string, error) {
	next := 0
	for _, u := range units {
		if u.First != next || u.Count < 1 {
			return "", fmt.Errorf("piececode: units do not cover the pieces in order (piece %d)", next)
		}
		next += u.Count
	}
	if next != npieces || npieces == 0 {
		return "", fmt.Errorf("piececode: units cover %d pieces of %d", next, npieces)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "#line 1 \"<generated: %s, main>\"\n", cQuote(desc))
	fmt.Fprintf(&b, "// The constraint program of %s in %d pieces and %d units (internal/kernels/piececode).\n", desc, npieces, len(units))
	fmt.Fprintf(&b, "#define AIR_PIECE_FIRST 0u\n#define AIR_PIECE_COUNT %du\n\n", npieces)
	for _, u := range units {
		fmt.Fprintf(&b, "AIR_UNIT_DECL void air_piece_range_%d(uint k, %s);\n", u.First, params)
	}
	fmt.Fprintf(&b, "\n// Runs piece k (k < %d) by the unit that holds it.\n", npieces)
	fmt.Fprintf(&b, "MSL_FN void air_piece(uint k, %s) {\n", params)
	for i, u := range units {
		switch {
		case len(units) == 1:
			fmt.Fprintf(&b, "  air_piece_range_%d(k, vals, P, pt, cp, w, sums);\n", u.First)
		case i == 0:
			fmt.Fprintf(&b, "  if (k < %du) {\n    air_piece_range_%d(k, vals, P, pt, cp, w, sums);\n", u.First+u.Count, u.First)
		case i == len(units)-1:
			fmt.Fprintf(&b, "  } else {\n    air_piece_range_%d(k, vals, P, pt, cp, w, sums);\n  }\n", u.First)
		default:
			fmt.Fprintf(&b, "  } else if (k < %du) {\n    air_piece_range_%d(k, vals, P, pt, cp, w, sums);\n", u.First+u.Count, u.First)
		}
	}
	b.WriteString("}\n")
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
			if lo < 0 || int(in.Dst) < lo {
				lo = int(in.Dst)
			}
			hi = max(hi, int(in.Dst))
		}
	}
	for _, u := range p.Used {
		if u {
			slots++
		}
	}
	fmt.Fprintf(b, "// Piece %d: outputs %d..%d, %d instructions, %d slots, %d registers.\n", k, lo, hi, len(p.Code), slots, p.NumRegs)
	fmt.Fprintf(b, "PIECE_FN void air_piece_%d(%s) {\n", k, params)
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
	// A kind's outputs are given four at a time (pg_emit4 of pieces.h: each weight coefficient's
	// products summed in 64 bits, reduced once); the values are the code's variables, each
	// assigned once, so an output can wait for the next ones.
	var pending [3][]string
	flush := func(kd int) {
		if n := len(pending[kd]); n > 0 {
			name := "pg_emit"
			if n > 1 {
				name += strconv.Itoa(n)
			}
			fmt.Fprintf(b, "  a%d = %s(a%d, %s);\n", kd, name, kd, strings.Join(pending[kd], ", "))
			pending[kd] = pending[kd][:0]
		}
	}
	err := writeBody(b, p, pieceDialect, func(o uint32, v string) {
		kd := outKind(p, o)
		pending[kd] = append(pending[kd], fmt.Sprintf("w + %du, %s", 4*o, v))
		if len(pending[kd]) == 4 {
			flush(kd)
		}
	})
	if err != nil {
		return err
	}
	for kd := range pending {
		flush(kd)
	}
	for kd, used := range kinds {
		if used {
			fmt.Fprintf(b, "  sums[%d] = bb4_add(sums[%d], a%d);\n", kd, kd, kd)
		}
	}
	b.WriteString("}\n\n")
	return nil
}

// pieceDialect spells a piece's code: scalar base-field values (uint), the pg_* operations of
// pieces.h, slot s at point pt read from the slot-value table vals ([slot][point], row length P).
var pieceDialect = dialect{indent: "  ", typ: "uint", add: "pg_add", sub: "pg_sub", mul: "pg_mul", neg: "pg_neg",
	load:   func(s int) string { return fmt.Sprintf("vals[%du * P + pt]", s) },
	konst:  func(m uint32) string { return fmt.Sprintf("0x%08xu", m) },
	public: func(i int) string { return fmt.Sprintf("cp[%du]", i) }}

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
