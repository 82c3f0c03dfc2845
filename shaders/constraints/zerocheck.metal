// zerocheck.metal - the batch constraint sumcheck (zerocheck and LogUp numerators/denominators,
// spec B §4; internal/kernels/zerocheck.go has the math and the buffer preconditions). Every kernel
// evaluates one AIR's constraint program (program_lanes.h) on values it computes itself:
//
//   zc_coeffs        round 0, pre-pass: the coefficients of every block of N = 2^l rows of the
//                    source columns (the trace columns whose local or rotated slot the program
//                    reads) and each block's rotation correction δ = v_next − v_first.
//   zc_uni_eval      round 0: the slot values at the M points ω_M^i of every block (from the
//                    coefficients), the program, the batched combination weighted by e(x), summed
//                    per point i into partial rows (sc_sum_rows adds them).
//   zc_bind_uni      BindUnivariate: t(r0, x) = Σ_j w_j·t(ω^j, x) of every column and rotation.
//   zc_bind_selectors  the same for the three selector columns (closed forms).
//   zc_round_eval    rounds j ≥ 1: slot values t[2y] + X·(t[2y+1] − t[2y]) for X = 1..d+1, the
//                    program over Fp4, the combination weighted by e'(y), summed per X (lanes across
//                    pairs and X, so the last rounds' few pairs still fill the lanes).
//   zc_uni_values    round 0 on GPUs, program in pieces: a slice's slot values at every point (coset
//                    DFTs of the coefficients in group memory), a table [slot][point];
//   zc_uni_pieces    then work items (piece, point): the piece's slots copied from the table, the
//                    piece, the combination weighted by e(x), summed per point class.
//   zc_round_pieces  the rounds with the program split into pieces (constraints.Split): work items
//                    (piece, pair, X), so that a round with few pairs still has enough threads, each
//                    walking a piece (a few hundred instructions) instead of the whole program.
//   zc_tr_round      a round's transcript step on the device (one group): the traces' sums
//                    combined into the stage's s_j, observed, r_j sampled, the claims moved to r_j.
// zerocheck_pieces.metal holds zc_uni_pieces' counterpart for the code generated per AIR at run
// time (zc_uni_generated, a module template), sharing zc_uni.h with this file.
//
// The program runs through an evaluator given as a template parameter (ProgInterpreter of
// program_lanes.h): the kernel bodies are templates, the kernels instantiate them with the
// interpreter; a generated evaluator for one AIR gets its own kernels from the same bodies (round
// 0's body, zc_uni_body, lives in zc_uni_body.h for that: the module template zerocheck_whole.metal
// instantiates it with the straight-line code written per AIR at run time, zc_uni_whole).
//
// Scratch (slot values and registers of the evaluator), laid out as the launcher says
// (interleave): on the host device every thread owns a contiguous region (its lanes' values side
// by side, [entry][lane]: the evaluator's working set stays in the core's caches; interleave 0); on
// GPUs the threads are interleaved ([entry][thread][lane]: neighbouring threads touch neighbouring
// words; interleave 1). zc_region gives a region's first word; within it entry e of lane l is at
// e·T + t + l (T = zc_T, t = zc_t). No barriers, no atomics: partial sums are per-thread rows,
// added by sc_sum_rows (two passes, deterministic).
#include "poseidon2_group.h"
#include "program_lanes.h"
#include "zc_uni_body.h"

// Whether zc_load_rows can load n consecutive rows of every lane: host device, 16 lanes, n a
// multiple of 16 (the rows of a block lie side by side when h ≥ N).
MSL_FN bool zc_rows_by_vectors(uint n, uint h) {
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE && MSL_LANES == 16u
  return n >= 16u && n % 16u == 0u && h >= n;
#else
  return false;
#endif
}

// v[j] (j < n), lane l = p[offs[l] + j]: n consecutive words of each lane's run, loaded 16 at a
// time and transposed 16×16 (zc_rows_by_vectors must hold; the runs must not wrap).
MSL_FN void zc_load_rows(thread lanes_uint* v, device const uint* p, thread const uint* offs, uint n) {
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE && MSL_LANES == 16u
  for (uint m = 0u; m < n; m += 16u) {
    for (uint l = 0u; l < 16u; l++) v[m + l] = lanes_ld_dev(p + offs[l] + m);
    lanes_transpose(v + m);
  }
#endif
}

// ------------------------------------------------------------------------------------------------
// Round 0, pre-pass.

struct ZcCoeffsParams {
  uint log_h;         // the part has h = 2^log_h rows (column c at c·h), canonical values
  uint log_n;         // N = 2^log_n rows per block
  uint log_m;         // M = 2^log_m (the twiddle table's size)
  uint x0;            // first block of the slice (blocks of the lifted height N·X, periodic)
  uint slice_blocks;  // blocks of the slice: coefs and deltas hold them from block 0
  uint col0;          // first source column of this part (a multiple of MSL_LANES)
  uint count;         // source columns of this part
  uint ncols;         // row length of coefs and deltas (source columns of all parts, padded)
  uint lanes;         // MSL_LANES the launcher assumed (the kernel does nothing on a mismatch)
};

// For block x = x0 + xl of the slice and source column s = col0 + c (c < count; part column
// part_cols[s]): coefs[(xl·N + k)·ncols + s] = c_k·σ^k, the coefficients of the block's
// interpolant over the N-th roots of unity twisted by the domain's shift σ (Montgomery: scale[k] =
// σ^k/N·R² mod p multiplies the canonical IDFT outputs), so that the round-0 kernels' values at
// ω_M^i are the interpolant's at σ·ω_M^i; and deltas[xl·ncols + s] = v_next − v_first (the first
// value of the next block, cyclically, minus the block's first). Block rows are x·N + j mod h.
// Padding columns (c ≥ count, up to the next multiple of MSL_LANES) get unspecified values (no slot
// reads them).
kernel void zc_coeffs(device const uint* values [[buffer(0)]],
                      device const uint* part_cols [[buffer(1)]],
                      device const uint* tw [[buffer(2)]],
                      device const uint* scale [[buffer(3)]],
                      device uint* coefs [[buffer(4)]],
                      device uint* deltas [[buffer(5)]],
                      constant ZcCoeffsParams& p [[buffer(6)]],
                      uint gid [[thread_position_in_grid]],
                      uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint log_h = p.log_h;
  uint hmask = (1u << log_h) - 1u;
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint mmask = (1u << p.log_m) - 1u;
  uint step = 1u << (p.log_m - log_n);
  uint x0 = p.x0;
  uint col0 = p.col0;
  uint count = p.count;
  uint ncols = p.ncols;
  uint cgroups = (count + MSL_LANES - 1u) / MSL_LANES;
  uint items = p.slice_blocks * cgroups;
  for (uint it = gid; it < items; it += G) {
    uint xl = it / cgroups;
    uint c = (it % cgroups) * MSL_LANES;
    uint x = x0 + xl;
    uint base[MSL_LANES];
    bool live[MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) {
      live[l] = c + l < count;
      base[l] = live[l] ? part_cols[col0 + c + l] << log_h : 0u;
    }
    lanes_uint v[ZC_MAX_N];
    uint tmp[MSL_LANES];
    if (zc_rows_by_vectors(n, hmask + 1u)) {
      for (uint l = 0u; l < MSL_LANES; l++) tmp[l] = (live[l] ? base[l] : base[0]) + (x << log_n);
      zc_load_rows(v, values, tmp, n);
    } else {
      for (uint j = 0u; j < n; j++) {
        uint row = ((x << log_n) + j) & hmask;
        for (uint l = 0u; l < MSL_LANES; l++) tmp[l] = live[l] ? values[base[l] + row] : 0u;
        v[j] = lanes_ld_th(tmp);
      }
    }
    uint next = ((x + 1u) << log_n) & hmask;
    for (uint l = 0u; l < MSL_LANES; l++) tmp[l] = live[l] ? values[base[l] + next] : 0u;
    lanes_uint delta = bb_mul_lanes(bb_sub_lanes(lanes_ld_th(tmp), v[0]), lanes_splat(BB_R2));
    lanes_st_dev(deltas + xl * ncols + col0 + c, delta);
    zc_dft(v, log_n, tw, mmask, step, true);
    for (uint k = 0u; k < n; k++) {
      lanes_st_dev(coefs + ((xl << log_n) + k) * ncols + col0 + c, bb_mul_lanes(v[k], lanes_splat(scale[k])));
    }
  }
}

