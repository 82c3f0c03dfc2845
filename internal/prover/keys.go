package prover

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/keyfile"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// Proving keys: made from built-in AIRs or imported from OpenVM's verifying key (keygen), read
// back (prove --key, verify --key), and the statement a trace file makes against one.

// Key is a proving-key file read and checked: its AIRs (air.KeyedAir, named, with their
// preprocessed traces) and the security of its parameters.
type Key struct {
	Path string
	File *keyfile.File
	Airs []air.Air
	// Preset names the parameters when they are a preset's ("" otherwise); SecurityBits is that
	// preset's target, else the soundness calculated for the key's AIRs.
	Preset       string
	SecurityBits int
}

// Params are the key's parameters.
func (k *Key) Params() sp.SystemParams { return k.File.MVK.Params }

// VerifyingKey is the key's verifying key (its constraint programs compiled when needed).
func (k *Key) VerifyingKey() *stark.VerifyingKey {
	return &stark.VerifyingKey{MVK: k.File.MVK, PreHash: k.File.PreHash}
}

// ParamsSource describes the key's parameters for reports.
func (k *Key) ParamsSource() string {
	if k.Preset != "" {
		return "preset " + k.Preset + " (from " + k.Path + ")"
	}
	return "parameters of " + k.Path
}

// Resolved are the key's parameters as the commands run with them.
func (k *Key) Resolved() *Resolved {
	return &Resolved{Params: k.Params(), Preset: k.Preset, Source: k.ParamsSource(), SecurityBits: k.SecurityBits}
}

// ReadKey reads a proving-key file. A missing, malformed or altered file is a BadInputError;
// parameters with a security target below 100 bits without allowInsecure a UsageError.
func ReadKey(path string, allowInsecure bool) (*Key, error) {
	f, err := keyfile.ReadWith(kernels.HostAbsorber, path)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("--key %w", err)}
	}
	return NewKey(path, f, allowInsecure)
}

func NewKey(path string, f *keyfile.File, allowInsecure bool) (*Key, error) {
	airs, err := f.Airs()
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	for i, vk := range f.MVK.PerAir {
		// The batch constraint sumcheck takes every present trace's common main as its first
		// opening part; traces with cached mains only are not supported (docs/SPEC-NOTES.md).
		if vk.Width.CommonMain == 0 {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: AIR %d (%s) has no common main columns (cached mains %v only): metalprove cannot prove such an AIR yet", path, i, f.Names[i], vk.Width.CachedMains)}
		}
	}
	k := &Key{Path: path, File: f, Airs: airs}
	if k.Preset, k.SecurityBits, err = KeySecurity(f.MVK); err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	if k.SecurityBits < sp.SecurityBitsTarget && !allowInsecure {
		return nil, cmdutil.Usagef("%s: its parameters have a %d-bit security target (INSECURE); pass --allow-insecure to use them", path, k.SecurityBits)
	}
	return k, nil
}

// KeySecurity names the preset whose parameters the key has, with its security target; for
// other parameters it calculates the soundness (spec A §4.6) with the key's own AIRs as the
// bounds: their constraint and interaction counts and columns, at the largest trace height the
// parameters allow.
func KeySecurity(mvk *air.MultiVerifyingKey0) (preset string, bits int, err error) {
	p := mvk.Params
	mine := p.AppendPostcard(nil)
	for _, name := range sp.PresetNames() {
		q, info, err := sp.Preset(name, p.LogStackedHeight())
		if err == nil && bytes.Equal(q.AppendPostcard(nil), mine) {
			return name, info.SecurityBits, nil
		}
	}
	b := sp.Bounds{Name: "the key's AIRs", NumAirs: len(mvk.PerAir), MaxLogTraceHeight: p.LogStackedHeight(), MaxConstraintsPerAir: 1}
	for _, vk := range mvk.PerAir {
		b.MaxConstraintsPerAir = max(b.MaxConstraintsPerAir, len(vk.DAG.ConstraintIdx))
		b.MaxInteractionsPerAir = max(b.MaxInteractionsPerAir, len(vk.DAG.Interactions))
		b.NumTraceColumns += vk.Width.Preprocessed + vk.Width.MainWidth()
	}
	s, err := sp.Calculate(p, b.Inputs(p))
	if err != nil {
		return "", 0, fmt.Errorf("soundness of the key's parameters: %w", err)
	}
	return "", int(math.Floor(float64(s.TotalBits))), nil
}

