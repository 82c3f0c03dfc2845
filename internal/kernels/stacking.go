package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// EncodeStackTrace encodes the placement of one resident trace into the stacked matrix q
// (shaders/commit/stacking.metal stack_trace; spec A §5.3): trace is column-major and canonical
// (height h, width w, as uploaded), q column-major in Montgomery form. Column j's values go to
// q[start + j·h·2^logStride + i·2^logStride], i < h, with zeros on the rows between them; start
// and logStride come from stark.StackedLayout.Placement of the trace's first column.
func EncodeStackTrace(b *gpu.Batch, dev *gpu.Device, trace *gpu.Array[field.Fp], height, width int, q *gpu.Array[Mont], start, logStride int) error {
	return encodeStackWindow(b, dev, trace, height, width, q, start, logStride, 0, 0, 0, -1)
}

// EncodeStackTraceCols is EncodeStackTrace for a chunk of the columns of Q (of height 2^logH,
// logH ≥ 1) laid out as columns of 2^logOut rows (logOut ≥ logH): dst holds Q's columns
// [colBegin, colBegin + cols), Q's value k going to dst[(k' >> logH)·2^logOut + k' mod 2^logH]
// for k' = k − colBegin·2^logH. Into a chunk of a codeword (logOut = logH + log blowup) this
// places the RS encoding's message without Q (NTT.EncodeRSInPlace then encodes it). Only the part
// of the trace that falls in those columns is written (none, when it lies outside); the other
// words of dst must be zero already (EncodeZero).
func EncodeStackTraceCols(b *gpu.Batch, dev *gpu.Device, trace *gpu.Array[field.Fp], height, width int, dst *gpu.Array[Mont], start, logStride, logH, logOut, colBegin, cols int) error {
	if logH < 1 || colBegin < 0 || cols <= 0 {
		return fmt.Errorf("kernels: StackTrace: columns [%d, %d+%d) of a Q of height 2^%d", colBegin, colBegin, cols, logH)
	}
	return encodeStackWindow(b, dev, trace, height, width, dst, start, logStride, logH, logOut, colBegin<<logH, (colBegin+cols)<<logH)
}

// encodeStackWindow writes Q's values k in [lo, hi) (hi < 0: no bound) to dst at k − lo, mapped
// to columns of 2^logOut rows; lo is a multiple of 2^logH.
func encodeStackWindow(b *gpu.Batch, dev *gpu.Device, trace *gpu.Array[field.Fp], height, width int, dst *gpu.Array[Mont], start, logStride, logH, logOut, lo, hi int) error {
	if width == 0 {
		return nil
	}
	if height <= 0 || width < 0 || logStride < 0 || logStride > 30 || start < 0 || logH < 0 || logOut < logH || logOut > 30 {
		return fmt.Errorf("kernels: StackTrace: %d×%d trace, start %d, log stride %d, 2^%d rows into 2^%d", height, width, start, logStride, logH, logOut)
	}
	count := width * height << logStride
	if err := checkArray("StackTrace", trace, width*height); err != nil {
		return err
	}
	// The trace's values i in [begin, end) fall in the window.
	begin, end := max(lo-start, 0), count
	if hi >= 0 {
		end = min(end, hi-start)
	}
	if begin >= end {
		return nil
	}
	last := start + end - 1 - lo // the window's last value written, relative to lo
	if logH > 0 {
		last = (last>>logH)<<logOut + last&(1<<logH-1)
	}
	if err := checkArray("StackTrace", dst, last+1); err != nil {
		return err
	}
	g, t := shapeFor(dev, "stack_trace", end-begin)
	dispatchStackTrace(b, g, t, trace.Buffer, dst.Buffer, stackParams{count: uint32(end), dstStart: uint32(start - lo), logStride: uint32(logStride),
		logH: uint32(logH), logOut: uint32(logOut), begin: uint32(begin)})
	return b.Err()
}

// EncodeZero encodes dst[i] = 0 for every element of dst.
func EncodeZero(b *gpu.Batch, dev *gpu.Device, dst *gpu.Array[Mont]) error {
	if err := checkArray("Zero", dst, dst.Len()); err != nil {
		return err
	}
	g, t := shapeFor(dev, "zero_words", dst.Len())
	dispatchZeroWords(b, g, t, dst.Buffer, zeroParams{count: uint32(dst.Len())})
	return b.Err()
}
