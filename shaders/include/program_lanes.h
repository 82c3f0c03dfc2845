// program_lanes.h - the constraint-program interpreter of program.h over lane vectors: every
// instruction is decoded once for the MSL_LANES points of a work item (prelude.h, "Lanes") and
// applied to all of them, so that on the host device the decoding is shared by 16 points and the
// field arithmetic runs as SIMD vectors. On GPUs (MSL_LANES = 1) lanes_uint is uint, bb4l is bb4,
// and the functions below are prog_run and prog_run4 with one difference in the extension
// layout (structure of arrays, see below).
//
// Memory, for an evaluation of T "columns" (lanes of all work items, side by side), at column t
// (the first lane of the work item: lanes are columns t .. t+MSL_LANES−1):
//   base field  slots[idx·T + t + lane], regs[idx·T + t + lane] (as in program.h)
//   extension   coefficient c of entry idx at [(4·idx + c)·T + t + lane] (structure of arrays:
//               the lanes of one coefficient are neighbours, for SIMD loads; on GPUs neighbouring
//               threads read neighbouring words)
// Constants and public values are broadcast to every lane (lifted into Fp4 by the extension
// interpreter). Outputs go to `emit.put(o, v)` with v a lanes_uint (base) or a bb4l (extension).
//
// Evaluators: prog_run_lanes / prog_run4_lanes walk the bytecode. A kernel that evaluates one
// program takes its evaluator as a template parameter with the two member functions of
// ProgInterpreter (below), so a straight-line evaluator generated for one AIR (same signature, same
// memory layout, same emit calls in output order) plugs in without touching the kernel.
#ifndef PROGRAM_LANES_H
#define PROGRAM_LANES_H
#include "program.h"

// Methods of the evaluator and emit structs: always inlined on the host, like every MSL_FN helper
// (an out-of-line copy would be compiled for the baseline ISA only, not for the SIMD clones of the
// kernel that calls it: hd_glue.h).
#if defined(MSL_TARGET_HOST)
#define PROG_LANES_METHOD inline __attribute__((always_inline))
#else
#define PROG_LANES_METHOD MSL_METHOD
#endif

// bb4l: one Fp4 value per lane, as four lane vectors (coefficient k of every lane in v[k]).
#if MSL_LANES > 1
struct bb4l {
  lanes_uint c[4];
  PROG_LANES_METHOD lanes_uint& operator[](uint k) { return c[k]; }
  PROG_LANES_METHOD lanes_uint operator[](uint k) const { return c[k]; }
};
MSL_FN bb4l bb4l_make(lanes_uint c0, lanes_uint c1, lanes_uint c2, lanes_uint c3) {
  bb4l r;
  r.c[0] = c0;
  r.c[1] = c1;
  r.c[2] = c2;
  r.c[3] = c3;
  return r;
}
#else
typedef bb4 bb4l;
MSL_FN bb4l bb4l_make(lanes_uint c0, lanes_uint c1, lanes_uint c2, lanes_uint c3) { return bb4_make(c0, c1, c2, c3); }
#endif

MSL_FN lanes_uint bb_neg_lanes(lanes_uint a) { return bb_sub_lanes(lanes_splat(0u), a); }

// a broadcast to every lane.
MSL_FN bb4l bb4l_splat(bb4 a) {
  return bb4l_make(lanes_splat(a[0]), lanes_splat(a[1]), lanes_splat(a[2]), lanes_splat(a[3]));
}
MSL_FN bb4l bb4l_lift(lanes_uint a) {
  lanes_uint z = lanes_splat(0u);
  return bb4l_make(a, z, z, z);
}
MSL_FN bb4l bb4l_zero() { return bb4l_lift(lanes_splat(0u)); }

