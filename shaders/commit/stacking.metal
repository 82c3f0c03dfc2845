// stacking.metal - the stacked matrix Q of spec A §5.3 (stacked_matrix), filled on the device
// from resident traces: one dispatch per trace places all its columns.
//
// Traces are resident as uploaded (canonical, column-major); Q is column-major in Montgomery form.
// The columns of one trace occupy consecutive runs of Q (stark.StackedLayout.Placement): column j
// starts slice_len = h·2^log_stride values after column j − 1, across stacked columns too, and a
// trace shorter than 2^l_skip rows is spread with stride 2^log_stride, zeros between.
#include "babybear.h"

struct StackParams {
  uint count;       // values written: width · h · 2^log_stride (< 2^31 − dst_start)
  uint dst_start;   // index in Q of column 0's first value
  uint log_stride;  // l_skip − log2(h) when h < 2^l_skip, else 0
  uint log_h;       // Q's height 2^log_h, and the destination's column height 2^log_out: Q's
  uint log_out;     // value k goes to (k >> log_h)·2^log_out + (k mod 2^log_h) (equal: Q itself)
  uint begin;       // the first i written (a chunk of Q's columns: dst_start wraps below it)
};

// Q[dst_start + i] = i mod 2^log_stride == 0 ? Montgomery(trace[i >> log_stride]) : 0, for
// begin ≤ i < count: every value of the trace's slices, the zero rows of strided slices included;
// Q's values written into q, or into the first 2^log_h rows of the columns of 2^log_out rows of a
// codeword (the RS encoding's message, placed without Q). A chunk of Q's columns takes the part
// of the trace that falls in it: begin and count bound that part, dst_start is the trace's start
// less the chunk's (modulo 2^32: k is exact from begin on).
// Q's value k goes to (k >> log_h)·2^log_out + (k mod 2^log_h) of q.
MSL_FN uint stack_dst(uint k, uint log_h, uint log_out) { return ((k >> log_h) << log_out) | (k & ((1u << log_h) - 1u)); }

// Trace value i (a zero between the values of a strided slice) into q.
MSL_FN void stack_one(device const uint* trace, device uint* q, uint i, uint start, uint ls, uint log_h, uint log_out) {
  q[stack_dst(start + i, log_h, log_out)] = (i & ((1u << ls) - 1u)) == 0u ? bb_to_mont(trace[i >> ls]) : 0u;
}

kernel void stack_trace(device const uint* trace [[buffer(0)]],
                        device uint* q [[buffer(1)]],
                        constant StackParams& p [[buffer(2)]],
                        uint gid [[thread_position_in_grid]],
                        uint stride [[threads_per_grid]]) {
  uint count = p.count;
  uint start = p.dst_start;
  uint ls = p.log_stride;
  uint log_h = p.log_h;
  uint log_out = p.log_out;
  if (MSL_LANES == 16u) {
    // The host's lanes: values i0 .. i0 + 15 a work item, as one vector where they are
    // consecutive in the trace and in q (no stride; in one column of q), else one by one.
    uint lstride = lane_stride(stride);
    for (uint j0 = lane_first(gid, count - p.begin); j0 < count - p.begin; j0 += lstride) {
      uint i0 = p.begin + j0;
      uint k0 = start + i0;
      if (ls == 0u && count - i0 >= 16u && (log_h == 0u || (log_h >= 4u && (k0 & 15u) == 0u))) {
        lanes_st_dev(q + stack_dst(k0, log_h, log_out), bb_mul_lanes(lanes_ld_dev(trace + i0), lanes_splat(BB_R2)));
        continue;
      }
      for (uint i = i0; i < min(i0 + 16u, count); i++) stack_one(trace, q, i, start, ls, log_h, log_out);
    }
    return;
  }
  for (uint i = p.begin + gid; i < count; i += stride) stack_one(trace, q, i, start, ls, log_h, log_out);
}

struct ZeroParams {
  uint count;  // words
};

// q[i] = 0 for i < count: a reused codeword chunk cleared before its message is stacked into it
// (the rows below the message must be zero for the RS encoding in place).
kernel void zero_words(device uint* q [[buffer(0)]],
                       constant ZeroParams& p [[buffer(1)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  for (uint i = gid; i < p.count; i += stride) q[i] = 0u;
}
