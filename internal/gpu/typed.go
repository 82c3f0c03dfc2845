package gpu

import "unsafe"

// Array is a typed view of a Buffer holding n elements of T. T must be a fixed-size type
// without pointers (uint32, field.Fp, field.Fp4, [8]uint32, ...); its in-memory layout is the
// device layout (little-endian on every supported target).
type Array[T any] struct {
	*Buffer
	n int
}

// Len is the number of elements.
func (a *Array[T]) Len() int { return a.n }

// AllocArray allocates a zeroed array of n elements of T.
func AllocArray[T any](d *Device, name string, n int) (*Array[T], error) {
	return allocArray[T](d, name, n, false)
}

// AllocArrayUninit allocates an array of n elements with unspecified contents
// (Device.AllocUninit): for arrays the kernels write in full before they read them.
func AllocArrayUninit[T any](d *Device, name string, n int) (*Array[T], error) {
	return allocArray[T](d, name, n, true)
}

func allocArray[T any](d *Device, name string, n int, uninit bool) (*Array[T], error) {
	var zero T
	b, err := d.alloc(name, n*int(unsafe.Sizeof(zero)), uninit)
	if err != nil {
		return nil, err
	}
	return &Array[T]{Buffer: b, n: n}, nil
}

// UploadArray allocates an array holding a copy of src.
func UploadArray[T any](d *Device, name string, src []T) (*Array[T], error) {
	a, err := AllocArray[T](d, name, len(src))
	if err != nil {
		return nil, err
	}
	if err := d.Upload(a.Buffer, 0, asBytes(src)); err != nil {
		a.Free()
		return nil, err
	}
	return a, nil
}

// Write copies src into a starting at element index at (host → device).
func (a *Array[T]) Write(at int, src []T) error {
	var zero T
	return a.dev.Upload(a.Buffer, at*int(unsafe.Sizeof(zero)), asBytes(src))
}

// WriteQueued is Write through Device.UploadQueued: in queue order, for a range no work
// encoded before reads or writes.
func (a *Array[T]) WriteQueued(at int, src []T) error {
	var zero T
	return a.dev.UploadQueued(a.Buffer, at*int(unsafe.Sizeof(zero)), asBytes(src))
}

// Read copies len(dst) elements starting at element index at into dst (device → host).
func (a *Array[T]) Read(dst []T, at int) error {
	var zero T
	return a.dev.Download(asBytes(dst), a.Buffer, at*int(unsafe.Sizeof(zero)))
}

// ReadSettled is Read through Device.DownloadSettled: for an array that work before the last
// sync wrote, read without waiting for the work encoded since.
func (a *Array[T]) ReadSettled(dst []T, at int) error {
	var zero T
	return a.dev.DownloadSettled(asBytes(dst), a.Buffer, at*int(unsafe.Sizeof(zero)))
}

// ReadAll returns a copy of the whole array.
func (a *Array[T]) ReadAll() ([]T, error) {
	out := make([]T, a.n)
	return out, a.Read(out, 0)
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// View returns a's memory as an array of U: the same buffer, not a copy (freeing either frees
// both). It is for data whose element type changes in place (a conversion to Montgomery form on
// the device) and for kernels that read an array of one element type word by word. a's size must
// be a whole number of U; View panics otherwise.
func View[U, T any](a *Array[T]) *Array[U] {
	var t T
	var u U
	bytes := a.n * int(unsafe.Sizeof(t))
	if us := int(unsafe.Sizeof(u)); us == 0 || bytes%us != 0 {
		panic("gpu: View of a buffer that is not a whole number of elements")
	}
	return &Array[U]{Buffer: a.Buffer, n: bytes / int(unsafe.Sizeof(u))}
}