MSL_FN bb4l bb4l_add(bb4l a, bb4l b) {
  return bb4l_make(bb_add_lanes(a[0], b[0]), bb_add_lanes(a[1], b[1]), bb_add_lanes(a[2], b[2]),
                   bb_add_lanes(a[3], b[3]));
}
MSL_FN bb4l bb4l_sub(bb4l a, bb4l b) {
  return bb4l_make(bb_sub_lanes(a[0], b[0]), bb_sub_lanes(a[1], b[1]), bb_sub_lanes(a[2], b[2]),
                   bb_sub_lanes(a[3], b[3]));
}
MSL_FN bb4l bb4l_neg(bb4l a) {
  return bb4l_make(bb_neg_lanes(a[0]), bb_neg_lanes(a[1]), bb_neg_lanes(a[2]), bb_neg_lanes(a[3]));
}

// Schoolbook product reduced with X^4 = W (bb4_mul on lanes).
MSL_FN bb4l bb4l_mul(bb4l a, bb4l b) {
  lanes_uint w = lanes_splat(BB4_W_MONT);
  lanes_uint h0 = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[1], b[3]), bb_mul_lanes(a[2], b[2])), bb_mul_lanes(a[3], b[1]));
  lanes_uint h1 = bb_add_lanes(bb_mul_lanes(a[2], b[3]), bb_mul_lanes(a[3], b[2]));
  lanes_uint h2 = bb_mul_lanes(a[3], b[3]);
  lanes_uint r0 = bb_add_lanes(bb_mul_lanes(a[0], b[0]), bb_mul_lanes(h0, w));
  lanes_uint r1 = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[1]), bb_mul_lanes(a[1], b[0])), bb_mul_lanes(h1, w));
  lanes_uint r2 = bb_add_lanes(bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[2]), bb_mul_lanes(a[1], b[1])), bb_mul_lanes(a[2], b[0])),
                               bb_mul_lanes(h2, w));
  lanes_uint r3 = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[3]), bb_mul_lanes(a[1], b[2])),
                               bb_add_lanes(bb_mul_lanes(a[2], b[1]), bb_mul_lanes(a[3], b[0])));
  return bb4l_make(r0, r1, r2, r3);
}

// w·v for an Fp4 w shared by the lanes and a base value per lane.
MSL_FN bb4l bb4l_scale(bb4 w, lanes_uint v) {
  return bb4l_make(bb_mul_lanes(lanes_splat(w[0]), v), bb_mul_lanes(lanes_splat(w[1]), v),
                   bb_mul_lanes(lanes_splat(w[2]), v), bb_mul_lanes(lanes_splat(w[3]), v));
}

// Entry at p in the structure-of-arrays layout: coefficient c at p + c·stride (lanes consecutive).
MSL_FN bb4l bb4l_load(device const uint* p, uint stride) {
  return bb4l_make(lanes_ld_dev(p), lanes_ld_dev(p + stride), lanes_ld_dev(p + 2u * stride), lanes_ld_dev(p + 3u * stride));
}
MSL_FN void bb4l_store(device uint* p, uint stride, bb4l v) {
  lanes_st_dev(p, v[0]);
  lanes_st_dev(p + stride, v[1]);
  lanes_st_dev(p + 2u * stride, v[2]);
  lanes_st_dev(p + 3u * stride, v[3]);
}

// Lane l of an Fp4 lane value.
MSL_FN bb4 bb4l_get(bb4l v, uint l) {
  return bb4_make(lanes_get(v[0], l), lanes_get(v[1], l), lanes_get(v[2], l), lanes_get(v[3], l));
}

// The value of operand o for the lanes at column t of T (base field).
MSL_FN lanes_uint prog_operand_lanes(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                                     uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  switch (o >> 30) {
    case PROG_KIND_REG:
      return lanes_ld_dev(regs + idx * T + t);
    case PROG_KIND_SLOT:
      return lanes_ld_dev(slots + idx * T + t);
    case PROG_KIND_CONST:
      return lanes_splat(cp[idx]);
    default:
      return lanes_splat(cp[nconst + idx]);
  }
}

