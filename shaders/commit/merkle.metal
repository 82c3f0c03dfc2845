// merkle.metal - Merkle commitments of column-major matrices with Poseidon2 (Montgomery form),
// as cpuref.NewMerkleTree: leaf[r] = hash_slice(row r); query group y = tree_compress of the
// leaves y + t·qs (t < 2^k), built level by level; a binary tree above the group digests.
// A digest is 8 consecutive uints; digest i of a layer is at [8i, 8i+8).
// The matrix (an RS codeword, possibly beyond 2^31 elements) is indexed with unsigned 32-bit
// arithmetic only, c·height + row ≤ the element addressed, so merkle_hash_rows and the row gathers
// are exact for up to 2^32 elements (launchers: below 2^32 − 2^28, kernels.maxColumnElems).
#include "poseidon2_group.h"

struct MerkleRowParams {
  uint height;     // rows (column length: the distance between two columns)
  uint width;      // columns, ≥ 1
  uint row_begin;  // the items hashed by this dispatch: [row_begin, row_end) (launchers split a
  uint row_end;    // large matrix into several dispatches, so that none runs for long)
  uint log_slab;   // item i hashes row (i >> log_slab)·slab_stride + slab_first + (i mod 2^log_slab):
  uint slab_stride;  // the slabs of 2^log_slab rows of one chunk of query groups (a tree built
  uint slab_first;   // chunk by chunk); log_slab = log2(height), slab_first = 0: item i is row i
  uint state_in;     // 1: the sponge of row r starts from states (a tree streamed by columns), 0: zero
  uint state_out;    // 1: the state after m's columns goes to states, not a digest to digests
};

// digests[i] = hash_slice(m[0·height + r], m[1·height + r], …, m[(width−1)·height + r]) for
// row_begin ≤ i < row_end and r the row of item i (above): the padding-free sponge (rate 8, zero
// initial state, a partial last block overwrites only its elements). A matrix streamed a chunk of
// columns at a time (each chunk but the last a multiple of 8 columns wide) continues the sponges
// of its rows: row r's 16-word state is states[k·height + r] (k < 16: neighbouring rows at
// neighbouring addresses), read with state_in, written instead of the digest with state_out. Lane groups never cross a
// slab (slabs of at least MSL_LANES rows, row_begin a multiple of MSL_LANES). Thread r reads element r of each column: neighbouring
// threads read neighbouring addresses, so the column-major reads coalesce. Lanes (prelude.h):
// every MSL_LANES-th work item hashes the rows r0 .. r0+MSL_LANES (lane l: row r0 + l, skipped when
// ≥ row_end), again reading neighbouring addresses; the grid stride, rounded up to whole lanes,
// spreads those items over all threadgroups.
kernel void merkle_hash_rows(device const uint* m [[buffer(0)]],
                             device uint* digests [[buffer(1)]],
                             constant uint* rc [[buffer(2)]],
                             constant MerkleRowParams& p [[buffer(3)]],
                             device uint* states [[buffer(4)]],
                             uint gid [[thread_position_in_grid]],
                             uint stride [[threads_per_grid]]) {
  uint height = p.height;
  uint width = p.width;
  uint begin = p.row_begin;
  uint end = p.row_end;
  uint lstride = lane_stride(stride);
  uint smask = (1u << p.log_slab) - 1u;
  uint s[P2_STATE];
  for (uint i0 = begin + lane_first(gid, end - begin); i0 < end; i0 += lstride) {
    uint nl = min(MSL_LANES, end - i0);
    uint r0 = (i0 >> p.log_slab) * p.slab_stride + p.slab_first + (i0 & smask);
    if (p.state_in != 0u) {
      for (uint k = 0u; k < 16u; k++) {
        for (uint l = 0u; l < MSL_LANES; l++) s[k * MSL_LANES + l] = l < nl ? states[k * height + r0 + l] : 0u;
      }
    } else {
      for (uint k = 0u; k < P2_STATE; k++) s[k] = 0u;
    }
    for (uint c = 0u; c < width; c += P2_RATE) {
      uint nb = min(P2_RATE, width - c);
      if (nl == MSL_LANES) {
        for (uint k = 0u; k < nb; k++) {
          uint base = (c + k) * height + r0;
          for (uint l = 0u; l < MSL_LANES; l++) s[k * MSL_LANES + l] = m[base + l];
        }
      } else {  // the last, partial group of rows (host only)
        for (uint k = 0u; k < nb; k++) {
          uint base = (c + k) * height + r0;
          for (uint l = 0u; l < nl; l++) s[k * MSL_LANES + l] = m[base + l];
        }
      }
      p2_permute(s, rc);
    }
    if (p.state_out != 0u) {
      for (uint k = 0u; k < 16u; k++) {
        for (uint l = 0u; l < nl; l++) states[k * height + r0 + l] = s[k * MSL_LANES + l];
      }
    } else {
      for (uint l = 0u; l < nl; l++) {
        for (uint k = 0u; k < 8u; k++) digests[(i0 + l) * 8u + k] = s[k * MSL_LANES + l];
      }
    }
  }
}