// KeyFileOf is the proving-key file of a key made by this program's keygen (stark.Keygen): its
// verifying key as OpenVM writes it, the AIRs' names and preprocessed traces.
func KeyFileOf(pk *stark.ProvingKey, note keyfile.Note) (*keyfile.File, error) {
	mvk, pre, err := air.DecodeMultiVerifyingKeyWith(kernels.HostAbsorber, pk.VK.AppendPostcard(nil))
	if err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	f := &keyfile.File{MVK: mvk, PreHash: pre, Note: note}
	for _, a := range pk.Airs {
		f.Names = append(f.Names, a.Name())
		var m *air.Matrix
		if a.Width().HasPreprocessed() {
			mm := a.(air.PreprocessedAir).PreprocessedTrace() // stark.Keygen checked it
			m = &mm
		}
		f.Preprocessed = append(f.Preprocessed, m)
	}
	return f, nil
}

// KeygenBuiltin makes the proving-key file of built-in AIRs under parameters p (preprocessed
// traces committed with the CPU reference backend).
func KeygenBuiltin(p sp.SystemParams, airs []air.Air, note keyfile.Note) (*keyfile.File, error) {
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: err}
	}
	defer pk.Free()
	return KeyFileOf(pk, note)
}

// ImportOpenVMKey makes the proving-key file of OpenVM's verifying key at vkPath (postcard of
// MultiStarkVerifyingKey). preprocessedPath, when set, is a trace file with one section per AIR
// that has a preprocessed trace, in key order; each trace's commitment must be the key's. names
// (nil: a section's name for AIRs with a preprocessed trace, else "air<i>") name the AIRs.
func ImportOpenVMKey(vkPath, preprocessedPath string, names []string, note keyfile.Note) (*keyfile.File, error) {
	b, err := os.ReadFile(vkPath)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("--openvm-vk %s: %w", vkPath, pathError(err))}
	}
	mvk, pre, err := air.DecodeMultiVerifyingKeyWith(kernels.HostAbsorber, b)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", vkPath, err)}
	}
	n := len(mvk.PerAir)
	bad := func(format string, args ...any) error {
		return &cmdutil.BadInputError{Err: fmt.Errorf(format, args...)}
	}
	if names != nil && len(names) != n {
		return nil, cmdutil.Usagef("--names lists %d names, the key %s has %d AIRs", len(names), vkPath, n)
	}
	f := &keyfile.File{MVK: mvk, PreHash: pre, Names: make([]string, n), Preprocessed: make([]*air.Matrix, n), Note: note}
	var withPre []int
	for i, vk := range mvk.PerAir {
		if vk.Preprocessed != nil {
			withPre = append(withPre, i)
		}
	}
	switch {
	case preprocessedPath == "" && len(withPre) > 0:
		return nil, cmdutil.Usagef("the key %s has %d AIRs with a preprocessed trace (AIR %d first): give them with --preprocessed FILE", vkPath, len(withPre), withPre[0])
	case preprocessedPath != "":
		secs, err := tracefile.ReadAll(preprocessedPath)
		if err != nil {
			return nil, bad("--preprocessed %s: %w", preprocessedPath, pathError(err))
		}
		if len(secs) != len(withPre) {
			return nil, bad("--preprocessed %s has %d sections, the key has %d AIRs with a preprocessed trace", preprocessedPath, len(secs), len(withPre))
		}
		for j, i := range withPre {
			s := &secs[j]
			vk := mvk.PerAir[i]
			h := 1 << (vk.Preprocessed.HypercubeDim + mvk.Params.LSkip)
			if s.Width != vk.Width.Preprocessed || s.Height != h || len(s.PublicValues) != 0 {
				return nil, bad("--preprocessed %s: section %d %q (AIR %d): %d×%d with %d public values, the key's preprocessed trace is %d×%d with none",
					preprocessedPath, j, s.Name, i, s.Height, s.Width, len(s.PublicValues), h, vk.Width.Preprocessed)
			}
			f.Preprocessed[i] = &air.Matrix{Width: s.Width, Height: s.Height, Values: s.Data}
			f.Names[i] = s.Name
		}
	}
	for i := range f.Names {
		switch {
		case names != nil:
			f.Names[i] = names[i]
		case f.Names[i] == "":
			f.Names[i] = fmt.Sprintf("air%d", i)
		}
		if err := keyfile.CheckName(i, f.Names[i]); err != nil {
			return nil, cmdutil.Usagef("keyfile: %v", err)
		}
	}
	// Each preprocessed commitment must be the key's: commit them as a prover will.
	airs, err := f.Airs()
	if err != nil {
		return nil, bad("%v", err)
	}
	pk, err := stark.KeygenFromKey(mvk, pre, airs, cpuref.New())
	if err != nil {
		return nil, bad("%s: %w", vkPath, err)
	}
	pk.Free()
	return f, nil
}

