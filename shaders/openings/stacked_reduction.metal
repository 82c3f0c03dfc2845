// stacked_reduction.metal - the stacked opening reduction's own kernels (spec B §5.3–5.4;
// cpuref stackingProver): the round-0 sums over the stacked matrix Q and the tables q(u_0; x),
// W(u_0; x) after u_0. The multilinear rounds use the sumcheck family (sumcheck.metal).
//
// Q is one commitment's stacked matrix, column-major, Montgomery, height H = 2^(l_skip+n_stack):
// seen as a sequence of blocks of N = 2^l_skip values, block x of column m is Q[(m·2^n_stack + x)·N
// ..]. A slice of log height ≥ l_skip covers 2^nn blocks (nn = log height − l_skip), starting at a
// multiple of its length; e_nn = eq(r_1..r_nn, ·) is its eq table (etab: all tables of the proof
// side by side, Fp4). Slices are split into chunks of at most 2^log_cb blocks, numbered in slice
// order: chunk k belongs to the last slice whose chunk_first ≤ k. A dispatch covers the slices
// [slice_first, slice_first + slice_count) and their chunks chunk0, chunk0 + 1, … (chunks of them).
//
// Slice descriptors (SR_SLICE_WORDS uints each, written by the Go launcher):
#include "bb4_lanes.h"
#include "poseidon2_group.h"

#define SR_SLICE_WORDS 16u
#define SR_Q_START 0u   // uint index in Q of the slice's first value
#define SR_E_OFF 1u     // Fp4 index in etab of e_nn[0]
#define SR_NN 2u        // nn
#define SR_CHUNK0 3u    // chunk_first
#define SR_A 4u         // 4 uints: the eq weight a (Montgomery)
#define SR_BW 8u        // 4 uints: the rotation weight bw
#define SR_ROT 12u      // 1 when bw ≠ 0
#define SR_W_START 13u  // Fp4 index in the W table of the slice's first entry
#define SR_SHORT 14u    // 1: a slice of log height < l_skip (its bind weights come from the host)
#define SR_CLAIM 15u    // k: the slice's claim in (commitment, column) order (its weights λ^(2k), λ^(2k+1))

// The slice of chunk k among slices [first, first + count) (binary search on chunk_first).
MSL_FN uint sr_find_slice(device const uint* slices, uint first, uint count, uint k) {
  uint lo = first;
  uint hi = first + count;  // the answer lies in [lo, hi)
  while (hi - lo > 1u) {
    uint mid = (lo + hi) / 2u;
    if (slices[mid * SR_SLICE_WORDS + SR_CHUNK0] <= k) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// acc += e·v: an Fp4 per lane (bb4_lanes.h: component c in e[c]) times a base value per lane.
MSL_FN void sr_acc_ext_base(thread lanes_uint* acc, thread const lanes_uint* e, lanes_uint v) {
  for (uint c = 0u; c < 4u; c++) acc[c] = bb_add_lanes(acc[c], bb_mul_lanes(e[c], v));
}

// The Fp4 etab[at] in every lane.
MSL_FN void sr_load_e_uniform(thread lanes_uint* e, device const uint* etab, uint at) {
  for (uint c = 0u; c < 4u; c++) e[c] = bbl_splat(etab[4u * at + c]);
}

struct SrUniParams {
  uint slice_first;  // this commitment's slices in the table
  uint slice_count;
  uint chunk0;       // the first chunk of slice_first
  uint chunks;       // chunks of those slices
  uint log_n;        // l_skip (N = 2^l_skip ≤ 32)
  uint log_cb;       // log2 of the blocks per chunk
};

// Round 0 of the stacked reduction (UnivariateRound), first pass, for one commitment's slices of
// log height ≥ l_skip: per chunk k of slice s (blocks x0 + xl of the chunk)
//   G0_k[z] = Σ_xl e_s[xl]·Q[(x0+xl)·N + z],  G1_k[z] = Σ_xl e_s[(xl−1) mod 2^nn]·Q[(x0+xl)·N + z],
// into row k of sums (8·N uints: G0[0..N), G1[0..N), Fp4 each). No batching weight enters: the
// stacking prover runs this pass before λ is sampled, beside the transcript's absorb of the
// column openings; sr_uni_weigh applies the weights. G1 is computed for every slice (whether a
// slice's column has a rotation claim is not known before the weights). A group works on one
// chunk at a time: its tpg·MSL_LANES virtual threads (a multiple of N) read the chunk's values in
// order, so virtual thread v always sees z = v mod N; after a chunk the group adds the vt / N
// virtual threads of each z. scratch: 32 bytes per virtual thread.
kernel void sr_uni_chunks(device const uint* q [[buffer(0)]],
                          device const uint* slices [[buffer(1)]],
                          device const uint* etab [[buffer(2)]],
                          device uint* sums [[buffer(3)]],
                          constant SrUniParams& p [[buffer(4)]],
                          threadgroup uint* scratch [[threadgroup(0)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint group [[threadgroup_position_in_grid]],
                          uint tpg [[threads_per_threadgroup]],
                          uint ngroups [[threadgroups_per_grid]]) {
  uint first = p.slice_first;
  uint count = p.slice_count;
  uint chunk0 = p.chunk0;
  uint chunks = p.chunks;
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint log_cb = p.log_cb;
  uint vt = tpg * MSL_LANES;  // virtual threads of the group
  uint width = 8u * n;
  uint per_z = vt >> log_n;
  for (uint kk = group; kk < chunks; kk += ngroups) {
    uint k = chunk0 + kk;
    uint s = sr_find_slice(slices, first, count, k);
    uint d = s * SR_SLICE_WORDS;
    uint nn = slices[d + SR_NN];
    uint mask = (1u << nn) - 1u;
    uint e_off = slices[d + SR_E_OFF];
    uint blk0 = (k - slices[d + SR_CHUNK0]) << log_cb;       // first block of the chunk in the slice
    uint nvals = min(1u << log_cb, (1u << nn) - blk0) << log_n;  // values in the chunk
    uint base = slices[d + SR_Q_START] + (blk0 << log_n);
    lanes_uint g0[4];
    lanes_uint g1[4];
    for (uint c = 0u; c < 4u; c++) {
      g0[c] = lanes_splat(0u);
      g1[c] = lanes_splat(0u);
    }
    uint i0 = tid * MSL_LANES;
#if MSL_LANES == 1
    // GPUs: four values a step, each coordinate's four products summed as widening products and
    // reduced once (4p² < 2p·2^32: bb_redc_wide's bound) instead of a Montgomery product and a
    // modular addition each, the four values' loads side by side (ncu, keccakf-1024 on an H200:
    // 541 µs, issue-bound, for 345 MB of Q).
    for (; i0 + 3u * vt < nvals; i0 += 4u * vt) {
      uint v[4];
      bb4 e0[4];
      bb4 e1[4];
      for (uint j = 0u; j < 4u; j++) {
        uint i = i0 + j * vt;
        uint xl = blk0 + (i >> log_n);
        v[j] = q[base + i];
        e0[j] = bb4_load_aligned(etab, e_off + xl);
        e1[j] = bb4_load_aligned(etab, e_off + ((xl - 1u) & mask));
      }
      for (uint c = 0u; c < 4u; c++) {
        g0[c] = bb_add(g0[c], bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(e0[0][c], v[0]), e0[1][c], v[1]),
                                                                   e0[2][c], v[2]),
                                                       e0[3][c], v[3])));
        g1[c] = bb_add(g1[c], bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(e1[0][c], v[0]), e1[1][c], v[1]),
                                                                   e1[2][c], v[2]),
                                                       e1[3][c], v[3])));
      }
    }
