package cuda

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// maxParams is the most parameters one launch passes (MP_MAX_PARAMS in cudadl.h).
const maxParams = 256

// defaultDynSmem is the dynamic shared memory a kernel may use without opting in through
// cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
const defaultDynSmem = 48 << 10

// launchParams is the parameter list of one cuLaunchKernel, built without CUDA so it can be
// tested anywhere: blob holds every parameter's bytes, each at an 8-byte aligned offset offs[i]
// (cuLaunchKernel's kernelParams[i] = blob + offs[i]); smem is the dynamic shared memory size.
type launchParams struct {
	blob  []byte
	offs  []uint32
	tgOff []uint32 // byte offset of [[threadgroup(j)]] in dynamic shared memory
	smem  uint32
}

// tgLayout places the threadgroup arrays one after another in dynamic shared memory, each at a
// 16-byte aligned offset, and returns the offsets (appended to offs[:0]) and the total
// (Σ round_up(tgLen[j], 16)).
func tgLayout(offs []uint32, tgLen []uint32) ([]uint32, uint64) {
	offs = offs[:0]
	var total uint64
	for _, l := range tgLen {
		offs = append(offs, uint32(total))
		total += (uint64(l) + 15) &^ 15
	}
	return offs, total
}

// paramOrder is a kernel's parameters in launch order: its [[buffer(i)]] slots by increasing i,
// then its [[threadgroup(j)]] arrays by increasing j. A backend checks and sorts them once per
// kernel (orderParams); each launch then only writes the bytes (pack).
type paramOrder struct {
	bufs, tgs []driver.Param
}

// orderParams checks k's parameter list and returns it in launch order.
func orderParams(k *driver.KernelInfo) (*paramOrder, error) {
	o := &paramOrder{}
	for _, p := range k.Params {
		switch p.Kind {
		case driver.ParamBuffer, driver.ParamValue:
			if p.Index < 0 || p.Index >= k.NBuf {
				return nil, fmt.Errorf("parameter %s: buffer index %d outside [0, %d)", p.Name, p.Index, k.NBuf)
			}
			o.bufs = append(o.bufs, p)
		case driver.ParamThreadgroup:
			if p.Index < 0 || p.Index >= k.NTG {
				return nil, fmt.Errorf("parameter %s: threadgroup index %d outside [0, %d)", p.Name, p.Index, k.NTG)
			}
			o.tgs = append(o.tgs, p)
		}
	}
	byIndex := func(ps []driver.Param) error {
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].Index < ps[j].Index })
		for i := 1; i < len(ps); i++ {
			if ps[i].Index == ps[i-1].Index {
				return fmt.Errorf("parameters %s and %s share index %d", ps[i-1].Name, ps[i].Name, ps[i].Index)
			}
		}
		return nil
	}
	if err := byIndex(o.bufs); err != nil {
		return nil, err
	}
	if err := byIndex(o.tgs); err != nil {
		return nil, err
	}
	if n := len(o.bufs) + len(o.tgs); n > maxParams {
		return nil, fmt.Errorf("%d parameters exceed the launcher's limit %d", n, maxParams)
	}
	return o, nil
}

// packParams builds the parameters of mslk_<k.Name>: every declared [[buffer(i)]] slot in
// increasing i (a device pointer, or the value's bytes), then one 32-bit offset per declared
// [[threadgroup(j)]] in increasing j. devPtr resolves a backend buffer to its device address.
func packParams(k *driver.KernelInfo, args []driver.Arg, tgLen []uint32, devPtr func(driver.Buffer) (uint64, error)) (launchParams, error) {
	var lp launchParams
	if err := checkArgCounts(k, args, tgLen); err != nil {
		return lp, err
	}
	o, err := orderParams(k)
	if err != nil {
		return lp, err
	}
	err = o.pack(&lp, args, tgLen, devPtr)
	return lp, err
}

// checkArgCounts checks that a launch gives k one argument per [[buffer]] slot and one length
// per [[threadgroup]] array.
func checkArgCounts(k *driver.KernelInfo, args []driver.Arg, tgLen []uint32) error {
	if len(args) != k.NBuf {
		return fmt.Errorf("%d buffer arguments for %d slots", len(args), k.NBuf)
	}
	if len(tgLen) != k.NTG {
		return fmt.Errorf("%d threadgroup lengths for %d threadgroup parameters", len(tgLen), k.NTG)
	}
	return nil
}

// pack writes the parameters into lp, reusing its slices (a backend keeps one for its launches:
// a launch then allocates nothing). The argument counts are checked (checkArgCounts).
func (o *paramOrder) pack(lp *launchParams, args []driver.Arg, tgLen []uint32, devPtr func(driver.Buffer) (uint64, error)) error {
	lp.blob, lp.offs, lp.smem = lp.blob[:0], lp.offs[:0], 0
	align := func() {
		for len(lp.blob)%8 != 0 {
			lp.blob = append(lp.blob, 0)
		}
		lp.offs = append(lp.offs, uint32(len(lp.blob)))
	}
	for _, p := range o.bufs {
		a := args[p.Index]
		switch p.Kind {
		case driver.ParamBuffer:
			if a.Buf == nil {
				return fmt.Errorf("argument %d (%s %s) needs a buffer", p.Index, p.Type, p.Name)
			}
			ptr, err := devPtr(a.Buf)
			if err != nil {
				return fmt.Errorf("argument %d (%s): %w", p.Index, p.Name, err)
			}
			align()
			lp.blob = binary.LittleEndian.AppendUint64(lp.blob, ptr)
		case driver.ParamValue:
			if a.Buf != nil || len(a.Bytes) != p.ValueSize || p.ValueSize == 0 {
				return fmt.Errorf("argument %d (%s %s) takes %d bytes by value, got %d", p.Index, p.Type, p.Name, p.ValueSize, len(a.Bytes))
			}
			align()
			lp.blob = append(lp.blob, a.Bytes...)
		}
	}
	var total uint64
	lp.tgOff, total = tgLayout(lp.tgOff, tgLen)
	if total > 1<<31 {
		return fmt.Errorf("%d bytes of threadgroup memory", total)
	}
	lp.smem = uint32(total)
	for _, p := range o.tgs {
		align()
		lp.blob = binary.LittleEndian.AppendUint32(lp.blob, lp.tgOff[p.Index])
	}
	return nil
}
