// Package examples is the registry of the named example inputs metalprove can generate: the
// Keccak-f permutation trace ("keccakf") and the test AIRs of spec B §8 (package testair). Each
// example generates one or more sections (an AIR, its trace and its public values), written by
// `metalprove trace --example NAME` into one trace file. AirFor maps a section name back to its
// AIR, for `metalprove trace check`.
package examples

import (
	"fmt"
	"slices"
	"strings"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
)

// Options are the inputs of an example's generator. Only the options named by Example.Flags
// apply; Validate rejects the others when they are non-zero.
type Options struct {
	// Perms is the number of Keccak-f permutations (keccakf; required there).
	Perms int
	// Rows is the trace height, a power of two (test AIRs); 0 means the example's DefaultRows.
	Rows int
	// Seed seeds the random inputs (keccakf, interaction-pair).
	Seed uint64
	// SeedSet reports that Seed was chosen by the caller (an error for examples without
	// randomness); generators use Seed either way.
	SeedSet bool
}

// Flag names of Options, as Example.Flags lists them.
const (
	FlagPerms = "perms"
	FlagRows  = "rows"
	FlagSeed  = "seed"
)

// Section is one AIR's trace in an example: the section name is the AIR's name.
type Section struct {
	Name   string
	Air    air.Air
	Height int
	// Cells is the main trace column-major, Air.Width().MainWidth() columns (cached parts in DAG
	// order, then the common main): cell (column c, row r) at Cells[c*Height+r]. The preprocessed
	// trace, if any, is the AIR's own and is not included.
	Cells  []field.Fp
	Public []field.Fp
}

// Width is the number of columns of Cells.
func (s Section) Width() int { return s.Air.Width().MainWidth() }

// TraceInput returns the section as the input of air.CheckConstraints (sharing Cells).
func (s Section) TraceInput() (air.TraceInput, error) {
	return testair.SplitMain(s.Air, s.Height, s.Cells, s.Public)
}

// Example is one named example.
type Example struct {
	Name, Description string
	// Flags are the options that apply (FlagPerms, FlagRows, FlagSeed).
	Flags []string
	// DefaultRows and MaxRows bound Options.Rows when FlagRows applies.
	DefaultRows, MaxRows int
	// AIRs are the names of the AIRs of the generated sections, in order (for the default
	// options; the list depends on no option).
	AIRs []string
	// Generate validates opts and returns the sections.
	Generate func(opts Options) ([]Section, error)
}

// Takes reports whether flag applies to the example.
func (e *Example) Takes(flag string) bool { return slices.Contains(e.Flags, flag) }

// MaxPerms is the largest Options.Perms the keccakf generator accepts (the trace file format's
// bound is lower: a section holds at most tracefile.DefaultMaxSectionBytes). What fits on a
// machine is lower still: see PermsLimit.
const MaxPerms = 1 << 22

// KeccakfTraceBytes is the size of the keccakf trace of perms permutations in memory (and,
// give or take a header, on disk): 2633 columns × next_power_of_two(24·perms) rows × 4 bytes.
func KeccakfTraceBytes(perms int) uint64 {
	return uint64(keccakf.NumCols) * uint64(keccakf.Height(perms)) * 4
}

// PermsLimit is the largest keccakf permutation count whose trace takes at most budget bytes,
// and at most maxHeight rows when maxHeight > 0 (a prover's stacked height); 0 when not even
// one permutation fits. The trace height is a power of two, so the limit is height/24 for the
// largest height that fits.
func PermsLimit(budget uint64, maxHeight int) int {
	h := keccakf.Height(1)
	if KeccakfTraceBytes(1) > budget {
		return 0
	}
	for 2*h/keccakf.NumRounds <= MaxPerms && uint64(keccakf.NumCols)*uint64(2*h)*4 <= budget && (maxHeight <= 0 || 2*h <= maxHeight) {
		h *= 2
	}
	return min(h/keccakf.NumRounds, MaxPerms)
}

// Validate checks that opts only sets options that apply and that they are in range. Messages
// name the command-line flag (--rows, --perms, --seed).
func (e *Example) Validate(opts Options) error {
	notFor := func(flag string) error {
		takes := make([]string, len(e.Flags))
		for i, f := range e.Flags {
			takes[i] = "--" + f
		}
		what := "takes no options"
		if len(takes) > 0 {
			what = "takes " + strings.Join(takes, ", ")
		}
		return fmt.Errorf("--%s does not apply to example %s (it %s)", flag, e.Name, what)
	}
	if opts.Perms != 0 && !e.Takes(FlagPerms) {
		return notFor(FlagPerms)
	}
	if opts.Rows != 0 && !e.Takes(FlagRows) {
		return notFor(FlagRows)
	}
	if opts.SeedSet && !e.Takes(FlagSeed) {
		return notFor(FlagSeed)
	}
	if e.Takes(FlagPerms) && (opts.Perms < 1 || opts.Perms > MaxPerms) {
		return fmt.Errorf("--perms %d: must be in [1, %d]", opts.Perms, MaxPerms)
	}
	if e.Takes(FlagRows) && opts.Rows != 0 {
		if opts.Rows < 1 || opts.Rows > e.MaxRows || opts.Rows&(opts.Rows-1) != 0 {
			return fmt.Errorf("--rows %d: must be a power of two in [1, %d]", opts.Rows, e.MaxRows)
		}
	}
	return nil
}

// rows is opts.Rows or the default.
func (e *Example) rows(opts Options) int {
	if opts.Rows == 0 {
		return e.DefaultRows
	}
	return opts.Rows
}

