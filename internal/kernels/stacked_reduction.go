package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The stacked opening reduction's own kernels (shaders/openings/stacked_reduction.metal): the round-0 sums
// over a stacked matrix Q and the tables after u_0. The later rounds use the sumcheck family.
//
// Q (one commitment's stacked matrix, column-major, Montgomery, height 2^(lSkip+nStack)) is a
// sequence of blocks of N = 2^lSkip values: block x of column m starts at uint (m·2^nStack + x)·N.
// A slice of 2^NN blocks starts at a multiple of its length; its eq table e = eq(r_1..r_NN, ·)
// lies in an Fp4 table buffer (etab) from EOff. Slices are cut into chunks of at most
// 2^StackedChunkLog(lSkip) blocks (16384 values), numbered in slice order; a dispatch over a range
// of slices takes their packed descriptors (PackStackedSlices).

// StackedSlice describes one slice for the stacked-reduction kernels.
type StackedSlice struct {
	QStart int       // uint index in Q of the slice's first value (UniPartials)
	EOff   int       // Fp4 index in etab of e[0]
	NN     int       // log2 of the slice's block count
	A, BW  field.Fp4 // weights of G0 and of G1 − G0 (UniWeigh, BindWeights)
	WStart int       // Fp4 index in the W table of the slice's first entry (BindW)
	Short  bool      // log height < lSkip: BindWeights leaves its weights to the host
	Claim  int       // k: the weights λ^(2k), λ^(2k+1) of EncodeStackedSliceWeights
}

// Descriptor words (shaders/openings/stacked_reduction.metal SR_*).
const (
	srSliceWords = 16
	srQStart     = 0
	srEOff       = 1
	srNN         = 2
	srChunk0     = 3
	srA          = 4
	srBW         = 8
	srRot        = 12
	srWStart     = 13
	srShort      = 14
	srClaim      = 15
)

// StackedChunkLog is the log2 of the blocks per chunk: chunks of 2^14 values (on a GPU, 64 per
// thread of a 256-thread group between two applications of the slice weights).
func StackedChunkLog(lSkip int) int { return 14 - lSkip }

// StackedSliceChunks is the number of chunks of a slice of 2^nn blocks.
func StackedSliceChunks(nn, lSkip int) int { return 1 << max(nn-StackedChunkLog(lSkip), 0) }

// PackStackedSlices returns the descriptor words of slices (append them to one buffer; a
// dispatch names its range by the index of its first slice) and the number of chunks they make.
func PackStackedSlices(slices []StackedSlice, lSkip int) (words []uint32, chunks int, err error) {
	if lSkip < 0 || lSkip > 5 {
		return nil, 0, fmt.Errorf("kernels: stacked slices: l_skip %d not in [0, 5]", lSkip)
	}
	words = make([]uint32, srSliceWords*len(slices))
	for i, s := range slices {
		if s.NN < 0 || s.NN > 30-lSkip || s.QStart < 0 || s.EOff < 0 || s.WStart < 0 ||
			s.QStart+(1<<(lSkip+s.NN)) >= maxElems || 4*(s.EOff+1<<s.NN) >= maxElems || 4*(s.WStart+1<<s.NN) >= maxElems ||
			s.Claim < 0 || s.Claim >= maxElems {
			return nil, 0, fmt.Errorf("kernels: stacked slice %d: %+v", i, s)
		}
		d := words[srSliceWords*i:]
		d[srQStart], d[srEOff], d[srNN], d[srChunk0] = uint32(s.QStart), uint32(s.EOff), uint32(s.NN), uint32(chunks)
		SetStackedSliceWeights(words, i, s.A, s.BW)
		d[srWStart] = uint32(s.WStart)
		d[srClaim] = uint32(s.Claim)
		if s.Short {
			d[srShort] = 1
		}
		chunks += StackedSliceChunks(s.NN, lSkip)
	}
	if chunks >= maxElems {
		return nil, 0, fmt.Errorf("kernels: stacked slices: %d chunks", chunks)
	}
	return words, chunks, nil
}

// SetStackedSliceWeights sets the weights A and BW of slice i in packed descriptor words
// (PackStackedSlices): a descriptor list packed before its weights are known gets them here.
func SetStackedSliceWeights(words []uint32, i int, a, bw field.Fp4) {
	d := words[srSliceWords*i:]
	ma, mbw := MontFp4(a), MontFp4(bw)
	copy(d[srA:], ma[:])
	copy(d[srBW:], mbw[:])
	d[srRot] = 0
	if !bw.IsZero() {
		d[srRot] = 1
	}
}

