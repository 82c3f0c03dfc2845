package gpu

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// Arg binds one [[buffer(i)]] slot of a dispatch: a Buffer (Buf) or a small value (U32, Value).
type Arg struct {
	buf   *Buffer
	bytes []byte
}

// Buf binds a buffer to a `device T*` / `constant T*` slot.
func Buf(b *Buffer) Arg { return Arg{buf: b} }

// U32 binds a `constant T&` slot whose T is made of the given uint32 fields, in order.
func U32(fields ...uint32) Arg {
	b := make([]byte, 0, 4*len(fields))
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint32(b, f)
	}
	return Arg{bytes: b}
}

// Batch encodes dispatches and copies that are submitted and waited for once, by Wait. The
// first error is kept; later calls do nothing and Wait returns it.
type Batch struct {
	d   *Device
	err error
	n   int
}

// Batch starts a batch of work on d.
func (d *Device) Batch() *Batch { return &Batch{d: d} }

// Dispatch encodes groups threadgroups of tpg threads of kernel name. tgLen gives the byte
// length of each [[threadgroup(i)]] parameter.
func (b *Batch) Dispatch(name string, groups, tpg Dim3, args []Arg, tgLen ...uint32) *Batch {
	if b.err != nil {
		return b
	}
	k := driver.Lookup(name)
	if k == nil {
		b.err = &Error{Op: "dispatch", Kernel: name, Err: fmt.Errorf("no such kernel in shaders/")}
		return b
	}
	if k.Module != "" {
		b.err = &Error{Op: "dispatch", Kernel: name, Err: fmt.Errorf("a kernel of module template %q runs from a module built from it (DispatchIn)", k.Module)}
		return b
	}
	return b.dispatch(k, name, groups, tpg, args, tgLen)
}

// DispatchIn encodes kernel name of the module m (built by Device.BuildModules from the kernel's
// template) as Dispatch does.
func (b *Batch) DispatchIn(m *Module, name string, groups, tpg Dim3, args []Arg, tgLen ...uint32) *Batch {
	if b.err != nil {
		return b
	}
	if m == nil || m.dev != b.d {
		b.err = &Error{Op: "dispatch", Kernel: name, Err: fmt.Errorf("no module built on this device")}
		return b
	}
	k := m.kernels[name]
	if k == nil {
		b.err = &Error{Op: "dispatch", Kernel: name, Err: fmt.Errorf("module template %q has no such kernel", m.src.Template)}
		return b
	}
	return b.dispatch(k, name, groups, tpg, args, tgLen)
}

func (b *Batch) dispatch(k *driver.KernelInfo, name string, groups, tpg Dim3, args []Arg, tgLen []uint32) *Batch {
	d := b.d
	dargs, err := d.validateDispatch(k, groups, tpg, args, tgLen)
	if err != nil {
		b.err = err
		return b
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.be.Dispatch(k, groups, tpg, dargs, tgLen); err != nil {
		b.err = &Error{Op: "dispatch", Kernel: name, Err: err}
		return b
	}
	d.stats.Dispatches++
	d.stats.PerKernel[name]++
	d.encoded()
	b.n++
	return b
}

// Copy encodes a device-to-device copy of n bytes.
func (b *Batch) Copy(dst *Buffer, dstOffset int, src *Buffer, srcOffset int, n int) *Batch {
	if b.err != nil {
		return b
	}
	d := b.d
	if err := d.checkRange("copy", dst, dstOffset, n); err != nil {
		b.err = err
		return b
	}
	if err := d.checkRange("copy", src, srcOffset, n); err != nil {
		b.err = err
		return b
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.be.Copy(dst.b, dstOffset, src.b, srcOffset, n); err != nil {
		b.err = &Error{Op: "copy", Buffer: dst.name, Err: err}
		return b
	}
	d.stats.Copies++
	d.stats.BytesCopied += int64(n)
	d.encoded()
	b.n++
	return b
}

// Err returns the first encoding error, if any.
func (b *Batch) Err() error { return b.err }

// Wait submits the batch and waits for it (one sync). It returns the first error of the batch.
func (b *Batch) Wait() error {
	if b.err != nil {
		return b.err
	}
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	if err := d.be.Sync(); err != nil {
		b.err = &Error{Op: "sync", Err: err}
		return b.err
	}
	d.synced(start)
	return nil
}
