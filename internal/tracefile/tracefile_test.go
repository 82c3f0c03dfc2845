package tracefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// randSection returns a random valid section.
func randSection(rng *rand.Rand, name string, width, height, npub int) Section {
	s := Section{SectionHeader: SectionHeader{Name: name, Width: width, Height: height}}
	if npub > 0 {
		s.PublicValues = make([]field.Fp, npub)
		for i := range s.PublicValues {
			s.PublicValues[i] = field.Fp(rng.Uint32N(field.P))
		}
	}
	s.Data = make([]field.Fp, width*height)
	for i := range s.Data {
		switch rng.IntN(8) {
		case 0:
			s.Data[i] = field.Fp(field.P - 1)
		case 1:
			s.Data[i] = 0
		default:
			s.Data[i] = field.Fp(rng.Uint32N(field.P))
		}
	}
	return s
}

func sectionsEqual(t *testing.T, got, want []Section) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d sections, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.Name != w.Name || g.Width != w.Width || g.Height != w.Height {
			t.Fatalf("section %d: header %q %d×%d, want %q %d×%d", i, g.Name, g.Width, g.Height, w.Name, w.Width, w.Height)
		}
		if !slices.Equal(g.PublicValues, w.PublicValues) {
			t.Fatalf("section %d: public values differ", i)
		}
		if !slices.Equal(g.Data, w.Data) {
			t.Fatalf("section %d: cells differ", i)
		}
	}
}

// smallFile is a 3-section file with public values present and absent.
func smallSections() []Section {
	rng := rand.New(rand.NewPCG(1, 2))
	return []Section{
		randSection(rng, "keccakf", 3, 4, 2),
		randSection(rng, "range", 1, 1, 0),
		randSection(rng, "poséidon2 ✓", 2, 2, 1),
	}
}

func mustEncode(t testing.TB, secs []Section) []byte {
	t.Helper()
	b, err := Encode(secs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// layout describes where the regions of one encoded section lie.
type layout struct {
	start, name, width, height, npub, pub, shcrc, cells, ccrc, end int
}

func layouts(secs []Section) []layout {
	var out []layout
	off := FileHeaderSize
	for _, s := range secs {
		var l layout
		l.start = off
		l.name = off + 2
		l.width = l.name + len(s.Name)
		l.height = l.width + 4
		l.npub = l.height + 4
		l.pub = l.npub + 4
		l.shcrc = l.pub + 4*len(s.PublicValues)
		l.cells = l.shcrc + 4
		l.ccrc = l.cells + 4*len(s.Data)
		l.end = l.ccrc + 4
		off = l.end
		out = append(out, l)
	}
	return out
}

func asFormatError(t *testing.T, err error) *FormatError {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FormatError", err, err)
	}
	return fe
}

func TestRoundTripMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ n, maxW, logH int }{{1, 1, 0}, {1, 300, 4}, {1, 5, 12}, {4, 40, 8}, {7, 300, 6}} {
		var secs []Section
		for i := range tc.n {
			w := 1 + rng.IntN(tc.maxW)
			h := 1 << rng.IntN(tc.logH+1)
			secs = append(secs, randSection(rng, "air"+string(rune('A'+i)), w, h, rng.IntN(3)*rng.IntN(20)))
		}
		b := mustEncode(t, secs)
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		sectionsEqual(t, got, secs)
		got, err = ReadAllFrom(bytes.NewReader(b), -1)
		if err != nil {
			t.Fatal(err)
		}
		sectionsEqual(t, got, secs)

		// The stream writer produces the same bytes.
		var sb bytes.Buffer
		sw, err := NewStreamWriter(&sb, len(secs))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secs {
			if err := sw.WriteSection(s.SectionHeader, s.Column); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.Commit(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sb.Bytes(), b) {
			t.Fatal("stream writer output differs from NewWriter output")
		}
	}
}

func TestRoundTripFileMaxShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	secs := []Section{
		randSection(rng, "tall", 2, 1<<12, 0),
		randSection(rng, "wide", 300, 16, 5),
		randSection(rng, "one", 1, 1, 1),
	}
	path := filepath.Join(t.TempDir(), "t.trace")
	if err := WriteAll(path, secs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	sectionsEqual(t, got, secs)
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk, mustEncode(t, secs)) {
		t.Fatal("file bytes differ from in-memory encoding")
	}

	// Streaming per column, and skipping sections.
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.SectionCount() != 3 {
		t.Fatalf("SectionCount = %d", r.SectionCount())
	}
	h, err := r.Next()
	if err != nil || h.Name != "tall" {
		t.Fatal(h, err)
	}
	col := make([]field.Fp, h.Height)
	if err := r.ReadColumn(col); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(col, secs[0].Column(0)) {
		t.Fatal("column 0 differs")
	}
	if h, err = r.Next(); err != nil || h.Name != "wide" { // skips column 1 of "tall"
		t.Fatal(h, err)
	}
	if err := r.SkipCells(); err != nil {
		t.Fatal(err)
	}
	if h, err = r.Next(); err != nil || h.Name != "one" {
		t.Fatal(h, err)
	}
	if _, err = r.Next(); err != io.EOF {
		t.Fatal(err)
	}
	if _, err = r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

func TestReaderUsageErrors(t *testing.T) {
	b := mustEncode(t, smallSections())
	r, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReadColumns(make([]field.Fp, 12)); err == nil {
		t.Fatal("ReadColumns before Next succeeded")
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadColumns(make([]field.Fp, 11)); err == nil {
		t.Fatal("short buffer accepted")
	}
	if err := r.ReadColumn(make([]field.Fp, 3)); err == nil {
		t.Fatal("short column accepted")
	}
	if err := r.ReadColumns(make([]field.Fp, 12)); err != nil { // usage errors are not final
		t.Fatal(err)
	}
}

// TestCorruptEveryByte flips bits in every byte of a small file; every variant must fail with a
// *FormatError of the right section at a sensible offset.
func TestCorruptEveryByte(t *testing.T) {
	secs := smallSections()
	orig := mustEncode(t, secs)
	ls := layouts(secs)
	for pos := range orig {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(orig)
			b[pos] ^= mask
			for _, known := range []bool{true, false} {
				size := int64(len(b))
				if !known {
					size = -1
				}
				_, err := ReadAllFrom(bytes.NewReader(b), size)
				if err == nil {
					t.Fatalf("pos %d mask %#x: corrupted file decoded", pos, mask)
				}
				fe := asFormatError(t, err)
				wantSec, l := -1, layout{}
				for i, li := range ls {
					if pos >= li.start && pos < li.end {
						wantSec, l = i, li
					}
				}
				if fe.Section != wantSec {
					t.Fatalf("pos %d mask %#x: section %d, want %d (%v)", pos, mask, fe.Section, wantSec, err)
				}
				var okOff bool
				switch {
				case pos < 8:
					okOff = fe.Offset == 0 && strings.Contains(fe.Msg, "magic")
				case pos < 12:
					okOff = fe.Offset == 8 && strings.Contains(fe.Msg, "version")
				case pos < FileHeaderSize:
					okOff = fe.Offset == 20 && strings.Contains(fe.Msg, "checksum")
				case pos < l.name || (pos >= l.npub && pos < l.pub):
					// A different name length or public value count shifts everything after it.
					okOff = fe.Offset >= int64(l.start) && fe.Offset <= int64(len(b))
				case pos < l.cells:
					okOff = fe.Offset == int64(l.shcrc) && strings.Contains(fe.Msg, "header checksum")
				case pos < l.ccrc:
					okOff = (fe.Offset == int64(l.cells+(pos-l.cells)&^3) && strings.Contains(fe.Msg, "not < p")) ||
						(fe.Offset == int64(l.ccrc) && strings.Contains(fe.Msg, "cells checksum"))
				default:
					okOff = fe.Offset == int64(l.ccrc) && strings.Contains(fe.Msg, "cells checksum")
				}
				if !okOff {
					t.Fatalf("pos %d mask %#x known=%v: unexpected error %v", pos, mask, known, err)
				}
			}
		}
	}
}