// SliceRange names Count slices of a descriptor buffer from index First: their chunks are
// FirstChunk (the chunk number of slice First in its packed list) and the Chunks − 1 after it.
type SliceRange struct {
	Slices                           *gpu.Array[uint32]
	First, Count, FirstChunk, Chunks int
}

func (r SliceRange) check(op string) error {
	if r.First < 0 || r.Count <= 0 || r.Chunks < r.Count || r.FirstChunk < 0 || r.FirstChunk+r.Chunks >= maxElems {
		return fmt.Errorf("kernels: %s: slices [%d, +%d), chunks [%d, +%d)", op, r.First, r.Count, r.FirstChunk, r.Chunks)
	}
	return checkArray(op, r.Slices, srSliceWords*(r.First+r.Count))
}

// StackedUniWidth is the width in uints of one partials row of EncodeStackedUniWeigh: A, B, C,
// N Fp4 each.
func StackedUniWidth(lSkip int) int { return 12 << lSkip }

// StackedChunkWidth is the width in uints of one row of EncodeStackedUniChunks' sums: G0, G1, N
// Fp4 each.
func StackedChunkWidth(lSkip int) int { return 8 << lSkip }

// StackedUniMaxRows is the most partials rows one EncodeStackedUniWeigh dispatch writes.
func StackedUniMaxRows(dev *gpu.Device) int { return maxReduceGroups(dev) }

// EncodeStackedUniChunks encodes the first pass of round 0 over the slices of r (all of log
// height ≥ lSkip, all in q), the one that no batching weight enters: per chunk k of slice s
// (its blocks x0 + xl)
//
//	G0_k[z] = Σ_xl e_s[xl]·Q[(x0+xl)·N + z],  G1_k[z] = Σ_xl e_s[(xl−1) mod 2^NN]·Q[(x0+xl)·N + z]
//
// into row k of sums (chunk numbers as packed: rows r.FirstChunk .. r.FirstChunk + r.Chunks − 1,
// StackedChunkWidth uints each). EncodeStackedUniWeigh applies the weights.
func EncodeStackedUniChunks(b *gpu.Batch, dev *gpu.Device, q *gpu.Array[Mont], r SliceRange, etab *gpu.Array[Mont4], sums *gpu.Array[uint32], lSkip int) error {
	if err := r.check("StackedUniChunks"); err != nil {
		return err
	}
	if lSkip < 0 || lSkip > 5 {
		return fmt.Errorf("kernels: StackedUniChunks: l_skip %d", lSkip)
	}
	if q == nil || etab == nil {
		return fmt.Errorf("kernels: StackedUniChunks: nil buffer")
	}
	if err := checkArray("StackedUniChunks", sums, (r.FirstChunk+r.Chunks)*StackedChunkWidth(lSkip)); err != nil {
		return err
	}
	n := 1 << lSkip
	t, lanes := groupSize(dev, "sr_uni_chunks", gpuGroup), 1
	if isHost(dev) {
		t, lanes = max(1, n/16), 16 // one item of 16 lanes per group (host barriers cost per item)
	}
	g := min(r.Chunks, maxReduceGroups(dev))
	dispatchSrUniChunks(b, gpu.D1(uint32(g)), gpu.D1(uint32(t)), q.Buffer, r.Slices.Buffer, etab.Buffer, sums.Buffer,
		srUniParams{sliceFirst: uint32(r.First), sliceCount: uint32(r.Count), chunk0: uint32(r.FirstChunk), chunks: uint32(r.Chunks),
			logN: uint32(lSkip), logCb: uint32(StackedChunkLog(lSkip))}, uint32(32*t*lanes))
	return b.Err()
}

