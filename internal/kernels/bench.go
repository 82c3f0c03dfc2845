package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/gpu"
)

// MulChainProducts is the number of Montgomery products EncodeMulChain makes: 4·n·iters.
func MulChainProducts(n, iters int) int64 { return 4 * int64(n) * int64(iters) }

// EncodeMulChain encodes bench_mul_chain: n items each running four dependent chains of iters
// BabyBear Montgomery products, writing one uint per item to out (the multiply-rate ceiling).
func EncodeMulChain(b *gpu.Batch, dev *gpu.Device, out *gpu.Array[uint32], n, iters int) error {
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

// EncodeCopy encodes bench_copy: dst[i] = src[i] for i < n (a kernel copy, 8 bytes moved per
// element; the copy-bandwidth ceiling besides Batch.Copy).
func EncodeCopy(b *gpu.Batch, dev *gpu.Device, dst, src *gpu.Array[uint32], n int) error {
	if err := checkArray("Copy", dst, n); err != nil {
		return err
	}
	if err := checkArray("Copy", src, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	g, t := shapeFor(dev, "bench_copy", n)
	dispatchBenchCopy(b, g, t, src.Buffer, dst.Buffer, uint32(n))
	return b.Err()
}
