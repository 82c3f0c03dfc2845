// gkr.metal - LogUp-GKR (spec B §3.4–§3.5; cpuref gkr.go): the leaves from the interactions of
// resident traces, the fraction tree, and the layer sumchecks.
//
// A fraction (p, q) is 8 uints: p then q, each an Fp4 (4 Montgomery uints, bb4.h); fraction i of a
// buffer at [8i, 8i + 8). Layer j of the tree is a buffer of 2^j fractions (layer 0 the root,
// layer L the leaves); layer j − 1 has p = p_a·q_b + p_b·q_a, q = q_a·q_b of the pairs
// (a, b) = (2y, 2y + 1) of layer j.
//
// The sumcheck of layer j runs over tables eq, p0, q0, p1, q1 of R = 2^(j−1) rows: row y of (p0, q0)
// is fraction 2y of layer j and row y of (p1, q1) fraction 2y + 1. The kernels keep that
// interleaved layout for the folded tables: "tables of R rows" are 2R fractions (row y: fractions
// 2y, 2y + 1) and R eq values. A round sums, over the pairs (2y, 2y + 1) of rows,
//   s(x) = Σ_y e(x)·(p0(x)·q1(x) + p1(x)·q0(x) + λ·q0(x)·q1(x)),  x = 1, 2, 3,
// each column at x being lo + x·(hi − lo); binding x = r folds every column to lo + r·(hi − lo).
// Reductions are two-pass and deterministic: a partials kernel writes s(1), s(2), s(3) (12 uints)
// per group, sc_sum_rows (sumcheck.metal) adds the rows. On the host device (MSL_LANES > 1) each
// thread takes GKR_RUN consecutive pairs per step of its grid-stride loop.
#include "rows.h"
#include "poseidon2_group.h"

#define GKR_RUN MSL_LANES

// Fractions and eq tables are read and written as 16-byte accesses on GPUs (bb4_load_aligned):
// a quarter of the load instructions; the fold kernels wait on their loads (ncu, H200).
MSL_FN bb4 gkr_p(device const uint* f, uint i) { return bb4_load_aligned(f, 2u * i); }
MSL_FN bb4 gkr_q(device const uint* f, uint i) { return bb4_load_aligned(f, 2u * i + 1u); }
MSL_FN void gkr_store(device uint* f, uint i, bb4 p, bb4 q) {
  bb4_store_aligned(f, 2u * i, p);
  bb4_store_aligned(f, 2u * i + 1u, q);
}

// The emit functor of the leaves: output o of point t into outs[o·T + t] (base field).
struct GkrStoreOutputs {
  device uint* out;
  uint t, T;
  MSL_METHOD void put(uint o, uint v) { out[o * T + t] = v; }
};

struct GkrLeafParams {
  uint points;    // T rows in this run
  uint row0;      // first row
  uint height;    // h
  uint sel_slot;  // the program's first selector slot
  uint n_inter;   // interactions of the trace
  uint reps;      // copies of each row in its block: 2^LogSize / h
  uint norm;      // reps^-1 (Montgomery)
};

