// Package selftest implements `metalprove selftest`: it runs the known-answer and consistency
// checks of internal/selftest and reports each one, as a table or as JSON.
package selftest

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/selftest"
)

// Options are the inputs of the selftest command.
type Options struct {
	IO *cmdutil.IOStreams
	// Logger points at the factory's logger, which the root command configures after the
	// command line is parsed.
	Logger *zerolog.Logger
	// Checks returns the checks to choose from (selftest.All outside tests).
	Checks func() []selftest.Check

	// Settings are the resolved root settings (read at run time for --device).
	Settings *cmdutil.Settings
	// OpenDevice opens the device the kernel checks run on (prover.OpenDevice outside tests: capped
	// at --device-memory).
	OpenDevice func(settings *cmdutil.Settings, kind gpu.Kind, ordinal int, log *zerolog.Logger) (*gpu.Device, error)
	// KernelChecks returns the device checks (selftest.KernelChecks outside tests).
	KernelChecks func(dev *gpu.Device) []selftest.Check

	JSON bool
	// Kernels asks for the kernel checks even when --device is auto.
	Kernels bool
	// Run is a regular expression; only checks whose name it matches are run ("" = all).
	Run string
}

// Report is what `metalprove selftest --json` prints.
type Report struct {
	Checks []selftest.Result `json:"checks"`
	Passed int               `json:"passed"`
	Failed int               `json:"failed"`
}

// NewCmdSelftest returns the selftest command. runF, when not nil, replaces selftestRun (for tests).
func NewCmdSelftest(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Checks: selftest.All, Settings: f.Settings,
		OpenDevice: prover.OpenDevice, KernelChecks: selftest.KernelChecks}
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Run the built-in known-answer and consistency checks",
		Long: `Run the built-in checks (field arithmetic, hashing, transcript, ...) and report each one.

With --device host|cuda|metal given explicitly (flag, METALPROVE_DEVICE or config), or with
--kernels, the kernel table runs too: every kernel family (NTT, RS encoding, Poseidon2, Merkle
trees) on that device against the pure-Go reference, on random and edge values at awkward sizes
and one large one, named like "kernels/ntt-dft-2^20x1 [host]". With the default --device auto
and no --kernels only the host-side checks run. A device that cannot be opened exits with
status 5; the exit status is 4 when any check fails.`,
		Example: `  metalprove selftest
  metalprove selftest --device host
  metalprove selftest --kernels
  metalprove selftest --run '^field/'
  metalprove selftest --json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return selftestRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of a table")
	cmd.Flags().BoolVar(&opts.Kernels, "kernels", false, "also run the kernel checks on the device (implied by an explicit --device)")
	cmd.Flags().StringVar(&opts.Run, "run", "", "run only the checks whose name matches this regular expression")
	return cmd
}

// selectChecks returns the checks whose name matches pattern; a pattern that does not compile
// or matches nothing is a usage error.
func selectChecks(all []selftest.Check, pattern string) ([]selftest.Check, error) {
	if pattern == "" {
		return all, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, cmdutil.Usagef("--run %q: %v", pattern, err)
	}
	var chosen []selftest.Check
	for _, c := range all {
		if re.MatchString(c.Name) {
			chosen = append(chosen, c)
		}
	}
	if len(chosen) == 0 {
		return nil, cmdutil.Usagef("--run %q matches no check (see 'metalprove selftest' for the names)", pattern)
	}
	return chosen, nil
}

// deviceKind returns the device the kernel checks run on, or "" when they are not wanted.
func deviceKind(opts *Options) gpu.Kind {
	kind := gpu.KindAuto
	if opts.Settings != nil && opts.Settings.Device != "" {
		kind = gpu.Kind(opts.Settings.Device)
	}
	if kind == gpu.KindAuto && !opts.Kernels {
		return ""
	}
	return kind
}

func selftestRun(opts *Options) error {
	all := opts.Checks()
	log := opts.Logger
	if kind := deviceKind(opts); kind != "" {
		dev, err := opts.OpenDevice(opts.Settings, kind, 0, log)
		if err != nil {
			return &cmdutil.DeviceError{Err: fmt.Errorf("selftest: %w", err)}
		}
		defer dev.Close()
		log.Debug().Str("device", dev.Name()).Msg("kernel checks")
		all = append(all, opts.KernelChecks(dev)...)
		all = append(all, selftest.DeviceBackendChecks(dev)...)
	}
	checks, err := selectChecks(all, opts.Run)
	if err != nil {
		return err
	}
	log.Debug().Int("checks", len(checks)).Str("run", opts.Run).Msg("selftest start")
	start := time.Now()

	var onResult func(selftest.Result)
	if !opts.JSON {
		width := len("name")
		for _, c := range checks {
			width = max(width, len(c.Name))
		}
		fmt.Fprintf(opts.IO.Out, "%-*s  %-6s  %s\n", width, "name", "result", "time")
		onResult = func(r selftest.Result) { writeRow(opts.IO.Out, width, r) }
	}
	results := selftest.RunChecks(checks, onResult)

	report := Report{Checks: results}
	var failed []string
	for _, r := range results {
		if r.Passed {
			report.Passed++
		} else {
			report.Failed++
			failed = append(failed, r.Name)
		}
	}
	log.Debug().Int("passed", report.Passed).Int("failed", report.Failed).
		Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Msg("selftest end")

	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(opts.IO.Out, "%d passed, %d failed\n", report.Passed, report.Failed)
	}
	if len(failed) > 0 {
		noun := "checks"
		if len(failed) == 1 {
			noun = "check"
		}
		return &cmdutil.CheckFailedError{Err: fmt.Errorf("selftest: %d %s failed: %s", len(failed), noun, strings.Join(failed, ", "))}
	}
	return nil
}

// writeRow prints one table row; a failure's error follows on its own indented line.
func writeRow(w io.Writer, width int, r selftest.Result) {
	result := "PASS"
	if !r.Passed {
		result = "FAIL"
	}
	fmt.Fprintf(w, "%-*s  %-6s  %s\n", width, r.Name, result, formatDuration(r.Duration))
	if !r.Passed {
		fmt.Fprintf(w, "    %s\n", r.Error)
	}
}

// formatDuration rounds d to about three significant digits.
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(time.Nanosecond * 100).String()
	}
	return d.String()
}
