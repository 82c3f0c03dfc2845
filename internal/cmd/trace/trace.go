// Package trace implements `metalprove trace`, which generates the trace of a built-in example
// and writes it as a trace file (internal/tracefile), and `metalprove trace info`, which decodes
// a trace file and describes its sections.
package trace

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// Examples are the names accepted by --example.
var Examples = []string{"keccakf"}

const (
	// DefaultSeed is the seed of OpenVM's keccakf example (StdRng::seed_from_u64(42)).
	DefaultSeed = 42
	// MaxPerms is the largest --perms accepted.
	MaxPerms = 1 << 22
)

// Options are the inputs of the trace command.
type Options struct {
	IO *cmdutil.IOStreams
	// Logger points at the factory's logger, which the root command configures after the
	// command line is parsed.
	Logger *zerolog.Logger
	// Context is cancelled to stop the command (nil: context.Background()); SIGINT and SIGTERM
	// also stop it, removing the partial output.
	Context context.Context

	Example string
	Perms   int
	Seed    uint64
	Output  string
	JSON    bool
}

// GenerateReport is what `metalprove trace --json` prints.
type GenerateReport struct {
	Path     string         `json:"path"`
	Sections []SectionShape `json:"sections"`
	// Digest is SHA-256 of the cells row-major, each a little-endian u32 (hex).
	Digest string `json:"sha256_digest"`
}

// SectionShape names a section and its dimensions.
type SectionShape struct {
	Name   string `json:"name"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// NewCmdTrace returns the trace command with its info subcommand. runF, when not nil, replaces
// traceRun (for tests); the info subcommand always runs infoRun.
func NewCmdTrace(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger}
	cmd := &cobra.Command{
		Use:   "trace --example NAME --perms N -o FILE",
		Short: "Generate the trace of a built-in example and write it as a trace file",
		Long: `Generate the execution trace of a built-in example and write it to a trace file (one
section named after the example, no public values). Examples: ` + strings.Join(Examples, ", ") + `.

keccakf: N Keccak-f[1600] permutations of inputs drawn as in OpenVM's keccakf example (Rust
StdRng::seed_from_u64(seed), N draws of [u64; 25]), laid out as Plonky3 keccak-air: 2633
columns, height next_power_of_two(24·N).

The file is written atomically: it appears at FILE only once complete; an error or an interrupt
(Ctrl-C) leaves nothing at FILE. Nothing is printed on stdout unless --json is given; timings are
logged at level info on stderr.`,
		Example: `  metalprove trace --example keccakf --perms 1024 -o keccakf.trace
  metalprove trace --example keccakf --perms 2 --seed 7 -o k.trace --json
  metalprove trace info keccakf.trace`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts)
			}
			return traceRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Example, "example", "", "example to generate: "+strings.Join(Examples, "|")+" (required)")
	fl.IntVar(&opts.Perms, "perms", 0, fmt.Sprintf("number of permutations, 1..%d (required)", MaxPerms))
	fl.Uint64Var(&opts.Seed, "seed", DefaultSeed, "seed of the random inputs")
	fl.StringVarP(&opts.Output, "output", "o", "", "trace file to write (required)")
	fl.BoolVar(&opts.JSON, "json", false, "print a JSON object {path, sections, sha256_digest} on stdout")
	cmd.AddCommand(NewCmdInfo(f, nil))
	return cmd
}

// validate checks the options before anything is generated or written.
func (opts *Options) validate() error {
	switch {
	case opts.Example == "":
		return cmdutil.Usagef("--example is required (one of %s)", strings.Join(Examples, ", "))
	case opts.Example != "keccakf":
		return cmdutil.Usagef("--example %q: unknown example; known: %s", opts.Example, strings.Join(Examples, ", "))
	case opts.Perms < 1 || opts.Perms > MaxPerms:
		return cmdutil.Usagef("--perms %d: must be in [1, %d]", opts.Perms, MaxPerms)
	case opts.Output == "":
		return cmdutil.Usagef("-o/--output is required")
	}
	height := keccakf.Height(opts.Perms)
	if b := int64(keccakf.NumCols) * int64(height) * 4; b > tracefile.DefaultMaxSectionBytes {
		return cmdutil.Usagef("--perms %d: the trace (%d×%d, %d bytes) exceeds the trace file limit of %d bytes per section (at most %d permutations)",
			opts.Perms, keccakf.NumCols, height, b, tracefile.DefaultMaxSectionBytes, maxPermsForFile())
	}
	if st, err := os.Stat(opts.Output); err == nil && st.IsDir() {
		return cmdutil.Usagef("-o %s: is a directory", opts.Output)
	}
	return nil
}

// maxPermsForFile is the largest permutation count whose keccakf trace fits in one section.
func maxPermsForFile() int {
	h := 1
	for int64(keccakf.NumCols)*int64(2*h)*4 <= tracefile.DefaultMaxSectionBytes {
		h *= 2
	}
	return h / keccakf.NumRounds
}

var errInterrupted = errors.New("interrupted; no file written")

func traceRun(opts *Options) (err error) {
	if err := opts.validate(); err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := opts.Logger

	// Create the (temporary) file first, so that a bad path fails before the generation.
	w, err := tracefile.Create(opts.Output)
	if err != nil {
		return err
	}
	defer w.Abort() // removes the temporary file unless Commit succeeded

	n := opts.Perms
	height := keccakf.Height(n)
	h := tracefile.SectionHeader{Name: opts.Example, Width: keccakf.NumCols, Height: height}
	log.Info().Str("example", h.Name).Int("perms", n).Uint64("seed", opts.Seed).
		Int("width", h.Width).Int("height", h.Height).Int64("bytes", 4*int64(h.Width)*int64(h.Height)).
		Msg("generating trace")
	if ctx.Err() != nil {
		return errInterrupted
	}

	start := time.Now()
	cols := make([]field.Fp, h.Width*h.Height)
	done := make(chan struct{})
	go func() {
		defer close(done)
		keccakf.FillTrace(cols, height, keccakf.RandomInputs(opts.Seed, n))
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return errInterrupted
	}
	log.Info().Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("trace generated")

	start = time.Now()
	if err := w.BeginSection(h); err != nil {
		return err
	}
	for c := range h.Width {
		if ctx.Err() != nil {
			return errInterrupted
		}
		if err := w.WriteColumn(cols[c*height : (c+1)*height]); err != nil {
			return err
		}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	log.Info().Str("path", opts.Output).Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("trace file written")

	if !opts.JSON {
		return nil
	}
	d := keccakf.TraceDigest(height, cols)
	rep := GenerateReport{
		Path:     opts.Output,
		Sections: []SectionShape{{Name: h.Name, Width: h.Width, Height: h.Height}},
		Digest:   hex.EncodeToString(d[:]),
	}
	enc := json.NewEncoder(opts.IO.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
