// ntt.metal - batched number-theoretic transforms over BabyBear (Montgomery form).
//
// Data: a flat buffer of `total` uints holding consecutive transforms ("columns") of n = 2^log_n
// elements each (a column-major matrix), in Montgomery form, transformed in place.
// All transforms are in NATURAL order in and out (cpuref.DFT): the launcher runs one to four
// ntt_pass dispatches (Stockham passes, each a batch of DFTs of up to 2^11 points in threadgroup
// memory), ping-ponging between the data and a scratch buffer; no bit-reversal pass.
//
// Twiddles (`tw`, device buffer, Montgomery): tw[h + j] = w_{2h}^j for every power of two h and
// j < h, with w_{2h} = field.TwoAdicGenerator(log2 2h) (or its inverse for the inverse table);
// tw[0] is unused. The layout does not depend on n, so one table of 2^L entries serves every
// transform of size ≤ 2^L. The butterfly of stage h at position j uses tw[h + j]; ntt_tw_pow reads
// any power of w_M (M ≤ 2^L) from it.
//
// `scale` (Montgomery) multiplies every output of the dispatch when it is not BB_ONE: the
// launcher passes n^-1 to the last dispatch of an inverse transform.
//
// Indexing: unsigned 32-bit only, and every intermediate of an index is at most the element it
// addresses (column base + offset within the column), so ntt_message_columns, ntt_blocks and ntt_pass
// are exact for buffers of up to 2^32 elements (RS codewords beyond 2^31: 2^22 × 659); no signed
// int anywhere. Grid-stride loops add one grid (≤ 2^28 threads, kernels.maxGridThreads) to an index
// below the launchers' bound 2^32 − 2^28 (kernels.maxColumnElems), so they never wrap.
#include "bb4.h"

struct NttBitrevParams {
  uint total;  // elements in the buffer (a multiple of 2^log_n)
  uint log_n;  // log2 of the transform size, ≥ 1
};

// reverse the low `bits` bits of x (bits in [1, 32]).
MSL_FN uint ntt_rev_bits(uint x, uint bits) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  x = (x >> 16) | (x << 16);
  return x >> (32u - bits);
}

