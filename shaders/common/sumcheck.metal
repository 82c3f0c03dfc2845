// sumcheck.metal - the shared kernels of the product sumchecks (the stacked opening reduction and
// WHIR, spec B §5.4 and spec A §6.3): round sums, folds and eq tables over column-major Fp4 tables.
//
// A table set is `cols` columns of 2^n Fp4 rows; column c starts at Fp4 index c·stride of its
// buffer (4 consecutive Montgomery uints per element, bb4.h). A product sumcheck over tables f and
// w has the round polynomial s(X) = Σ_c Σ_y f_c(X, y)·w_c(X, y) over the lowest variable X, sent as
//   s(1) = Σ_c Σ_{y<2^(n−1)} f_c[2y+1]·w_c[2y+1],
//   s(2) = Σ_c Σ_y (2f_c[2y+1] − f_c[2y])·(2w_c[2y+1] − w_c[2y]),
// and binding X = α folds every table: t'[y] = t[2y] + α·(t[2y+1] − t[2y]).
//
// Reductions are two-pass and deterministic: a partials kernel writes one row of sums per group,
// sc_sum_rows adds the rows. The round kernels work on blocks of 16·MSL_LANES uints
// (bb4_lanes.h: an Fp4 per lane, SIMD on the host device; four Fp4 per thread on GPUs) when a
// column holds whole blocks, else on single pairs (MSL_LANES consecutive pairs per step of a
// thread's grid-stride loop, so that the few host threads read contiguous runs). Host kernels
// must name MSL_LANES in their body to get their SIMD builds (scripts/mslgen).
#include "bb4_lanes.h"

// The α of a fold as four Montgomery uints.
MSL_FN bb4 sc_alpha(uint a0, uint a1, uint a2, uint a3) { return bb4_make(a0, a1, a2, a3); }

// The round terms of one pair (t0, t1) of f and (v0, v1) of w, added to s1 and s2.
MSL_FN void sc_pair_terms(bb4 f0, bb4 f1, bb4 w0, bb4 w1, thread bb4& s1, thread bb4& s2) {
  s1 = bb4_add(s1, bb4_mul(f1, w1));
  bb4 fd = bb4_sub(bb4_add(f1, f1), f0);
  bb4 wd = bb4_sub(bb4_add(w1, w1), w0);
  s2 = bb4_add(s2, bb4_mul(fd, wd));
}

// t0 + α·(t1 − t0), α the second factor: bb4_mul multiplies its second operand's coordinates by
// W, which for α the compiler computes once for a thread's lerps instead of once a lerp.
MSL_FN bb4 sc_lerp(bb4 t0, bb4 t1, bb4 alpha) { return bb4_add(t0, bb4_mul(bb4_sub(t1, t0), alpha)); }

// The group's sum of (s1, s2) (group_sum_words), written to partials[group·8 ..]. Called in
// uniform control flow (it has barriers); any group size; scratch: 8 uints per thread.
MSL_FN void sc_group_reduce_pair(bb4 s1, bb4 s2, threadgroup uint* scratch, device uint* partials, uint tid, uint tpg,
                                 uint group) {
  uint v[8];
  for (uint c = 0u; c < 4u; c++) {
    v[c] = s1[c];
    v[4u + c] = s2[c];
  }
  group_sum_words<8u>(v, scratch, tid, tpg);
  for (uint k = tid; k < 8u; k += tpg) partials[8u * group + k] = scratch[k];
}

struct ScRoundParams {
  uint log_half;  // n − 1: pairs per column (n ≥ 1)
  uint cols;      // columns
  uint stride;    // Fp4 index distance between columns of f and of w
};

