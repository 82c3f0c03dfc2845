// bb4_lanes.h - Fp4 arithmetic on lane vectors (prelude.h "Lanes"): one Fp4 value per lane, held
// as four lanes_uint v[0..4) (component c of every lane in v[c], Montgomery). On GPUs a lane
// vector is one uint and these are bb4.h's formulas on a thread's own value; on the host they are
// SIMD over MSL_LANES values.
//
// Loading Fp4 tables (4 uints per element, AoS) into lanes: bb4l_load_block reads 16·MSL_LANES
// consecutive uints and transposes them, so that afterwards v[4a + c] holds, in lane l, component c
// of element 4l + a of the block (a < 4). With MSL_LANES = 1 the block is 4 elements and v[4a + c]
// is simply component c of element a.
#ifndef BB4_LANES_H
#define BB4_LANES_H
#include "bb4.h"

// lanes_splat of a value just loaded. On x86-64 hosts GCC 12 builds lanes_splat of a loaded value
// through the stack (a store-forwarding stall) or as 16 masked inserts; a 64-bit splat of
// x·(2^32 + 1) through an empty asm (as bb_mul_lanes broadcasts p) is one broadcast.
MSL_FN lanes_uint bbl_splat(uint x) {
#if defined(MSL_TARGET_HOST) && defined(__x86_64__) && LANES_SHUFFLE && HD_LANE_PARTS == 1
  ulong xx = (ulong)x * 0x100000001uL;
  __asm__("" : "+r"(xx));
  lanes_ulong v = {xx};
  v = __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
  return (lanes_uint)v;
#else
  return lanes_splat(x);
#endif
}

// Sum of the lanes of v (bb_add).
MSL_FN uint bbl_sum(lanes_uint v) {
  uint s = 0u;
  for (uint l = 0u; l < MSL_LANES; l++) s = bb_add(s, lanes_get(v, l));
  return s;
}

// r = a + b, a − b, 2a − b (each an Fp4 per lane; r may alias a or b).
MSL_FN void bb4l_add(thread lanes_uint* r, thread const lanes_uint* a, thread const lanes_uint* b) {
  for (uint c = 0u; c < 4u; c++) r[c] = bb_add_lanes(a[c], b[c]);
}
MSL_FN void bb4l_sub(thread lanes_uint* r, thread const lanes_uint* a, thread const lanes_uint* b) {
  for (uint c = 0u; c < 4u; c++) r[c] = bb_sub_lanes(a[c], b[c]);
}
MSL_FN void bb4l_double_sub(thread lanes_uint* r, thread const lanes_uint* a, thread const lanes_uint* b) {
  for (uint c = 0u; c < 4u; c++) r[c] = bb_sub_lanes(bb_add_lanes(a[c], a[c]), b[c]);
}

// r = a·b per lane (bb4_mul: 16 products + 3 by W). r must not alias a or b.
MSL_FN void bb4l_mul(thread lanes_uint* r, thread const lanes_uint* a, thread const lanes_uint* b) {
  lanes_uint w = bbl_splat(BB4_W_MONT);
  lanes_uint h0 = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[1], b[3]), bb_mul_lanes(a[2], b[2])), bb_mul_lanes(a[3], b[1]));
  lanes_uint h1 = bb_add_lanes(bb_mul_lanes(a[2], b[3]), bb_mul_lanes(a[3], b[2]));
  lanes_uint h2 = bb_mul_lanes(a[3], b[3]);
  r[0] = bb_add_lanes(bb_mul_lanes(a[0], b[0]), bb_mul_lanes(h0, w));
  r[1] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[1]), bb_mul_lanes(a[1], b[0])), bb_mul_lanes(h1, w));
  r[2] = bb_add_lanes(bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[2]), bb_mul_lanes(a[1], b[1])), bb_mul_lanes(a[2], b[0])),
                      bb_mul_lanes(h2, w));
  r[3] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a[0], b[3]), bb_mul_lanes(a[1], b[2])),
                      bb_add_lanes(bb_mul_lanes(a[2], b[1]), bb_mul_lanes(a[3], b[0])));
}

// acc += a·b per lane.
MSL_FN void bb4l_mul_acc(thread lanes_uint* acc, thread const lanes_uint* a, thread const lanes_uint* b) {
  lanes_uint t[4];
  bb4l_mul(t, a, b);
  bb4l_add(acc, acc, t);
}