// The value of operand o for the lanes at column t of T (extension field, structure of arrays).
MSL_FN bb4l prog_operand4_lanes(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                                uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  switch (o >> 30) {
    case PROG_KIND_REG:
      return bb4l_load(regs + 4u * idx * T + t, T);
    case PROG_KIND_SLOT:
      return bb4l_load(slots + 4u * idx * T + t, T);
    case PROG_KIND_CONST:
      return bb4l_lift(lanes_splat(cp[idx]));
    default:
      return bb4l_lift(lanes_splat(cp[nconst + idx]));
  }
}

// Runs the program for the lanes at column t of T over the base field.
template <typename Emit>
MSL_FN void prog_run_lanes(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                           uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  for (uint i = 0u; i < ncode; i++) {
    uint base = PROG_HEADER + 3u * i;
    uint w0 = prog[base];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    lanes_uint a = prog_operand_lanes(prog[base + 1u], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    lanes_uint r;
    if (op == PROG_OP_NEG) {
      r = bb_neg_lanes(a);
    } else {
      lanes_uint b = prog_operand_lanes(prog[base + 2u], regs, slots, cp, nconst, t, T);
      r = op == PROG_OP_ADD ? bb_add_lanes(a, b) : op == PROG_OP_SUB ? bb_sub_lanes(a, b) : bb_mul_lanes(a, b);
    }
    lanes_st_dev(regs + dst * T + t, r);
  }
}

// Runs the program for the lanes at column t of T over the extension field.
template <typename Emit>
MSL_FN void prog_run4_lanes(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                            uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  for (uint i = 0u; i < ncode; i++) {
    uint base = PROG_HEADER + 3u * i;
    uint w0 = prog[base];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    bb4l a = prog_operand4_lanes(prog[base + 1u], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    bb4l r;
    if (op == PROG_OP_NEG) {
      r = bb4l_neg(a);
    } else {
      bb4l b = prog_operand4_lanes(prog[base + 2u], regs, slots, cp, nconst, t, T);
      r = op == PROG_OP_ADD ? bb4l_add(a, b) : op == PROG_OP_SUB ? bb4l_sub(a, b) : bb4l_mul(a, b);
    }
    bb4l_store(regs + 4u * dst * T + t, T, r);
  }
}

// The evaluator interface of the kernels that run one program (zerocheck.metal): `base` over the
// base field, `ext` over the extension field, each with prog_run_lanes' signature and layout. A
// generated evaluator for one AIR is another struct with these two members (it may ignore prog and
// cp's constants, but must read slots and write regs, if it uses them, as described above, and
// emit every output once, in output order).
struct ProgInterpreter {
  template <typename Emit>
  PROG_LANES_METHOD void base(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                       uint t, uint T, thread Emit& emit) {
    prog_run_lanes(prog, cp, slots, regs, t, T, emit);
  }
  template <typename Emit>
  PROG_LANES_METHOD void ext(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                      uint t, uint T, thread Emit& emit) {
    prog_run4_lanes(prog, cp, slots, regs, t, T, emit);
  }
};

// The batched combination of one point per lane (ProgCombine of program.h on lanes): outputs
// weighted by weights (Montgomery Fp4 per output) and summed by kind (kinds: PROG_OUT_* per output).
struct ProgCombineLanes {
  device const uint* kinds;
  device const uint* weights;
  bb4l zc, num, den;
  PROG_LANES_METHOD void put(uint o, lanes_uint v) { add(o, bb4l_scale(bb4_load(weights, o), v)); }
  PROG_LANES_METHOD void put(uint o, bb4l v) { add(o, bb4l_mul(bb4l_splat(bb4_load(weights, o)), v)); }
  PROG_LANES_METHOD void add(uint o, bb4l wv) {
    uint k = kinds[o];
    if (k == PROG_OUT_CONSTRAINT) {
      zc = bb4l_add(zc, wv);
    } else if (k == PROG_OUT_COUNT) {
      num = bb4l_add(num, wv);
    } else {
      den = bb4l_add(den, wv);
    }
  }
};

#endif  // PROGRAM_LANES_H
