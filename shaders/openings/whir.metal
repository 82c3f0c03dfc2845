// whir.metal - the tables of the WHIR prover (spec A §6.3) that the NTT, Merkle and sumcheck
// families do not cover: the μ-batching of the stacked matrices fused with the per-block RS
// message transform, the subset-sum (zeta) and Möbius transforms over a range of index bits, the
// split of an Fp4 table into base planes, polynomial evaluation (Horner) and the per-point lo/hi
// halves of eq(pow_d(z_i), ·) weights (the sumcheck family's sc_eq_expand multiplies them out).
//
// All values are in Montgomery form. Fp4 tables are AoS: element i is the four uints
// [4i, 4i+4) (bb4_load / bb4_store); base matrices are column-major. Every kernel walks its work
// items with a grid-stride loop, so a launcher may dispatch any number of full groups; every index
// stays below 2^31.
#include "bb4.h"
#include "poseidon2_group.h"

// ---------------------------------------------------------------- μ-batching of a stacked matrix

struct WhirBatchParams {
  uint nblocks;     // N / 2^l: blocks of 2^l consecutive rows
  uint log_block;   // l = l_skip, ≤ 5
  uint height;      // N: rows of Q (a multiple of 2^l)
  uint width;       // columns of Q
  uint mu_off;      // index in mu of column 0's weight
  uint scale;       // 2^-l (the IDFT's factor)
  uint accumulate;  // 1: add the result to f; 0: overwrite f
};

// One block of 2^L rows (B = 2^L; B, L, C0 and NC constants at every call, so the loops unroll and
// acc stays in registers), Fp4 coordinates [C0, C0 + NC) (NC·B ≤ 64: a block of 32 rows takes its
// coordinates in two calls, each reading Q's block, rather than 128 words of acc, which went to
// local memory and held every block size's registers at 255): acc[t] = Σ_j mu[mu_off + j]·Q[j][r0 + t]
// (Fp4 × base), then per Fp4 coordinate the IDFT over the block (as ntt_blocks: natural order,
// inverse table tw, times 2^-L) and the square of the subset-sum transform on the L block bits.
// That square is ⊗ (1 0; 2 1): per bit, E[x | 2^i] += 2·E[x] — the subset sum of the RS message
// (cpuref.RSMessageInPlace) and the low L bits of the following full CoeffsToEvals, at once.
MSL_FN void whir_batch_block(device const uint* q, device const uint* mu, device const uint* tw, device uint* f,
                             uint B, uint L, uint C0, uint NC, uint blk, uint height, uint width, uint mu_off,
                             uint scale, uint accumulate) {
  uint acc[64];  // acc[c·B + t]: coordinate-major, so the row loops are contiguous (host SIMD)
  for (uint i = 0u; i < NC * B; i++) acc[i] = 0u;
  uint r0 = blk << L;
  // Columns two at a time: both columns' loads side by side, and each coordinate's two products
  // summed as widening products with one reduction (bb_redc_wide) instead of a Montgomery product
  // and a modular addition each (ncu, keccakf-1024 on an H200: 259 µs, waiting on Q's loads).
  for (uint j = 0u; j < width; j += 2u) {
    bool two = j + 1u < width;
    uint j1 = two ? j + 1u : j;
    bb4 m0 = bb4_load(mu, mu_off + j);
    bb4 m1 = two ? bb4_load(mu, mu_off + j1) : bb4_zero();
    uint qv[32];
    uint qw[32];
    if (B >= 4u) {  // 16-byte loads on GPUs (the block is 16-byte aligned: height is a multiple of B)
      uint e0 = (j * height + r0) >> 2;
      uint e1 = (j1 * height + r0) >> 2;
      for (uint t = 0u; t < B; t += 4u) {
        bb4 w0 = bb4_load_aligned(q, e0 + (t >> 2));
        bb4 w1 = bb4_load_aligned(q, e1 + (t >> 2));
        for (uint k = 0u; k < 4u; k++) {
          qv[t + k] = w0[k];
          qw[t + k] = w1[k];
        }
      }
    } else {
      for (uint t = 0u; t < B; t++) {
        qv[t] = q[j * height + r0 + t];
        qw[t] = q[j1 * height + r0 + t];
      }
    }
    for (uint c = 0u; c < NC; c++) {
      uint mc0 = m0[C0 + c];
      uint mc1 = m1[C0 + c];  // zero past the last column
      for (uint t = 0u; t < B; t++) {
        acc[c * B + t] = bb_add(acc[c * B + t], bb_redc_wide(bb_wide_mad(bb_wide_mul(mc0, qv[t]), mc1, qw[t])));
      }
    }
  }
  for (uint c = 0u; c < NC; c++) {
    uint v[32];
    for (uint t = 0u; t < B; t++) {
      uint r = t;
      if (L != 0u) {  // bit reversal over L bits
        r = 0u;
        for (uint s = 0u; s < L; s++) r |= ((t >> s) & 1u) << (L - 1u - s);
      }
      v[t] = acc[c * B + r];
    }
    for (uint h = 1u; h < B; h <<= 1) {
      for (uint s = 0u; s < B; s += 2u * h) {
        for (uint j = 0u; j < h; j++) {
          uint u = v[s + j];
          uint w = bb_mul(v[s + j + h], tw[h + j]);
          v[s + j] = bb_add(u, w);
          v[s + j + h] = bb_sub(u, w);
        }
      }
    }
    for (uint h = 1u; h < B; h <<= 1) {
      for (uint t = 0u; t < B; t++) {
        if ((t & h) != 0u) v[t] = bb_add(v[t], bb_double(v[t - h]));
      }
    }
    for (uint t = 0u; t < B; t++) acc[c * B + t] = bb_mul(v[t], scale);
  }
  if (C0 == 0u && NC == 4u) {  // a row's Fp4 value as one 16-byte access on GPUs
    for (uint t = 0u; t < B; t++) {
      bb4 x = bb4_make(acc[t], acc[B + t], acc[2u * B + t], acc[3u * B + t]);
      if (accumulate != 0u) x = bb4_add(bb4_load_aligned(f, r0 + t), x);
      bb4_store_aligned(f, r0 + t, x);
    }
    return;
  }
  device uint* out = f + 4u * r0 + C0;
  for (uint t = 0u; t < B; t++) {
    for (uint c = 0u; c < NC; c++) {
      uint x = acc[c * B + t];
      if (accumulate != 0u) x = bb_add(out[4u * t + c], x);
      out[4u * t + c] = x;
    }
  }
}

