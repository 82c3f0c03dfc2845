package tracefile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/metalprove/metalprove/internal/field"
)

type readerState int

const (
	stateHeader readerState = iota // between sections: Next reads a section header
	stateCells                     // inside a section's cells
	stateEOF                       // Next returned io.EOF
)

// Reader decodes a trace file section by section:
//
//	r, err := tracefile.Open(path)
//	if err != nil { … }
//	defer r.Close()
//	for {
//		h, err := r.Next()
//		if err == io.EOF { break }
//		if err != nil { … }
//		data := make([]field.Fp, h.Width*h.Height)
//		if err := r.ReadColumns(data); err != nil { … }
//	}
//
// Errors about the bytes are *FormatError and are final: every later call returns the same error.
type Reader struct {
	// MaxSectionBytes limits the cell bytes (width·height·4) of one section; set it before
	// calling Next. It defaults to DefaultMaxSectionBytes.
	MaxSectionBytes int64

	br    *bufio.Reader
	f     *os.File // Open only
	size  int64    // file size, −1 when unknown
	off   int64    // offset of the next unread byte
	count int      // sections declared
	next  int      // index of the next section Next returns
	state readerState
	err   error

	// Current section (stateCells).
	sec        int
	cur        SectionHeader
	cellsTotal int64
	cellsDone  int64
	crc        uint32
	buf        []byte
}

// Open opens the trace file at path and reads its file header.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tracefile: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tracefile: %w", err)
	}
	size := int64(-1)
	if st.Mode().IsRegular() {
		size = st.Size()
	}
	r, err := NewReader(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// NewReader reads the file header from rd. size is the total size of the file in bytes, or −1
// when unknown; when known, header fields claiming more bytes than remain are rejected before
// anything is allocated or read.
func NewReader(rd io.Reader, size int64) (*Reader, error) {
	if size < 0 {
		size = -1
	}
	r := &Reader{MaxSectionBytes: DefaultMaxSectionBytes, br: bufio.NewReaderSize(rd, 64<<10), size: size}
	if err := r.readFileHeader(); err != nil {
		return nil, err
	}
	return r, nil
}

// Close closes the file opened by Open; for a Reader from NewReader it does nothing.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// SectionCount returns the number of sections the file header declares.
func (r *Reader) SectionCount() int { return r.count }

func (r *Reader) formatError(sec int, named bool, off int64, format string, args ...any) error {
	e := &FormatError{Section: sec, Offset: off, Msg: fmt.Sprintf(format, args...)}
	if named {
		e.Name = r.cur.Name
	}
	r.err = e
	return e
}

// truncated reports a file that ends at byte offset end while what was being read.
func (r *Reader) truncated(sec int, named bool, end int64, what string) error {
	msg := "unexpected end of file in " + what
	if sec >= 0 && r.count > 0 {
		msg += fmt.Sprintf(" (the file header declares %d sections)", r.count)
	}
	return r.formatError(sec, named, end, "%s", msg)
}

// need fails unless n more bytes remain in a file of known size.
func (r *Reader) need(n int64, sec int, named bool, what string) error {
	if r.size >= 0 && n > r.size-r.off {
		return r.truncated(sec, named, max(r.size, r.off), what)
	}
	return nil
}

// readFull reads len(p) bytes; a short read is a truncation error in section sec.
func (r *Reader) readFull(p []byte, sec int, named bool, what string) error {
	if err := r.need(int64(len(p)), sec, named, what); err != nil {
		return err
	}
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return r.truncated(sec, named, r.off, what)
	}
	if err != nil {
		r.err = fmt.Errorf("tracefile: reading %s at byte offset %d: %w", what, r.off, err)
		return r.err
	}
	return nil
}

