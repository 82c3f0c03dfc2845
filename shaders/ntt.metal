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

struct NttPassParams {
  uint log_n;   // L: transform size n = 2^L; the buffer holds nblocks·T/(n/R) whole columns
  uint log_r;   // b ≥ 1: this pass does DFTs of size R = 2^b
  uint log_ns;  // Ns = 2^log_ns: the product of the sizes of the earlier passes (0: first pass)
  uint log_t;   // T = 2^log_t sub-transforms per block (T ≤ n/R, T·R ≤ the threadgroup array)
  uint nblocks; // blocks: width · (n/R) / T
  uint scale;   // Montgomery factor applied on the way out (BB_ONE: none)
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

// One pass of a Stockham (self-sorting) radix-R transform, out of place (src ≠ dst, except for a
// single pass, R = n, which reads a whole column before writing it). With m = n/R, the pass maps
// each column x of src to y of dst by: for j < m, k = j mod Ns,
// X = DFT_R(x[j + r·m] · w_{Ns·R}^(r·k), r < R), y[(j / Ns)·Ns·R + k + r·Ns] = X_r. Running passes with R_1, R_2, … (Ns the
// product of the earlier R) from natural order gives the DFT in natural order, with no
// bit-reversal pass.
//
// A block is T consecutive j of one column: it reads R runs of T consecutive elements, does the T
// transforms in threadgroup memory `sh` (4·T·R bytes, element (r, t) at sh[r·T + t]; loaded in
// bit-reversed order of r, then radix-2 DIT stages, three per barrier, with table tw[h + j] = w_2h^j), and writes R runs
// of T (Ns ≥ T) or one run of T·R (Ns < T) consecutive elements. Groups walk the blocks with a
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
  uint log_n = p.log_n;
  uint log_r = p.log_r;
  uint log_ns = p.log_ns;
  uint log_t = p.log_t;
  uint nblocks = p.nblocks;
  uint scale = p.scale;
  uint log_m = log_n - log_r;          // m = n / R
  uint log_bpc = log_m - log_t;        // blocks per column
  uint tmask = (1u << log_t) - 1u;
  uint size = 1u << (log_r + log_t);   // elements per block
  uint nsmask = (1u << log_ns) - 1u;
  uint log_big = log_ns + log_r;       // M = Ns·R: the order of the output twiddles
  for (uint c = group; c < nblocks; c += ngroups) {
    uint colbase = (c >> log_bpc) << log_n;
    uint jb = (c & ((1u << log_bpc) - 1u)) << log_t;
    uint in0 = colbase + jb;
    for (uint e = tid; e < size; e += tpg) {
      uint t = e & tmask;
      uint r = e >> log_t;
      uint x = src[in0 + t + (r << log_m)];
      if (log_ns != 0u) x = bb_mul(x, ntt_tw_pow(tw, log_big, r * ((jb + t) & nsmask)));
      sh[(ntt_rev_bits(r, log_r) << log_t) + t] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // DIT stages, up to three at a time in registers (one barrier per three stages): a task owns
    // the 2^kk elements base + m·h (m < 2^kk) of one transform, h = 2^st.
    for (uint st = 0u; st < log_r; st += 3u) {
      uint kk = min(3u, log_r - st);
      uint h = 1u << st;
      uint cnt = 1u << kk;
      for (uint q = tid; q < (size >> kk); q += tpg) {
        uint t = q & tmask;
        uint b = q >> log_t;
        uint jj = b & (h - 1u);
        uint base = ((b >> st) << (st + kk)) + jj;
        uint v[8];
        for (uint m = 0u; m < 8u; m++) {
          if (m < cnt) v[m] = sh[((base + m * h) << log_t) + t];
        }
        for (uint s2 = 0u; s2 < 3u; s2++) {
          if (s2 < kk) {
            uint hs = 1u << s2;
            uint hh = h << s2;
            for (uint m = 0u; m < 8u; m++) {
              if (m < cnt && (m & hs) == 0u) {
                uint u = v[m];
                uint w = bb_mul(v[m + hs], tw[hh + jj + (m & (hs - 1u)) * h]);
                v[m] = bb_add(u, w);
                v[m + hs] = bb_sub(u, w);
              }
            }
          }
        }
        for (uint m = 0u; m < 8u; m++) {
          if (m < cnt) sh[((base + m * h) << log_t) + t] = v[m];
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (log_ns >= log_t) {
      // R runs of T: element (r, t) goes to colbase + (j >> log_ns)·Ns·R + k + r·Ns.
      for (uint e = tid; e < size; e += tpg) {
        uint t = e & tmask;
        uint r = e >> log_t;
        uint j = jb + t;
        uint k = j & nsmask;
        uint x = sh[e];
        if (scale != BB_ONE) x = bb_mul(x, scale);
        dst[colbase + ((j >> log_ns) << log_big) + k + (r << log_ns)] = x;
      }
    } else {
      // One run of T·R: output offset o = a·Ns·R + r·Ns + tl holds (r, t = a·Ns + tl).
      uint out0 = colbase + (jb << log_r);
      for (uint o = tid; o < size; o += tpg) {
        uint a = o >> log_big;
        uint rem = o & ((1u << log_big) - 1u);
        uint r = rem >> log_ns;
        uint tl = rem & nsmask;
        uint x = sh[(r << log_t) + (a << log_ns) + tl];
        if (scale != BB_ONE) x = bb_mul(x, scale);
        dst[out0 + o] = x;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
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
