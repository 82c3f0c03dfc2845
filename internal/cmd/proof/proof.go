// Package proof implements `metalprove proof export`: its arguments and the printing of what was
// written. Writing the proof inside a proof file as bare codec bytes (OpenVM's Proof::encode,
// codec version 3), without the metalprove envelope or metadata, for OpenVM's own verifier, is
// the app layer's: prover.ExportProof.
package proof

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
)

// ExportOptions are the inputs of proof export: the request its arguments make.
type ExportOptions struct {
	IO *cmdutil.IOStreams
	// ProofExportRequest holds the proof file and the flags (-o, --preset, --key) and the
	// settings.
	prover.ProofExportRequest
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
	opts := &ExportOptions{IO: f.IO, ProofExportRequest: prover.ProofExportRequest{Settings: f.Settings}}
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

// exportRun exports through prover.ExportProof and prints what it wrote.
func exportRun(opts *ExportOptions) error {
	rep, err := prover.ExportProof(opts.ProofExportRequest)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: %d bytes of proof codec (OpenVM Proof::encode, codec version %d) from %s, made under %s\n",
		rep.Output, rep.Bytes, rep.CodecVersion, rep.Proof, rep.Params)
	return err
}
