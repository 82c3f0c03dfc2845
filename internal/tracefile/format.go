package tracefile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode"
	"unicode/utf8"

	"github.com/metalprove/metalprove/internal/field"
)

// Format constants; see the package documentation for the layout.
const (
	// Magic is the first 8 bytes of every trace file.
	Magic = "MPTRACE\x00"
	// Version is the format version this package reads and writes.
	Version = 1
	// FileHeaderSize is the size in bytes of the file header.
	FileHeaderSize = 24

	// MaxSections is the largest section count of a file.
	MaxSections = 1024
	// MaxNameLen is the largest byte length of a section name.
	MaxNameLen = 255
	// MaxWidth is the largest number of columns of a section.
	MaxWidth = 1 << 16
	// MaxHeight is the largest number of rows of a section (the field's two-adicity).
	MaxHeight = 1 << 27
	// MaxPublicValues is the largest number of public values of a section.
	MaxPublicValues = 1 << 16
	// DefaultMaxSectionBytes is the default limit on the cell bytes (width·height·4) of one
	// section, for readers and writers.
	DefaultMaxSectionBytes int64 = 64 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SectionHeader describes one section: an AIR's name, trace dimensions and public values.
type SectionHeader struct {
	Name         string
	Width        int // columns, 1..MaxWidth
	Height       int // rows, a power of two in 1..MaxHeight
	PublicValues []field.Fp
}

// Section is a section header with its cells.
type Section struct {
	SectionHeader
	// Data holds the cells column-major: column c is Data[c*Height : (c+1)*Height].
	Data []field.Fp
}

// Column returns column c of s (a subslice of s.Data).
func (s *Section) Column(c int) []field.Fp {
	return s.Data[c*s.Height : (c+1)*s.Height : (c+1)*s.Height]
}

// FormatError reports malformed trace-file bytes (or, from a Writer, invalid input).
type FormatError struct {
	// Section is the index of the section at fault, or −1 for the file header and file-level
	// problems (trailing bytes).
	Section int
	// Name is the section's name once its header has been validated, else "".
	Name string
	// Offset is the byte offset in the file of the offending field or value; for a truncated
	// file, the offset of the first missing byte.
	Offset int64
	// Msg describes the problem.
	Msg string
}

func (e *FormatError) Error() string {
	switch {
	case e.Section < 0:
		return fmt.Sprintf("tracefile: byte offset %d: %s", e.Offset, e.Msg)
	case e.Name == "":
		return fmt.Sprintf("tracefile: section %d: byte offset %d: %s", e.Section, e.Offset, e.Msg)
	default:
		return fmt.Sprintf("tracefile: section %d %q: byte offset %d: %s", e.Section, e.Name, e.Offset, e.Msg)
	}
}

// sectionHeaderSize is the encoded size of a section header, shcrc included.
func sectionHeaderSize(nameLen, npub int) int64 {
	return 2 + int64(nameLen) + 12 + 4*int64(npub) + 4
}

// headerProblem validates a section header. It returns "" when h is valid, else a message and
// the offset of the offending field relative to the start of the section.
func headerProblem(name string, width, height int64, pub []field.Fp, maxBytes int64) (string, int64) {
	n := len(name)
	if n == 0 || n > MaxNameLen {
		return fmt.Sprintf("name length %d is not in [1, %d]", n, MaxNameLen), 0
	}
	if !utf8.ValidString(name) {
		return "name is not valid UTF-8", 2
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("name has non-printable character %U at byte %d", r, i), 2 + int64(i)
		}
	}
	nn := int64(n)
	if width < 1 || width > MaxWidth {
		return fmt.Sprintf("width %d is not in [1, %d]", width, MaxWidth), 2 + nn
	}
	if height < 1 || height > MaxHeight || height&(height-1) != 0 {
		return fmt.Sprintf("height %d is not a power of two in [1, 2^27]", height), 6 + nn
	}
	if len(pub) > MaxPublicValues {
		return fmt.Sprintf("%d public values exceed the limit %d", len(pub), MaxPublicValues), 10 + nn
	}
	for i, v := range pub {
		if uint32(v) >= field.P {
			return fmt.Sprintf("public value %d is %d, not < p", i, uint32(v)), 14 + nn + 4*int64(i)
		}
	}
	if b := 4 * width * height; b > maxBytes {
		return fmt.Sprintf("cells of %d×%d need %d bytes, over the limit of %d", width, height, b, maxBytes), 2 + nn
	}
	return "", 0
}

// appendFileHeader appends the 24-byte file header for count sections.
func appendFileHeader(b []byte, count int) []byte {
	start := len(b)
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint32(b, uint32(count))
	b = binary.LittleEndian.AppendUint32(b, 0)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// appendSectionHeader appends the section header of h, shcrc included. h must be valid.
func appendSectionHeader(b []byte, h *SectionHeader) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.Name)))
	b = append(b, h.Name...)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Width))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Height))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.PublicValues)))
	for _, v := range h.PublicValues {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// ioBufSize is the size of the fixed buffers cells are encoded and decoded through.
const ioBufSize = 256 << 10
