package trace

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// DefaultMaxFailures is the default of --max-failures.
const DefaultMaxFailures = 10

// CheckOptions are the inputs of the trace check command.
type CheckOptions struct {
	IO     *cmdutil.IOStreams
	Logger *zerolog.Logger
	Path   string
	JSON   bool
	// MaxFailures bounds the constraint failures, and separately the bus imbalances, reported
	// (0: all).
	MaxFailures int
	// Progress shows the section being checked on a terminal.
	Progress *progress.Display
	// Settings are the global settings: --device (auto when unset) is the device that evaluates
	// the rows, opened with --device-memory's cap.
	Settings *cmdutil.Settings
}

// CheckReport is what `metalprove trace check --json` prints.
type CheckReport struct {
	Path     string         `json:"path"`
	Passed   bool           `json:"passed"`
	Sections []SectionCheck `json:"sections"`
	// Failures are the first constraint failures in file order (section, row, constraint).
	Failures []ConstraintFailure `json:"failures"`
	// Imbalances are the (bus, message) pairs whose counts over all sections do not sum to 0.
	Imbalances []BusImbalance `json:"imbalances"`
	// Truncated is true when the listing stopped at --max-failures: more constraint failures may
	// exist, or more imbalances do.
	Truncated bool `json:"truncated"`
}