// f[r] (+)= T(Σ_j mu[mu_off + j]·Q[j][·])[r] for every row r < N: the μ-batched Fp4 column of one
// stacked matrix Q (column-major, N × width), with T per block of 2^l rows the IDFT over the
// subgroup of order 2^l and the square of the subset-sum transform (whir_batch_block). Linear
// in Q: one dispatch per matrix, the later ones accumulating, gives the batch of several. One
// thread per block; tw is the NTT family's inverse twiddle table (at least 2^l entries).
kernel void whir_batch_blocks(device const uint* q [[buffer(0)]],
                              device const uint* mu [[buffer(1)]],
                              device const uint* tw [[buffer(2)]],
                              device uint* f [[buffer(3)]],
                              constant WhirBatchParams& p [[buffer(4)]],
                              uint gid [[thread_position_in_grid]],
                              uint stride [[threads_per_grid]]) {
  MSL_HOST_ISA_COPIES  // the block's rows are a loop of 16 (l_skip 4) that the host vectorises
  uint nblocks = p.nblocks;
  uint l = p.log_block;
  uint height = p.height;
  uint width = p.width;
  uint mu_off = p.mu_off;
  uint scale = p.scale;
  uint accumulate = p.accumulate;
  for (uint b = gid; b < nblocks; b += stride) {
    if (l == 4u) {
      whir_batch_block(q, mu, tw, f, 16u, 4u, 0u, 4u, b, height, width, mu_off, scale, accumulate);
    } else if (l == 2u) {
      whir_batch_block(q, mu, tw, f, 4u, 2u, 0u, 4u, b, height, width, mu_off, scale, accumulate);
    } else if (l == 3u) {
      whir_batch_block(q, mu, tw, f, 8u, 3u, 0u, 4u, b, height, width, mu_off, scale, accumulate);
    } else if (l == 1u) {
      whir_batch_block(q, mu, tw, f, 2u, 1u, 0u, 4u, b, height, width, mu_off, scale, accumulate);
    } else if (l == 0u) {
      whir_batch_block(q, mu, tw, f, 1u, 0u, 0u, 4u, b, height, width, mu_off, scale, accumulate);
    } else {
      whir_batch_block(q, mu, tw, f, 32u, 5u, 0u, 2u, b, height, width, mu_off, scale, accumulate);
      whir_batch_block(q, mu, tw, f, 32u, 5u, 2u, 2u, b, height, width, mu_off, scale, accumulate);
    }
  }
}

