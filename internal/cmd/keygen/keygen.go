// Package keygen implements `metalprove keygen`: its flags, their conflicts, and the printing of
// the report (text, or --json). Writing the proving-key file (internal/keyfile) for built-in AIRs
// (an example, or the AIRs a trace file names) or for OpenVM's verifying key (--openvm-vk), so
// that `prove --key` and `verify --key` need no keygen of their own, is the app layer's:
// prover.Keygen.
package keygen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of keygen: the request its flags make, and how to print.
type Options struct {
	IO *cmdutil.IOStreams
	// KeygenRequest holds the flags (--example, --trace, --openvm-vk, -o, …), the version, the
	// settings and the logger.
	prover.KeygenRequest
	JSON bool
}

// NewCmdKeygen returns the keygen command. runF, when not nil, replaces keygenRun (for tests).
func NewCmdKeygen(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, KeygenRequest: prover.KeygenRequest{Logger: &f.Logger, Settings: f.Settings, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "keygen (--example NAME [--rows N] | --trace TRACE | --openvm-vk VK [--preprocessed FILE] [--names A,B,…]) -o KEY",
		Short: "Write a proving-key file: built-in AIRs, or OpenVM's verifying key",
		Long: `Write a proving-key file (docs/PROVING-KEYS.md) for 'prove --key' and 'verify --key':
the verifying key as OpenVM writes it (parameters, per AIR its widths, public values and
constraint DAG, preprocessed commitments, trace-height constraints, pre_hash), each AIR's name and
preprocessed trace, SHA-256 checked. The file is written atomically; the pre_hash is printed.

Its AIRs come from one of:
  --example NAME       a built-in example's AIRs (` + strings.Join(examples.Names(), ", ") + `);
                       --rows sets the height where an AIR's preprocessed trace depends on it
  --trace FILE         the built-in AIRs a trace file's sections name, with their heights
  --openvm-vk FILE     OpenVM's verifying key: postcard::to_allocvec(&MultiStarkVerifyingKey) of
                       stark-backend v2.0.1, as its keygen makes it. AIRs with a preprocessed trace
                       need --preprocessed FILE: a trace file with one section per such AIR, in key
                       order, whose commitment must be the key's. OpenVM keys hold no AIR names:
                       --names A,B,… names every AIR (else a preprocessed section's name, else
                       air<i>); prove --key checks each trace section's name against it.

Parameters: for built-in AIRs --preset (` + strings.Join(sp.PresetNames(), ", ") + `), else the config
file's params section, else ` + prover.DefaultPreset + `; an OpenVM key's are its own (--preset
conflicts). A security target below 100 bits (the test preset; for other parameters the soundness
calculated with the key's AIRs) needs --allow-insecure.

Exit status: 0 on success; 2 for bad flags; 3 when a key or trace file is malformed, altered or
unsupported (named: byte offset, AIR, node), or a preprocessed trace does not commit to the key's
commitment.`,
		Example: `  metalprove keygen --example keccakf -o keccakf.pk
  metalprove keygen --trace mixture.trace --preset test --allow-insecure -o mixture.pk
  metalprove keygen --openvm-vk app.vk.postcard --preprocessed app.pre.trace --names a,b,c -o app.pk`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n := 0
			for _, s := range []string{opts.Example, opts.Trace, opts.OpenVMVK} {
				if s != "" {
					n++
				}
			}
			switch {
			case n != 1:
				return cmdutil.Usagef("give one of --example, --trace and --openvm-vk")
			case opts.Output == "":
				return cmdutil.Usagef("-o/--output is required")
			case opts.OpenVMVK != "" && opts.Preset != "":
				return cmdutil.Usagef("--openvm-vk and --preset conflict: the parameters are the key's")
			case opts.OpenVMVK == "" && (opts.Preprocessed != "" || opts.Names != ""):
				return cmdutil.Usagef("--preprocessed and --names go with --openvm-vk")
			case opts.Example == "" && c.Flags().Changed("rows"):
				return cmdutil.Usagef("--rows goes with --example")
			}
			if runF != nil {
				return runF(opts)
			}
			return keygenRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Example, "example", "", "built-in example whose AIRs to key: "+strings.Join(examples.Names(), "|"))
	fl.IntVar(&opts.Rows, "rows", 0, "with --example: the trace height (a power of two) of AIRs whose preprocessed trace depends on it")
	fl.StringVar(&opts.Trace, "trace", "", "trace file whose sections name the built-in AIRs")
	fl.StringVar(&opts.OpenVMVK, "openvm-vk", "", "OpenVM's verifying key (postcard of MultiStarkVerifyingKey)")
	fl.StringVar(&opts.Preprocessed, "preprocessed", "", "with --openvm-vk: trace file of the preprocessed traces, one section per AIR that has one, in key order")
	fl.StringVar(&opts.Names, "names", "", "with --openvm-vk: the AIRs' names, comma-separated, in key order")
	fl.StringVarP(&opts.Output, "output", "o", "", "proving-key file to write (required)")
	fl.StringVar(&opts.Preset, "preset", "", "preset for built-in AIRs: "+strings.Join(sp.PresetNames(), "|"))
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// keygenRun writes the key through prover.Keygen and prints its report.
func keygenRun(opts *Options) error {
	rep, err := prover.Keygen(opts.KeygenRequest)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	names := cmdutil.ShortList(len(rep.AIRs), 6, func(i int) string { return rep.AIRs[i].Name })
	_, err = fmt.Fprintf(opts.IO.Out, "%s: proving key of %d AIRs (%s) from %s under %s (%d-bit target), %d bytes; pre_hash %v\n",
		rep.Output, len(rep.AIRs), names, rep.Source, rep.Params, rep.SecurityBits, rep.Bytes, rep.PreHash)
	return err
}