// EncodeStackedUniWeigh encodes the second pass of round 0: with the weights of r's descriptors
// (SetStackedSliceWeights) and the chunk sums of EncodeStackedUniChunks,
//
//	A[z] = Σ_k A_s·G0_k[z],  B[z] = Σ_k BW_s·G0_k[z],  C[z] = Σ_k BW_s·(G1_k[z] − G0_k[z])
//
// (s the slice of chunk k) as one partials row per group from row: EncodeSumRows over all rows
// (StackedUniWidth wide) finishes the sums. It returns the number of rows written (≤
// StackedUniMaxRows).
func EncodeStackedUniWeigh(b *gpu.Batch, dev *gpu.Device, sums *gpu.Array[uint32], r SliceRange, partials *gpu.Array[uint32], row, lSkip int) (int, error) {
	if err := r.check("StackedUniWeigh"); err != nil {
		return 0, err
	}
	if lSkip < 0 || lSkip > 5 || row < 0 {
		return 0, fmt.Errorf("kernels: StackedUniWeigh: l_skip %d, row %d", lSkip, row)
	}
	if err := checkArray("StackedUniWeigh", sums, (r.FirstChunk+r.Chunks)*StackedChunkWidth(lSkip)); err != nil {
		return 0, err
	}
	n := 1 << lSkip
	t := groupSize(dev, "sr_uni_weigh", gpuGroup)
	if isHost(dev) || t < n {
		t = n
	}
	t -= t % n // a whole number of threads for every z
	g := min((r.Chunks*n+t-1)/t, maxReduceGroups(dev))
	width := StackedUniWidth(lSkip)
	if err := checkArray("StackedUniWeigh", partials, (row+g)*width); err != nil {
		return 0, err
	}
	dispatchSrUniWeigh(b, gpu.D1(uint32(g)), gpu.D1(uint32(t)), sums.Buffer, r.Slices.Buffer, partials.Buffer,
		srUniWeighParams{sliceFirst: uint32(r.First), sliceCount: uint32(r.Count), chunk0: uint32(r.FirstChunk), chunks: uint32(r.Chunks),
			logN: uint32(lSkip), row: uint32(row)}, uint32(48*t))
	return g, b.Err()
}

// EncodeStackedBindQ encodes out[outOff + e] = Σ_{z<N} lag[z]·Q[e·N + z] for e < entries (Fp4
// out and lag; lag holds N values): with the Lagrange weights of u_0 on the order-N subgroup
// (LagrangeWeights) this is every block's IDFT coefficients evaluated at u_0, i.e. q(u_0; x).
func EncodeStackedBindQ(b *gpu.Batch, dev *gpu.Device, q *gpu.Array[Mont], lag, out *gpu.Array[Mont4], entries, lSkip, outOff int) error {
	if lSkip < 0 || lSkip > 5 || entries <= 0 || outOff < 0 {
		return fmt.Errorf("kernels: StackedBindQ: %d entries, l_skip %d, offset %d", entries, lSkip, outOff)
	}
	if err := checkArray("StackedBindQ", q, entries<<lSkip); err != nil {
		return err
	}
	if err := checkArray("StackedBindQ", lag, 1<<lSkip); err != nil {
		return err
	}
	if err := checkArray("StackedBindQ", out, outOff+entries); err != nil {
		return err
	}
	g, t := shapeFor(dev, "sr_bind_q", entries)
	dispatchSrBindQ(b, g, t, q.Buffer, lag.Buffer, out.Buffer, srBindQParams{entries: uint32(entries), logN: uint32(lSkip), outOff: uint32(outOff)})
	return b.Err()
}

// EncodeStackedBindW encodes, for every slice s of r (its i-th, i = s − r.First), w[WStart_s +
// xl] = α_i·e_s[xl] + β_i·e_s[(xl − 1) mod 2^NN] for xl < 2^NN, with α_i = weights[2i] and β_i =
// weights[2i + 1] (Fp4). Entries no slice covers are not written.
func EncodeStackedBindW(b *gpu.Batch, dev *gpu.Device, r SliceRange, weights, etab, w *gpu.Array[Mont4], lSkip int) error {
	if err := r.check("StackedBindW"); err != nil {
		return err
	}
	if lSkip < 0 || lSkip > 5 {
		return fmt.Errorf("kernels: StackedBindW: l_skip %d", lSkip)
	}
	if err := checkArray("StackedBindW", weights, 2*r.Count); err != nil {
		return err
	}
	if etab == nil || w == nil {
		return fmt.Errorf("kernels: StackedBindW: nil buffer")
	}
	units := r.Chunks << StackedChunkLog(lSkip) // GPUs: an entry per item; the host runs 64 per item
	if isHost(dev) {
		units >>= 6
	}
	g, t := shapeFor(dev, "sr_bind_w", units)
	dispatchSrBindW(b, g, t, r.Slices.Buffer, weights.Buffer, etab.Buffer, w.Buffer, srBindWParams{sliceFirst: uint32(r.First), sliceCount: uint32(r.Count),
		chunk0: uint32(r.FirstChunk), chunks: uint32(r.Chunks), logCb: uint32(StackedChunkLog(lSkip)), perEntry: uint32(b2u(!isHost(dev)))})
	return b.Err()
}

