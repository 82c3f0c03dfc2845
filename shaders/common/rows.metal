// rows.metal - constraint programs on the rows of resident traces (include/rows.h): the slot values
// of a run of rows gathered from one trace part, and the trace check of every constraint on every
// row, which finds the smallest failing (row, output) with a deterministic two-pass minimum (no
// atomics). A run is T = 2^log_points consecutive rows row0 .. row0 + T − 1 of a trace of height h;
// point t of the program.h scratch is row row0 + t.
#include "rows.h"
#include "program_lanes.h"

// A used column of a part (rows_fill_slots' cols table): the column index with flags saying which
// of its two slots the program reads.
#define ROWS_COL_MASK 0x3fffffffu
#define ROWS_LOCAL 0x40000000u  // slot 2·(part_start + c): row r
#define ROWS_NEXT 0x80000000u   // slot 2·(part_start + c) + 1: row (r + 1) mod h

#define ROWS_RUN MSL_LANES

struct RowsSlotsParams {
  uint cols_off;    // the part's first entry in cols
  uint ncols;       // its entries
  uint part_start;  // the part's first column among all parts (constraints.Program.PartStart)
  uint height;      // h, a power of two
  uint row0;        // first row of the run
  uint log_points;  // T = 2^log_points ≤ h
};

// slots[s·T + t] (Montgomery) for the slots s of the used columns of one part (cols[cols_off ..],
// ncols entries): part is the part's column-major trace, CANONICAL values (as loaded), h rows per
// column. Work item i = k·T + t: used column k, point t (consecutive items read consecutive rows and
// write consecutive slots).
kernel void rows_fill_slots(device const uint* part [[buffer(0)]],
                            device const uint* cols [[buffer(1)]],
                            device uint* slots [[buffer(2)]],
                            constant RowsSlotsParams& p [[buffer(3)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint log_t = p.log_points;
  uint T = 1u << log_t;
  uint n = p.ncols << log_t;
  uint h = p.height;
  uint row0 = p.row0;
  uint start = p.part_start;
  uint off = p.cols_off;
  for (uint i = gid; i < n; i += stride) {
    uint w = cols[off + (i >> log_t)];
    uint t = i & (T - 1u);
    uint c = w & ROWS_COL_MASK;
    uint r = row0 + t;
    uint s = 2u * (start + c);
    if ((w & ROWS_LOCAL) != 0u) slots[s * T + t] = bb_to_mont(part[c * h + r]);
    if ((w & ROWS_NEXT) != 0u) slots[(s + 1u) * T + t] = bb_to_mont(part[c * h + ((r + 1u) & (h - 1u))]);
  }
}

// The emit functor of the check: the smallest output whose value is not zero (base field;
// emits arrive in code order, not output order).
struct RowsFirstNonZero {
  uint first;
  MSL_METHOD void put(uint o, uint v) {
    if (v != 0u && o < first) first = o;
  }
};

#if MSL_LANES > 1
// The emit functor of the check on lanes: per lane, how many outputs are not zero (a count
// modulo p of 0/1 values: it cannot wrap for programs of fewer than p outputs).
struct RowsNonZeroLanes {
  lanes_uint count;
  PROG_LANES_METHOD void put(uint o, lanes_uint v) { count = bb_add_lanes(count, lanes_min(v, lanes_splat(1u))); }
};
#endif

struct RowsCheckParams {
  uint points;    // T
  uint row0;      // first row
  uint height;    // h
  uint sel_slot;  // the program's first selector slot (constraints.Program.SlotIsFirst)
  uint out_row;   // pair index in partials of this dispatch's group 0
};

// partials[2·(out_row + g) ..] = the smallest (row, output) of group g's points whose program
// outputs (the constraints) do not all vanish, (ROWS_NONE, ROWS_NONE) if none. The slots of the
// used columns must be filled (rows_fill_slots); this kernel writes the selectors. A thread visits
// its points in increasing order, in runs of ROWS_RUN consecutive points (the host's threads then
// write whole cache lines of the scratch), and stops at its first failing one. scratch: 8 bytes per
// thread.
kernel void rows_check_partials(device const uint* prog [[buffer(0)]],
                                device const uint* cp [[buffer(1)]],
                                device uint* slots [[buffer(2)]],
                                device uint* regs [[buffer(3)]],
                                device uint* partials [[buffer(4)]],
                                constant RowsCheckParams& p [[buffer(5)]],
                                threadgroup uint* scratch [[threadgroup(0)]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint group [[threadgroup_position_in_grid]],
                                uint tpg [[threads_per_threadgroup]],
                                uint ngroups [[threadgroups_per_grid]]) {
  uint T = p.points;
  uint row0 = p.row0;
  uint h = p.height;
  uint sel = p.sel_slot;
  uint units = (T + ROWS_RUN - 1u) / ROWS_RUN;
  uint best_row = ROWS_NONE;
  uint best_out = ROWS_NONE;
  for (uint u = group * tpg + tid; u < units && best_row == ROWS_NONE; u += tpg * ngroups) {
    uint t0 = u * ROWS_RUN;
    uint end = min(T, t0 + ROWS_RUN);
#if MSL_LANES > 1
    // A whole run on the lanes (host device): the program once for MSL_LANES rows, counting each
    // row's non-zero outputs; only a run with a failing row is walked again row by row below,
    // for its first failing (row, output).
    if (end - t0 == MSL_LANES) {
      for (uint t = t0; t < end; t++) rows_put_selectors(slots, sel, t, T, row0 + t, h);
      RowsNonZeroLanes e;
      e.count = lanes_splat(0u);
      prog_run_lanes(prog, cp, slots, regs, t0, T, e);
      bool fails = false;
      for (uint l = 0u; l < MSL_LANES; l++) fails = fails || lanes_get(e.count, l) != 0u;
      if (!fails) continue;
    }
#endif
    for (uint t = t0; t < end; t++) {
      rows_put_selectors(slots, sel, t, T, row0 + t, h);
      RowsFirstNonZero e;
      e.first = ROWS_NONE;
      prog_run(prog, cp, slots, regs, t, T, e);
      if (e.first != ROWS_NONE) {
        best_row = row0 + t;
        best_out = e.first;
        break;
      }
    }
  }
  rows_group_min(best_row, best_out, scratch, partials, p.out_row + group, tid, tpg);
}

struct RowsMinParams {
  uint first;  // first pair of in
  uint count;  // pairs to reduce
  uint at;     // pair index in out
};

// out[2·at ..] = the lexicographic minimum of the pairs in[2·first ..], count of them: the second
// pass of rows_check_partials (run as a single group). scratch: 8 bytes per thread.
kernel void rows_min_pairs(device const uint* in [[buffer(0)]],
                           device uint* out [[buffer(1)]],
                           constant RowsMinParams& p [[buffer(2)]],
                           threadgroup uint* scratch [[threadgroup(0)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint tpg [[threads_per_threadgroup]]) {
  uint first = p.first;
  uint count = p.count;
  uint row = ROWS_NONE;
  uint out_idx = ROWS_NONE;
  for (uint k = tid; k < count; k += tpg) {
    uint r = in[2u * (first + k)];
    uint o = in[2u * (first + k) + 1u];
    if (rows_pair_less(r, o, row, out_idx)) {
      row = r;
      out_idx = o;
    }
  }
  rows_group_min(row, out_idx, scratch, out, p.at, tid, tpg);
}

struct RowsPiecesParams {
  uint points;    // T: rows of the run (vals holds T words per slot)
  uint row0;      // first row
  uint height;    // h
  uint sel_slot;  // the program's first selector slot
  uint out_row;   // pair index in partials of this dispatch's group 0
  uint npieces;   // pieces of the program (constraints.Split)
  uint nslots;    // the largest piece's slots
  uint nregs;     // the largest piece's registers
};

// rows_check_partials with the program in pieces: work items (piece, row), piece-major; piece k's
// words at prog + table[4k], its constants at cp + table[4k + 1], its slots at pslots +
// 2·table[4k + 2] (table[4k + 3] entries: the piece's slot, the program's slot). A thread copies
// its piece's slots from vals (the run's slots, [slot][t], filled by rows_fill_slots; selectors
// computed here) into its own scratch ([index][thread]), runs the piece and keeps the smallest
// failing (row, output) it has seen (items past its best row are skipped). scratch: 8 bytes per
// thread.
kernel void rows_check_pieces(device const uint* prog [[buffer(0)]],
                              device const uint* cp [[buffer(1)]],
                              device const uint* table [[buffer(2)]],
                              device const uint* pslots [[buffer(3)]],
                              device const uint* vals [[buffer(4)]],
                              device uint* slots [[buffer(5)]],
                              device uint* regs [[buffer(6)]],
                              device uint* partials [[buffer(7)]],
                              constant RowsPiecesParams& p [[buffer(8)]],
                              threadgroup uint* scratch [[threadgroup(0)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint group [[threadgroup_position_in_grid]],
                              uint tpg [[threads_per_threadgroup]],
                              uint ngroups [[threadgroups_per_grid]]) {
  uint T = p.points;
  uint G = tpg * ngroups;
  uint gid = group * tpg + tid;
  uint items = T * p.npieces;
  uint sel = p.sel_slot;
  uint h = p.height;
  uint best_row = ROWS_NONE;
  uint best_out = ROWS_NONE;
  for (uint it = gid; it < items; it += G) {
    uint piece = it / T;
    uint t = it - piece * T;
    uint row = p.row0 + t;
    if (row > best_row) continue;
    device const uint* pt = table + 4u * piece;
    device const uint* ps = pslots + 2u * pt[2];
    uint nused = pt[3];
    for (uint k = 0u; k < nused; k++) {
      uint s = ps[2u * k + 1u];
      slots[ps[2u * k] * G + gid] = s >= sel ? rows_selector(s - sel, row, h) : vals[s * T + t];
    }
    RowsFirstNonZero e;
    e.first = ROWS_NONE;
    prog_run(prog + pt[0], cp + pt[1], slots, regs, gid, G, e);
    if (e.first != ROWS_NONE && rows_pair_less(row, e.first, best_row, best_out)) {
      best_row = row;
      best_out = e.first;
    }
  }
  rows_group_min(best_row, best_out, scratch, partials, p.out_row + group, tid, tpg);
}
