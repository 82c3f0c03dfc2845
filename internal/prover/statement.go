package prover

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/sysinfo"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// Statement is what a trace file proves: the AIRs (key order) and their inputs; against a
// proving key (Key set), every AIR of the key, those left out with a zero input and height 0.
type Statement struct {
	Airs   []air.Air
	Inputs []stark.AirProvingInput
	Meta   []stark.ProofMetaAir
	Widths []int
	// Key is the proving key the statement was read against (nil: built-in AIRs).
	Key *Key
	// CellBytes is the size of all traces (4 bytes a cell).
	CellBytes uint64
}

// Headers are the section headers of a trace file, read once without its cells: enough to size
// the file (CellBytes) and to find its AIRs (ScanAirs) before the cells are read (LoadTrace).
type Headers struct {
	Path     string
	Sections []tracefile.SectionHeader
}

// ReadHeaders reads the section headers of the trace file at path in one pass that seeks past
// the cells without reading them (so neither the values nor the checksums are checked: LoadTrace
// checks them when it reads them).
func ReadHeaders(path string) (*Headers, error) {
	r, err := tracefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	hs, err := sectionHeaders(r, false)
	if err != nil {
		return nil, err
	}
	return &Headers{Path: path, Sections: hs}, nil
}

// sectionHeaders lists the section headers of r; check reads the cells past each header to check
// their values and checksums, else it seeks past them.
func sectionHeaders(r *tracefile.Reader, check bool) ([]tracefile.SectionHeader, error) {
	var hs []tracefile.SectionHeader
	for {
		h, err := r.Next()
		if err == io.EOF {
			return hs, nil
		}
		if err == nil {
			if check {
				err = r.SkipCells()
			} else {
				err = r.SkipCellsUnchecked()
			}
		}
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
}

// TraceCellBytes is the size of all the cells of the sections (4 bytes a cell).
func (h *Headers) TraceCellBytes() uint64 {
	var n uint64
	for _, s := range h.Sections {
		n += 4 * uint64(s.Width) * uint64(s.Height)
	}
	return n
}

// CheckHeights refuses, as a BadInputError naming the section, a section taller than the
// stacked height of parameters p (source names them): no backend can prove it, and the device
// backend's memory estimate said so only in its own terms.
func (h *Headers) CheckHeights(p sp.SystemParams, source string) error {
	for i, s := range h.Sections {
		if s.Height > 1<<p.LogStackedHeight() {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d %q has height %d, above the stacked height 2^%d of %s: prove it with parameters of a larger stacked height",
				h.Path, i, s.Name, s.Height, p.LogStackedHeight(), source)}
		}
	}
	return nil
}

// ScanAirs resolves the AIR of every section from its header alone (name, height, width, public
// value count), without the cells: what keygen needs.
func (h *Headers) ScanAirs() ([]air.Air, []int, error) {
	if len(h.Sections) == 0 {
		return nil, nil, errors.New("no sections")
	}
	airs := make([]air.Air, len(h.Sections))
	heights := make([]int, len(h.Sections))
	for i, s := range h.Sections {
		a, err := examples.AirForHeight(s.Name, s.Height)
		if err != nil {
			return nil, nil, err
		}
		if s.Width != a.Width().MainWidth() || len(s.PublicValues) != a.NumPublicValues() {
			return nil, nil, fmt.Errorf("section %q does not fit AIR %s", s.Name, a.Name())
		}
		airs[i], heights[i] = a, s.Height
	}
	return airs, heights, nil
}

// LoadTrace reads a trace file and resolves each section's AIR; h are its headers read before
// (nil: they are read here). File problems and sections that do not fit their AIR are
// BadInputErrors; a file whose cells do not fit in the memory available is refused before they
// are read.
func LoadTrace(path string, h *Headers) (*Statement, error) { return loadTrace(path, h, nil) }