// The leaves of rows row0 .. row0 + T − 1 of one trace, from its interactions-only program (outputs:
// each interaction's count and message fields). inter describes interaction k in 4 words at 4k:
// count output, index in inter of its message output list, message length, leaf base (its block's
// first leaf); consts holds Fp4 values: d_k = α + β^len_k·(bus_k + 1) at k, then β^j at n_inter + j.
// Row r of interaction k gives the fraction (norm·count, d_k + Σ_j β^j·m_j) at leaves
// base + r + m·h for m < reps. The slots of the used columns must be filled (rows_fill_slots);
// outs is scratch of NumOutput·T uints.
kernel void gkr_leaves(device const uint* prog [[buffer(0)]],
                       device const uint* cp [[buffer(1)]],
                       device uint* slots [[buffer(2)]],
                       device uint* regs [[buffer(3)]],
                       device uint* outs [[buffer(4)]],
                       device const uint* inter [[buffer(5)]],
                       device const uint* consts [[buffer(6)]],
                       device uint* leaves [[buffer(7)]],
                       constant GkrLeafParams& p [[buffer(8)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint T = p.points;
  uint row0 = p.row0;
  uint h = p.height;
  uint sel = p.sel_slot;
  uint n_inter = p.n_inter;
  uint reps = p.reps;
  uint norm = p.norm;
  for (uint t = gid; t < T; t += stride) {
    uint r = row0 + t;
    rows_put_selectors(slots, sel, t, T, r, h);
    GkrStoreOutputs e;
    e.out = outs;
    e.t = t;
    e.T = T;
    prog_run(prog, cp, slots, regs, t, T, e);
    for (uint k = 0u; k < n_inter; k++) {
      uint count_out = inter[4u * k];
      uint msg = inter[4u * k + 1u];
      uint len = inter[4u * k + 2u];
      uint base = inter[4u * k + 3u] + r;
      bb4 d = bb4_load(consts, k);
      for (uint j = 0u; j < len; j++) {
        d = bb4_add(d, bb4_mul_base(bb4_load(consts, n_inter + j), outs[inter[msg + j] * T + t]));
      }
      bb4 num = bb4_lift(bb_mul(outs[count_out * T + t], norm));
      for (uint m = 0u; m < reps; m++) gkr_store(leaves, base + m * h, num, d);
    }
  }
}

struct GkrPadParams {
  uint from;            // first padding leaf
  uint to;              // end of the padding
  uint a0, a1, a2, a3;  // α (Montgomery)
};

// leaves[i] = (0, α) for from ≤ i < to: the padding after the interaction blocks.
kernel void gkr_pad(device uint* leaves [[buffer(0)]],
                    constant GkrPadParams& p [[buffer(1)]],
                    uint gid [[thread_position_in_grid]],
                    uint stride [[threads_per_grid]]) {
  uint from = p.from;
  uint to = p.to;
  bb4 alpha = bb4_make(p.a0, p.a1, p.a2, p.a3);
  for (uint i = from + gid; i < to; i += stride) gkr_store(leaves, i, bb4_zero(), alpha);
}

struct GkrLayerParams {
  uint n;  // fractions of dst
};

// dst[y] = src[2y] + src[2y+1] as fractions: (p_a·q_b + p_b·q_a, q_a·q_b), y < n.
kernel void gkr_layer(device const uint* src [[buffer(0)]],
                      device uint* dst [[buffer(1)]],
                      constant GkrLayerParams& p [[buffer(2)]],
                      uint gid [[thread_position_in_grid]],
                      uint stride [[threads_per_grid]]) {
  uint n = p.n;
  for (uint y = gid; y < n; y += stride) {
    bb4 pa = gkr_p(src, 2u * y);
    bb4 qa = gkr_q(src, 2u * y);
    bb4 pb = gkr_p(src, 2u * y + 1u);
    bb4 qb = gkr_q(src, 2u * y + 1u);
    gkr_store(dst, y, bb4_add(bb4_mul(pa, qb), bb4_mul(pb, qa)), bb4_mul(qa, qb));
  }
}

// e·(p0·q1 + p1·q0 + λ·q0·q1), as e·(p0·q1 + q0·(p1 + λ·q1)). q1 is the second factor of both its
// products: bb4_mul multiplies its second operand's coordinates by W, once for the two.
MSL_FN bb4 gkr_term(bb4 e, bb4 p0, bb4 q0, bb4 p1, bb4 q1, bb4 lambda) {
  return bb4_mul(e, bb4_add(bb4_mul(p0, q1), bb4_mul(q0, bb4_add(p1, bb4_mul(lambda, q1)))));
}

// t0 + r·(t1 − t0), r the second factor: bb4_mul multiplies its second operand's coordinates by W,
// which for r the compiler computes once for a thread's lerps instead of once a lerp.
MSL_FN bb4 gkr_lerp(bb4 t0, bb4 t1, bb4 r) { return bb4_add(t0, bb4_mul(bb4_sub(t1, t0), r)); }

// Adds the terms of one pair of rows (lo: row 2y, hi: row 2y + 1) at x = 1, 2, 3 to s1, s2, s3.
MSL_FN void gkr_pair_terms(bb4 e_lo, bb4 p0_lo, bb4 q0_lo, bb4 p1_lo, bb4 q1_lo, bb4 e_hi, bb4 p0_hi, bb4 q0_hi,
                           bb4 p1_hi, bb4 q1_hi, bb4 lambda, thread bb4& s1, thread bb4& s2, thread bb4& s3) {
  s1 = bb4_add(s1, gkr_term(e_hi, p0_hi, q0_hi, p1_hi, q1_hi, lambda));
  bb4 de = bb4_sub(e_hi, e_lo);
  bb4 dp0 = bb4_sub(p0_hi, p0_lo);
  bb4 dq0 = bb4_sub(q0_hi, q0_lo);
  bb4 dp1 = bb4_sub(p1_hi, p1_lo);
  bb4 dq1 = bb4_sub(q1_hi, q1_lo);
  bb4 e = bb4_add(e_hi, de);  // x = 2
  bb4 p0 = bb4_add(p0_hi, dp0);
  bb4 q0 = bb4_add(q0_hi, dq0);
  bb4 p1 = bb4_add(p1_hi, dp1);
  bb4 q1 = bb4_add(q1_hi, dq1);
  s2 = bb4_add(s2, gkr_term(e, p0, q0, p1, q1, lambda));
  e = bb4_add(e, de);  // x = 3
  p0 = bb4_add(p0, dp0);
  q0 = bb4_add(q0, dq0);
  p1 = bb4_add(p1, dp1);
  q1 = bb4_add(q1, dq1);
  s3 = bb4_add(s3, gkr_term(e, p0, q0, p1, q1, lambda));
}

// gkr_pair_terms with the work split over `split` threads a pair (1 or 3): with 3, the thread of
// x (X − 1) adds the term at X alone to s_X. A round of few pairs is otherwise one thread's chain of
// 22 Fp4 products a pair while most of the GPU idles (ncu: 6.6 cycles between a warp's
// instructions, two warps a scheduler).
MSL_FN bb4 gkr_at(bb4 lo, bb4 hi, uint x) {  // the table's value at X = x + 1: hi + x·(hi − lo)
  bb4 d = bb4_sub(hi, lo);
  bb4 v = x == 0u ? hi : bb4_add(hi, d);
  return x == 2u ? bb4_add(v, d) : v;
}

MSL_FN void gkr_pair_terms_split(uint split, uint x, bb4 e_lo, bb4 p0_lo, bb4 q0_lo, bb4 p1_lo, bb4 q1_lo, bb4 e_hi,
                                 bb4 p0_hi, bb4 q0_hi, bb4 p1_hi, bb4 q1_hi, bb4 lambda, thread bb4& s1, thread bb4& s2,
                                 thread bb4& s3) {
  if (split == 1u) {
    gkr_pair_terms(e_lo, p0_lo, q0_lo, p1_lo, q1_lo, e_hi, p0_hi, q0_hi, p1_hi, q1_hi, lambda, s1, s2, s3);
    return;
  }
  bb4 t = gkr_term(gkr_at(e_lo, e_hi, x), gkr_at(p0_lo, p0_hi, x), gkr_at(q0_lo, q0_hi, x), gkr_at(p1_lo, p1_hi, x),
                   gkr_at(q1_lo, q1_hi, x), lambda);
  s1 = x == 0u ? bb4_add(s1, t) : s1;
  s2 = x == 1u ? bb4_add(s2, t) : s2;
  s3 = x == 2u ? bb4_add(s3, t) : s3;
}

// The group's sum of (s1, s2, s3) (group_sum_words), written to partials[12·group ..] and left in
// scratch[0..12) for every thread. Called in uniform control flow; any group size; scratch: 12
// uints per thread.
MSL_FN void gkr_group_reduce(bb4 s1, bb4 s2, bb4 s3, threadgroup uint* scratch, device uint* partials, uint tid,
                             uint tpg, uint group) {
  uint v[12];
  for (uint c = 0u; c < 4u; c++) {
    v[c] = s1[c];
    v[4u + c] = s2[c];
    v[8u + c] = s3[c];
  }
  group_sum_words<12u>(v, scratch, tid, tpg);
  for (uint k = tid; k < 12u; k += tpg) partials[12u * group + k] = scratch[k];
}

// Where a round kernel takes λ (and r) from: the parameters, or (ch_* ≠ GKR_NONE) the Fp4 at that
// index of ch, the log that the device transcript writes (gkr_tr_round, gkr_tr_layer_end).
#define GKR_NONE 0xffffffffu

MSL_FN bb4 gkr_challenge(device const uint* ch, uint at, uint c0, uint c1, uint c2, uint c3) {
  return at == GKR_NONE ? bb4_make(c0, c1, c2, c3) : bb4_load(ch, at);
}

// Entry i of a layer's eq table: eq[off + i], or, where the table was not expanded (log_lo ≠
// GKR_NONE), lo[i mod 2^log_lo]·hi[i >> log_lo] from its halves in h (lo at 0, hi at 2^log_lo:
// gkr_tr_layer_end's, EqExpand's entry). A layer's first round and first fold read it this way:
// an expansion launch a layer cost more than these products.
MSL_FN bb4 gkr_eq_at(device const uint* eq, uint off, device const uint* h, uint log_lo, uint i) {
  if (log_lo == GKR_NONE) return bb4_load_aligned(eq, off + i);
  return bb4_mul(bb4_load_aligned(h, i & ((1u << log_lo) - 1u)), bb4_load_aligned(h, (1u << log_lo) + (i >> log_lo)));
}

struct GkrRoundParams {
  uint log_pairs;       // pairs of rows: 2^log_pairs (tables of 2^(log_pairs+1) rows)
  uint eq_off;          // Fp4 index of the eq table's row 0
  uint l0, l1, l2, l3;  // λ (Montgomery)
  uint ch_lambda;       // GKR_NONE, or λ's Fp4 index in ch
  uint split;           // threads a pair: 1, or 3 (one a point X; gkr_pair_terms_split)
  uint eq_log_lo;       // GKR_NONE: eq is the table; else its halves in eqh (gkr_eq_at)
};

// partials[group] = (s1, s2, s3) of the round over the pairs this group visits, tables as built
// (the first round of a layer: frac is the layer itself). scratch: 48 bytes per thread.
kernel void gkr_round_partials(device const uint* eq [[buffer(0)]],
                               device const uint* frac [[buffer(1)]],
                               device uint* partials [[buffer(2)]],
                               device const uint* ch [[buffer(3)]],
                               device const uint* eqh [[buffer(4)]],
                               constant GkrRoundParams& p [[buffer(5)]],
                               threadgroup uint* scratch [[threadgroup(0)]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint group [[threadgroup_position_in_grid]],
                               uint tpg [[threads_per_threadgroup]],
                               uint ngroups [[threadgroups_per_grid]]) {
  uint pairs = 1u << p.log_pairs;
  uint eq_off = p.eq_off;
  bb4 lambda = gkr_challenge(ch, p.ch_lambda, p.l0, p.l1, p.l2, p.l3);
  uint split = p.split;
  uint units = (pairs + GKR_RUN - 1u) / GKR_RUN * split;
  bb4 s1 = bb4_zero();
  bb4 s2 = bb4_zero();
  bb4 s3 = bb4_zero();
  for (uint w = group * tpg + tid; w < units; w += tpg * ngroups) {
    uint u = w / split;
    uint x = w - u * split;
    uint end = min(pairs, (u + 1u) * GKR_RUN);
    for (uint y = u * GKR_RUN; y < end; y++) {
      uint f = 4u * y;
      gkr_pair_terms_split(split, x, gkr_eq_at(eq, eq_off, eqh, p.eq_log_lo, 2u * y), gkr_p(frac, f), gkr_q(frac, f),
                           gkr_p(frac, f + 1u), gkr_q(frac, f + 1u), gkr_eq_at(eq, eq_off, eqh, p.eq_log_lo, 2u * y + 1u),
                           gkr_p(frac, f + 2u), gkr_q(frac, f + 2u), gkr_p(frac, f + 3u), gkr_q(frac, f + 3u), lambda, s1,
                           s2, s3);
    }
  }
  gkr_group_reduce(s1, s2, s3, scratch, partials, tid, tpg, group);
}

struct GkrFoldRoundParams {
  uint log_pairs;       // pairs of rows of the folded tables: 2^log_pairs
  uint eq_src;          // Fp4 index of the source eq table (2^(log_pairs+2) rows)
  uint eq_dst;          // Fp4 index of the folded eq table (2^(log_pairs+1) rows)
  uint l0, l1, l2, l3;  // λ
  uint r0, r1, r2, r3;  // the bound value r
  uint ch_lambda;       // GKR_NONE, or λ's Fp4 index in ch
  uint ch_r;            // GKR_NONE, or r's Fp4 index in ch
  uint split;           // threads a pair: 1, or 3 (each folds the pair, the first stores it; one a
                        // point X: gkr_pair_terms_split)
  uint eq_log_lo;       // GKR_NONE: the source eq is the table at eq_src; else halves in eqh
};

// Fold then round, in one pass: src (tables of 4P rows, P = 2^log_pairs) folded at r into dst
// (2P rows) and eq[eq_src ..] into eq[eq_dst ..] (the two ranges must not overlap), and
// partials[group] = (s1, s2, s3) of the folded tables over the pairs this group visits. Pair i
// reads source rows 4i .. 4i + 3 and writes rows 2i, 2i + 1. dst must not overlap src.
kernel void gkr_fold_round_partials(device uint* eq [[buffer(0)]],
                                    device const uint* src [[buffer(1)]],
                                    device uint* dst [[buffer(2)]],
                                    device uint* partials [[buffer(3)]],
                                    device const uint* ch [[buffer(4)]],
                                    device const uint* eqh [[buffer(5)]],
                                    constant GkrFoldRoundParams& p [[buffer(6)]],
                                    threadgroup uint* scratch [[threadgroup(0)]],
                                    uint tid [[thread_index_in_threadgroup]],
                                    uint group [[threadgroup_position_in_grid]],
                                    uint tpg [[threads_per_threadgroup]],
                                    uint ngroups [[threadgroups_per_grid]]) {
  uint pairs = 1u << p.log_pairs;
  uint es = p.eq_src;
  uint ed = p.eq_dst;
  bb4 lambda = gkr_challenge(ch, p.ch_lambda, p.l0, p.l1, p.l2, p.l3);
  bb4 r = gkr_challenge(ch, p.ch_r, p.r0, p.r1, p.r2, p.r3);
  uint split = p.split;
  uint units = (pairs + GKR_RUN - 1u) / GKR_RUN * split;
  bb4 s1 = bb4_zero();
  bb4 s2 = bb4_zero();
  bb4 s3 = bb4_zero();
  for (uint w = group * tpg + tid; w < units; w += tpg * ngroups) {
    uint u = w / split;
    uint x = w - u * split;
    uint end = min(pairs, (u + 1u) * GKR_RUN);
    for (uint i = u * GKR_RUN; i < end; i++) {
      // Every load before the first store: the compiler cannot tell eq's stores from src's rows,
      // and would load the rows after them (one more memory latency a pair).
      bb4 e[4];
      for (uint k = 0u; k < 4u; k++) e[k] = gkr_eq_at(eq, es, eqh, p.eq_log_lo, 4u * i + k);
      // Source row k, column c is fraction 2k + c: rows 4i .. 4i + 3 are fractions 8i .. 8i + 7.
      uint s = 8u * i;
      bb4 fp[8];
      bb4 fq[8];
      for (uint k = 0u; k < 8u; k++) {
        fp[k] = gkr_p(src, s + k);
        fq[k] = gkr_q(src, s + k);
      }
      bb4 e_lo = gkr_lerp(e[0], e[1], r);
      bb4 e_hi = gkr_lerp(e[2], e[3], r);
      if (x == 0u) {
        bb4_store_aligned(eq, ed + 2u * i, e_lo);
        bb4_store_aligned(eq, ed + 2u * i + 1u, e_hi);
      }
      bb4 p0_lo = gkr_lerp(fp[0], fp[2], r);
      bb4 q0_lo = gkr_lerp(fq[0], fq[2], r);
      bb4 p1_lo = gkr_lerp(fp[1], fp[3], r);
      bb4 q1_lo = gkr_lerp(fq[1], fq[3], r);
      bb4 p0_hi = gkr_lerp(fp[4], fp[6], r);
      bb4 q0_hi = gkr_lerp(fq[4], fq[6], r);
      bb4 p1_hi = gkr_lerp(fp[5], fp[7], r);
      bb4 q1_hi = gkr_lerp(fq[5], fq[7], r);
      if (x == 0u) {
        uint d = 4u * i;
        gkr_store(dst, d, p0_lo, q0_lo);
        gkr_store(dst, d + 1u, p1_lo, q1_lo);
        gkr_store(dst, d + 2u, p0_hi, q0_hi);
        gkr_store(dst, d + 3u, p1_hi, q1_hi);
      }
      gkr_pair_terms_split(split, x, e_lo, p0_lo, q0_lo, p1_lo, q1_lo, e_hi, p0_hi, q0_hi, p1_hi, q1_hi, lambda, s1, s2, s3);
    }
  }
  gkr_group_reduce(s1, s2, s3, scratch, partials, tid, tpg, group);
}

// ------------------------------------------------------------------------------------------------
// The layers' transcript on the device. The stage (internal/stark/gkr.go) observes each round's
// s(1), s(2), s(3) and samples its bound value, observes each layer's claims and samples μ, then
// the next layer's λ; these kernels do the same on a copy of the stage's transcript held in device
// memory, so that the layers' rounds follow one another without the host: ts[0..16) is the sponge
// state (Montgomery), ts[16] its absorb index, ts[17] its sample index (transcript.Transcript's
// fields). Every value goes to trlog (Fp4 indices), which the stage downloads once and replays
// through its own transcript, checking each sample against the device's.

struct GkrTrRoundParams {
  uint groups;  // partial rows of the round (12 uints each)
  uint at;      // Fp4 index in trlog: s(1), s(2), s(3) at at .. at + 2, the bound value at at + 3
};

// One round's step: s(1), s(2), s(3) = the sum of the round's partial rows (one group of ≥ 16
// threads; scratch: 48 bytes a thread and P2G_RC_LEN uints), then observe them and sample the bound value r with the
// group's sponge (poseidon2_group.h).
kernel void gkr_tr_round(device const uint* partials [[buffer(0)]],
                         device uint* trlog [[buffer(1)]],
                         device uint* ts [[buffer(2)]],
                         constant uint* rc [[buffer(3)]],
                         constant GkrTrRoundParams& p [[buffer(4)]],
                         threadgroup uint* scratch [[threadgroup(0)]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint tpg [[threads_per_threadgroup]]) {
  bb4 s1 = bb4_zero();
  bb4 s2 = bb4_zero();
  bb4 s3 = bb4_zero();
  // scratch: the reduce's 12 uints a thread, then (after it) the sums at 0..12, the sponge's
  // exchanges at 16..48 and outputs at 48..64; the round constants at 12·tpg.. throughout.
  threadgroup uint* rcs = scratch + 12u * tpg;
  // The sponge, the constants and the first rows loaded side by side: one memory latency.
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  uint cv[P2G_RC_BATCH];
  p2g_constants_fetch(rc, cv, tid, tpg);
  // Four rows' loads in flight a thread (up to 528 rows: one at a time, a large round's step
  // waited for 17 loads in turn).
  for (uint g0 = tid; g0 < p.groups; g0 += 4u * tpg) {
    bb4 v[12];
    for (uint j = 0u; j < 4u; j++) {
      uint g = min(g0 + j * tpg, p.groups - 1u);
      for (uint c = 0u; c < 3u; c++) v[3u * j + c] = bb4_load(partials, 3u * g + c);
    }
    for (uint j = 0u; j < 4u; j++) {
      if (g0 + j * tpg < p.groups) {
        s1 = bb4_add(s1, v[3u * j]);
        s2 = bb4_add(s2, v[3u * j + 1u]);
        s3 = bb4_add(s3, v[3u * j + 2u]);
      }
    }
  }
  p2g_constants_put(rc, rcs, cv, tid, tpg);
  gkr_group_reduce(s1, s2, s3, scratch, trlog + 4u * p.at, tid, tpg, 0u);
  // The reduce's barriers also cover rcs. It ended with one: scratch[0..12) holds the sums for
  // every thread.
  threadgroup uint* xs = scratch + 16u;
  threadgroup uint* out = scratch + 48u;
  MSL_NO_UNROLL
  for (uint k = 0u; k < 3u; k++) p2g_observe4(sp, bb4_load_tg(scratch, k), rcs, tid, xs, out);
  bb4 r = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) bb4_store(trlog, p.at + 3u, r);
  threadgroup_barrier(mem_flags::mem_device);  // every thread has read ts
  p2g_sponge_store(ts, sp, tid);
}

struct GkrTrLayerParams {
  uint at;         // claims (P0, Q0, P1, Q1) at at .. at + 3, μ at at + 4
  uint lambda_at;  // GKR_NONE: the last layer; else the next layer's λ goes there
  uint rho_at;     // the first bound value of this layer's rounds (the next ξ's coordinates 1..)
  uint rho_step;   // Fp4 distance between them in trlog
  uint n_xi;       // the next layer's ξ: μ, then n_xi − 1 bound values
  uint log_lo;     // kernels.EqTables: lo = eq of ξ's first log_lo coordinates, hi of the rest
};

// A layer's end (gkr_tr_layer_end, and gkr_tr_small_rounds after a layer's last round): the
// layer's claims observed, μ and the next layer's λ sampled, the next layer's eq halves made.
#define GKR_XI_MAX 32u      // ξ's coordinates (kernels.GkrLayerEnd: two halves of at most 14)
#define GKR_HALF_SMALL 128u  // entries of lo_t and hi_t: a half of up to 14 coordinates
#define GKR_END_WORDS (4u * (GKR_XI_MAX + 2u * GKR_HALF_SMALL))  // ξ, lo_t, hi_t
#define GKR_LAYER_END_WORDS (48u + P2G_RC_LEN + GKR_END_WORDS)

// The layer end's transcript: the claims c logged at trlog[at ..] and observed, μ sampled into the
// log and ξ[0], then (lambda_at ≠ GKR_NONE) the next layer's λ. Every thread of the sponge calls it.
MSL_FN void gkr_end_sponge(thread p2g_sponge& sp, thread const bb4* c, device uint* trlog, uint at, uint lambda_at,
                           threadgroup uint* xi, threadgroup const uint* rcs, uint tid, threadgroup uint* xs,
                           threadgroup uint* out) {
  MSL_NO_UNROLL
  for (uint k = 0u; k < 4u; k++) {
    if (tid == 0u) bb4_store(trlog, at + k, c[k]);
    p2g_observe4(sp, c[k], rcs, tid, xs, out);
  }
  bb4 mu = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) {
    bb4_store(trlog, at + 4u, mu);
    bb4_store_tg(xi, 0u, mu);
  }
  if (lambda_at != GKR_NONE) {
    bb4 lambda = p2g_sample4(sp, rcs, tid, xs, out);
    if (tid == 0u) bb4_store(trlog, lambda_at, lambda);
  }
}

// ξ's coordinates 1 .. n_xi − 1 (the layer's bound values) from the log into xi.
MSL_FN void gkr_end_load_xi(threadgroup uint* xi, device const uint* trlog, uint rho_at, uint rho_step, uint n_xi, uint tid,
                            uint tpg) {
  for (uint k = 1u + tid; k < n_xi; k += tpg) bb4_store_tg(xi, k, bb4_load(trlog, rho_at + (k - 1u) * rho_step));
}

// The halves of eq(ξ, ·) (n_xi coordinates, the first log_lo in lo) into halves: lo at 0, hi at
// 2^log_lo (EqTables). Entry e of a half of c coordinates is lo_t[e mod 2^a]·hi_t[e >> a]
// (a = c/2), the two small tables made entry by entry from ξ in threadgroup memory: no step waits
// for device memory (the halves made by doubling in device memory took ≈ 0.6 µs a coordinate, a
// barrier each). ξ complete in xi (after a barrier); every thread calls it.
MSL_FN void gkr_end_halves(threadgroup const uint* xi, threadgroup uint* lo_t, threadgroup uint* hi_t, device uint* halves,
                           uint n_xi, uint log_lo, uint tid, uint tpg) {
  for (uint side = 0u; side < 2u; side++) {
    uint first = side == 0u ? 0u : log_lo;
    uint count = side == 0u ? log_lo : n_xi - log_lo;
    uint base = side == 0u ? 0u : (1u << log_lo);
    uint a = count / 2u;
    uint na = 1u << a;
    uint nb = 1u << (count - a);
    // lo_t[e]: ξ's coordinates first .. first + a by the bits of e; hi_t[e]: the rest.
    for (uint e = tid; e < na + nb; e += tpg) {
      bool high = e >= na;
      uint idx = high ? e - na : e;
      uint n = high ? count - a : a;
      uint off = first + (high ? a : 0u);
      bb4 v = bb4_one();
      for (uint i = 0u; i < n; i++) {
        bb4 x = bb4_load_tg(xi, off + i);
        v = bb4_mul(v, ((idx >> i) & 1u) != 0u ? x : bb4_sub(bb4_one(), x));
      }
      bb4_store_tg(high ? hi_t : lo_t, idx, v);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < (1u << count); e += tpg) {
      bb4_store_aligned(halves, base + e, bb4_mul(bb4_load_tg(lo_t, e & (na - 1u)), bb4_load_tg(hi_t, e >> a)));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // lo_t and hi_t read before the next side
  }
}

// Layer 1's end: its claims (fractions 0 and 1 of the layer as built) observed, then μ and the next
// layer's λ sampled; then (not the last layer) the halves of eq(ξ, ·) of the next layer,
// ξ = (μ, layer 1's bound values: none), into halves: lo at 0, hi at 2^log_lo (EqTables;
// gkr_end_halves). Later layers end in their small rounds' launch (gkr_tr_small_rounds).
// The sponge runs on one SIMD group on GPUs (more threads slow it; the others wait for μ), on every
// thread on the host device (its exchanges have barriers). One group of ≥ 16 threads (GPUs: whole
// SIMD groups, poseidon2_group.h); scratch: GKR_LAYER_END_WORDS uints.
kernel void gkr_tr_layer_end(device const uint* layer1 [[buffer(0)]],
                             device uint* trlog [[buffer(1)]],
                             device uint* ts [[buffer(2)]],
                             constant uint* rc [[buffer(3)]],
                             device uint* halves [[buffer(4)]],
                             constant GkrTrLayerParams& p [[buffer(5)]],
                             threadgroup uint* scratch [[threadgroup(0)]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint tpg [[threads_per_threadgroup]]) {
  threadgroup uint* xs = scratch;
  threadgroup uint* out = scratch + 32u;
  threadgroup uint* rcs = scratch + 48u;
  threadgroup uint* xi = rcs + P2G_RC_LEN;            // ξ, Fp4
  threadgroup uint* lo_t = xi + 4u * GKR_XI_MAX;       // Fp4
  threadgroup uint* hi_t = lo_t + 4u * GKR_HALF_SMALL;  // Fp4
  bool next = p.lambda_at != GKR_NONE;
  // ξ's coordinates 1.. are this layer's bound values, in the log already.
  if (next) gkr_end_load_xi(xi, trlog, p.rho_at, p.rho_step, p.n_xi, tid, tpg);
  p2g_load_constants(rc, rcs, tid, tpg);
#if !defined(MSL_TARGET_HOST)
  bool sponge = tid < 32u;
#else
  bool sponge = true;
#endif
  if (sponge) {
    bb4 c[4];
    c[0] = gkr_p(layer1, 0u);
    c[1] = gkr_q(layer1, 0u);
    c[2] = gkr_p(layer1, 1u);
    c[3] = gkr_q(layer1, 1u);
    p2g_sponge sp;
    p2g_sponge_load(sp, ts, tid);
    gkr_end_sponge(sp, c, trlog, p.at, p.lambda_at, xi, rcs, tid, xs, out);
#if defined(MSL_TARGET_HOST)
    threadgroup_barrier(mem_flags::mem_device);  // every fiber has read ts
#endif
    p2g_sponge_store(ts, sp, tid);  // on GPUs the SIMD group read ts before its first shuffle
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);  // ξ complete
  if (next) gkr_end_halves(xi, lo_t, hi_t, halves, p.n_xi, p.log_lo, tid, tpg);
}

// The small rounds' tables in threadgroup memory (T: four Fp4 a row, E: one), read and written as
// 16-byte accesses, Fp4 i at slot i ^ ((i >> 3) & 7). A round's thread y reads Fp4 8y + k and a
// fold's thread m writes 4m + c: unswizzled, the slots of neighbouring threads lay 8 (or 4) apart,
// in the same banks (ncu, H200: five- to six-way conflicts on average); swizzled, the eight threads
// of a 16-byte access phase meet eight different slots mod 8. Each aligned block of eight slots
// stays in place, so a table of fewer than eight is unchanged.
MSL_FN uint gkr_tslot(uint i) { return i ^ ((i >> 3u) & 7u); }
MSL_FN bb4 gkr_tload(threadgroup const uint* t, uint i) { return bb4_load_tg_aligned(t, gkr_tslot(i)); }
MSL_FN void gkr_tstore(threadgroup uint* t, uint i, bb4 v) { bb4_store_tg_aligned(t, gkr_tslot(i), v); }

// The rounds of a layer whose tables have at most 2^(GKR_SMALL_LOG+1) rows, run by one group in
// threadgroup memory, one launch for all of them: each round's sums over the pairs, the transcript
// step (observe s(1), s(2), s(3), sample the bound value r: the group's sponge), then the tables
// and eq folded at r in place, until one pair is left. A round of the other path costs two
// launches (fold and round, transcript step) with ≥ 5 µs of launch latency each on an H200, and
// the small rounds are most of a proof's rounds (the last 8 of every layer).
#define GKR_SMALL_LOG 7u

struct GkrSmallParams {
  uint log_pairs;  // pairs of the first round run here: 2^log_pairs ≤ 2^GKR_SMALL_LOG
  uint fold;       // 1: src and eq hold the previous round's tables (twice the rows), folded here
                   // at trlog[r_at]; 0: they are the first round's
  uint r_at;       // the previous round's bound value (fold)
  uint eq_off;     // Fp4 index of the eq table loaded (the previous round's when fold)
  uint lambda_at;  // λ's Fp4 index in trlog
  uint at;         // the first round's s(1), s(2), s(3), r at at .. at + 3, each next round's 4 later
  uint eq_log_lo;  // GKR_NONE: eq is the table at eq_off; else its halves in eqh (gkr_eq_at)
  // The layer's end, run here after the last round: the claims at end_at .. end_at + 3, μ at
  // end_at + 4; the next layer's λ at next_lambda_at
  // (GKR_NONE: the last layer) and its eq halves of ξ = (μ, trlog[rho_at + k·rho_step] for
  // k < n_xi − 1), the first log_lo coordinates in lo.
  uint end_at;
  uint next_lambda_at;
  uint rho_at;
  uint rho_step;
  uint n_xi;
  uint log_lo;
};

// After the last round (one pair, two rows) the two rows, folded at the last bound value, are the
// layer's claims, and the layer's end follows in this launch (gkr_tr_layer_end's for layer 1: a
// launch, the constants' copy, the sponge's load and store and the rows' fewer a layer). One
// group of ≥ 16 threads; scratch: body + 48 + P2G_RC_LEN uints, body = max(20·rows + 12·tpg,
// GKR_END_WORDS) (rows = 2^(log_pairs+1)).
kernel void gkr_tr_small_rounds(device const uint* eq [[buffer(0)]],
                                device const uint* src [[buffer(1)]],
                                device uint* trlog [[buffer(2)]],
                                device uint* ts [[buffer(3)]],
                                constant uint* rc [[buffer(4)]],
                                device const uint* eqh [[buffer(5)]],
                                device uint* halves [[buffer(6)]],
                                constant GkrSmallParams& p [[buffer(7)]],
                                threadgroup uint* scratch [[threadgroup(0)]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint tpg [[threads_per_threadgroup]]) {
  uint rows = 2u << p.log_pairs;
  uint body = max(20u * rows + 12u * tpg, GKR_END_WORDS);
  threadgroup uint* T = scratch;        // row k: fractions 2k, 2k + 1 (16 uints)
  threadgroup uint* E = T + 16u * rows;  // eq, one Fp4 a row
  threadgroup uint* red = E + 4u * rows;  // the reduce's 12 uints a thread; the sums at 0..12 after it
  threadgroup uint* xs = scratch + body;
  threadgroup uint* out = xs + 32u;
  threadgroup uint* rcs = out + 16u;
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);  // beside the constants' and the tables' loads
  p2g_copy_constants(rc, rcs, tid, tpg);
  bb4 lambda = bb4_load(trlog, p.lambda_at);
  if (p.fold != 0u) {
    bb4 r = bb4_load(trlog, p.r_at);  // new row m = lerp(rows 2m, 2m + 1)
    for (uint m = tid; m < rows; m += tpg) {
      for (uint c = 0u; c < 4u; c++) gkr_tstore(T, 4u * m + c, gkr_lerp(bb4_load_aligned(src, 8u * m + c), bb4_load_aligned(src, 8u * m + 4u + c), r));
      gkr_tstore(E, m, gkr_lerp(gkr_eq_at(eq, p.eq_off, eqh, p.eq_log_lo, 2u * m), gkr_eq_at(eq, p.eq_off, eqh, p.eq_log_lo, 2u * m + 1u), r));
    }
  } else {
    for (uint m = tid; m < rows; m += tpg) {
      for (uint c = 0u; c < 4u; c++) gkr_tstore(T, 4u * m + c, bb4_load_aligned(src, 4u * m + c));
      gkr_tstore(E, m, gkr_eq_at(eq, p.eq_off, eqh, p.eq_log_lo, m));
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  uint at = p.at;
  bb4 r = bb4_zero();  // the round's bound value
  for (uint lp = p.log_pairs + 1u; lp > 0u; lp--) {
    uint pairs = 1u << (lp - 1u);
    bb4 s1 = bb4_zero();
    bb4 s2 = bb4_zero();
    bb4 s3 = bb4_zero();
    for (uint y = tid; y < pairs; y += tpg) {
      uint f = 4u * y;  // fraction f: p at Fp4 2f, q at 2f + 1
      gkr_pair_terms(gkr_tload(E, 2u * y), gkr_tload(T, 2u * f), gkr_tload(T, 2u * f + 1u), gkr_tload(T, 2u * f + 2u),
                     gkr_tload(T, 2u * f + 3u), gkr_tload(E, 2u * y + 1u), gkr_tload(T, 2u * f + 4u),
                     gkr_tload(T, 2u * f + 5u), gkr_tload(T, 2u * f + 6u), gkr_tload(T, 2u * f + 7u), lambda, s1, s2,
                     s3);
    }
    gkr_group_reduce(s1, s2, s3, red, trlog + 4u * at, tid, tpg, 0u);
    MSL_NO_UNROLL
    for (uint k = 0u; k < 3u; k++) p2g_observe4(sp, bb4_load_tg(red, k), rcs, tid, xs, out);
    r = p2g_sample4(sp, rcs, tid, xs, out);
    if (tid == 0u) bb4_store(trlog, at + 3u, r);
    at += 4u;
    if (pairs == 1u) break;
    // Fold in place, in chunks of tpg new rows: a chunk reads old rows beyond every row an
    // earlier chunk wrote, and writes rows no later chunk reads.
    for (uint m0 = 0u; m0 < pairs; m0 += tpg) {
      uint m = m0 + tid;
      bb4 v[5];
      if (m < pairs) {
        for (uint c = 0u; c < 4u; c++) v[c] = gkr_lerp(gkr_tload(T, 8u * m + c), gkr_tload(T, 8u * m + 4u + c), r);
        v[4] = gkr_lerp(gkr_tload(E, 2u * m), gkr_tload(E, 2u * m + 1u), r);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      if (m < pairs) {
        for (uint c = 0u; c < 4u; c++) gkr_tstore(T, 4u * m + c, v[c]);
        gkr_tstore(E, m, v[4]);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
  // The layer's end: the claims from the last two rows folded at r.
  bb4 c[4];
  for (uint k = 0u; k < 4u; k++) c[k] = gkr_lerp(gkr_tload(T, k), gkr_tload(T, 4u + k), r);
  // T is free once every thread has read it; the bound values thread 0 logged here are visible.
  threadgroup_barrier(mem_flags::mem_device);
  threadgroup uint* xi = scratch;                    // ξ, Fp4
  threadgroup uint* lo_t = xi + 4u * GKR_XI_MAX;       // Fp4
  threadgroup uint* hi_t = lo_t + 4u * GKR_HALF_SMALL;  // Fp4
  bool next = p.next_lambda_at != GKR_NONE;
  if (next) gkr_end_load_xi(xi, trlog, p.rho_at, p.rho_step, p.n_xi, tid, tpg);
  gkr_end_sponge(sp, c, trlog, p.end_at, p.next_lambda_at, xi, rcs, tid, xs, out);
  p2g_sponge_store(ts, sp, tid);  // every thread read ts before the first round's barriers
  threadgroup_barrier(mem_flags::mem_threadgroup);  // ξ complete
  if (next) gkr_end_halves(xi, lo_t, hi_t, halves, p.n_xi, p.log_lo, tid, tpg);
}
