// Package vk implements `metalprove vk export`: it writes the verifying key of a trace file's
// AIRs, or of a proving-key file, in OpenVM's postcard form (MultiStarkVerifyingKey, parameters
// and pre_hash included), and optionally the preprocessed traces beside it.
package vk

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/keyfile"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// ExportOptions are the inputs of vk export.
type ExportOptions struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Trace string
	// Key is a proving-key file to export instead of a trace file's AIRs.
	Key    string
	Output string
	// PreprocessedOut, when set, receives the preprocessed traces as a trace file.
	PreprocessedOut string
	Preset          string
	AllowInsecure   bool
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

func exportRun(opts *ExportOptions) error {
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	input := opts.Trace
	if opts.Key != "" {
		input = opts.Key
	}
	if opts.PreprocessedOut != "" && (opts.PreprocessedOut == opts.Output) {
		return cmdutil.Usagef("--preprocessed-out and -o are the same file")
	}
	out, err := cmdutil.CreateOutput("-o", opts.Output, input, cfg)
	if err != nil {
		return err
	}
	defer out.Abort()
	var f *keyfile.File
	var source string
	if opts.Key != "" {
		k, err := prover.ReadKey(opts.Key, opts.AllowInsecure)
		if err != nil {
			return err
		}
		f, source = k.File, k.ParamsSource()
	} else {
		res, err := prover.ResolveParams(opts.Preset, opts.Settings, "", opts.AllowInsecure)
		if err != nil {
			return err
		}
		airs, _, err := prover.BuiltinAirs(opts.Trace)
		if err != nil {
			return err
		}
		if f, err = prover.KeygenBuiltin(res.Params, airs, keyfile.Note{Source: "trace " + opts.Trace}); err != nil {
			return err
		}
		source = res.Source
	}
	b := f.MVK.AppendKeyPostcard(nil, f.PreHash)
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	pre := prover.PreprocessedSections(f)
	if opts.PreprocessedOut != "" {
		if len(pre) == 0 {
			return cmdutil.Usagef("--preprocessed-out: no AIR of the key has a preprocessed trace")
		}
		if err := tracefile.WriteAll(opts.PreprocessedOut, pre); err != nil {
			return fmt.Errorf("write %s: %w", opts.PreprocessedOut, err)
		}
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	dg := stark.ParamsDigest(f.MVK.Params)
	_, err = fmt.Fprintf(opts.IO.Out, "%s: verifying key of %s under %s (params digest %s), %d bytes; pre_hash %s\n",
		opts.Output, strings.Join(f.Names, ", "), source, hex.EncodeToString(dg[:8]), len(b), prover.PreHashString(f.PreHash))
	if err == nil && opts.PreprocessedOut != "" {
		_, err = fmt.Fprintf(opts.IO.Out, "%s: %d preprocessed traces\n", opts.PreprocessedOut, len(pre))
	}
	return err
}
