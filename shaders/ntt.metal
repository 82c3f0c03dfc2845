// ntt.metal - batched number-theoretic transforms over BabyBear (Montgomery form).
//
// Data: a flat buffer of `total` uints holding consecutive transforms ("columns") of n = 2^log_n
// elements each (a column-major matrix), in Montgomery form, transformed in place.
// All transforms are in NATURAL order in and out (cpuref.DFT): the launcher runs ntt_bitrev, then
// ntt_tg for the first log_chunk butterfly stages (inside threadgroup memory, one chunk of
// 2^log_chunk consecutive elements per group iteration), then ntt_r4 / ntt_r2 for the remaining
// stages in global memory (radix-2 decimation in time, as cpuref.ntt).
//
// Twiddles (`tw`, device buffer, Montgomery): tw[h + j] = w_{2h}^j for every power of two h and
// j < h, with w_{2h} = field.TwoAdicGenerator(log2 2h) (or its inverse for the inverse table);
// tw[0] is unused. The layout does not depend on n, so one table of 2^L entries serves every
// transform of size ≤ 2^L. The butterfly of stage h at position j uses tw[h + j].
//
// `scale` (Montgomery) multiplies every output of the dispatch when it is not BB_ONE: the
// launcher passes n^-1 to the last dispatch of an inverse transform.
//
// total < 2^31 and every index stays in 32 bits.
#include "babybear.h"

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

struct NttTgParams {
  uint total;      // elements in the buffer (a multiple of 2^log_chunk)
  uint log_chunk;  // stages done here: h = 1, 2, ..., 2^(log_chunk-1); chunk = 2^log_chunk ≤ 8192
  uint scale;      // Montgomery factor applied on the way out (BB_ONE: none)
};