// In-place bit-reversal permutation of every transform: c'[i] = c[bitrev(i)]. The thread that
// visits the smaller index of a pair swaps both.
kernel void ntt_bitrev(device uint* data [[buffer(0)]],
                       constant NttBitrevParams& p [[buffer(1)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint total = p.total;
  uint log_n = p.log_n;
  uint mask = (1u << log_n) - 1u;
  for (uint g = gid; g < total; g += stride) {
    uint i = g & mask;
    uint r = ntt_rev_bits(i, log_n);
    if (i < r) {
      uint base = g - i;
      uint a = data[base + i];
      uint b = data[base + r];
      data[base + i] = b;
      data[base + r] = a;
    }
  }
}

struct NttPassParams {
  uint log_n;   // L: transform size n = 2^L; the buffer holds nblocks·T/(n/R) whole columns
  uint log_r;   // b ≥ 1: this pass does DFTs of size R = 2^b
  uint log_ns;  // Ns = 2^log_ns: the product of the sizes of the earlier passes (0: first pass)
  uint log_t;   // T = 2^log_t sub-transforms per block (T ≤ n/R, T·R ≤ the threadgroup array)
  uint nblocks; // blocks: width · (n/R) / T
  uint scale;   // Montgomery factor applied on the way out (BB_ONE: none)
  uint lanes;   // 1: run blocks of T ≥ MSL_LANES with the lane functions (host SIMD); 0: never
  uint src_off; // first word of src and dst that the pass reads and writes: a transform of many
  uint dst_off; // columns runs in chunks of columns through a smaller scratch buffer (kernels.NTT)
  uint zero_hi; // 1 (first pass only, log_ns = 0, GPU paths): rows n/2.. of every input column are
                // zero and not read; the first DIT stage pairs each row with one of them, a copy
};

// w_M^e for M = 2^log_m ≥ 4 and e < M, from two reads of the table (both in small regions, so
// they stay cached): e = eh·2^s + el; w_M^el = tw[M/2 + el]; w_M^(eh·2^s) = w_{M'}^eh with
// M' = M/2^s, which is tw[M'/2 + eh] for eh < M'/2 and −tw[eh] otherwise.
MSL_FN uint ntt_tw_pow(device const uint* tw, uint log_m, uint e) {
  uint s = (log_m + 1u) >> 1;
  uint el = e & ((1u << s) - 1u);
  uint eh = e >> s;
  uint lo = tw[(1u << (log_m - 1u)) + el];
  uint hh = 1u << (log_m - s - 1u);
  uint hi = eh < hh ? tw[hh + eh] : bb_neg(tw[eh]);
  return bb_mul(lo, hi);
}

// First round of ntt_pass, fused with the load: task q = (b, t) reads the 2^K inputs of the tile
// positions b·2^K + m (m < 2^K; position p holds input row rev(p), bit-reversed over log_r bits),
// applies the input twiddles (log_ns > 0), does the first K DIT stages in registers (twiddles
// tw[hs + j]; j = 0 needs none) and stores them into the tile. K is a constant at each call.
MSL_FN void ntt_round0(device const uint* src, device const uint* tw, threadgroup uint* sh, uint K, uint q,
                       uint in0, uint jb, uint log_r, uint log_t, uint log_m, uint log_ns, uint zh) {
  uint t = q & ((1u << log_t) - 1u);
  uint b = q >> log_t;
  uint rb = ntt_rev_bits(b << K, log_r);
  uint k = (jb + t) & ((1u << log_ns) - 1u);
  uint log_big = log_ns + log_r;
  uint v[8];
  // Position m holds input row rb + rev(m)·2^(log_r − K): its top bit is m's lowest, so with zh the
  // odd positions are the zero rows.
  for (uint m = 0u; m < 8u; m++) {
    if (m < (1u << K) && (zh == 0u || (m & 1u) == 0u)) v[m] = src[in0 + t + ((rb | (ntt_rev_bits(m, K) << (log_r - K))) << log_m)];
  }
  if (log_ns != 0u) {
    // w_M^(r·k) for r = rb + i·2^(log_r − K), i = rev(m): a geometric sequence in i.
    uint w = ntt_tw_pow(tw, log_big, rb * k);
    uint s = ntt_tw_pow(tw, log_big, k << (log_r - K));
    for (uint i = 0u; i < 8u; i++) {
      if (i < (1u << K)) {
        uint m = ntt_rev_bits(i, K);
        v[m] = bb_mul(v[m], w);
        if (i + 1u < (1u << K)) w = bb_mul(w, s);
      }
    }
  }
  if (zh != 0u) {  // stage 0 against zeros: u ± 0
    for (uint m = 0u; m < 8u; m += 2u) {
      if (m < (1u << K)) v[m + 1u] = v[m];
    }
  }
  for (uint s2 = 0u; s2 < 3u; s2++) {
    if (s2 < K && (s2 != 0u || zh == 0u)) {  // constant bounds: the loops unroll, v stays in registers
      uint hs = 1u << s2;
      for (uint m = 0u; m < 8u; m++) {
        if (m < (1u << K) && (m & hs) == 0u) {
          uint jm = m & (hs - 1u);
          uint u = v[m];
          uint w = v[m + hs];
          if (jm != 0u) w = bb_mul(w, tw[hs + jm]);
          v[m] = bb_add(u, w);
          v[m + hs] = bb_sub(u, w);
        }
      }
    }
  }
  uint pb = ((b << K) << log_t) | t;
  for (uint m = 0u; m < 8u; m++) {
    if (m < (1u << K)) sh[pb + (m << log_t)] = v[m];
  }
}

// A later round of ntt_pass: K DIT stages (K constant at each call, 0..3) from stage st (h = 2^st)
// on task q = (b, t), the 2^K tile positions base + m·h. Back into the tile, or (last) out to dst:
// position P of sub-transform t goes to obase + P·Ns, the Stockham output place
// (j / Ns)·Ns·R + (j mod Ns) + P·Ns of j = jb + t, times scale.
MSL_FN void ntt_round(device uint* dst, device const uint* tw, threadgroup uint* sh, uint K, uint st, uint q,
                      uint log_t, uint last, uint colbase, uint jb, uint log_ns, uint log_r, uint scale) {
  uint t = q & ((1u << log_t) - 1u);
  uint b = q >> log_t;
  uint h = 1u << st;
  uint jj = b & (h - 1u);
  uint base = ((b >> st) << (st + K)) + jj;
  uint v[8];
  for (uint m = 0u; m < 8u; m++) {
    if (m < (1u << K)) v[m] = sh[((base + m * h) << log_t) | t];
  }
  for (uint s2 = 0u; s2 < 3u; s2++) {
    if (s2 < K) {
      uint hs = 1u << s2;
      uint hh = h << s2;
      for (uint m = 0u; m < 8u; m++) {
        if (m < (1u << K) && (m & hs) == 0u) {
          uint u = v[m];
          uint w = bb_mul(v[m + hs], tw[hh + jj + (m & (hs - 1u)) * h]);
          v[m] = bb_add(u, w);
          v[m + hs] = bb_sub(u, w);
        }
      }
    }
  }
  if (last == 0u) {
    for (uint m = 0u; m < 8u; m++) {
      if (m < (1u << K)) sh[((base + m * h) << log_t) | t] = v[m];
    }
  } else {
    uint j = jb + t;
    uint obase = colbase + ((j >> log_ns) << (log_ns + log_r)) + (j & ((1u << log_ns) - 1u));
    for (uint m = 0u; m < 8u; m++) {
      if (m < (1u << K)) {
        uint x = v[m];
        if (scale != BB_ONE) x = bb_mul(x, scale);
        dst[obase + ((base + m * h) << log_ns)] = x;
      }
    }
  }
}

// The lane vector (w_M^(e·l), l < MSL_LANES) for M = 2^log_m: one table power and
// log2(MSL_LANES) doubling steps.
MSL_FN lanes_uint ntt_lane_powers(device const uint* tw, uint log_m, uint e) {
  uint a[MSL_LANES];
  uint x = ntt_tw_pow(tw, log_m, e);
  a[0] = BB_ONE;
  MSL_UNROLL
  for (uint d = 1u; d < MSL_LANES; d <<= 1) {
    for (uint l = 0u; l < d; l++) a[d + l] = bb_mul(a[l], x);
    x = bb_square(x);
  }
  return lanes_ld_th(a);
}

// Stages of the next lane round when `rem` stages remain: ceil(rem / ceil(rem / 4)) (0 for none).
MSL_FN uint ntt_lane_round(uint rem) {
  uint nr = (rem + 3u) >> 2;
  return nr == 0u ? 0u : (rem + nr - 1u) / nr;
}

// Lane versions of ntt_round0 / ntt_round (see "Lanes" in prelude.h), for blocks of T ≥ MSL_LANES
// sub-transforms: tasks q0 .. q0 + MSL_LANES − 1 (q0 a multiple of MSL_LANES) share b and cover
// the consecutive sub-transforms t0 + l, so every tile and input access is contiguous in the
// lane and every stage twiddle is shared by the lanes. ntt_pass takes them only when
// MSL_LANES > 1 (the host device); the arithmetic is that of ntt_round0 / ntt_round, with up to
// K = 4 stages per round (16 vectors of lanes stay in the 32 AVX-512 registers). ntt_round0_lanes
// also takes the lane ratios of its input twiddles (Ns ≥ MSL_LANES; see ntt_pass) wb = (w_M^(rb·l))
// and sb = (w_M^(l·2^(log_r − K))), and pf ≠ 0 to prefetch src + pf after each input it reads.
MSL_FN void ntt_round0_lanes(device const uint* src, device const uint* tw, threadgroup uint* sh, uint K, uint q0,
                             uint in0, uint jb, uint log_r, uint log_t, uint log_m, uint log_ns, lanes_uint wb,
                             lanes_uint sb, uint pf) {
  uint t0 = q0 & ((1u << log_t) - 1u);
  uint b = q0 >> log_t;
  uint rb = ntt_rev_bits(b << K, log_r);
  uint log_big = log_ns + log_r;
  // Input twiddles: geometric in the lane when Ns ≥ MSL_LANES, else looked up per lane.
  bool geo = (1u << log_ns) >= MSL_LANES;
  uint w0 = 1u, st0 = 1u;
  uint wa[MSL_LANES];
  uint sa[MSL_LANES];
  if (log_ns != 0u) {
    if (geo) {
      // k = k0 + l in every lane (j0 is a multiple of MSL_LANES): both twiddles are geometric in
      // the lane, w_M^(rb·k0) · wb and w_M^(k0·2^(log_r − K)) · sb.
      uint k0 = (jb + t0) & ((1u << log_ns) - 1u);
      w0 = ntt_tw_pow(tw, log_big, rb * k0);
      st0 = ntt_tw_pow(tw, log_big, k0 << (log_r - K));
    } else {
      for (uint l = 0u; l < MSL_LANES; l++) {  // table lookups per lane: scalar
        uint k = (jb + t0 + l) & ((1u << log_ns) - 1u);
        wa[l] = ntt_tw_pow(tw, log_big, rb * k);
        sa[l] = ntt_tw_pow(tw, log_big, k << (log_r - K));
      }
    }
  }
  // One register's lanes at a time (lanes_reg, babybear.h): the 16 points stay in registers.
  for (uint k = 0u; k < MSL_LANES / LANES_REG; k++) {
    uint l0 = k * LANES_REG;
    lanes_reg v[16];
    MSL_UNROLL
    for (uint m = 0u; m < 16u; m++) {
      if (m < (1u << K)) {
        device const uint* x = src + (in0 + t0 + ((rb | (ntt_rev_bits(m, K) << (log_r - K))) << log_m));
        v[m] = lanes_reg_ld_dev(x + l0);
        if (pf != 0u && k == 0u) lanes_prefetch(x + pf);
      }
    }
    if (log_ns != 0u) {
      lanes_reg w;
      lanes_reg st;
      if (geo) {
        w = bb_mul_lanes(lanes_reg_of(wb, k), lanes_reg_splat(w0));
        st = bb_mul_lanes(lanes_reg_of(sb, k), lanes_reg_splat(st0));
      } else {
        w = lanes_reg_ld_th(wa + l0);
        st = lanes_reg_ld_th(sa + l0);
      }
      MSL_UNROLL
      for (uint i = 0u; i < 16u; i++) {
        if (i < (1u << K)) {
          uint m = ntt_rev_bits(i, K);
          v[m] = bb_mul_lanes(v[m], w);
          if (i + 1u < (1u << K)) w = bb_mul_lanes(w, st);
        }
      }
    }
    MSL_UNROLL
    for (uint s2 = 0u; s2 < 4u; s2++) {
      if (s2 < K) {
        uint hs = 1u << s2;
        MSL_UNROLL
        for (uint m = 0u; m < 16u; m++) {
          if (m < (1u << K) && (m & hs) == 0u) {
            uint jm = m & (hs - 1u);
            lanes_reg u = v[m];
            lanes_reg x = v[m + hs];
            if (jm != 0u) x = bb_mul_lanes(x, lanes_reg_splat(tw[hs + jm]));
            v[m] = bb_add_lanes(u, x);
            v[m + hs] = bb_sub_lanes(u, x);
          }
        }
      }
    }
    threadgroup uint* d = sh + (((b << K) << log_t) | t0);
    MSL_UNROLL
    for (uint m = 0u; m < 16u; m++) {
      if (m < (1u << K)) lanes_reg_st_tg(d + (m << log_t) + l0, v[m]);
    }
  }
}

MSL_FN void ntt_round_lanes(device uint* dst, device const uint* tw, threadgroup uint* sh, uint K, uint st, uint q0,
                            uint log_t, uint last, uint colbase, uint jb, uint log_ns, uint log_r, uint scale) {
  uint t0 = q0 & ((1u << log_t) - 1u);
  uint b = q0 >> log_t;
  uint h = 1u << st;
  uint jj = b & (h - 1u);
  uint base = ((b >> st) << (st + K)) + jj;
  threadgroup uint* a = sh + ((base << log_t) | t0);
  // One register's lanes at a time (as ntt_round0_lanes).
  for (uint k = 0u; k < MSL_LANES / LANES_REG; k++) {
    uint l0 = k * LANES_REG;
    lanes_reg v[16];
    MSL_UNROLL
    for (uint m = 0u; m < 16u; m++) {
      if (m < (1u << K)) v[m] = lanes_reg_ld_tg(a + ((m * h) << log_t) + l0);
    }
    MSL_UNROLL
    for (uint s2 = 0u; s2 < 4u; s2++) {
      if (s2 < K) {
        uint hs = 1u << s2;
        uint hh = h << s2;
        MSL_UNROLL
        for (uint m = 0u; m < 16u; m++) {
          if (m < (1u << K) && (m & hs) == 0u) {
            lanes_reg u = v[m];
            lanes_reg x = bb_mul_lanes(v[m + hs], lanes_reg_splat(tw[hh + jj + (m & (hs - 1u)) * h]));
            v[m] = bb_add_lanes(u, x);
            v[m + hs] = bb_sub_lanes(u, x);
          }
        }
      }
    }
    if (last == 0u) {
      MSL_UNROLL
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K)) lanes_reg_st_tg(a + ((m * h) << log_t) + l0, v[m]);
      }
      continue;
    }
    if (scale != BB_ONE) {
      MSL_UNROLL
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K)) v[m] = bb_mul_lanes(v[m], lanes_reg_splat(scale));
      }
    }
    // Sub-transform j goes to colbase + (j / Ns)·Ns·R + (j mod Ns) + P·Ns: consecutive lanes are
    // consecutive addresses when Ns ≥ MSL_LANES (j0 is a multiple of MSL_LANES), else R apart
    // within each run of Ns lanes.
    uint j0 = jb + t0;
    if ((1u << log_ns) >= MSL_LANES) {
      device uint* o = dst + (colbase + ((j0 >> log_ns) << (log_ns + log_r)) + (j0 & ((1u << log_ns) - 1u)) + (base << log_ns));
      MSL_UNROLL
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K)) lanes_reg_st_dev(o + ((m * h) << log_ns) + l0, v[m]);
      }
    } else {
      for (uint l = 0u; l < LANES_REG; l++) {  // scattered stores: scalar
        uint j = j0 + l0 + l;
        device uint* o = dst + (colbase + ((j >> log_ns) << (log_ns + log_r)) + (j & ((1u << log_ns) - 1u)) + (base << log_ns));
        MSL_UNROLL
        for (uint m = 0u; m < 16u; m++) {
          if (m < (1u << K)) o[(m * h) << log_ns] = lanes_reg_get(v[m], l);
        }
      }
    }
  }
}

