// Package kernels holds the typed Go launchers of the kernels in shaders/*.metal: one file per
// shader family (ntt.go for shaders/commit/ntt.metal, poseidon2.go, merkle.go), each documenting the
// math and the buffer preconditions of what it launches. Launchers check sizes, choose dispatch
// shapes for the device at hand (GPUs: 256-thread groups, or fewer where the kernel's compiled
// pipeline allows fewer (groupSize, shapeFor), a few groups per compute unit; the
// host device, whose SIMD width is 1 (its SIMD lanes live inside the kernels: MSL_LANES in
// shaders/include/prelude.h) and whose barriers cost ~20 ns per work item: large groups
// for barrier-free kernels and one-thread groups for barrier kernels), encode into a gpu.Batch
// and return errors. They know nothing of the protocol.
//
// Device buffers hold BabyBear elements in MONTGOMERY form (x·2^32 mod p): their element types
// say so (Mont, Mont4, MontDigest), and a buffer of canonical values (a trace as uploaded) is a
// gpu.Array[field.Fp]; raw words (bytecode, indices, flags) are uint32, as are the buffers of the
// families not typed yet. A launcher given the wrong kind of buffer does not compile. ToMont/FromMont convert on the device, MontOf/CanonicalOf
// on the host.
package kernels

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// maxElems bounds every buffer a kernel indexes: kernels use 32-bit indices. A variable for
// tests (lowered, so that the column-matrix launchers are seen to use maxColumnElems instead).
var maxElems = 1 << 31

// maxColumnElems bounds the column-major matrices of the commitment path, which may exceed 2^31
// elements (keccakf-16384's RS codeword: 2^22 rows × 659 columns, 2.76·10^9): the matrices that
// ntt_message_columns, ntt_blocks and ntt_pass transform (EncodeRSMatrix, EncodeColumns,
// EncodeBlocks) and that merkle_hash_rows, merkle_gather_rows and merkle_gather_query_rows read
// (MerkleTree and its openings). Those kernels index with unsigned 32-bit arithmetic only, every
// intermediate bounded by the element it addresses (audited; see the headers of
// shaders/commit/ntt.metal and merkle.metal), so any index below 2^32 is exact; their grid-stride
// loops add at most maxGridThreads to an index below the bound, so the loop counter cannot wrap
// either. Beyond it a launcher refuses with an error naming the limit (a matrix that large needs
// 64-bit or column-chunked indexing). A variable for tests.
var maxColumnElems = 1<<32 - maxGridThreads

// maxGridThreads bounds the threads of every dispatch shaped by shapeFor (the stride of a
// grid-stride loop; H100: 64·256·132 ≈ 2^21, host 2^16·1024 = 2^26), so a loop counter below
// maxColumnElems plus one stride stays below 2^32.
const maxGridThreads = 1 << 28

const p = uint64(field.P)

// rInv is 2^-32 mod p.
var rInv = field.NewU64(1 << 32).Inverse()

// Mont is a BabyBear element in Montgomery form (x·2^32 mod p, below p), as kernels hold it.
type Mont uint32

// MontDigest is a Poseidon2 digest as the Merkle kernels hold it: eight Montgomery elements.
type MontDigest [8]Mont

// Mont4 is an Fp4 value as the kernels hold it (bb4_load in bb4.h): its four coordinates in
// Montgomery form, consecutive. Fp4 tables are interleaved, element i at words [4i, 4i+4), so a
// table is a gpu.Array[Mont4]; where a kernel splits an Fp4 table into coordinate planes (the
// WHIR codewords) the planes are base matrices, gpu.Array[Mont].
type Mont4 [4]Mont

// MontOf returns x in Montgomery form.
func MontOf(x field.Fp) Mont { return Mont((uint64(x) << 32) % p) }

// CanonicalOf returns the field element whose Montgomery form is m (m < p): m·2⁻³² mod p by one
// Montgomery reduction, t = m·(−p⁻¹) mod 2³² and (m + t·p)/2³² ≤ p: two products instead of the
// four of a product with 2⁻³² (a keccakf-1024 proof converts 21,064 column openings at once).
func CanonicalOf(mont Mont) field.Fp {
	m := uint32(mont)
	t := m * montNegPInv
	u := uint32((uint64(m) + uint64(t)*p) >> 32)
	if u >= field.P {
		u -= field.P
	}
	return field.Fp(u)
}

// montNegPInv is −p⁻¹ mod 2³².
const montNegPInv = 0x77ffffff

