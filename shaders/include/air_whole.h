// air_whole.h - the interface of an AIR's generated whole-program code, which
// internal/kernels/piececode (Whole) writes at run time, per proving key, for a constraint program
// that runs whole (too short to split into pieces): AirWhole, an evaluator of zc_uni_body
// (zc_uni_body.h) with ProgInterpreter's member base (program_lanes.h: the same signature, slot
// layout and emit calls, in output order), as straight-line code. The module template
// zerocheck_whole.metal holds a marker in place of this header, which the device backends replace
// by the generated code; only the checks (scripts/check-msl.sh, the clang copy) read the
// placeholder below.
// mslgen:runtime-header
#ifndef AIR_WHOLE_H
#define AIR_WHOLE_H
#include "pieces.h"
#include "program_lanes.h"

// Emits slot 0 as output 0 (a placeholder of the interface).
struct AirWhole {
  template <typename Emit>
  PROG_LANES_METHOD void base(PG_DEVICE const uint* prog, PG_DEVICE const uint* cp, PG_DEVICE const uint* slots,
                              PG_DEVICE uint* regs, uint t, uint T, PG_THREAD Emit& emit) {
    (void)prog;
    (void)cp;
    (void)regs;
    (void)T;
    emit.put(0u, lanes_ld_dev(slots + t));
  }
};

#endif  // AIR_WHOLE_H
