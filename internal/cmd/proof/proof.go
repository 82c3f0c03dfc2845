// Package proof implements `metalprove proof export`: it writes the proof inside a proof file as
// bare codec bytes (OpenVM's Proof::encode, codec version 3), without the metalprove envelope or
// metadata, for OpenVM's own verifier.
package proof

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
)

// ExportOptions are the inputs of proof export.
type ExportOptions struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Proof  string
	Output string
	Preset string
	// Key is the proving-key file the proof was made with (its parameters).
	Key string
}

// NewCmdProof returns the proof command group.
func NewCmdProof(f *cmdutil.Factory, runF func(*ExportOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proof",
		Short: "Convert proof files (export the bare OpenVM codec bytes)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(NewCmdExport(f, runF))
	return cmd
}

// NewCmdExport returns proof export. runF, when not nil, replaces exportRun (for tests).
func NewCmdExport(f *cmdutil.Factory, runF func(*ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "export PROOF -o FILE",
		Short: "Write a proof file's proof as bare OpenVM codec bytes (Proof::encode)",
		Long: `Write the proof inside a metalprove proof file as bare codec bytes: OpenVM stark-backend
v2.0.1's Proof::encode (codec version 3), without the metalprove envelope (magic, parameters'
digest, CRC) or the metadata naming the AIRs. OpenVM's verifier reads these bytes with
Proof::decode; 'metalprove verify --openvm FILE --trace TRACE --preset P' verifies them.

The proof file is checked first (envelope, CRC, the parameters' digest, a full decode), with the
parameters it names (--preset or the config file's params section to override; --key PK for
a proof made with a proving key whose parameters are no preset). Exporting
verifies nothing, so parameters below 100 bits (the test preset) need no --allow-insecure here. The output is
written atomically and may not be the proof file itself.`,
		Example: `  metalprove proof export k16.proof -o k16.openvm.proof
  metalprove verify --openvm k16.openvm.proof --trace k16.trace --preset app-100bit`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Proof = args[0]
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
	fl.StringVarP(&opts.Output, "output", "o", "", "file to write the bare codec bytes to (required)")
	fl.StringVar(&opts.Preset, "preset", "", "preset (default: the config file's params section, else the proof file's preset)")
	fl.StringVar(&opts.Key, "key", "", "the proving-key file the proof was made with: its parameters")
	return cmd
}

func exportRun(opts *ExportOptions) error {
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	out, err := cmdutil.CreateOutput("-o", opts.Output, opts.Proof, cfg)
	if err != nil {
		return err
	}
	defer out.Abort()
	meta, env, err := prover.ReadProofFile(opts.Proof)
	if err != nil {
		return err
	}
	var res *prover.Resolved
	if opts.Key != "" {
		k, err := prover.ReadKey(opts.Key, true)
		if err != nil {
			return err
		}
		if err := prover.CheckProofKey(k, opts.Proof, meta); err != nil {
			return err
		}
		res = &prover.Resolved{Params: k.Params(), Preset: k.Preset, Source: k.ParamsSource(), SecurityBits: k.SecurityBits}
	} else if res, err = prover.ResolveProofParams(opts.Preset, opts.Settings, meta, opts.Proof, true); err != nil {
		return err
	}
	if _, err := stark.UnmarshalProofFile(env, res.Params); err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Proof, err)}
	}
	// A valid envelope: the proof's codec bytes lie between its header and its CRC.
	body := env[stark.EnvelopeOverhead-4 : len(env)-4]
	if _, err := out.Write(body); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: %d bytes of proof codec (OpenVM Proof::encode, codec version %d) from %s, made under %s\n",
		opts.Output, len(body), stark.CodecVersion, opts.Proof, res.Source)
	return err
}
