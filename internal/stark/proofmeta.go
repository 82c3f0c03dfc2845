package stark

// Proof file metadata: what `metalprove verify` needs to rebuild the verifying key, recorded in
// front of the proof envelope (envelope.go) of a proof file:
//
//	offset  size  content
//	0       8     magic "MPPMETA\x00"
//	8       4     metadata version (u32 LE) = ProofMetaVersion
//	12      4     n = length of the metadata JSON (u32 LE), at most MaxProofMetaSize
//	16      n     metadata: ProofMeta as JSON
//	16+n    4     CRC-32C (Castagnoli) of bytes [0, 16+n), u32 LE
//	20+n    …     the proof envelope (MarshalProofFile bytes, starting "MPPROOF\x00")
//
// A file that starts with the envelope magic instead is a bare envelope (no metadata): its
// verifier must be given the AIRs some other way. The metadata is not bound by the proof, but it
// determines the verifying key and hence the transcript: metadata naming other AIRs or heights
// than those proven makes verification fail, it cannot make a false statement verify.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/metalprove/metalprove/internal/atomicfile"
	"github.com/metalprove/metalprove/internal/params"
)

const (
	// ProofMetaMagic starts a proof file with metadata.
	ProofMetaMagic = "MPPMETA\x00"
	// ProofMetaVersion is the metadata block version written and accepted.
	ProofMetaVersion uint32 = 1
	// MaxProofMetaSize bounds the metadata JSON.
	MaxProofMetaSize = 1 << 20

	metaHeaderLen = 8 + 4 + 4
)

// ProofMeta describes the statement of a proof file: the AIRs in verifying-key order and the
// parameters' source.
type ProofMeta struct {
	// Params names where the parameters came from: "preset" (Preset names it), "config" (the
	// verifier must be given the same parameters) or "key" (a proving-key file's: KeyPreHash).
	Params string `json:"params"`
	Preset string `json:"preset,omitempty"`
	// AIRs are the AIRs of the verifying key, in order. Without a key every one is present in
	// the proof; with one, an AIR left out of the proof has height 0.
	AIRs []ProofMetaAir `json:"airs"`
	// KeyPreHash is the pre_hash of the verifying key of the proving-key file the proof was made
	// with (8 canonical values), absent for proofs of built-in AIRs: a verifier given another
	// key rejects the proof before verifying it.
	KeyPreHash []uint32 `json:"key_pre_hash,omitempty"`
}

// KeyPreHashValues returns a pre_hash as ProofMeta.KeyPreHash records it.
func KeyPreHashValues(d Digest) []uint32 {
	out := make([]uint32, len(d))
	for i, f := range d {
		out[i] = uint32(f)
	}
	return out
}

// ProofMetaAir is one AIR of the key: its name (as a trace file section names it, see
// internal/examples.AirFor) and its trace height (AIRs whose preprocessed trace depends on the
// height need it to rebuild their key).
type ProofMetaAir struct {
	Name   string `json:"name"`
	Height int    `json:"height"`
}

// MarshalProofFileMeta returns the bytes of a proof file with metadata.
func MarshalProofFileMeta(p params.SystemParams, proof *Proof, meta *ProofMeta) ([]byte, error) {
	js, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	if len(js) > MaxProofMetaSize {
		return nil, envErr("metadata of %d bytes exceeds %d", len(js), MaxProofMetaSize)
	}
	b := make([]byte, metaHeaderLen, metaHeaderLen+len(js)+4)
	copy(b, ProofMetaMagic)
	binary.LittleEndian.PutUint32(b[8:], ProofMetaVersion)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(js)))
	b = append(b, js...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	env, err := MarshalProofFile(p, proof)
	if err != nil {
		return nil, err
	}
	return append(b, env...), nil
}

// SplitProofFile separates the metadata block of a proof file from its envelope. A bare envelope
// gives meta == nil and env == b. Errors wrap ErrEnvelope.
func SplitProofFile(b []byte) (meta *ProofMeta, env []byte, err error) {
	if !bytes.HasPrefix(b, []byte(ProofMetaMagic)) {
		return nil, b, nil
	}
	if len(b) < metaHeaderLen+4 {
		return nil, nil, envErr("truncated metadata block: %d bytes", len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != ProofMetaVersion {
		return nil, nil, envErr("unsupported metadata version %d (this build reads version %d)", v, ProofMetaVersion)
	}
	n := int64(binary.LittleEndian.Uint32(b[12:]))
	if n > MaxProofMetaSize {
		return nil, nil, envErr("metadata length %d exceeds %d", n, MaxProofMetaSize)
	}
	end := metaHeaderLen + n
	if int64(len(b)) < end+4 {
		return nil, nil, envErr("truncated metadata block: it announces %d bytes, the file holds %d", n, len(b)-metaHeaderLen)
	}
	stored := binary.LittleEndian.Uint32(b[end:])
	if got := crc32.Checksum(b[:end], crcTable); got != stored {
		return nil, nil, envErr("metadata CRC-32C mismatch: stored %08x, computed %08x (file corrupted)", stored, got)
	}
	dec := json.NewDecoder(bytes.NewReader(b[metaHeaderLen:end]))
	dec.DisallowUnknownFields()
	meta = &ProofMeta{}
	if err := dec.Decode(meta); err != nil {
		return nil, nil, envErr("metadata: %v", err)
	}
	if len(meta.AIRs) == 0 {
		return nil, nil, envErr("metadata names no AIR")
	}
	return meta, b[end+4:], nil
}

// WriteProofFileMeta writes a proof file with metadata to path atomically (as WriteProofFile).
func WriteProofFileMeta(path string, p params.SystemParams, proof *Proof, meta *ProofMeta) (int, error) {
	b, err := MarshalProofFileMeta(p, proof, meta)
	if err != nil {
		return 0, err
	}
	if err := atomicfile.WriteFile(path, b); err != nil {
		return 0, fmt.Errorf("write proof file %s: %w", path, err)
	}
	return len(b), nil
}

// ReadProofFileRaw reads a proof file (with or without metadata), bounded by MaxProofFileSize
// plus the metadata block, and splits it. Decode the envelope with UnmarshalProofFile once the
// parameters are known.
func ReadProofFileRaw(path string) (meta *ProofMeta, env []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read proof file: %w", err)
	}
	defer f.Close()
	limit := int64(MaxProofFileSize + metaHeaderLen + MaxProofMetaSize + 4)
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read proof file %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("%s: %w", path, envErr("larger than %d bytes", limit))
	}
	meta, env, err = SplitProofFile(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return meta, env, nil
}