// ---------------------------------------------------------------- subset-sum / Möbius passes

struct WhirSubsetParams {
  uint count;  // work items: 2^(log n − nb), n the uints of the table
  uint lo;     // first index bit of the pass
  uint nb;     // bits of the pass, 1..5
  uint sub;    // 0: subset sum (zeta), E[x] += E[x − 2^i]; 1: Möbius, E[x] −= E[x − 2^i]
};

// The transform of NB (a constant at every call) index bits [lo, lo + NB) for work item g: the
// 2^NB uints base + u·2^lo (base = g's bits below lo, and above them shifted past the pass's
// bits), in registers.
MSL_FN void whir_subset_item(device const uint* src, device uint* dst, uint NB, uint g, uint lo, uint sub) {
  uint low = g & ((1u << lo) - 1u);
  uint base = low + ((g >> lo) << (lo + NB));
  uint v[32];
  for (uint u = 0u; u < (1u << NB); u++) v[u] = src[base + (u << lo)];
  for (uint i = 0u; i < NB; i++) {
    uint h = 1u << i;
    for (uint u = 0u; u < (1u << NB); u++) {
      if ((u & h) != 0u) v[u] = sub != 0u ? bb_sub(v[u], v[u - h]) : bb_add(v[u], v[u - h]);
    }
  }
  for (uint u = 0u; u < (1u << NB); u++) dst[base + (u << lo)] = v[u];
}

// One pass of the subset-sum (cpuref.CoeffsToEvals) or Möbius (EvalsToCoeffs) transform over the
// index bits [lo, lo + nb) of a table of uints, src → dst (the same buffer for in place: every
// item reads all its values before writing them). The bits of different passes commute, so
// passes over disjoint bit ranges that cover [a, b) give the transform over the bits [a, b). An
// AoS Fp4 table's element bit i is uint bit i + 2 (the transforms act coordinate-wise).
kernel void whir_subset_pass(device const uint* src [[buffer(0)]],
                             device uint* dst [[buffer(1)]],
                             constant WhirSubsetParams& p [[buffer(2)]],
                             uint gid [[thread_position_in_grid]],
                             uint stride [[threads_per_grid]]) {
  MSL_HOST_ISA_COPIES  // an item's 2^nb values in registers
  uint count = p.count;
  uint lo = p.lo;
  uint nb = p.nb;
  uint sub = p.sub;
  for (uint g = gid; g < count; g += stride) {
    if (nb == 4u) {
      whir_subset_item(src, dst, 4u, g, lo, sub);
    } else if (nb == 5u) {
      whir_subset_item(src, dst, 5u, g, lo, sub);
    } else if (nb == 3u) {
      whir_subset_item(src, dst, 3u, g, lo, sub);
    } else if (nb == 2u) {
      whir_subset_item(src, dst, 2u, g, lo, sub);
    } else {
      whir_subset_item(src, dst, 1u, g, lo, sub);
    }
  }
}

// ---------------------------------------------------------------- Fp4 table → base planes

struct WhirPlanesParams {
  uint n;        // Fp4 elements of src
  uint log_out;  // log2 of the plane height (2^log_out ≥ n)
};

// dst[c·2^log_out + i] = coordinate c of src[i], i < n, c < 4: the AoS table as a column-major
// 2^log_out × 4 matrix (the rows from n on are not written: a freshly allocated, zeroed dst
// gives the zero padding of an RS message).
kernel void whir_fp4_to_planes(device const uint* src [[buffer(0)]],
                               device uint* dst [[buffer(1)]],
                               constant WhirPlanesParams& p [[buffer(2)]],
                               uint gid [[thread_position_in_grid]],
                               uint stride [[threads_per_grid]]) {
  uint total = 4u * p.n;
  uint log_out = p.log_out;
  for (uint i = gid; i < total; i += stride) dst[((i & 3u) << log_out) + (i >> 2)] = src[i];
}

// ---------------------------------------------------------------- Horner