// TestTruncateEveryOffset truncates a small file at every length.
func TestTruncateEveryOffset(t *testing.T) {
	secs := smallSections()
	orig := mustEncode(t, secs)
	ls := layouts(secs)
	for n := range len(orig) {
		b := orig[:n]
		for _, known := range []bool{true, false} {
			size := int64(n)
			if !known {
				size = -1
			}
			_, err := ReadAllFrom(bytes.NewReader(b), size)
			if err == nil {
				t.Fatalf("truncated to %d: decoded", n)
			}
			fe := asFormatError(t, err)
			wantSec := -1
			for i, l := range ls {
				if n >= l.start && n < l.end {
					wantSec = i
				}
			}
			if fe.Section != wantSec || fe.Offset != int64(n) || !strings.Contains(fe.Msg, "unexpected end of file") {
				t.Fatalf("truncated to %d (known size %v): %v; want section %d offset %d", n, known, err, wantSec, n)
			}
		}
	}
	// Reading through Open sees the same errors.
	path := filepath.Join(t.TempDir(), "cut.trace")
	os.WriteFile(path, orig[:len(orig)-1], 0o644)
	_, err := ReadAll(path)
	if fe := asFormatError(t, err); fe.Section != 2 || fe.Offset != int64(len(orig)-1) {
		t.Fatal(err)
	}
}

// Helpers that corrupt a valid encoding and repair the checksums, to reach the deeper checks.
func fixFileCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
}

func fixHeaderCRC(b []byte, l layout) {
	binary.LittleEndian.PutUint32(b[l.shcrc:], crc32.Checksum(b[l.start:l.shcrc], castagnoli))
}

func fixCellsCRC(b []byte, l layout) {
	binary.LittleEndian.PutUint32(b[l.ccrc:], crc32.Checksum(b[l.cells:l.ccrc], castagnoli))
}

