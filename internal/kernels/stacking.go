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
	return EncodeStackTraceInto(b, dev, trace, height, width, q, start, logStride, 0, 0)
}

// EncodeStackTraceInto is EncodeStackTrace with Q's values written into dst laid out as columns
// of 2^logOut rows (logOut ≥ logH): Q's value k (Q of height 2^logH) goes to
// dst[(k >> logH)·2^logOut + k mod 2^logH]. Into a codeword buffer (logOut = logH + log blowup)
// this places the RS encoding's message without Q (NTT.EncodeRSInPlace then encodes it); the
// rows it does not write must be zero already (a new allocation is). logH = logOut = 0: Q itself.
func EncodeStackTraceInto(b *gpu.Batch, dev *gpu.Device, trace *gpu.Array[field.Fp], height, width int, dst *gpu.Array[Mont], start, logStride, logH, logOut int) error {
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
	end := start + count // one past Q's last value written
	if logH > 0 {
		end = ((end-1)>>logH)<<logOut + (end-1)&(1<<logH-1) + 1
	}
	if err := checkArray("StackTrace", dst, end); err != nil {
		return err
	}
	g, t := shapeFor(dev, "stack_trace", count)
	dispatchStackTrace(b, g, t, trace.Buffer, dst.Buffer, stackParams{count: uint32(count), dstStart: uint32(start), logStride: uint32(logStride),
		logH: uint32(logH), logOut: uint32(logOut)})
	return b.Err()
}