// zc_coeffs on GPUs, through group memory: a group takes tiles of ZC_TILE_COLS source columns × TB
// blocks (TB = tpg / ZC_TILE_COLS, TB·N ≤ 256 rows), reads the tile's TB·N + 1 rows of each column
// with neighbouring threads on neighbouring rows (coalesced; zc_coeffs' thread reads its own 16
// words of a column 128 KiB away from its neighbour's), then thread (block, column) takes its N
// values from group memory (row stride TB·N + 1: an odd stride, so the threads of a SIMD group
// fall in distinct banks) and writes what zc_coeffs writes. Lanes are not used (a host device
// posing as a GPU in tests runs lane 0). sh: ZC_TILE_COLS·(TB·N + 1) words.
#define ZC_TILE_COLS 16u
kernel void zc_coeffs_tiles(device const uint* values [[buffer(0)]],
                            device const uint* part_cols [[buffer(1)]],
                            device const uint* tw [[buffer(2)]],
                            device const uint* scale [[buffer(3)]],
                            device uint* coefs [[buffer(4)]],
                            device uint* deltas [[buffer(5)]],
                            constant ZcCoeffsParams& p [[buffer(6)]],
                            threadgroup uint* sh [[threadgroup(0)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint group [[threadgroup_position_in_grid]],
                            uint tpg [[threads_per_threadgroup]],
                            uint ngroups [[threadgroups_per_grid]]) {
  uint log_h = p.log_h;
  uint hmask = (1u << log_h) - 1u;
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint mmask = (1u << p.log_m) - 1u;
  uint step = 1u << (p.log_m - log_n);
  uint x0 = p.x0;
  uint col0 = p.col0;
  uint count = p.count;
  uint ncols = p.ncols;
  uint sb = p.slice_blocks;
  uint tb = tpg / ZC_TILE_COLS;  // blocks per tile
  uint rows = tb * n + 1u;       // rows per tile and column (the next block's first row included)
  uint xtiles = (sb + tb - 1u) / tb;
  uint tiles = xtiles * ((count + ZC_TILE_COLS - 1u) / ZC_TILE_COLS);
  uint cl = tid % ZC_TILE_COLS;  // this thread's column and block in a tile
  uint bl = tid / ZC_TILE_COLS;
  for (uint tile = group; tile < tiles; tile += ngroups) {
    uint c0 = (tile / xtiles) * ZC_TILE_COLS;
    uint xl0 = (tile % xtiles) * tb;
    uint row0 = (x0 + xl0) << log_n;
    for (uint i = tid; i < ZC_TILE_COLS * rows; i += tpg) {
      uint c = i / rows;
      uint r = i - c * rows;
      sh[c * rows + r] = c0 + c < count ? values[(part_cols[col0 + c0 + c] << log_h) + ((row0 + r) & hmask)] : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint c = c0 + cl;
    uint xl = xl0 + bl;
    if (bl < tb && c < count && xl < sb) {
      lanes_uint v[ZC_MAX_N];
      threadgroup const uint* col = sh + cl * rows + bl * n;
      for (uint j = 0u; j < n; j++) v[j] = lanes_splat(col[j]);
      uint first = col[0];
      deltas[xl * ncols + col0 + c] = bb_mul(bb_sub(col[n], first), BB_R2);
      zc_dft(v, log_n, tw, mmask, step, true);
      for (uint k = 0u; k < n; k++) {
        coefs[((xl << log_n) + k) * ncols + col0 + c] = bb_mul(lanes_get(v[k], 0u), scale[k]);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// ------------------------------------------------------------------------------------------------
// Round 0 (zc_uni_body.h: the parameters, the slot values, the body).

// Round 0 with the bytecode interpreter (zc_uni_body). weights: Montgomery Fp4 per output, then
// the constant denominator term.
kernel void zc_uni_eval(device const uint* prog [[buffer(0)]],
                        device const uint* cp [[buffer(1)]],
                        device const uint* kinds [[buffer(2)]],
                        device const uint* weights [[buffer(3)]],
                        device const uint* coefs [[buffer(4)]],
                        device const uint* deltas [[buffer(5)]],
                        device const uint* srcmap [[buffer(6)]],
                        device const uint* tw [[buffer(7)]],
                        device const uint* lrow [[buffer(8)]],
                        device const uint* sel [[buffer(9)]],
                        device const uint* eq [[buffer(10)]],
                        device uint* slots [[buffer(11)]],
                        device uint* regs [[buffer(12)]],
                        device uint* partials [[buffer(13)]],
                        constant ZcUniParams& p [[buffer(14)]],
                        uint gid [[thread_position_in_grid]],
                        uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  ProgInterpreter ev;
  zc_uni_body(ev, prog, cp, kinds, weights, coefs, deltas, srcmap, tw, lrow, sel, eq, slots, regs, partials, p, gid, G);
}

// ------------------------------------------------------------------------------------------------
// BindUnivariate.

struct ZcBindParams {
  uint log_h;   // the part has h = 2^log_h rows (canonical values, column c at c·h)
  uint log_n;   // N = 2^log_n
  uint blocks;  // X: blocks of the lifted trace (tables have X rows)
  uint width;   // columns of the part
  uint stride;  // Fp4 index distance between tables
  uint lanes;   // MSL_LANES the launcher assumed
  uint wide;    // 1: one block a work item, products summed in 64 bits (the GPU plan); 0: lanes
};

// tables[τ·stride + x] = Σ_{j<N} w_j·v[(x·N + j) mod h] for τ = colmap[2c] (column c), and with
// v[(x·N + j + 1) mod h] for τ = colmap[2c + 1] (its rotation; ZC_NONE: none). w: N Fp4 weights in
// R²-scaled Montgomery form (w·R² mod p per coefficient), so the canonical trace values need no
// conversion. Lanes across consecutive blocks x; or (wide) one block x a work item, the products
// summed four at a time in 64 bits and reduced once (bb_redc_wide: 4p² < 2p·2^32): a Montgomery
// product and a modular addition a term cost about nine instructions, a multiply-add one
// (keccakf-1024 on an H200: the lanes' loop was issue-bound at 415 µs for 0.5 GB of traffic).
kernel void zc_bind_uni(device const uint* values [[buffer(0)]],
                        device const uint* w [[buffer(1)]],
                        device const uint* colmap [[buffer(2)]],
                        device uint* tables [[buffer(3)]],
                        constant ZcBindParams& p [[buffer(4)]],
                        uint gid [[thread_position_in_grid]],
                        uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint log_h = p.log_h;
  uint hmask = (1u << log_h) - 1u;
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint X = p.blocks;
  uint stride = p.stride;
  if (p.wide != 0u) {
    uint items = p.width * X;
    for (uint it = gid; it < items; it += G) {
      uint c = it / X;
      uint x = it - c * X;
      uint tl = colmap[2u * c];
      uint tr = colmap[2u * c + 1u];
      device const uint* col = values + (c << log_h);
      uint base = x << log_n;
      uint accl[4];
      uint accr[4];
      for (uint k = 0u; k < 4u; k++) {
        accl[k] = 0u;
        accr[k] = 0u;
      }
      // Groups of g = min(4, N) rows: v0..v3 the group's values (0 past g), v4 the row after it
      // (the rotation's last term); weights past g are 0, so the unused terms vanish.
      for (uint i = 0u; i < n; i += 4u) {
        uint g = min(4u, n - i);
        uint v0, v1, v2, v3;
        if (g == 4u && hmask >= 3u) {  // four rows in one 16-byte load on GPUs (aligned: 4 | base + i, 4 | h)
          bb4 q4 = bb4_load_aligned(col, ((base + i) & hmask) >> 2);
          v0 = q4[0];
          v1 = q4[1];
          v2 = q4[2];
          v3 = q4[3];
        } else {
          v0 = col[(base + i) & hmask];
          v1 = g > 1u ? col[(base + i + 1u) & hmask] : 0u;
          v2 = g > 2u ? col[(base + i + 2u) & hmask] : 0u;
          v3 = g > 3u ? col[(base + i + 3u) & hmask] : 0u;
        }
        uint v4 = col[(base + i + g) & hmask];
        uint r0 = g > 1u ? v1 : v4;
        uint r1 = g > 2u ? v2 : v4;
        uint r2 = g > 3u ? v3 : v4;
        for (uint k = 0u; k < 4u; k++) {
          uint w0 = w[4u * i + k];
          uint w1 = g > 1u ? w[4u * (i + 1u) + k] : 0u;
          uint w2 = g > 2u ? w[4u * (i + 2u) + k] : 0u;
          uint w3 = g > 3u ? w[4u * (i + 3u) + k] : 0u;
          accl[k] = bb_add(accl[k], bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(w0, v0), w1, v1), w2, v2), w3, v3)));
          if (tr != ZC_NONE) {
            accr[k] = bb_add(accr[k], bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(w0, r0), w1, r1), w2, r2), w3, v4)));
          }
        }
      }
      if (tl != ZC_NONE) bb4_store_aligned(tables, tl * stride + x, bb4_make(accl[0], accl[1], accl[2], accl[3]));
      if (tr != ZC_NONE) bb4_store_aligned(tables, tr * stride + x, bb4_make(accr[0], accr[1], accr[2], accr[3]));
    }
    return;
  }
  uint xgroups = (X + MSL_LANES - 1u) / MSL_LANES;
  uint items = p.width * xgroups;
  for (uint it = gid; it < items; it += G) {
    uint c = it / xgroups;
    uint x0 = (it % xgroups) * MSL_LANES;
    uint tl = colmap[2u * c];
    uint tr = colmap[2u * c + 1u];
    device const uint* col = values + (c << log_h);
    bb4l accl = bb4l_zero();
    bb4l accr = bb4l_zero();
    uint tmp[MSL_LANES];
    bool by_vectors = zc_rows_by_vectors(n, hmask + 1u);
    lanes_uint rows[ZC_MAX_N];
    if (by_vectors) {
      for (uint l = 0u; l < MSL_LANES; l++) tmp[l] = min(x0 + l, X - 1u) << log_n;
      zc_load_rows(rows, col, tmp, n);
    }
    for (uint j = 0u; j <= n; j++) {
      lanes_uint v;
      if (by_vectors && j < n) {
        v = rows[j];
      } else {
        for (uint l = 0u; l < MSL_LANES; l++) {
          uint x = min(x0 + l, X - 1u);
          tmp[l] = col[((x << log_n) + j) & hmask];
        }
        v = lanes_ld_th(tmp);
      }
      if (j < n) accl = bb4l_add(accl, bb4l_scale(bb4_load(w, j), v));
      if (j > 0u && tr != ZC_NONE) accr = bb4l_add(accr, bb4l_scale(bb4_load(w, j - 1u), v));
    }
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint x = x0 + l;
      if (x >= X) break;
      if (tl != ZC_NONE) bb4_store(tables, tl * stride + x, bb4l_get(accl, l));
      if (tr != ZC_NONE) bb4_store(tables, tr * stride + x, bb4l_get(accr, l));
    }
  }
}

