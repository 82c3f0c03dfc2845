// Package keyfile owns metalprove's proving-key file (`metalprove keygen` writes it, `prove
// --key` and `verify --key` read it): OpenVM's verifying key as OpenVM writes it, each AIR's name
// and preprocessed trace, and a note of where the key came from, versioned and checksummed.
// Layout (docs/PROVING-KEYS.md; integers little-endian):
//
//	offset  size   content
//	0       8      magic "MPPKEY\x00\x00"
//	8       4      version (u32) = Version
//	12      4      n: number of AIRs (u32)
//	16      8      v: length of the verifying key (u64)
//	24      v      postcard(MultiStarkVerifyingKey), OpenVM stark-backend v2.0.1's bytes: the
//	               parameters, per AIR its widths, public value count, constraint DAG (the
//	               constraint program is compiled from it), preprocessed commitment data and
//	               trace-height constraints, then the pre_hash
//	…       n ×    per AIR in key order: name length (u16, 1..255), the name (UTF-8); the
//	               preprocessed trace's height h (u32, 0 when the AIR has none), then its
//	               width × h values (u32, canonical, column-major; width from the key)
//	…       4      m: length of the note (u32), then m bytes of JSON (Note)
//	end−32  32     SHA-256 of every byte before it
//
// The file is checked whole before it is used: its checksum, then every field; a corrupt,
// truncated or altered file is an error naming what is wrong, never a panic.
package keyfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode"
	"unicode/utf8"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/atomicfile"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

const (
	// Magic starts every proving-key file.
	Magic = "MPPKEY\x00\x00"
	// Version is the layout version written and read.
	Version uint32 = 1
	// MaxFileSize bounds a file read (preprocessed traces are at most a stacked matrix each).
	MaxFileSize = 16 << 30
	// MaxNameLen bounds an AIR's name.
	MaxNameLen = 255
	maxNoteLen = 1 << 20
	headerLen  = 8 + 4 + 4 + 8
	sumLen     = sha256.Size
)

// ErrFormat is wrapped by every error of a malformed proving-key file.
var ErrFormat = errors.New("keyfile: malformed proving-key file")

// Note says where a key came from; it is not used to prove.
type Note struct {
	// Source is "example keccakf", "trace k16.trace", "openvm-vk app.vk.postcard", ….
	Source string `json:"source"`
	// Preset names the parameters' preset when they came from one.
	Preset string `json:"preset,omitempty"`
	// CreatedBy is the program and version that wrote the file.
	CreatedBy string `json:"created_by,omitempty"`
}

// File is a decoded proving-key file.
type File struct {
	MVK     *air.MultiVerifyingKey0
	PreHash poseidon2.Digest
	// Names are the AIRs' names in key order (not necessarily unique).
	Names []string
	// Preprocessed[i] is AIR i's preprocessed trace, nil when it has none.
	Preprocessed []*air.Matrix
	Note         Note
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// CheckName accepts AIR i's name: 1..MaxNameLen bytes of UTF-8 without control characters.
func CheckName(i int, name string) error {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("AIR %d: name %q: want 1 to %d bytes of UTF-8", i, name, MaxNameLen)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("AIR %d: name %q holds a control character", i, name)
		}
	}
	return nil
}

