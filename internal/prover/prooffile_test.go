package prover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
)

// A file larger than the bound is refused by its size, before it is read (a sparse file here:
// nothing is written to disk).
func TestReadBoundedRefusesBySize(t *testing.T) {
	const limit = 1 << 20
	path := filepath.Join(t.TempDir(), "big.proof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(limit + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadBounded(path, limit)
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !strings.Contains(err.Error(), "1048577 bytes, larger than 1048576 bytes") {
		t.Fatalf("err %v", err)
	}
	if err := os.Truncate(path, limit); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBounded(path, limit); err != nil || len(b) != limit {
		t.Fatalf("a file of the bound: %d bytes, %v", len(b), err)
	}
}
