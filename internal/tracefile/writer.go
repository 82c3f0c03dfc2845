package tracefile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/metalprove/metalprove/internal/atomicfile"
	"github.com/metalprove/metalprove/internal/field"
)

type writerMode int

const (
	modeFile     writerMode = iota // Create: temp file, header patched at Commit
	modeBuffered                   // NewWriter: body buffered until Commit
	modeStream                     // NewStreamWriter: count known, written straight through
)

var errAborted = errors.New("tracefile: writer aborted")

// Writer encodes a trace file section by section, column by column.
//
// Any error is final: the Writer keeps returning it, and a Writer from Create has already removed
// its temporary file. The idiom is
//
//	w, err := tracefile.Create(path)
//	if err != nil { … }
//	defer w.Abort() // no-op after a successful Commit
//	… w.WriteSection(…) …
//	return w.Commit()
type Writer struct {
	// MaxSectionBytes limits the cell bytes (width·height·4) of one section; it defaults to
	// DefaultMaxSectionBytes, so that the writer never produces a section a default Reader
	// refuses.
	MaxSectionBytes int64

	mode  writerMode
	f     *atomicfile.File // modeFile: the temporary file
	dst   io.Writer
	body  *bytes.Buffer // modeBuffered
	bw    *bufio.Writer
	want  int // modeStream: declared section count
	off   int64
	nsec  int // sections begun
	err   error
	done  bool
	hdr   []byte // scratch for headers
	buf   []byte // scratch for cells, allocated lazily
	inSec bool
	cur   SectionHeader
	col   int
	crc   uint32
}

func newWriter(mode writerMode) *Writer {
	return &Writer{MaxSectionBytes: DefaultMaxSectionBytes, mode: mode, off: FileHeaderSize}
}

// Create starts a trace file that will appear at path only when Commit succeeds. It writes to a
// temporary file in the same directory (named ".<base>.tmp-*"); Commit fsyncs it and renames it
// over path atomically, Abort or any error removes it. A process killed mid-write can leave the
// temporary file behind, never a partial file at path.
func Create(path string) (*Writer, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("tracefile: %w", err)
	}
	w := newWriter(modeFile)
	w.f = f
	w.bw = bufio.NewWriterSize(f, ioBufSize)
	// Placeholder; the real header (with the count) is written at Commit.
	var zero [FileHeaderSize]byte
	if _, err := w.bw.Write(zero[:]); err != nil {
		return nil, w.fail(fmt.Errorf("tracefile: %w", err))
	}
	return w, nil
}

// NewWriter returns a Writer that encodes into memory and writes the whole file to w at Commit
// (the section count precedes the sections, so it cannot stream to a plain io.Writer). Use it for
// small files; for large ones use Create or NewStreamWriter.
func NewWriter(w io.Writer) *Writer {
	wr := newWriter(modeBuffered)
	wr.dst = w
	wr.body = new(bytes.Buffer)
	wr.bw = bufio.NewWriterSize(wr.body, 64<<10)
	return wr
}

// NewStreamWriter returns a Writer that streams to w a file of exactly sections sections; Commit
// fails if a different number was written. The caller owns w (Commit flushes but does not close).
func NewStreamWriter(w io.Writer, sections int) (*Writer, error) {
	if sections < 1 || sections > MaxSections {
		return nil, fmt.Errorf("tracefile: section count %d is not in [1, %d]", sections, MaxSections)
	}
	wr := newWriter(modeStream)
	wr.dst, wr.want = w, sections
	wr.bw = bufio.NewWriterSize(w, ioBufSize)
	if _, err := wr.bw.Write(appendFileHeader(nil, sections)); err != nil {
		return nil, wr.fail(fmt.Errorf("tracefile: %w", err))
	}
	return wr, nil
}

// fail records err as final and removes the temporary file.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	w.cleanup()
	return w.err
}

func (w *Writer) cleanup() {
	if w.f != nil {
		w.f.Abort()
		w.f = nil
	}
	w.body = nil
	w.buf = nil
}

func (w *Writer) write(p []byte) error {
	if _, err := w.bw.Write(p); err != nil {
		return w.fail(fmt.Errorf("tracefile: %w", err))
	}
	w.off += int64(len(p))
	return nil
}

func (w *Writer) inputError(off int64, named bool, format string, args ...any) error {
	e := &FormatError{Section: w.nsec - 1, Offset: off, Msg: fmt.Sprintf(format, args...)}
	if named {
		e.Name = w.cur.Name
	}
	return w.fail(e)
}

// BeginSection validates h and writes its section header; the section's cells follow as Width
// calls of WriteColumn.
func (w *Writer) BeginSection(h SectionHeader) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("tracefile: BeginSection after Commit")
	}
	if w.inSec {
		return w.fail(&FormatError{Section: w.nsec - 1, Name: w.cur.Name, Offset: w.off,
			Msg: fmt.Sprintf("new section begun after %d of %d columns", w.col, w.cur.Width)})
	}
	if w.nsec >= MaxSections || (w.mode == modeStream && w.nsec >= w.want) {
		limit := MaxSections
		if w.mode == modeStream {
			limit = w.want
		}
		return w.fail(&FormatError{Section: w.nsec, Offset: w.off,
			Msg: fmt.Sprintf("more than %d sections", limit)})
	}
	w.nsec++
	if msg, rel := headerProblem(h.Name, int64(h.Width), int64(h.Height), h.PublicValues, w.MaxSectionBytes); msg != "" {
		return w.inputError(w.off+rel, false, "%s", msg)
	}
	w.cur = h
	w.cur.PublicValues = nil // not needed further; do not retain the caller's slice
	w.hdr = appendSectionHeader(w.hdr[:0], &h)
	if err := w.write(w.hdr); err != nil {
		return err
	}
	w.inSec, w.col, w.crc = true, 0, 0
	return nil
}