// Store of a first pass (Ns = 1, R ≥ MSL_LANES) on the host: the output of sub-transform t is the
// row dst[colbase + (jb + t)·R + P], P < R, and the tile holds X_P of t at sh[P·T + t] after the
// last round; task g copies the MSL_LANES × MSL_LANES square (t0 + i, P0 + l) through a
// register transpose, so loads and stores stay whole vectors.
MSL_FN void ntt_out_lanes(device uint* dst, threadgroup const uint* sh, uint g, uint log_t, uint log_r, uint colbase,
                          uint jb, uint scale) {
  uint lt = log_t - MSL_LOG_LANES;
  uint t0 = (g & ((1u << lt) - 1u)) << MSL_LOG_LANES;
  uint p0 = (g >> lt) << MSL_LOG_LANES;
  lanes_uint v[MSL_LANES];
  MSL_UNROLL
  for (uint i = 0u; i < MSL_LANES; i++) v[i] = lanes_ld_tg(sh + (((p0 + i) << log_t) + t0));
  lanes_transpose(v);
  if (scale != BB_ONE) {
    MSL_UNROLL
    for (uint i = 0u; i < MSL_LANES; i++) v[i] = bb_mul_lanes(v[i], lanes_splat(scale));
  }
  device uint* o = dst + (colbase + ((jb + t0) << log_r) + p0);
  MSL_UNROLL
  for (uint i = 0u; i < MSL_LANES; i++) lanes_st_dev(o + (i << log_r), v[i]);
}