func TestFormatErrors(t *testing.T) {
	secs := smallSections()
	orig := mustEncode(t, secs)
	ls := layouts(secs)
	put := binary.LittleEndian.PutUint32
	cases := []struct {
		name    string
		mutate  func(b []byte) []byte
		sec     int
		off     int
		msg     string
		nameInE string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, -1, 0, "bad magic", ""},
		{"empty", func(b []byte) []byte { return b[:0] }, -1, 0, "unexpected end of file in file header", ""},
		{"not a trace", func(b []byte) []byte { return []byte("hello") }, -1, 0, "bad magic", ""},
		{"version", func(b []byte) []byte { put(b[8:], 2); return b }, -1, 8, "unsupported format version 2", ""},
		{"file crc", func(b []byte) []byte { b[21]++; return b }, -1, 20, "file header checksum", ""},
		{"flags", func(b []byte) []byte { put(b[16:], 1); fixFileCRC(b); return b }, -1, 16, "reserved flags", ""},
		{"zero sections", func(b []byte) []byte { put(b[12:], 0); fixFileCRC(b); return b }, -1, 12, "section count 0", ""},
		{"too many sections", func(b []byte) []byte { put(b[12:], 1025); fixFileCRC(b); return b }, -1, 12, "section count 1025", ""},
		{"fewer sections than count", func(b []byte) []byte { put(b[12:], 4); fixFileCRC(b); return b }, 3, len(orig), "declares 4 sections", ""},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0) }, -1, len(orig), "trailing bytes", ""},
		{"header crc", func(b []byte) []byte { b[ls[1].width]++; return b }, 1, ls[1].shcrc, "section header checksum", ""},
		{"cells crc", func(b []byte) []byte { b[ls[2].ccrc]++; return b }, 2, ls[2].ccrc, "cells checksum", "poséidon2 ✓"},
		{"value ≥ p", func(b []byte) []byte {
			put(b[ls[0].cells+4*(2*4+3):], field.P)
			fixCellsCRC(b, ls[0])
			return b
		}, 0, ls[0].cells + 4*(2*4+3), "value 2013265921 at column 2 row 3 is not < p", "keccakf"},
		{"height not power of two", func(b []byte) []byte { put(b[ls[0].height:], 3); fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].height, "height 3 is not a power of two", ""},
		{"height too large", func(b []byte) []byte { put(b[ls[0].height:], 1<<28); fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].height, "height 268435456", ""},
		{"height 0", func(b []byte) []byte { put(b[ls[0].height:], 0); fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].height, "height 0", ""},
		{"width 0", func(b []byte) []byte { put(b[ls[1].width:], 0); fixHeaderCRC(b, ls[1]); return b }, 1, ls[1].width, "width 0", ""},
		{"width too large", func(b []byte) []byte { put(b[ls[1].width:], 1<<16+1); fixHeaderCRC(b, ls[1]); return b }, 1, ls[1].width, "width 65537", ""},
		{"cells beyond file", func(b []byte) []byte { put(b[ls[1].width:], 1<<16); fixHeaderCRC(b, ls[1]); return b }, 1, len(orig), "unexpected end of file in cells", "range"},
		{"huge cells beyond file", func(b []byte) []byte {
			put(b[ls[1].width:], 1<<16)
			put(b[ls[1].height:], 1<<27)
			fixHeaderCRC(b, ls[1])
			return b
		}, 1, ls[1].width, "over the limit", ""},
		{"control char in name", func(b []byte) []byte { b[ls[0].name+1] = '\n'; fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].name + 1, "non-printable", ""},
		{"invalid utf-8 name", func(b []byte) []byte { b[ls[0].name] = 0xff; fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].name, "UTF-8", ""},
		{"name length 0", func(b []byte) []byte { b[ls[1].start], b[ls[1].start+1] = 0, 0; return b }, 1, ls[1].start, "name length 0", ""},
		{"name length 256", func(b []byte) []byte { b[ls[1].start], b[ls[1].start+1] = 0, 1; return b }, 1, ls[1].start, "name length 256", ""},
		{"public value ≥ p", func(b []byte) []byte { put(b[ls[0].pub+4:], 0xffffffff); fixHeaderCRC(b, ls[0]); return b }, 0, ls[0].pub + 4, "public value 1 is 4294967295", ""},
		{"too many public values", func(b []byte) []byte { put(b[ls[2].npub:], 1<<16+1); return b }, 2, ls[2].npub, "public value count 65537", ""},
		{"public values beyond file", func(b []byte) []byte { put(b[ls[2].npub:], 1<<16); return b }, 2, len(orig), "unexpected end of file in section header", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(orig))
			_, err := Decode(b)
			if err == nil {
				t.Fatal("decoded")
			}
			fe := asFormatError(t, err)
			if fe.Section != tc.sec || fe.Offset != int64(tc.off) || !strings.Contains(fe.Msg, tc.msg) || fe.Name != tc.nameInE {
				t.Fatalf("got %v (section %d offset %d name %q); want section %d offset %d name %q msg %q",
					err, fe.Section, fe.Offset, fe.Name, tc.sec, tc.off, tc.nameInE, tc.msg)
			}
			// Wrapped errors still reach the FormatError.
			if !errors.As(errors.Join(errors.New("ctx"), err), &fe) {
				t.Fatal("errors.As through a wrapper failed")
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	e := &FormatError{Section: 1, Name: "keccakf", Offset: 1234, Msg: "value 2013265921 at column 5 row 7 is not < p"}
	if got, want := e.Error(), `tracefile: section 1 "keccakf": byte offset 1234: value 2013265921 at column 5 row 7 is not < p`; got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	e = &FormatError{Section: -1, Offset: 8, Msg: "x"}
	if got := e.Error(); got != "tracefile: byte offset 8: x" {
		t.Fatal(got)
	}
}