struct ZcBindSelParams {
  uint blocks;   // X
  uint stride;   // Fp4 index distance between tables
  uint t_first;  // tables of is_first, is_last, is_transition
  uint t_last;
  uint t_trans;
  uint f0, f1, f2, f3;  // is_first at x = 0 (Montgomery Fp4)
  uint l0, l1, l2, l3;  // is_last at x = X−1
  uint s0, s1, s2, s3;  // Σ_j w_j: is_transition = Σ_j w_j − is_last
};

// The bound selector tables: is_first[x] = [x = 0]·F, is_last[x] = [x = X−1]·L, is_transition[x] =
// S − is_last[x].
kernel void zc_bind_selectors(device uint* tables [[buffer(0)]],
                              constant ZcBindSelParams& p [[buffer(1)]],
                              uint gid [[thread_position_in_grid]],
                              uint G [[threads_per_grid]]) {
  uint X = p.blocks;
  uint stride = p.stride;
  bb4 f = bb4_make(p.f0, p.f1, p.f2, p.f3);
  bb4 l = bb4_make(p.l0, p.l1, p.l2, p.l3);
  bb4 s = bb4_make(p.s0, p.s1, p.s2, p.s3);
  for (uint x = gid; x < X; x += G) {
    bb4 last = x == X - 1u ? l : bb4_zero();
    bb4_store(tables, p.t_first * stride + x, x == 0u ? f : bb4_zero());
    bb4_store(tables, p.t_last * stride + x, last);
    bb4_store(tables, p.t_trans * stride + x, bb4_sub(s, last));
  }
}

// ------------------------------------------------------------------------------------------------
// Rounds j ≥ 1.

struct ZcRoundParams {
  uint log_rows;  // n ≥ 1: the tables have 2^n rows (pairs y < 2^(n−1))
  uint stride;    // Fp4 index distance between tables
  uint nused;     // entries of used
  uint nslots;    // the program's slots
  uint nregs;     // the program's registers
  uint points;    // d + 1: evaluation points X = 1..d+1
  uint has_den;
  uint nout;
  uint eq_off;      // Fp4 index of e'(0) in eq
  uint interleave;  // scratch layout, as in ZcUniParams
  uint lanes;       // MSL_LANES the launcher assumed
};

// Rounds j ≥ 1: the slot values of lane group u (work items f = u·MSL_LANES + lane, f < total;
// the last group's spare lanes repeat item total − 1): for the used slots (used[2k] = s, used[2k+1] =
// table τ, k < nused) t_τ[2y] + X·(t_τ[2y+1] − t_τ[2y]) at slot s of the scratch at sbase, with
// (y, X − 1) of each lane in ys, xs.
MSL_FN void zc_round_fill(uint u, uint total, uint npts, device const uint* used, uint nused, device const uint* tables,
                          uint stride, device uint* sbase, uint t, uint T, thread uint* ys, thread uint* xs) {
  uint xm[MSL_LANES];
  for (uint l = 0u; l < MSL_LANES; l++) {
    uint f = min(u * MSL_LANES + l, total - 1u);
    ys[l] = f / npts;
    xs[l] = f - ys[l] * npts;  // X − 1
    xm[l] = bb_to_mont(xs[l] + 1u);
  }
  lanes_uint xv = lanes_ld_th(xm);
  for (uint k = 0u; k < nused; k++) {
    device const uint* tab = tables + 4u * used[2u * k + 1u] * stride;
    uint ta[4][MSL_LANES];
    uint tb[4][MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) {
      device const uint* pr = tab + 8u * ys[l];
      for (uint c = 0u; c < 4u; c++) {
        ta[c][l] = pr[c];
        tb[c][l] = pr[4u + c];
      }
    }
    device uint* sv = sbase + 4u * used[2u * k] * T + t;
    for (uint c = 0u; c < 4u; c++) {
      lanes_uint a = lanes_ld_th(ta[c]);
      lanes_uint d = bb_sub_lanes(lanes_ld_th(tb[c]), a);
      lanes_st_dev(sv + c * T, bb_add_lanes(a, bb_mul_lanes(d, xv)));
    }
  }
}

// e'(y)·(Zc, Num, Den) of each live lane of group u added to partial row (gid·MSL_LANES + lane)·
// (d+1) + X − 1.
MSL_FN void zc_round_accumulate(device uint* partials, device const uint* eq, uint eq_off, thread ProgCombineLanes& c,
                                uint u, uint total, uint npts, uint gid, thread const uint* ys, thread const uint* xs) {
  for (uint l = 0u; l < MSL_LANES; l++) {
    if (u * MSL_LANES + l >= total) break;
    bb4 e = bb4_load(eq, eq_off + ys[l]);
    zc_accumulate(partials, (gid * MSL_LANES + l) * npts + xs[l], e, bb4l_get(c.zc, l), bb4l_get(c.num, l),
                  bb4l_get(c.den, l));
  }
}

// For every pair y and X = 1..d+1 the used slots s (table τ; used[2k] = s, used[2k+1] = τ) take
// t_τ[2y] + X·(t_τ[2y+1] − t_τ[2y]), the program runs over Fp4 and e'(y)·(Zc, Num, Den) is added
// to partial row (gid·MSL_LANES + lane)·(d+1) + X − 1. Work items f = y·(d+1) + X − 1, lanes
// across consecutive f (the lanes of a group read a few consecutive pairs: each table row is read
// from memory once; the last rounds' few pairs still fill the lanes; the kernel checks p.lanes).
template <typename Eval>
MSL_FN void zc_round_body(thread Eval& ev, device const uint* prog, device const uint* cp, device const uint* kinds,
                          device const uint* weights, device const uint* used, device const uint* tables,
                          device const uint* eq, device uint* slots, device uint* regs, device uint* partials,
                          constant ZcRoundParams& p, uint gid, uint G) {
  uint il = p.interleave;
  uint pairs = 1u << (p.log_rows - 1u);
  uint stride = p.stride;
  uint nused = p.nused;
  uint npts = p.points;
  uint total = pairs * npts;
  uint units = (total + MSL_LANES - 1u) / MSL_LANES;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  for (uint k = 0u; k < 12u * npts * MSL_LANES; k++) partials[12u * npts * MSL_LANES * gid + k] = 0u;
  device uint* sbase = slots + zc_region(4u * p.nslots, 0u, gid, G, 1u, il);
  device uint* rbase = regs + zc_region(4u * p.nregs, 0u, gid, G, 1u, il);
  bool has_den = p.has_den != 0u;
  bb4l den_const = bb4l_splat(bb4_load(weights, p.nout));
  for (uint u = gid; u < units; u += G) {
    uint ys[MSL_LANES];
    uint xs[MSL_LANES];
    zc_round_fill(u, total, npts, used, nused, tables, stride, sbase, t, T, ys, xs);
    ProgCombineLanes c;
    c.start(kinds, weights, has_den ? den_const : bb4l_zero());
    ev.ext(prog, cp, sbase, rbase, t, T, c);
    c.finish();
    zc_round_accumulate(partials, eq, p.eq_off, c, u, total, npts, gid, ys, xs);
  }
}

// Rounds j ≥ 1 with the bytecode interpreter (zc_round_body).
kernel void zc_round_eval(device const uint* prog [[buffer(0)]],
                          device const uint* cp [[buffer(1)]],
                          device const uint* kinds [[buffer(2)]],
                          device const uint* weights [[buffer(3)]],
                          device const uint* used [[buffer(4)]],
                          device const uint* tables [[buffer(5)]],
                          device const uint* eq [[buffer(6)]],
                          device uint* slots [[buffer(7)]],
                          device uint* regs [[buffer(8)]],
                          device uint* partials [[buffer(9)]],
                          constant ZcRoundParams& p [[buffer(10)]],
                          uint gid [[thread_position_in_grid]],
                          uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  ProgInterpreter ev;
  zc_round_body(ev, prog, cp, kinds, weights, used, tables, eq, slots, regs, partials, p, gid, G);
}

// ------------------------------------------------------------------------------------------------
// Rounds j ≥ 1, program in pieces.
//
// The rounds are latency-bound: a round with few pairs has few work items, and each walks a piece
// instruction by instruction, every result feeding later ones. With registers in device memory
// every such dependence was a store and a load through L2 (about 1 µs an instruction on an H200);
// here a thread's registers live in threadgroup memory, and its slot operands are read from the
// (read-only) tables as they are needed, t_τ[2y] + X·(t_τ[2y+1] − t_τ[2y]), so the kernel needs no
// scratch in device memory at all. Threadgroup memory bounds the group (16·MSL_LANES·nregs bytes a
// thread: Keccak-f's 65 registers allow 31 threads in Apple's 32 KiB).

struct ZcPiecesParams {
  uint log_rows;  // n ≥ 1: the tables have 2^n rows (pairs y < 2^(n−1))
  uint stride;    // Fp4 index distance between tables
  uint npieces;   // pieces of the program
  uint nregs;     // the largest piece's registers (threadgroup memory: 4·nregs words per lane)
  uint points;    // d + 1: evaluation points X = 1..d+1
  uint has_den;   // add the constant denominator term (once: piece 0)
  uint nout;      // outputs of the whole program (weights[nout]: the constant denominator term)
  uint eq_off;    // Fp4 index of e'(0) in eq
  uint unit_pad;  // lane groups per piece in the item numbering: the round's, rounded up to the group size
  uint lanes;     // MSL_LANES the launcher assumed
  uint touch;     // 1: touch each piece's code, slot list and slot rows before its walk (zc_piece_touch)
  uint zero;      // 0, ANDed with the touched words: a zero the compiler cannot see, so the loads stay
};