struct WhirHornerParams {
  uint n_out;      // Fp4 outputs
  uint log_chunk;  // C = 2^log_chunk inputs per output
  uint src_off;    // Fp4 element offsets into src and dst
  uint dst_off;
  uint z0, z1, z2, z3;  // the point z (Fp4)
  uint z_at;       // WHIR_Z_PARAM: z is z0..z3; else z = zs[z_at]^(2^z_squares) (a device
  uint z_squares;  // transcript's log: the point its step sampled)
};

// WhirHornerParams.z_at when z is the parameters' own z0..z3.
#define WHIR_Z_PARAM 0xffffffffu

// dst[t] = Σ_{i<C} src[t·C + i]·z^i for t < n_out (Fp4, Horner's rule). Applied again to its
// output with z^C it continues the evaluation: Σ_b c[b]·z^b = Σ_t (Σ_i c[tC + i] z^i)·(z^C)^t.
kernel void whir_horner(device const uint* src [[buffer(0)]],
                        device uint* dst [[buffer(1)]],
                        device const uint* zs [[buffer(2)]],
                        constant WhirHornerParams& p [[buffer(3)]],
                        uint gid [[thread_position_in_grid]],
                        uint stride [[threads_per_grid]]) {
  uint n_out = p.n_out;
  uint lc = p.log_chunk;
  uint src_off = p.src_off;
  uint dst_off = p.dst_off;
  bb4 z = bb4_make(p.z0, p.z1, p.z2, p.z3);
  if (p.z_at != WHIR_Z_PARAM) {
    z = bb4_load(zs, p.z_at);
    for (uint q = 0u; q < p.z_squares; q++) z = bb4_square(z);
  }
  for (uint t = gid; t < n_out; t += stride) {
    uint base = src_off + (t << lc);
    bb4 acc = bb4_zero();
    for (uint i = 1u << lc; i > 0u; i--) acc = bb4_add(bb4_mul(acc, z), bb4_load(src, base + i - 1u));
    bb4_store(dst, dst_off + t, acc);
  }
}

// ---------------------------------------------------------------- eq weights of points

struct WhirEqTablesParams {
  uint npts;       // points
  uint base_from;  // points base_from .. npts − 1 lie in the base field (z's components 1..3 zero)
  uint log_lo;     // dl: bits of the lo tables
  uint log_hi;     // dh: bits of the hi tables
};

// For point i with (z_i, coef_i) = pc[2i], pc[2i + 1] (Fp4) and x_j = z_i^(2^j):
//   lo_i[b] = Π_{j<dl} (bit_j(b) ? x_j : 1 − x_j),
//   hi[i·2^dh + b] = coef_i·Π_{j<dh} (bit_j(b) ? x_{dl+j} : 1 − x_{dl+j}),
// so that coef_i·eq(pow_{dl+dh}(z_i), b) = lo_i[b mod 2^dl]·hi[i][b >> dl]
// (stark.EvalsEqHypercube(stark.PowersOf2(z_i, d)), split at bit dl). lo_i is lo[i·2^dl + b] (Fp4)
// for i < base_from and lo_base[(i − base_from)·2^dl + b] (one word) for the base-field points
// (WHIR's in-domain queries ω^idx), whose products are base products. One item per table entry.
kernel void whir_pow_eq_tables(device const uint* pc [[buffer(0)]],
                               device uint* lo [[buffer(1)]],
                               device uint* lo_base [[buffer(2)]],
                               device uint* hi [[buffer(3)]],
                               constant WhirEqTablesParams& p [[buffer(4)]],
                               uint gid [[thread_position_in_grid]],
                               uint stride [[threads_per_grid]]) {
  uint npts = p.npts;
  uint dl = p.log_lo;
  uint dh = p.log_hi;
  uint nlo = npts << dl;
  uint total = nlo + (npts << dh);
  for (uint e = gid; e < total; e += stride) {
    uint i, b, start, nbits;
    if (e < nlo) {
      i = e >> dl;
      b = e & ((1u << dl) - 1u);
      start = 0u;
      nbits = dl;
    } else {
      i = (e - nlo) >> dh;
      b = (e - nlo) & ((1u << dh) - 1u);
      start = dl;
      nbits = dh;
    }
    if (i >= p.base_from) {
      uint x = pc[8u * i];
      for (uint s = 0u; s < start; s++) x = bb_square(x);
      uint prod = BB_ONE;
      for (uint j = 0u; j < nbits; j++) {
        prod = bb_mul(prod, ((b >> j) & 1u) != 0u ? x : bb_sub(BB_ONE, x));
        x = bb_square(x);
      }
      if (e < nlo) {
        lo_base[e - (p.base_from << dl)] = prod;
      } else {
        bb4_store(hi, e - nlo, bb4_mul_base(bb4_load(pc, 2u * i + 1u), prod));
      }
      continue;
    }
    bb4 x = bb4_load(pc, 2u * i);
    for (uint s = 0u; s < start; s++) x = bb4_square(x);
    bb4 prod = e < nlo ? bb4_one() : bb4_load(pc, 2u * i + 1u);
    for (uint j = 0u; j < nbits; j++) {
      if (((b >> j) & 1u) != 0u) {
        prod = bb4_mul(prod, x);
      } else {
        prod = bb4_mul(prod, bb4_sub(bb4_one(), x));
      }
      x = bb4_square(x);
    }
    if (e < nlo) {
      bb4_store(lo, e, prod);
    } else {
      bb4_store(hi, e - nlo, prod);
    }
  }
}