func (r *Reader) readFileHeader() error {
	var hb [FileHeaderSize]byte
	n, err := io.ReadFull(r.br, hb[:])
	r.off = int64(n)
	if m := min(n, len(Magic)); string(hb[:m]) != Magic[:m] {
		return r.formatError(-1, false, 0, "bad magic %q: not a trace file", hb[:m])
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return r.truncated(-1, false, r.off, "file header")
	}
	if err != nil {
		r.err = fmt.Errorf("tracefile: reading file header: %w", err)
		return r.err
	}
	le := binary.LittleEndian
	if v := le.Uint32(hb[8:]); v != Version {
		return r.formatError(-1, false, 8, "unsupported format version %d (this reader supports %d)", v, Version)
	}
	if got, want := le.Uint32(hb[20:]), crc32.Checksum(hb[:20], castagnoli); got != want {
		return r.formatError(-1, false, 20, "file header checksum mismatch: stored %08x, computed %08x", got, want)
	}
	if fl := le.Uint32(hb[16:]); fl != 0 {
		return r.formatError(-1, false, 16, "reserved flags %#x are not zero", fl)
	}
	c := le.Uint32(hb[12:])
	if c < 1 || c > MaxSections {
		return r.formatError(-1, false, 12, "section count %d is not in [1, %d]", c, MaxSections)
	}
	r.count = int(c)
	return nil
}

// Next reads the next section header and returns it; io.EOF follows the last section (after
// checking that the file ends there). Cells of the previous section not yet read are skipped
// (and verified, see SkipCells).
func (r *Reader) Next() (SectionHeader, error) {
	if r.err != nil {
		return SectionHeader{}, r.err
	}
	switch r.state {
	case stateEOF:
		return SectionHeader{}, io.EOF
	case stateCells:
		if err := r.SkipCells(); err != nil {
			return SectionHeader{}, err
		}
	}
	if r.next == r.count {
		if err := r.checkEnd(); err != nil {
			return SectionHeader{}, err
		}
		r.state = stateEOF
		return SectionHeader{}, io.EOF
	}
	sec := r.next
	start := r.off
	le := binary.LittleEndian

	// The header is read in three parts, each bounded before it is read.
	var fixed [2 + MaxNameLen + 12]byte
	if err := r.readFull(fixed[:2], sec, false, "section header"); err != nil {
		return SectionHeader{}, err
	}
	nlen := int(le.Uint16(fixed[:]))
	if nlen < 1 || nlen > MaxNameLen {
		return SectionHeader{}, r.formatError(sec, false, start, "name length %d is not in [1, %d]", nlen, MaxNameLen)
	}
	if err := r.readFull(fixed[2:2+nlen+12], sec, false, "section header"); err != nil {
		return SectionHeader{}, err
	}
	rest := fixed[2+nlen:]
	width, height, npub := le.Uint32(rest), le.Uint32(rest[4:]), le.Uint32(rest[8:])
	if npub > MaxPublicValues {
		return SectionHeader{}, r.formatError(sec, false, r.off-4, "public value count %d exceeds the limit %d", npub, MaxPublicValues)
	}
	pub := make([]byte, 4*int(npub)+4)
	if err := r.readFull(pub, sec, false, "section header"); err != nil {
		return SectionHeader{}, err
	}
	crc := crc32.Update(crc32.Checksum(fixed[:2+nlen+12], castagnoli), castagnoli, pub[:4*npub])
	if got := le.Uint32(pub[4*npub:]); got != crc {
		return SectionHeader{}, r.formatError(sec, false, r.off-4, "section header checksum mismatch: stored %08x, computed %08x", got, crc)
	}

	h := SectionHeader{Name: string(fixed[2 : 2+nlen]), PublicValues: make([]field.Fp, npub)}
	for i := range h.PublicValues {
		h.PublicValues[i] = field.Fp(le.Uint32(pub[4*i:])) // validated by headerProblem
	}
	if msg, rel := headerProblem(h.Name, int64(width), int64(height), h.PublicValues, r.MaxSectionBytes); msg != "" {
		return SectionHeader{}, r.formatError(sec, false, start+rel, "%s", msg)
	}
	if npub == 0 {
		h.PublicValues = nil
	}
	h.Width, h.Height = int(width), int(height)
	r.sec, r.cur = sec, h
	r.cellsTotal = int64(width) * int64(height)
	if r.cellsTotal > math.MaxInt {
		return SectionHeader{}, r.formatError(sec, true, start+2+int64(nlen), "%d cells do not fit in memory on this platform", r.cellsTotal)
	}
	if err := r.need(4*r.cellsTotal+4, sec, true, "cells"); err != nil {
		return SectionHeader{}, err
	}
	r.cellsDone, r.crc = 0, 0
	r.next++
	r.state = stateCells
	return h, nil
}

