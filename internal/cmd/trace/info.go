package trace

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// MaxShownPublicValues is the largest number of public values that info prints.
const MaxShownPublicValues = 16

// InfoOptions are the inputs of the trace info command.
type InfoOptions struct {
	IO   *cmdutil.IOStreams
	Path string
	JSON bool
}

// InfoReport is what `metalprove trace info --json` prints.
type InfoReport struct {
	Path      string        `json:"path"`
	SizeBytes int64         `json:"size_bytes"` // −1 when FILE is not a regular file
	Sections  []SectionInfo `json:"sections"`
}

// SectionInfo describes one section of a trace file.
type SectionInfo struct {
	Index           int    `json:"index"`
	Name            string `json:"name"`
	Width           int    `json:"width"`
	Height          int    `json:"height"`
	NumPublicValues int    `json:"num_public_values"`
	// PublicValues holds the public values when there are at most MaxShownPublicValues, else null.
	PublicValues []uint32 `json:"public_values"`
	CellBytes    int64    `json:"cell_bytes"`
	// Digest is SHA-256 of the cells taken row-major, each a little-endian u32 (hex), as
	// keccakf.TraceDigest computes it.
	Digest string `json:"sha256_digest"`
}

// NewCmdInfo returns the trace info command. runF, when not nil, replaces infoRun (for tests).
func NewCmdInfo(f *cmdutil.Factory, runF func(*InfoOptions) error) *cobra.Command {
	opts := &InfoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "info FILE",
		Short: "Decode a trace file and describe its sections",
		Long: `Decode a trace file, checking every checksum and value, and print for each section its
name, width, height, number of public values (and the values when there are at most 16), the
size of its cells in bytes and the SHA-256 digest of its cells taken row-major, each cell a
little-endian u32 (the digest 'metalprove trace --json' prints). The file is read in one
streaming pass plus positioned reads, in bounded memory.

A malformed file (truncated, bad checksum, value not < p, ...) is reported with the section and
byte offset at fault; it, and a missing or unreadable FILE, give exit status 3.`,
		Example: `  metalprove trace info keccakf.trace
  metalprove trace info keccakf.trace --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Path = args[0]
			if runF != nil {
				return runF(opts)
			}
			return infoRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of text (on failure: {error, exit_code})")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

func infoRun(opts *InfoOptions) error {
	rep, err := inspect(opts.Path)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, nil, rep, nil)
	}
	return printInfo(opts.IO.Out, rep)
}

// inspect decodes the trace file at path. Problems with the file's bytes, and a file that
// cannot be opened, are BadInputErrors.
func inspect(path string) (*InfoReport, error) {
	tf, err := openTraceFile(path)
	if err != nil {
		return nil, err
	}
	defer tf.Close()
	f, r, size, wrap := tf.File, tf.r, tf.size, tf.wrap
	rep := &InfoReport{Path: path, SizeBytes: size, Sections: []SectionInfo{}}
	off := int64(tracefile.FileHeaderSize) // offset of the current section
	for i := 0; ; i++ {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap(err)
		}
		cellsOff := off + 2 + int64(len(h.Name)) + 12 + 4*int64(len(h.PublicValues)) + 4
		cellBytes := 4 * int64(h.Width) * int64(h.Height)
		var digest [32]byte
		if size >= 0 {
			// Verify the cells (values and checksum) in the streaming pass, then hash them in
			// row-major order through positioned reads of row tiles.
			if err := r.SkipCells(); err != nil {
				return nil, wrap(err)
			}
			digest, err = rowMajorDigest(h.Width, h.Height, func(c, r0 int, dst []byte) error {
				_, err := f.ReadAt(dst, cellsOff+4*(int64(c)*int64(h.Height)+int64(r0)))
				return err
			})
			if err != nil {
				return nil, wrap(err)
			}
		} else {
			// Not seekable: read the section into one buffer.
			data := make([]field.Fp, h.Width*h.Height)
			if err := r.ReadColumns(data); err != nil {
				return nil, wrap(err)
			}
			digest, _ = rowMajorDigest(h.Width, h.Height, func(c, r0 int, dst []byte) error {
				for t := range len(dst) / 4 {
					binary.LittleEndian.PutUint32(dst[4*t:], uint32(data[c*h.Height+r0+t]))
				}
				return nil
			})
		}
		s := SectionInfo{
			Index: i, Name: h.Name, Width: h.Width, Height: h.Height,
			NumPublicValues: len(h.PublicValues), CellBytes: cellBytes, Digest: hex.EncodeToString(digest[:]),
		}
		if len(h.PublicValues) <= MaxShownPublicValues {
			s.PublicValues = make([]uint32, len(h.PublicValues))
			for k, v := range h.PublicValues {
				s.PublicValues[k] = uint32(v)
			}
		}
		rep.Sections = append(rep.Sections, s)
		off = cellsOff + cellBytes + 4
	}
	return rep, nil
}

// digestTileBytes bounds the row tile that rowMajorDigest transposes (a variable for tests).
var digestTileBytes int64 = 16 << 20

// rowMajorDigest is SHA-256 of a width×height matrix row-major, each cell as 4 bytes, where
// readCol(c, r0, dst) fills dst with the encoded cells of column c from row r0 on (len(dst)/4
// rows). It transposes tiles of at most digestTileBytes.
func rowMajorDigest(width, height int, readCol func(c, r0 int, dst []byte) error) ([32]byte, error) {
	hash := sha256.New()
	var d [32]byte
	if err := rowMajorHash(hash, width, height, readCol); err != nil {
		return d, err
	}
	hash.Sum(d[:0])
	return d, nil
}

// rowMajorHash writes the cells of a width×height matrix row-major into hash (see
// rowMajorDigest).
func rowMajorHash(h hash.Hash, width, height int, readCol func(c, r0 int, dst []byte) error) error {
	tile := height // a power of two, as is height, so it divides height
	for tile > 1 && 4*int64(width)*int64(tile) > digestTileBytes {
		tile /= 2
	}
	rows := make([]byte, 4*width*tile)
	col := make([]byte, 4*tile)
	for r0 := 0; r0 < height; r0 += tile {
		for c := range width {
			if err := readCol(c, r0, col); err != nil {
				return err
			}
			for t := range tile {
				binary.LittleEndian.PutUint32(rows[4*(t*width+c):], binary.LittleEndian.Uint32(col[4*t:]))
			}
		}
		h.Write(rows)
	}
	return nil
}

func printInfo(out io.Writer, rep *InfoReport) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	noun := "sections"
	if len(rep.Sections) == 1 {
		noun = "section"
	}
	if rep.SizeBytes >= 0 {
		fmt.Fprintf(w, "%s: %d bytes, %d %s\n", rep.Path, rep.SizeBytes, len(rep.Sections), noun)
	} else {
		fmt.Fprintf(w, "%s: %d %s\n", rep.Path, len(rep.Sections), noun)
	}
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "section %d: %s\n", s.Index, s.Name)
		fmt.Fprintf(w, "  width\t%d\n", s.Width)
		fmt.Fprintf(w, "  height\t%d\n", s.Height)
		switch {
		case s.NumPublicValues == 0:
			fmt.Fprintf(w, "  public values\t0\n")
		case s.PublicValues != nil:
			fmt.Fprintf(w, "  public values\t%d: %v\n", s.NumPublicValues, s.PublicValues)
		default:
			fmt.Fprintf(w, "  public values\t%d (not shown: more than %d)\n", s.NumPublicValues, MaxShownPublicValues)
		}
		fmt.Fprintf(w, "  cell bytes\t%d\n", s.CellBytes)
		fmt.Fprintf(w, "  sha256 digest\t%s (cells row-major, little-endian u32)\n", s.Digest)
	}
	return w.Flush()
}

// traceFile is a trace file opened for reading: the file, its tracefile.Reader (told the size
// when the file is regular) and the size (−1 when not regular).
type traceFile struct {
	*os.File
	r    *tracefile.Reader
	size int64
	path string
}

// openTraceFile opens the trace file at path and reads its header. A file that cannot be opened,
// a directory and a bad header are BadInputErrors.
func openTraceFile(path string) (*traceFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: err} // *PathError: names the path
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: is a directory", path)}
	}
	tf := &traceFile{File: f, size: -1, path: path}
	if st.Mode().IsRegular() {
		tf.size = st.Size()
	}
	if tf.r, err = tracefile.NewReader(f, tf.size); err != nil {
		f.Close()
		return nil, tf.wrap(err)
	}
	return tf, nil
}

// wrap names the file in err; problems with the file's bytes (tracefile.FormatError) are
// BadInputErrors.
func (tf *traceFile) wrap(err error) error {
	err = fmt.Errorf("%s: %w", tf.path, err)
	if fe := (*tracefile.FormatError)(nil); errors.As(err, &fe) {
		return &cmdutil.BadInputError{Err: err}
	}
	return err
}
