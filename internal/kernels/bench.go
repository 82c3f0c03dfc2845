package kernels

import (
	"fmt"
	"unsafe"

	"github.com/metalprove/metalprove/internal/gpu"
)

// MulChainProducts is the number of Montgomery products EncodeMulChain makes: 4·n·iters.
func MulChainProducts(n, iters int) int64 { return 4 * int64(n) * int64(iters) }

// EncodeMulChain encodes bench_mul_chain: n items each running four dependent chains of iters
// BabyBear Montgomery products, writing one Montgomery element per item to out (the
// multiply-rate ceiling).
func EncodeMulChain(b *gpu.Batch, dev *gpu.Device, out *gpu.Array[Mont], n, iters int) error {
	if err := checkArray("MulChain", out, n); err != nil {
		return err
	}
	if n <= 0 || iters < 0 || iters >= 1<<31 {
		return fmt.Errorf("kernels: MulChain: n %d, iters %d", n, iters)
	}
	g, t := shapeFor(dev, "bench_mul_chain", n)
	dispatchBenchMulChain(b, g, t, out.Buffer, benchMulParams{n: uint32(n), iters: uint32(iters)})
	return b.Err()
}

// EncodeCopy encodes bench_copy: dst[i] = src[i] for the first n elements (a kernel copy, 8
// bytes moved per word; the copy-bandwidth ceiling besides Batch.Copy). The kernel moves words
// whatever they hold, so it copies arrays of any element type made of whole words.
func EncodeCopy[T any](b *gpu.Batch, dev *gpu.Device, dst, src *gpu.Array[T], n int) error {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 || size%4 != 0 {
		return fmt.Errorf("kernels: Copy: elements of %d bytes (not whole words)", size)
	}
	if err := checkArray("Copy", dst, n); err != nil {
		return err
	}
	if err := checkArray("Copy", src, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	words := n * size / 4
	g, t := shapeFor(dev, "bench_copy", words)
	dispatchBenchCopy(b, g, t, src.Buffer, dst.Buffer, uint32(words))
	return b.Err()
}