// checkEnd verifies that the file ends after the last section.
func (r *Reader) checkEnd() error {
	if r.size >= 0 && r.off < r.size {
		return r.formatError(-1, false, r.off, "%d trailing bytes after the last section", r.size-r.off)
	}
	var one [1]byte
	n, err := io.ReadFull(r.br, one[:])
	if n > 0 {
		return r.formatError(-1, false, r.off, "trailing bytes after the last section")
	}
	if err != io.EOF {
		r.err = fmt.Errorf("tracefile: reading at byte offset %d: %w", r.off, err)
		return r.err
	}
	return nil
}

// ReadColumns reads all cells of the current section into dst, column-major; len(dst) must be
// Width·Height and no column of the section may have been read yet. Each value is checked < p,
// and the section checksum after the last one; on error dst holds partial data.
func (r *Reader) ReadColumns(dst []field.Fp) error {
	if r.err != nil {
		return r.err
	}
	if r.state != stateCells || r.cellsDone != 0 {
		return errors.New("tracefile: ReadColumns must follow Next directly")
	}
	if int64(len(dst)) != r.cellsTotal {
		return fmt.Errorf("tracefile: ReadColumns: buffer has %d values, section %d %q has %d×%d", len(dst), r.sec, r.cur.Name, r.cur.Width, r.cur.Height)
	}
	return r.readCells(dst, r.cellsTotal)
}

// ReadColumn reads the next column of the current section into dst; len(dst) must be Height.
func (r *Reader) ReadColumn(dst []field.Fp) error {
	if r.err != nil {
		return r.err
	}
	if r.state != stateCells {
		return errors.New("tracefile: ReadColumn outside a section (call Next)")
	}
	if len(dst) != r.cur.Height {
		return fmt.Errorf("tracefile: ReadColumn: buffer has %d values, section %d %q has height %d", len(dst), r.sec, r.cur.Name, r.cur.Height)
	}
	return r.readCells(dst, int64(len(dst)))
}

// SkipCells reads past the remaining cells of the current section, still checking values and the
// section checksum. Next calls it when needed.
func (r *Reader) SkipCells() error {
	if r.err != nil {
		return r.err
	}
	if r.state != stateCells {
		return errors.New("tracefile: SkipCells outside a section (call Next)")
	}
	return r.readCells(nil, r.cellsTotal-r.cellsDone)
}

// SkipCellsUnchecked moves past the remaining cells of the current section and its checksum
// without reading them, so neither the values nor the checksum are checked: it sizes a file
// before reading it (a file's sections are listed in milliseconds whatever their size). On a
// Reader that cannot seek (NewReader, or a file of unknown size) it is SkipCells.
func (r *Reader) SkipCellsUnchecked() error {
	if r.err != nil {
		return r.err
	}
	if r.state != stateCells {
		return errors.New("tracefile: SkipCellsUnchecked outside a section (call Next)")
	}
	if r.f == nil || r.size < 0 {
		return r.SkipCells()
	}
	rest := 4*(r.cellsTotal-r.cellsDone) + 4 // Next checked that the file holds them
	if buffered := int64(r.br.Buffered()); rest <= buffered {
		if _, err := r.br.Discard(int(rest)); err != nil {
			r.err = fmt.Errorf("tracefile: skipping cells at byte offset %d: %w", r.off, err)
			return r.err
		}
	} else {
		if _, err := r.f.Seek(r.off+rest, io.SeekStart); err != nil {
			r.err = fmt.Errorf("tracefile: skipping cells at byte offset %d: %w", r.off, err)
			return r.err
		}
		r.br.Reset(r.f)
	}
	r.off += rest
	r.cellsDone = r.cellsTotal
	r.state = stateHeader
	return nil
}

