// zerocheck_whole.metal - round 0 of the batch constraint sumcheck (zerocheck.metal) by an AIR's
// generated whole-program code (internal/kernels/piececode.Whole), written at run time per proving
// key for a constraint program that runs whole. internal/kernels/zerocheck_whole.go launches it.
//
// This file is a module template (see zerocheck_pieces.metal): scripts/mslgen writes it per target
// with a marker in place of air_whole.h, and the device backends compile one module per AIR (the
// marker replaced by its code), cached on disk by the code's digest.
// mslgen:module whole
#include "zc_uni_body.h"
#include "pieces.h"
#include "air_whole.h"

// zc_uni_eval (zerocheck.metal) with the AIR's straight-line evaluator AirWhole in place of the
// interpreter: the same buffers, parameters, scratch layout and partial rows; prog and the
// register scratch are not read (values stay in registers).
kernel void zc_uni_whole(device const uint* prog [[buffer(0)]],
                         device const uint* cp [[buffer(1)]],
                         device const uint* kinds [[buffer(2)]],
                         device const uint* weights [[buffer(3)]],
                         device const uint* coefs [[buffer(4)]],
                         device const uint* deltas [[buffer(5)]],
                         device const uint* srcmap [[buffer(6)]],
                         device const uint* tw [[buffer(7)]],
                         device const uint* lrow [[buffer(8)]],
                         device const uint* sel [[buffer(9)]],
                         device const uint* eq [[buffer(10)]],
                         device uint* slots [[buffer(11)]],
                         device uint* regs [[buffer(12)]],
                         device uint* partials [[buffer(13)]],
                         constant ZcUniParams& p [[buffer(14)]],
                         uint gid [[thread_position_in_grid]],
                         uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  AirWhole ev;
  zc_uni_body(ev, prog, cp, kinds, weights, coefs, deltas, srcmap, tw, lrow, sel, eq, slots, regs, partials, p, gid, G);
}