// WriteColumn writes the next column of the current section; len(col) must be its height and
// every value must be < p. After the last column the section's checksum is written.
func (w *Writer) WriteColumn(col []field.Fp) error {
	if w.err != nil {
		return w.err
	}
	if !w.inSec {
		return w.fail(errors.New("tracefile: WriteColumn outside a section"))
	}
	if len(col) != w.cur.Height {
		return w.inputError(w.off, true, "column %d has %d values, want height %d", w.col, len(col), w.cur.Height)
	}
	if w.buf == nil {
		w.buf = make([]byte, ioBufSize)
	}
	for row := 0; row < len(col); {
		chunk := col[row:min(len(col), row+ioBufSize/4)]
		b := w.buf[:4*len(chunk)]
		for i, v := range chunk {
			if uint32(v) >= field.P {
				return w.inputError(w.off+4*int64(i), true, "value %d at column %d row %d is not < p", uint32(v), w.col, row+i)
			}
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		w.crc = crc32.Update(w.crc, castagnoli, b)
		if err := w.write(b); err != nil {
			return err
		}
		row += len(chunk)
	}
	w.col++
	if w.col == w.cur.Width {
		var c [4]byte
		binary.LittleEndian.PutUint32(c[:], w.crc)
		if err := w.write(c[:]); err != nil {
			return err
		}
		w.inSec = false
	}
	return nil
}

// WriteSection writes a whole section; cols(c) returns column c (Height values).
func (w *Writer) WriteSection(h SectionHeader, cols func(c int) []field.Fp) error {
	if err := w.BeginSection(h); err != nil {
		return err
	}
	for c := range h.Width {
		if err := w.WriteColumn(cols(c)); err != nil {
			return err
		}
	}
	return nil
}

// WriteSectionColumnMajor writes a whole section from its cells in column-major order
// (len(data) = Width·Height).
func (w *Writer) WriteSectionColumnMajor(h SectionHeader, data []field.Fp) error {
	if w.err == nil && (h.Width < 0 || h.Height < 0 || int64(len(data)) != int64(h.Width)*int64(h.Height)) {
		return w.fail(&FormatError{Section: w.nsec, Offset: w.off,
			Msg: fmt.Sprintf("%d values given for a %d×%d section", len(data), h.Width, h.Height)})
	}
	return w.WriteSection(h, func(c int) []field.Fp { return data[c*h.Height : (c+1)*h.Height] })
}

// Commit completes the file. For Create it writes the file header, fsyncs, renames the
// temporary file over the destination and fsyncs the directory (best effort); for NewWriter it
// writes the file to the io.Writer; for NewStreamWriter it flushes.
func (w *Writer) Commit() error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("tracefile: Commit called twice")
	}
	if w.inSec {
		return w.fail(&FormatError{Section: w.nsec - 1, Name: w.cur.Name, Offset: w.off,
			Msg: fmt.Sprintf("incomplete section: %d of %d columns written", w.col, w.cur.Width)})
	}
	if w.nsec == 0 {
		return w.fail(&FormatError{Section: -1, Offset: 12, Msg: "no sections written"})
	}
	if w.mode == modeStream && w.nsec != w.want {
		return w.fail(&FormatError{Section: w.nsec, Offset: w.off,
			Msg: fmt.Sprintf("%d sections written, %d declared", w.nsec, w.want)})
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("tracefile: %w", err))
	}
	hdr := appendFileHeader(nil, w.nsec)
	switch w.mode {
	case modeFile:
		if _, err := w.f.WriteAt(hdr, 0); err != nil {
			return w.fail(fmt.Errorf("tracefile: %w", err))
		}
		if err := w.f.Commit(); err != nil {
			return w.fail(fmt.Errorf("tracefile: %w", err))
		}
		w.f = nil
	case modeBuffered:
		if _, err := w.dst.Write(hdr); err != nil {
			return w.fail(fmt.Errorf("tracefile: %w", err))
		}
		if _, err := w.dst.Write(w.body.Bytes()); err != nil {
			return w.fail(fmt.Errorf("tracefile: %w", err))
		}
	}
	w.done = true
	w.cleanup()
	return nil
}

// Abort discards the file: a Writer from Create removes its temporary file and leaves the
// destination untouched. Abort after a successful Commit does nothing, so it can be deferred.
func (w *Writer) Abort() {
	if w.done && w.err == nil {
		return
	}
	w.fail(errAborted)
}

// Encode returns the encoding of sections.
func Encode(sections []Section) ([]byte, error) {
	var b bytes.Buffer
	w := NewWriter(&b)
	for i := range sections {
		if err := w.WriteSectionColumnMajor(sections[i].SectionHeader, sections[i].Data); err != nil {
			return nil, err
		}
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteAll writes sections to path atomically (see Create).
func WriteAll(path string, sections []Section) error {
	w, err := Create(path)
	if err != nil {
		return err
	}
	defer w.Abort()
	for i := range sections {
		if err := w.WriteSectionColumnMajor(sections[i].SectionHeader, sections[i].Data); err != nil {
			return err
		}
	}
	return w.Commit()
}
