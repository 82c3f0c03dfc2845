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
// 16-byte aligned offset, and returns the offsets and the total (Σ round_up(tgLen[j], 16)).
func tgLayout(tgLen []uint32) (offs []uint32, total uint64) {
	offs = make([]uint32, len(tgLen))
	for j, l := range tgLen {
		offs[j] = uint32(total)
		total += (uint64(l) + 15) &^ 15
	}
	return offs, total
}

// packParams builds the parameters of mslk_<k.Name>: every declared [[buffer(i)]] slot in
// increasing i (a device pointer, or the value's bytes), then one 32-bit offset per declared
// [[threadgroup(j)]] in increasing j. devPtr resolves a backend buffer to its device address.
func packParams(k *driver.KernelInfo, args []driver.Arg, tgLen []uint32, devPtr func(driver.Buffer) (uint64, error)) (launchParams, error) {
	var lp launchParams
	if len(args) != k.NBuf {
		return lp, fmt.Errorf("%d buffer arguments for %d slots", len(args), k.NBuf)
	}
	if len(tgLen) != k.NTG {
		return lp, fmt.Errorf("%d threadgroup lengths for %d threadgroup parameters", len(tgLen), k.NTG)
	}
	var bufs, tgs []driver.Param
	for _, p := range k.Params {
		switch p.Kind {
		case driver.ParamBuffer, driver.ParamValue:
			if p.Index < 0 || p.Index >= k.NBuf {
				return lp, fmt.Errorf("parameter %s: buffer index %d outside [0, %d)", p.Name, p.Index, k.NBuf)
			}
			bufs = append(bufs, p)
		case driver.ParamThreadgroup:
			if p.Index < 0 || p.Index >= k.NTG {
				return lp, fmt.Errorf("parameter %s: threadgroup index %d outside [0, %d)", p.Name, p.Index, k.NTG)
			}
			tgs = append(tgs, p)
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
	if err := byIndex(bufs); err != nil {
		return lp, err
	}
	if err := byIndex(tgs); err != nil {
		return lp, err
	}
	if n := len(bufs) + len(tgs); n > maxParams {
		return lp, fmt.Errorf("%d parameters exceed the launcher's limit %d", n, maxParams)
	}

	put := func(b []byte) {
		for len(lp.blob)%8 != 0 {
			lp.blob = append(lp.blob, 0)
		}
		lp.offs = append(lp.offs, uint32(len(lp.blob)))
		lp.blob = append(lp.blob, b...)
	}
	for _, p := range bufs {
		a := args[p.Index]
		switch p.Kind {
		case driver.ParamBuffer:
			if a.Buf == nil {
				return lp, fmt.Errorf("argument %d (%s %s) needs a buffer", p.Index, p.Type, p.Name)
			}
			ptr, err := devPtr(a.Buf)
			if err != nil {
				return lp, fmt.Errorf("argument %d (%s): %w", p.Index, p.Name, err)
			}
			put(binary.LittleEndian.AppendUint64(nil, ptr))
		case driver.ParamValue:
			if a.Buf != nil || len(a.Bytes) != p.ValueSize || p.ValueSize == 0 {
				return lp, fmt.Errorf("argument %d (%s %s) takes %d bytes by value, got %d", p.Index, p.Type, p.Name, p.ValueSize, len(a.Bytes))
			}
			put(a.Bytes)
		}
	}
	offs, total := tgLayout(tgLen)
	if total > 1<<31 {
		return lp, fmt.Errorf("%d bytes of threadgroup memory", total)
	}
	lp.tgOff, lp.smem = offs, uint32(total)
	for _, p := range tgs {
		put(binary.LittleEndian.AppendUint32(nil, offs[p.Index]))
	}
	return lp, nil
}
