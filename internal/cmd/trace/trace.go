// Package trace implements `metalprove trace`, which generates the trace of a built-in example
// (internal/examples) and writes it as a trace file (internal/tracefile), `metalprove trace info`,
// which decodes a trace file and describes its sections, and `metalprove trace check`, which
// checks every section against its AIR's constraints and the interactions of all sections for
// balance.
package trace

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/sysinfo"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// MaxPerms is the largest --perms the generator and the file format could take; what fits on
// the machine (PermsLimit) is lower.
const MaxPerms = examples.MaxPerms

// PermsLimit is the largest --perms this machine can generate and write: the trace must fit in
// the memory available (mem) and in one trace file section. The disk is checked per request.
func PermsLimit(mem sysinfo.Memory) int {
	budget := uint64(tracefile.DefaultMaxSectionBytes)
	if mem.Available > 0 {
		budget = min(budget, mem.Available)
	}
	return examples.PermsLimit(budget, 0)
}

// permsHelp states the --perms limit of this machine.
func permsHelp() string {
	mem := prover.MachineMemory()
	lim := PermsLimit(mem)
	if mem.Available == 0 {
		return fmt.Sprintf("keccakf: number of permutations, 1..%d (required)", lim)
	}
	return fmt.Sprintf("keccakf: number of permutations (required), 1..%d on this machine: the trace of %d (%s) is the largest that fits in the %s of memory available",
		lim, lim, sysinfo.Bytes(examples.KeccakfTraceBytes(lim)), sysinfo.Bytes(mem.Available))
}

// Options are the inputs of the trace command.
type Options struct {
	IO *cmdutil.IOStreams
	// Logger points at the factory's logger, which the root command configures after the
	// command line is parsed.
	Logger *zerolog.Logger
	// Context is cancelled to stop the command (nil: context.Background()); the root command
	// cancels it on SIGINT and SIGTERM. The partial output is then removed.
	Context context.Context
	// Progress shows the generation and the writing on a terminal.
	Progress *progress.Display
	// ConfigFile is the config file read (an output there would destroy it).
	ConfigFile string

	Example string
	Perms   int
	// Rows is the height of a test AIR example's trace (0: the example's default).
	Rows int
	Seed uint64
	// SeedSet reports that --seed was given (an error for examples without randomness).
	SeedSet bool
	Output  string
	JSON    bool
}

// GenerateReport is what `metalprove trace --json` prints.
type GenerateReport struct {
	Path     string         `json:"path"`
	Sections []SectionShape `json:"sections"`
	// Digest is SHA-256 of the cells row-major, each a little-endian u32 (hex), taken over the
	// sections in file order: for a file of one section, that section's digest (as trace info
	// prints it).
	Digest string `json:"sha256_digest"`
}