// Marshal returns the bytes of f. f.MVK must be a valid key (as DecodeMultiVerifyingKey or
// keygen returns it) and the names and preprocessed traces must fit it.
func Marshal(f *File) ([]byte, error) {
	n := len(f.MVK.PerAir)
	if len(f.Names) != n || len(f.Preprocessed) != n {
		return nil, fmt.Errorf("keyfile: %d names and %d preprocessed traces for %d AIRs", len(f.Names), len(f.Preprocessed), n)
	}
	vk := f.MVK.AppendKeyPostcard(nil, f.PreHash)
	b := make([]byte, 0, headerLen+len(vk)+64*n)
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(vk)))
	b = append(b, vk...)
	for i, name := range f.Names {
		if err := CheckName(i, name); err != nil {
			return nil, fmt.Errorf("keyfile: %w", err)
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		m := f.Preprocessed[i]
		if err := checkPreprocessed(f.MVK, i, m); err != nil {
			return nil, fmt.Errorf("keyfile: %w", err)
		}
		if m == nil {
			b = binary.LittleEndian.AppendUint32(b, 0)
			continue
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(m.Height))
		for _, v := range m.Values {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	note, err := json.Marshal(f.Note)
	if err != nil {
		return nil, err
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(note)))
	b = append(b, note...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// checkPreprocessed checks AIR i's preprocessed trace against the key: present exactly when the
// key has a preprocessed width, of that width and of the key's height.
func checkPreprocessed(mvk *air.MultiVerifyingKey0, i int, m *air.Matrix) error {
	avk := mvk.PerAir[i]
	if (m != nil) != (avk.Preprocessed != nil) {
		return fmt.Errorf("AIR %d: preprocessed trace given: %v, the key has one: %v", i, m != nil, avk.Preprocessed != nil)
	}
	if m == nil {
		return nil
	}
	h := 1 << (avk.Preprocessed.HypercubeDim + mvk.Params.LSkip)
	if m.Width != avk.Width.Preprocessed || m.Height != h || len(m.Values) != m.Width*m.Height {
		return fmt.Errorf("AIR %d: preprocessed trace is %d×%d, the key's is %d×%d", i, m.Height, m.Width, h, avk.Width.Preprocessed)
	}
	return nil
}

// Unmarshal decodes and checks a proving-key file: magic, version, checksum, then the verifying
// key (air.DecodeMultiVerifyingKey), names, preprocessed traces and note, with no byte left over.
func Unmarshal(b []byte) (*File, error) { return UnmarshalWith(nil, b) }

// UnmarshalWith is Unmarshal with the key's pre_hash recomputed through a (nil: pure Go).
func UnmarshalWith(a poseidon2.Absorber, b []byte) (*File, error) {
	if len(b) < len(Magic) || !bytes.Equal(b[:len(Magic)], []byte(Magic)) {
		return nil, formatErr("not a metalprove proving-key file (bad magic)")
	}
	if len(b) < headerLen+sumLen {
		return nil, formatErr("truncated: %d bytes", len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != Version {
		return nil, formatErr("version %d, this build reads version %d", v, Version)
	}
	body, stored := b[:len(b)-sumLen], b[len(b)-sumLen:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], stored) {
		return nil, formatErr("SHA-256 mismatch: the file is corrupt or truncated")
	}
	return unmarshalBody(a, body)
}

// unmarshalBody decodes the bytes before the checksum (fuzzed on its own: a fuzzer cannot get
// past a SHA-256).
func unmarshalBody(a poseidon2.Absorber, b []byte) (*File, error) {
	if len(b) < headerLen || !bytes.Equal(b[:len(Magic)], []byte(Magic)) || binary.LittleEndian.Uint32(b[8:]) != Version {
		return nil, formatErr("truncated or unknown header")
	}
	n := int(binary.LittleEndian.Uint32(b[12:]))
	vlen := binary.LittleEndian.Uint64(b[16:])
	rest := b[headerLen:]
	if vlen > uint64(len(rest)) {
		return nil, formatErr("verifying key of %d bytes, %d left", vlen, len(rest))
	}
	mvk, pre, err := air.DecodeMultiVerifyingKeyWith(a, rest[:vlen])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if n != len(mvk.PerAir) {
		return nil, formatErr("header says %d AIRs, the verifying key has %d", n, len(mvk.PerAir))
	}
	rest = rest[vlen:]
	f := &File{MVK: mvk, PreHash: pre, Names: make([]string, n), Preprocessed: make([]*air.Matrix, n)}
	take := func(k int, what string) ([]byte, error) {
		if k > len(rest) {
			return nil, formatErr("%s: %d bytes needed, %d left", what, k, len(rest))
		}
		x := rest[:k]
		rest = rest[k:]
		return x, nil
	}
	for i := range n {
		x, err := take(2, "name length")
		if err != nil {
			return nil, err
		}
		if x, err = take(int(binary.LittleEndian.Uint16(x)), "name"); err != nil {
			return nil, err
		}
		f.Names[i] = string(x)
		if err := CheckName(i, f.Names[i]); err != nil {
			return nil, formatErr("%v", err)
		}
		if x, err = take(4, "preprocessed height"); err != nil {
			return nil, err
		}
		h := int(binary.LittleEndian.Uint32(x))
		avk := mvk.PerAir[i]
		if h == 0 {
			if avk.Preprocessed != nil {
				return nil, formatErr("AIR %d (%s): the key has a preprocessed trace, the file none", i, f.Names[i])
			}
			continue
		}
		if avk.Preprocessed == nil {
			return nil, formatErr("AIR %d (%s): the file has a preprocessed trace, the key none", i, f.Names[i])
		}
		want := 1 << (avk.Preprocessed.HypercubeDim + mvk.Params.LSkip)
		if h != want {
			return nil, formatErr("AIR %d (%s): preprocessed height %d, the key's is %d", i, f.Names[i], h, want)
		}
		w := avk.Width.Preprocessed
		if uint64(w)*uint64(h)*4 > uint64(len(rest)) {
			return nil, formatErr("AIR %d (%s): preprocessed trace of %d×%d cells, %d bytes left", i, f.Names[i], h, w, len(rest))
		}
		x, _ = take(4*w*h, "preprocessed trace")
		m := &air.Matrix{Width: w, Height: h, Values: make([]field.Fp, w*h)}
		for j := range m.Values {
			v := binary.LittleEndian.Uint32(x[4*j:])
			if v >= field.P {
				return nil, formatErr("AIR %d (%s): preprocessed value %d at %d is not canonical (≥ p)", i, f.Names[i], v, j)
			}
			m.Values[j] = field.Fp(v)
		}
		f.Preprocessed[i] = m
	}
	x, err := take(4, "note length")
	if err != nil {
		return nil, err
	}
	nl := int(binary.LittleEndian.Uint32(x))
	if nl > maxNoteLen {
		return nil, formatErr("note of %d bytes exceeds %d", nl, maxNoteLen)
	}
	if x, err = take(nl, "note"); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(x))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.Note); err != nil {
		return nil, formatErr("note: %v", err)
	}
	if canon, _ := json.Marshal(f.Note); !bytes.Equal(canon, x) {
		return nil, formatErr("note is not the JSON this program writes")
	}
	if len(rest) != 0 {
		return nil, formatErr("%d trailing bytes before the checksum", len(rest))
	}
	return f, nil
}

// Read reads and decodes the proving-key file at path.
func Read(path string) (*File, error) { return ReadWith(nil, path) }

// ReadWith is Read with the key's pre_hash recomputed through a (nil: pure Go).
func ReadWith(a poseidon2.Absorber, path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, formatErr("larger than %d bytes", int64(MaxFileSize))
	}
	f, err := UnmarshalWith(a, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Write writes f to path atomically (nothing at path until it is whole).
func Write(path string, f *File) (int, error) {
	b, err := Marshal(f)
	if err != nil {
		return 0, err
	}
	return len(b), atomicfile.WriteFile(path, b)
}

// Airs returns the key's AIRs (air.KeyedAir: named, with their preprocessed traces).
func (f *File) Airs() ([]air.Air, error) {
	out := make([]air.Air, len(f.Names))
	for i, name := range f.Names {
		a, err := air.NewKeyedAir(name, f.MVK.PerAir[i], f.Preprocessed[i])
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}
