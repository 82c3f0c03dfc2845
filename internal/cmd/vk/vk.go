// Package vk implements `metalprove vk export`: it writes the verifying key of a trace file's
// AIRs in OpenVM's postcard form (MultiStarkVerifyingKey, parameters and pre_hash included).
package vk

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
)

// ExportOptions are the inputs of vk export.
type ExportOptions struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Trace         string
	Output        string
	Preset        string
	AllowInsecure bool
}

// NewCmdVK returns the vk command group.
func NewCmdVK(f *cmdutil.Factory, runF func(*ExportOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vk",
		Short: "Verifying keys (export OpenVM's postcard form)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(NewCmdExport(f, runF))
	return cmd
}

// NewCmdExport returns vk export. runF, when not nil, replaces exportRun (for tests).
func NewCmdExport(f *cmdutil.Factory, runF func(*ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "export --trace TRACE [--preset P] -o FILE",
		Short: "Write the verifying key of a trace file's AIRs in OpenVM's postcard form",
		Long: `Build the verifying key of the AIRs a trace file's sections name (in section order, with
their heights), under --preset (` + strings.Join(sp.PresetNames(), ", ") + `) or the config file's
params section (default ` + prover.DefaultPreset + `), and write it as OpenVM writes it:
postcard::to_allocvec(&MultiStarkVerifyingKey), the parameters, per-AIR keys, trace-height
constraints and the pre_hash the transcript observes first. The pre_hash is printed.

Only the AIRs' names and heights are read from the trace file, not its cells. The output is
written atomically and may not be the trace file.`,
		Example: `  metalprove vk export --trace k16.trace --preset app-100bit -o keccakf.vk.postcard`,
		Args:    cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if opts.Trace == "" {
				return cmdutil.Usagef("--trace is required")
			}
			if opts.Output == "" {
				return cmdutil.Usagef("-o/--output is required")
			}
			if runF != nil {
				return runF(opts)
			}
			return exportRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Trace, "trace", "", "trace file whose sections name the AIRs and heights (required)")
	fl.StringVarP(&opts.Output, "output", "o", "", "file to write the key to (required)")
	fl.StringVar(&opts.Preset, "preset", "", "preset: "+strings.Join(sp.PresetNames(), "|")+" (default: the config file's params section, else "+prover.DefaultPreset+")")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	return cmd
}

func exportRun(opts *ExportOptions) error {
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	res, err := prover.ResolveParams(opts.Preset, opts.Settings, "", opts.AllowInsecure)
	if err != nil {
		return err
	}
	out, err := cmdutil.CreateOutput("-o", opts.Output, opts.Trace, cfg)
	if err != nil {
		return err
	}
	defer out.Abort()
	metas, err := prover.TraceAirs(opts.Trace)
	if err != nil {
		return err
	}
	airs := make([]air.Air, len(metas))
	for i, m := range metas {
		if airs[i], err = examples.AirForHeight(m.Name, m.Height); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: section %d: %w", opts.Trace, i, err)}
		}
	}
	pk, err := stark.Keygen(res.Params, airs, nil, cpuref.New())
	if err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Trace, err)}
	}
	b := pk.VK.AppendPostcard(nil)
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	ph := make([]string, len(pk.VK.PreHash))
	for i, f := range pk.VK.PreHash {
		ph[i] = fmt.Sprint(uint32(f))
	}
	dg := stark.ParamsDigest(res.Params)
	_, err = fmt.Fprintf(opts.IO.Out, "%s: verifying key of %s under %s (params digest %s), %d bytes; pre_hash [%s]\n",
		opts.Output, prover.AirList(metas), res.Source, hex.EncodeToString(dg[:8]), len(b), strings.Join(ph, ", "))
	return err
}