// SectionShape names a section and its dimensions.
type SectionShape struct {
	Name   string `json:"name"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Digest is the section's digest, as trace info prints it.
	Digest string `json:"sha256_digest"`
}

// exampleList describes the registered examples for the help text.
func exampleList() string {
	var sb strings.Builder
	for _, e := range examples.All() {
		flags := "no options"
		if len(e.Flags) > 0 {
			fs := make([]string, len(e.Flags))
			for i, f := range e.Flags {
				fs[i] = "--" + f
			}
			flags = strings.Join(fs, ", ")
		}
		fmt.Fprintf(&sb, "  %s (%s", e.Name, flags)
		if e.Takes(examples.FlagRows) {
			fmt.Fprintf(&sb, "; rows default %d, at most %d", e.DefaultRows, e.MaxRows)
		}
		fmt.Fprintf(&sb, "):\n      %s\n", e.Description)
	}
	return sb.String()
}

// NewCmdTrace returns the trace command with its info and check subcommands. runF, when not nil,
// replaces traceRun (for tests); the subcommands always run infoRun and checkRun.
func NewCmdTrace(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger}
	cmd := &cobra.Command{
		Use:   "trace --example NAME [--perms N | --rows H] [--seed S] -o FILE",
		Short: "Generate the trace of a built-in example and write it as a trace file",
		Long: `Generate the execution trace of a built-in example and write it to a trace file: one
section per AIR of the example, named after the AIR, with its public values. Examples:

` + exampleList() + `
keccakf takes --perms (required) and --seed; the test AIRs of spec B §8 take --rows (the trace
height, a power of two) where their height is free, and --seed where they draw random values. A
flag that does not apply to the chosen example is an error.

The file is written atomically: it appears at FILE only once complete; an error or an interrupt
(Ctrl-C, exit status 130) leaves nothing at FILE. Before generating anything the command checks
that FILE's directory exists and is writable, and that the trace fits in the memory available and
on the disk (--perms states this machine's limit), and refuses otherwise, naming what it needs. Nothing is printed on stdout unless --json is given; timings are
logged at level info on stderr. 'metalprove trace check FILE' checks the file against the AIRs.`,
		Example: `  metalprove trace --example keccakf --perms 1024 -o keccakf.trace
  metalprove trace --example keccakf --perms 2 --seed 7 -o k.trace --json
  metalprove trace --example fibonacci --rows 1024 -o fib.trace
  metalprove trace --example interaction-pair --rows 64 --seed 1 -o pair.trace
  metalprove trace info keccakf.trace
  metalprove trace check keccakf.trace`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Context = c.Context()
			opts.Progress = f.Progress
			opts.ConfigFile = f.Settings.ConfigFile
			opts.SeedSet = c.Flags().Changed("seed")
			if c.Flags().Changed("rows") && opts.Rows == 0 {
				return cmdutil.Usagef("--rows 0: must be a power of two")
			}
			if runF != nil {
				return runF(opts)
			}
			return traceRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Example, "example", "", "example to generate: "+strings.Join(examples.Names(), "|")+" (required)")
	fl.IntVar(&opts.Perms, "perms", 0, permsHelp())
	fl.IntVar(&opts.Rows, "rows", 0, "test AIRs: trace height, a power of two (default: the example's)")
	fl.Uint64Var(&opts.Seed, "seed", prover.DefaultSeed, "seed of the random inputs (keccakf, interaction-pair)")
	fl.StringVarP(&opts.Output, "output", "o", "", "trace file to write (required)")
	fl.BoolVar(&opts.JSON, "json", false, "print a JSON object {path, sections, sha256_digest} on stdout")
	cmd.AddCommand(NewCmdInfo(f, nil), NewCmdCheck(f, nil))
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// validate checks the options before anything is generated or written, and returns the example.
func (opts *Options) validate() (*examples.Example, error) {
	if opts.Example == "" {
		return nil, cmdutil.Usagef("--example is required (one of %s)", strings.Join(examples.Names(), ", "))
	}
	ex, err := examples.Lookup(opts.Example)
	if err != nil {
		return nil, cmdutil.Usagef("--example %q: unknown example; known: %s", opts.Example, strings.Join(examples.Names(), ", "))
	}
	if err := ex.Validate(opts.exampleOptions()); err != nil {
		return nil, &cmdutil.UsageError{Err: err}
	}
	if opts.Output == "" {
		return nil, cmdutil.Usagef("-o/--output is required")
	}
	if ex.Name == "keccakf" {
		height := keccakf.Height(opts.Perms)
		if b := int64(keccakf.NumCols) * int64(height) * 4; b > tracefile.DefaultMaxSectionBytes {
			return nil, cmdutil.Usagef("--perms %d: the trace (%d×%d, %d bytes) exceeds the trace file limit of %d bytes per section (at most %d permutations)",
				opts.Perms, keccakf.NumCols, height, b, tracefile.DefaultMaxSectionBytes, maxPermsForFile())
		}
	}
	if err := cmdutil.CheckOutput("-o", opts.Output, opts.ConfigFile); err != nil {
		return nil, err
	}
	if ex.Name == "keccakf" {
		if err := prover.CheckKeccakfFits(opts.Perms, 1, filepath.Dir(opts.Output)); err != nil {
			return nil, err
		}
	}
	return ex, nil
}

func (opts *Options) exampleOptions() examples.Options {
	return examples.Options{Perms: opts.Perms, Rows: opts.Rows, Seed: opts.Seed, SeedSet: opts.SeedSet}
}

// maxPermsForFile is the largest permutation count whose keccakf trace fits in one section.
func maxPermsForFile() int {
	h := 1
	for int64(keccakf.NumCols)*int64(2*h)*4 <= tracefile.DefaultMaxSectionBytes {
		h *= 2
	}
	return h / keccakf.NumRounds
}

var errInterrupted = fmt.Errorf("%w; no file written", cmdutil.ErrInterrupted)

func traceRun(opts *Options) (err error) {
	ex, err := opts.validate()
	if err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	log := opts.Logger

	// Create the (temporary) file first, so that a bad path fails before the generation.
	w, err := tracefile.Create(opts.Output)
	if err != nil {
		return cmdutil.OutputError("-o", opts.Output, err)
	}
	defer w.Abort() // removes the temporary file unless Commit succeeded

	ev := log.Info().Str("example", ex.Name)
	switch {
	case ex.Takes(examples.FlagPerms):
		ev = ev.Int("perms", opts.Perms)
	case ex.Takes(examples.FlagRows):
		rows := opts.Rows
		if rows == 0 {
			rows = ex.DefaultRows
		}
		ev = ev.Int("rows", rows)
	}
	if ex.Takes(examples.FlagSeed) {
		ev = ev.Uint64("seed", opts.Seed)
	}
	ev.Msg("generating trace")
	if ctx.Err() != nil {
		return errInterrupted
	}

	start := time.Now()
	var secs []examples.Section
	var genErr error
	done := make(chan struct{})
	task := opts.Progress.Start("trace "+ex.Name, 0, "")
	task.Step("generating")
	go func() {
		defer close(done)
		secs, genErr = ex.Generate(opts.exampleOptions())
	}()
	select {
	case <-done:
	case <-ctx.Done():
		task.Done()
		return errInterrupted
	}
	task.Done()
	if genErr != nil {
		return genErr
	}
	var cells int64
	for _, s := range secs {
		cells += int64(len(s.Cells))
	}
	log.Info().Int("sections", len(secs)).Int64("bytes", 4*cells).
		Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("trace generated")

	start = time.Now()
	columns := 0
	for _, s := range secs {
		columns += s.Width()
	}
	task = opts.Progress.Start("trace "+ex.Name+": writing "+opts.Output, int64(columns), "columns")
	defer task.Done()
	for _, s := range secs {
		h := tracefile.SectionHeader{Name: s.Name, Width: s.Width(), Height: s.Height, PublicValues: s.Public}
		if err := w.BeginSection(h); err != nil {
			return err
		}
		for c := range h.Width {
			if ctx.Err() != nil {
				return errInterrupted
			}
			if err := w.WriteColumn(s.Cells[c*h.Height : (c+1)*h.Height]); err != nil {
				return err
			}
			task.Add(1)
		}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	task.Done()
	log.Info().Str("path", opts.Output).Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("trace file written")

	if !opts.JSON {
		return nil
	}
	rep := GenerateReport{Path: opts.Output, Sections: make([]SectionShape, len(secs))}
	all := sha256.New()
	for i, s := range secs {
		readCol := func(c, r0 int, dst []byte) error {
			for t := range len(dst) / 4 {
				binary.LittleEndian.PutUint32(dst[4*t:], uint32(s.Cells[c*s.Height+r0+t]))
			}
			return nil
		}
		d, _ := rowMajorDigest(s.Width(), s.Height, readCol)
		_ = rowMajorHash(all, s.Width(), s.Height, readCol)
		rep.Sections[i] = SectionShape{Name: s.Name, Width: s.Width(), Height: s.Height, Digest: hex.EncodeToString(d[:])}
	}
	rep.Digest = hex.EncodeToString(all.Sum(nil))
	enc := json.NewEncoder(opts.IO.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