struct MerkleCompressParams {
  uint begin;    // the digests produced by this dispatch: [begin, end) (launchers split a large
  uint end;      // layer into several dispatches, so that none runs for long)
  uint qs;       // stride: 1 for a binary tree layer, the query stride for the group levels
  uint in_off;   // digest offset of the input level in `in`
  uint out_off;  // digest offset of the output level in `out`
};

// out[out_off + i] = compress(in[in_off + 2x·qs + y], in[in_off + (2x+1)·qs + y]) with
// x = i / qs, y = i mod qs, for begin ≤ i < end, where compress(l, r) = Permute(l ‖ r)[0..8).
// With qs = 1 this is one layer of a binary tree. The offsets let all tree layers live in one
// buffer (`in` and `out` may be the same buffer; the two ranges never overlap).
// Lanes (prelude.h): every MSL_LANES-th work item produces out[i0 .. i0+MSL_LANES) (lane l: digest
// i0 + l, skipped when ≥ end).
kernel void merkle_compress(device const uint* in [[buffer(0)]],
                            device uint* out [[buffer(1)]],
                            constant uint* rc [[buffer(2)]],
                            constant MerkleCompressParams& p [[buffer(3)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint begin = p.begin;
  uint end = p.end;
  uint qs = p.qs;
  uint in_base = p.in_off * 8u;
  uint out_base = p.out_off * 8u;
  uint lstride = lane_stride(stride);
  uint s[P2_STATE];
  for (uint i0 = begin + lane_first(gid, end - begin); i0 < end; i0 += lstride) {
    uint nl = min(MSL_LANES, end - i0);
    uint x = i0 / qs;
    uint y = i0 - x * qs;
    for (uint l = 0u; l < MSL_LANES; l++) {
      uint lo = in_base + (2u * x * qs + y) * 8u;
      uint hi = lo + qs * 8u;
      for (uint k = 0u; k < 8u; k++) {
        s[k * MSL_LANES + l] = l < nl ? in[lo + k] : 0u;
        s[(8u + k) * MSL_LANES + l] = l < nl ? in[hi + k] : 0u;
      }
      y++;  // digest i0 + l + 1
      if (y == qs) {
        y = 0u;
        x++;
      }
    }
    p2_permute(s, rc);
    for (uint l = 0u; l < nl; l++) {
      for (uint k = 0u; k < 8u; k++) out[out_base + (i0 + l) * 8u + k] = s[k * MSL_LANES + l];
    }
  }
}

struct MerkleTopParams {
  uint qs;       // digests of layer 0 (the query groups' digests)
  uint d_first;  // the layers computed: d_first ≤ d ≤ d_last (layer d has qs >> d digests and
  uint d_last;   // starts at digest 2qs − (2qs >> d) of layers)
};

// Layers d_first..d_last of a tree's binary part, each compression permuted by 16 threads
// together (poseidon2_group.h; thread k holds state element k: words k of the two children,
// which lie side by side). A tree's top layers are too narrow to fill a GPU, and a permutation
// on one thread is a long chain of latencies (≈ 15 µs on an H200, merkle_compress) where 16
// threads take ≈ 4 µs. With d_first < d_last one threadgroup computes all the layers, a barrier
// between them (each layer costs a permutation of every state of the group, live or not: launch it
// for the last few layers only); with d_first == d_last any number of threadgroups share the layer.
kernel void merkle_compress_top(device uint* layers [[buffer(0)]],
                                constant uint* rc [[buffer(1)]],
                                constant MerkleTopParams& p [[buffer(2)]],
                                threadgroup uint* scratch [[threadgroup(0)]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint tpg [[threads_per_threadgroup]],
                                uint group [[threadgroup_position_in_grid]],
                                uint ngroups [[threadgroups_per_grid]]) {
  threadgroup uint* rcs = scratch;
  threadgroup uint* xs = scratch + P2G_RC_LEN + 32u * (tid >> 4);  // this state's exchange halves
  p2g_load_constants(rc, rcs, tid, tpg);
  uint k = tid & 15u;
  uint per = tpg >> 4;  // states a threadgroup permutes at once
  p2g_sponge st;        // only its state word and exchange half: kept across permutations, so
  st.buf = 0u;          // that consecutive exchanges always alternate halves (host device)
  for (uint d = p.d_first; d <= p.d_last; d++) {
    uint n = p.qs >> d;
    uint in_off = 2u * p.qs - ((2u * p.qs) >> (d - 1u));
    uint out_off = 2u * p.qs - ((2u * p.qs) >> d);
    for (uint i0 = group * per; i0 < n; i0 += ngroups * per) {  // the same trip count on every thread
      uint i = i0 + (tid >> 4);
      bool live = i < n;
      st.x = live ? layers[8u * (in_off + 2u * i) + k] : 0u;
      p2g_permute(st, rcs, tid, xs);
      if (live && k < 8u) layers[8u * (out_off + i) + k] = st.x;
    }
    threadgroup_barrier(mem_flags::mem_device);
  }
}

struct MerkleGatherParams {
  uint height;  // rows of the matrix
  uint width;   // columns
  uint qs;      // query stride
  uint y;       // query index
  uint nrows;   // rows per query 2^k
};

// out[t·width + c] = canonical m[c·height + y + t·qs]: the rows of query group y, in order of t,
// converted out of Montgomery form (for openings).
kernel void merkle_gather_rows(device const uint* m [[buffer(0)]],
                               device uint* out [[buffer(1)]],
                               constant MerkleGatherParams& p [[buffer(2)]],
                               uint gid [[thread_position_in_grid]],
                               uint stride [[threads_per_grid]]) {
  uint height = p.height;
  uint width = p.width;
  uint qs = p.qs;
  uint y = p.y;
  uint total = p.nrows * width;
  for (uint i = gid; i < total; i += stride) {
    uint t = i / width;
    uint c = i - t * width;
    out[i] = bb_from_mont(m[c * height + y + t * qs]);
  }
}

struct MerkleGatherQueryRowsParams {
  uint height;   // rows of the matrix
  uint width;    // columns
  uint qs;       // query stride
  uint nrows;    // rows per query 2^k
  uint queries;  // number of query indices in ys
  uint col_begin;  // m holds the columns [col_begin, col_begin + cols) of the matrix (a chunk of a
  uint cols;       // codeword rebuilt a few columns at a time); whole: 0 and width
};

// out[(q·nrows + t)·width + col_begin + c] = canonical m[c·height + ys[q] + t·qs] for q < queries,
// c < cols: the rows of every query group ys[q] (ys[q] < qs, checked by the launcher), in order of
// q, then t, then column, converted out of Montgomery form (batched openings).
kernel void merkle_gather_query_rows(device const uint* m [[buffer(0)]],
                                     device const uint* ys [[buffer(1)]],
                                     device uint* out [[buffer(2)]],
                                     constant MerkleGatherQueryRowsParams& p [[buffer(3)]],
                                     uint gid [[thread_position_in_grid]],
                                     uint stride [[threads_per_grid]]) {
  uint height = p.height;
  uint width = p.width;
  uint qs = p.qs;
  uint cols = p.cols;
  uint per_query = p.nrows * cols;
  uint total = p.queries * per_query;
  for (uint i = gid; i < total; i += stride) {
    uint q = i / per_query;
    uint j = i - q * per_query;
    uint t = j / cols;
    uint c = j - t * cols;
    out[(q * p.nrows + t) * width + p.col_begin + c] = bb_from_mont(m[c * height + ys[q] + t * qs]);
  }
}

struct MerkleGatherPathsParams {
  uint qs;       // digests in layer 0 (a power of two)
  uint depth;    // layers below the root, log2 qs
  uint queries;  // number of query indices in ys
  uint out_off;  // uint offset of the first path in `out`
};

// The sibling paths of the queries ys[q] < qs in a tree whose layers lie in one buffer: layer d
// (qs >> d digests) starts at digest 2qs − (2qs >> d). Digest element e of sibling d of query q,
// layers[layer d][(ys[q] >> d) ^ 1][e], goes canonical to out[out_off + (q·depth + d)·8 + e].
kernel void merkle_gather_paths(device const uint* layers [[buffer(0)]],
                                device const uint* ys [[buffer(1)]],
                                device uint* out [[buffer(2)]],
                                constant MerkleGatherPathsParams& p [[buffer(3)]],
                                uint gid [[thread_position_in_grid]],
                                uint stride [[threads_per_grid]]) {
  uint qs2 = 2u * p.qs;
  uint depth = p.depth;
  uint out_off = p.out_off;
  uint total = p.queries * depth * 8u;
  for (uint i = gid; i < total; i += stride) {
    uint sib = i >> 3u;  // q·depth + d
    uint e = i & 7u;
    uint q = sib / depth;
    uint d = sib - q * depth;
    uint digest = qs2 - (qs2 >> d) + ((ys[q] >> d) ^ 1u);
    out[out_off + i] = bb_from_mont(layers[digest * 8u + e]);
  }
}