// EncodeStackedBindWeights encodes the bind weights of every slice of the descriptor table
// slices (count slices) that is not Short: weights[2s] = A_s·a0 + BW_s·bmc, weights[2s+1] =
// BW_s·c0 with (a0, bmc, c0) = uni[uniOff..uniOff+3) and A_s, BW_s the descriptors' weights
// (SetStackedSliceWeights). Short slices' entries are left as they are.
func EncodeStackedBindWeights(b *gpu.Batch, dev *gpu.Device, slices *gpu.Array[uint32], count int, uni *gpu.Array[Mont4], uniOff int, weights *gpu.Array[Mont4]) error {
	if count <= 0 || uniOff < 0 {
		return fmt.Errorf("kernels: StackedBindWeights: %d slices, offset %d", count, uniOff)
	}
	if err := checkArray("StackedBindWeights", slices, srSliceWords*count); err != nil {
		return err
	}
	if err := checkArray("StackedBindWeights", uni, uniOff+3); err != nil {
		return err
	}
	if err := checkArray("StackedBindWeights", weights, 2*count); err != nil {
		return err
	}
	g, t := shapeFor(dev, "sr_bind_weights", count)
	dispatchSrBindWeights(b, g, t, slices.Buffer, uni.Buffer, weights.Buffer, srBindWeightsParams{count: uint32(count), uniOff: uint32(uniOff)})
	return b.Err()
}

// EncodeStackedSliceWeights sets the batching weights of the first count slices of a packed
// descriptor buffer from λ (stark.StackingBatch): A = λ^(2k) and, for a slice whose bit in
// rotBits (bit s%32 of word s/32) is set, BW = λ^(2k+1), else 0; k the slice's Claim. Short
// slices are left as they are.
func EncodeStackedSliceWeights(b *gpu.Batch, dev *gpu.Device, slices *gpu.Array[uint32], count int, lambda field.Fp4, rotBits *gpu.Array[uint32]) error {
	if count <= 0 {
		return fmt.Errorf("kernels: StackedSliceWeights: %d slices", count)
	}
	if err := checkArray("StackedSliceWeights", slices, srSliceWords*count); err != nil {
		return err
	}
	if err := checkArray("StackedSliceWeights", rotBits, (count+31)/32); err != nil {
		return err
	}
	lam := MontFp4(lambda)
	g, t := shapeFor(dev, "sr_slice_weights", count)
	dispatchSrSliceWeights(b, g, t, slices.Buffer, rotBits.Buffer, srSliceWeightsParams{count: uint32(count), lam0: lam[0], lam1: lam[1], lam2: lam[2], lam3: lam[3]})
	return b.Err()
}

// StackedUniCoeffs are the inputs of EncodeStackedUniCoeffs: round 0's sums and gathered short
// blocks (Result: A, B, C as 3N Fp4 from word 0 when ABC, then the short blocks of N base values
// each from word ShortOff), and the polynomials their inverse DFTs are multiplied by (Polys from
// Fp4 PolyOff: those of A, B, C, N coefficients each; SPolys from SPolyOff: each short slice's).
type StackedUniCoeffs struct {
	Result            *gpu.Array[uint32]
	Polys, SPolys     *gpu.Array[Mont4]
	PolyOff, SPolyOff int
	ABC               bool
	Shorts            int
	ShortOff          int
}

// EncodeStackedUniCoeffs encodes round 0's 2N − 1 coefficients (N = 2^lSkip) into log[at ..]
// (sr_uni_coeffs, one group): Σ over A, B, C and the short blocks of IDFT(·)·its polynomial, in
// coefficient form.
func EncodeStackedUniCoeffs(b *gpu.Batch, dev *gpu.Device, c StackedUniCoeffs, lSkip int, log *gpu.Array[Mont4], at int) error {
	if lSkip < 0 || lSkip > 5 || c.Shorts < 0 || at < 0 || c.PolyOff < 0 || c.SPolyOff < 0 || c.ShortOff < 0 {
		return fmt.Errorf("kernels: StackedUniCoeffs: l_skip %d, %d short slices, log entry %d", lSkip, c.Shorts, at)
	}
	n := 1 << lSkip
	ncoef := 2*n - 1
	abc := 0
	if c.ABC {
		abc = 1
		if err := checkArray("StackedUniCoeffs", c.Polys, c.PolyOff+3*n); err != nil {
			return err
		}
	}
	if err := checkArray("StackedUniCoeffs", c.Result, max(12*n*abc, c.ShortOff+c.Shorts*n)); err != nil {
		return err
	}
	if err := checkArray("StackedUniCoeffs", c.SPolys, c.SPolyOff+c.Shorts*n); err != nil {
		return err
	}
	if err := checkArray("StackedUniCoeffs", log, at+ncoef); err != nil {
		return err
	}
	// A thread a coefficient (sr_uni_coeffs' threadgroup memory: 32 twiddles and 256 Fp4).
	t := groupSize(dev, "sr_uni_coeffs", 64)
	if t < ncoef {
		return fmt.Errorf("kernels: StackedUniCoeffs: groups of %d threads on this device, %d coefficients", t, ncoef)
	}
	dispatchSrUniCoeffs(b, gpu.D1(1), gpu.D1(uint32(t)), c.Result.Buffer, c.Polys.Buffer, c.SPolys.Buffer, log.Buffer,
		srUniCoeffsParams{ncoef: uint32(ncoef), abc: uint32(abc), shorts: uint32(c.Shorts), n: uint32(n), shortOff: uint32(c.ShortOff), at: uint32(at),
			polyOff: uint32(c.PolyOff), spolyOff: uint32(c.SPolyOff), winv: uint32(MontOf(field.TwoAdicGenerator(lSkip).Inverse())), ninv: uint32(MontOf(field.Fp(uint32(n)).Inverse()))},
		4*(32+4*256))
	return b.Err()
}