// Entry at p of threadgroup memory in the structure-of-arrays layout (bb4l_load's).
MSL_FN bb4l zc_tg_load4(threadgroup const uint* p, uint stride) {
  return bb4l_make(lanes_ld_tg(p), lanes_ld_tg(p + stride), lanes_ld_tg(p + 2u * stride), lanes_ld_tg(p + 3u * stride));
}
MSL_FN void zc_tg_store4(threadgroup uint* p, uint stride, bb4l v) {
  lanes_st_tg(p, v[0]);
  lanes_st_tg(p + stride, v[1]);
  lanes_st_tg(p + 2u * stride, v[2]);
  lanes_st_tg(p + 3u * stride, v[3]);
}

// The slot of table tab (Fp4 rows) at the lanes' points: rows (2y, 2y + 1), rows[l] = 8y of lane
// l, as a + X·(b − a).
MSL_FN bb4l zc_slot_at(device const uint* tab, thread const uint* rows, lanes_uint xv) {
  uint ta[4][MSL_LANES];
  uint tb[4][MSL_LANES];
  for (uint l = 0u; l < MSL_LANES; l++) {
    device const uint* pr = tab + rows[l];
    for (uint c = 0u; c < 4u; c++) {
      ta[c][l] = pr[c];
      tb[c][l] = pr[4u + c];
    }
  }
  lanes_uint v[4];
  for (uint c = 0u; c < 4u; c++) {
    lanes_uint a = lanes_ld_th(ta[c]);
    v[c] = bb_add_lanes(a, bb_mul_lanes(bb_sub_lanes(lanes_ld_th(tb[c]), a), xv));
  }
  return bb4l_make(v[0], v[1], v[2], v[3]);
}

// A piece's operand o for the lanes at column t of T: registers from threadgroup memory, slot s
// (table pused[2s + 1]) at rows (2y, 2y + 1), rows[l] = 8y of lane l, as a + X·(b − a),
// constants and public values broadcast.
MSL_FN bb4l zc_piece_operand(uint o, threadgroup const uint* regs, device const uint* pused, device const uint* tables,
                             uint stride, thread const uint* rows, lanes_uint xv, device const uint* cp, uint nconst,
                             uint t, uint T) {
  uint idx = o & PROG_INDEX_MASK;
  uint kind = o >> 30;
  if (kind >= PROG_KIND_CONST) return bb4l_lift(lanes_splat(cp[(kind == PROG_KIND_CONST ? 0u : nconst) + idx]));
  if (kind == PROG_KIND_REG) return zc_tg_load4(regs + 4u * idx * T + t, T);
  return zc_slot_at(tables + 4u * pused[2u * idx + 1u] * stride, rows, xv);
}

// Touches what a piece's walk will read, before the walk: its code and slot list (the group's
// threads together, one word of each 32-byte sector, as they walk the same piece) and, per lane,
// its slot rows (rows 2y and 2y + 1 of an Fp4 table are one 32-byte sector), eight slots' loads in
// flight at a time. Why: a round with few lane groups a piece is a serial walk in which every
// instruction waits for its code word, slot number and table row in turn, mostly at L2 latency
// (about 0.75 µs an interpreted instruction on an H200); touched first, they come from L1. Returns
// a value that depends on every load.
MSL_FN uint zc_piece_touch(device const uint* prog, device const uint* pused, uint nused, device const uint* tables,
                           uint stride, thread const uint* rows, uint tid, uint tpg) {
  uint acc = 0u;
  uint ncode = PROG_HEADER + 3u * prog[2];
  for (uint w = 8u * tid; w < ncode; w += 8u * tpg) acc ^= prog[w];
  for (uint w = 8u * tid; w < 2u * nused; w += 8u * tpg) acc ^= pused[w];
  for (uint s0 = 0u; s0 < nused; s0 += 8u) {
    uint tab[8];
    for (uint k = 0u; k < 8u; k++) tab[k] = pused[2u * min(s0 + k, nused - 1u) + 1u];
    uint v[8];
    for (uint k = 0u; k < 8u; k++) {
      device const uint* t = tables + 4u * tab[k] * stride;
      uint x = 0u;
      for (uint l = 0u; l < MSL_LANES; l++) x ^= t[rows[l]];
      v[k] = x;
    }
    for (uint k = 0u; k < 8u; k++) acc ^= v[k];
  }
  return acc;
}

// Runs one piece (program words prog, constants cp) over Fp4 for the lanes at column t of T
// (prog_run4_lanes with zc_piece_operand's operands and registers in threadgroup memory).
template <typename Emit>
MSL_FN void zc_piece_run4(device const uint* prog, device const uint* cp, device const uint* pused,
                          device const uint* tables, uint stride, thread const uint* rows, lanes_uint xv,
                          threadgroup uint* regs, uint t, uint T, thread Emit& emit) {
  uint ncode = prog[2];
  uint nconst = prog[3];
  device const uint* code = prog + PROG_HEADER;
  for (uint i = 0u; i < ncode; i++, code += 3) {
    uint w0 = code[0];
    uint op = w0 >> 24;
    uint dst = w0 & 0xffffffu;
    bb4l a = zc_piece_operand(code[1], regs, pused, tables, stride, rows, xv, cp, nconst, t, T);
    if (op == PROG_OP_EMIT) {
      emit.put(dst, a);
      continue;
    }
    bb4l r = op == PROG_OP_NEG ? bb4l_neg(a)
                               : prog_binary4_lanes(op, a, zc_piece_operand(code[2], regs, pused, tables, stride, rows, xv,
                                                                            cp, nconst, t, T));
    zc_tg_store4(regs + 4u * dst * T + t, T, r);
  }
}

