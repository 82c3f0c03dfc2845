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
	if width == 0 {
		return nil
	}
	if height <= 0 || width < 0 || logStride < 0 || logStride > 30 || start < 0 {
		return fmt.Errorf("kernels: StackTrace: %d×%d trace, start %d, log stride %d", height, width, start, logStride)
	}
	count := width * height << logStride
	if err := checkArray("StackTrace", trace, width*height); err != nil {
		return err
	}
	if err := checkArray("StackTrace", q, start+count); err != nil {
		return err
	}
	g, t := shapeFor(dev, "stack_trace", count)
	dispatchStackTrace(b, g, t, trace.Buffer, q.Buffer, stackParams{count: uint32(count), dstStart: uint32(start), logStride: uint32(logStride)})
	return b.Err()
}
