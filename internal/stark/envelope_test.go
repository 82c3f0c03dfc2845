package stark

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	p := sectionFParams()
	pr := newCodecGen(7).proof(p, codecSmallShape())
	dir := t.TempDir()
	path := filepath.Join(dir, "proof.bin")
	if err := WriteProofFile(path, p, pr); err != nil {
		t.Fatal(err)
	}
	got, err := ReadProofFile(path, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pr) {
		t.Fatal("proof differs after the file round trip")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want 1", len(ents))
	}
	b, _ := os.ReadFile(path)
	spec, _ := pr.MarshalBinary()
	if !bytes.Equal(b[envHeaderLen:len(b)-4], spec) || string(b[:8]) != EnvelopeMagic {
		t.Fatal("file does not hold the spec bytes at offset 52")
	}
}

func TestEnvelopeErrors(t *testing.T) {
	p := sectionFParams()
	pr := newCodecGen(8).proof(p, codecSmallShape())
	good, err := MarshalProofFile(p, pr)
	if err != nil {
		t.Fatal(err)
	}
	fixCRC := func(b []byte) []byte {
		n := len(b) - 4
		binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], crcTable))
		return b
	}
	other := p
	other.Whir.MuPowBits++
	type tc struct {
		name string
		b    []byte
		want string
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tcs := []tc{
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"empty", nil, "bad magic"},
		{"version", mut(func(b []byte) []byte { b[8] = 2; return fixCRC(b) }), "unsupported envelope version 2"},
		{"crc", mut(func(b []byte) []byte { b[100] ^= 1; return b }), "CRC-32C mismatch"},
		{"truncated", good[:len(good)-10], "truncated"},
		{"header only", good[:30], "truncated"},
		{"extra", append(bytes.Clone(good), 0), "unexpected bytes"},
		{"decode", mut(func(b []byte) []byte { b[envHeaderLen] = 9; return fixCRC(b) }), "codec version 9"},
	}
	for _, c := range tcs {
		_, err := UnmarshalProofFile(c.b, p)
		if !errors.Is(err, ErrEnvelope) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	_, err = UnmarshalProofFile(good, other)
	if !errors.Is(err, ErrEnvelope) || !strings.Contains(err.Error(), "system parameters mismatch") {
		t.Fatalf("params: %v", err)
	}
	var de *DecodeError
	_, err = UnmarshalProofFile(mut(func(b []byte) []byte { b[envHeaderLen] = 9; return fixCRC(b) }), p)
	if !errors.As(err, &de) || de.Offset != envHeaderLen {
		t.Fatalf("decode error offset: %v", err)
	}
}

func TestWriteProofFileAtomic(t *testing.T) {
	p := sectionFParams()
	dir := t.TempDir()
	path := filepath.Join(dir, "proof.bin")
	if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := newCodecGen(9).proof(p, codecSmallShape())
	bad.Whir.InitialRoundOpenedRows = nil // unencodable
	if err := WriteProofFile(path, p, bad); !errors.Is(err, ErrUnencodable) {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "previous" {
		t.Fatal("failed write touched the existing file")
	}
	if err := WriteProofFile(filepath.Join(dir, "missing", "proof.bin"), p, newCodecGen(9).proof(p, codecSmallShape())); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want 1 (temporary files left?)", len(ents))
	}
	if _, err := ReadProofFile(filepath.Join(dir, "nope"), p); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
}
