// Package vk implements `metalprove vk export`: its flags, their conflicts, and the printing of
// what was written. Writing the verifying key of a trace file's AIRs, or of a proving-key file,
// in OpenVM's postcard form (MultiStarkVerifyingKey, parameters and pre_hash included), and
// optionally the preprocessed traces beside it, is the app layer's: prover.ExportVK.
package vk

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
)

// ExportOptions are the inputs of vk export: the request its flags make.
type ExportOptions struct {
	IO *cmdutil.IOStreams
	// VKExportRequest holds the flags (--trace, --key, -o, --preprocessed-out, …) and the
	// settings.
	prover.VKExportRequest
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
	opts := &ExportOptions{IO: f.IO, VKExportRequest: prover.VKExportRequest{Settings: f.Settings}}
	cmd := &cobra.Command{
		Use:   "export (--trace TRACE [--preset P] | --key PK) -o FILE [--preprocessed-out FILE]",
		Short: "Write the verifying key of a trace file's AIRs in OpenVM's postcard form",
		Long: `Build the verifying key of the AIRs a trace file's sections name (in section order, with
their heights), under --preset (` + strings.Join(sp.PresetNames(), ", ") + `) or the config file's
params section (default ` + prover.DefaultPreset + `), and write it as OpenVM writes it:
postcard::to_allocvec(&MultiStarkVerifyingKey), the parameters, per-AIR keys, trace-height
constraints and the pre_hash the transcript observes first. The pre_hash is printed.

--key PK exports the verifying key of a proving-key file instead: for a key imported with
'keygen --openvm-vk', the bytes it was imported from. --preprocessed-out FILE also writes the
AIRs' preprocessed traces as a trace file (one section per AIR that has one, in key order): with
the key, what 'keygen --openvm-vk --preprocessed' takes.

Only the AIRs' names and heights are read from the trace file, not its cells. The output is
written atomically and may not be the trace file.`,
		Example: `  metalprove vk export --trace k16.trace --preset app-100bit -o keccakf.vk.postcard
  metalprove vk export --key app.pk -o app.vk.postcard --preprocessed-out app.pre.trace`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			switch {
			case opts.Trace == "" && opts.Key == "":
				return cmdutil.Usagef("--trace or --key is required")
			case opts.Trace != "" && opts.Key != "":
				return cmdutil.Usagef("--trace and --key conflict: give one")
			case opts.Key != "" && opts.Preset != "":
				return cmdutil.Usagef("--key and --preset conflict: the parameters are the key's")
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
	fl.StringVar(&opts.Trace, "trace", "", "trace file whose sections name the AIRs and heights")
	fl.StringVar(&opts.Key, "key", "", "proving-key file (metalprove keygen) to export instead")
	fl.StringVarP(&opts.Output, "output", "o", "", "file to write the key to (required)")
	fl.StringVar(&opts.PreprocessedOut, "preprocessed-out", "", "also write the preprocessed traces to this trace file")
	fl.StringVar(&opts.Preset, "preset", "", "preset: "+strings.Join(sp.PresetNames(), "|")+" (default: the config file's params section, else "+prover.DefaultPreset+")")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	return cmd
}

// exportRun exports through prover.ExportVK and prints what it wrote.
func exportRun(opts *ExportOptions) error {
	rep, err := prover.ExportVK(opts.VKExportRequest)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: verifying key of %s under %s (params digest %s), %d bytes; pre_hash %v\n",
		rep.Output, strings.Join(rep.AIRs, ", "), rep.Params, rep.ParamsDigest[:16], rep.Bytes, rep.PreHash)
	if err == nil && rep.PreprocessedOut != "" {
		_, err = fmt.Fprintf(opts.IO.Out, "%s: %d preprocessed traces\n", rep.PreprocessedOut, rep.Preprocessed)
	}
	return err
}