// fromInstances turns test-AIR instances into sections.
func fromInstances(ins []testair.Instance) []Section {
	out := make([]Section, len(ins))
	for i, in := range ins {
		out[i] = Section{Name: in.Air.Name(), Air: in.Air, Height: in.Height(), Cells: in.MainCells(), Public: in.Trace.Public}
	}
	return out
}

// testExample registers a test-AIR example whose sections gen builds from (rows, seed).
func testExample(name, desc string, flags []string, defRows, maxRows int, gen func(rows int, seed uint64) []testair.Instance) *Example {
	e := &Example{Name: name, Description: desc, Flags: flags, DefaultRows: defRows, MaxRows: maxRows}
	e.Generate = func(opts Options) ([]Section, error) {
		if err := e.Validate(opts); err != nil {
			return nil, err
		}
		return fromInstances(gen(e.rows(opts), opts.Seed)), nil
	}
	for _, in := range gen(max(defRows, 1), 0) {
		e.AIRs = append(e.AIRs, in.Air.Name())
	}
	return e
}

var registry = []*Example{
	{
		Name: "keccakf",
		Description: "N Keccak-f[1600] permutations (--perms N) of inputs drawn as OpenVM's keccakf example " +
			"(StdRng::seed_from_u64(seed)), Plonky3 keccak-air layout: 2633 columns, height next_power_of_two(24·N)",
		Flags: []string{FlagPerms, FlagSeed},
		AIRs:  []string{keccakf.Air{}.Name()},
	},
	testExample("fibonacci", "FibonacciAir: rows (0,1), (1,1), (1,2), …, public values [0, 1, last right]",
		[]string{FlagRows}, 16, 1<<20, func(rows int, _ uint64) []testair.Instance {
			return []testair.Instance{testair.Fibonacci(0, 1, rows)}
		}),
	testExample("fibonacci-selector", "FibonacciSelectorAir: a preprocessed selector column (alternating), Fibonacci advancing after selected rows, public values [7, 3, last right]",
		[]string{FlagRows}, 16, 1<<20, func(rows int, _ uint64) []testair.Instance {
			return []testair.Instance{testair.FibonacciSelector(7, 3, rows)}
		}),
	testExample("preprocessed-cached", "PreprocessedCachedAir with 2 cached parts: a preprocessed selector, rotation on it, cached main columns",
		[]string{FlagRows}, 16, 1<<20, func(rows int, _ uint64) []testair.Instance {
			return []testair.Instance{testair.PreprocessedCached(2, rows)}
		}),
	testExample("interaction-pair", "a DummyInteractionAir sender (--rows rows) and receiver (2·rows rows) on bus 0, random counts (multiplicities) and fields from --seed, balanced",
		[]string{FlagRows, FlagSeed}, 4, 1<<20, func(rows int, seed uint64) []testair.Instance {
			return testair.InteractionPair(rows, seed)
		}),
	testExample("short-traces", "traces shorter than 2^l_skip (l_skip = 2): Fibonacci of heights 1 and 2, FibonacciSelector of height 2, an interaction sender of 1 row and receiver of 2 rows",
		nil, 0, 0, func(int, uint64) []testair.Instance { return testair.ShortTraces() }),
	testExample("mixture", "MixtureFixture::standard: Fibonacci, InteractionsFixture11 (heights 4, 8), its cached variant, FibonacciSelector and six SelfInteractionAirs (widths 4..100, bus 5) of height --rows",
		[]string{FlagRows}, 16, 1<<16, func(rows int, _ uint64) []testair.Instance { return testair.Mixture(rows) }),
}

func init() {
	k := registry[0]
	k.Generate = func(opts Options) ([]Section, error) {
		if err := k.Validate(opts); err != nil {
			return nil, err
		}
		height, cols := keccakf.GenerateTrace(keccakf.RandomInputs(opts.Seed, opts.Perms))
		a := keccakf.Air{}
		return []Section{{Name: a.Name(), Air: a, Height: height, Cells: cols}}, nil
	}
}

// All returns the registered examples, in registry order.
func All() []*Example { return slices.Clone(registry) }

// Names returns the names of the registered examples, in registry order.
func Names() []string {
	out := make([]string, len(registry))
	for i, e := range registry {
		out[i] = e.Name
	}
	return out
}

// Lookup returns the example called name; the error lists the known names.
func Lookup(name string) (*Example, error) {
	for _, e := range registry {
		if e.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("unknown example %q; known: %s", name, strings.Join(Names(), ", "))
}

// AirFor returns the AIR of a trace file section by the section's name: "keccakf", or a test
// AIR's name (testair.Parse). Test AIRs whose preprocessed trace depends on the height come
// without one (testair.HeightBound); AirForHeight resolves them.
func AirFor(sectionName string) (air.Air, error) {
	if sectionName == (keccakf.Air{}).Name() {
		return keccakf.Air{}, nil
	}
	if a, err := testair.Parse(sectionName); err == nil {
		return a, nil
	}
	return nil, fmt.Errorf("no AIR is named %q (known: keccakf and the test AIRs, e.g. fibonacci, fibonacci-selector, dummy-interaction-send-w1-bus0, self-interaction-w8-bus5, preprocessed-cached-k2, sum-w3)", sectionName)
}

// AirForHeight is AirFor for a section of the given height: the AIR complete with its
// preprocessed trace.
func AirForHeight(sectionName string, height int) (air.Air, error) {
	a, err := AirFor(sectionName)
	if err != nil {
		return nil, err
	}
	if hb, ok := a.(testair.HeightBound); ok {
		a = hb.WithHeight(height)
	}
	return a, nil
}