struct WhirEqExpandParams {
  uint npts;       // points
  uint base_from;  // the first base-field point (whir_pow_eq_tables)
  uint log_lo;     // h = dl
  uint log_total;  // k = dl + dh: out has 2^k entries
  uint splits;     // GPUs: threads an entry (a power of two ≤ 32; kernels.WhirWeights); the host: 1
};

// out[b] += Σ_{t<npts} lo_t[b mod 2^h]·hi[t·2^(k−h) + (b >> h)]: Σ_t coef_t·eq(pow_k(z_t), b) from
// whir_pow_eq_tables' tables. A base-field point's term is four base products where an Fp4
// point's is an Fp4 product (sixteen), and four such terms are summed as widening products before
// one reduction a component (4p² < 2p·2^32: bb_redc_wide's bound). WHIR's weights have one Fp4
// point (the out-of-domain sample) and the round's queries in the base field.
//
// On GPUs each entry's terms are split over `splits` lanes of one SIMD group (lane = e + R·j with
// R = 32/splits entries a SIMD group: split j takes every splits-th group of four terms), summed
// by xor shuffles: one thread an entry left a WHIR round's 2^13 entries to 256 SIMD groups, each a
// chain of ≈ 50 groups of loads (ncu, H200: 33 µs; 2^17 entries 74 µs at 47 % occupancy).
kernel void whir_eq_expand(device const uint* lo [[buffer(0)]],
                           device const uint* lo_base [[buffer(1)]],
                           device const uint* hi [[buffer(2)]],
                           device uint* out [[buffer(3)]],
                           constant WhirEqExpandParams& p [[buffer(4)]],
                           uint gid [[thread_position_in_grid]],
                           uint stride [[threads_per_grid]]) {
  uint h = p.log_lo;
  uint k = p.log_total;
  uint bf = p.base_from;
  uint nb = p.npts - bf;
  uint total = 1u << k;
  uint lo_len = 1u << h;
  uint hi_len = 1u << (k - h);
#if MSL_LANES > 1
  // The host: MSL_LANES consecutive b share their hi entry (h ≥ log2 lanes), so a base point's term
  // is four lane-vector products by its hi entry's components; the Fp4 points lane by lane.
  if (h >= MSL_LOG_LANES) {
    for (uint b0 = lane_first(gid, total); b0 < total; b0 += lane_stride(stride)) {
      uint bl = b0 & (lo_len - 1u);
      uint bh = b0 >> h;
      uint tmp[4u * MSL_LANES];
      for (uint l = 0u; l < MSL_LANES; l++) {
        bb4 a = bb4_load_aligned(out, b0 + l);
        for (uint t = 0u; t < bf; t++) a = bb4_add(a, bb4_mul(bb4_load_aligned(lo, t * lo_len + bl + l), bb4_load_aligned(hi, t * hi_len + bh)));
        for (uint c = 0u; c < 4u; c++) tmp[c * MSL_LANES + l] = a[c];
      }
      lanes_uint acc[4];
      for (uint c = 0u; c < 4u; c++) acc[c] = lanes_ld_th(tmp + c * MSL_LANES);
      for (uint t = 0u; t < nb; t++) {
        lanes_uint g = lanes_ld_dev(lo_base + t * lo_len + bl);
        bb4 y = bb4_load_aligned(hi, (bf + t) * hi_len + bh);
        for (uint c = 0u; c < 4u; c++) acc[c] = bb_add_lanes(acc[c], bb_mul_lanes(g, lanes_splat(y[c])));
      }
      for (uint l = 0u; l < MSL_LANES; l++) {
        for (uint c = 0u; c < 4u; c++) out[4u * (b0 + l) + c] = lanes_get(acc[c], l);
      }
    }
    return;
  }
#endif
  // One work item an entry (the host: no shuffles; GPUs with splits 1, whatever the group size),
  // or on GPUs `splits` lanes an entry.
  uint S = 1u;
  uint R = 1u;
  uint j = 0u;
  uint e = 0u;
  uint b0_first = gid;
  uint b0_step = stride;
#if !defined(MSL_TARGET_HOST)
  if (p.splits > 1u) {  // groups of whole SIMD groups (kernels.WhirWeights)
    S = p.splits;
    R = 32u / S;
    uint lane = gid & 31u;
    j = lane / R;
    e = lane % R;
    b0_first = (gid >> 5u) * R;  // uniform in the SIMD group: its shuffles see every lane
    b0_step = (stride >> 5u) * R;
  }
#endif
  for (uint b0 = b0_first; b0 < total; b0 += b0_step) {
    uint b = min(b0 + e, total - 1u);
    uint bl = b & (lo_len - 1u);
    uint bh = b >> h;
    bb4 acc = bb4_zero();
    for (uint t = j; t < bf; t += S) acc = bb4_add(acc, bb4_mul(bb4_load_aligned(lo, t * lo_len + bl), bb4_load_aligned(hi, t * hi_len + bh)));
    for (uint t0 = 4u * j; t0 < nb; t0 += 4u * S) {
      // Four terms' loads issued together; a term past the last point has lo = 0.
      uint t1 = min(t0 + 1u, nb - 1u), t2 = min(t0 + 2u, nb - 1u), t3 = min(t0 + 3u, nb - 1u);
      uint l0 = lo_base[t0 * lo_len + bl];
      uint l1 = t0 + 1u < nb ? lo_base[t1 * lo_len + bl] : 0u;
      uint l2 = t0 + 2u < nb ? lo_base[t2 * lo_len + bl] : 0u;
      uint l3 = t0 + 3u < nb ? lo_base[t3 * lo_len + bl] : 0u;
      bb4 y0 = bb4_load_aligned(hi, (bf + t0) * hi_len + bh);
      bb4 y1 = bb4_load_aligned(hi, (bf + t1) * hi_len + bh);
      bb4 y2 = bb4_load_aligned(hi, (bf + t2) * hi_len + bh);
      bb4 y3 = bb4_load_aligned(hi, (bf + t3) * hi_len + bh);
      uint r0 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(l0, y0[0]), l1, y1[0]), l2, y2[0]), l3, y3[0]));
      uint r1 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(l0, y0[1]), l1, y1[1]), l2, y2[1]), l3, y3[1]));
      uint r2 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(l0, y0[2]), l1, y1[2]), l2, y2[2]), l3, y3[2]));
      uint r3 = bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(l0, y0[3]), l1, y1[3]), l2, y2[3]), l3, y3[3]));
      acc = bb4_add(acc, bb4_make(r0, r1, r2, r3));
    }
