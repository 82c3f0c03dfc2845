// zc_uni_body.h - round 0 of the batch constraint sumcheck by the whole program (zerocheck.metal
// has the scratch layout and the strategies): its parameters, the slot values of a unit of points
// (point mode, coset mode, the selectors) and the body zc_uni_body, a template over the evaluator
// of the program. zerocheck.metal instantiates it with the lane interpreter (zc_uni_eval); the
// module template zerocheck_whole.metal with an AIR's generated straight-line code (zc_uni_whole,
// internal/kernels/piececode.Whole), which CUDA, Metal and the host device compile at run time:
// both kernels share this one body.
#ifndef ZC_UNI_BODY_H
#define ZC_UNI_BODY_H
#include "program_lanes.h"
#include "zc_uni.h"

#define ZC_NONE 0xffffffffu
#define ZC_MAX_N 32u  // largest block (l_skip ≤ 5): thread arrays of the coset DFTs

// Layout of the scratch arrays (see above): il is the launcher's interleave.
MSL_FN uint zc_T(uint G, uint il) { return il != 0u ? G * MSL_LANES : MSL_LANES; }
MSL_FN uint zc_t(uint gid, uint il) { return il != 0u ? gid * MSL_LANES : 0u; }

// First word of lane group m (of groups per thread) of thread gid in an array of n entries per point.
MSL_FN uint zc_region(uint n, uint m, uint gid, uint G, uint groups, uint il) {
  if (il != 0u) return m * n * G * MSL_LANES;
  return (gid * groups + m) * n * MSL_LANES;
}

MSL_FN uint zc_reverse_bits(uint i, uint bits) {
  uint r = 0u;
  for (uint k = 0u; k < bits; k++) {
    r = (r << 1) | ((i >> k) & 1u);
  }
  return r;
}

