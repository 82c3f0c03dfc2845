// Package atomicfile writes a file so that it appears at its path complete or not at all: the
// bytes go to a temporary file in the same directory, which is fsynced and renamed over the
// path, and the directory is fsynced (best effort) to make the rename durable. A process killed
// mid-write can leave the temporary file (".<base>.tmp-*") behind, never a partial file at path;
// a process that is interrupted calls AbortPending to remove the temporary files of the writes
// still in progress.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Mode is the permission of the files this package writes, before the process umask: 0644, as
// the shell and most tools create files (the umask usually leaves 0644 or 0640).
const Mode fs.FileMode = 0o644

// File is the temporary file of a write in progress. Write to it (it is an *os.File), then
// Commit or Abort.
type File struct {
	*os.File
	path string
	done bool
}

// pending holds the temporary files of writes in progress, for AbortPending; stopped is set by
// Stop: no write commits any more.
var pending = struct {
	sync.Mutex
	files   map[*File]struct{}
	stopped bool
}{files: map[*File]struct{}{}}

// ErrStopped is the error of a Commit after Stop.
var ErrStopped = errors.New("atomicfile: interrupted; the file was not written")

// Stop makes every later Commit fail (removing its temporary file) and aborts the writes in
// progress: a process that was interrupted writes no output, whatever its commands were doing.
func Stop() {
	pending.Lock()
	pending.stopped = true
	pending.Unlock()
	AbortPending()
}

// Resume undoes Stop (for a process that runs commands again, such as a test).
func Resume() {
	pending.Lock()
	pending.stopped = false
	pending.Unlock()
}

// Create starts a file that will appear at path only when Commit succeeds. The temporary file is
// created with Mode, less the umask (as os.Create does), so that the committed file gets the
// same permissions as any file the user creates. Errors name path, never the temporary file.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for range 100 {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(r[:]))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, Mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &fs.PathError{Op: "create", Path: path, Err: err}
		}
		af := &File{File: f, path: path}
		pending.Lock()
		pending.files[af] = struct{}{}
		pending.Unlock()
		return af, nil
	}
	return nil, &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
}

// Path is the destination path.
func (f *File) Path() string { return f.path }

func (f *File) forget() {
	pending.Lock()
	delete(pending.files, f)
	pending.Unlock()
}

// Commit fsyncs and closes the temporary file, renames it over the destination and fsyncs the
// directory. On an error the temporary file is removed and the destination is left untouched.
func (f *File) Commit() error {
	if f.done {
		return os.ErrClosed
	}
	pending.Lock()
	stopped := pending.stopped
	pending.Unlock()
	if stopped {
		f.Abort()
		return ErrStopped
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
	f.forget()
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
	f.forget()
}

// AbortPending removes the temporary files of every write in progress (Create without Commit or
// Abort yet). A process that must exit at once (an interrupt the command did not answer in
// time) calls it so that no temporary file is left behind.
func AbortPending() {
	pending.Lock()
	files := make([]*File, 0, len(pending.files))
	for f := range pending.files {
		files = append(files, f)
	}
	pending.Unlock()
	for _, f := range files {
		f.Abort()
	}
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
