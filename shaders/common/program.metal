// program.metal - the constraint-program interpreter (include/program.h) at T independent points
// whose slot values are given: every output of every point, or the batched combination
// (Zc, Num, Den) of every point. The device stages evaluate programs through the same header with
// slot values they compute themselves; these kernels are the interpreter on its own.
#include "program.h"

struct ProgEvalParams {
  uint points;  // T: points (threads' work items); slots and regs are laid out [index][point]
};

// out[o·T + t] = output o at point t (base field).
struct ProgStoreOutputs {
  device uint* out;
  uint t, T;
  MSL_METHOD void put(uint o, uint v) { out[o * T + t] = v; }
};

// out[(o·T + t)·4 ..] = output o at point t (extension field).
struct ProgStoreOutputs4 {
  device uint* out;
  uint t, T;
  MSL_METHOD void put(uint o, bb4 v) { bb4_store(out, o * T + t, v); }
};

kernel void prog_eval_outputs(device const uint* prog [[buffer(0)]],
                              device const uint* cp [[buffer(1)]],
                              device const uint* slots [[buffer(2)]],
                              device uint* regs [[buffer(3)]],
                              device uint* out [[buffer(4)]],
                              constant ProgEvalParams& p [[buffer(5)]],
                              uint gid [[thread_position_in_grid]],
                              uint stride [[threads_per_grid]]) {
  uint T = p.points;
  for (uint t = gid; t < T; t += stride) {
    ProgStoreOutputs e;
    e.out = out;
    e.t = t;
    e.T = T;
    prog_run(prog, cp, slots, regs, t, T, e);
  }
}

kernel void prog_eval_outputs4(device const uint* prog [[buffer(0)]],
                               device const uint* cp [[buffer(1)]],
                               device const uint* slots [[buffer(2)]],
                               device uint* regs [[buffer(3)]],
                               device uint* out [[buffer(4)]],
                               constant ProgEvalParams& p [[buffer(5)]],
                               uint gid [[thread_position_in_grid]],
                               uint stride [[threads_per_grid]]) {
  uint T = p.points;
  for (uint t = gid; t < T; t += stride) {
    ProgStoreOutputs4 e;
    e.out = out;
    e.t = t;
    e.T = T;
    prog_run4(prog, cp, slots, regs, t, T, e);
  }
}

// out[3t .. 3t+3) = (Zc, Num, Den) of point t over the extension field (slots are bb4), with
// the output kinds and weights of ProgCombine; den_const is added when has_den is set.
struct ProgCombineParams {
  uint points;
  uint has_den;
};

kernel void prog_eval_combine4(device const uint* prog [[buffer(0)]],
                               device const uint* cp [[buffer(1)]],
                               device const uint* kinds [[buffer(2)]],
                               device const uint* weights [[buffer(3)]],
                               device const uint* den_const [[buffer(4)]],
                               device const uint* slots [[buffer(5)]],
                               device uint* regs [[buffer(6)]],
                               device uint* out [[buffer(7)]],
                               constant ProgCombineParams& p [[buffer(8)]],
                               uint gid [[thread_position_in_grid]],
                               uint stride [[threads_per_grid]]) {
  uint T = p.points;
  uint has_den = p.has_den;
  for (uint t = gid; t < T; t += stride) {
    ProgCombine c;
    c.kinds = kinds;
    c.weights = weights;
    c.zc = bb4_zero();
    c.num = bb4_zero();
    c.den = has_den != 0u ? bb4_load(den_const, 0u) : bb4_zero();
    prog_run4(prog, cp, slots, regs, t, T, c);
    bb4_store(out, 3u * t, c.zc);
    bb4_store(out, 3u * t + 1u, c.num);
    bb4_store(out, 3u * t + 2u, c.den);
  }
}