// u[0..7) = the splats of a uniform Fp4 a for bb4l_mul_uniform: a[0..4) and W·a[1..4) (an array,
// not a struct: C++ for OpenCL, the address-space check, cannot copy class objects).
MSL_FN void bb4l_uniform_of(thread lanes_uint* u, bb4 a) {
  for (uint c = 0u; c < 4u; c++) u[c] = bbl_splat(a[c]);
  for (uint c = 1u; c < 4u; c++) u[3u + c] = bbl_splat(bb_mul(a[c], BB4_W_MONT));
}

// r = a·g per lane for one Fp4 a in every lane (16 products; u from bb4l_uniform_of). r must not
// alias g.
MSL_FN void bb4l_mul_uniform(thread lanes_uint* r, thread const lanes_uint* u, thread const lanes_uint* g) {
  lanes_uint a0 = u[0];
  lanes_uint a1 = u[1];
  lanes_uint a2 = u[2];
  lanes_uint a3 = u[3];
  lanes_uint w1 = u[4];
  lanes_uint w2 = u[5];
  lanes_uint w3 = u[6];
  r[0] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a0, g[0]), bb_mul_lanes(w1, g[3])),
                      bb_add_lanes(bb_mul_lanes(w2, g[2]), bb_mul_lanes(w3, g[1])));
  r[1] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a0, g[1]), bb_mul_lanes(a1, g[0])),
                      bb_add_lanes(bb_mul_lanes(w2, g[3]), bb_mul_lanes(w3, g[2])));
  r[2] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a0, g[2]), bb_mul_lanes(a1, g[1])),
                      bb_add_lanes(bb_mul_lanes(a2, g[0]), bb_mul_lanes(w3, g[3])));
  r[3] = bb_add_lanes(bb_add_lanes(bb_mul_lanes(a0, g[3]), bb_mul_lanes(a1, g[2])),
                      bb_add_lanes(bb_mul_lanes(a2, g[1]), bb_mul_lanes(a3, g[0])));
}

// acc += a·g per lane, a uniform.
MSL_FN void bb4l_mul_uniform_acc(thread lanes_uint* acc, thread const lanes_uint* u, thread const lanes_uint* g) {
  lanes_uint t[4];
  bb4l_mul_uniform(t, u, g);
  bb4l_add(acc, acc, t);
}

// v[0..16) = the 16·MSL_LANES uints from p, transposed (see the top of this file).
MSL_FN void bb4l_load_block(thread lanes_uint* v, device const uint* p) {
#if MSL_LANES == 1 && (defined(MSL_TARGET_CUDA) || defined(__METAL_VERSION__))
  // GPUs: the four elements as 16-byte loads (every caller's p is element-aligned).
  for (uint a = 0u; a < 4u; a++) {
    bb4 e = bb4_load_aligned(p, a);
    for (uint c = 0u; c < 4u; c++) v[4u * a + c] = e[c];
  }
#else
  for (uint k = 0u; k < 16u; k++) v[k] = lanes_ld_dev(p + k * MSL_LANES);
  lanes_transpose(v);
#endif
}

// The inverse for a block whose elements come in pairs: given x[4b + c] = component c of lane l's
// element b (b < 4), writes lane l's elements 0, 1 at p0 + 8l and elements 2, 3 at p1 + 8l
// (8 uints each). x is overwritten.
MSL_FN void bb4l_store_pairs(device uint* p0, device uint* p1, thread lanes_uint* x) {
  if (MSL_LANES == 1u) {  // GPUs: 16-byte stores (p0, p1 element-aligned)
    for (uint b = 0u; b < 2u; b++) {
      bb4_store_aligned(p0, b, bb4_make(lanes_get(x[4u * b], 0u), lanes_get(x[4u * b + 1u], 0u), lanes_get(x[4u * b + 2u], 0u),
                                        lanes_get(x[4u * b + 3u], 0u)));
      bb4_store_aligned(p1, b, bb4_make(lanes_get(x[8u + 4u * b], 0u), lanes_get(x[9u + 4u * b], 0u),
                                        lanes_get(x[10u + 4u * b], 0u), lanes_get(x[11u + 4u * b], 0u)));
    }
  } else {
    lanes_transpose(x);  // x[l] = lane l's 16 uints: elements 0..3
    for (uint l = 0u; l < MSL_LANES; l++) {
      for (uint k = 0u; k < 8u; k++) {
        p0[8u * l + k] = lanes_get(x[l], k);
        p1[8u * l + k] = lanes_get(x[l], 8u + k);
      }
    }
  }
}

#endif  // BB4_LANES_H