// loadTrace is LoadTrace with the cells read into alloc's buffers (nil: new ones).
func loadTrace(path string, h *Headers, alloc func(n int) []field.Fp) (*Statement, error) {
	secs, err := readSections(path, h, alloc)
	if err != nil {
		return nil, err
	}
	st := &Statement{}
	for i := range secs {
		s := &secs[i]
		bad := func(format string, args ...any) error {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d %q: %s", path, i, s.Name, fmt.Sprintf(format, args...))}
		}
		a, err := examples.AirForHeight(s.Name, s.Height)
		if err != nil {
			return nil, bad("%v", err)
		}
		if s.Width != a.Width().MainWidth() {
			return nil, bad("width %d, but AIR %s has %d main columns", s.Width, a.Name(), a.Width().MainWidth())
		}
		if len(s.PublicValues) != a.NumPublicValues() {
			return nil, bad("%d public values, but AIR %s has %d", len(s.PublicValues), a.Name(), a.NumPublicValues())
		}
		ti, err := air.SplitMain(a, s.Height, s.Data, s.PublicValues)
		if err != nil {
			return nil, bad("%v", err)
		}
		in := stark.AirProvingInput{Common: ti.CommonMain, Cached: ti.CachedMains, Public: ti.Public}
		st.Airs = append(st.Airs, a)
		st.Inputs = append(st.Inputs, in)
		st.Meta = append(st.Meta, stark.ProofMetaAir{Name: s.Name, Height: s.Height})
		st.Widths = append(st.Widths, s.Width)
		st.CellBytes += 4 * uint64(len(s.Data))
	}
	return st, nil
}

// readSections reads every section of a trace file (h: its headers, or nil), refusing a file
// whose cells do not fit in the memory available before reading them. File problems are
// BadInputErrors.
func readSections(path string, h *Headers, alloc func(n int) []field.Fp) ([]tracefile.Section, error) {
	if h == nil {
		h, _ = ReadHeaders(path) // a file whose headers cannot be read fails below, named
	}
	if h != nil {
		n := h.TraceCellBytes()
		if mem := MachineMemory(); mem.Available > 0 && n > mem.Available {
			return nil, fmt.Errorf("%s: not enough memory: its cells need %s, %s is available", path, sysinfo.Bytes(n), sysinfo.Bytes(mem.Available))
		}
	}
	secs, err := tracefile.ReadAllInto(path, alloc)
	if err != nil {
		var fe *tracefile.FormatError
		if errors.As(err, &fe) || errors.Is(err, os.ErrNotExist) {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(secs) == 0 {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: no sections", path)}
	}
	return secs, nil
}

// Heights are the sections' heights (0 for a key's AIRs left out of the proof).
func (st *Statement) Heights() []int {
	h := make([]int, len(st.Meta))
	for i, m := range st.Meta {
		h[i] = m.Height
	}
	return h
}

// ProofMeta is the metadata of a proof of st with parameters res: the AIRs and heights, and
// the key's pre_hash for a statement made against a proving key.
func (st *Statement) ProofMeta(res *Resolved) *stark.ProofMeta {
	if st.Key != nil {
		return &stark.ProofMeta{Params: "key", Preset: st.Key.Preset, AIRs: st.Meta, KeyPreHash: stark.KeyPreHashValues(st.Key.File.PreHash)}
	}
	meta := &stark.ProofMeta{Params: "preset", Preset: res.Preset, AIRs: st.Meta}
	if res.Preset == "" {
		meta.Params = "config"
	}
	return meta
}

// sameStatement says whether the AIRs and heights ScanAirs found are those of the statement
// LoadTrace read (the file may change between the two).
func sameStatement(airs []air.Air, heights []int, st *Statement) bool {
	if len(airs) != len(st.Airs) || len(heights) != len(st.Meta) {
		return false
	}
	for i, a := range airs {
		b := st.Airs[i]
		if a.Name() != b.Name() || a.Width().MainWidth() != b.Width().MainWidth() ||
			a.NumPublicValues() != b.NumPublicValues() || heights[i] != st.Meta[i].Height {
			return false
		}
	}
	return true
}

// TraceAirs lists the sections of a trace file (names and heights), checking the cells without
// keeping them; errors are BadInputErrors.
func TraceAirs(path string) ([]stark.ProofMetaAir, error) {
	r, err := tracefile.Open(path)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: err}
	}
	defer r.Close()
	hs, err := sectionHeaders(r, true)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	if len(hs) == 0 {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: no sections", path)}
	}
	out := make([]stark.ProofMetaAir, len(hs))
	for i, h := range hs {
		out[i] = stark.ProofMetaAir{Name: h.Name, Height: h.Height}
	}
	return out, nil
}