#endif
    for (; i0 < nvals; i0 += vt) {
      lanes_uint v;
      lanes_uint e0[4];
      lanes_uint e1[4];
      if (n >= MSL_LANES && i0 + MSL_LANES <= nvals) {  // one block under every lane (always on GPUs)
        v = lanes_ld_dev(q + base + i0);
        uint xl = blk0 + (i0 >> log_n);
        sr_load_e_uniform(e0, etab, e_off + xl);
        sr_load_e_uniform(e1, etab, e_off + ((xl - 1u) & mask));
      } else {  // host: blocks shorter than the lanes, or a partial vector
        uint tv[MSL_LANES];
        uint te0[4u * MSL_LANES];
        uint te1[4u * MSL_LANES];
        for (uint l = 0u; l < MSL_LANES; l++) {
          uint i = i0 + l;
          bool live = i < nvals;
          uint xl = blk0 + ((live ? i : 0u) >> log_n);
          uint a0 = 4u * (e_off + xl);
          uint a1 = 4u * (e_off + ((xl - 1u) & mask));
          tv[l] = live ? q[base + i] : 0u;
          for (uint c = 0u; c < 4u; c++) {
            te0[c * MSL_LANES + l] = etab[a0 + c];
            te1[c * MSL_LANES + l] = etab[a1 + c];
          }
        }
        v = lanes_ld_th(tv);
        for (uint c = 0u; c < 4u; c++) {
          e0[c] = lanes_ld_th(te0 + c * MSL_LANES);
          e1[c] = lanes_ld_th(te1 + c * MSL_LANES);
        }
      }
      sr_acc_ext_base(g0, e0, v);
      sr_acc_ext_base(g1, e1, v);
    }
    // Virtual thread v holds G0, G1 at z = v mod N: 8 uints each in scratch, then one thread per
    // output adds the vt / N virtual threads of its z.
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint at = 8u * (tid * MSL_LANES + l);
      for (uint c = 0u; c < 4u; c++) {
        scratch[at + c] = lanes_get(g0[c], l);
        scratch[at + 4u + c] = lanes_get(g1[c], l);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint o = tid; o < width; o += tpg) {
      uint t = o >> (log_n + 2u);  // 0: G0, 1: G1
      uint z = (o >> 2u) & (n - 1u);
      uint c = o & 3u;
      uint sum = 0u;
      for (uint j = 0u; j < per_z; j++) sum = bb_add(sum, scratch[8u * ((j << log_n) + z) + 4u * t + c]);
      sums[k * width + o] = sum;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // scratch is written again by the next chunk
  }
}

struct SrUniWeighParams {
  uint slice_first;  // as SrUniParams
  uint slice_count;
  uint chunk0;
  uint chunks;
  uint log_n;
  uint row;  // partials row of group 0 (rows: 12·N uints each)
};