#if !defined(MSL_TARGET_HOST)
    uint a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    for (uint off = R; S > 1u && off < 32u; off <<= 1u) {
      a0 = bb_add(a0, simd_shuffle_xor(a0, (ushort)off));
      a1 = bb_add(a1, simd_shuffle_xor(a1, (ushort)off));
      a2 = bb_add(a2, simd_shuffle_xor(a2, (ushort)off));
      a3 = bb_add(a3, simd_shuffle_xor(a3, (ushort)off));
    }
    acc = bb4_make(a0, a1, a2, a3);
#endif
    if (j == 0u && b0 + e < total) bb4_store_aligned(out, b, bb4_add(bb4_load_aligned(out, b), acc));
  }
}

// ---------------------------------------------------------------- a round's query phase on the device

// whir_tr_queries's marker of a grind without a witness (kernels.Grind's GRIND_NONE).
#define WHIR_NO_WITNESS 0xffffffffu

struct WhirTrQueriesParams {
  uint n;      // query indices sampled
  uint mask;   // 2^qbits − 1: the indices' bits
  uint omega;  // the generator of the order-2^qbits subgroup (Montgomery)
  uint grind;  // 1: a proof of work was ground (its witness in witness[0]); 0: none (0 bits)
  uint z_at;   // trlog[z_at]: the round's out-of-domain point z0
  uint at;     // trlog[at]: (w, 0, 0, 0), trlog[at + 1]: γ
};

