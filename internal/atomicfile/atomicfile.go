// Package atomicfile writes a file so that it appears at its path complete or not at all: the
// bytes go to a temporary file in the same directory, which is fsynced and renamed over the
// path, and the directory is fsynced (best effort) to make the rename durable. A process killed
// mid-write can leave the temporary file (".<base>.tmp-*") behind, never a partial file at path.
package atomicfile

import (
	"os"
	"path/filepath"
)

// File is the temporary file of a write in progress. Write to it (it is an *os.File, created
// with mode 0600), then Commit or Abort.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts a file that will appear at path only when Commit succeeds.
func Create(path string) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Commit fsyncs and closes the temporary file, renames it over the destination and fsyncs the
// directory. On an error the temporary file is removed and the destination is left untouched.
func (f *File) Commit() error {
	if f.done {
		return os.ErrClosed
	}
	err := f.Sync()
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		f.Abort()
		return err
	}
	f.done = true
	syncDir(filepath.Dir(f.path))
	return nil
}

// Abort closes and removes the temporary file. It does nothing after Commit or a first Abort, so
// it can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes b to path atomically.
func WriteFile(path string, b []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// syncDir makes a rename in dir durable; errors are ignored (some systems cannot fsync a
// directory, and the file itself is already complete and in place).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
