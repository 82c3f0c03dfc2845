package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The launchers of shaders/openings/whir.metal: the tables of the WHIR prover beyond the NTT, Merkle and
// sumcheck families. Fp4 tables are AoS, arrays of Mont4 (element i = the Montgomery words
// [4i, 4i+4), as bb4_load reads them); base matrices column-major Montgomery, arrays of Mont.

// maxSubsetPassBits is the most index bits one whir_subset_pass handles (32 values per item in
// registers).
const maxSubsetPassBits = 5

// EncodeWhirBatch encodes, for the column-major Montgomery matrix q (height rows, width
// columns), the Fp4 table (AoS, height elements)
//
//	f[r] (+)= T(Σ_j mu[muOff + j]·q[j][·])[r],
//
// where T acts on every block of 2^lSkip consecutive rows, coordinate by coordinate: the IDFT
// over the subgroup of order 2^lSkip (natural order), then the subset-sum transform
// (cpuref.CoeffsToEvals) twice on the block's bits. With accumulate the result is added to f
// (several matrices: one call each), else f is overwritten. mu is an AoS Fp4 table of at least
// muOff + width entries.
//
// That is Σ_j mu_j·CoeffsToEvals_low(RSMessage(lSkip, q_j)): the per-column work of the WHIR
// batch (cpuref NewWhirProver) up to the subset sum over the bits from lSkip on, which
// EncodeSubsetSum adds. One thread per block reads each value of q once. lSkip ≤ 5, height a
// multiple of 2^lSkip. A method of NTT: the block IDFT uses its inverse twiddle table.
func (t *NTT) EncodeWhirBatch(b *gpu.Batch, q *gpu.Array[Mont], height, width, lSkip int, mu *gpu.Array[Mont4], muOff int, f *gpu.Array[Mont4], accumulate bool) error {
	if lSkip < 0 || lSkip > 5 || height <= 0 || height%(1<<lSkip) != 0 || width < 0 || muOff < 0 {
		return fmt.Errorf("kernels: WhirBatch: %d×%d matrix, l_skip %d, μ offset %d", height, width, lSkip, muOff)
	}
	if err := checkArray("WhirBatch", q, height*width); err != nil {
		return err
	}
	if err := checkArray("WhirBatch", mu, muOff+width); err != nil {
		return err
	}
	if err := checkArray("WhirBatch", f, height); err != nil {
		return err
	}
	_, inv, err := t.tables(lSkip)
	if err != nil {
		return err
	}
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	n := height >> lSkip
	g, tp := shapeFor(t.dev, "whir_batch_blocks", n)
	dispatchWhirBatchBlocks(b, g, tp, q.Buffer, mu.Buffer, inv.Buffer, f.Buffer, whirBatchParams{nblocks: uint32(n), logBlock: uint32(lSkip), height: uint32(height), width: uint32(width), muOff: uint32(muOff), scale: uint32(MontOf(field.Fp(uint32(1) << lSkip).Inverse())), accumulate: acc})
	return b.Err()
}