// ntt_pass specialised for one shape (ntt_pass_c): log_r = LR and log_t = LT, the stage count K
// of each round and its first stage ST are constants at every call, so tile, input and twiddle
// addresses are one per-task base plus constant offsets (no per-element index arithmetic).
// Rounds take up to K = 4 stages (16 values in registers: the loops unroll completely, K being a
// constant at every call): one tile round trip fewer than rounds of 3 (H100, 2^22×16: 726 →
// 689 µs; 2^20×16: 180 → 169 µs). First round: as ntt_round0.
MSL_FN void ntt_r0c(device const uint* src, device const uint* tw, threadgroup uint* sh, uint K, uint LR, uint LT,
                    uint q, uint in0, uint jb, uint log_m, uint log_ns, uint zh) {
  uint t = q & ((1u << LT) - 1u);
  uint b = q >> LT;
  uint rb = ntt_rev_bits(b << K, LR);
  device const uint* s0 = src + (in0 + t + (rb << log_m));
  uint gs = 1u << (LR - K + log_m);  // input rows rb + rev(m)·2^(LR−K)
  uint v[16];
  for (uint m = 0u; m < 16u; m++) {  // zh: the odd positions are the zero rows (ntt_round0)
    if (m < (1u << K) && (zh == 0u || (m & 1u) == 0u)) v[m] = s0[ntt_rev_bits(m, K) * gs];
  }
  if (log_ns != 0u) {
    uint k = (jb + t) & ((1u << log_ns) - 1u);
    uint w = ntt_tw_pow(tw, log_ns + LR, rb * k);
    uint s = ntt_tw_pow(tw, log_ns + LR, k << (LR - K));
    for (uint i = 0u; i < 16u; i++) {
      if (i < (1u << K)) {
        uint m = ntt_rev_bits(i, K);
        v[m] = bb_mul(v[m], w);
        if (i + 1u < (1u << K)) w = bb_mul(w, s);
      }
    }
  }
  if (zh != 0u) {
    for (uint m = 0u; m < 16u; m += 2u) {
      if (m < (1u << K)) v[m + 1u] = v[m];
    }
  }
  for (uint s2 = 0u; s2 < 4u; s2++) {
    if (s2 < K && (s2 != 0u || zh == 0u)) {
      uint hs = 1u << s2;
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K) && (m & hs) == 0u) {
          uint jm = m & (hs - 1u);
          uint u = v[m];
          uint w = v[m + hs];
          if (jm != 0u) w = bb_mul(w, tw[hs + jm]);
          v[m] = bb_add(u, w);
          v[m + hs] = bb_sub(u, w);
        }
      }
    }
  }
  threadgroup uint* d = sh + (((b << K) << LT) + t);
  for (uint m = 0u; m < 16u; m++) {
    if (m < (1u << K)) d[m << LT] = v[m];
  }
}

// A later round: as ntt_round, K ≤ 4 stages from the constant stage ST.
MSL_FN void ntt_rmc(device uint* dst, device const uint* tw, threadgroup uint* sh, uint K, uint ST, uint LR, uint LT,
                    uint q, uint last, uint colbase, uint jb, uint log_ns, uint scale) {
  uint t = q & ((1u << LT) - 1u);
  uint b = q >> LT;
  uint h = 1u << ST;
  uint jj = b & (h - 1u);
  uint base = ((b >> ST) << (ST + K)) + jj;
  threadgroup uint* a = sh + ((base << LT) + t);
  uint v[16];
  for (uint m = 0u; m < 16u; m++) {
    if (m < (1u << K)) v[m] = a[(m * h) << LT];
  }
  device const uint* twj = tw + jj;
  for (uint s2 = 0u; s2 < 4u; s2++) {
    if (s2 < K) {
      uint hs = 1u << s2;
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K) && (m & hs) == 0u) {
          uint u = v[m];
          uint w = bb_mul(v[m + hs], twj[(h << s2) + (m & (hs - 1u)) * h]);
          v[m] = bb_add(u, w);
          v[m + hs] = bb_sub(u, w);
        }
      }
    }
  }
  if (last == 0u) {
    for (uint m = 0u; m < 16u; m++) {
      if (m < (1u << K)) a[(m * h) << LT] = v[m];
    }
  } else {
    uint j = jb + t;
    uint obase = colbase + ((j >> log_ns) << (log_ns + LR)) + (j & ((1u << log_ns) - 1u));
    device uint* o = dst + (obase + (base << log_ns));
    uint os = h << log_ns;
    if (scale != BB_ONE) {
      for (uint m = 0u; m < 16u; m++) {
        if (m < (1u << K)) v[m] = bb_mul(v[m], scale);
      }
    }
    for (uint m = 0u; m < 16u; m++) {
      if (m < (1u << K)) o[m * os] = v[m];
    }
  }
}

