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

#if MSL_LANES > 1
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
#else
// One lane: bb4_mul (sums of products reduced once).
MSL_FN bb4l bb4l_mul(bb4l a, bb4l b) { return bb4_mul(a, b); }
#endif

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

// The value of operand o for the lanes at column t of T (base field). Registers and slots differ
// only in their base (selected, not branched on); constants and public values are broadcast.
MSL_FN lanes_uint prog_operand_lanes(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                                     uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  uint kind = o >> 30;
  if (kind >= PROG_KIND_CONST) return lanes_splat(cp[(kind == PROG_KIND_CONST ? 0u : nconst) + idx]);
  device const uint* base = kind == PROG_KIND_REG ? regs : slots;
  return lanes_ld_dev(base + idx * T + t);
}

// The value of operand o for the lanes at column t of T (extension field, structure of arrays).
MSL_FN bb4l prog_operand4_lanes(uint o, device const uint* regs, device const uint* slots, device const uint* cp,
                                uint nconst, uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  uint kind = o >> 30;
  if (kind >= PROG_KIND_CONST) return bb4l_lift(lanes_splat(cp[(kind == PROG_KIND_CONST ? 0u : nconst) + idx]));
  device const uint* base = kind == PROG_KIND_REG ? regs : slots;
  return bb4l_load(base + 4u * idx * T + t, T);
}