// EncodeSubsetSum encodes the subset-sum transform (cpuref.CoeffsToEvals; with inverse the
// Möbius transform, EvalsToCoeffs) over the index bits [lo, hi) of the table of 2^logN
// Montgomery words src, into dst (dst = src: in place). The transform is linear over the base
// field and indexes words, so an AoS Fp4 table of 2^d elements is its gpu.View[Mont] with logN =
// d + 2, element bit i at word bit i + 2: the bits [2, d + 2) transform it coordinate-wise.
// Passes of up to 5 bits, each one read and one write of the table (the first reads src, the
// rest work in dst); lo = hi copies nothing (dst must then be src).
func EncodeSubsetSum(b *gpu.Batch, dev *gpu.Device, src, dst *gpu.Array[Mont], logN, lo, hi int, inverse bool) error {
	if logN < 0 || logN > 30 || lo < 0 || hi < lo || hi > logN {
		return fmt.Errorf("kernels: SubsetSum: bits [%d, %d) of a table of 2^%d", lo, hi, logN)
	}
	if err := checkArray("SubsetSum", src, 1<<logN); err != nil {
		return err
	}
	if err := checkArray("SubsetSum", dst, 1<<logN); err != nil {
		return err
	}
	if lo == hi {
		if src.Buffer != dst.Buffer {
			return fmt.Errorf("kernels: SubsetSum: empty bit range with src ≠ dst")
		}
		return nil
	}
	sub := uint32(0)
	if inverse {
		sub = 1
	}
	// Passes as even as possible: 17 bits = 5 + 4 + 4 + 4.
	bits := hi - lo
	np := (bits + maxSubsetPassBits - 1) / maxSubsetPassBits
	in := src
	for i := range np {
		nb := bits / np
		if i < bits%np {
			nb++
		}
		count := 1 << (logN - nb)
		g, tp := shapeFor(dev, "whir_subset_pass", count)
		dispatchWhirSubsetPass(b, g, tp, in.Buffer, dst.Buffer, whirSubsetParams{count: uint32(count), lo: uint32(lo), nb: uint32(nb), sub: sub})
		lo += nb
		in = dst
	}
	return b.Err()
}

// EncodeFp4ToPlanes encodes dst[c·2^logOut + i] = coordinate c of the AoS Fp4 src[i], i < n:
// the table as the column-major 2^logOut × 4 base matrix that EncodeColumns and the Merkle tree
// take. Rows n .. 2^logOut of dst are not written (a fresh, zeroed dst is the zero padding).
func EncodeFp4ToPlanes(b *gpu.Batch, dev *gpu.Device, src *gpu.Array[Mont4], n int, dst *gpu.Array[Mont], logOut int) error {
	if n < 0 || logOut < 0 || logOut > 29 || n > 1<<logOut {
		return fmt.Errorf("kernels: Fp4ToPlanes: %d elements into planes of 2^%d", n, logOut)
	}
	if err := checkArray("Fp4ToPlanes", src, n); err != nil {
		return err
	}
	if err := checkArray("Fp4ToPlanes", dst, 4<<logOut); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	g, tp := shapeFor(dev, "whir_fp4_to_planes", 4*n)
	dispatchWhirFp4ToPlanes(b, g, tp, src.Buffer, dst.Buffer, whirPlanesParams{n: uint32(n), logOut: uint32(logOut)})
	return b.Err()
}

// hornerLogChunk is log2 of the coefficients one whir_horner item folds.
const hornerLogChunk = 4

// hornerPlan returns log2 of the chunk of each whir_horner pass for a table of n = 2^logN.
func hornerPlan(logN int) []int {
	var plan []int
	for logN > 0 {
		c := min(hornerLogChunk, logN)
		plan = append(plan, c)
		logN -= c
	}
	return plan
}

// HornerScratchLen is the Fp4 entries of scratch EncodeHorner needs for n coefficients (a power
// of two).
func HornerScratchLen(n int) int {
	logN, ok := field.Log2(n)
	if !ok {
		return 0
	}
	total := 0
	for _, c := range hornerPlan(logN) {
		logN -= c
		total += 1 << logN
	}
	return max(total, 1)
}

// EncodeHorner encodes the evaluation Σ_{b<n} c[b]·z^b of the AoS Fp4 table c (n a power of two)
// by passes of whir_horner over chunks of 16 (each pass a table 16 times shorter, evaluated at
// z^16, z^256, …: exact, as every association is in a field). The result is Fp4 element at of
// scratch (HornerScratchLen(n) entries); n = 1 copies c[0] there.
func EncodeHorner(b *gpu.Batch, dev *gpu.Device, c *gpu.Array[Mont4], n int, z field.Fp4, scratch *gpu.Array[Mont4]) (at int, err error) {
	return encodeHorner(b, dev, c, n, z, nil, whirZParam, scratch)
}