// SectionCheck is the result of one section.
type SectionCheck struct {
	Index        int    `json:"index"`
	Name         string `json:"name"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	Constraints  int    `json:"constraints"`  // constraints of the AIR, each checked on every row
	Interactions int    `json:"interactions"` // interactions of the AIR (checked for balance)
	Passed       bool   `json:"passed"`       // every constraint vanishes on every row
	// Failures counts the failures found; the search stops at the report's limit (at least 1).
	Failures int `json:"failures"`
}

// ConstraintFailure is a constraint that does not vanish on a row.
type ConstraintFailure struct {
	Section    int    `json:"section"`
	Air        string `json:"air"`
	Row        int    `json:"row"`
	Constraint int    `json:"constraint"` // index in the AIR's assert order
	Value      uint32 `json:"value"`
	Expr       string `json:"expr"`
}

// BusImbalance is a (bus, message) whose counts do not sum to zero.
type BusImbalance struct {
	Bus           uint16     `json:"bus"`
	Message       []uint32   `json:"message"`
	Sum           uint32     `json:"sum"`
	Contributions []BusCount `json:"contributions"`
}

// BusCount is the total count one section puts on an imbalanced (bus, message).
type BusCount struct {
	Section int    `json:"section"`
	Air     string `json:"air"`
	Count   uint32 `json:"count"`
}

// NewCmdCheck returns the trace check command. runF, when not nil, replaces checkRun (for tests).
func NewCmdCheck(f *cmdutil.Factory, runF func(*CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{IO: f.IO, Logger: &f.Logger, Progress: f.Progress}
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a trace file against the constraints and interactions of its AIRs",
		Long: `Decode a trace file and check it: each section's AIR is found by the section's name
(keccakf, or a test AIR such as fibonacci or dummy-interaction-send-w1-bus0: see 'metalprove trace
--help'), its width and number of public values must be the AIR's, every constraint is evaluated
on every row (the next row of the last row is row 0; rows are evaluated on the device of
--device, auto: a GPU when one is usable, else the host device), and the interactions of all
sections of the file must balance: for every bus and message, the counts sum to zero.

The first failures (at most --max-failures of them, 10 by default) are printed with the section,
AIR, row, constraint index (in the AIR's assert order) and the constraint's expression; the
imbalanced bus messages likewise. Then a per-section summary.

Exit status: 0 when every check passes; 4 when a constraint fails or a bus does not balance; 3
when the file is missing or malformed (the section and byte offset are named), when a section
names no known AIR, or when its width or public values do not fit its AIR; 5 when the device is
unavailable.`,
		Example: `  metalprove trace check keccakf.trace
  metalprove trace check fib.trace --json --max-failures 100`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Path = args[0]
			opts.Progress = f.Progress
			opts.Settings = f.Settings
			if opts.MaxFailures < 0 {
				return cmdutil.Usagef("--max-failures %d: must be ≥ 0 (0: all)", opts.MaxFailures)
			}
			if runF != nil {
				return runF(opts)
			}
			return checkRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of text (on failure also error and exit_code)")
	cmd.Flags().IntVar(&opts.MaxFailures, "max-failures", DefaultMaxFailures, "report at most N constraint failures and N imbalances (0: all)")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

func checkRun(opts *CheckOptions) error {
	if opts.MaxFailures < 0 {
		return cmdutil.Usagef("--max-failures %d: must be ≥ 0 (0: all)", opts.MaxFailures)
	}
	rep, err := checkFile(opts)
	if err == nil && !rep.Passed {
		err = checkFailed(opts.Path, rep)
	}
	if opts.JSON {
		// The report, failing or not, with the error and exit status of a failure.
		return cmdutil.PrintJSON(opts.IO.Out, opts.Settings, rep, err)
	}
	if rep != nil {
		if perr := printCheck(opts.IO.Out, rep); perr != nil {
			return perr
		}
	}
	return err
}

// checkFailed is the error of a report that did not pass, naming the first failures.
func checkFailed(path string, rep *CheckReport) error {
	failed := 0
	for _, s := range rep.Sections {
		if !s.Passed {
			failed++
		}
	}
	var what []string
	if failed > 0 {
		f := rep.Failures[0]
		what = append(what, fmt.Sprintf("%d of %d sections fail their constraints (first: section %d %s row %d constraint %d)",
			failed, len(rep.Sections), f.Section, f.Air, f.Row, f.Constraint))
	}
	if len(rep.Imbalances) > 0 {
		im := rep.Imbalances[0]
		what = append(what, fmt.Sprintf("interactions do not balance (first: bus %d message %v sums to %d)", im.Bus, im.Message, im.Sum))
	}
	return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: trace check failed: %s", path, strings.Join(what, "; "))}
}

// checkFile decodes the file section by section and checks it. Problems with the file (unreadable,
// malformed, unknown AIR, wrong shape) are BadInputErrors; failing checks are in the report.
func checkFile(opts *CheckOptions) (*CheckReport, error) {
	log := opts.Logger
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	path := opts.Path
	tf, err := openTraceFile(path)
	if err != nil {
		return nil, err
	}
	defer tf.Close()
	r, wrap := tf.r, tf.wrap
	chk, err := openSectionChecker(opts.Settings, log)
	if err != nil {
		return nil, err
	}
	defer chk.close()
	rep := &CheckReport{Path: path, Sections: []SectionCheck{}, Failures: []ConstraintFailure{}, Imbalances: []BusImbalance{}}
	// Sections with interactions are kept for the balance check across the file.
	var busAirs []air.Air
	var busInputs []air.TraceInput
	var busSection []int
	task := opts.Progress.Start("trace check "+path, 0, "")
	defer task.Done()
	for i := 0; ; i++ {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap(err)
		}
		bad := func(format string, args ...any) error {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d %q: %s", path, i, h.Name, fmt.Sprintf(format, args...))}
		}
		a, err := examples.AirForHeight(h.Name, h.Height)
		if err != nil {
			return nil, bad("%v", err)
		}
		w := a.Width()
		if h.Width != w.MainWidth() {
			return nil, bad("width %d, but AIR %s has %d main columns", h.Width, a.Name(), w.MainWidth())
		}
		if len(h.PublicValues) != a.NumPublicValues() {
			return nil, bad("%d public values, but AIR %s has %d", len(h.PublicValues), a.Name(), a.NumPublicValues())
		}
		task.Step(fmt.Sprintf("section %d %s (%d rows)", i, h.Name, h.Height))
		if need, mem := 4*uint64(h.Width)*uint64(h.Height), prover.MachineMemory(); mem.Available > 0 && need > mem.Available {
			return nil, fmt.Errorf("%s: section %d %q: not enough memory: its %d×%d cells need %s, %s is available",
				path, i, h.Name, h.Height, h.Width, sysinfo.Bytes(need), sysinfo.Bytes(mem.Available))
		}
		cells := make([]field.Fp, h.Width*h.Height)
		if err := r.ReadColumns(cells); err != nil {
			return nil, wrap(err)
		}
		in, err := testair.SplitMain(a, h.Height, cells, h.PublicValues)
		if err != nil {
			return nil, bad("%v", err)
		}
		limit := 0
		if opts.MaxFailures > 0 {
			limit = max(opts.MaxFailures-len(rep.Failures), 1)
		}
		start := time.Now()
		res, err := chk.checkConstraints(a, in, limit)
		if err != nil {
			if errors.Is(err, air.ErrShape) {
				return nil, bad("%v", err)
			}
			return nil, fmt.Errorf("%s: section %d %q: %w", path, i, h.Name, err)
		}
		log.Info().Int("section", i).Str("air", h.Name).Int("rows", h.Height).Int("constraints", res.constraints).
			Int("failures", len(res.failures)).Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("section checked")
		sc := SectionCheck{Index: i, Name: h.Name, Width: h.Width, Height: h.Height, Constraints: res.constraints,
			Interactions: res.interactions, Passed: len(res.failures) == 0, Failures: len(res.failures)}
		rep.Sections = append(rep.Sections, sc)
		if limit > 0 && len(res.failures) >= limit {
			rep.Truncated = true
		}
		for _, fl := range res.failures {
			if opts.MaxFailures > 0 && len(rep.Failures) >= opts.MaxFailures {
				rep.Truncated = true
				break
			}
			rep.Failures = append(rep.Failures, ConstraintFailure{Section: i, Air: h.Name, Row: fl.Row, Constraint: fl.Constraint, Value: uint32(fl.Value), Expr: fl.Expr})
		}
		if res.interactions > 0 {
			busAirs, busInputs, busSection = append(busAirs, a), append(busInputs, in), append(busSection, i)
		}
	}
	if len(busAirs) > 0 {
		task.Step("interaction balance")
		start := time.Now()
		ims, err := chk.checkInteractions(busAirs, busInputs)
		if err != nil {
			return nil, fmt.Errorf("%s: interaction balance: %w", path, err)
		}
		log.Info().Int("sections", len(busAirs)).Int("imbalances", len(ims)).
			Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("interactions checked")
		for _, im := range ims {
			if opts.MaxFailures > 0 && len(rep.Imbalances) >= opts.MaxFailures {
				rep.Truncated = true
				break
			}
			bi := BusImbalance{Bus: im.Bus, Sum: uint32(im.Sum), Message: make([]uint32, len(im.Message))}
			for k, v := range im.Message {
				bi.Message[k] = uint32(v)
			}
			for _, c := range im.Contributions {
				bi.Contributions = append(bi.Contributions, BusCount{Section: busSection[c.AirIndex], Air: c.Air, Count: uint32(c.Count)})
			}
			rep.Imbalances = append(rep.Imbalances, bi)
		}
	}
	rep.Passed = len(rep.Imbalances) == 0
	for _, s := range rep.Sections {
		rep.Passed = rep.Passed && s.Passed
	}
	return rep, nil
}

func printCheck(out io.Writer, rep *CheckReport) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	noun := "sections"
	if len(rep.Sections) == 1 {
		noun = "section"
	}
	fmt.Fprintf(w, "%s: %d %s\n", rep.Path, len(rep.Sections), noun)
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "constraint failures (first %d):\n", len(rep.Failures))
		for _, f := range rep.Failures {
			fmt.Fprintf(w, "  section %d %s: row %d: constraint %d = %d: %s\n", f.Section, f.Air, f.Row, f.Constraint, f.Value, f.Expr)
		}
	}
	if len(rep.Imbalances) > 0 {
		fmt.Fprintf(w, "bus imbalances (first %d):\n", len(rep.Imbalances))
		for _, im := range rep.Imbalances {
			var parts []string
			for _, c := range im.Contributions {
				parts = append(parts, fmt.Sprintf("section %d %s: %d", c.Section, c.Air, c.Count))
			}
			fmt.Fprintf(w, "  bus %d message %v: counts sum to %d (%s)\n", im.Bus, im.Message, im.Sum, strings.Join(parts, ", "))
		}
	}
	if rep.Truncated {
		fmt.Fprintf(w, "  (stopped at --max-failures; there may be more)\n")
	}
	fmt.Fprintf(w, "section\tAIR\twidth\trows\tconstraints\tinteractions\tresult\n")
	withBus := 0
	for _, s := range rep.Sections {
		res := "ok"
		if !s.Passed {
			res = fmt.Sprintf("FAILED (%d failures found)", s.Failures)
		}
		if s.Interactions > 0 {
			withBus++
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%s\n", s.Index, s.Name, s.Width, s.Height, s.Constraints, s.Interactions, res)
	}
	switch {
	case withBus == 0:
		fmt.Fprintf(w, "interaction balance: no interactions\n")
	case len(rep.Imbalances) == 0:
		fmt.Fprintf(w, "interaction balance: ok (%d sections)\n", withBus)
	default:
		fmt.Fprintf(w, "interaction balance: FAILED\n")
	}
	if rep.Passed {
		fmt.Fprintf(w, "PASS\n")
	} else {
		fmt.Fprintf(w, "FAIL\n")
	}
	return w.Flush()
}

// checkResult is the outcome of checkConstraints.
type checkResult struct {
	failures     []air.Failure
	constraints  int
	interactions int
}

// checkConstraints runs constraints.Check on one section and counts its constraints and
// interactions for the report.
func checkConstraints(a air.Air, in air.TraceInput, maxFailures int) (*checkResult, error) {
	sc, err := air.Symbolic(a)
	if err != nil {
		return nil, err
	}
	fs, err := constraints.Check(a, in, maxFailures)
	if err != nil {
		return nil, err
	}
	return &checkResult{failures: fs, constraints: len(sc.Constraints), interactions: len(sc.Interactions)}, nil
}