// readCells reads n cells into dst (discarding them when dst is nil), then the section checksum
// if that was the last cell. On little-endian hosts the bytes are read straight into dst (one
// copy from the file, no per-value decoding), then checksummed and checked < p chunk by chunk.
func (r *Reader) readCells(dst []field.Fp, n int64) error {
	if r.buf == nil {
		r.buf = make([]byte, ioBufSize)
	}
	if dst != nil && littleEndian && r.f != nil && r.size >= 0 && 4*n >= parallelReadMin && runtime.GOMAXPROCS(0) > 1 {
		if err := r.readCellsParallel(dst, n); err != nil {
			return err
		}
		dst, n = nil, 0 // only the checksum is left
	}
	for done := int64(0); done < n; {
		var b []byte
		var vals []uint32
		if dst != nil && littleEndian {
			k := min(n-done, directChunkCells)
			vals = unsafe.Slice((*uint32)(unsafe.Pointer(&dst[done])), k)
			b = unsafe.Slice((*byte)(unsafe.Pointer(&dst[done])), 4*k)
		} else {
			b = r.buf[:4*min(n-done, ioBufSize/4)]
		}
		k := int64(len(b) / 4)
		m, err := io.ReadFull(r.br, b)
		if err != nil {
			r.off += int64(m)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return r.truncated(r.sec, true, r.off, "cells")
			}
			r.err = fmt.Errorf("tracefile: reading cells at byte offset %d: %w", r.off, err)
			return r.err
		}
		r.crc = crc32.Update(r.crc, castagnoli, b)
		if vals == nil {
			var out []field.Fp
			if dst != nil {
				out = dst[done : done+k]
			}
			for i := range k {
				v := binary.LittleEndian.Uint32(b[4*i:])
				if v >= field.P {
					return r.notCanonical(v, i)
				}
				if out != nil {
					out[i] = field.Fp(v)
				}
			}
		} else if i := firstNotCanonical(vals); i >= 0 {
			return r.notCanonical(vals[i], int64(i))
		}
		r.off += 4 * k
		r.cellsDone += k
		done += k
	}
	if r.cellsDone == r.cellsTotal {
		var c [4]byte
		if err := r.readFull(c[:], r.sec, true, "cells checksum"); err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint32(c[:]); got != r.crc {
			return r.formatError(r.sec, true, r.off-4, "cells checksum mismatch: stored %08x, computed %08x", got, r.crc)
		}
		r.state = stateHeader
	}
	return nil
}

// parallelReadMin is the size from which readCells reads a file's cells on several cores: one
// core reading 345 MB into fresh memory ran at 1.6 GB/s (the kernel's copy and the page faults
// of the destination), which made reading a keccakf-1024 trace take longer than proving it.
var parallelReadMin int64 = 32 << 20 // a variable for tests

// readCellsParallel reads the next n cells of the section into dst: chunks read with ReadAt by
// one worker per core and checked < p there, the checksum updated in file order as chunks
// arrive. It leaves the reader after them (readCells then reads the section checksum if they
// were the last).
func (r *Reader) readCellsParallel(dst []field.Fp, n int64) error {
	// bytes bufio already holds come first
	bytesView := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*n)
	head := min(int64(r.br.Buffered())&^3, 4*n)
	if _, err := io.ReadFull(r.br, bytesView[:head]); err != nil {
		r.err = fmt.Errorf("tracefile: reading cells at byte offset %d: %w", r.off, err)
		return r.err
	}
	base := r.off // file offset of bytesView[0]
	const chunk = directChunkCells * 4
	nchunks := int((4*n + chunk - 1) / chunk)
	type result struct {
		bad int64 // index of the first value ≥ p in the chunk, or −1
		err error
	}
	results := make([]result, nchunks)
	done := make([]chan struct{}, nchunks)
	for i := range done {
		done[i] = make(chan struct{})
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), 8, nchunks) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= nchunks {
					return
				}
				lo, hi := int64(i)*chunk, min(int64(i+1)*chunk, 4*n)
				res := result{bad: -1}
				if rlo := max(lo, head); rlo < hi {
					if _, err := r.f.ReadAt(bytesView[rlo:hi], base+rlo); err != nil {
						res.err = err
					}
				}
				if res.err == nil {
					res.bad = int64(firstNotCanonical(unsafe.Slice((*uint32)(unsafe.Pointer(&bytesView[lo])), (hi-lo)/4)))
				}
				results[i] = res
				close(done[i])
			}
		}()
	}
	crc := r.crc
	var failed *result
	failedAt := 0
	for i := range nchunks {
		<-done[i]
		if res := &results[i]; res.err != nil || res.bad >= 0 {
			failed, failedAt = res, i
			break
		}
		lo, hi := int64(i)*chunk, min(int64(i+1)*chunk, 4*n)
		crc = crc32.Update(crc, castagnoli, bytesView[lo:hi])
	}
	next.Store(int64(nchunks)) // stop the workers early after a failure
	wg.Wait()
	if failed != nil {
		lo := int64(failedAt) * chunk
		if failed.err != nil {
			if errors.Is(failed.err, io.EOF) {
				return r.truncated(r.sec, true, r.size, "cells")
			}
			r.err = fmt.Errorf("tracefile: reading cells at byte offset %d: %w", base+lo, failed.err)
			return r.err
		}
		i := lo/4 + failed.bad
		r.err = r.notCanonical(uint32(dst[i]), i)
		return r.err
	}
	if _, err := r.f.Seek(base+4*n, io.SeekStart); err != nil {
		r.err = fmt.Errorf("tracefile: reading cells at byte offset %d: %w", base+4*n, err)
		return r.err
	}
	r.br.Reset(r.f)
	r.crc = crc
	r.off += 4 * n
	r.cellsDone += n
	return nil
}