// The first log_chunk DIT stages of every chunk of 2^log_chunk consecutive elements (input already
// bit-reversed), in threadgroup memory `sh` (4 << log_chunk bytes). Groups walk the chunks with a
// stride of threadgroups_per_grid; every thread of a group runs the same number of iterations, so
// the barriers are in uniform control flow.
kernel void ntt_tg(device uint* data [[buffer(0)]],
                   device const uint* tw [[buffer(1)]],
                   constant NttTgParams& p [[buffer(2)]],
                   threadgroup uint* sh [[threadgroup(0)]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint group [[threadgroup_position_in_grid]],
                   uint tpg [[threads_per_threadgroup]],
                   uint ngroups [[threadgroups_per_grid]]) {
  uint log_chunk = p.log_chunk;
  uint chunk = 1u << log_chunk;
  uint half_chunk = chunk >> 1;
  uint nchunks = p.total >> log_chunk;
  uint scale = p.scale;
  for (uint c = group; c < nchunks; c += ngroups) {
    uint base = c << log_chunk;
    for (uint t = tid; t < chunk; t += tpg) sh[t] = data[base + t];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint st = 0u; st < log_chunk; st++) {
      uint h = 1u << st;
      for (uint k = tid; k < half_chunk; k += tpg) {
        uint j = k & (h - 1u);
        uint i0 = ((k >> st) << (st + 1u)) + j;
        uint u = sh[i0];
        uint v = bb_mul(sh[i0 + h], tw[h + j]);
        sh[i0] = bb_add(u, v);
        sh[i0 + h] = bb_sub(u, v);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (scale != BB_ONE) {
      for (uint t = tid; t < chunk; t += tpg) data[base + t] = bb_mul(sh[t], scale);
    } else {
      for (uint t = tid; t < chunk; t += tpg) data[base + t] = sh[t];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

struct NttStageParams {
  uint count;  // butterflies (r2: total/2) or butterfly quads (r4: total/4)
  uint log_h;  // the stage's half size h = 2^log_h (r4: stages h and 2h)
  uint scale;  // Montgomery factor applied to the outputs (BB_ONE: none)
};

// One radix-2 DIT stage with half size h over the whole buffer: for block b of 2h elements and
// j < h, (x, y) at (b·2h + j, b·2h + j + h) becomes (x + w·y, x − w·y) with w = tw[h + j].
kernel void ntt_r2(device uint* data [[buffer(0)]],
                   device const uint* tw [[buffer(1)]],
                   constant NttStageParams& p [[buffer(2)]],
                   uint gid [[thread_position_in_grid]],
                   uint stride [[threads_per_grid]]) {
  uint count = p.count;
  uint log_h = p.log_h;
  uint h = 1u << log_h;
  uint scale = p.scale;
  for (uint k = gid; k < count; k += stride) {
    uint j = k & (h - 1u);
    uint i0 = ((k >> log_h) << (log_h + 1u)) + j;
    uint u = data[i0];
    uint v = bb_mul(data[i0 + h], tw[h + j]);
    uint a = bb_add(u, v);
    uint b = bb_sub(u, v);
    if (scale != BB_ONE) {
      a = bb_mul(a, scale);
      b = bb_mul(b, scale);
    }
    data[i0] = a;
    data[i0 + h] = b;
  }
}

// Two radix-2 DIT stages (half sizes h and 2h) in one pass: each thread owns the four elements
// b·4h + j + {0, h, 2h, 3h} (j < h).
kernel void ntt_r4(device uint* data [[buffer(0)]],
                   device const uint* tw [[buffer(1)]],
                   constant NttStageParams& p [[buffer(2)]],
                   uint gid [[thread_position_in_grid]],
                   uint stride [[threads_per_grid]]) {
  uint count = p.count;
  uint log_h = p.log_h;
  uint h = 1u << log_h;
  uint scale = p.scale;
  for (uint q = gid; q < count; q += stride) {
    uint j = q & (h - 1u);
    uint i0 = ((q >> log_h) << (log_h + 2u)) + j;
    uint x0 = data[i0];
    uint x1 = data[i0 + h];
    uint x2 = data[i0 + 2u * h];
    uint x3 = data[i0 + 3u * h];
    uint w = tw[h + j];
    uint t1 = bb_mul(x1, w);
    uint t3 = bb_mul(x3, w);
    uint a0 = bb_add(x0, t1);
    uint a1 = bb_sub(x0, t1);
    uint a2 = bb_add(x2, t3);
    uint a3 = bb_sub(x2, t3);
    uint v2 = bb_mul(a2, tw[2u * h + j]);
    uint v3 = bb_mul(a3, tw[3u * h + j]);
    uint y0 = bb_add(a0, v2);
    uint y2 = bb_sub(a0, v2);
    uint y1 = bb_add(a1, v3);
    uint y3 = bb_sub(a1, v3);
    if (scale != BB_ONE) {
      y0 = bb_mul(y0, scale);
      y1 = bb_mul(y1, scale);
      y2 = bb_mul(y2, scale);
      y3 = bb_mul(y3, scale);
    }
    data[i0] = y0;
    data[i0 + h] = y1;
    data[i0 + 2u * h] = y2;
    data[i0 + 3u * h] = y3;
  }
}

struct NttBlocksParams {
  uint nblocks;         // blocks to transform
  uint log_block;       // l: block size 2^l, 0 ≤ l ≤ 5
  uint log_blocks_col;  // log2 of the blocks per column
  uint col_stride;      // distance between the first elements of two columns
  uint scale;           // Montgomery factor after the transform (2^-l for an inverse; BB_ONE)
  uint subset_sum;      // 1: then apply the subset-sum (coeffs → evals) transform to the block
};

// The small batched transform of the RS message (cpuref.RSMessageInPlace): block b lives at
// (b >> log_blocks_col)·col_stride + (b mod 2^log_blocks_col)·2^l; one thread transforms one
// block in registers (DIT with twiddle table tw: pass the inverse table and scale = 2^-l for an
// IDFT), then optionally runs the subset-sum transform E[x] += E[x − 2^i] for each bit i.
kernel void ntt_blocks(device uint* data [[buffer(0)]],
                       device const uint* tw [[buffer(1)]],
                       constant NttBlocksParams& p [[buffer(2)]],
                       uint gid [[thread_position_in_grid]],
                       uint stride [[threads_per_grid]]) {
  uint nblocks = p.nblocks;
  uint l = p.log_block;
  uint n = 1u << l;
  uint lbc = p.log_blocks_col;
  uint col_stride = p.col_stride;
  uint scale = p.scale;
  uint subset_sum = p.subset_sum;
  uint v[32];
  for (uint b = gid; b < nblocks; b += stride) {
    uint base = (b >> lbc) * col_stride + ((b & ((1u << lbc) - 1u)) << l);
    for (uint t = 0u; t < n; t++) v[t] = data[base + (l == 0u ? 0u : ntt_rev_bits(t, l))];
    for (uint h = 1u; h < n; h <<= 1) {
      for (uint s = 0u; s < n; s += 2u * h) {
        for (uint j = 0u; j < h; j++) {
          uint u = v[s + j];
          uint w = bb_mul(v[s + j + h], tw[h + j]);
          v[s + j] = bb_add(u, w);
          v[s + j + h] = bb_sub(u, w);
        }
      }
    }
    if (scale != BB_ONE) {
      for (uint t = 0u; t < n; t++) v[t] = bb_mul(v[t], scale);
    }
    if (subset_sum != 0u) {
      for (uint h = 1u; h < n; h <<= 1) {
        for (uint s = 0u; s < n; s += 2u * h) {
          for (uint j = s; j < s + h; j++) v[j + h] = bb_add(v[j + h], v[j]);
        }
      }
    }
    for (uint t = 0u; t < n; t++) data[base + t] = v[t];
  }
}

struct NttPadParams {
  uint total;      // elements of out: width · 2^log_out
  uint log_in;     // log2 of the input column height
  uint log_out;    // log2 of the output column height (≥ log_in)
  uint to_mont;    // 1: convert canonical input to Montgomery form on the way
};

// out[c·2^log_out + i] = i < 2^log_in ? in[c·2^log_in + i] : 0 (zero-padding every column of a
// column-major matrix to a taller one, for the low-degree extension).
kernel void ntt_pad_columns(device const uint* in [[buffer(0)]],
                            device uint* out [[buffer(1)]],
                            constant NttPadParams& p [[buffer(2)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint total = p.total;
  uint log_in = p.log_in;
  uint log_out = p.log_out;
  uint to_mont = p.to_mont;
  uint in_mask = (1u << log_in) - 1u;
  uint out_mask = (1u << log_out) - 1u;
  for (uint g = gid; g < total; g += stride) {
    uint i = g & out_mask;
    uint r = 0u;
    if (i <= in_mask) {
      r = in[((g >> log_out) << log_in) + i];
      if (to_mont != 0u) r = bb_to_mont(r);
    }
    out[g] = r;
  }
}