// In-place DFT of n = 2^logn lane vectors: v[b] ← Σ_k v[k]·ω^{±bk} with ω = ω_M^step = tw[step]
// (tw: the M powers of ω_M, M = mask + 1; step = M/n), ω^{−1} when inverse. Radix-2 after a bit
// reversal; the lanes are independent transforms.
MSL_FN void zc_dft(thread lanes_uint* v, uint logn, device const uint* tw, uint mask, uint step, bool inverse) {
  uint n = 1u << logn;
  for (uint i = 0u; i < n; i++) {
    uint r = zc_reverse_bits(i, logn);
    if (r > i) {
      lanes_uint tmp = v[i];
      v[i] = v[r];
      v[r] = tmp;
    }
  }
  for (uint len = 2u; len <= n; len <<= 1) {
    uint hlen = len >> 1;
    uint tstep = step * (n / len);
    for (uint s = 0u; s < n; s += len) {
      for (uint k = 0u; k < hlen; k++) {
        uint e = (k * tstep) & mask;
        if (inverse) e = (mask + 1u - e) & mask;
        lanes_uint a = v[s + k];
        lanes_uint b = bb_mul_lanes(v[s + k + hlen], lanes_splat(tw[e]));
        v[s + k] = bb_add_lanes(a, b);
        v[s + k + hlen] = bb_sub_lanes(a, b);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Round 0.

struct ZcUniParams {
  uint log_n;         // N = 2^log_n rows per block
  uint log_m;         // M = 2^log_m points per block (M ≥ N)
  uint blocks;        // X: blocks of the lifted trace
  uint x0;            // first block of this slice
  uint slice_blocks;  // blocks of the slice (coefs and deltas hold them from block 0)
  uint unit;          // U: points per work unit (one fill of the slot scratch; a multiple of MSL_LANES)
  uint item;          // W: points per step of a thread (a multiple of U; G·W ≡ 0 mod M)
  uint coset_mode;    // 1: per-coset DFTs, lanes across columns (U = max(N, MSL_LANES)); 0: one point per lane (U = MSL_LANES)
  uint ncols;         // row length of coefs and deltas (a multiple of MSL_LANES)
  uint nslots;        // the program's slots (scratch entries per point)
  uint nregs;         // the program's registers
  uint sel_first;     // slot of is_first, or ZC_NONE when the program does not read it
  uint sel_last;
  uint sel_trans;
  uint has_den;       // add the constant denominator term (weights[nout]) to every point's den
  uint nout;          // outputs of the program
  uint zero;          // zero this thread's partial rows first (the first slice of a trace)
  uint eq_off;        // Fp4 index of e(0) in eq
  uint wide;          // host, coset mode, N ≥ MSL_LANES: store the cosets through 16×16 transposes
  uint interleave;    // scratch layout: 0 per-thread regions (host), 1 threads interleaved (GPUs)
  uint lanes;         // MSL_LANES the launcher assumed
};

// The value at ω_M^i of a block interpolant given by its N coefficients col[k·ncols] (k < n), plus
// init: Σ_k c_k·ω_M^{ik} + init.
MSL_FN uint zc_interp_at(device const uint* col, uint ncols, uint n, device const uint* tw, uint mmask, uint i, uint init) {
  uint acc = init;
  for (uint k = 0u; k < n; k++) acc = bb_add(acc, bb_mul(col[k * ncols], tw[(i * k) & mmask]));
  return acc;
}

// is_first and is_last at point ω_M^i of block x of X (sel: the first and the last block's values at
// the M points); is_transition = 1 − is_last.
MSL_FN uint zc_is_first(device const uint* sel, uint x, uint i) { return x == 0u ? sel[i] : 0u; }
MSL_FN uint zc_is_last(device const uint* sel, uint x, uint blocks, uint m, uint i) {
  return x == blocks - 1u ? sel[m + i] : 0u;
}

// The slot values of the U points of unit u, one point per lane: Σ_k c_k·ω_M^{ik} (rotation:
// at i + M/N, plus δ·L_{N−1}(ω_M^i)).
MSL_FN void zc_fill_points(uint u, constant ZcUniParams& p, device const uint* coefs, device const uint* deltas,
                           device const uint* srcmap, device const uint* tw, device const uint* lrow, device uint* slots,
                           uint gid, uint G) {
  uint il = p.interleave;
  uint log_n = p.log_n;
  uint log_m = p.log_m;
  uint n = 1u << log_n;
  uint mmask = (1u << log_m) - 1u;
  uint cosets = 1u << (log_m - log_n);
  uint ncols = p.ncols;
  uint U = p.unit;
  uint points = p.slice_blocks << log_m;
  uint T = zc_T(G, il);
  device uint* region = slots + zc_region(p.nslots, 0u, gid, G, 1u, il) + zc_t(gid, il);
  for (uint l = 0u; l < MSL_LANES; l++) {
    uint pp = u * U + l;
    if (pp >= points) break;
    uint xl = pp >> log_m;
    uint q = pp & mmask;
    uint i = (q >> log_n) + cosets * (q & (n - 1u));
    uint ir = (i + cosets) & mmask;
    device const uint* crow = coefs + (xl << log_n) * ncols;
    for (uint c = 0u; c < ncols; c++) {
      uint sl = srcmap[2u * c];
      uint sr = srcmap[2u * c + 1u];
      if (sl != ZC_NONE) region[sl * T + l] = zc_interp_at(crow + c, ncols, n, tw, mmask, i, 0u);
      if (sr != ZC_NONE) {
        region[sr * T + l] = zc_interp_at(crow + c, ncols, n, tw, mmask, ir, bb_mul(deltas[xl * ncols + c], lrow[i]));
      }
    }
  }
}

// The slot values of the U points of unit u by cosets of the N-th roots of unity: the points
// ω_M^{g + (M/N)·b}, b < N, of coset g are the DFT of the twisted coefficients c_k·ω_M^{gk} (lanes
// across MSL_LANES source columns); the rotation is the same coset at b + 1 plus δ·L_{N−1}.
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE
// zc_fill_cosets on the host for N a multiple of MSL_LANES (one coset per unit): the DFT outputs
// (vectors across 16 columns, one per b) are transposed 16×16 into vectors across b (one per
// column) and stored whole; the rotation is the same vector moved by one lane.
MSL_FN void zc_fill_cosets_wide(uint u, constant ZcUniParams& p, device const uint* coefs, device const uint* deltas,
                                device const uint* srcmap, device const uint* tw, device const uint* lrow,
                                device uint* slots, uint gid, uint G) {
  uint il = p.interleave;
  uint log_n = p.log_n;
  uint log_m = p.log_m;
  uint n = 1u << log_n;
  uint mmask = (1u << log_m) - 1u;
  uint cosets = 1u << (log_m - log_n);
  uint ncols = p.ncols;
  uint nslots = p.nslots;
  uint groups = n / MSL_LANES;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  uint p0 = u << log_n;
  if (p0 >= (p.slice_blocks << log_m)) return;
  uint xl = p0 >> log_m;
  uint g = (p0 & mmask) >> log_n;
  lanes_uint lr[ZC_MAX_N / MSL_LANES];
  for (uint m = 0u; m < groups; m++) {
    uint tmp[MSL_LANES];
    for (uint l = 0u; l < MSL_LANES; l++) tmp[l] = lrow[g + cosets * (m * MSL_LANES + l)];
    lr[m] = lanes_ld_th(tmp);
  }
  for (uint c0 = 0u; c0 < ncols; c0 += MSL_LANES) {
    bool any = false;
    for (uint c = 0u; c < 2u * MSL_LANES; c++) any = any || srcmap[2u * c0 + c] != ZC_NONE;
    if (!any) continue;
    lanes_uint v[ZC_MAX_N];
    device const uint* crow = coefs + (xl << log_n) * ncols + c0;
    for (uint k = 0u; k < n; k++) {
      lanes_uint ck = lanes_ld_dev(crow + k * ncols);
      v[k] = g != 0u ? bb_mul_lanes(ck, lanes_splat(tw[(g * k) & mmask])) : ck;
    }
    zc_dft(v, log_n, tw, mmask, cosets, false);
    lanes_uint delta = lanes_ld_dev(deltas + xl * ncols + c0);
    for (uint m = 0u; m < groups; m++) lanes_transpose(v + m * MSL_LANES);
    for (uint c = 0u; c < MSL_LANES; c++) {
      uint sl = srcmap[2u * (c0 + c)];
      uint sr = srcmap[2u * (c0 + c) + 1u];
      for (uint m = 0u; m < groups; m++) {
        device uint* dst = slots + zc_region(nslots, m, gid, G, groups, il) + t;
        lanes_uint loc = v[m * MSL_LANES + c];
        if (sl != ZC_NONE) lanes_st_dev(dst + sl * T, loc);
        if (sr != ZC_NONE) {
          lanes_uint nxt = v[((m + 1u) % groups) * MSL_LANES + c];
          lanes_uint rot = lanes_shift1(loc, nxt);
          lanes_st_dev(dst + sr * T, bb_add_lanes(rot, bb_mul_lanes(lanes_splat(lanes_get(delta, c)), lr[m])));
        }
      }
    }
  }
}
#endif

MSL_FN void zc_fill_cosets(uint u, constant ZcUniParams& p, device const uint* coefs, device const uint* deltas,
                           device const uint* srcmap, device const uint* tw, device const uint* lrow, device uint* slots,
                           uint gid, uint G) {
#if defined(MSL_TARGET_HOST) && LANES_SHUFFLE
  if (p.log_n >= MSL_LOG_LANES && p.wide != 0u) {
    zc_fill_cosets_wide(u, p, coefs, deltas, srcmap, tw, lrow, slots, gid, G);
    return;
  }
#endif
  uint il = p.interleave;
  uint log_n = p.log_n;
  uint log_m = p.log_m;
  uint n = 1u << log_n;
  uint mmask = (1u << log_m) - 1u;
  uint cosets = 1u << (log_m - log_n);
  uint ncols = p.ncols;
  uint nslots = p.nslots;
  uint U = p.unit;
  uint groups = U / MSL_LANES;
  uint per = U >> log_n;  // cosets per unit (1 when N ≥ MSL_LANES)
  uint points = p.slice_blocks << log_m;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  for (uint c0 = 0u; c0 < ncols; c0 += MSL_LANES) {
    for (uint kc = 0u; kc < per; kc++) {
      uint p0 = u * U + (kc << log_n);
      if (p0 >= points) break;
      uint xl = p0 >> log_m;
      uint g = (p0 & mmask) >> log_n;
      lanes_uint v[ZC_MAX_N];
      device const uint* crow = coefs + (xl << log_n) * ncols + c0;
      for (uint k = 0u; k < n; k++) {
        lanes_uint ck = lanes_ld_dev(crow + k * ncols);
        v[k] = g != 0u ? bb_mul_lanes(ck, lanes_splat(tw[(g * k) & mmask])) : ck;
      }
      zc_dft(v, log_n, tw, mmask, cosets, false);
      lanes_uint delta = lanes_ld_dev(deltas + xl * ncols + c0);
      for (uint c = 0u; c < MSL_LANES; c++) {
        uint sl = srcmap[2u * (c0 + c)];
        uint sr = srcmap[2u * (c0 + c) + 1u];
        if (sl == ZC_NONE && sr == ZC_NONE) continue;
        uint dc = lanes_get(delta, c);
        for (uint b = 0u; b < n; b++) {
          uint j = (kc << log_n) + b;
          device uint* dst = slots + zc_region(nslots, j / MSL_LANES, gid, G, groups, il) + t + j % MSL_LANES;
          if (sl != ZC_NONE) dst[sl * T] = lanes_get(v[b], c);
          if (sr != ZC_NONE) {
            dst[sr * T] = bb_add(lanes_get(v[(b + 1u) & (n - 1u)], c), bb_mul(dc, lrow[g + cosets * b]));
          }
        }
      }
    }
  }
}

// The selector slots of the U points of unit u: is_first = [x = 0]·sel[i], is_last =
// [x = X−1]·sel[M + i], is_transition = 1 − is_last.
MSL_FN void zc_fill_selectors(uint u, constant ZcUniParams& p, device const uint* sel, device uint* slots, uint gid,
                              uint G) {
  uint il = p.interleave;
  uint sf = p.sel_first;
  uint sl = p.sel_last;
  uint st = p.sel_trans;
  if (sf == ZC_NONE && sl == ZC_NONE && st == ZC_NONE) return;
  uint log_n = p.log_n;
  uint log_m = p.log_m;
  uint n = 1u << log_n;
  uint m = 1u << log_m;
  uint cosets = 1u << (log_m - log_n);
  uint U = p.unit;
  uint groups = U / MSL_LANES;
  uint points = p.slice_blocks << log_m;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  for (uint j = 0u; j < U; j++) {
    uint pp = u * U + j;
    if (pp >= points) break;
    uint x = p.x0 + (pp >> log_m);
    uint q = pp & (m - 1u);
    uint i = (q >> log_n) + cosets * (q & (n - 1u));
    uint first = zc_is_first(sel, x, i);
    uint last = zc_is_last(sel, x, p.blocks, m, i);
    device uint* dst = slots + zc_region(p.nslots, j / MSL_LANES, gid, G, groups, il) + t + j % MSL_LANES;
    if (sf != ZC_NONE) dst[sf * T] = first;
    if (sl != ZC_NONE) dst[sl * T] = last;
    if (st != ZC_NONE) dst[st * T] = bb_sub(BB_ONE, last);
  }
}

// Round 0 over the slice (the kernel checks p.lanes). Points pp < slice_blocks·M (block x = x0 +
// pp / M, in-block index q = pp mod M = g·N + b, point i = g + (M/N)·b) are taken in items of W
// points (a thread's step of the grid-stride loop; W = max(M, U) on the host, so that a thread
// works through one block's cosets with the block's coefficients in its caches), each in units
// of U points (one fill of the slot scratch). e(x)·(Zc, Num, Den)(x, i) is added to partial row
// gid·W + (pp mod W): as G·W ≡ 0 (mod M), rows ≡ q (mod M) hold point class q.
template <typename Eval>
MSL_FN void zc_uni_body(thread Eval& ev, device const uint* prog, device const uint* cp, device const uint* kinds,
                        device const uint* weights, device const uint* coefs, device const uint* deltas,
                        device const uint* srcmap, device const uint* tw, device const uint* lrow,
                        device const uint* sel, device const uint* eq, device uint* slots, device uint* regs,
                        device uint* partials, constant ZcUniParams& p, uint gid, uint G) {
  uint il = p.interleave;
  uint U = p.unit;
  uint W = p.item;
  uint per = W / U;
  uint groups = U / MSL_LANES;
  uint log_m = p.log_m;
  uint points = p.slice_blocks << log_m;
  uint items = (points + W - 1u) / W;
  uint T = zc_T(G, il);
  uint t = zc_t(gid, il);
  if (p.zero != 0u) {
    for (uint k = 0u; k < 12u * W; k++) partials[12u * gid * W + k] = 0u;
  }
  device uint* rbase = regs + zc_region(p.nregs, 0u, gid, G, 1u, il);
  bool has_den = p.has_den != 0u;
  bb4l den_const = bb4l_splat(bb4_load(weights, p.nout));
  for (uint it = gid; it < items; it += G) {
    for (uint su = 0u; su < per; su++) {
      uint u = it * per + su;
      if (u * U >= points) break;
      if (p.coset_mode != 0u) {
        zc_fill_cosets(u, p, coefs, deltas, srcmap, tw, lrow, slots, gid, G);
      } else {
        zc_fill_points(u, p, coefs, deltas, srcmap, tw, lrow, slots, gid, G);
      }
      zc_fill_selectors(u, p, sel, slots, gid, G);
      for (uint m = 0u; m < groups; m++) {
        ProgCombineLanes c;
        c.start(kinds, weights, has_den ? den_const : bb4l_zero());
        ev.base(prog, cp, slots + zc_region(p.nslots, m, gid, G, groups, il), rbase, t, T, c);
        c.finish();
        for (uint l = 0u; l < MSL_LANES; l++) {
          uint j = m * MSL_LANES + l;
          uint pp = u * U + j;
          if (pp >= points) break;
          bb4 e = bb4_load(eq, p.eq_off + p.x0 + (pp >> log_m));
          zc_accumulate(partials, gid * W + su * U + j, e, bb4l_get(c.zc, l), bb4l_get(c.num, l), bb4l_get(c.den, l));
        }
      }
    }
  }
}

#endif  // ZC_UNI_BODY_H