// The transcript's steps of a WHIR round after its query-phase grind (spec A §6.3; the stage's
// loop: CheckWitness, SampleBits per query, SampleExt), on the device (kernels.DeviceTranscript):
// the witness w (witness[0], canonical, from kernels.Grind; WHIR_NO_WITNESS when its range had
// none) observed and its check sampled, n query indices sampled (canonical low bits), γ sampled.
// The indices go to idx[0 .. n) and the witness as found to idx[n]; w and γ to the log; the next
// round's weight terms to pc in AccumulateWeight's layout: pc[0], pc[1] = z0, γ and pc[2(i+1)],
// pc[2(i+1) + 1] = ω^idx[i], γ^(i+2). One group of ≥ 16 threads (poseidon2_group.h); the samples
// are one chain, the powers are spread over the group. scratch: 48 + P2G_RC_LEN uints.
kernel void whir_tr_queries(device const uint* witness [[buffer(0)]],
                            device uint* trlog [[buffer(1)]],
                            device uint* ts [[buffer(2)]],
                            constant uint* rc [[buffer(3)]],
                            device uint* idx [[buffer(4)]],
                            device uint* pc [[buffer(5)]],
                            constant WhirTrQueriesParams& p [[buffer(6)]],
                            threadgroup uint* scratch [[threadgroup(0)]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint tpg [[threads_per_threadgroup]]) {
  threadgroup uint* xs = scratch;
  threadgroup uint* out = scratch + 32u;
  threadgroup uint* rcs = scratch + 48u;
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  p2g_load_constants(rc, rcs, tid, tpg);
  uint n = p.n;
  uint w = 0u;
  if (p.grind != 0u) {
    w = witness[0];
    p2g_observe(sp, w == WHIR_NO_WITNESS ? 0u : bb_to_mont(w), rcs, tid, xs, out);
  }
  // The check's sample first (the grind made its low bits zero), then the indices.
  MSL_NO_UNROLL
  for (uint i = p.grind != 0u ? 0u : 1u; i <= n; i++) {
    uint v = p2g_sample(sp, rcs, tid, xs, out);
    if (i > 0u && tid == 0u) idx[i - 1u] = bb_from_mont(v) & p.mask;
  }
  bb4 gamma = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) {
    idx[n] = w;
    bb4_store(trlog, p.at, bb4_make(w == WHIR_NO_WITNESS ? 0u : bb_to_mont(w), 0u, 0u, 0u));
    bb4_store(trlog, p.at + 1u, gamma);
  }
  threadgroup_barrier(mem_flags::mem_device);  // the indices written; every thread has read ts
  p2g_sponge_store(ts, sp, tid);
  for (uint i = tid; i <= n; i += tpg) {
    bb4 pt = i == 0u ? bb4_load(trlog, p.z_at) : bb4_make(bb_pow(p.omega, idx[i - 1u]), 0u, 0u, 0u);
    bb4_store(pc, 2u * i, pt);
    bb4_store(pc, 2u * i + 1u, bb4_pow(gamma, i + 1u));
  }
}

struct WhirMuPowersParams {
  uint mu_at;  // trlog[mu_at]: μ
  uint n;      // powers written
};

// out[i] = μ^i for i < n, μ sampled on the device into the log (NewWhirProverMu's batching
// weights, stark.PowersFp4). One item per power.
kernel void whir_mu_powers(device const uint* trlog [[buffer(0)]],
                           device uint* out [[buffer(1)]],
                           constant WhirMuPowersParams& p [[buffer(2)]],
                           uint gid [[thread_position_in_grid]],
                           uint stride [[threads_per_grid]]) {
  bb4 mu = bb4_load(trlog, p.mu_at);
  for (uint i = gid; i < p.n; i += stride) bb4_store(out, i, bb4_pow(mu, i));
}
