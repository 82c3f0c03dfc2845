// Package tracefile reads and writes trace files: the versioned binary container of a proving
// input. A trace file holds one or more sections; each section is the execution trace of one
// AIR: its name, its width (number of columns), its height (number of rows, a power of two), its
// public values, and its cells, stored column-major.
//
// The API streams: a Writer encodes one column at a time through a fixed-size buffer and a Reader
// decodes straight into a caller's buffer through a fixed-size buffer, so a 2^20 × 2633 trace
// (11 GB) never needs a second copy in memory.
//
// # Byte format, version 1
//
// All integers are unsigned little-endian; u16 and u32 are 2- and 4-byte integers. A field
// element is a u32 holding a canonical BabyBear value v with 0 ≤ v < p = 2013265921
// (0x78000001); any v ≥ p is rejected. CRC-32C is the Castagnoli CRC-32 (reflected polynomial
// 0x82F63B78, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF: the CRC of iSCSI, of the SSE4.2
// crc32 instruction and of Go's crc32.MakeTable(crc32.Castagnoli)); the CRC-32C of the ASCII
// bytes "123456789" is 0xE3069283.
//
// A file is a file header followed by exactly count sections and nothing else.
//
// File header, 24 bytes at offset 0:
//
//	offset  size  field
//	0       8     magic    "MPTRACE\x00" (4D 50 54 52 41 43 45 00)
//	8       4     version  u32 = 1
//	12      4     count    u32, number of sections, 1 ≤ count ≤ 1024
//	16      4     flags    u32, reserved, must be 0
//	20      4     fhcrc    u32, CRC-32C of bytes 0..19
//
// Each section follows the previous one immediately (no padding or alignment):
//
//	size     field
//	2        nlen    u16, byte length of name, 1 ≤ nlen ≤ 255
//	nlen     name    AIR name: valid UTF-8, every code point printable (see below)
//	4        width   u32, number of columns, 1 ≤ width ≤ 65536
//	4        height  u32, number of rows, a power of two, 1 ≤ height ≤ 2^27
//	4        npub    u32, number of public values, 0 ≤ npub ≤ 65536
//	4·npub   pub     npub field elements
//	4        shcrc   u32, CRC-32C of the section header: the bytes from nlen through the end of pub
//	4·w·h    cells   width·height field elements, column-major: column 0 rows 0..h−1, then
//	                 column 1 rows 0..h−1, …; cell (column c, row r) is at cells + 4·(c·height + r)
//	4        ccrc    u32, CRC-32C of the cells bytes
//
// A name is printable when every code point is in Unicode general category L, M, N, P or S, or is
// the ASCII space U+0020 (Go's unicode.IsPrint). Names are not required to be unique.
//
// The encoding is canonical: a given list of sections has exactly one encoding, so decoding and
// re-encoding a valid file reproduces it byte for byte.
//
// # Versioning
//
// The magic and the version field keep their positions in every future version; everything after
// the version field may change. A version-1 reader rejects any version other than 1 and any
// non-zero flags (flags are reserved for compatible extensions, which must be opt-in).
//
// # Reading and limits
//
// A reader checks, in file order: the magic, the version, fhcrc, flags = 0, and 1 ≤ count ≤ 1024.
// Per section it checks 1 ≤ nlen ≤ 255 and npub ≤ 65536 before reading the bytes they size, then
// shcrc, then the name, width, height, public values (each < p), and width·height·4 against the
// reader's limit (Reader.MaxSectionBytes, DefaultMaxSectionBytes = 64 GiB) and, when the file size
// is known, against the bytes left in the file, all before any cell is read or any cell buffer is
// allocated; the largest allocation a header can cause is the 256 KiB of its public values. Cells
// are then read through a fixed-size buffer, each checked < p, and ccrc is checked after the last
// cell. After the last section the file must end. A checksum failure is reported only after the
// data it covers has been read, so a caller must discard cells read before an error.
//
// CRC-32C detects accidental corruption (all burst errors up to 32 bits, and any other error
// with probability 1 − 2^−32) and names the failing section. It is not an authenticity check:
// nothing here is a security boundary; the proof is.
//
// # Errors
//
// Every problem with the bytes of a file is a *FormatError carrying the section index (−1 for the
// file header and file-level problems such as trailing bytes), the section name when its header
// has been validated, and the byte offset in the file of the offending field or value. A
// truncated file is reported at the offset of its first missing byte (its length). Errors of the
// underlying io.Reader are wrapped and returned as they are; misuse of the API (a buffer of the
// wrong length, calls out of order) is a plain error. No input makes the reader panic.
//
// The Writer validates everything the reader checks and reports invalid input (for example a
// value ≥ p, naming its section, column and row) with the same *FormatError type, whose Offset is
// then where the offending bytes would have been written.
package tracefile
