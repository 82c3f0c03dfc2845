package prover

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/tracefile"
)

// TestScanAirs: the AIRs and heights found from the headers alone are those LoadTrace reads
// (what lets keygen run while the cells are read), and a section no AIR fits is an error.
func TestScanAirs(t *testing.T) {
	file := exampleSections(t, "interaction-pair", 64)
	path := filepath.Join(t.TempDir(), "pair.trace")
	if err := tracefile.WriteAll(path, file); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeaders(path)
	if err != nil {
		t.Fatal(err)
	}
	airs, heights, err := h.ScanAirs()
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadTrace(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(airs) != len(file) || !sameStatement(airs, heights, st) {
		t.Fatalf("scanned %d AIRs (heights %v), read %d", len(airs), heights, len(st.Airs))
	}
	if sameStatement(airs[:1], heights[:1], st) {
		t.Fatal("a shorter AIR list counts as the same statement")
	}
	other := append([]int(nil), heights...)
	other[0] *= 2
	if sameStatement(airs, other, st) {
		t.Fatal("another height counts as the same statement")
	}

	file[0].Name = "no-such-air"
	bad := filepath.Join(t.TempDir(), "bad.trace")
	if err := tracefile.WriteAll(bad, file); err != nil {
		t.Fatal(err)
	}
	hb, err := ReadHeaders(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := hb.ScanAirs(); err == nil || !strings.Contains(err.Error(), "no-such-air") {
		t.Fatalf("unknown AIR: %v", err)
	}
}
