// Package cpuref is the pure-Go reference implementation of every heavy operation of the prover:
// the NTT family (DFT/IDFT, batched column DFTs, the small per-block IDFT of the RS message), the
// stacked layout and stacked matrix (spec A §5.2–5.3), the "eval-to-coeff" Reed–Solomon encoding
// (§5.5), the Merkle tree over a codeword matrix with 2^k rows per query (§5.6–5.7) and the
// stacked commitment (§5.8).
//
// It is written to be obviously correct before fast: every routine follows the spec text (and
// OpenVM stark-backend v2.0.1, prover/stacked_pcs.rs, prover/poly.rs) step by step. It later
// implements the prover's Backend interface, and the GPU kernels are tested against it.
//
// # Data layout conventions (mirrored by the GPU kernels)
//
//   - Field elements are field.Fp in CANONICAL form (integers in [0, p), never Montgomery).
//   - Matrices are column-major: Matrix.Values[col*Height + row]; Height is a power of two.
//   - All DFTs are in natural order in and out: DFT(c)[i] = Σ_j c_j·g_n^{ij} with g_n =
//     field.TwoAdicGenerator(n); IDFT is the exact inverse including the 1/2^n factor. There is no
//     coset shift anywhere (spec A §1.4).
//   - A codeword matrix has 2^(m+log_blowup) rows; row r ↔ point g_{m+log_blowup}^r.
//   - A Merkle leaf is hash_slice of one row flattened to base field in column order (an Fp4
//     entry contributes c0, c1, c2, c3). Query group y holds the rows y + t·qs, t = 0..2^k−1,
//     qs = rows/2^k, compressed with tree_compress in order of t; those qs digests are
//     DigestLayers[0] and a plain binary tree is built above them.
package cpuref