// The block loop of ntt_pass for log_r = LR, log_t = LT and rounds of K0, K1, K2, K3 stages
// (K0 + K1 + K2 + K3 = LR, K1 ≥ 1; K3 = 0, or K2 = K3 = 0, for fewer rounds), all constants.
MSL_FN void ntt_pass_c(device const uint* src, device uint* dst, device const uint* tw, threadgroup uint* sh,
                       uint LR, uint LT, uint K0, uint K1, uint K2, uint K3, uint log_n, uint log_ns,
                       uint nblocks, uint scale, uint zh, uint tid, uint group, uint tpg, uint ngroups) {
  uint log_m = log_n - LR;
  uint log_bpc = log_m - LT;
  uint size = 1u << (LR + LT);
  for (uint c = group; c < nblocks; c += ngroups) {
    uint colbase = (c >> log_bpc) << log_n;
    uint jb = (c & ((1u << log_bpc) - 1u)) << LT;
    for (uint q = tid; q < (size >> K0); q += tpg) {
      ntt_r0c(src, tw, sh, K0, LR, LT, q, colbase + jb, jb, log_m, log_ns, zh);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint q = tid; q < (size >> K1); q += tpg) {
      ntt_rmc(dst, tw, sh, K1, K0, LR, LT, q, K2 == 0u ? 1u : 0u, colbase, jb, log_ns, scale);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (K2 != 0u) {
      for (uint q = tid; q < (size >> K2); q += tpg) {
        ntt_rmc(dst, tw, sh, K2, K0 + K1, LR, LT, q, K3 == 0u ? 1u : 0u, colbase, jb, log_ns, scale);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (K3 != 0u) {
      for (uint q = tid; q < (size >> K3); q += tpg) {
        ntt_rmc(dst, tw, sh, K3, K0 + K1 + K2, LR, LT, q, 1u, colbase, jb, log_ns, scale);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
}

// One pass of a Stockham (self-sorting) radix-R transform, out of place (src ≠ dst, except for a
// single pass, R = n, which reads a whole column before writing it). With m = n/R, the pass maps
// each column x of src to y of dst by: for j < m, k = j mod Ns,
// X = DFT_R(x[j + r·m] · w_{Ns·R}^(r·k), r < R), y[(j / Ns)·Ns·R + k + r·Ns] = X_r. Running passes
// with R_1, R_2, … (Ns the product of the earlier R) from natural order gives the DFT in natural
// order, with no bit-reversal pass.
//
// A block is T consecutive j of one column: T transforms of R points in threadgroup memory `sh`
// (4·T·R bytes, tile position p of transform t at sh[p·T + t], positions in bit-reversed
// order of r). Radix-2 DIT stages in rounds of up to three in registers (one barrier per round):
// the first round is fused with the load (ntt_round0), the last with the store (ntt_round), so
// each element crosses the tile once per middle round plus once. Groups walk the blocks with a
// stride of threadgroups_per_grid; the barriers are in uniform control flow.
kernel void ntt_pass(device const uint* src [[buffer(0)]],
                     device uint* dst [[buffer(1)]],
                     device const uint* tw [[buffer(2)]],
                     constant NttPassParams& p [[buffer(3)]],
                     threadgroup uint* sh [[threadgroup(0)]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint group [[threadgroup_position_in_grid]],
                     uint tpg [[threads_per_threadgroup]],
                     uint ngroups [[threadgroups_per_grid]]) {
  src += p.src_off;
  dst += p.dst_off;
  uint log_n = p.log_n;
  uint log_r = p.log_r;
  uint log_ns = p.log_ns;
  uint log_t = p.log_t;
  uint nblocks = p.nblocks;
  uint scale = p.scale;
  uint lanes = p.lanes;
  uint zh = p.zero_hi;
  // The host device's lane branch first (dead code on GPUs, MSL_LANES = 1). Then the shapes of
  // 2^20..2^22-point transforms (the bulk of the prover's work), specialised (ntt_pass_c);
  // every other shape takes the generic loop at the end. (A separate kernel for these shapes gets
  // 40 registers instead of 56, 6 instead of 4 groups of 256 per SM, and ran 24 % slower on
  // the H100: more blocks in flight contend for the L2/DRAM, see docs/perf-notes/ntt-gpu.md.)
  if (MSL_LANES > 1u && lanes != 0u && log_t >= MSL_LOG_LANES) {
    // Host device: each work item runs MSL_LANES consecutive tasks as SIMD lanes.
    uint log_m = log_n - log_r;
    uint log_bpc = log_m - log_t;
    uint lsize = 1u << (log_r + log_t - MSL_LOG_LANES);  // lane groups of tasks in a 1-stage round
    // Rounds of at most 4 stages, as even as possible (5 = 3 + 2, 8 = 4 + 4, 9 = 3 + 3 + 3).
    uint k0 = ntt_lane_round(log_r);
    // Input twiddles (log_ns ≥ MSL_LOG_LANES): the lane ratios of ntt_round0_lanes, sb for the
    // dispatch and wb for the current b (consecutive lane groups share b).
    uint geo = log_ns >= MSL_LOG_LANES ? 1u : 0u;
    lanes_uint sb = lanes_splat(BB_ONE);
    lanes_uint wb = lanes_splat(BB_ONE);
    uint wb_b = 0xffffffffu;
    // First pass (Ns = 1): rows of R outputs per sub-transform, stored by ntt_out_lanes.
    uint tr = log_ns == 0u && log_r >= MSL_LOG_LANES ? 1u : 0u;
    if (geo != 0u) sb = ntt_lane_powers(tw, log_ns + log_r, 1u << (log_r - k0));
    for (uint c = group; c < nblocks; c += ngroups) {
      uint colbase = (c >> log_bpc) << log_n;
      uint jb = (c & ((1u << log_bpc) - 1u)) << log_t;
      uint in0 = colbase + jb;
      // Prefetch distance: the input of block c + 1, which the host runtime usually runs next on
      // this worker (it hands out runs of consecutive groups); 0: none.
      uint pf = 0u;
      if (c + 1u < nblocks) {
        uint c1 = c + 1u;
        pf = ((c1 >> log_bpc) << log_n) + ((c1 & ((1u << log_bpc) - 1u)) << log_t) - in0;
      }
      for (uint g = tid; g < (lsize >> k0); g += tpg) {
        uint q0 = g << MSL_LOG_LANES;
        uint b = q0 >> log_t;
        if (geo != 0u && b != wb_b) {
          wb = ntt_lane_powers(tw, log_ns + log_r, ntt_rev_bits(b << k0, log_r));
          wb_b = b;
        }
        if (k0 == 4u) {
          ntt_round0_lanes(src, tw, sh, 4u, q0, in0, jb, log_r, log_t, log_m, log_ns, wb, sb, pf);
        } else if (k0 == 3u) {
          ntt_round0_lanes(src, tw, sh, 3u, q0, in0, jb, log_r, log_t, log_m, log_ns, wb, sb, pf);
        } else if (k0 == 2u) {
          ntt_round0_lanes(src, tw, sh, 2u, q0, in0, jb, log_r, log_t, log_m, log_ns, wb, sb, pf);
        } else {
          ntt_round0_lanes(src, tw, sh, 1u, q0, in0, jb, log_r, log_t, log_m, log_ns, wb, sb, pf);
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      uint st = k0;
      uint last = 0u;
      while (last == 0u) {
        uint kk = ntt_lane_round(log_r - st);
        last = st + kk == log_r ? 1u : 0u;
        uint out = last != 0u && tr == 0u ? 1u : 0u;  // this round stores to dst
        for (uint g = tid; g < (lsize >> kk); g += tpg) {
          uint q0 = g << MSL_LOG_LANES;
          if (kk == 4u) {
            ntt_round_lanes(dst, tw, sh, 4u, st, q0, log_t, out, colbase, jb, log_ns, log_r, scale);
          } else if (kk == 3u) {
            ntt_round_lanes(dst, tw, sh, 3u, st, q0, log_t, out, colbase, jb, log_ns, log_r, scale);
          } else if (kk == 2u) {
            ntt_round_lanes(dst, tw, sh, 2u, st, q0, log_t, out, colbase, jb, log_ns, log_r, scale);
          } else if (kk == 1u) {
            ntt_round_lanes(dst, tw, sh, 1u, st, q0, log_t, out, colbase, jb, log_ns, log_r, scale);
          } else {
            ntt_round_lanes(dst, tw, sh, 0u, st, q0, log_t, out, colbase, jb, log_ns, log_r, scale);
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        st += kk;
      }
      if (tr != 0u) {
        for (uint g = tid; g < (lsize >> MSL_LOG_LANES); g += tpg) {
          ntt_out_lanes(dst, sh, g, log_t, log_r, colbase, jb, scale);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
      }
    }
  } else if (log_r == 11u && log_t == 2u) {
    ntt_pass_c(src, dst, tw, sh, 11u, 2u, 4u, 4u, 3u, 0u, log_n, log_ns, nblocks, scale, zh, tid, group, tpg, ngroups);
  } else if (log_r == 12u && log_t == 1u) {
    ntt_pass_c(src, dst, tw, sh, 12u, 1u, 4u, 4u, 4u, 0u, log_n, log_ns, nblocks, scale, zh, tid, group, tpg, ngroups);
  } else if (log_r == 10u && log_t == 3u) {
    ntt_pass_c(src, dst, tw, sh, 10u, 3u, 4u, 4u, 2u, 0u, log_n, log_ns, nblocks, scale, zh, tid, group, tpg, ngroups);
  } else {
    uint log_m = log_n - log_r;          // m = n / R
    uint log_bpc = log_m - log_t;        // blocks per column
    uint size = 1u << (log_r + log_t);   // elements per block
    uint k0 = min(3u, log_r);            // stages of the first round
    for (uint c = group; c < nblocks; c += ngroups) {
      uint colbase = (c >> log_bpc) << log_n;
      uint jb = (c & ((1u << log_bpc) - 1u)) << log_t;
      uint in0 = colbase + jb;
      for (uint q = tid; q < (size >> k0); q += tpg) {
        if (k0 == 3u) {
          ntt_round0(src, tw, sh, 3u, q, in0, jb, log_r, log_t, log_m, log_ns, zh);
        } else if (k0 == 2u) {
          ntt_round0(src, tw, sh, 2u, q, in0, jb, log_r, log_t, log_m, log_ns, zh);
        } else {
          ntt_round0(src, tw, sh, 1u, q, in0, jb, log_r, log_t, log_m, log_ns, zh);
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      uint st = k0;
      uint last = 0u;
      while (last == 0u) {
        uint kk = min(3u, log_r - st);
        last = st + kk == log_r ? 1u : 0u;
        for (uint q = tid; q < (size >> kk); q += tpg) {
          if (kk == 3u) {
            ntt_round(dst, tw, sh, 3u, st, q, log_t, last, colbase, jb, log_ns, log_r, scale);
          } else if (kk == 2u) {
            ntt_round(dst, tw, sh, 2u, st, q, log_t, last, colbase, jb, log_ns, log_r, scale);
          } else if (kk == 1u) {
            ntt_round(dst, tw, sh, 1u, st, q, log_t, last, colbase, jb, log_ns, log_r, scale);
          } else {
            ntt_round(dst, tw, sh, 0u, st, q, log_t, last, colbase, jb, log_ns, log_r, scale);
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        st += kk;
      }
    }
  }
}

struct NttBlocksParams {
  uint nblocks;         // blocks to transform
  uint log_block;       // l: block size 2^l, 0 ≤ l ≤ 5
  uint log_blocks_col;  // log2 of the blocks per column
  uint col_stride;      // distance between the first elements of two columns
  uint scale;           // Montgomery factor after the transform (2^-l for an inverse; BB_ONE)
  uint subset_sum;      // 1: then apply the subset-sum (coeffs → evals) transform to the block
  uint tiled;           // 1: each group takes tpg consecutive blocks of one column through group
                        // memory (tpg a power of two ≤ 2^log_blocks_col; sh: tpg·(2^l + 1) words)
};

// One block of N = 2^L values (N and L constants at every call, so the loops unroll and v stays
// in registers: with L a run-time value v went to local memory, and the kernel ran at a seventh
// of the copy bandwidth): read from src[rev(t)·stride] (t < N; rev: L-bit reversal), transformed,
// written to dst[t·stride] (the same buffer: in place).
template <typename P>
MSL_FN void ntt_block(P src, P dst, uint stride, device const uint* tw, uint N, uint L, uint scale, uint subset_sum) {
  uint v[32];
  for (uint t = 0u; t < N; t++) v[t] = src[(L == 0u ? 0u : ntt_rev_bits(t, L)) * stride];
  for (uint h = 1u; h < N; h <<= 1) {
    for (uint s = 0u; s < N; s += 2u * h) {
      for (uint j = 0u; j < h; j++) {
        uint u = v[s + j];
        uint w = bb_mul(v[s + j + h], tw[h + j]);
        v[s + j] = bb_add(u, w);
        v[s + j + h] = bb_sub(u, w);
      }
    }
  }
  if (scale != BB_ONE) {
    for (uint t = 0u; t < N; t++) v[t] = bb_mul(v[t], scale);
  }
  if (subset_sum != 0u) {
    for (uint h = 1u; h < N; h <<= 1) {
      for (uint s = 0u; s < N; s += 2u * h) {
        for (uint j = s; j < s + h; j++) v[j + h] = bb_add(v[j + h], v[j]);
      }
    }
  }
  for (uint t = 0u; t < N; t++) dst[t * stride] = v[t];
}

template <typename P>
MSL_FN void ntt_block_l(P src, P dst, uint stride, device const uint* tw, uint l, uint scale, uint subset_sum) {
  if (l == 4u) {
    ntt_block(src, dst, stride, tw, 16u, 4u, scale, subset_sum);
  } else if (l == 2u) {
    ntt_block(src, dst, stride, tw, 4u, 2u, scale, subset_sum);
  } else if (l == 3u) {
    ntt_block(src, dst, stride, tw, 8u, 3u, scale, subset_sum);
  } else if (l == 1u) {
    ntt_block(src, dst, stride, tw, 2u, 1u, scale, subset_sum);
  } else if (l == 0u) {
    ntt_block(src, dst, stride, tw, 1u, 0u, scale, subset_sum);
  } else {
    ntt_block(src, dst, stride, tw, 32u, 5u, scale, subset_sum);
  }
}

// The small batched transform of the RS message (cpuref.RSMessageInPlace): block b lives at
// (b >> log_blocks_col)·col_stride + (b mod 2^log_blocks_col)·2^l; one thread transforms one
// block in registers (DIT with twiddle table tw: pass the inverse table and scale = 2^-l for an
// IDFT), then optionally runs the subset-sum transform E[x] += E[x − 2^i] for each bit i. Tiled
// (GPUs): a group loads its tpg consecutive blocks into group memory with neighbouring threads
// reading neighbouring words, each thread transforms its block there (row stride 2^l + 1, odd:
// the threads fall in distinct banks), and the group stores the tile back the same way (one
// thread a block reading its 2^l words straight from memory touched 32 words 64 bytes apart per
// instruction: 4× the copy time). Untiled (the host device): each thread straight from memory.
kernel void ntt_blocks(device uint* data [[buffer(0)]],
                       device const uint* tw [[buffer(1)]],
                       constant NttBlocksParams& p [[buffer(2)]],
                       threadgroup uint* sh [[threadgroup(0)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tpg [[threads_per_threadgroup]],
                       uint ngroups [[threadgroups_per_grid]]) {
  uint nblocks = p.nblocks;
  uint l = p.log_block;
  uint lbc = p.log_blocks_col;
  uint col_stride = p.col_stride;
  uint scale = p.scale;
  uint subset_sum = p.subset_sum;
  if (p.tiled == 0u) {
    for (uint b = gid; b < nblocks; b += stride) {
      uint base = (b >> lbc) * col_stride + ((b & ((1u << lbc) - 1u)) << l);
      ntt_block_l(data + base, data + base, 1u, tw, l, scale, subset_sum);
    }
    return;
  }
  uint n = 1u << l;
  uint row = n + 1u;
  for (uint b0 = group * tpg; b0 < nblocks; b0 += ngroups * tpg) {
    uint base = (b0 >> lbc) * col_stride + ((b0 & ((1u << lbc) - 1u)) << l);
    uint words = min(tpg, nblocks - b0) << l;  // the last tile may be partial
    for (uint i = tid; i < words; i += tpg) sh[(i >> l) * row + (i & (n - 1u))] = data[base + i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((tid << l) < words) ntt_block_l(sh + tid * row, sh + tid * row, 1u, tw, l, scale, subset_sum);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < words; i += tpg) data[base + i] = sh[(i >> l) * row + (i & (n - 1u))];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

struct NttMessageParams {
  uint nblocks;         // blocks of 2^l values to transform: width · 2^log_blocks_col
  uint log_block;       // l = l_skip, 0 ≤ l ≤ 5
  uint log_blocks_col;  // log2 of the blocks per column: log_in − l
  uint log_in;          // log2 of the height of a column of src
  uint log_out;         // log2 of the height of a column of the codeword (≥ log_in)
  uint scale;           // 2^−l (Montgomery): the IDFT's factor
  uint to_mont;         // 1: convert canonical input to Montgomery form on the way
  uint tiled;           // 1: each group takes tpg consecutive blocks of one column through group
                        // memory (tpg a power of two ≤ 2^log_blocks_col; sh: tpg·(2^l + 1) words)
  uint zero_reps;       // zeros go to the copies k < zero_reps: 2^(log_out − log_in), or half that
                        // where the DFT's first pass does not read the upper half (ntt_pass zero_hi)
};

// The RS message of every column of a stacked matrix, zero-padded into its codeword
// (cpuref.RSEncodeMatrix before the DFT): block b of src (its 2^l values from b·2^l; src is
// column-major with columns of 2^log_in values) goes through the IDFT over ⟨g_l⟩ (tw the inverse
// table) and the subset-sum transform to (b >> log_blocks_col)·2^log_out + (b mod
// 2^log_blocks_col)·2^l of out, and the zeros of the padding go to the same offset plus
// k·2^log_in for 0 < k < zero_reps. One pass: a padding copy followed by ntt_blocks in
// place read and wrote the message twice more. Tiled as ntt_blocks (GPUs), untiled on the host
// device (one block a thread; with l = 4, 16 blocks a thread on lane vectors).
kernel void ntt_message_columns(device const uint* src [[buffer(0)]],
                                device uint* out [[buffer(1)]],
                                device const uint* tw [[buffer(2)]],
                                constant NttMessageParams& p [[buffer(3)]],
                                threadgroup uint* sh [[threadgroup(0)]],
                                uint gid [[thread_position_in_grid]],
                                uint stride [[threads_per_grid]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint group [[threadgroup_position_in_grid]],
                                uint tpg [[threads_per_threadgroup]],
                                uint ngroups [[threadgroups_per_grid]]) {
  uint nblocks = p.nblocks;
  uint l = p.log_block;
  uint lbc = p.log_blocks_col;
  uint log_in = p.log_in;
  uint reps = p.zero_reps;  // the message and reps − 1 zero copies
  uint log_out = p.log_out;
  uint scale = p.scale;
  uint to_mont = p.to_mont;
  uint n = 1u << l;
  uint bmask = (1u << lbc) - 1u;
  if (p.tiled == 0u && MSL_LANES == 16u && l == 4u && lbc >= 4u) {
    // The host's lanes: 16 consecutive blocks of one column a work item, block k in lane k (a
    // transpose of their 256 words), every butterfly a vector operation.
    uint lstride = lane_stride(stride);
    for (uint b0 = lane_first(gid, nblocks); b0 < nblocks; b0 += lstride) {
      lanes_uint w[16];
      for (uint k = 0u; k < 16u; k++) w[k] = lanes_ld_dev(src + (b0 << 4) + (k << 4));
      lanes_transpose(w);  // w[t]: value t of every lane's block
      lanes_uint v[16];
      for (uint t = 0u; t < 16u; t++) {
        v[t] = w[ntt_rev_bits(t, 4u)];
        if (to_mont != 0u) v[t] = bb_mul_lanes(v[t], lanes_splat(BB_R2));
      }
      for (uint h = 1u; h < 16u; h <<= 1) {
        for (uint s = 0u; s < 16u; s += 2u * h) {
          for (uint j = 0u; j < h; j++) {
            lanes_uint u = v[s + j];
            lanes_uint x = bb_mul_lanes(v[s + j + h], lanes_splat(tw[h + j]));
            v[s + j] = bb_add_lanes(u, x);
            v[s + j + h] = bb_sub_lanes(u, x);
          }
        }
      }
      for (uint t = 0u; t < 16u; t++) v[t] = bb_mul_lanes(v[t], lanes_splat(scale));
      for (uint h = 1u; h < 16u; h <<= 1) {  // the subset sum
        for (uint s = 0u; s < 16u; s += 2u * h) {
          for (uint j = s; j < s + h; j++) v[j + h] = bb_add_lanes(v[j + h], v[j]);
        }
      }
      lanes_transpose(v);  // back: v[k] holds block b0 + k
      uint base = ((b0 >> lbc) << log_out) + ((b0 & bmask) << 4);  // the 16 blocks are consecutive
      for (uint k = 0u; k < 16u; k++) lanes_st_dev(out + base + (k << 4), v[k]);
      for (uint r = 1u; r < reps; r++) {
        for (uint k = 0u; k < 16u; k++) lanes_st_dev(out + base + (r << log_in) + (k << 4), lanes_splat(0u));
      }
    }
    return;
  }
  if (p.tiled == 0u) {
    for (uint b = gid; b < nblocks; b += stride) {
      uint v[32];
      for (uint t = 0u; t < n; t++) {
        uint x = src[(b << l) + t];
        v[t] = to_mont != 0u ? bb_to_mont(x) : x;
      }
      ntt_block_l(v, v, 1u, tw, l, scale, 1u);
      uint base = ((b >> lbc) << log_out) + ((b & bmask) << l);
      for (uint t = 0u; t < n; t++) out[base + t] = v[t];
      for (uint k = 1u; k < reps; k++) {
        for (uint t = 0u; t < n; t++) out[base + (k << log_in) + t] = 0u;
      }
    }
    return;
  }
  uint row = n + 1u;
  for (uint b0 = group * tpg; b0 < nblocks; b0 += ngroups * tpg) {
    uint words = min(tpg, nblocks - b0) << l;  // the last tile may be partial
    uint in_base = b0 << l;
    uint base = ((b0 >> lbc) << log_out) + ((b0 & bmask) << l);
    if (l >= 2u) {
      // Blocks of ≥ 4 words: the tile moves as 16-byte accesses (both bases are multiples of
      // 2^l words), a quarter of the load and store instructions (H200: 450 µs for
      // keccakf-1024's 704 MB of reads and writes, 1.6 TB/s, with 4-byte ones).
      for (uint j = tid; 4u * j < words; j += tpg) {
        bb4 x = bb4_load_aligned(src + in_base, j);
        uint at = (j >> (l - 2u)) * row + ((4u * j) & (n - 1u));
        for (uint c = 0u; c < 4u; c++) sh[at + c] = to_mont != 0u ? bb_to_mont(x[c]) : x[c];
      }
    } else {
      for (uint i = tid; i < words; i += tpg) {
        uint x = src[in_base + i];
        sh[(i >> l) * row + (i & (n - 1u))] = to_mont != 0u ? bb_to_mont(x) : x;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((tid << l) < words) ntt_block_l(sh + tid * row, sh + tid * row, 1u, tw, l, scale, 1u);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (l >= 2u) {
      for (uint j = tid; 4u * j < words; j += tpg) {
        uint at = (j >> (l - 2u)) * row + ((4u * j) & (n - 1u));
        bb4_store_aligned(out + base, j, bb4_make(sh[at], sh[at + 1u], sh[at + 2u], sh[at + 3u]));
        for (uint k = 1u; k < reps; k++) bb4_store_aligned(out + base + (k << log_in), j, bb4_zero());
      }
    } else {
      for (uint i = tid; i < words; i += tpg) {
        out[base + i] = sh[(i >> l) * row + (i & (n - 1u))];
        for (uint k = 1u; k < reps; k++) out[base + (k << log_in) + i] = 0u;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}
