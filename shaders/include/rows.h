// rows.h - constraint programs (program.h) evaluated on the rows of resident traces: one point per
// row, its slots gathered from the trace parts (rows.metal rows_fill_slots) and its selector slots
// written by the evaluating kernel (rows_put_selectors). Row r of a trace of height h (a power of
// two) reads column c of each part at rows r and (r + 1) mod h; is_first = [r = 0], is_last =
// [r = h − 1], is_transition = 1 − is_last (constraints.Rows on the host).
#ifndef ROWS_H
#define ROWS_H
#include "program.h"

// "No failure": the (row, output) pair of a point, thread or group whose constraints all vanish.
#define ROWS_NONE 0xffffffffu

// Selector k (0: is_first, 1: is_last, 2: is_transition) of row r of a trace of height h.
MSL_FN uint rows_selector(uint k, uint r, uint h) {
  uint last = r == h - 1u ? BB_ONE : 0u;
  return k == 0u ? (r == 0u ? BB_ONE : 0u) : (k == 1u ? last : bb_sub(BB_ONE, last));
}

// Writes the three selector slots (first at slot sel: is_first, is_last, is_transition) of point
// t of T, which is row r of a trace of height h.
MSL_FN void rows_put_selectors(device uint* slots, uint sel, uint t, uint T, uint r, uint h) {
  for (uint k = 0u; k < 3u; k++) slots[(sel + k) * T + t] = rows_selector(k, r, h);
}

// Lexicographic (row, output) minimum: true when (r1, o1) < (r0, o0).
MSL_FN bool rows_pair_less(uint r1, uint o1, uint r0, uint o0) { return r1 < r0 || (r1 == r0 && o1 < o0); }

// Stores the thread's (row, output) in scratch (2 uints per thread), reduces the group's pairs to
// their minimum and writes it to out[2·at ..]. Called in uniform control flow (barriers); any
// group size.
MSL_FN void rows_group_min(uint row, uint out, threadgroup uint* scratch, device uint* dst, uint at, uint tid, uint tpg) {
  scratch[2u * tid] = row;
  scratch[2u * tid + 1u] = out;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint w = tpg; w > 1u;) {
    uint h = (w + 1u) / 2u;
    if (tid + h < w) {
      uint r1 = scratch[2u * (tid + h)];
      uint o1 = scratch[2u * (tid + h) + 1u];
      if (rows_pair_less(r1, o1, scratch[2u * tid], scratch[2u * tid + 1u])) {
        scratch[2u * tid] = r1;
        scratch[2u * tid + 1u] = o1;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    w = h;
  }
  if (tid == 0u) {
    dst[2u * at] = scratch[0];
    dst[2u * at + 1u] = scratch[1];
  }
}

#endif  // ROWS_H
