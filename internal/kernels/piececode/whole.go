package piececode

import (
	"bytes"
	"fmt"

	"github.com/metalprove/metalprove/internal/constraints"
)

// Whole writes the straight-line code of a whole constraint program p over the base field: the
// evaluator AirWhole of the module template shaders/constraints/zerocheck_whole.metal (the
// interface of shaders/include/air_whole.h), which the template's kernel zc_uni_whole runs in
// place of the lane interpreter (ProgInterpreter of shaders/include/program_lanes.h) in the
// round-0 body zc_uni_body. A program that GPUs run whole (too short to split into pieces) gets
// it. AirWhole::base has the interpreter's signature and memory layout: slot s of the lanes at
// column t is slots[s·T + t ..], public value i is cp[len(p.Consts) + i], and output o is given
// to emit.put(o, v) as the interpreter gives it, in the program's order; constants are
// literals (Montgomery form), and values live in local variables instead of the interpreter's
// registers in device scratch (regs and prog are not read). The code is written in lane vectors
// (lanes_uint: one value on GPUs, MSL_LANES points on the host device), so one text serves every
// target. desc says what the program is (a comment of the code).
func Whole(p *constraints.Program, desc string) (string, error) {
	if p == nil || len(p.Code) == 0 {
		return "", fmt.Errorf("piececode: no program")
	}
	var b bytes.Buffer
	emits, slots := 0, 0
	for _, in := range p.Code {
		if in.Op == constraints.OpEmit {
			emits++
		}
	}
	for _, u := range p.Used {
		if u {
			slots++
		}
	}
	fmt.Fprintf(&b, `#line 1 "<generated: %s, whole>"
// The constraint program of %s, whole (%d instructions, %d outputs, %d slots read, %d registers),
// as straight-line code over the base field for the lanes at column t of T: the evaluator of
// zc_uni_whole (shaders/include/air_whole.h). Written by internal/kernels/piececode.
struct AirWhole {
  template <typename Emit>
  PROG_LANES_METHOD void base(PG_DEVICE const uint* prog, PG_DEVICE const uint* cp, PG_DEVICE const uint* slots,
                              PG_DEVICE uint* regs, uint t, uint T, PG_THREAD Emit& emit) {
    (void)prog;
    (void)regs;
    (void)cp;
`, cQuote(desc), desc, len(p.Code), emits, slots, p.NumRegs)
	err := writeBody(&b, p, wholeDialect, func(o uint32, v string) {
		fmt.Fprintf(&b, "    emit.put(%du, %s);\n", o, v)
	})
	if err != nil {
		return "", fmt.Errorf("piececode: %v", err)
	}
	b.WriteString("  }\n};\n")
	return b.String(), nil
}

// wholeDialect spells the whole program's code: lane vectors (lanes_uint; constants and public
// values splat to every lane) and their field operations, slot s of the lanes at column t of T
// read from the slot scratch.
var wholeDialect = dialect{indent: "    ", typ: "lanes_uint", add: "bb_add_lanes", sub: "bb_sub_lanes", mul: "bb_mul_lanes",
	neg:    "bb_neg_lanes",
	load:   func(s int) string { return fmt.Sprintf("lanes_ld_dev(slots + %du * T + t)", s) },
	konst:  func(m uint32) string { return fmt.Sprintf("lanes_splat(0x%08xu)", m) },
	public: func(i int) string { return fmt.Sprintf("lanes_splat(cp[%du])", i) }}