// StackedUniBind are the inputs of EncodeStackedUniBind besides u_0: Cst holds r_0, r_0·ω,
// eq_D(r_0·ω, 1) (Fp4) from CstOff; per short slice SCst a, bw, r', r'·ω' (Fp4) and SInfo its
// entry in the weights (which must lie in them), l_skip + nn and −nn.
type StackedUniBind struct {
	Cst, SCst *gpu.Array[Mont4]
	CstOff    int
	SInfo     *gpu.Array[uint32]
	Shorts    int
}

// EncodeStackedUniBind encodes BindUnivariate's scalars of u_0 = log[uAt] (sr_uni_bind, one
// group): lag[0..N) the Lagrange weights of u_0 (LagrangeWeights), lag[N..N+3) a0, b0 − c0, c0,
// and the bind weight of every short slice into weights.
func EncodeStackedUniBind(b *gpu.Batch, dev *gpu.Device, c StackedUniBind, lSkip int, log *gpu.Array[Mont4], uAt int, lag, weights *gpu.Array[Mont4]) error {
	if lSkip < 0 || lSkip > 5 || c.Shorts < 0 || uAt < 0 || c.CstOff < 0 {
		return fmt.Errorf("kernels: StackedUniBind: l_skip %d, %d short slices, log entry %d", lSkip, c.Shorts, uAt)
	}
	n := 1 << lSkip
	if err := checkArray("StackedUniBind", log, uAt+1); err != nil {
		return err
	}
	if err := checkArray("StackedUniBind", c.Cst, c.CstOff+3); err != nil {
		return err
	}
	if err := checkArray("StackedUniBind", c.SCst, 4*c.Shorts); err != nil {
		return err
	}
	if err := checkArray("StackedUniBind", c.SInfo, 3*c.Shorts); err != nil {
		return err
	}
	if err := checkArray("StackedUniBind", lag, n+3); err != nil {
		return err
	}
	if err := checkArray("StackedUniBind", weights, 1); err != nil {
		return err
	}
	t := groupSize(dev, "sr_uni_bind", 64)
	dispatchSrUniBind(b, gpu.D1(1), gpu.D1(uint32(t)), log.Buffer, c.Cst.Buffer, c.SCst.Buffer, c.SInfo.Buffer, lag.Buffer, weights.Buffer,
		srUniBindParams{cstOff: uint32(c.CstOff), l: uint32(lSkip), uAt: uint32(uAt), shorts: uint32(c.Shorts), winv: uint32(MontOf(field.TwoAdicGenerator(lSkip).Inverse())), inv2: uint32(MontOf(field.InvTwo))})
	return b.Err()
}

// LagrangeWeights returns L_z(u) = (1/N)·Σ_{j<N} ω^(−jz)·u^j for z < N = 2^lSkip (ω =
// field.TwoAdicGenerator(lSkip)): Σ_z L_z(u)·v_z is the polynomial with values v on the order-N
// subgroup (IDFT coefficients) evaluated at u.
func LagrangeWeights(lSkip int, u field.Fp4) []field.Fp4 {
	n := 1 << lSkip
	winv := field.TwoAdicGenerator(lSkip).Inverse()
	upow := field.PowersFp4(u, n)
	ninv := field.Fp(uint32(n)).Inverse()
	out := make([]field.Fp4, n)
	wz := field.One // ω^(−z)
	for z := range n {
		var acc field.Fp4
		wjz := field.One // ω^(−jz)
		for j := range n {
			acc = acc.Add(upow[j].MulBase(wjz))
			wjz = wjz.Mul(wz)
		}
		out[z] = acc.MulBase(ninv)
		wz = wz.Mul(winv)
	}
	return out
}
