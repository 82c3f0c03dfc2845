// merkle.metal - Merkle commitments of column-major matrices with Poseidon2 (Montgomery form),
// as cpuref.NewMerkleTree: leaf[r] = hash_slice(row r); query group y = tree_compress of the
// leaves y + t·qs (t < 2^k), built level by level; a binary tree above the group digests.
// A digest is 8 consecutive uints; digest i of a layer is at [8i, 8i+8).
#include "poseidon2.h"

struct MerkleRowParams {
  uint height;  // rows (column length)
  uint width;   // columns, ≥ 1
};

// digests[r] = hash_slice(m[0·height + r], m[1·height + r], …, m[(width−1)·height + r]): the
// padding-free sponge (rate 8, zero initial state, a partial last block overwrites only its
// lanes). Thread r reads element r of each column: neighbouring threads read neighbouring
// addresses, so the column-major reads coalesce.
kernel void merkle_hash_rows(device const uint* m [[buffer(0)]],
                             device uint* digests [[buffer(1)]],
                             constant uint* rc [[buffer(2)]],
                             constant MerkleRowParams& p [[buffer(3)]],
                             uint gid [[thread_position_in_grid]],
                             uint stride [[threads_per_grid]]) {
  uint height = p.height;
  uint width = p.width;
  uint s[16];
  for (uint r = gid; r < height; r += stride) {
    for (uint k = 0u; k < P2_WIDTH; k++) s[k] = 0u;
    for (uint c = 0u; c < width; c += P2_RATE) {
      uint nb = min(P2_RATE, width - c);
      for (uint k = 0u; k < nb; k++) s[k] = m[(c + k) * height + r];
      p2_permute(s, rc);
    }
    for (uint k = 0u; k < 8u; k++) digests[r * 8u + k] = s[k];
  }
}

struct MerkleCompressParams {
  uint count;  // digests to produce
  uint qs;     // stride: 1 for a binary tree layer, the query stride for the group levels
};

// out[i] = compress(in[2x·qs + y], in[(2x+1)·qs + y]) with x = i / qs, y = i mod qs, where
// compress(l, r) = Permute(l ‖ r)[0..8). With qs = 1 this is one layer of a binary tree.
kernel void merkle_compress(device const uint* in [[buffer(0)]],
                            device uint* out [[buffer(1)]],
                            constant uint* rc [[buffer(2)]],
                            constant MerkleCompressParams& p [[buffer(3)]],
                            uint gid [[thread_position_in_grid]],
                            uint stride [[threads_per_grid]]) {
  uint count = p.count;
  uint qs = p.qs;
  uint s[16];
  for (uint i = gid; i < count; i += stride) {
    uint x = i / qs;
    uint y = i - x * qs;
    uint l = (2u * x * qs + y) * 8u;
    uint r = l + qs * 8u;
    for (uint k = 0u; k < 8u; k++) {
      s[k] = in[l + k];
      s[8u + k] = in[r + k];
    }
    p2_permute(s, rc);
    for (uint k = 0u; k < 8u; k++) out[i * 8u + k] = s[k];
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