// whirZParam is WhirHornerParams.z_at for z passed as a parameter (WHIR_Z_PARAM).
const whirZParam = 0xffffffff

// EncodeHornerLogged is EncodeHorner at the point log[at] that a device transcript's step
// sampled (DeviceTranscript.EncodeObserveSample): the host need not know it.
func EncodeHornerLogged(b *gpu.Batch, dev *gpu.Device, c *gpu.Array[Mont4], n int, log *gpu.Array[Mont4], at int, scratch *gpu.Array[Mont4]) (int, error) {
	if log == nil || at < 0 || at >= log.Len() {
		return 0, fmt.Errorf("kernels: Horner: a point at %d of the log", at)
	}
	return encodeHorner(b, dev, c, n, field.Fp4{}, log, uint32(at), scratch)
}

// encodeHorner is EncodeHorner at z (zAt = whirZParam) or at log[zAt].
func encodeHorner(b *gpu.Batch, dev *gpu.Device, c *gpu.Array[Mont4], n int, z field.Fp4, log *gpu.Array[Mont4], zAt uint32, scratch *gpu.Array[Mont4]) (at int, err error) {
	logN, ok := field.Log2(n)
	if !ok {
		return 0, fmt.Errorf("kernels: Horner: %d coefficients (not a power of two)", n)
	}
	if err := checkArray("Horner", c, n); err != nil {
		return 0, err
	}
	if err := checkArray("Horner", scratch, HornerScratchLen(n)); err != nil {
		return 0, err
	}
	if n == 1 {
		b.Copy(scratch.Buffer, 0, c.Buffer, 0, 16)
		return 0, b.Err()
	}
	zs := c.Buffer // bound but unread when z is a parameter
	if log != nil {
		zs = log.Buffer
	}
	src, srcOff, dstOff, squares := c, 0, 0, 0
	for _, lc := range hornerPlan(logN) {
		logN -= lc
		nOut := 1 << logN
		zm := MontFp4(z)
		g, tp := shapeFor(dev, "whir_horner", nOut)
		dispatchWhirHorner(b, g, tp, src.Buffer, scratch.Buffer, zs, whirHornerParams{nOut: uint32(nOut), logChunk: uint32(lc), srcOff: uint32(srcOff), dstOff: uint32(dstOff),
			z0: zm[0], z1: zm[1], z2: zm[2], z3: zm[3], zAt: zAt, zSquares: uint32(squares)})
		for range lc {
			z = z.Square()
		}
		squares += lc
		src, srcOff, at = scratch, dstOff, dstOff
		dstOff += nOut
	}
	return at, b.Err()
}

// WhirWeights adds Σ_i coef_i·eq(pow_d(z_i), ·) to a table of 2^d entries, d = LogLo + LogHi
// (stark.EvalsEqHypercube of stark.PowersOf2(z_i, d)), for the N points given as the AoS Fp4 table
// Points = (z_0, coef_0, z_1, coef_1, …): each point's eq table as two halves split at bit LogLo
// (whir_pow_eq_tables: lo_i[b] = Π_{j<LogLo} eq_1(z_i^(2^j), bit_j(b)), hi_i[b] =
// coef_i·Π_{j<LogHi} eq_1(z_i^(2^(LogLo+j)), bit_j(b)), eq_1(x, 1) = x, eq_1(x, 0) = 1 − x), then
// their products summed into the table (whir_eq_expand). Points BaseFrom .. N − 1 must lie in the
// base field (WHIR's in-domain queries ω^idx): their lo halves are base words (LoBase) and their
// terms base-by-Fp4 products, a quarter of an Fp4 product's work. Lo needs BaseFrom·2^LogLo Fp4
// entries, LoBase (N − BaseFrom)·2^LogLo words and Hi N·2^LogHi Fp4 entries (each at least one:
// every buffer is bound).
type WhirWeights struct {
	Points       *gpu.Array[Mont4]
	N, BaseFrom  int
	LogLo, LogHi int
	Lo, Hi       *gpu.Array[Mont4]
	LoBase       *gpu.Array[Mont]
}