// Round 0 of the stacked reduction, second pass: the slice weights a_s, bw_s (descriptor words)
// applied to the chunk sums of sr_uni_chunks,
//   A[z] = Σ_k a_s·G0_k[z],  B[z] = Σ_k bw_s·G0_k[z],  C[z] = Σ_k bw_s·(G1_k[z] − G0_k[z])
// (s the slice of chunk k): the IDFT-free sums whose IDFTs are cpuref's qa, qb, qc. Thread tid
// of a group works on z = tid mod N (tpg a multiple of N) and on every (ngroups·tpg / N)-th chunk;
// group g writes its part of A, B, C to partials row (row + g) (12·N uints). scratch: 48 bytes
// per thread.
kernel void sr_uni_weigh(device const uint* sums [[buffer(0)]],
                         device const uint* slices [[buffer(1)]],
                         device uint* partials [[buffer(2)]],
                         constant SrUniWeighParams& p [[buffer(3)]],
                         threadgroup uint* scratch [[threadgroup(0)]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint group [[threadgroup_position_in_grid]],
                         uint tpg [[threads_per_threadgroup]],
                         uint ngroups [[threadgroups_per_grid]]) {
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint z = tid & (n - 1u);
  uint per_group = tpg >> log_n;
  uint workers = ngroups * per_group;
  uint width = 8u * n;
  bb4 acc_a = bb4_zero();
  bb4 acc_b = bb4_zero();
  bb4 acc_c = bb4_zero();
  for (uint kk = group * per_group + (tid >> log_n); kk < p.chunks; kk += workers) {
    uint k = p.chunk0 + kk;
    uint d = sr_find_slice(slices, p.slice_first, p.slice_count, k) * SR_SLICE_WORDS;
    bb4 g0 = bb4_load(sums + k * width, z);
    bb4 a = bb4_make(slices[d + SR_A], slices[d + SR_A + 1u], slices[d + SR_A + 2u], slices[d + SR_A + 3u]);
    acc_a = bb4_add(acc_a, bb4_mul(a, g0));
    if (slices[d + SR_ROT] != 0u) {
      bb4 g1 = bb4_load(sums + k * width + 4u * n, z);
      bb4 bw = bb4_make(slices[d + SR_BW], slices[d + SR_BW + 1u], slices[d + SR_BW + 2u], slices[d + SR_BW + 3u]);
      acc_b = bb4_add(acc_b, bb4_mul(bw, g0));
      acc_c = bb4_add(acc_c, bb4_mul(bw, bb4_sub(g1, g0)));
    }
  }
  for (uint c = 0u; c < 4u; c++) {
    scratch[12u * tid + c] = acc_a[c];
    scratch[12u * tid + 4u + c] = acc_b[c];
    scratch[12u * tid + 8u + c] = acc_c[c];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  uint out_width = 12u * n;
  uint row = p.row + group;
  for (uint o = tid; o < out_width; o += tpg) {
    uint t = o >> (log_n + 2u);  // 0: A, 1: B, 2: C
    uint zz = (o >> 2u) & (n - 1u);
    uint c = o & 3u;
    uint sum = 0u;
    for (uint j = 0u; j < per_group; j++) sum = bb_add(sum, scratch[12u * ((j << log_n) + zz) + 4u * t + c]);
    partials[row * out_width + o] = sum;
  }
}

struct SrBindQParams {
  uint entries;  // width · 2^n_stack table entries (= blocks of Q)
  uint log_n;    // l_skip
  uint out_off;  // Fp4 index in the q table of the commitment's first entry
};

// q(u_0; x) for every block: out[out_off + e] = Σ_{z<N} L_z·Q[e·N + z], L_z = the Lagrange
// weights of u_0 on the order-N subgroup (lag: N Fp4), so that out = Σ_j coef_j·u_0^j for the
// block's IDFT coefficients (cpuref's Horner of them). Entry e = m·2^n_stack + x is block x of
// column m. Lanes: MSL_LANES consecutive entries per work item. With N = 16 a work item's blocks
// are one bb4l_load_block on the host (value z of every lane's block in one vector); on GPUs the
// block's 64 bytes as four 16-byte loads and the result as one 16-byte store (with a load per
// value, each load instruction of a SIMD group touched 32 lines, 16 times).
kernel void sr_bind_q(device const uint* q [[buffer(0)]],
                      device const uint* lag [[buffer(1)]],
                      device uint* out [[buffer(2)]],
                      constant SrBindQParams& p [[buffer(3)]],
                      uint gid [[thread_position_in_grid]],
                      uint stride [[threads_per_grid]]) {
  uint entries = p.entries;
  uint log_n = p.log_n;
  uint n = 1u << log_n;
  uint out_off = p.out_off;
  uint lstride = lane_stride(stride);
  for (uint e0 = lane_first(gid, entries); e0 < entries; e0 += lstride) {
    uint nl = min(MSL_LANES, entries - e0);
#if MSL_LANES == 1
    // One block a work item (GPUs): each coordinate's 16 products summed four at a time as
    // widening products, one reduction per four (4p² < 2p·2^32: bb_redc_wide's bound) instead of a
    // Montgomery product and a modular addition each (ncu, keccakf-1024 on an H200: 185 µs, half
    // the issue slots busy for 352 MB of Q).
    if (n == 16u) {
      uint v[16];
      for (uint a = 0u; a < 4u; a++) {
        bb4 x = bb4_load_aligned(q + (e0 << log_n), a);
        for (uint c = 0u; c < 4u; c++) v[4u * a + c] = x[c];
      }
      uint r[4];
      for (uint c = 0u; c < 4u; c++) {
        uint sum = 0u;
        for (uint z = 0u; z < 16u; z += 4u) {
          sum = bb_add(sum, bb_redc_wide(bb_wide_mad(bb_wide_mad(bb_wide_mad(bb_wide_mul(lag[4u * z + c], v[z]), lag[4u * (z + 1u) + c], v[z + 1u]),
                                                                 lag[4u * (z + 2u) + c], v[z + 2u]),
                                                     lag[4u * (z + 3u) + c], v[z + 3u])));
        }
        r[c] = sum;
      }
      bb4_store_aligned(out, out_off + e0, bb4_make(r[0], r[1], r[2], r[3]));
      continue;
    }
#endif
    lanes_uint acc[4];
    for (uint c = 0u; c < 4u; c++) acc[c] = lanes_splat(0u);
    if (MSL_LANES == 16u && n == 16u && nl == MSL_LANES) {
      lanes_uint v[16];
      bb4l_load_block(v, q + (e0 << log_n));  // v[z]: value z of every lane's block
      for (uint z = 0u; z < 16u; z++) {
        lanes_uint lz[4];
        sr_load_e_uniform(lz, lag, z);
        sr_acc_ext_base(acc, lz, v[z]);
      }
    } else {
      for (uint z = 0u; z < n; z++) {
        uint tv[MSL_LANES];
        for (uint l = 0u; l < MSL_LANES; l++) tv[l] = l < nl ? q[((e0 + l) << log_n) + z] : 0u;
        lanes_uint v = lanes_ld_th(tv);
        lanes_uint lz[4];
        sr_load_e_uniform(lz, lag, z);
        sr_acc_ext_base(acc, lz, v);
      }
    }
    if (MSL_LANES == 1u) {
      bb4_store_aligned(out, out_off + e0, bb4_make(lanes_get(acc[0], 0u), lanes_get(acc[1], 0u), lanes_get(acc[2], 0u),
                                                    lanes_get(acc[3], 0u)));
      continue;
    }
    for (uint l = 0u; l < nl; l++) {
      for (uint c = 0u; c < 4u; c++) out[4u * (out_off + e0 + l) + c] = lanes_get(acc[c], l);
    }
  }
}

struct SrSliceWeightsParams {
  uint count;                       // slices in the table
  uint lam0, lam1, lam2, lam3;      // λ (Montgomery)
};

// The batching weights of every slice of log height ≥ l_skip, from λ alone (stark.StackingBatch):
// a = λ^(2k), and where bit s of rot_bits is set bw = λ^(2k+1) and SR_ROT = 1 (else bw = 0,
// SR_ROT = 0), k = the descriptor's SR_CLAIM. On the device, so that after the transcript's
// absorb of the column openings only λ (one dispatch's parameters) and the flags (a bit a slice)
// go up: on the host the 2,633 weights of keccakf-1024, their Montgomery form and the
// descriptors' upload took ≈ 0.55 ms with the device idle. Short slices are left as they are.
kernel void sr_slice_weights(device uint* slices [[buffer(0)]],
                             device const uint* rot_bits [[buffer(1)]],
                             constant SrSliceWeightsParams& p [[buffer(2)]],
                             uint gid [[thread_position_in_grid]],
                             uint stride [[threads_per_grid]]) {
  bb4 lam = bb4_make(p.lam0, p.lam1, p.lam2, p.lam3);
  bb4 lsq = bb4_mul(lam, lam);
  for (uint s = gid; s < p.count; s += stride) {
    uint d = s * SR_SLICE_WORDS;
    if (slices[d + SR_SHORT] != 0u) continue;
    bb4 a = bb4_pow(lsq, slices[d + SR_CLAIM]);
    uint rot = (rot_bits[s >> 5u] >> (s & 31u)) & 1u;
    bb4 bw = rot != 0u ? bb4_mul(a, lam) : bb4_zero();
    for (uint c = 0u; c < 4u; c++) {
      slices[d + SR_A + c] = a[c];
      slices[d + SR_BW + c] = bw[c];
    }
    slices[d + SR_ROT] = rot;
  }
}

struct SrBindWeightsParams {
  uint count;    // slices in the table
  uint uni_off;  // Fp4 index in uni of (a0, b0 − c0, c0)
};

// The bind weights of every slice of log height ≥ l_skip (BindUnivariate): with the slice's
// batching weights a, bw (descriptor words) and three scalars of u_0 shared by those slices,
//   weights[2s] = α_s = a·a0 + bw·(b0 − c0),  weights[2s + 1] = β_s = bw·c0
// (cpuref's a·a0·e[xl] + bw·(b0·e[xl] + c0·(e[xl−1] − e[xl])) = α·e[xl] + β·e[xl−1]). Short
// slices are left as they are (the host writes theirs).
kernel void sr_bind_weights(device const uint* slices [[buffer(0)]],
                            device const uint* uni [[buffer(1)]],
                            device uint* weights [[buffer(2)]],
                            constant SrBindWeightsParams& p [[buffer(3)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  bb4 a0 = bb4_load(uni, p.uni_off);
  bb4 bmc = bb4_load(uni, p.uni_off + 1u);
  bb4 c0 = bb4_load(uni, p.uni_off + 2u);
  for (uint s = gid; s < p.count; s += stride) {
    uint d = s * SR_SLICE_WORDS;
    if (slices[d + SR_SHORT] != 0u) continue;
    bb4 a = bb4_make(slices[d + SR_A], slices[d + SR_A + 1u], slices[d + SR_A + 2u], slices[d + SR_A + 3u]);
    bb4 bw = bb4_make(slices[d + SR_BW], slices[d + SR_BW + 1u], slices[d + SR_BW + 2u], slices[d + SR_BW + 3u]);
    bb4_store(weights, 2u * s, bb4_add(bb4_mul(a, a0), bb4_mul(bw, bmc)));
    bb4_store(weights, 2u * s + 1u, bb4_mul(bw, c0));
  }
}

struct SrBindWParams {
  uint slice_first;  // slices in the table
  uint slice_count;
  uint chunk0;       // the first chunk of slice_first
  uint chunks;       // chunks of those slices
  uint log_cb;       // log2 of the blocks per chunk
  uint per_entry;    // 1 (GPUs): an entry a work item (see sr_bind_w)
};

// W(u_0; x) for every slice: w[w_start + xl] = α_s·e[xl] + β_s·e[(xl − 1) mod 2^nn] for
// xl < 2^nn, with (α_s, β_s) = weights[8(s − slice_first) ..] (two Fp4). A slice of log height
// < l_skip is given as nn = 0 (e_0 = [1]) with α_s its one value and β_s = 0. Entries of the
// table that no slice covers are left as they are (zero from allocation). Work unit: 4·MSL_LANES
// consecutive entries of one chunk (one slice look-up per unit), as transposed blocks
// (bb4_lanes.h) when the slice holds whole units and xl − 1 does not wrap, else one by one.
kernel void sr_bind_w(device const uint* slices [[buffer(0)]],
                      device const uint* weights [[buffer(1)]],
                      device const uint* etab [[buffer(2)]],
                      device uint* w [[buffer(3)]],
                      constant SrBindWParams& p [[buffer(4)]],
                      uint gid [[thread_position_in_grid]],
                      uint stride [[threads_per_grid]]) {
  uint first = p.slice_first;
  uint count = p.slice_count;
  uint log_cb = p.log_cb;
  uint log_unit = MSL_LOG_LANES + 2u;  // entries per unit: 4·MSL_LANES (≤ 64 ≤ 2^log_cb)
  uint unit = 4u * MSL_LANES;
  uint log_upc = log_cb - log_unit;
  uint units = p.chunks << log_upc;
  uint chunk0 = p.chunk0;
  if (p.per_entry != 0u) {
    // GPUs: an entry a work item, written as one 16-byte store, so that a SIMD group's stores
    // cover whole lines (four entries a thread, 64 bytes apart from the neighbour's, kept L2 busy
    // with partial writes); a chunk (≥ 64 entries) is one slice, so a SIMD group's look-ups agree.
    uint entries = p.chunks << log_cb;
    for (uint u = gid; u < entries; u += stride) {
      uint k = chunk0 + (u >> log_cb);
      uint s = sr_find_slice(slices, first, count, k);
      uint d = s * SR_SLICE_WORDS;
      uint size = 1u << slices[d + SR_NN];
      uint xl = ((k - slices[d + SR_CHUNK0]) << log_cb) + (u & ((1u << log_cb) - 1u));
      if (xl >= size) continue;
      uint e_off = slices[d + SR_E_OFF];
      bb4 v = bb4_mul(bb4_load(weights, 2u * (s - first)), bb4_load(etab, e_off + xl));
      bb4 beta = bb4_load(weights, 2u * (s - first) + 1u);
      if (!bb4_is_zero(beta)) v = bb4_add(v, bb4_mul(beta, bb4_load(etab, e_off + ((xl - 1u) & (size - 1u)))));
      bb4_store_aligned(w, slices[d + SR_W_START] + xl, v);
    }
    return;
  }
  for (uint u = gid; u < units; u += stride) {
    uint k = chunk0 + (u >> log_upc);
    uint s = sr_find_slice(slices, first, count, k);
    uint d = s * SR_SLICE_WORDS;
    uint size = 1u << slices[d + SR_NN];
    uint blk0 = ((k - slices[d + SR_CHUNK0]) << log_cb) + ((u & ((1u << log_upc) - 1u)) << log_unit);
    if (blk0 >= size) continue;
    uint mask = size - 1u;
    uint e_off = slices[d + SR_E_OFF];
    uint w_start = slices[d + SR_W_START];
    bb4 alpha = bb4_load(weights, 2u * (s - first));
    bb4 beta = bb4_load(weights, 2u * (s - first) + 1u);
    bool rot = !bb4_is_zero(beta);
    if (size >= unit && blk0 > 0u) {
      lanes_uint cur[16];
      lanes_uint r[16];
      bb4l_load_block(cur, etab + 4u * (e_off + blk0));
      lanes_uint al[7];
      bb4l_uniform_of(al, alpha);
      for (uint a = 0u; a < 4u; a++) bb4l_mul_uniform(r + 4u * a, al, cur + 4u * a);
      if (rot) {
        bb4l_load_block(cur, etab + 4u * (e_off + blk0 - 1u));  // e[xl − 1]
        lanes_uint be[7];
        bb4l_uniform_of(be, beta);
        for (uint a = 0u; a < 4u; a++) bb4l_mul_uniform_acc(r + 4u * a, be, cur + 4u * a);
      }
      lanes_transpose(r);  // back to 16 consecutive uints per vector
      for (uint j = 0u; j < 16u; j++) lanes_st_dev(w + 4u * (w_start + blk0) + j * MSL_LANES, r[j]);
    } else {
      uint blk1 = min(blk0 + unit, size);
      for (uint xl = blk0; xl < blk1; xl++) {
        bb4 v = bb4_mul(alpha, bb4_load(etab, e_off + xl));
        if (rot) v = bb4_add(v, bb4_mul(beta, bb4_load(etab, e_off + ((xl - 1u) & mask))));
        bb4_store(w, w_start + xl, v);
      }
    }
  }
}

struct ScTrRoundParams {
  uint at;  // s(1), s(2) go to trlog[at], trlog[at + 1], the sampled bound value to trlog[at + 2]
};

// The transcript step of a product-sumcheck round on the device (kernels.DeviceTranscript): the
// round's sums s(1), s(2) (sums: kernels.Sumcheck's result, Montgomery) logged, observed, and the
// bound value sampled and logged; the next round's fold reads it from the log
// (ScFoldRoundParams.alpha_at). Eight observes precede the sample, so a permutation always runs
// in this kernel before it reads the sponge's outputs. One group of ≥ 16 threads
// (poseidon2_group.h); scratch: 48 + P2G_RC_LEN uints.
kernel void sc_tr_round(device const uint* sums [[buffer(0)]],
                        device uint* trlog [[buffer(1)]],
                        device uint* ts [[buffer(2)]],
                        constant uint* rc [[buffer(3)]],
                        constant ScTrRoundParams& p [[buffer(4)]],
                        threadgroup uint* scratch [[threadgroup(0)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint tpg [[threads_per_threadgroup]]) {
  threadgroup uint* xs = scratch;
  threadgroup uint* out = scratch + 32u;
  threadgroup uint* rcs = scratch + 48u;
  // The sums and the sponge loaded before the constants' copy and its barrier: one memory latency.
  bb4 s1 = bb4_load(sums, 0u);
  bb4 s2 = bb4_load(sums, 1u);
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  p2g_load_constants(rc, rcs, tid, tpg);
  bb4 sv[2];
  sv[0] = s1;
  sv[1] = s2;
  MSL_NO_UNROLL  // one copy of the observes' permutation in the kernel's code
  for (uint k = 0u; k < 2u; k++) p2g_observe4(sp, sv[k], rcs, tid, xs, out);
  bb4 r = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) {
    bb4_store(trlog, p.at, s1);
    bb4_store(trlog, p.at + 1u, s2);
    bb4_store(trlog, p.at + 2u, r);
  }
  threadgroup_barrier(mem_flags::mem_device);  // every thread has read ts
  p2g_sponge_store(ts, sp, tid);
}

// A transcript's state (transcript.Transcript.State: the sponge in Montgomery form, then the
// absorb and sample indices), as kernel parameters.
struct TrStateParams {
  uint s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15;
  uint absorb_idx, sample_idx;
};

// Sets a device transcript's state (kernels.DeviceTranscript.EncodeSetState) in stream order:
// an upload would wait for the work before it, this waits for nothing. One thread.
kernel void tr_set_state(device uint* ts [[buffer(0)]],
                         constant TrStateParams& p [[buffer(1)]],
                         uint tid [[thread_position_in_grid]]) {
  if (tid != 0u) return;
  ts[0] = p.s0;
  ts[1] = p.s1;
  ts[2] = p.s2;
  ts[3] = p.s3;
  ts[4] = p.s4;
  ts[5] = p.s5;
  ts[6] = p.s6;
  ts[7] = p.s7;
  ts[8] = p.s8;
  ts[9] = p.s9;
  ts[10] = p.s10;
  ts[11] = p.s11;
  ts[12] = p.s12;
  ts[13] = p.s13;
  ts[14] = p.s14;
  ts[15] = p.s15;
  ts[16] = p.absorb_idx;
  ts[17] = p.sample_idx;
}

struct TrObserveSampleParams {
  uint src_off;  // uint index in src of the first value observed (Montgomery)
  uint n;        // values observed
  uint sample;   // 1: then an Fp4 sampled into trlog[at]
  uint at;
};

// A transcript step on the device (kernels.DeviceTranscript) over values another kernel left in
// device memory: src[src_off .. src_off + n) observed (a Merkle root, an evaluation), then, when
// asked, an Fp4 sampled into the log. One group of ≥ 16 threads (poseidon2_group.h); scratch:
// 48 + P2G_RC_LEN uints.
kernel void tr_observe_sample(device const uint* src [[buffer(0)]],
                              device uint* trlog [[buffer(1)]],
                              device uint* ts [[buffer(2)]],
                              constant uint* rc [[buffer(3)]],
                              constant TrObserveSampleParams& p [[buffer(4)]],
                              threadgroup uint* scratch [[threadgroup(0)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint tpg [[threads_per_threadgroup]]) {
  threadgroup uint* xs = scratch;
  threadgroup uint* out = scratch + 32u;
  threadgroup uint* rcs = scratch + 48u;
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  p2g_load_constants(rc, rcs, tid, tpg);
  for (uint i = 0u; i < p.n; i++) p2g_observe(sp, src[p.src_off + i], rcs, tid, xs, out);
  if (p.sample != 0u) {
    bb4 z = p2g_sample4(sp, rcs, tid, xs, out);
    if (tid == 0u) bb4_store(trlog, p.at, z);
  }
  threadgroup_barrier(mem_flags::mem_device);  // every thread has read ts
  p2g_sponge_store(ts, sp, tid);
}

// sc_tr_round_grind's marker of a pass without a hit.
#define SC_TR_NO_WITNESS 0xffffffffu

struct ScTrGrindParams {
  uint at;    // s(1), s(2) go to trlog[at], trlog[at + 1], the witness (w, 0, 0, 0) to trlog[at + 2],
              // the sampled bound value to trlog[at + 3]
  uint bits;  // the proof of work's bits (0: none, the transcript untouched by it)
};

// sc_tr_round with WHIR's folding proof of work between the observes and the sample
// (transcript.GrindWith, then SampleExt): the smallest witness w whose observe and checked sample
// leave the low bits zero, searched S = tpg / 16 candidates at a time (candidate base + g permuted
// by the 16 threads g·16 .. g·16 + 15, on GPUs lanes of one SIMD group; on the host device each
// with its own exchange buffer). With the witness at absorb index a, a candidate's check is one
// permutation of the state with w at a and the low bits of element 7 (transcript.WitnessOK), and
// that permuted state is the sponge's after the observe of w and the checked sample: the sponge
// continues from the winner's. One group of 16·S threads; scratch: P2G_RC_LEN + 17 + 33·S uints.
kernel void sc_tr_round_grind(device const uint* sums [[buffer(0)]],
                              device uint* trlog [[buffer(1)]],
                              device uint* ts [[buffer(2)]],
                              constant uint* rc [[buffer(3)]],
                              constant ScTrGrindParams& p [[buffer(4)]],
                              threadgroup uint* scratch [[threadgroup(0)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint tpg [[threads_per_threadgroup]]) {
  uint S = tpg >> 4u;
  uint g = tid >> 4u;
  uint k = tid & 15u;
  threadgroup uint* rcs = scratch;
  threadgroup uint* out = scratch + P2G_RC_LEN;  // the sponge's outputs (16), then the winner's state
  threadgroup uint* hit = out + 16u;            // a pass's hit flag per candidate (S)
  threadgroup uint* xs = hit + 1u + S;          // 32 a candidate; the first 32 also the sponge's
  p2g_sponge sp;
  p2g_sponge_load(sp, ts, tid);
  bb4 s1 = bb4_load(sums, 0u);
  bb4 s2 = bb4_load(sums, 1u);
  p2g_load_constants(rc, rcs, tid, tpg);
  bb4 sv[2];
  sv[0] = s1;
  sv[1] = s2;
  MSL_NO_UNROLL  // one copy of the observes' permutation in the kernel's code
  for (uint j = 0u; j < 2u; j++) p2g_observe4(sp, sv[j], rcs, tid, xs, out);
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the observes' exchanges read before the candidates write
  uint w = 0u;
  if (p.bits != 0u) {
    uint mask = (1u << p.bits) - 1u;
    for (uint base = 0u;; base += S) {  // uniform: every thread reads the same flags
      p2g_sponge c;
      c.x = k == sp.absorb ? p2_mul(base + g, BB_R2) : sp.x;
      c.buf = 0u;
      c.absorb = 0u;
      c.sample = 0u;
      p2g_permute(c, rcs, tid, xs + 32u * g);
      if (k == 7u) hit[g] = (p2_mul(c.x, 1u) & mask) == 0u ? 1u : 0u;
      threadgroup_barrier(mem_flags::mem_threadgroup);
      uint f = SC_TR_NO_WITNESS;
      for (uint j = 0u; j < S; j++) {
        if (f == SC_TR_NO_WITNESS && hit[j] != 0u) f = j;
      }
      if (f != SC_TR_NO_WITNESS) {
        if (g == f) out[k] = c.x;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        sp.x = out[k];
        w = base + f;
        break;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);  // the flags read before the next pass writes them
    }
    sp.absorb = 0u;
    sp.sample = P2_RATE - 1u;  // the checked sample (element 7) taken
  }
  bb4 alpha = p2g_sample4(sp, rcs, tid, xs, out);
  if (tid == 0u) {
    bb4_store(trlog, p.at, s1);
    bb4_store(trlog, p.at + 1u, s2);
    bb4_store(trlog, p.at + 2u, bb4_make(p2_mul(w, BB_R2), 0u, 0u, 0u));
    bb4_store(trlog, p.at + 3u, alpha);
  }
  threadgroup_barrier(mem_flags::mem_device);  // every thread has read ts
  p2g_sponge_store(ts, sp, tid);
}

struct SrUniCoeffsParams {
  uint ncoef;      // 2N − 1
  uint abc;        // 1: the Fp4 sums A, B, C at result[0 ..) (0: none, all zero)
  uint shorts;     // short slices: their blocks of N base values from word short_off of result
  uint n;          // N = 2^l_skip
  uint short_off;  // word index in result of the first short block
  uint at;         // log entry of the first coefficient
  uint poly_off;   // Fp4 index in polys of eq_D(r_0, Z), eq_D(r_0·ω, Z), eq_D(1, Z)·eq_D(r_0·ω, 1)
  uint spoly_off;  // Fp4 index in spolys of the short slices' weight polynomials
  uint winv;       // ω^(−1), ω of order N (Montgomery)
  uint ninv;       // N^(−1) (Montgomery)
};

// sr_uni_coeffs' threadgroup memory: the twiddles ω^(−j) (32 words), then the inverse DFTs of a
// chunk of SR_UNI_CHUNK_ENTRIES / N of the products' vectors (Fp4).
#define SR_UNI_CHUNK_ENTRIES 256u

// Round 0's 2N − 1 coefficients s_0 on the device (UnivariateRound's host formula, smallIDFT and
// polyMulAcc): Σ over A, B, C of IDFT(·)·its eq_D polynomial (polys from poly_off: functions of
// r_0, uploaded with the prover), plus per short slice IDFT(block)·its weight polynomial (spolys
// from spoly_off: with the batching weights), coefficient i into log[at + i]. One group: per chunk
// of vectors, the inverse DFTs' entries c_m = N^(−1)·Σ_z ω^(−mz)·v[z] a thread each into
// threadgroup memory, then a thread a coefficient adds Σ_m c_m·poly[i − m].
kernel void sr_uni_coeffs(device const uint* result [[buffer(0)]],
                          device const uint* polys [[buffer(1)]],
                          device const uint* spolys [[buffer(2)]],
                          device uint* log [[buffer(3)]],
                          constant SrUniCoeffsParams& p [[buffer(4)]],
                          threadgroup uint* tg [[threadgroup(0)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint tpg [[threads_per_threadgroup]]) {
  uint n = p.n;
  threadgroup uint* tw = tg;
  threadgroup uint* cs = tg + 32u;
  if (tid == 0u) {
    uint w = BB_ONE;
    for (uint j = 0u; j < n; j++) {
      tw[j] = w;
      w = bb_mul(w, p.winv);
    }
  }
  uint abc = p.abc != 0u ? 3u : 0u;  // A, B, C first, then the short blocks
  uint vectors = abc + p.shorts;
  uint per = SR_UNI_CHUNK_ENTRIES / n;  // vectors a chunk
  bb4 acc = bb4_zero();
  for (uint v0 = 0u; v0 < vectors; v0 += per) {
    uint nv = min(per, vectors - v0);
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the twiddles; the chunk before is used
    for (uint e = tid; e < nv * n; e += tpg) {
      uint v = v0 + e / n;
      uint m = e % n;
      bb4 c = bb4_zero();
      if (v < abc) {
        for (uint z = 0u; z < n; z++) c = bb4_add(c, bb4_mul_base(bb4_load(result, v * n + z), tw[(m * z) % n]));
      } else {
        uint b = 0u;
        for (uint z = 0u; z < n; z++) b = bb_add(b, bb_mul(result[p.short_off + (v - abc) * n + z], tw[(m * z) % n]));
        c = bb4_lift(b);
      }
      bb4_store_tg(cs, e, bb4_mul_base(c, p.ninv));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < p.ncoef) {
      uint i = tid;
      for (uint vv = 0u; vv < nv; vv++) {
        uint v = v0 + vv;
        device const uint* poly = v < abc ? polys + 4u * (p.poly_off + v * n) : spolys + 4u * (p.spoly_off + (v - abc) * n);
        for (uint m = (i >= n ? i - n + 1u : 0u); m <= min(i, n - 1u); m++) {
          acc = bb4_add(acc, bb4_mul(bb4_load_tg(cs, vv * n + m), bb4_load(poly, i - m)));
        }
      }
    }
  }
  if (tid < p.ncoef) bb4_store(log, p.at + tid, acc);
}

// eval_eq_uni (stark.EqUni): eq_D(x, y) over the subgroup of order 2^l, inv2l = 2^(−l).
MSL_FN bb4 sr_eq_uni(uint l, bb4 x, bb4 y, uint inv2l) {
  bb4 res = bb4_one();
  for (uint i = 0u; i < l; i++) {
    res = bb4_add(bb4_mul(bb4_add(x, y), res), bb4_mul(bb4_sub(x, bb4_one()), bb4_sub(y, bb4_one())));
    x = bb4_square(x);
    y = bb4_square(y);
  }
  return bb4_mul_base(res, inv2l);
}

// eval_eq_uni_at_one (stark.EqUniAtOne): 2^(−l)·Π_{i<l} (x^(2^i) + 1).
MSL_FN bb4 sr_eq_uni_at_one(uint l, bb4 x, uint inv2l) {
  bb4 res = bb4_one();
  for (uint i = 0u; i < l; i++) {
    res = bb4_mul(res, bb4_add_base(x, BB_ONE));
    x = bb4_square(x);
  }
  return bb4_mul_base(res, inv2l);
}

struct SrUniBindParams {
  uint cst_off; // Fp4 index of cst in its buffer
  uint l;       // l_skip
  uint u_at;    // log entry of u_0
  uint shorts;  // short slices
  uint winv;    // ω^(−1), ω of order N (Montgomery)
  uint inv2;    // 1/2 (Montgomery)
};

// BindUnivariate's scalars of u_0 (the log's entry u_at) on the device: lag[z] = L_z(u_0) =
// N^(−1)·Σ_j u_0^j·ω^(−jz) for z < N, then lag[N..N+3) = a0, b0 − c0, c0 with a0 = eq_D(u_0, r_0),
// b0 = eq_D(u_0, r_0·ω), c0 = eq_D(u_0, 1)·cst[2] (cst, from cst_off: r_0, r_0·ω, eq_D(r_0·ω, 1)). Per
// short slice k (sinfo[3k ..]: its weights entry, l + nn, −nn; scst[4k ..]: a, bw, r', r'·ω'):
// weights[entry] = (a·eq_{D'}(u_0, r') + bw·eq_{D'}(u_0, r'·ω'))·eq_{D''}(u_0^(2^(l+nn)), 1), D' of
// order 2^(l+nn), D'' of order 2^(−nn) (cpuref's InUni). One group.
kernel void sr_uni_bind(device const uint* log [[buffer(0)]],
                        device const uint* cst [[buffer(1)]],
                        device const uint* scst [[buffer(2)]],
                        device const uint* sinfo [[buffer(3)]],
                        device uint* lag [[buffer(4)]],
                        device uint* weights [[buffer(5)]],
                        constant SrUniBindParams& p [[buffer(6)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint tpg [[threads_per_threadgroup]]) {
  bb4 u = bb4_load(log, p.u_at);
  uint n = 1u << p.l;
  uint inv2l = BB_ONE;
  for (uint i = 0u; i < p.l; i++) inv2l = bb_mul(inv2l, p.inv2);
  for (uint z = tid; z < n + 1u + p.shorts; z += tpg) {
    if (z < n) {
      uint step = BB_ONE;  // ω^(−z)
      for (uint i = 0u; i < z; i++) step = bb_mul(step, p.winv);
      bb4 acc = bb4_zero();
      bb4 pw = bb4_one();
      uint w = BB_ONE;  // ω^(−jz)
      for (uint j = 0u; j < n; j++) {
        acc = bb4_add(acc, bb4_mul_base(pw, w));
        pw = bb4_mul(pw, u);
        w = bb_mul(w, step);
      }
      bb4_store(lag, z, bb4_mul_base(acc, inv2l));  // N^(−1) = 2^(−l)
    } else if (z == n) {
      bb4 a0 = sr_eq_uni(p.l, u, bb4_load(cst, p.cst_off), inv2l);
      bb4 b0 = sr_eq_uni(p.l, u, bb4_load(cst, p.cst_off + 1u), inv2l);
      bb4 c0 = bb4_mul(sr_eq_uni_at_one(p.l, u, inv2l), bb4_load(cst, p.cst_off + 2u));
      bb4_store(lag, n, a0);
      bb4_store(lag, n + 1u, bb4_sub(b0, c0));
      bb4_store(lag, n + 2u, c0);
    } else {
      uint k = z - n - 1u;
      uint entry = sinfo[3u * k];
      uint lp = sinfo[3u * k + 1u];
      uint neg = sinfo[3u * k + 2u];
      uint inv2lp = BB_ONE;
      for (uint i = 0u; i < lp; i++) inv2lp = bb_mul(inv2lp, p.inv2);
      uint inv2neg = BB_ONE;
      for (uint i = 0u; i < neg; i++) inv2neg = bb_mul(inv2neg, p.inv2);
      bb4 v = bb4_add(bb4_mul(bb4_load(scst, 4u * k), sr_eq_uni(lp, u, bb4_load(scst, 4u * k + 2u), inv2lp)),
                      bb4_mul(bb4_load(scst, 4u * k + 1u), sr_eq_uni(lp, u, bb4_load(scst, 4u * k + 3u), inv2lp)));
      bb4 x = u;
      for (uint i = 0u; i < lp; i++) x = bb4_square(x);
      bb4_store(weights, entry, bb4_mul(v, sr_eq_uni_at_one(neg, x, inv2neg)));
    }
  }
}
