// Package verify implements `metalprove verify`: its arguments, their conflicts, and the printing
// of the report (text, or one --json object whatever the outcome). Verifying a proof file (or,
// with --openvm, the bare codec bytes of a proof made by OpenVM's own prover) against the AIRs
// its metadata, a trace file or a proving key names is the app layer's: prover.Verify.
package verify

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of the verify command: the request its arguments make, and how to
// print.
type Options struct {
	IO *cmdutil.IOStreams
	// VerifyRequest holds the proof file and the flags (--openvm, --trace, --key, …), the
	// settings and the logger.
	prover.VerifyRequest
	JSON bool
}

// NewCmdVerify returns the verify command. runF, when not nil, replaces verifyRun (for tests).
func NewCmdVerify(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, VerifyRequest: prover.VerifyRequest{Logger: &f.Logger, Settings: f.Settings}}
	cmd := &cobra.Command{
		Use:   "verify PROOF | verify --key PK PROOF | verify --openvm FILE (--trace TRACE [--preset P] | --key PK)",
		Short: "Verify a proof file written by metalprove prove, or a proof made by OpenVM",
		Long: `Verify a proof file. The verifying key is rebuilt, not read: the proof file's metadata
names the AIRs (in key order) and their trace heights, and the preset the proof was made with;
each AIR is found by name as 'metalprove trace check' finds a section's AIR, and its key is
generated again (preprocessed traces committed with the CPU reference backend). --trace FILE
takes the AIRs from the sections of a trace file instead (for proof files without metadata).

Parameters: --preset NAME, else the --config file's params section, else the preset recorded in the
proof file, else ` + prover.DefaultPreset + `. Targets below 100 bits (the test preset) need
--allow-insecure. The proof file records the digest of the parameters it was made with; other
parameters reject it.

--openvm FILE verifies the bare codec bytes of a proof (Proof::encode of OpenVM stark-backend
v2.0.1, as 'metalprove proof export' writes them and OpenVM's prover makes them): such a file
names neither AIRs nor parameters, so --trace gives the AIRs and their heights and --preset (or
the config file) the parameters.

--key PK verifies against a proving-key file (metalprove keygen; OpenVM's verifying key
imported with keygen --openvm-vk): the verifying key and parameters are the key's, not rebuilt.
A proof file made with a key records the key's pre_hash: another key is refused before
verifying, and such a proof needs --key. With --openvm, --key verifies a proof made by OpenVM's
own prover for that key.

The text output names the AIRs and the heights verified. With --json one object is printed
whatever the outcome: valid, error and exit_code, also for a malformed file (exit 3).

Exit status: 0 when the proof is valid; 4 when it is rejected (the stage and reason are printed);
3 when the file is missing, truncated or malformed (not a metalprove proof file: bad magic), or
names an unknown AIR; 2 for bad flags.`,
		Example: `  metalprove verify k16.proof
  metalprove verify fib.proof --preset test --allow-insecure --json
  metalprove verify bare.proof --trace k16.trace
  metalprove verify --openvm keccakf-16.proof --trace k16.trace --preset app-100bit
  metalprove verify --key app.pk app.proof
  metalprove verify --openvm app.bare --key app.pk`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			switch {
			case opts.OpenVM != "" && len(args) > 0:
				return cmdutil.Usagef("give either a proof file or --openvm FILE, not both")
			case opts.OpenVM != "" && opts.Trace == "" && opts.Key == "":
				return cmdutil.Usagef("--openvm needs --trace FILE or --key PK: bare OpenVM proof bytes do not name their AIRs")
			case opts.Key != "" && opts.Trace != "":
				return cmdutil.Usagef("--key and --trace conflict: the key names the AIRs")
			case opts.Key != "" && opts.Preset != "":
				return cmdutil.Usagef("--key and --preset conflict: the parameters are the key's")
			case opts.OpenVM == "" && len(args) == 0:
				return cmdutil.Usagef("verify needs a proof file (or --openvm FILE --trace TRACE)")
			}
			if len(args) > 0 {
				opts.Proof = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return verifyRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.OpenVM, "openvm", "", "verify this file of bare OpenVM proof codec bytes (needs --trace for the AIRs)")
	fl.StringVar(&opts.Trace, "trace", "", "take the AIRs from this trace file's sections instead of the proof's metadata")
	fl.StringVar(&opts.Key, "key", "", "verify against this proving-key file (metalprove keygen): its verifying key and parameters")
	fl.StringVar(&opts.Preset, "preset", "", "preset (default: the config file's params section, else the proof file's preset)")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	return cmd
}

// verifyRun verifies through prover.Verify and prints its report: with --json one object
// whatever the outcome, the error still deciding the exit status.
func verifyRun(opts *Options) error {
	rep, err := prover.Verify(opts.VerifyRequest)
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil && err == nil {
			return jerr
		}
		return err
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: valid proof of %s (AIRs from %s) under %s; %d bytes; verified in %.1f ms\n",
		rep.Proof, prover.AirList(rep.AIRs), rep.AIRsFrom, rep.Params, rep.ProofBytes, rep.TimesMS["verify"])
	return err
}
