package prover

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/stark"
)

// AirList names AIRs and their heights: "1 AIR: keccakf (height 32768)", "3 AIRs: a (8), b (16), c (4)".
func AirList(airs []stark.ProofMetaAir) string {
	list := cmdutil.ShortList(len(airs), 8, func(i int) string { return fmt.Sprintf("%s (%d)", airs[i].Name, airs[i].Height) })
	if len(airs) == 1 {
		return fmt.Sprintf("1 AIR: %s (height %d)", airs[0].Name, airs[0].Height)
	}
	return fmt.Sprintf("%d AIRs: %s", len(airs), list)
}

// checkMagic refuses a file that does not start as a metalprove proof file (metadata block or
// bare envelope): "not a metalprove proof file: bad magic". A file that starts like bare OpenVM
// codec bytes is named as such, with the flags that verify it.
func checkMagic(path string, b []byte) error {
	if IsProofFile(b) {
		return nil
	}
	n := min(len(b), 8)
	msg := fmt.Sprintf("%s: not a metalprove proof file: bad magic %q (want %q or %q)", path, b[:n], stark.ProofMetaMagic, stark.EnvelopeMagic)
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == stark.CodecVersion {
		msg += fmt.Sprintf("; it starts like bare OpenVM proof bytes (codec version %d): verify it with --openvm %s --trace TRACE --preset P", stark.CodecVersion, path)
	}
	return &cmdutil.BadInputError{Err: errors.New(msg)}
}

// IsProofFile reports whether b starts as a metalprove proof file: a metadata block or a bare
// envelope.
func IsProofFile(b []byte) bool {
	return bytes.HasPrefix(b, []byte(stark.ProofMetaMagic)) || bytes.HasPrefix(b, []byte(stark.EnvelopeMagic))
}

// ReadBounded reads a whole input file of at most limit bytes; errors are BadInputErrors naming
// path.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, cmdutil.UnwrapPath(err))}
	}
	defer f.Close()
	// A regular file's size is known: one too large is refused before it is read (an 11 GB file
	// took 6.6 s to refuse).
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %d bytes, larger than %d bytes", path, st.Size(), limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, cmdutil.UnwrapPath(err))}
	}
	if int64(len(b)) > limit {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: larger than %d bytes", path, limit)}
	}
	return b, nil
}

// ReadProofFile reads a metalprove proof file (at most stark.MaxProofFileSize plus its metadata),
// checks its magic and splits it into its metadata (nil when it has none) and envelope; errors
// are BadInputErrors naming path.
func ReadProofFile(path string) (*stark.ProofMeta, []byte, error) {
	b, err := ReadBounded(path, stark.MaxProofFileSize+2<<20)
	if err != nil {
		return nil, nil, err
	}
	if err := checkMagic(path, b); err != nil {
		return nil, nil, err
	}
	meta, env, err := stark.SplitProofFile(b)
	if err != nil {
		return nil, nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	return meta, env, nil
}