// notCanonical reports value v, the i-th cell of the chunk being read, as not < p.
func (r *Reader) notCanonical(v uint32, i int64) error {
	h := int64(r.cur.Height)
	idx := r.cellsDone + i
	return r.formatError(r.sec, true, r.off+4*i, "value %d at column %d row %d is not < p", v, idx/h, idx%h)
}

// directChunkCells is how many cells readCells reads straight into the caller's slice at a time:
// small enough that checksumming and checking them finds them in cache.
const directChunkCells = 256 << 10

// littleEndian says whether field.Fp's in-memory bytes are the file's little-endian cells.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// firstNotCanonical returns the index of the first value ≥ p, or −1. The common case (all
// canonical) is one pass of max over the values, which compiles without branches.
func firstNotCanonical(vals []uint32) int {
	var m0, m1, m2, m3 uint32 // four chains: the loop is bound by max's latency otherwise
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		v := vals[i : i+4 : i+4]
		m0, m1, m2, m3 = max(m0, v[0]), max(m1, v[1]), max(m2, v[2]), max(m3, v[3])
	}
	for ; i < len(vals); i++ {
		m0 = max(m0, vals[i])
	}
	if max(m0, m1, m2, m3) < field.P {
		return -1
	}
	for i, v := range vals {
		if v >= field.P {
			return i
		}
	}
	return -1
}

// readAll reads every remaining section into memory. With a known file size a section's
// allocation is bounded by the bytes the file really holds, and made by alloc (nil: make).
func (r *Reader) readAll(alloc func(n int) []field.Fp) ([]Section, error) {
	var out []Section
	for {
		h, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		s := Section{SectionHeader: h}
		if r.size >= 0 {
			if alloc != nil {
				s.Data = alloc(int(r.cellsTotal))[:r.cellsTotal]
			} else {
				s.Data = make([]field.Fp, r.cellsTotal)
			}
			if err := r.ReadColumns(s.Data); err != nil {
				return nil, err
			}
		} else {
			// Unknown size: grow only with the data actually read, so that a lying header
			// cannot make us allocate more than about twice the bytes present.
			chunk := make([]field.Fp, min(r.cellsTotal, ioBufSize/4))
			for r.cellsDone < r.cellsTotal {
				k := min(r.cellsTotal-r.cellsDone, int64(len(chunk)))
				if err := r.readCells(chunk[:k], k); err != nil {
					return nil, err
				}
				s.Data = append(s.Data, chunk[:k]...)
			}
		}
		out = append(out, s)
	}
}

// ReadAll reads the whole trace file at path into memory; meant for small files.
func ReadAll(path string) ([]Section, error) { return ReadAllInto(path, nil) }

// ReadAllInto is ReadAll with each section's cells read into alloc(n), a slice of at least n
// cells (nil: new slices): a caller that reads many traces reuses its buffers, whose pages are
// then in memory already (a fresh slice's are faulted in by the read).
func ReadAllInto(path string, alloc func(n int) []field.Fp) ([]Section, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.readAll(alloc)
}

// Decode decodes a whole trace file held in memory.
func Decode(b []byte) ([]Section, error) {
	r, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	return r.readAll(nil)
}

// ReadAllFrom reads a whole trace file from rd (size as for NewReader) into memory.
func ReadAllFrom(rd io.Reader, size int64) ([]Section, error) {
	r, err := NewReader(rd, size)
	if err != nil {
		return nil, err
	}
	return r.readAll(nil)
}
