package tracefile

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// benchSection is a 2^16 × 64 section: 16 MiB of cells.
func benchSection() Section {
	return randSection(rand.New(rand.NewPCG(42, 42)), "bench", 64, 1<<16, 4)
}

func benchWrite(b *testing.B, path string, s *Section) {
	if err := WriteAll(path, []Section{*s}); err != nil {
		b.Fatal(err)
	}
}

func benchRead(b *testing.B, path string, dst []field.Fp) {
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); err != nil {
		b.Fatal(err)
	}
	if err := r.ReadColumns(dst); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriteRead writes (with fsync and rename) and reads back a 2^16 × 64 section through a
// temporary file; MB/s counts the cell bytes once per write+read.
func BenchmarkWriteRead(b *testing.B) {
	s := benchSection()
	dst := make([]field.Fp, len(s.Data))
	path := filepath.Join(b.TempDir(), "bench.trace")
	b.SetBytes(int64(4 * len(s.Data)))
	for b.Loop() {
		benchWrite(b, path, &s)
		benchRead(b, path, dst)
	}
}

func BenchmarkWrite(b *testing.B) {
	s := benchSection()
	path := filepath.Join(b.TempDir(), "bench.trace")
	b.SetBytes(int64(4 * len(s.Data)))
	for b.Loop() {
		benchWrite(b, path, &s)
	}
}

func BenchmarkRead(b *testing.B) {
	s := benchSection()
	dst := make([]field.Fp, len(s.Data))
	path := filepath.Join(b.TempDir(), "bench.trace")
	benchWrite(b, path, &s)
	b.SetBytes(int64(4 * len(s.Data)))
	for b.Loop() {
		benchRead(b, path, dst)
	}
}