// Runs the program for the lanes at column t of T over the base field. (Negation reads constant 0
// as a dummy second operand: cp always holds a word.)
template <typename Emit>
MSL_FN void prog_run_lanes(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                           uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  device const uint* code = prog + PROG_HEADER;
  for (uint i = 0u; i < ncode; i++, code += 3) {
    uint w0 = code[0];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    lanes_uint a = prog_operand_lanes(code[1], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    lanes_uint b = prog_operand_lanes(op == PROG_OP_NEG ? (PROG_KIND_CONST << 30) : code[2], regs, slots, cp, nconst, t, T);
    lanes_uint r;
    switch (op) {
      case PROG_OP_ADD:
        r = bb_add_lanes(a, b);
        break;
      case PROG_OP_SUB:
        r = bb_sub_lanes(a, b);
        break;
      case PROG_OP_NEG:
        r = bb_neg_lanes(a);
        break;
      default:
        r = bb_mul_lanes(a, b);
        break;
    }
    lanes_st_dev(regs + dst * T + t, r);
  }
}

// a op b over the extension field for op = PROG_OP_ADD, PROG_OP_SUB or PROG_OP_MUL (the
// instructions with two operands; negation reads one).
MSL_FN bb4l prog_binary4_lanes(uint op, bb4l a, bb4l b) {
  switch (op) {
    case PROG_OP_ADD:
      return bb4l_add(a, b);
    case PROG_OP_SUB:
      return bb4l_sub(a, b);
    default:
      return bb4l_mul(a, b);
  }
}

// Runs the program for the lanes at column t of T over the extension field.
template <typename Emit>
MSL_FN void prog_run4_lanes(device const uint* prog, device const uint* cp, device const uint* slots, device uint* regs,
                            uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  device const uint* code = prog + PROG_HEADER;
  for (uint i = 0u; i < ncode; i++, code += 3) {
    uint w0 = code[0];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    bb4l a = prog_operand4_lanes(code[1], regs, slots, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    bb4l r = op == PROG_OP_NEG ? bb4l_neg(a) : prog_binary4_lanes(op, a, prog_operand4_lanes(code[2], regs, slots, cp, nconst, t, T));
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
// weighted by weights (Montgomery Fp4 per output) and summed by kind (kinds: PROG_OUT_* per output;
// kind k's sum is zc, num, den for k = 0, 1, 2). Use: start, the evaluator's puts, finish.
//
// On the host the sums are kept as unreduced 64-bit products (PROG_LAZY: the even and the odd
// lanes of each coefficient of each kind), folded below 2^60.01 before they could overflow and
// Montgomery-reduced once per point by finish: a third of the vector instructions of a Montgomery
// product per term. Bounds: a product of two values < p is < 2^61.9; after a fold
// (lo + hi·(2^32 mod p)) a sum is < 2^60.01, so three base products (or the four of one Fp4
// coefficient) fit below 2^64; the final sum is < p·2^32, as the reduction needs. GPUs (no fast
// 64-bit multiply on Apple) keep Montgomery products.
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE
#define PROG_LAZY 1
#else
#define PROG_LAZY 0
#endif

#if PROG_LAZY
// v's even and odd lanes as 64-bit lanes.
MSL_FN lanes_ulong prog_even(lanes_uint v) { return lanes_wide(v) & lanes_wsplat(0xffffffffuL); }
MSL_FN lanes_ulong prog_odd(lanes_uint v) { return lanes_wide(v) >> 32; }
// A splat of w < 2^32 whose high halves are visibly zero (so products are 32×32-bit multiplies).
MSL_FN lanes_ulong prog_wide(uint w) { return lanes_wsplat((ulong)w) & lanes_wsplat(0xffffffffuL); }
// x ≡ lo + hi·2^32 ≡ lo + hi·(2^32 mod p): below 2^60.01.
MSL_FN lanes_ulong prog_fold(lanes_ulong x) {
  lanes_ulong lo32 = lanes_wsplat(0xffffffffuL);
  return (x & lo32) + lanes_mul32(x >> 32, lanes_wsplat((ulong)BB_ONE));
}
// Montgomery reduction of 64-bit sums x < p·2^32 (even and odd lanes) to x·2^−32 mod p per lane.
MSL_FN lanes_uint prog_reduce(lanes_ulong e, lanes_ulong o) {
  lanes_ulong lo32 = lanes_wsplat(0xffffffffuL);
  lanes_ulong p64 = lanes_wsplat((ulong)BB_P);
  lanes_ulong pinv = lanes_wsplat((ulong)BB_PINV);
  lanes_ulong me = lanes_mul32(e & lo32, pinv) & lo32;
  lanes_ulong mo = lanes_mul32(o & lo32, pinv) & lo32;
  lanes_ulong re = (e >> 32) + p64 - (lanes_mul32(me, p64) >> 32);  // in (0, 2p)
  lanes_ulong ro = (o >> 32) + p64 - (lanes_mul32(mo, p64) >> 32);
  lanes_uint r = lanes_join_lo(re, ro);
  lanes_uint s = r - BB_P;
  return lanes_min(r, s);
}
#endif

struct ProgCombineLanes {
  device const uint* kinds;
  device const uint* weights;
  bb4l zc, num, den;
#if PROG_LAZY
  lanes_ulong acc[3][4][2];  // [kind][coefficient][even, odd lanes]
  uint count[3];             // products added per accumulator since its last fold
#endif
  // Starts a point: den0 is den's initial value (the constant denominator term, or zero).
  PROG_LANES_METHOD void start(device const uint* k, device const uint* w, bb4l den0) {
    kinds = k;
    weights = w;
    zc = bb4l_zero();
    num = bb4l_zero();
    den = den0;
#if PROG_LAZY
    for (uint i = 0u; i < 3u; i++) {
      count[i] = 0u;
      for (uint c = 0u; c < 4u; c++) {
        acc[i][c][0] = lanes_wsplat(0u);
        acc[i][c][1] = lanes_wsplat(0u);
      }
    }
#endif
  }
#if PROG_LAZY
  PROG_LANES_METHOD void fold(uint k) {
    for (uint c = 0u; c < 4u; c++) {
      acc[k][c][0] = prog_fold(acc[k][c][0]);
      acc[k][c][1] = prog_fold(acc[k][c][1]);
    }
    count[k] = 0u;
  }
  PROG_LANES_METHOD void put(uint o, lanes_uint v) {
    uint k = min(kinds[o], 2u);
    if (count[k] >= 3u) fold(k);
    lanes_ulong ve = prog_even(v);
    lanes_ulong vo = prog_odd(v);
    for (uint c = 0u; c < 4u; c++) {
      lanes_ulong w = prog_wide(weights[4u * o + c]);
      acc[k][c][0] += lanes_mul32(ve, w);
      acc[k][c][1] += lanes_mul32(vo, w);
    }
    count[k]++;
  }
  // (w·v)_c = Σ_j w_j·v_{c−j} with the wrapped terms (j > c) times W: four products per
  // coefficient, accumulated, then folded.
  PROG_LANES_METHOD void put(uint o, bb4l v) {
    uint k = min(kinds[o], 2u);
    if (count[k] != 0u) fold(k);
    uint w[4];
    uint ww[4];
    for (uint j = 0u; j < 4u; j++) {
      w[j] = weights[4u * o + j];
      ww[j] = bb_mul(w[j], BB4_W_MONT);
    }
    lanes_ulong ve[4];
    lanes_ulong vo[4];
    for (uint j = 0u; j < 4u; j++) {
      ve[j] = prog_even(v[j]);
      vo[j] = prog_odd(v[j]);
    }
    for (uint c = 0u; c < 4u; c++) {
      for (uint j = 0u; j < 4u; j++) {
        uint i = (c + 4u - j) & 3u;
        lanes_ulong wj = prog_wide(j <= c ? w[j] : ww[j]);
        acc[k][c][0] += lanes_mul32(ve[i], wj);
        acc[k][c][1] += lanes_mul32(vo[i], wj);
      }
    }
    count[k] = 4u;  // the next put folds first
  }
  // Ends a point: the lazy sums, reduced, added to zc, num, den.
  PROG_LANES_METHOD void finish() {
    bb4l r[3];
    for (uint k = 0u; k < 3u; k++) {
      for (uint c = 0u; c < 4u; c++) {
        r[k][c] = prog_reduce(prog_fold(acc[k][c][0]), prog_fold(acc[k][c][1]));
      }
    }
    zc = bb4l_add(zc, r[0]);
    num = bb4l_add(num, r[1]);
    den = bb4l_add(den, r[2]);
  }
#else
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
  PROG_LANES_METHOD void finish() {}
#endif
};

#endif  // PROGRAM_LANES_H