// convertSlice returns f of every element of v, in order.
func convertSlice[T, U any](v []T, f func(T) U) []U {
	out := make([]U, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// MontSlice converts canonical values to Montgomery form.
func MontSlice(v []field.Fp) []Mont { return convertSlice(v, MontOf) }

// CanonicalSlice converts Montgomery values to canonical field elements.
func CanonicalSlice(v []Mont) []field.Fp { return convertSlice(v, CanonicalOf) }

// isHost reports whether dev is a CPU device (SIMD width 1).
func isHost(dev *gpu.Device) bool { return dev.Limits().SIMDWidth <= 1 }

// gpuGroup is the group size launchers ask for on GPUs (groupSize clamps it).
const gpuGroup = 256

// groupSize returns want clamped to what kernel allows on dev: its compiled pipeline's maximum
// threads per group (Metal maxTotalThreadsPerThreadgroup, CUDA's per-function limit; lower than
// the device's for register-heavy kernels), rounded down to a multiple of its SIMD width when
// at least one SIMD group fits; at least 1. kernel "" clamps to what every kernel allows. Every
// launcher's group size goes through groupSize (or shape, shapeFor), never a bare constant.
func groupSize(dev *gpu.Device, kernel string, want int) int {
	l := dev.KernelLimits(kernel)
	t := max(want, 1)
	if l.MaxThreadsPerGroup > 0 {
		t = min(t, l.MaxThreadsPerGroup)
	}
	if w := l.SIMDWidth; w > 1 && t >= w {
		t -= t % w
	}
	return t
}

// shape returns a 1-D dispatch covering work items with a grid-stride kernel, with a group size
// every kernel allows on dev (shapeFor with kernel ""); launchers that know their kernel use
// shapeFor.
func shape(dev *gpu.Device, work int) (groups, tpg gpu.Dim3) { return shapeFor(dev, "", work) }

// shapeFor returns a 1-D dispatch of kernel covering work items with a grid-stride loop. On the
// host every group is a contiguous run of up to 1024 items (cache friendly; barrier-free kernels
// run a group as a plain loop); on a GPU, groups of 256 threads (or the kernel's maximum, if
// lower), at most 64·256 threads per compute unit.
func shapeFor(dev *gpu.Device, kernel string, work int) (groups, tpg gpu.Dim3) {
	work = max(work, 1)
	lim := dev.Limits()
	want := gpuGroup
	if isHost(dev) {
		want = 1024
	}
	t := min(groupSize(dev, kernel, want), work)
	g := (work + t - 1) / t
	capG := 1 << 16
	if !isHost(dev) && lim.ComputeUnits > 0 {
		capG = 64 * gpuGroup * lim.ComputeUnits / t
	}
	g = min(g, capG, maxGridThreads/t)
	return gpu.D1(uint32(g)), gpu.D1(uint32(t))
}

// checkArray checks that a holds at least need elements and that the kernel's 32-bit word
// indices reach them (maxElems counts uint32 words: a MontDigest is eight).
func checkArray[T any](name string, a *gpu.Array[T], need int) error {
	if a == nil {
		return fmt.Errorf("kernels: %s: nil buffer", name)
	}
	if need > a.Len() {
		return fmt.Errorf("kernels: %s: buffer %q holds %d elements, %d needed", name, a.Name(), a.Len(), need)
	}
	var zero T
	if need*int(unsafe.Sizeof(zero)/4) >= maxElems {
		return fmt.Errorf("kernels: %s: %d elements exceed the limit of 32-bit indexing (%s)", name, need, limitString(maxElems))
	}
	return nil
}

// checkColumns is checkArray for the column-major matrices of the commitment path, whose kernels
// index correctly up to maxColumnElems (unsigned 32-bit arithmetic). The limit is checked first:
// it is the error a too large matrix meets, whatever buffer came with it.
func checkColumns[T Mont | field.Fp](name string, a *gpu.Array[T], need int) error {
	if need >= maxColumnElems {
		return fmt.Errorf("kernels: %s: %d elements reach the limit of the column kernels' unsigned 32-bit indexing (%s)",
			name, need, limitString(maxColumnElems))
	}
	if a == nil {
		return fmt.Errorf("kernels: %s: nil buffer", name)
	}
	if need > a.Len() {
		return fmt.Errorf("kernels: %s: buffer %q holds %d elements, %d needed", name, a.Name(), a.Len(), need)
	}
	return nil
}

// limitString writes an element limit as a power of two or a difference of two (2^31,
// 2^32 − 2^28), else as a number (the lowered limits of tests).
func limitString(n int) string {
	if n > 0 && n&(n-1) == 0 {
		return fmt.Sprintf("2^%d", bits.TrailingZeros(uint(n)))
	}
	if d := 1<<32 - n; d > 0 && d&(d-1) == 0 {
		return fmt.Sprintf("2^32 − 2^%d", bits.TrailingZeros(uint(d)))
	}
	return fmt.Sprint(n)
}

// EncodeToMont encodes the conversion of the first n canonical elements of a into Montgomery
// form, in place (field_ops fo_to_mont). The result is a's memory viewed as Mont.
func EncodeToMont(b *gpu.Batch, dev *gpu.Device, a *gpu.Array[field.Fp], n int) error {
	if err := checkArray("ToMont", a, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	g, t := shapeFor(dev, "fo_to_mont", n)
	dispatchFoToMont(b, g, t, a.Buffer, a.Buffer, uint32(n))
	return b.Err()
}

// EncodeFromMont encodes the conversion of the first n Montgomery elements of a to canonical
// form, in place (field_ops fo_from_mont). The result is a's memory viewed as field.Fp.
func EncodeFromMont(b *gpu.Batch, dev *gpu.Device, a *gpu.Array[Mont], n int) error {
	if err := checkArray("FromMont", a, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	g, t := shapeFor(dev, "fo_from_mont", n)
	dispatchFoFromMont(b, g, t, a.Buffer, a.Buffer, uint32(n))
	return b.Err()
}

// UploadMont uploads canonical values converted to Montgomery form on the host.
func UploadMont(dev *gpu.Device, name string, v []field.Fp) (*gpu.Array[Mont], error) {
	return gpu.UploadArray(dev, name, MontSlice(v))
}

// ReadCanonical downloads a Montgomery array and converts it to canonical values on the host.
func ReadCanonical(a *gpu.Array[Mont]) ([]field.Fp, error) {
	v, err := a.ReadAll()
	if err != nil {
		return nil, err
	}
	return CanonicalSlice(v), nil
}