// The rounds j ≥ 1 with the program in pieces: piece k's words at prog + table[4k], its constants
// and public values at cp + table[4k + 1], its slot list at used + 2·table[4k + 2] (table[4k + 3]
// entries: the piece's own slot s, numbered from 0, and its table τ). The pieces emit the whole
// program's outputs (same numbering, each once), so their weighted sums add up to the program's.
// Work items (k, u): lane group u < units of f = y·(d+1) + X − 1, piece-major with unit_pad lane
// groups a piece (a multiple of the group size), so that the threads of a group walk the same
// piece even when a round has fewer lane groups than a SIMD group; the partial row of
// (thread, lane, X) sums every piece. Threadgroup memory: the registers, 4·nregs words a lane.
kernel void zc_round_pieces(device const uint* prog [[buffer(0)]],
                            device const uint* cp [[buffer(1)]],
                            device const uint* table [[buffer(2)]],
                            device const uint* kinds [[buffer(3)]],
                            device const uint* weights [[buffer(4)]],
                            device const uint* used [[buffer(5)]],
                            device const uint* tables [[buffer(6)]],
                            device const uint* eq [[buffer(7)]],
                            device uint* partials [[buffer(8)]],
                            constant ZcPiecesParams& p [[buffer(9)]],
                            threadgroup uint* sh [[threadgroup(0)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint group [[threadgroup_position_in_grid]],
                            uint tpg [[threads_per_threadgroup]],
                            uint ngroups [[threadgroups_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint pairs = 1u << (p.log_rows - 1u);
  uint stride = p.stride;
  uint npts = p.points;
  uint total = pairs * npts;
  uint units = (total + MSL_LANES - 1u) / MSL_LANES;
  uint upad = p.unit_pad;
  uint items = upad * p.npieces;
  uint gid = group * tpg + tid;
  uint G = ngroups * tpg;
  uint T = tpg * MSL_LANES;
  uint t = tid * MSL_LANES;
  for (uint k = 0u; k < 12u * npts * MSL_LANES; k++) partials[12u * npts * MSL_LANES * gid + k] = 0u;
  bb4l den_const = bb4l_splat(bb4_load(weights, p.nout));
  for (uint it = gid; it < items; it += G) {
    uint piece = it / upad;
    uint u = it - piece * upad;
    device const uint* pt = table + 4u * piece;
    device const uint* pused = used + 2u * pt[2];
    uint ys[MSL_LANES];
    uint xs[MSL_LANES];
    uint rows[MSL_LANES];
    uint xm[MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint f = min(u * MSL_LANES + l, total - 1u);
      ys[l] = f / npts;
      xs[l] = f - ys[l] * npts;  // X − 1
      rows[l] = 8u * ys[l];
      xm[l] = bb_to_mont(xs[l] + 1u);
    }
    if (p.touch != 0u) {  // the padding items too: their threads touch the piece's code for the others
      uint z = zc_piece_touch(prog + pt[0], pused, pt[3], tables, stride, rows, tid, tpg) & p.zero;
      for (uint l = 0u; l < MSL_LANES; l++) rows[l] += z;
    }
    if (u >= units) continue;
    ProgCombineLanes c;
    c.start(kinds, weights, p.has_den != 0u && piece == 0u ? den_const : bb4l_zero());
    zc_piece_run4(prog + pt[0], cp + pt[1], pused, tables, stride, rows, lanes_ld_th(xm), sh, t, T, c);
    c.finish();
    zc_round_accumulate(partials, eq, p.eq_off, c, u, total, npts, gid, ys, xs);
  }
}

// ------------------------------------------------------------------------------------------------
// Rounds j ≥ 1, pieces level-scheduled: the threads of a group cooperate on a point.
//
// In the last rounds a piece has a handful of (pair, X) lane groups, and zc_round_pieces' thread
// walks its piece's instructions one after another (Keccak-f: up to 196, each a dependent chain of
// decode, operand fetch, Fp4 product and store) while the other threads of its group idle. Here a
// piece's code is ordered by dependency level (constraints.ScheduleLevels, encoded by
// kernels.LevelWords): the k threads of a unit (one lane group of one piece) take the
// instructions of a level side by side (i = start + q, stride k), then the group meets at a
// barrier before the next level: depth steps (Keccak-f: at most 47) instead of the code's length.
//
// Level code: per piece k, lcode[3k] its block's first word, lcode[3k + 1] the block's words,
// lcode[3k + 2] the piece's constants. A block: nlevels, nslots, nconst, ncode, nemit; the level
// starts (nlevels + 1 words, instruction indices); 3 words per instruction: op<<24, operands A
// and B; then 2 words per emit: output, operand. The code is in SSA form over the unit's
// registers: registers 0 .. nslots−1 hold the piece's slots (its slot list, loaded first),
// register nslots + i the result of instruction i; an operand is a register, a constant or a
// public value (no slot operands).
//
// Emits come after the last level, the unit's threads side by side: the loads of their weights
// and kinds, independent of each other, are no longer on a level's critical path. Each thread
// adds the outputs it emits into its own ProgCombineLanes; the combination is linear, so the
// unit's k sums (added through threadgroup memory by the unit's first thread, which also adds the
// constant denominator term, once) are the serial walk's. One partial row a unit slot of a group:
// (group·U + unit)·MSL_LANES + lane, (d+1) points each.

#define ZC_LEVEL_HEADER 5u

struct ZcLevelsParams {
  uint log_rows;    // n ≥ 1: the tables have 2^n rows (pairs y < 2^(n−1))
  uint stride;      // Fp4 index distance between tables
  uint npieces;     // pieces of the program
  uint nregs;       // the largest piece's slots + instructions (threadgroup memory: 4·nregs words a lane of a unit)
  uint points;      // d + 1: evaluation points X = 1..d+1
  uint has_den;     // add the constant denominator term (once: piece 0)
  uint nout;        // outputs of the whole program (weights[nout]: the constant denominator term)
  uint eq_off;      // Fp4 index of e'(0) in eq
  uint unit_pad;    // lane groups per piece in the item numbering: the round's, rounded up to a multiple of U
  uint lanes;       // MSL_LANES the launcher assumed
  uint k;           // threads per unit: a power of two dividing the group size (U = group size / k units a group)
  uint npublic;     // public values (each piece's constants are followed by them in cp)
  uint code_words;  // the largest block of level code (threadgroup memory)
  uint cp_words;    // the most constants of a piece, plus npublic (threadgroup memory)
};

// A level-code operand for the lanes at column t of T: a register, or a constant or public value
// broadcast (registers and constants in threadgroup memory).
MSL_FN bb4l zc_level_operand(uint o, threadgroup const uint* regs, threadgroup const uint* cp, uint nconst, uint t,
                             uint T) {
  uint idx = o & PROG_INDEX_MASK;
  uint kind = o >> 30;
  if (kind >= PROG_KIND_CONST) return bb4l_lift(lanes_splat(cp[(kind == PROG_KIND_CONST ? 0u : nconst) + idx]));
  return zc_tg_load4(regs + 4u * idx * T + t, T);
}

// Threadgroup memory: the registers, 4·nregs words per lane of each of the U units (register r,
// coefficient c of unit s at (4r + c)·U·MSL_LANES + s·MSL_LANES); the threads' sums (12 words a
// lane per thread) when k > 1; the piece's block of level code (code_words) and its constants
// and public values (cp_words), copied by the group's threads together at each item (one round
// trip to memory instead of one a level). Work items (piece, block of U lane groups),
// piece-major, a grid-stride loop over them (uniform across a group: barriers in uniform control
// flow).
kernel void zc_round_levels(device const uint* lcode [[buffer(0)]],
                            device const uint* cp [[buffer(1)]],
                            device const uint* table [[buffer(2)]],
                            device const uint* kinds [[buffer(3)]],
                            device const uint* weights [[buffer(4)]],
                            device const uint* used [[buffer(5)]],
                            device const uint* tables [[buffer(6)]],
                            device const uint* eq [[buffer(7)]],
                            device uint* partials [[buffer(8)]],
                            constant ZcLevelsParams& p [[buffer(9)]],
                            threadgroup uint* sh [[threadgroup(0)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint group [[threadgroup_position_in_grid]],
                            uint tpg [[threads_per_threadgroup]],
                            uint ngroups [[threadgroups_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint pairs = 1u << (p.log_rows - 1u);
  uint stride = p.stride;
  uint npts = p.points;
  uint total = pairs * npts;
  uint units = (total + MSL_LANES - 1u) / MSL_LANES;
  uint K = p.k;
  uint U = tpg / K;
  uint su = tid / K;  // the thread's unit in the group
  uint q = tid - su * K;
  uint blocks = p.unit_pad / U;
  uint items = blocks * p.npieces;
  uint T = U * MSL_LANES;
  uint t = su * MSL_LANES;
  threadgroup uint* regs = sh;
  threadgroup uint* red = regs + 4u * p.nregs * T;
  threadgroup uint* scode = red + (K > 1u ? 12u * tpg * MSL_LANES : 0u);
  threadgroup uint* scp = scode + p.code_words;
  uint row = group * U + su;
  if (q == 0u) {
    for (uint w = 0u; w < 12u * npts * MSL_LANES; w++) partials[12u * npts * MSL_LANES * row + w] = 0u;
  }
  bb4l den_const = bb4l_splat(bb4_load(weights, p.nout));
  for (uint it = group; it < items; it += ngroups) {
    uint piece = it / blocks;
    uint u = (it - piece * blocks) * U + su;
    bool live = u < units;
    device const uint* pt = table + 4u * piece;
    device const uint* pused = used + 2u * pt[2];
    device const uint* pcp = cp + pt[1];
    device const uint* dir = lcode + 3u * piece;
    device const uint* lp = lcode + dir[0];
    uint nw = dir[1];
    uint ncp = dir[2] + p.npublic;
    uint nslots = pt[3];
    for (uint w = tid; w < nw; w += tpg) scode[w] = lp[w];
    for (uint w = tid; w < ncp; w += tpg) scp[w] = pcp[w];
    uint ys[MSL_LANES];
    uint xs[MSL_LANES];
    uint rows[MSL_LANES];
    uint xm[MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint f = min(u * MSL_LANES + l, total - 1u);
      ys[l] = f / npts;
      xs[l] = f - ys[l] * npts;  // X − 1
      rows[l] = 8u * ys[l];
      xm[l] = bb_to_mont(xs[l] + 1u);
    }
    lanes_uint xv = lanes_ld_th(xm);
    // The slots, the unit's threads side by side.
    if (live) {
      for (uint s = q; s < nslots; s += K) {
        zc_tg_store4(regs + 4u * s * T + t, T, zc_slot_at(tables + 4u * pused[2u * s + 1u] * stride, rows, xv));
      }
    }
    ProgCombineLanes c;
    c.start(kinds, weights, p.has_den != 0u && piece == 0u && q == 0u ? den_const : bb4l_zero());
    threadgroup_barrier(mem_flags::mem_threadgroup);  // code, constants and slots in place
    uint nlev = scode[0];
    uint nconst = scode[2];
    uint nemit = scode[4];
    threadgroup const uint* lstart = scode + ZC_LEVEL_HEADER;
    threadgroup const uint* code = lstart + nlev + 1u;
    threadgroup const uint* emits = code + 3u * scode[3];
    for (uint lv = 0u; lv < nlev; lv++) {
      if (lv > 0u) threadgroup_barrier(mem_flags::mem_threadgroup);  // the level's operands are written
      uint end = lstart[lv + 1u];
      if (!live) continue;
      for (uint i = lstart[lv] + q; i < end; i += K) {
        threadgroup const uint* w = code + 3u * i;
        uint op = w[0] >> 24;
        bb4l a = zc_level_operand(w[1], regs, scp, nconst, t, T);
        bb4l r = op == PROG_OP_NEG ? bb4l_neg(a) : prog_binary4_lanes(op, a, zc_level_operand(w[2], regs, scp, nconst, t, T));
        zc_tg_store4(regs + 4u * (nslots + i) * T + t, T, r);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the last level's values are written
    if (live) {
      for (uint e = q; e < nemit; e += K) c.put(emits[2u * e], zc_level_operand(emits[2u * e + 1u], regs, scp, nconst, t, T));
    }
    c.finish();
    if (K > 1u) {  // the unit's sums: each thread's into threadgroup memory, added by the unit's first thread
      zc_tg_store4(red + tid * MSL_LANES, tpg * MSL_LANES, c.zc);
      zc_tg_store4(red + (4u * tpg + tid) * MSL_LANES, tpg * MSL_LANES, c.num);
      zc_tg_store4(red + (8u * tpg + tid) * MSL_LANES, tpg * MSL_LANES, c.den);
    }
    // The sums in place; and the next item's copies and slots wait for this item's last reads.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (K > 1u && q == 0u) {
      for (uint j = 1u; j < K; j++) {
        c.zc = bb4l_add(c.zc, zc_tg_load4(red + (tid + j) * MSL_LANES, tpg * MSL_LANES));
        c.num = bb4l_add(c.num, zc_tg_load4(red + (4u * tpg + tid + j) * MSL_LANES, tpg * MSL_LANES));
        c.den = bb4l_add(c.den, zc_tg_load4(red + (8u * tpg + tid + j) * MSL_LANES, tpg * MSL_LANES));
      }
    }
    if (live && q == 0u) zc_round_accumulate(partials, eq, p.eq_off, c, u, total, npts, row, ys, xs);
  }
}

// ------------------------------------------------------------------------------------------------
// Round 0, program in pieces: the slot values of a slice first (zc_uni_values, a table of every
// read slot at every point of the slice), then work items (piece, lane group of points).

struct ZcValuesParams {
  uint log_n;         // N = 2^log_n rows per block
  uint log_m;         // M = 2^log_m points per block
  uint blocks;        // X: blocks of the lifted trace
  uint x0;            // first block of the slice
  uint slice_blocks;  // blocks of the slice (coefs and deltas hold them from block 0)
  uint ncols;         // row length of coefs and deltas
  uint width;         // P: points per slot row of vals (slice_blocks·M rounded up to MSL_LANES)
  uint sel_first;     // slot of is_first, or ZC_NONE
  uint sel_last;
  uint sel_trans;
  uint log_cols;      // a chunk's columns: 2^log_cols consecutive ones (the selector column ncols included)
  uint log_cosets;    // a chunk's cosets of one column: 2^log_cosets consecutive ones (≤ M/N)
};

// vals[s·P + pp] = slot s at point pp of the slice (pp = xl·M + q, q = g·N + b: block x0 + xl, point
// ω_M^i with i = g + (M/N)·b, the order of zc_uni_eval). Column c < ncols: the points ω_M^{g + (M/N)·b},
// b < N, of coset g are the N-point DFT of the twisted coefficients c_k·ω_M^{gk}; the rotation is the
// same coset at b + 1 plus δ·L_{N−1}(ω_M^i) (as zc_fill_cosets). Column c = ncols holds the selectors.
//
// A group takes chunks (block xl, W = 2^log_cols consecutive columns from c0, G = 2^log_cosets
// consecutive cosets from g0; chunk index: coset run fastest, then column run, then block), a
// grid-stride loop over chunks with barriers in uniform control flow (any group size, any group
// count). Group memory sh: the chunk's K = W·G transforms of N points side by side, element e of
// transform κ = w·G + (g − g0) at sh[e·(K + 1) + κ] (threads take consecutive κ: distinct banks),
// then the W·N coefficients, [k][w] (read as rows of W consecutive columns: coalesced):
// (N·(K + 1) + W·N) words. Per chunk: load the coefficients; twist them into bit-reversed order;
// log_n radix-2 stages; store, threads taking consecutive points of a column (whole runs of
// G·N consecutive words of a slot row).
kernel void zc_uni_values(device const uint* coefs [[buffer(0)]],
                          device const uint* deltas [[buffer(1)]],
                          device const uint* srcmap [[buffer(2)]],
                          device const uint* tw [[buffer(3)]],
                          device const uint* lrow [[buffer(4)]],
                          device const uint* sel [[buffer(5)]],
                          device uint* vals [[buffer(6)]],
                          constant ZcValuesParams& p [[buffer(7)]],
                          threadgroup uint* sh [[threadgroup(0)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint group [[threadgroup_position_in_grid]],
                          uint tpg [[threads_per_threadgroup]],
                          uint ngroups [[threadgroups_per_grid]]) {
  uint log_n = p.log_n;
  uint log_m = p.log_m;
  uint n = 1u << log_n;
  uint mmask = (1u << log_m) - 1u;
  uint cosets = 1u << (log_m - log_n);
  uint ncols = p.ncols;
  uint P = p.width;
  uint x0 = p.x0;
  uint blocks = p.blocks;
  uint log_w = p.log_cols;
  uint log_g = p.log_cosets;
  uint log_k = log_w + log_g;
  uint K = 1u << log_k;      // transforms per chunk
  uint S = K + 1u;           // stride between elements of a transform
  uint C = K << log_n;       // points per chunk
  uint WN = n << log_w;      // coefficients per chunk
  threadgroup uint* shc = sh + n * S;
  uint colruns = (ncols + 1u + (1u << log_w) - 1u) >> log_w;
  uint cosetruns = cosets >> log_g;
  uint chunks = p.slice_blocks * colruns * cosetruns;
  for (uint ch = group; ch < chunks; ch += ngroups) {
    uint g0 = (ch % cosetruns) << log_g;
    uint rest = ch / cosetruns;
    uint c0 = (rest % colruns) << log_w;
    uint xl = rest / colruns;
    // The coefficients c_k of the chunk's columns (0 past the source columns).
    for (uint j = tid; j < WN; j += tpg) {
      uint c = c0 + (j & ((1u << log_w) - 1u));
      shc[j] = c < ncols ? coefs[((xl << log_n) + (j >> log_w)) * ncols + c] : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Twisted, bit-reversed: element e of transform κ = c_k·ω_M^{gk}, k = reverse(e).
    for (uint j = tid; j < C; j += tpg) {
      uint kap = j & (K - 1u);
      uint e = j >> log_k;
      uint k = zc_reverse_bits(e, log_n);
      uint g = g0 + (kap & ((1u << log_g) - 1u));
      uint ck = shc[(k << log_w) + (kap >> log_g)];
      sh[e * S + kap] = g != 0u ? bb_mul(ck, tw[(g * k) & mmask]) : ck;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Radix-2 stages (decimation in time: natural order out), forward: ω_len = ω_M^{M/len}.
    for (uint log_len = 1u; log_len <= log_n; log_len++) {
      uint hl = 1u << (log_len - 1u);  // half the butterfly span
      uint tstep = 1u << (log_m - log_len);
      for (uint j = tid; j < (C >> 1); j += tpg) {
        uint kap = j & (K - 1u);
        uint r = j >> log_k;  // butterfly of the transform (< N/2)
        uint kk = r & (hl - 1u);
        uint e0 = ((r - kk) << 1) + kk;
        uint i0 = e0 * S + kap;
        uint i1 = i0 + hl * S;
        uint a = sh[i0];
        uint b = bb_mul(sh[i1], tw[kk * tstep]);
        sh[i0] = bb_add(a, b);
        sh[i1] = bb_sub(a, b);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Stores: threads take consecutive points b of consecutive cosets of a column.
    for (uint j = tid; j < C; j += tpg) {
      uint b = j & (n - 1u);
      uint gl = (j >> log_n) & ((1u << log_g) - 1u);
      uint w = j >> (log_n + log_g);
      uint c = c0 + w;
      if (c > ncols) continue;
      uint g = g0 + gl;
      uint pp = (xl << log_m) + (g << log_n) + b;
      uint i = g + cosets * b;
      if (c == ncols) {
        uint x = x0 + xl;
        uint last = zc_is_last(sel, x, blocks, mmask + 1u, i);
        if (p.sel_first != ZC_NONE) vals[p.sel_first * P + pp] = zc_is_first(sel, x, i);
        if (p.sel_last != ZC_NONE) vals[p.sel_last * P + pp] = last;
        if (p.sel_trans != ZC_NONE) vals[p.sel_trans * P + pp] = bb_sub(BB_ONE, last);
        continue;
      }
      uint kap = (w << log_g) + gl;
      uint sl = srcmap[2u * c];
      uint sr = srcmap[2u * c + 1u];
      if (sl != ZC_NONE) vals[sl * P + pp] = sh[b * S + kap];
      if (sr != ZC_NONE) {
        uint nxt = sh[((b + 1u) & (n - 1u)) * S + kap];
        vals[sr * P + pp] = bb_add(nxt, bb_mul(deltas[xl * ncols + c], lrow[i]));
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

struct ZcSlotValuesParams {
  uint log_h;         // the part has h = 2^log_h rows (column c at c·h), canonical values
  uint log_n;         // N = 2^log_n rows per block: 16 only (the kernel does nothing otherwise)
  uint log_m;         // M = 2^log_m points per block
  uint blocks;        // X: blocks of the lifted trace
  uint x0;            // first block of the slice
  uint slice_blocks;  // blocks of the slice
  uint col0;          // first source column of this part
  uint count;         // source columns of this part
  uint width;         // P: points per slot row of vals
  uint sels;          // 1: this dispatch also writes the selector slots (one more column of items)
  uint sel_first;     // slot of is_first, or ZC_NONE
  uint sel_last;
  uint sel_trans;
};

// zc_coeffs and zc_uni_values in one pass, for N = 16 (GPUs): work item (column, block), the
// blocks of a column on neighbouring items (neighbouring threads read neighbouring rows). The
// block's 16 rows and the next block's first go through the inverse DFT and the scale (zc_coeffs:
// the coefficients c_k·σ^k and δ), then each coset g of the M points through the forward DFT of
// c_k·ω_M^{gk}, in registers; the slot values are those zc_uni_values writes (local slot at b,
// rotation at b + 1 plus δ·L_{N−1}(ω_M^i)). No coefficient table. A thread's values of a slot are
// consecutive words (one block's points), its neighbours' 4·M bytes apart: stored directly, every
// store of a SIMD group touched 32 lines and the kernel was bound by L2 (80 % busy, DRAM 8 %). So
// each SIMD group passes its values through a tile in group memory (a row a thread, 32 points,
// the row's slot address in word 32) and stores row by row: 32 consecutive words a store. Groups
// of whole SIMD groups of 32 (ZSV_GROUP threads: 2·ZSV_TILE words each); with sels, items of
// column `count` write the selector slots directly. Lanes are not used (a host device posing as a
// GPU in tests runs lane 0; its SIMD-group barrier is a group barrier).
#define ZSV_N 16u
#define ZSV_TILE (32u * 33u)
kernel void zc_slot_values(device const uint* values [[buffer(0)]],
                           device const uint* part_cols [[buffer(1)]],
                           device const uint* tw [[buffer(2)]],
                           device const uint* scale [[buffer(3)]],
                           device const uint* srcmap [[buffer(4)]],
                           device const uint* lrow [[buffer(5)]],
                           device const uint* sel [[buffer(6)]],
                           device uint* vals [[buffer(7)]],
                           constant ZcSlotValuesParams& p [[buffer(8)]],
                           threadgroup uint* sh [[threadgroup(0)]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint gid [[thread_position_in_grid]],
                           uint G [[threads_per_grid]]) {
  if (p.log_n != 4u) return;
  uint log_h = p.log_h;
  uint hmask = (1u << log_h) - 1u;
  uint log_m = p.log_m;
  uint mmask = (1u << log_m) - 1u;
  uint cosets = 1u << (log_m - 4u);  // also the DFT's twiddle step M/N
  uint cpts = min(32u, mmask + 1u);  // points a tile holds
  uint sb = p.slice_blocks;
  uint P = p.width;
  uint items = (p.count + p.sels) * sb;
  uint lane = tid & 31u;
  threadgroup uint* tl = sh + (tid >> 5u) * (2u * ZSV_TILE);  // local slot values
  threadgroup uint* tr = tl + ZSV_TILE;                      // rotation slot values
  for (uint base = gid - tid; base < items; base += G) {  // uniform in a group (a host SIMD-group barrier is a group barrier)
    uint it = base + tid;
    uint cl = it / sb;
    uint xl = it - cl * sb;
    uint x = p.x0 + xl;
    bool live = it < items && cl < p.count;
    uint c = p.col0 + cl;
    uint sl = live ? srcmap[2u * c] : ZC_NONE;
    uint sr = live ? srcmap[2u * c + 1u] : ZC_NONE;
    bool work = sl != ZC_NONE || sr != ZC_NONE;
    tl[lane * 33u + 32u] = sl != ZC_NONE ? sl * P + (xl << log_m) : ZC_NONE;
    tr[lane * 33u + 32u] = sr != ZC_NONE ? sr * P + (xl << log_m) : ZC_NONE;
    lanes_uint v[ZSV_N];
    uint delta = 0u;
    if (work) {
      uint b0 = part_cols[c] << log_h;
      if (log_h >= 4u) {
        // The block's 16 rows lie side by side (16-word aligned): four 16-byte loads, not 16
        // 4-byte ones whose every instruction touched 32 lines of a SIMD group.
        for (uint a = 0u; a < 4u; a++) {
          bb4 r = bb4_load_aligned(values + b0 + ((x << 4u) & hmask), a);
          for (uint cc = 0u; cc < 4u; cc++) v[4u * a + cc] = lanes_splat(r[cc]);
        }
      } else {
        for (uint j = 0u; j < ZSV_N; j++) v[j] = lanes_splat(values[b0 + (((x << 4u) + j) & hmask)]);
      }
      delta = bb_mul(bb_sub(values[b0 + (((x + 1u) << 4u) & hmask)], lanes_get(v[0], 0u)), BB_R2);
      zc_dft(v, 4u, tw, mmask, cosets, true);
      for (uint k = 0u; k < ZSV_N; k++) v[k] = bb_mul_lanes(v[k], lanes_splat(scale[k]));
    }
    for (uint q0 = 0u; q0 <= mmask; q0 += 32u) {
      if (work) {
        for (uint g = q0 >> 4u; g < (q0 + cpts) >> 4u; g++) {
          lanes_uint t[ZSV_N];
          for (uint k = 0u; k < ZSV_N; k++) t[k] = g != 0u ? bb_mul_lanes(v[k], lanes_splat(tw[(g * k) & mmask])) : v[k];
          zc_dft(t, 4u, tw, mmask, cosets, false);
          uint col = lane * 33u + (g << 4u) - q0;
          for (uint b = 0u; b < ZSV_N; b++) tl[col + b] = lanes_get(t[b], 0u);
          if (sr != ZC_NONE) {
            for (uint b = 0u; b < ZSV_N; b++) {
              tr[col + b] = bb_add(lanes_get(t[(b + 1u) & (ZSV_N - 1u)], 0u), bb_mul(delta, lrow[g + cosets * b]));
            }
          }
        }
      }
      simdgroup_barrier(mem_flags::mem_threadgroup);
      if (lane < cpts) {
        for (uint r = 0u; r < 32u; r++) {
          uint al = tl[r * 33u + 32u];
          uint ar = tr[r * 33u + 32u];
          if (al != ZC_NONE) vals[al + q0 + lane] = tl[r * 33u + lane];
          if (ar != ZC_NONE) vals[ar + q0 + lane] = tr[r * 33u + lane];
        }
      }
      simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (it < items && cl == p.count) {
      for (uint q = 0u; q <= mmask; q++) {
        uint i = (q >> 4u) + cosets * (q & (ZSV_N - 1u));
        uint pp = (xl << log_m) + q;
        uint last = zc_is_last(sel, x, p.blocks, mmask + 1u, i);
        if (p.sel_first != ZC_NONE) vals[p.sel_first * P + pp] = zc_is_first(sel, x, i);
        if (p.sel_last != ZC_NONE) vals[p.sel_last * P + pp] = last;
        if (p.sel_trans != ZC_NONE) vals[p.sel_trans * P + pp] = bb_sub(BB_ONE, last);
      }
    }
  }
}

// Round 0 over the slice with the program in pieces (table and the pieces' slot lists as in
// zc_round_pieces; here slots[2k + 1] is the program's slot number, a row of vals). Work items (piece,
// lane group u of points), piece-major: the piece's slots are copied from vals into the thread's
// scratch, the piece runs over the base field, and e(x)·(Zc, Num, Den) of lane l is added to partial
// row gid·MSL_LANES + l. The launcher makes G·MSL_LANES and P multiples of M, so a row always
// holds the same point class q ≡ gid·MSL_LANES + l (mod M).
kernel void zc_uni_pieces(device const uint* prog [[buffer(0)]],
                          device const uint* cp [[buffer(1)]],
                          device const uint* table [[buffer(2)]],
                          device const uint* kinds [[buffer(3)]],
                          device const uint* weights [[buffer(4)]],
                          device const uint* pslots [[buffer(5)]],
                          device const uint* vals [[buffer(6)]],
                          device const uint* eq [[buffer(7)]],
                          device uint* slots [[buffer(8)]],
                          device uint* regs [[buffer(9)]],
                          device uint* partials [[buffer(10)]],
                          constant ZcUniPiecesParams& p [[buffer(11)]],
                          uint gid [[thread_position_in_grid]],
                          uint G [[threads_per_grid]]) {
  if (p.lanes != MSL_LANES) return;
  uint il = p.interleave;
  uint P = p.width;
  uint units = P / MSL_LANES;
  uint items = units * p.npieces;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  if (p.zero != 0u) {
    for (uint k = 0u; k < 12u * MSL_LANES; k++) partials[12u * MSL_LANES * gid + k] = 0u;
  }
  device uint* sbase = slots + zc_region(p.nslots, 0u, gid, G, 1u, il);
  device uint* rbase = regs + zc_region(p.nregs, 0u, gid, G, 1u, il);
  bb4l den_const = bb4l_splat(bb4_load(weights, p.nout));
  ProgInterpreter ev;
  for (uint it = gid; it < items; it += G) {
    uint piece = it / units;
    uint u = it - piece * units;
    device const uint* pt = table + 4u * piece;
    device const uint* ps = pslots + 2u * pt[2];
    uint nused = pt[3];
    for (uint k = 0u; k < nused; k++) {
      lanes_st_dev(sbase + ps[2u * k] * T + t, lanes_ld_dev(vals + ps[2u * k + 1u] * P + u * MSL_LANES));
    }
    ProgCombineLanes c;
    c.start(kinds, weights, p.has_den != 0u && piece == 0u ? den_const : bb4l_zero());
    ev.base(prog + pt[0], cp + pt[1], sbase, rbase, t, T, c);
    c.finish();
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint pp = u * MSL_LANES + l;
      if (pp >= p.points) break;
      bb4 e = bb4_load(eq, p.eq_off + p.x0 + (pp >> p.log_m));
      zc_accumulate(partials, gid * MSL_LANES + l, e, bb4l_get(c.zc, l), bb4l_get(c.num, l), bb4l_get(c.den, l));
    }
  }
}

struct ZcWeightsParams {
  uint n_out;                // outputs of the program
  uint l0, l1, l2, l3;       // λ, Montgomery
  uint b0, b1, b2, b3;       // β, Montgomery
  uint dc0, dc1, dc2, dc3;   // the LogUp constant, Montgomery: weights[n_out]
};

// The output weights of one proof (constraints.Program.Weights), on the device from the challenges,
// so that round 0 does not wait for the host's thousands of Fp4 powers: weights[o] (Montgomery
// Fp4) from out_desc[2o] = kind | K << 2 and out_desc[2o + 1] = J: a constraint's λ^K, a
// count's eq3b[K], a message field's eq3b[K]·β^J; weights[n_out] = the LogUp constant.
kernel void zc_weights(device const uint* out_desc [[buffer(0)]],
                       device const uint* eq3b [[buffer(1)]],
                       device uint* weights [[buffer(2)]],
                       constant ZcWeightsParams& p [[buffer(3)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint n = p.n_out;
  bb4 lambda = bb4_make(p.l0, p.l1, p.l2, p.l3);
  bb4 beta = bb4_make(p.b0, p.b1, p.b2, p.b3);
  for (uint o = gid; o <= n; o += stride) {
    bb4 w;
    if (o == n) {
      w = bb4_make(p.dc0, p.dc1, p.dc2, p.dc3);
    } else {
      uint d = out_desc[2u * o];
      uint kind = d & 3u;
      uint k = d >> 2;
      if (kind == 0u) {
        w = bb4_pow(lambda, k);
      } else if (kind == 1u) {
        w = bb4_load(eq3b, k);
      } else {
        w = bb4_mul(bb4_load(eq3b, k), bb4_pow(beta, out_desc[2u * o + 1u]));
      }
    }
    bb4_store(weights, o, w);
  }
}

struct ZcTrRoundParams {
  uint traces;     // T
  uint d;          // the device's round values are X = 1..d; s_j has d + 1 values (X = 1..d+1)
  uint rnd_width;  // uints a trace in sums (12 a point: Zc, Num, Den, Montgomery Fp4)
  uint j;          // the round: traces with nlift ≥ j take part
  uint nlift_at;   // uint index in st of the traces' ñ (T uints)
  uint lag_at;     // uint index in st of L_i(d+1), then of 1/Π_{k≠i}(i − k), i = 0..d (base)
  uint mix_at;     // Fp4 index in st of the traces' weights (w_Zc, w_Num, w_Den: 3 a trace)
  uint round_at;   // Fp4 index in st of this round's ξ, 1/(1 − ξ), eqAtSmall(ξ, X) for X = 1..d+1
  uint at;         // Fp4 index in trlog of s_j(1..d+1); r_j follows
};

// The transcript step of constraint round j (stark.ProveBatchConstraints; the device constraint
// prover's ProveRounds), after the round's sums are in `sums` (kernels.Zerocheck.EncodeRound):
// per trace t and family k (Zc, Num, Den) R(0) = (c − ξ·R(1))/(1 − ξ) from the claim c = R_{j−1}
// (r_{j−1}), and R(d+1) by Lagrange from R(0..d); then
//   s_j(X) = eqAtSmall(ξ, X)·(eqz·Σ_t w_Zc,t·R^Zc_t(X) + eqs·Σ_t(w_Num,t·R^Num_t(X) + w_Den,t·R^Den_t(X))) + tail·X
// for X = 1..d+1, observed; r_j sampled; s_j and r_j into the log; the claims R(r_j), and eqz,
// eqs ·= eqFactor(ξ, r_j), tail ·= r_j for the next round. st (Fp4 indices): the claims [0, 3T),
// R(0) [3T, 6T), R(d+1) [6T, 9T), eqz, eqs, tail at 9T..9T+2, then the constants (see the
// parameters). One group of ≥ 16 threads (poseidon2_group.h); scratch: 48 + P2G_RC_LEN + 8(d+1) +
// 8·max(tpg, d+1) uints.
kernel void zc_tr_round(device const uint* sums [[buffer(0)]],
                        device uint* st [[buffer(1)]],
                        device uint* trlog [[buffer(2)]],
                        device uint* ts [[buffer(3)]],
                        constant uint* rc [[buffer(4)]],
                        constant ZcTrRoundParams& p [[buffer(5)]],
                        threadgroup uint* scratch [[threadgroup(0)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint tpg [[threads_per_threadgroup]]) {
  uint T = p.traces;
  uint d = p.d;
  uint np = d + 1u;
  threadgroup uint* xs = scratch;
  threadgroup uint* out = scratch + 32u;
  threadgroup uint* rcs = scratch + 48u;
  threadgroup uint* lag_r = rcs + P2G_RC_LEN;  // L_i(r_j), Fp4, i = 0..d
  threadgroup uint* s_tg = lag_r + 4u * np;   // s_j(1..d+1), Fp4
  threadgroup uint* part = s_tg + 4u * np;    // partial sums (Zc part, LogUp part) per (chunk, X)
  device uint* claims = st;
  device uint* v0 = st + 12u * T;
  device uint* vd1 = st + 24u * T;
  device const uint* nlift = st + p.nlift_at;
  device const uint* ext = st + p.lag_at;  // L_i(d+1)
  device const uint* bw = ext + np;        // 1/Π_{k≠i}(i − k)
  device const uint* mix = st + 4u * p.mix_at;
  device const uint* rnd = st + 4u * p.round_at;
  // Everything the kernel reads of st and ts before its first store: one chain of its latencies is
  // this kernel's time (one group).
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  bb4 xi = bb4_load(rnd, 0u);
  bb4 inv = bb4_load(rnd, 1u);
  bb4 eqz = bb4_load(st, 9u * T);
  bb4 eqs = bb4_load(st, 9u * T + 1u);
  bb4 tail = bb4_load(st, 9u * T + 2u);
  p2g_load_constants(rc, rcs, tid, tpg);
  // R(0) and R(d+1): one work item per trace and family k (Zc, Num, Den).
  for (uint w = tid; w < 3u * T; w += tpg) {
    uint t = w / 3u;
    if (nlift[t] < p.j) continue;
    device const uint* rt = sums + t * p.rnd_width + 4u * (w - 3u * t);  // R(X) at rt + 12(X − 1)
    bb4 r0 = bb4_mul(bb4_sub(bb4_load(claims, w), bb4_mul(xi, bb4_load(rt, 0u))), inv);
    bb4 e = bb4_mul_base(r0, ext[0]);
    for (uint i = 1u; i <= d; i++) e = bb4_add(e, bb4_mul_base(bb4_load(rt, 3u * (i - 1u)), ext[i]));
    bb4_store(v0, w, r0);
    bb4_store(vd1, w, e);
  }
  threadgroup_barrier(mem_flags::mem_device);
  // Σ over the traces, per X, in chunks of the traces.
  uint nch = tpg >= np ? tpg / np : 1u;
  for (uint w = tid; w < nch * np; w += tpg) {
    uint x = w % np;  // X − 1
    uint ch = w / np;
    bb4 hz = bb4_zero();
    bb4 hl = bb4_zero();
    for (uint t = ch; t < T; t += nch) {
      if (nlift[t] < p.j) continue;
      device const uint* rt = x < d ? sums + t * p.rnd_width + 12u * x : vd1 + 12u * t;
      hz = bb4_add(hz, bb4_mul(bb4_load(mix, 3u * t), bb4_load(rt, 0u)));
      hl = bb4_add(hl, bb4_add(bb4_mul(bb4_load(mix, 3u * t + 1u), bb4_load(rt, 1u)), bb4_mul(bb4_load(mix, 3u * t + 2u), bb4_load(rt, 2u))));
    }
    bb4_store_tg(part, 2u * w, hz);
    bb4_store_tg(part, 2u * w + 1u, hl);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint x = tid; x < np; x += tpg) {
    bb4 hz = bb4_zero();
    bb4 hl = bb4_zero();
    for (uint ch = 0u; ch < nch; ch++) {
      hz = bb4_add(hz, bb4_load_tg(part, 2u * (ch * np + x)));
      hl = bb4_add(hl, bb4_load_tg(part, 2u * (ch * np + x) + 1u));
    }
    bb4 h = bb4_add(bb4_mul(eqz, hz), bb4_mul(eqs, hl));
    bb4 s = bb4_add(bb4_mul(bb4_load(rnd, 2u + x), h), bb4_mul_base(tail, bb_to_mont(x + 1u)));
    bb4_store_tg(s_tg, x, s);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  MSL_NO_UNROLL
  for (uint x = 0u; x < np; x++) p2g_observe4(sp, bb4_load_tg(s_tg, x), rcs, tid, xs, out);
  bb4 r = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) {
    for (uint x = 0u; x < np; x++) bb4_store(trlog, p.at + x, bb4_load_tg(s_tg, x));
    bb4_store(trlog, p.at + np, r);
  }
  // L_i(r) = Π_{k≠i}(r − k) / Π_{k≠i}(i − k).
  for (uint i = tid; i < np; i += tpg) {
    bb4 li = bb4_lift(bw[i]);
    for (uint k = 0u; k < np; k++) {
      if (k != i) li = bb4_mul(li, bb4_sub(r, bb4_lift(bb_to_mont(k))));
    }
    bb4_store_tg(lag_r, i, li);
  }
  threadgroup_barrier(mem_flags::mem_device);  // lag_r written; every thread has read ts and st's eqz, eqs, tail
  // The claims R(r_j): the work items of R(0) (this thread wrote v0[w]).
  for (uint w = tid; w < 3u * T; w += tpg) {
    uint t = w / 3u;
    if (nlift[t] < p.j) continue;
    device const uint* rt = sums + t * p.rnd_width + 4u * (w - 3u * t);
    bb4 c = bb4_mul(bb4_load_tg(lag_r, 0u), bb4_load(v0, w));
    for (uint i = 1u; i <= d; i++) c = bb4_add(c, bb4_mul(bb4_load_tg(lag_r, i), bb4_load(rt, 3u * (i - 1u))));
    bb4_store(claims, w, c);
  }
  if (tid == 0u) {
    // eqFactor(ξ, r) = 1 − r − ξ + 2ξr
    bb4 xr = bb4_mul(xi, r);
    bb4 ef = bb4_add(bb4_sub(bb4_sub(bb4_one(), r), xi), bb4_add(xr, xr));
    bb4_store(st, 9u * T, bb4_mul(eqz, ef));
    bb4_store(st, 9u * T + 1u, bb4_mul(eqs, ef));
    bb4_store(st, 9u * T + 2u, bb4_mul(tail, r));
  }
  p2g_sponge_store(ts, sp, tid);
}
