package tracefile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/metalprove/metalprove/internal/field"
)

// FuzzReader: decoding arbitrary bytes must not panic; it either fails with a *FormatError or
// yields sections that re-encode to exactly the input.
func FuzzReader(f *testing.F) {
	f.Add(mustEncode(f, smallSections()))
	rng := rand.New(rand.NewPCG(9, 9))
	f.Add(mustEncode(f, []Section{randSection(rng, "a", 1, 1, 0)}))
	f.Add(mustEncode(f, []Section{randSection(rng, "b", 2, 8, 3), randSection(rng, "c", 1, 2, 0)}))
	f.Add([]byte(Magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		secs, err := Decode(data)
		_, err2 := ReadAllFrom(bytes.NewReader(data), -1)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("known size: %v; unknown size: %v", err, err2)
		}
		if err != nil {
			var fe, fe2 *FormatError
			if !errors.As(err, &fe) || !errors.As(err2, &fe2) {
				t.Fatalf("not a *FormatError: %v / %v", err, err2)
			}
			if fe.Section != fe2.Section || fe.Section < -1 || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("inconsistent errors: %v / %v", err, err2)
			}
			return
		}
		re, err := Encode(secs)
		if err != nil {
			t.Fatalf("re-encoding a decoded file: %v", err)
		}
		if !bytes.Equal(re, data) {
			t.Fatal("re-encoding differs from the input")
		}
	})
}

// FuzzRoundTrip: random valid sections survive a write and a read, in memory and (sometimes)
// through a file, whole and column by column.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(1), uint8(1), uint8(0), uint8(0), "air")
	f.Add(uint64(2), uint8(3), uint8(17), uint8(5), uint8(4), "keccakf")
	f.Add(uint64(3), uint8(2), uint8(255), uint8(9), uint8(1), "poséidon2 ✓")
	f.Fuzz(func(t *testing.T, seed uint64, nsec, maxW, logH, npub uint8, name string) {
		if (SectionHeader{Name: name}).invalidName() {
			name = "air"
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 1 + int(nsec)%8
		secs := make([]Section, n)
		for i := range secs {
			secs[i] = randSection(rng, name, 1+rng.IntN(1+int(maxW)%64), 1<<rng.IntN(1+int(logH)%10), rng.IntN(1+int(npub)))
		}
		b, err := Encode(secs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		sectionsEqual(t, got, secs)

		r, err := NewReader(bytes.NewReader(b), -1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range secs {
			h, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			col := make([]field.Fp, h.Height)
			for c := range h.Width {
				if err := r.ReadColumn(col); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(col, secs[i].Column(c)) {
					t.Fatalf("section %d column %d differs", i, c)
				}
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after last section: %v", err)
		}

		if seed%32 == 0 {
			path := filepath.Join(t.TempDir(), "f.trace")
			if err := WriteAll(path, secs); err != nil {
				t.Fatal(err)
			}
			disk, _ := os.ReadFile(path)
			if !bytes.Equal(disk, b) {
				t.Fatal("file differs from memory encoding")
			}
		}
	})
}

// invalidName reports whether h.Name is unusable as a section name.
func (h SectionHeader) invalidName() bool {
	msg, _ := headerProblem(h.Name, 1, 1, nil, DefaultMaxSectionBytes)
	return msg != ""
}