func TestReaderLimit(t *testing.T) {
	secs := smallSections()
	b := mustEncode(t, secs)
	r, err := NewReader(bytes.NewReader(b), -1)
	if err != nil {
		t.Fatal(err)
	}
	r.MaxSectionBytes = 47 // section 0 has 3×4×4 = 48 cell bytes
	_, err = r.Next()
	if fe := asFormatError(t, err); fe.Section != 0 || !strings.Contains(fe.Msg, "over the limit of 47") {
		t.Fatal(err)
	}
}

// A hostile header must not allocate: the largest legal header on a tiny input.
func TestNoAllocationFromHeader(t *testing.T) {
	var b []byte
	b = appendFileHeader(b, 1)
	h := SectionHeader{Name: "x", Width: MaxWidth, Height: MaxHeight}
	b = appendSectionHeader(b, &h)
	b = append(b, 1, 2, 3, 4)
	for _, size := range []int64{int64(len(b)), -1} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := NewReader(bytes.NewReader(b), size)
		if err != nil {
			t.Fatal(err)
		}
		r.MaxSectionBytes = 1 << 62
		_, err = r.readAll(nil)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatal("decoded")
		}
		asFormatError(t, err)
		if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
			t.Fatalf("size %d: decoding allocated %d bytes", size, d)
		}
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriterInvalidLeavesNothing(t *testing.T) {
	secs := smallSections()
	bad := slices.Clone(secs[0].Data)
	bad[1*4+2] = field.Fp(field.P)
	cases := []struct {
		name string
		fn   func(w *Writer) error
		msg  string
	}{
		{"value ≥ p", func(w *Writer) error {
			w.WriteSectionColumnMajor(secs[1].SectionHeader, secs[1].Data)
			return w.WriteSectionColumnMajor(secs[0].SectionHeader, bad)
		}, `section 1 "keccakf": byte offset `},
		{"height 3", func(w *Writer) error {
			return w.WriteSection(SectionHeader{Name: "a", Width: 1, Height: 3}, nil)
		}, "height 3 is not a power of two"},
		{"empty name", func(w *Writer) error { return w.BeginSection(SectionHeader{Width: 1, Height: 1}) }, "name length 0"},
		{"bad name", func(w *Writer) error { return w.BeginSection(SectionHeader{Name: "a\tb", Width: 1, Height: 1}) }, "non-printable"},
		{"public value", func(w *Writer) error {
			return w.BeginSection(SectionHeader{Name: "a", Width: 1, Height: 1, PublicValues: []field.Fp{field.Fp(field.P)}})
		}, "public value 0"},
		{"short column", func(w *Writer) error {
			w.BeginSection(SectionHeader{Name: "a", Width: 2, Height: 4})
			return w.WriteColumn(make([]field.Fp, 3))
		}, "column 0 has 3 values"},
		{"incomplete section", func(w *Writer) error {
			w.BeginSection(SectionHeader{Name: "a", Width: 2, Height: 1})
			w.WriteColumn(make([]field.Fp, 1))
			return w.Commit()
		}, "incomplete section"},
		{"no sections", func(w *Writer) error { return w.Commit() }, "no sections"},
		{"data length", func(w *Writer) error {
			return w.WriteSectionColumnMajor(SectionHeader{Name: "a", Width: 2, Height: 2}, make([]field.Fp, 3))
		}, "3 values given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.trace")
			w, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.fn(w)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			if tc.name == "value ≥ p" {
				fe := asFormatError(t, err)
				if !strings.Contains(fe.Msg, "value 2013265921 at column 1 row 2 is not < p") || fe.Section != 1 {
					t.Fatal(err)
				}
			}
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Fatalf("files left after error: %v", names)
			}
			if err := w.Commit(); err == nil {
				t.Fatal("Commit after error succeeded")
			}
			w.Abort()
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Fatalf("files left: %v", names)
			}
		})
	}
}

func TestWriterAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.trace")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s := smallSections()[0]
	if err := w.WriteSectionColumnMajor(s.SectionHeader, s.Data); err != nil {
		t.Fatal(err)
	}
	if len(dirEntries(t, dir)) != 1 {
		t.Fatal("no temporary file while writing")
	}
	w.Abort()
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Fatalf("files left after Abort: %v", names)
	}
	if err := w.WriteSectionColumnMajor(s.SectionHeader, s.Data); err == nil {
		t.Fatal("write after Abort succeeded")
	}
}

func TestCommitReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.trace")
	old := []byte("previous contents")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	secs := smallSections()
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, s := range secs {
		if err := w.WriteSection(s.SectionHeader, s.Column); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, old) {
			t.Fatal("destination changed before Commit")
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.Abort() // no-op after Commit
	got, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	sectionsEqual(t, got, secs)
	if names := dirEntries(t, dir); len(names) != 1 || names[0] != "out.trace" {
		t.Fatalf("directory holds %v", names)
	}
	if err := w.Commit(); err == nil {
		t.Fatal("second Commit succeeded")
	}
	// An aborted rewrite leaves the committed file alone.
	w2, _ := Create(path)
	w2.WriteSection(secs[1].SectionHeader, secs[1].Column)
	w2.Abort()
	if got, err := ReadAll(path); err != nil || len(got) != 3 {
		t.Fatal(err)
	}
	if names := dirEntries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v", names)
	}
}

func TestStreamWriterCount(t *testing.T) {
	s := smallSections()[1]
	var b bytes.Buffer
	w, err := NewStreamWriter(&b, 2)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteSection(s.SectionHeader, s.Column)
	if err := w.Commit(); err == nil || !strings.Contains(err.Error(), "1 sections written, 2 declared") {
		t.Fatal(err)
	}
	w, _ = NewStreamWriter(&b, 1)
	w.WriteSection(s.SectionHeader, s.Column)
	if err := w.WriteSection(s.SectionHeader, s.Column); err == nil {
		t.Fatal("extra section accepted")
	}
	if _, err := NewStreamWriter(&b, 0); err == nil {
		t.Fatal("zero sections accepted")
	}
}