// ParseNames parses --names: comma-separated, none empty.
func ParseNames(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	names := strings.Split(s, ",")
	if slices.Contains(names, "") {
		return nil, cmdutil.Usagef("--names %q: an empty name", s)
	}
	return names, nil
}

// ParseAirs parses --airs: AIR indices of a key of n AIRs, ascending, no repeats.
func ParseAirs(s string, n int) ([]int, error) {
	if s == "" {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		var i int
		if _, err := fmt.Sscanf(f, "%d", &i); err != nil || fmt.Sprint(i) != f {
			return nil, cmdutil.Usagef("--airs %q: %q is not an AIR index", s, f)
		}
		if i < 0 || i >= n {
			return nil, cmdutil.Usagef("--airs %q: AIR %d, the key has AIRs 0 to %d", s, i, n-1)
		}
		if len(out) > 0 && i <= out[len(out)-1] {
			return nil, cmdutil.Usagef("--airs %q: indices must be ascending without repeats", s)
		}
		out = append(out, i)
	}
	return out, nil
}

// CheckKeySections checks the section headers of a trace file against the AIRs of k it proves
// (present, ascending): one section each, in that order, with the AIR's name, main width (cached
// mains then common main), public value count and a height within the stacked height (the
// preprocessed trace's height where the AIR has one); AIRs of the key marked required must be
// present. Every mismatch is a BadInputError naming the AIR index, its name and the field.
func CheckKeySections(k *Key, trace string, hs []tracefile.SectionHeader, present []int) error {
	bad := func(format string, args ...any) error {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %s", trace, fmt.Sprintf(format, args...))}
	}
	mvk := k.File.MVK
	for i, vk := range mvk.PerAir {
		if vk.IsRequired && !slices.Contains(present, i) {
			return bad("AIR %d (%s) is required by the key %s but has no section (--airs)", i, k.File.Names[i], k.Path)
		}
	}
	if len(hs) != len(present) {
		return bad("%d sections for the %d AIRs proved (AIRs %v of the key %s, in key order)", len(hs), len(present), present, k.Path)
	}
	p := mvk.Params
	for j, i := range present {
		h, vk, name := hs[j], mvk.PerAir[i], k.File.Names[i]
		switch {
		case h.Name != name:
			return bad("section %d is named %q, AIR %d of the key is %q", j, h.Name, i, name)
		case h.Width != vk.Width.MainWidth():
			return bad("AIR %d (%s): width %d, the key's main trace has %d columns (cached %v, common %d)", i, name, h.Width, vk.Width.MainWidth(), vk.Width.CachedMains, vk.Width.CommonMain)
		case len(h.PublicValues) != vk.NumPublicValues:
			return bad("AIR %d (%s): %d public values, the key has %d", i, name, len(h.PublicValues), vk.NumPublicValues)
		}
		logH, _ := field.Log2(h.Height)
		if logH > p.LogStackedHeight() {
			return bad("AIR %d (%s): height %d exceeds the stacked height 2^%d", i, name, h.Height, p.LogStackedHeight())
		}
		if pre := vk.Preprocessed; pre != nil && logH != pre.HypercubeDim+p.LSkip {
			return bad("AIR %d (%s): height %d, its preprocessed trace has height %d", i, name, h.Height, 1<<(pre.HypercubeDim+p.LSkip))
		}
	}
	return nil
}

