package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/metalprove/metalprove/internal/atomicfile"
)

// CheckOutput checks, before any work, that path can be written as the output named by flag
// ("-o", "--trace-out"): it must not be a directory, nor any of the files the command reads
// (inputs; empty names are skipped), and its directory must exist; what already stands at path
// must be a regular file that may be written (not a symbolic link, a device such as /dev/null, a
// FIFO, a socket, or a read-only file): the output replaces it. Every error is a UsageError
// naming path.
func CheckOutput(flag, path string, inputs ...string) error {
	if path == "" {
		return Usagef("%s: empty path", flag)
	}
	if strings.HasSuffix(path, string(filepath.Separator)) {
		return Usagef("%s %s: is a directory; name a file", flag, path)
	}
	// Outputs are written atomically, a new file renamed over path: what already stands at path
	// is replaced, not written into. So only a regular file that may be written is replaced;
	// anything else is refused before any work (docs/DEVELOPING.md, "Output files").
	if lst, err := os.Lstat(path); err == nil {
		switch m := lst.Mode(); {
		case m&fs.ModeSymlink != 0:
			return Usagef("%s %s: is a symbolic link; name the file itself (the output replaces what stands at the path: the link, not its target)", flag, path)
		case m.IsDir():
			return Usagef("%s %s: is a directory; name a file", flag, path)
		case !m.IsRegular():
			return Usagef("%s %s: is not a regular file (%s); outputs are written as new regular files, which would replace it", flag, path, fileKind(m))
		case m.Perm()&0o222 == 0:
			return Usagef("%s %s: is read-only (mode %04o); make it writable or remove it to have it replaced", flag, path, m.Perm())
		}
	}
	st, statErr := os.Stat(path)
	if statErr == nil && st.IsDir() {
		return Usagef("%s %s: is a directory; name a file", flag, path)
	}
	abs, _ := filepath.Abs(path)
	for _, in := range inputs {
		if in == "" {
			continue
		}
		inAbs, _ := filepath.Abs(in)
		same := abs == inAbs
		if !same && statErr == nil {
			if ist, err := os.Stat(in); err == nil {
				same = os.SameFile(st, ist)
			}
		}
		if same {
			return Usagef("%s %s: is the input file %s; writing it would destroy the input (choose another output)", flag, path, in)
		}
	}
	dir := filepath.Dir(path)
	dst, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Usagef("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return Usagef("%s %s: directory %s: %v", flag, path, dir, UnwrapPath(err))
	case !dst.IsDir():
		return Usagef("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// fileKind names the kind of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// CreateOutput checks path as CheckOutput does and starts writing it atomically: the returned
// file is a hidden temporary file in path's directory that becomes path on Commit. Creating it
// up front proves that the directory is writable before any work; the caller defers Abort,
// which removes it on every error path (and atomicfile.AbortPending on an interrupt). Errors
// name path, never the temporary file: a directory that is not writable is a UsageError, other
// failures plain errors.
func CreateOutput(flag, path string, inputs ...string) (*atomicfile.File, error) {
	if err := CheckOutput(flag, path, inputs...); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, OutputError(flag, path, err)
	}
	return f, nil
}

// OutputError describes a failure to create the output path (its temporary file) by the path,
// never by the temporary file's name: a directory that is missing or not writable is a
// UsageError, other failures plain errors.
func OutputError(flag, path string, err error) error {
	dir := filepath.Dir(path)
	switch e := UnwrapPath(err); {
	case errors.Is(e, fs.ErrNotExist):
		return Usagef("%s %s: directory %s does not exist", flag, path, dir)
	case errors.Is(e, fs.ErrPermission):
		return Usagef("%s %s: directory %s is not writable (permission denied)", flag, path, dir)
	case errors.Is(e, syscall.EROFS):
		return Usagef("%s %s: directory %s is on a read-only file system", flag, path, dir)
	default:
		return fmt.Errorf("%s %s: cannot create a file in %s: %w", flag, path, dir, e)
	}
}

// UnwrapPath returns the cause inside a *fs.PathError ("no such file or directory"), for messages
// that name the path themselves; other errors are returned as they are.
func UnwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ShortList joins the first maxShown of n items (item(i) for i < n) with ", ", and says how many
// more there are: "a, b, … 3 more". Reports name AIRs this way.
func ShortList(n, maxShown int, item func(i int) string) string {
	var parts []string
	for i := range min(n, maxShown) {
		parts = append(parts, item(i))
	}
	if n > maxShown {
		parts = append(parts, fmt.Sprintf("… %d more", n-maxShown))
	}
	return strings.Join(parts, ", ")
}