// TestSkipCellsUnchecked sizes a file without reading its cells: small sections (inside the read
// buffer), large ones (a seek), a section partly read first, and sections read after a skip.
func TestSkipCellsUnchecked(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	secs := []Section{
		randSection(rng, "small", 3, 8, 1),
		randSection(rng, "large", 5, 1<<16, 0), // 1.25 MiB: past bufio's buffer
		randSection(rng, "after", 2, 4, 2),
		randSection(rng, "large2", 3, 1<<15, 0),
		randSection(rng, "last", 1, 2, 0),
	}
	path := filepath.Join(t.TempDir(), "t.trace")
	if err := WriteAll(path, secs); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, want := range secs {
		h, err := r.Next()
		if err != nil || h.Name != want.Name || h.Width != want.Width || h.Height != want.Height {
			t.Fatalf("section %d: %+v, %v", i, h, err)
		}
		switch i {
		case 0, 1:
			if err := r.SkipCellsUnchecked(); err != nil {
				t.Fatalf("section %d: %v", i, err)
			}
		case 3: // one column read, the rest skipped
			col := make([]field.Fp, h.Height)
			if err := r.ReadColumn(col); err != nil || !slices.Equal(col, want.Column(0)) {
				t.Fatalf("section 3 column 0: %v", err)
			}
			if err := r.SkipCellsUnchecked(); err != nil {
				t.Fatal(err)
			}
		default:
			got := make([]field.Fp, h.Width*h.Height)
			if err := r.ReadColumns(got); err != nil || !slices.Equal(got, want.Data) {
				t.Fatalf("section %d read after skips: %v", i, err)
			}
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last section: %v", err)
	}
	if err := r.SkipCellsUnchecked(); err == nil {
		t.Fatal("SkipCellsUnchecked outside a section: no error")
	}
}

// TestLargeSectionBadValue: a value ≥ p deep inside a section read straight into the caller's
// slice (past the first chunk) is reported at its column, row and byte offset.
func TestLargeSectionBadValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	s := randSection(rng, "big", 3, 1<<18, 0) // 3 chunks of directChunkCells
	path := filepath.Join(t.TempDir(), "t.trace")
	if err := WriteAll(path, []Section{s}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cells := len(b) - 4 - 4*len(s.Data) // the cells start here (the file ends with their checksum)
	col, row := 2, 12345
	off := cells + 4*(col*s.Height+row)
	binary.LittleEndian.PutUint32(b[off:], field.P+7)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAll(path)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Offset != int64(off) || !strings.Contains(fe.Msg, "value 2013265928 at column 2 row 12345 is not < p") {
		t.Fatalf("got %v, want a FormatError at byte %d naming column 2 row 12345", err, off)
	}
}

// TestParallelRead runs the multi-core read path at small sizes: whole sections after a small
// one (bufio holding the start of the cells), per-column reads, a value ≥ p in a late chunk and
// a corrupted checksum.
func TestParallelRead(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: the parallel path is not taken")
	}
	old := parallelReadMin
	parallelReadMin = 1 << 10
	t.Cleanup(func() { parallelReadMin = old })
	rng := rand.New(rand.NewPCG(11, 12))
	secs := []Section{
		randSection(rng, "small", 2, 16, 1),
		randSection(rng, "big", 7, 1<<17, 0), // 3.5 MiB: 4 chunks
		randSection(rng, "cols", 3, 1<<16, 2),
	}
	path := filepath.Join(t.TempDir(), "t.trace")
	if err := WriteAll(path, secs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	sectionsEqual(t, got, secs)

	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := r.Next(); err != nil || h.Name != "cols" {
		t.Fatal(h, err)
	}
	for c := range 3 {
		col := make([]field.Fp, 1<<16)
		if err := r.ReadColumn(col); err != nil || !slices.Equal(col, secs[2].Column(c)) {
			t.Fatalf("column %d: %v", c, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last section: %v", err)
	}
	r.Close()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The cells of "big" start after the file header, section 0 and big's header; find them by
	// its first value.
	first := make([]byte, 4*8)
	for i := range 8 {
		binary.LittleEndian.PutUint32(first[4*i:], uint32(secs[1].Data[i]))
	}
	start := bytes.Index(b, first)
	if start < 0 {
		t.Fatal("cells of section 1 not found")
	}
	col, row := 6, 1<<17-3
	bad := slices.Clone(b)
	off := start + 4*(col<<17+row)
	binary.LittleEndian.PutUint32(bad[off:], 0xffffffff)
	badPath := filepath.Join(t.TempDir(), "bad.trace")
	if err := os.WriteFile(badPath, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAll(badPath)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Offset != int64(off) || fe.Section != 1 || !strings.Contains(fe.Msg, "value 4294967295 at column 6 row 131069 is not < p") {
		t.Fatalf("value ≥ p: got %v, want a FormatError at byte %d", err, off)
	}
	sum := slices.Clone(b)
	end := start + 4*len(secs[1].Data) // big's cells checksum
	sum[end] ^= 1
	if err := os.WriteFile(badPath, sum, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = ReadAll(badPath); !errors.As(err, &fe) || !strings.Contains(fe.Msg, "cells checksum mismatch") {
		t.Fatalf("checksum: got %v", err)
	}
}