// LoadKeyTrace reads a trace file proving the AIRs present (ascending indices) of k: the
// headers h (nil: read here) are checked first (CheckKeySections), then the cells are read. Every
// AIR of the key is in the statement; those left out have a zero input and height 0.
func LoadKeyTrace(path string, h *Headers, k *Key, present []int) (*Statement, error) {
	return loadKeyTrace(path, h, k, present, nil)
}

// loadKeyTrace is LoadKeyTrace with the cells read into alloc's buffers (nil: new ones).
func loadKeyTrace(path string, h *Headers, k *Key, present []int, alloc func(n int) []field.Fp) (*Statement, error) {
	if h != nil {
		if err := CheckKeySections(k, path, h.Sections, present); err != nil {
			return nil, err
		}
	}
	secs, err := readSections(path, h, alloc)
	if err != nil {
		return nil, err
	}
	hs := make([]tracefile.SectionHeader, len(secs))
	for i := range secs {
		hs[i] = secs[i].SectionHeader
	}
	if err := CheckKeySections(k, path, hs, present); err != nil { // the file may have changed
		return nil, err
	}
	n := len(k.Airs)
	st := &Statement{Airs: k.Airs, Inputs: make([]stark.AirProvingInput, n), Meta: make([]stark.ProofMetaAir, n), Widths: make([]int, n), Key: k}
	for i, name := range k.File.Names {
		st.Meta[i].Name = name
		st.Widths[i] = k.Airs[i].Width().MainWidth()
	}
	for j, i := range present {
		s := &secs[j]
		ti, err := air.SplitMain(k.Airs[i], s.Height, s.Data, s.PublicValues)
		if err != nil {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: AIR %d (%s): %w", path, i, s.Name, err)}
		}
		st.Inputs[i] = stark.AirProvingInput{Common: ti.CommonMain, Cached: ti.CachedMains, Public: ti.Public}
		st.Meta[i].Height = s.Height
		st.CellBytes += 4 * uint64(len(s.Data))
	}
	return st, nil
}

// CheckProofKey rejects a proof file whose metadata records another key than k (or none).
func CheckProofKey(k *Key, proofPath string, meta *stark.ProofMeta) error {
	if meta == nil {
		return nil
	}
	want := stark.KeyPreHashValues(k.File.PreHash)
	if meta.KeyPreHash == nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s was not made with a proving key (its AIRs are built-in: verify it without --key)", proofPath)}
	}
	if !slices.Equal(meta.KeyPreHash, want) {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s was made with another key: its key's pre_hash is %v, %s has %v", proofPath, meta.KeyPreHash, k.Path, want)}
	}
	return nil
}

// pathError drops the path of an *fs.PathError (the message names the file already).
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ErrNeedsKey is returned for a proof file made with a proving key when none is given.
var ErrNeedsKey = errors.New("the proof was made with a proving key")

// BuiltinAirs resolves the built-in AIRs a trace file's sections name (with their heights:
// some AIRs' preprocessed traces depend on it). Errors are BadInputErrors.
func BuiltinAirs(trace string) ([]air.Air, []stark.ProofMetaAir, error) {
	metas, err := TraceAirs(trace)
	if err != nil {
		return nil, nil, err
	}
	airs := make([]air.Air, len(metas))
	for i, m := range metas {
		if airs[i], err = examples.AirForHeight(m.Name, m.Height); err != nil {
			return nil, nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d: %w", trace, i, err)}
		}
	}
	return airs, metas, nil
}

// PreprocessedSections are the preprocessed traces of a key file as trace-file sections, one per
// AIR that has one, in key order: what `keygen --openvm-vk --preprocessed` reads.
func PreprocessedSections(f *keyfile.File) []tracefile.Section {
	var out []tracefile.Section
	for i, m := range f.Preprocessed {
		if m != nil {
			out = append(out, tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: f.Names[i], Width: m.Width, Height: m.Height}, Data: m.Values})
		}
	}
	return out
}

// PreHashString prints a pre_hash as its canonical values.
func PreHashString(d stark.Digest) string {
	return fmt.Sprint(stark.KeyPreHashValues(d))
}
