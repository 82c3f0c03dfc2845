package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	for _, text := range []string{"first", "second"} {
		if err := WriteFile(path, []byte(text)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != text {
			t.Fatalf("read %q, %v; want %q", b, err, text)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
}

func TestAbortLeavesDestination(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("new"))
	f.Abort()
	f.Abort()
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("destination %q after Abort", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary file left behind: %d entries", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestModeFollowsUmask(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := WriteFile(path, []byte("x")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The umask can only clear bits of 0644; the test process's umask is usually 022 or 002.
	if got := st.Mode().Perm(); got&^Mode != 0 || got&0o600 != 0o600 {
		t.Errorf("mode %v, want 0644 less the umask", got)
	}
}

func TestCreateErrorNamesDestination(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "out.bin")
	_, err := Create(path)
	if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("error %v: want one naming %s and not the temporary file", err, path)
	}
}

func TestAbortPending(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	AbortPending()
	if err := a.Commit(); err == nil {
		t.Error("Commit after AbortPending succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "b" {
		t.Errorf("directory holds %v, want only b", ents)
	}
}

func TestStop(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	Stop()
	defer Resume()
	if err := WriteFile(filepath.Join(dir, "b"), []byte("x")); err != ErrStopped {
		t.Errorf("WriteFile after Stop: %v", err)
	}
	if err := a.Commit(); err == nil {
		t.Error("Commit after Stop succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("directory holds %v after Stop", ents)
	}
	Resume()
	if err := WriteFile(filepath.Join(dir, "c"), []byte("x")); err != nil {
		t.Errorf("WriteFile after Resume: %v", err)
	}
}