// Encode encodes the halves and their expansion into out (2^(LogLo+LogHi) entries, added to).
func (w WhirWeights) Encode(b *gpu.Batch, dev *gpu.Device, out *gpu.Array[Mont4]) error {
	if w.N < 0 || w.BaseFrom < 0 || w.BaseFrom > w.N || w.LogLo < 0 || w.LogHi < 0 || w.LogLo+w.LogHi > 28 {
		return fmt.Errorf("kernels: WhirWeights: %d points (base from %d), 2^%d × 2^%d", w.N, w.BaseFrom, w.LogLo, w.LogHi)
	}
	if err := checkArray("WhirWeights", w.Points, 2*w.N); err != nil {
		return err
	}
	if err := checkArray("WhirWeights", w.Lo, max(1, w.BaseFrom<<w.LogLo)); err != nil {
		return err
	}
	if err := checkArray("WhirWeights", w.LoBase, max(1, (w.N-w.BaseFrom)<<w.LogLo)); err != nil {
		return err
	}
	if err := checkArray("WhirWeights", w.Hi, max(1, w.N<<w.LogHi)); err != nil {
		return err
	}
	if err := checkArray("WhirWeights", out, 1<<(w.LogLo+w.LogHi)); err != nil {
		return err
	}
	if w.N == 0 {
		return nil
	}
	g, tp := shapeFor(dev, "whir_pow_eq_tables", w.N<<w.LogLo+w.N<<w.LogHi)
	dispatchWhirPowEqTables(b, g, tp, w.Points.Buffer, w.Lo.Buffer, w.LoBase.Buffer, w.Hi.Buffer,
		whirEqTablesParams{npts: uint32(w.N), baseFrom: uint32(w.BaseFrom), logLo: uint32(w.LogLo), logHi: uint32(w.LogHi)})
	// GPUs: an entry's terms split over up to 16 lanes of a SIMD group, for about 2^19 threads in
	// all and at least four terms a lane (whir_eq_expand).
	k, splits := w.LogLo+w.LogHi, 1
	if !isHost(dev) {
		for splits < 16 && splits<<k < 1<<19 && 8*splits <= w.N {
			splits <<= 1
		}
	}
	g, tp = shapeFor(dev, "whir_eq_expand", splits<<k)
	if tp.X%32 != 0 { // lanes of whole SIMD groups only
		splits = 1
		g, tp = shapeFor(dev, "whir_eq_expand", 1<<k)
	}
	dispatchWhirEqExpand(b, g, tp, w.Lo.Buffer, w.LoBase.Buffer, w.Hi.Buffer, out.Buffer,
		whirEqExpandParams{npts: uint32(w.N), baseFrom: uint32(w.BaseFrom), logLo: uint32(w.LogLo), logTotal: uint32(k), splits: uint32(splits)})
	return b.Err()
}

// EncodeMuPowers encodes out[i] = μ^i for i < n, μ being log's entry at (whir_mu_powers).
func EncodeMuPowers(b *gpu.Batch, dev *gpu.Device, log *gpu.Array[Mont4], at int, out *gpu.Array[Mont4], n int) error {
	if at < 0 || at >= log.Len() || n < 0 || n > out.Len() {
		return fmt.Errorf("kernels: EncodeMuPowers: μ at %d of a log of %d, %d powers into %d", at, log.Len(), n, out.Len())
	}
	if n == 0 {
		return nil
	}
	g, tp := shapeFor(dev, "whir_mu_powers", n)
	dispatchWhirMuPowers(b, g, tp, log.Buffer, out.Buffer, whirMuPowersParams{muAt: uint32(at), n: uint32(n)})
	return b.Err()
}