// partials[group] = (s1, s2) over the pairs this group visits (8 uints: s1 then s2): pair
// i = c·2^(n−1) + y < cols·2^(n−1). scratch: 32 bytes per thread. Add the rows with sc_sum_rows.
kernel void sc_round_partials(device const uint* f [[buffer(0)]],
                              device const uint* w [[buffer(1)]],
                              device uint* partials [[buffer(2)]],
                              constant ScRoundParams& p [[buffer(3)]],
                              threadgroup uint* scratch [[threadgroup(0)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint group [[threadgroup_position_in_grid]],
                              uint tpg [[threads_per_threadgroup]],
                              uint ngroups [[threadgroups_per_grid]]) {
  uint log_half = p.log_half;
  uint cols = p.cols;
  uint stride = p.stride;
  bb4 s1 = bb4_zero();
  bb4 s2 = bb4_zero();
  uint log_unit = MSL_LOG_LANES + 1u;  // pairs per block: 2·MSL_LANES (4·MSL_LANES rows)
  if (log_half >= log_unit) {
    lanes_uint v1[4];
    lanes_uint v2[4];
    for (uint c = 0u; c < 4u; c++) {
      v1[c] = lanes_splat(0u);
      v2[c] = lanes_splat(0u);
    }
    uint log_upc = log_half - log_unit;
    uint units = cols << log_upc;
    for (uint u = group * tpg + tid; u < units; u += tpg * ngroups) {
      uint base = 4u * ((u >> log_upc) * stride + ((u & ((1u << log_upc) - 1u)) << (log_unit + 1u)));
      lanes_uint fv[16];
      lanes_uint wv[16];
      bb4l_load_block(fv, f + base);
      bb4l_load_block(wv, w + base);
      for (uint q = 0u; q < 2u; q++) {  // the pairs (elements 0, 1) and (2, 3) of every lane
        bb4l_mul_acc(v1, fv + 8u * q + 4u, wv + 8u * q + 4u);
        lanes_uint fd[4];
        lanes_uint wd[4];
        bb4l_double_sub(fd, fv + 8u * q + 4u, fv + 8u * q);
        bb4l_double_sub(wd, wv + 8u * q + 4u, wv + 8u * q);
        bb4l_mul_acc(v2, fd, wd);
      }
    }
    s1 = bb4_make(bbl_sum(v1[0]), bbl_sum(v1[1]), bbl_sum(v1[2]), bbl_sum(v1[3]));
    s2 = bb4_make(bbl_sum(v2[0]), bbl_sum(v2[1]), bbl_sum(v2[2]), bbl_sum(v2[3]));
  } else {
    uint half_mask = (1u << log_half) - 1u;
    uint pairs = cols << log_half;
    uint units = (pairs + MSL_LANES - 1u) / MSL_LANES;
    for (uint u = group * tpg + tid; u < units; u += tpg * ngroups) {
      uint end = min(pairs, (u + 1u) * MSL_LANES);
      for (uint i = u * MSL_LANES; i < end; i++) {
        uint at = (i >> log_half) * stride + 2u * (i & half_mask);
        sc_pair_terms(bb4_load_aligned(f, at), bb4_load_aligned(f, at + 1u), bb4_load_aligned(w, at), bb4_load_aligned(w, at + 1u), s1, s2);
      }
    }
  }
  sc_group_reduce_pair(s1, s2, scratch, partials, tid, tpg, group);
}

// ScFoldRoundParams.alpha_at when α is the parameters' own a0..a3.
#define SC_ALPHA_PARAM 0xffffffffu

struct ScFoldRoundParams {
  uint log_half;    // n' − 1 where n' = n − 1 is the log row count after the fold (n' ≥ 1)
  uint cols;        // columns
  uint src_stride;  // column stride of f and w (2^n rows each)
  uint dst_stride;  // column stride of f_out and w_out (2^n' rows each)
  uint a0, a1, a2, a3;  // α, Montgomery
  uint alpha_at;    // SC_ALPHA_PARAM: α is a0..a3; else the Fp4 index of α in alphas (a device
                    // transcript's log: the bound value its previous step sampled)
};

// Fold then round, in one pass: f_out[y] = f[2y] + α(f[2y+1] − f[2y]) and the same for w (every
// column, y < 2^n'), and partials[group] = (s1, s2) of the folded tables over the pairs this group
// visits. Pair i = c·2^(n'−1) + y' reads rows 4y'..4y'+3 of f and w and writes rows 2y', 2y'+1 of
// f_out and w_out. f_out, w_out must not overlap f, w.
kernel void sc_fold_round_partials(device const uint* f [[buffer(0)]],
                                   device const uint* w [[buffer(1)]],
                                   device uint* f_out [[buffer(2)]],
                                   device uint* w_out [[buffer(3)]],
                                   device uint* partials [[buffer(4)]],
                                   constant ScFoldRoundParams& p [[buffer(5)]],
                                   device const uint* alphas [[buffer(6)]],
                                   threadgroup uint* scratch [[threadgroup(0)]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint group [[threadgroup_position_in_grid]],
                                   uint tpg [[threads_per_threadgroup]],
                                   uint ngroups [[threadgroups_per_grid]]) {
  uint log_half = p.log_half;
  uint cols = p.cols;
  uint ss = p.src_stride;
  uint ds = p.dst_stride;
  bb4 alpha = p.alpha_at == SC_ALPHA_PARAM ? sc_alpha(p.a0, p.a1, p.a2, p.a3) : bb4_load_aligned(alphas, p.alpha_at);
  bb4 s1 = bb4_zero();
  bb4 s2 = bb4_zero();
  uint log_unit = MSL_LOG_LANES;  // output pairs per block: MSL_LANES (4·MSL_LANES source rows)
  if (log_half >= log_unit) {
    lanes_uint al[7];
    bb4l_uniform_of(al, alpha);
    lanes_uint v1[4];
    lanes_uint v2[4];
    for (uint c = 0u; c < 4u; c++) {
      v1[c] = lanes_splat(0u);
      v2[c] = lanes_splat(0u);
    }
    uint log_upc = log_half - log_unit;
    uint units = cols << log_upc;
    for (uint u = group * tpg + tid; u < units; u += tpg * ngroups) {
      uint c = u >> log_upc;
      uint j = u & ((1u << log_upc) - 1u);
      uint src = 4u * (c * ss + (j << (log_unit + 2u)));
      uint dst = 4u * (c * ds + (j << (log_unit + 1u)));
      lanes_uint fv[16];
      lanes_uint wv[16];
      bb4l_load_block(fv, f + src);  // lane l: source rows 4(y + l) .. 4(y + l) + 3
      bb4l_load_block(wv, w + src);
      lanes_uint x[16];  // folded rows 2(y + l), 2(y + l) + 1 of f, then of w
      for (uint k = 0u; k < 4u; k++) {
        thread lanes_uint* t0 = k < 2u ? fv + 8u * k : wv + 8u * (k - 2u);
        lanes_uint d[4];
        bb4l_sub(d, t0 + 4u, t0);
        bb4l_mul_uniform(x + 4u * k, al, d);
        bb4l_add(x + 4u * k, x + 4u * k, t0);
      }
      bb4l_mul_acc(v1, x + 4u, x + 12u);
      lanes_uint fd[4];
      lanes_uint wd[4];
      bb4l_double_sub(fd, x + 4u, x);
      bb4l_double_sub(wd, x + 12u, x + 8u);
      bb4l_mul_acc(v2, fd, wd);
      bb4l_store_pairs(f_out + dst, w_out + dst, x);
    }
    s1 = bb4_make(bbl_sum(v1[0]), bbl_sum(v1[1]), bbl_sum(v1[2]), bbl_sum(v1[3]));
    s2 = bb4_make(bbl_sum(v2[0]), bbl_sum(v2[1]), bbl_sum(v2[2]), bbl_sum(v2[3]));
  } else {
    uint half_mask = (1u << log_half) - 1u;
    uint pairs = cols << log_half;
    uint units = (pairs + MSL_LANES - 1u) / MSL_LANES;
    for (uint u = group * tpg + tid; u < units; u += tpg * ngroups) {
      uint end = min(pairs, (u + 1u) * MSL_LANES);
      for (uint i = u * MSL_LANES; i < end; i++) {
        uint c = i >> log_half;
        uint y = i & half_mask;
        uint src = c * ss + 4u * y;
        uint dst = c * ds + 2u * y;
        bb4 f0 = sc_lerp(bb4_load_aligned(f, src), bb4_load_aligned(f, src + 1u), alpha);
        bb4 f1 = sc_lerp(bb4_load_aligned(f, src + 2u), bb4_load_aligned(f, src + 3u), alpha);
        bb4 w0 = sc_lerp(bb4_load_aligned(w, src), bb4_load_aligned(w, src + 1u), alpha);
        bb4 w1 = sc_lerp(bb4_load_aligned(w, src + 2u), bb4_load_aligned(w, src + 3u), alpha);
        bb4_store_aligned(f_out, dst, f0);
        bb4_store_aligned(f_out, dst + 1u, f1);
        bb4_store_aligned(w_out, dst, w0);
        bb4_store_aligned(w_out, dst + 1u, w1);
        sc_pair_terms(f0, f1, w0, w1, s1, s2);
      }
    }
  }
  sc_group_reduce_pair(s1, s2, scratch, partials, tid, tpg, group);
}

#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE && MSL_LANES == 16u
// sc_fold's host path: a lane vector holds four Fp4 values side by side (their 16 words, as in
// memory), so rows are loaded and stored whole. α·v for four values: coefficient c of α·v is
// Σ_j α_j·v_{c−j} (times W when j > c), i.e. Σ_j A_j ⊙ rot_j(v), rot_j moving each value's
// coefficients by j (lanes_quad_rot_j, babybear.h) and A_j holding α_j or W·α_j per coefficient.

// Rows 4k .. 4k+3 of every column (2^log_rows ≥ 4 rows after the fold): pairs (2y, 2y+1) are split
// into even and odd values by two shuffles, folded, and stored as one vector.
MSL_FN void sc_fold_host(device const uint* src, device uint* dst, uint log_rows, uint total, uint ss, uint ds,
                         bb4 alpha, uint gid, uint stride) {
  uint mask = (1u << log_rows) - 1u;
  lanes_uint a[4];
  for (uint j = 0u; j < 4u; j++) {
    uint aw = bb_mul(alpha[j], BB4_W_MONT);
    uint t[MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) t[l] = j <= l % 4u ? alpha[j] : aw;
    a[j] = lanes_ld_th(t);
  }
  uint first = (gid & 3u) == 0u ? gid : total;
  uint step = (stride + 3u) & ~3u;
  for (uint i0 = first; i0 < total; i0 += step) {
    uint c = i0 >> log_rows;
    uint y = i0 & mask;
    device const uint* s = src + 4u * (c * ss + 2u * y);
    lanes_uint v0 = lanes_ld_dev(s);
    lanes_uint v1 = lanes_ld_dev(s + MSL_LANES);
    lanes_uint e = lanes_quads_even(v0, v1);
    lanes_uint o = lanes_quads_odd(v0, v1);
    lanes_uint d = bb_sub_lanes(o, e);
    lanes_uint r = bb_add_lanes(bb_mul_lanes(a[0], d), bb_mul_lanes(a[1], lanes_quad_rot1(d)));
    r = bb_add_lanes(r, bb_add_lanes(bb_mul_lanes(a[2], lanes_quad_rot2(d)), bb_mul_lanes(a[3], lanes_quad_rot3(d))));
    lanes_st_dev(dst + 4u * (c * ds + y), bb_add_lanes(e, r));
  }
}
#endif

struct ScFoldParams {
  uint log_rows;    // log2 of the rows after the fold (the source has twice as many)
  uint cols;        // columns
  uint src_stride;  // column stride of src
  uint dst_stride;  // column stride of dst
  uint a0, a1, a2, a3;  // α, Montgomery
  uint alpha_at;    // SC_ALPHA_PARAM: α is a0..a3; else the Fp4 index of α in alphas (a device
                    // transcript's log)
};

// dst[c·dst_stride + y] = src[c·src_stride + 2y] + α·(src[.. + 2y+1] − src[.. + 2y]) for every
// column c and y < 2^log_rows (foldTable out of place). dst must not overlap src.
kernel void sc_fold(device const uint* src [[buffer(0)]],
                    device uint* dst [[buffer(1)]],
                    device const uint* alphas [[buffer(2)]],
                    constant ScFoldParams& p [[buffer(3)]],
                    uint gid [[thread_position_in_grid]],
                    uint stride [[threads_per_grid]]) {
  uint log_rows = p.log_rows;
  uint mask = (1u << log_rows) - 1u;
  uint total = p.cols << log_rows;
  uint ss = p.src_stride;
  uint ds = p.dst_stride;
  bb4 alpha = p.alpha_at == SC_ALPHA_PARAM ? sc_alpha(p.a0, p.a1, p.a2, p.a3) : bb4_load_aligned(alphas, p.alpha_at);
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE && MSL_LANES == 16u
  if (log_rows >= 2u) {
    // Host device: four rows per step as one lane vector (the scalar loop below is several times
    // slower on a CPU).
    sc_fold_host(src, dst, log_rows, total, ss, ds, alpha, gid, stride);
    return;
  }
#endif
  for (uint i = gid; i < total; i += stride) {
    uint c = i >> log_rows;
    uint y = i & mask;
    uint at = c * ss + 2u * y;
    bb4_store_aligned(dst, c * ds + y, sc_lerp(bb4_load_aligned(src, at), bb4_load_aligned(src, at + 1u), alpha));
  }
}

struct ScSumRowsParams {
  uint rows;     // rows to add
  uint width;    // uints per row
  uint out_off;  // index of out's first word
};

// out[out_off + k] = Σ_{r < rows} in[r·width + k] (BabyBear sums, each uint on its own) for k < width: the
// second pass of every reduction of this family (run it as a single group). When tpg ≥ width,
// thread t < R·width (R = tpg / width) adds column t mod width over the rows ≡ t / width (mod R)
// and the first width threads add the R part sums; otherwise each thread adds whole columns, tpg
// at a time. scratch: 4 bytes per thread.
// out[out_off + k] = Σ_{r0 ≤ r < r1} in[r·width + k] for k < width, by one group (the body of
// sc_sum_rows and sc_sum_row_blocks).
MSL_FN void sc_sum_rows_range(device const uint* in, device uint* out, uint r0, uint r1, uint width, uint out_off,
                              threadgroup uint* scratch, uint tid, uint tpg) {
  uint lanes = tpg >= width ? tpg / width : 1u;  // R
  uint cols = min(width, tpg);                    // columns per block
  for (uint k0 = 0u; k0 < width; k0 += cols) {
    uint k = k0 + tid % cols;
    uint acc = 0u;
    if (tid < lanes * cols && k < width) {
      // Four independent sums: a thread has four loads in flight rather than one (a long column
      // is otherwise one memory latency per row).
      uint acc1 = 0u, acc2 = 0u, acc3 = 0u;
      uint r = r0 + tid / cols;
      for (; r + 3u * lanes < r1; r += 4u * lanes) {
        acc = bb_add(acc, in[r * width + k]);
        acc1 = bb_add(acc1, in[(r + lanes) * width + k]);
        acc2 = bb_add(acc2, in[(r + 2u * lanes) * width + k]);
        acc3 = bb_add(acc3, in[(r + 3u * lanes) * width + k]);
      }
      for (; r < r1; r += lanes) acc = bb_add(acc, in[r * width + k]);
      acc = bb_add(bb_add(acc, acc1), bb_add(acc2, acc3));
    }
    scratch[tid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < cols && k < width) {
      uint s = 0u;
      for (uint j = 0u; j < lanes; j++) s = bb_add(s, scratch[j * cols + tid]);
      out[out_off + k] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

kernel void sc_sum_rows(device const uint* in [[buffer(0)]],
                        device uint* out [[buffer(1)]],
                        constant ScSumRowsParams& p [[buffer(2)]],
                        threadgroup uint* scratch [[threadgroup(0)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint tpg [[threads_per_threadgroup]]) {
  sc_sum_rows_range(in, out, 0u, p.rows, p.width, p.out_off, scratch, tid, tpg);
}

struct ScSumBlocksParams {
  uint rows;   // rows to add
  uint width;  // uints per row
  uint chunk;  // rows per group
};

// out[g·width + k] = Σ of rows [g·chunk, min((g+1)·chunk, rows)) of in, for each group g: the
// first level of a two-level sum of many rows (one group alone reads them at one compute unit's
// bandwidth), whose second level is sc_sum_rows over the groups' rows.
kernel void sc_sum_row_blocks(device const uint* in [[buffer(0)]],
                              device uint* out [[buffer(1)]],
                              constant ScSumBlocksParams& p [[buffer(2)]],
                              threadgroup uint* scratch [[threadgroup(0)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint tpg [[threads_per_threadgroup]],
                              uint group [[threadgroup_position_in_grid]]) {
  uint r0 = group * p.chunk;
  uint r1 = min(r0 + p.chunk, p.rows);
  sc_sum_rows_range(in, out, r0, max(r0, r1), p.width, group * p.width, scratch, tid, tpg);
}

struct ScEqExpandParams {
  uint log_lo;      // h: bits taken from lo
  uint log_total;   // k: out has 2^k entries (k ≥ h)
  uint count;       // tensor products summed (≥ 1)
  uint accumulate;  // 1: add to out; 0: overwrite
  uint lo_off;      // Fp4 index of lo's first entry
  uint hi_off;      // Fp4 index of hi's first entry
  uint out_off;     // Fp4 index of out's first entry
};

// out[b] (+)= Σ_{t < count} lo[t·2^h + (b mod 2^h)]·hi[t·2^(k−h) + (b >> h)] for b < 2^k (each
// table from its offset). With lo = eq(r_1..r_h, ·) and hi = eq(r_{h+1}..r_k, ·) (bit i of an
// index ↔ r_{i+1}, stark.EvalsEqHypercube) this is eq(r_1..r_k, ·); any table that factors over
// the bits of its index (the Möbius eq of WHIR, a scaled eq) works the same way, and count > 1
// sums several.
kernel void sc_eq_expand(device const uint* lo [[buffer(0)]],
                         device const uint* hi [[buffer(1)]],
                         device uint* out [[buffer(2)]],
                         constant ScEqExpandParams& p [[buffer(3)]],
                         uint gid [[thread_position_in_grid]],
                         uint stride [[threads_per_grid]]) {
  uint h = p.log_lo;
  uint k = p.log_total;
  uint count = p.count;
  uint acc_out = p.accumulate;
  uint lo_off = p.lo_off;
  uint hi_off = p.hi_off;
  uint out_off = p.out_off;
  uint total = 1u << k;
  uint lo_len = 1u << h;
  uint hi_len = 1u << (k - h);
#if MSL_LANES > 1
  // The host: MSL_LANES consecutive b share their hi entry (h ≥ log2 lanes), so a lane vector of
  // lo entries takes one uniform hi product (16 vector products for MSL_LANES Fp4 products).
  if (h >= MSL_LOG_LANES) {
    for (uint b0 = lane_first(gid, total); b0 < total; b0 += lane_stride(stride)) {
      uint tmp[4u * MSL_LANES];
      lanes_uint acc[4];
      for (uint c = 0u; c < 4u; c++) acc[c] = lanes_splat(0u);
      if (acc_out != 0u) {
        for (uint l = 0u; l < MSL_LANES; l++) {
          for (uint c = 0u; c < 4u; c++) tmp[c * MSL_LANES + l] = out[4u * (out_off + b0 + l) + c];
        }
        for (uint c = 0u; c < 4u; c++) acc[c] = lanes_ld_th(tmp + c * MSL_LANES);
      }
      uint bl = lo_off + (b0 & (lo_len - 1u));
      uint bh = hi_off + (b0 >> h);
      for (uint t = 0u; t < count; t++) {
        lanes_uint g[4];
        for (uint l = 0u; l < MSL_LANES; l++) {
          for (uint c = 0u; c < 4u; c++) tmp[c * MSL_LANES + l] = lo[4u * (t * lo_len + bl + l) + c];
        }
        for (uint c = 0u; c < 4u; c++) g[c] = lanes_ld_th(tmp + c * MSL_LANES);
        lanes_uint u[7];
        bb4l_uniform_of(u, bb4_load_aligned(hi, t * hi_len + bh));
        bb4l_mul_uniform_acc(acc, u, g);
      }
      for (uint l = 0u; l < MSL_LANES; l++) {
        for (uint c = 0u; c < 4u; c++) out[4u * (out_off + b0 + l) + c] = lanes_get(acc[c], l);
      }
    }
    return;
  }
#endif
  for (uint b = gid; b < total; b += stride) {
    bb4 acc = acc_out != 0u ? bb4_load_aligned(out, out_off + b) : bb4_zero();
    uint bl = lo_off + (b & (lo_len - 1u));
    uint bh = hi_off + (b >> h);
    for (uint t = 0u; t < count; t++) {
      acc = bb4_add(acc, bb4_mul(bb4_load_aligned(lo, t * lo_len + bl), bb4_load_aligned(hi, t * hi_len + bh)));
    }
    bb4_store_aligned(out, out_off + b, acc);
  }
}

struct ScEqHalvesParams {
  uint n;           // coordinates of the point (x[0..n))
  uint halves_off;  // Fp4 index of table 0's lo half in halves
};

// The halves that sc_eq_suffixes reads (kernels.EncodeEqSuffixHalves), from the point's
// coordinates x on the device, an entry a thread: entry b of lo_j is the product over i < h of
// x_{j+i} where bit i of b is set, else 1 − x_{j+i}; of hi_j the same over x_{j+h}..x_{n−1},
// h = ⌊(n−j)/2⌋ (kernels.EqTables of x[j:], as the tests' eqSuffixHalves makes them). The
// host made them for up to 2^17-entry tables in ≈ 0.2 ms between the GKR stage's sync and the
// constraint stage's first kernel; here they take a few thousand short products.
kernel void sc_eq_suffix_halves(device const uint* x [[buffer(0)]],
                                device uint* halves [[buffer(1)]],
                                constant ScEqHalvesParams& p [[buffer(2)]],
                                uint gid [[thread_position_in_grid]],
                                uint stride [[threads_per_grid]]) {
  uint n = p.n;
  uint total = 0u;
  for (uint m = 0u; m <= n; m++) total += (1u << (m / 2u)) + (1u << (m - m / 2u));
  for (uint e = gid; e < total; e += stride) {
    uint j = 0u;
    uint off = 0u;
    for (;;) {
      uint m = n - j;
      uint size = (1u << (m / 2u)) + (1u << (m - m / 2u));
      if (e < off + size) break;
      off += size;
      j++;
    }
    uint m = n - j;
    uint h = m / 2u;
    uint b = e - off;
    uint first = j;
    uint count = h;
    if (b >= (1u << h)) {
      first = j + h;
      count = m - h;
      b -= 1u << h;
    }
    bb4 v = bb4_one();
    for (uint i = 0u; i < count; i++) {
      bb4 xi = bb4_load_aligned(x, first + i);
      v = bb4_mul(v, ((b >> i) & 1u) != 0u ? xi : bb4_sub(bb4_one(), xi));
    }
    bb4_store_aligned(halves, p.halves_off + e, v);
  }
}

struct ScEqSuffixParams {
  uint n;           // coordinates of the point: tables j = 0..n
  uint halves_off;  // Fp4 index of table 0's lo half in halves
  uint out_off;     // Fp4 index of table 0's first entry in out
};

// The eq tables of every suffix of a point r of n coordinates in one dispatch (a launch each cost
// the host more than the device spent on them): table j = eq(r_j..r_{n−1}, ·), 2^(n−j) entries,
// j = 0..n (the last is the one entry 1), at out_off + 2^(n+1) − 2^(n−j+1); each entry the product
// of table j's halves lo_j = eq(r_j..r_{j+h−1}, ·) and hi_j = eq(r_{j+h}..r_{n−1}, ·) with
// h = ⌊(n−j)/2⌋ (kernels.EqTables), laid out in halves from halves_off as lo_0, hi_0, lo_1, ….
kernel void sc_eq_suffixes(device const uint* halves [[buffer(0)]],
                           device uint* out [[buffer(1)]],
                           constant ScEqSuffixParams& p [[buffer(2)]],
                           uint gid [[thread_position_in_grid]],
                           uint stride [[threads_per_grid]]) {
  uint n = p.n;
  uint total = (2u << n) - 1u;
  for (uint e = gid; e < total; e += stride) {
    uint v = (2u << n) - e;  // table j holds the e with 2^(n−j) < v ≤ 2^(n−j+1)
    uint k = 0u;
    while ((2u << k) < v) k++;
    uint j = n - k;
    uint b = (2u << k) - v;  // the entry within table j
    uint off = p.halves_off;
    for (uint i = 0u; i < j; i++) {
      uint m = n - i;
      off += (1u << (m / 2u)) + (1u << (m - m / 2u));
    }
    uint h = k / 2u;
    bb4 lo = bb4_load_aligned(halves, off + (b & ((1u << h) - 1u)));
    bb4 hi = bb4_load_aligned(halves, off + (1u << h) + (b >> h));
    bb4_store_aligned(out, p.out_off + e, bb4_mul(lo, hi));
  }
}
