// program.h - the interpreter of constraint programs (internal/constraints bytecode, Version 1):
// straight-line register code, walked by every thread of a dispatch in lockstep (the control flow
// depends only on the program, so it stays uniform), each thread at its own evaluation point.
//
// Program words (constraints.Program.Encode):
//   header  Version, NumRegs, len(Code), len(Consts), len(Outputs), NumSlots, NumPublic, 0
//   code    3 words per instruction: op<<24 | dst, operand A, operand B
//   consts  canonical (a launcher uploads their Montgomery form separately, see below)
// An operand's top two bits give its kind: register, slot (a trace value at the point), constant,
// public value; the low 30 bits its index.
//
// Memory of one dispatch of T threads, thread t:
//   slots  [slot][t]: slot values at the thread's point, written by the caller first (base field:
//          one uint; extension: one bb4, 4 consecutive uints, per entry)
//   regs   [reg][t]: scratch, the program's registers (only the live values: the program reuses
//          registers, see internal/constraints)
//   cp     the Montgomery constants (len(Consts)) then the public values (NumPublic)
// All values are in Montgomery form. Outputs are handed to an emit functor as they are computed:
// `emit(output index, value)`.
#ifndef PROGRAM_H
#define PROGRAM_H
#include "bb4.h"

#define PROG_VERSION 1u
#define PROG_HEADER 8u
#define PROG_OP_ADD 0u
#define PROG_OP_SUB 1u
#define PROG_OP_NEG 2u
#define PROG_OP_MUL 3u
#define PROG_OP_EMIT 4u
#define PROG_KIND_REG 0u
#define PROG_KIND_SLOT 1u
#define PROG_KIND_CONST 2u
#define PROG_KIND_PUBLIC 3u
#define PROG_INDEX_MASK 0x3fffffffu

// Output kinds (constraints.OutputKind), as a launcher encodes them in an output table.
#define PROG_OUT_CONSTRAINT 0u
#define PROG_OUT_COUNT 1u
#define PROG_OUT_MESSAGE 2u

// The value of operand o for thread t of T (base field).
MSL_FN uint prog_operand(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                         uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  switch (o >> 30) {
    case PROG_KIND_REG:
      return regs[idx * T + t];
    case PROG_KIND_SLOT:
      return slots[idx * T + t];
    case PROG_KIND_CONST:
      return cp[idx];
    default:
      return cp[nconst + idx];
  }
}

// The value of operand o for thread t of T (extension field; constants and public values lift).
MSL_FN bb4 prog_operand4(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                         uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  switch (o >> 30) {
    case PROG_KIND_REG:
      return bb4_load(regs, idx * T + t);
    case PROG_KIND_SLOT:
      return bb4_load(slots, idx * T + t);
    case PROG_KIND_CONST:
      return bb4_lift(cp[idx]);
    default:
      return bb4_lift(cp[nconst + idx]);
  }
}

// Runs the program for thread t over the base field.
template <typename Emit>
MSL_FN void prog_run(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                     uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  for (uint i = 0u; i < ncode; i++) {
    uint base = PROG_HEADER + 3u * i;
    uint w0 = prog[base];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    uint a = prog_operand(prog[base + 1u], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    uint r;
    if (op == PROG_OP_NEG) {
      r = bb_neg(a);
    } else {
      uint b = prog_operand(prog[base + 2u], regs, slots, cp, nconst, t, T);
      r = op == PROG_OP_ADD ? bb_add(a, b) : op == PROG_OP_SUB ? bb_sub(a, b) : bb_mul(a, b);
    }
    regs[dst * T + t] = r;
  }
}

// Runs the program for thread t over the extension field.
template <typename Emit>
MSL_FN void prog_run4(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                      uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  for (uint i = 0u; i < ncode; i++) {
    uint base = PROG_HEADER + 3u * i;
    uint w0 = prog[base];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    bb4 a = prog_operand4(prog[base + 1u], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    bb4 r;
    if (op == PROG_OP_NEG) {
      r = bb4_neg(a);
    } else {
      bb4 b = prog_operand4(prog[base + 2u], regs, slots, cp, nconst, t, T);
      r = op == PROG_OP_ADD ? bb4_add(a, b) : op == PROG_OP_SUB ? bb4_sub(a, b) : bb4_mul(a, b);
    }
    bb4_store(regs, dst * T + t, r);
  }
}

// The batched combination of one point (constraints.Combined): outputs weighted by a per-proof
// table (constraints.Weights.Out, Montgomery Fp4 per output) and summed by kind (the output
// table holds each output's kind). The caller adds Weights.DenConst to den when the AIR has
// interactions.
struct ProgCombine {
  device const uint* kinds;
  device const uint* weights;
  bb4 zc, num, den;
  MSL_METHOD void put(uint o, uint v) { add(o, bb4_mul_base(bb4_load(weights, o), v)); }
  MSL_METHOD void put(uint o, bb4 v) { add(o, bb4_mul(bb4_load(weights, o), v)); }
  MSL_METHOD void add(uint o, bb4 wv) {
    uint k = kinds[o];
    if (k == PROG_OUT_CONSTRAINT) {
      zc = bb4_add(zc, wv);
    } else if (k == PROG_OUT_COUNT) {
      num = bb4_add(num, wv);
    } else {
      den = bb4_add(den, wv);
    }
  }
};

#endif  // PROGRAM_H
