package stark

// Proof file envelope (ours, not OpenVM's) around the spec encoding of a Proof:
//
//	offset  size  content
//	0       8     magic "MPPROOF\x00"
//	8       4     envelope version (u32 LE) = EnvelopeVersion
//	12      32    SHA-256 of the SystemParams postcard bytes (params.AppendPostcard)
//	44      8     n = length of the spec bytes (u64 LE)
//	52      n     Proof.MarshalBinary() bytes (spec A §7.2)
//	52+n    4     CRC-32C (Castagnoli) of bytes [0, 52+n), u32 LE
//
// A reader checks magic, version, length, CRC, then the parameters digest (so a verifier built
// for other parameters fails before decoding), then decodes with LimitsFor(params).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/metalprove/metalprove/internal/atomicfile"
	"github.com/metalprove/metalprove/internal/params"
)

const (
	// EnvelopeMagic starts every proof file.
	EnvelopeMagic = "MPPROOF\x00"
	// EnvelopeVersion is the envelope format version written and accepted.
	EnvelopeVersion uint32 = 1
	// MaxProofFileSize bounds the files ReadProofFile accepts.
	MaxProofFileSize = 1 << 30

	envHeaderLen  = 8 + 4 + 32 + 8
	envTrailerLen = 4
	// EnvelopeOverhead is the envelope's size around the spec bytes: a valid envelope of len(b)
	// bytes holds a proof of len(b) − EnvelopeOverhead bytes.
	EnvelopeOverhead = envHeaderLen + envTrailerLen
)

// ErrEnvelope is wrapped by every envelope error (bad magic, version, digest, length, CRC).
var ErrEnvelope = errors.New("proof file")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ParamsDigest is the SHA-256 of the postcard encoding of p, as stored in proof files.
func ParamsDigest(p params.SystemParams) [32]byte {
	return sha256.Sum256(p.AppendPostcard(nil))
}

func envErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEnvelope, fmt.Sprintf(format, args...))
}

// MarshalProofFile returns the file bytes of proof for parameters p.
func MarshalProofFile(p params.SystemParams, proof *Proof) ([]byte, error) {
	b := make([]byte, envHeaderLen, envHeaderLen+1<<16)
	copy(b, EnvelopeMagic)
	binary.LittleEndian.PutUint32(b[8:], EnvelopeVersion)
	dg := ParamsDigest(p)
	copy(b[12:], dg[:])
	b, err := proof.AppendBinary(b)
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint64(b[44:], uint64(len(b)-envHeaderLen))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

// UnmarshalProofFile checks the envelope of b against p and decodes the proof inside.
func UnmarshalProofFile(b []byte, p params.SystemParams) (*Proof, error) {
	if len(b) < len(EnvelopeMagic) || !bytes.Equal(b[:len(EnvelopeMagic)], []byte(EnvelopeMagic)) {
		n := min(len(b), len(EnvelopeMagic))
		return nil, envErr("bad magic %q, want %q (not a metalprove proof file)", b[:n], EnvelopeMagic)
	}
	if len(b) < envHeaderLen+envTrailerLen {
		return nil, envErr("truncated: %d bytes, the envelope alone needs %d", len(b), envHeaderLen+envTrailerLen)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != EnvelopeVersion {
		return nil, envErr("unsupported envelope version %d (this build reads version %d)", v, EnvelopeVersion)
	}
	n := binary.LittleEndian.Uint64(b[44:])
	if have := uint64(len(b) - envHeaderLen - envTrailerLen); n != have {
		if n > have {
			return nil, envErr("truncated: header announces %d proof bytes, the file holds %d", n, have)
		}
		return nil, envErr("%d unexpected bytes after the proof (header announces %d proof bytes)", have-n, n)
	}
	body := b[:len(b)-envTrailerLen]
	stored := binary.LittleEndian.Uint32(b[len(b)-envTrailerLen:])
	if got := crc32.Checksum(body, crcTable); got != stored {
		return nil, envErr("CRC-32C mismatch: stored %08x, computed %08x (file corrupted)", stored, got)
	}
	want := ParamsDigest(p)
	if !bytes.Equal(b[12:44], want[:]) {
		return nil, envErr("system parameters mismatch: the proof was made for parameters with digest %x, the verifier's parameters have digest %x", b[12:44], want)
	}
	lim := LimitsFor(p)
	proof, err := DecodeProof(body[envHeaderLen:], &lim)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			// report offsets relative to the file
			de2 := *de
			de2.Offset += envHeaderLen
			return nil, fmt.Errorf("%w: %w", ErrEnvelope, &de2)
		}
		return nil, err
	}
	return proof, nil
}

// WriteProofFile writes proof to path atomically: a temporary file in the same directory is
// written, synced and renamed over path; on any error path is left untouched.
func WriteProofFile(path string, p params.SystemParams, proof *Proof) error {
	b, err := MarshalProofFile(p, proof)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b); err != nil {
		return fmt.Errorf("write proof file %s: %w", path, err)
	}
	return nil
}

// ReadProofFile reads and decodes a proof file written by WriteProofFile for parameters p.
func ReadProofFile(path string, p params.SystemParams) (*Proof, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read proof file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxProofFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read proof file %s: %w", path, err)
	}
	if len(b) > MaxProofFileSize {
		return nil, fmt.Errorf("%s: %w", path, envErr("larger than %d bytes", MaxProofFileSize))
	}
	proof, err := UnmarshalProofFile(b, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return proof, nil
}
