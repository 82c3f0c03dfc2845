// Package verify implements `metalprove verify`: it reads a proof file written by `metalprove
// prove` (or, with --openvm, the bare codec bytes of a proof made by OpenVM's own prover),
// rebuilds the verifying key from the AIRs its metadata names (or from the sections of a trace
// file) with the CPU reference backend, and verifies the proof.
package verify

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
)

// Options are the inputs of the verify command.
type Options struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Proof string
	// OpenVM, when set, is a file of bare proof codec bytes (Proof::encode, as OpenVM's prover
	// writes them) to verify instead of a proof file; Trace must name the AIRs.
	OpenVM string
	// Trace, when set, names the AIRs by the sections of this trace file instead of the proof
	// file's metadata.
	Trace string
	// Key, when set, is the proving-key file the proof was made with: the verifying key and the
	// parameters come from it.
	Key           string
	Preset        string
	AllowInsecure bool
	JSON          bool
}

// Report is what `metalprove verify --json` prints.
type Report struct {
	Proof        string               `json:"proof"`
	Valid        bool                 `json:"valid"`
	Error        string               `json:"error,omitempty"`
	Params       string               `json:"params"`
	ParamsDigest string               `json:"params_digest"`
	AIRs         []stark.ProofMetaAir `json:"airs"`
	// AIRsFrom is "metadata" or the trace file.
	AIRsFrom   string             `json:"airs_from"`
	ProofBytes int                `json:"proof_bytes"`
	TimesMS    map[string]float64 `json:"times_ms"`
	// ExitCode is the command's exit status (0 valid, 4 rejected, 3 malformed input, …): with
	// --json one object is printed whatever the outcome.
	ExitCode int `json:"exit_code"`
}

// NewCmdVerify returns the verify command. runF, when not nil, replaces verifyRun (for tests).
func NewCmdVerify(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
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

func verifyRun(opts *Options) error {
	rep := &Report{Proof: opts.Proof, TimesMS: map[string]float64{}, AIRsFrom: "metadata"}
	if opts.OpenVM != "" {
		rep.Proof = opts.OpenVM
	}
	err := verify(opts, rep)
	rep.Valid = err == nil
	rep.ExitCode = int(cmdutil.ExitCodeFor(err))
	if err != nil {
		rep.Error = err.Error()
		if opts.Settings != nil {
			rep.Error = opts.Settings.Explain(rep.Error)
		}
	}
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

// verify fills rep and returns nil for a valid proof.
func verify(opts *Options, rep *Report) error {
	log := opts.Logger
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	start := time.Now()
	var meta *stark.ProofMeta
	var env []byte
	if opts.OpenVM == "" {
		var err error
		if meta, env, err = prover.ReadProofFile(opts.Proof); err != nil {
			return err
		}
	} else {
		b, err := prover.ReadBounded(opts.OpenVM, stark.MaxProofFileSize)
		if err != nil {
			return err
		}
		if prover.IsProofFile(b) {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: a metalprove proof file, not bare OpenVM proof bytes: verify it without --openvm (or 'metalprove proof export' it first)", opts.OpenVM)}
		}
		env = b
	}
	var key *prover.Key
	var airsMeta []stark.ProofMetaAir
	switch {
	case opts.Key != "":
		var err error
		if key, err = prover.ReadKey(opts.Key, opts.AllowInsecure); err != nil {
			return err
		}
		if err := prover.CheckProofKey(key, rep.Proof, meta); err != nil {
			return err
		}
		rep.AIRsFrom = opts.Key
	case meta != nil && meta.KeyPreHash != nil && opts.Trace == "":
		return cmdutil.Usagef("%s was made with a proving key (pre_hash %v): verify it with --key FILE", opts.Proof, meta.KeyPreHash)
	case opts.Trace != "":
		var err error
		if airsMeta, err = prover.TraceAirs(opts.Trace); err != nil {
			return err
		}
		rep.AIRsFrom = opts.Trace
	case meta != nil:
		airsMeta = meta.AIRs
	default:
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: the proof file has no metadata naming its AIRs; pass --trace FILE", opts.Proof)}
	}
	rep.AIRs = airsMeta
	var res *prover.Resolved
	var err error
	if key != nil {
		res = &prover.Resolved{Params: key.Params(), Preset: key.Preset, Source: key.ParamsSource(), SecurityBits: key.SecurityBits}
	} else if res, err = prover.ResolveProofParams(opts.Preset, opts.Settings, meta, opts.Proof, opts.AllowInsecure); err != nil {
		return err
	}
	p := res.Params
	rep.Params = res.Source
	dg := stark.ParamsDigest(p)
	rep.ParamsDigest = hex.EncodeToString(dg[:])

	airs := make([]air.Air, len(airsMeta))
	for i, am := range airsMeta {
		if airs[i], err = examples.AirForHeight(am.Name, am.Height); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: AIR %d: %w", rep.Proof, i, err)}
		}
	}
	rep.TimesMS["read"] = float64(time.Since(start).Microseconds()) / 1000

	var proof *stark.Proof
	if opts.OpenVM != "" {
		lim := stark.LimitsFor(p)
		if proof, err = stark.DecodeProof(env, &lim); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: not a proof for %s: %w", opts.OpenVM, res.Source, err)}
		}
		rep.ProofBytes = len(env)
	} else {
		// The envelope records the digest of the prover's parameters (offset 12, envelope.go): a
		// mismatch is a proof for other parameters, a rejection rather than a malformed file.
		if len(env) >= 44 && bytes.HasPrefix(env, []byte(stark.EnvelopeMagic)) && !bytes.Equal(env[12:44], dg[:]) {
			return rejected(rep, fmt.Errorf("%w: the proof was made for parameters with digest %x, not %s (%x)", stark.ErrParamsMismatch, env[12:44], res.Source, dg))
		}
		if proof, err = stark.UnmarshalProofFile(env, p); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Proof, err)}
		}
		// UnmarshalProofFile checked the envelope's length field: the rest is the spec encoding.
		rep.ProofBytes = len(env) - stark.EnvelopeOverhead
	}

	start = time.Now()
	var vk *stark.VerifyingKey
	if key != nil {
		vk = key.VerifyingKey()
		for i, td := range proof.TraceVData {
			if td != nil && i < len(key.Airs) && td.LogHeight >= 0 && td.LogHeight < 31 {
				rep.AIRs = append(rep.AIRs, stark.ProofMetaAir{Name: key.File.Names[i], Height: 1 << td.LogHeight})
			}
		}
	} else {
		pk, err := stark.Keygen(p, airs, nil, cpuref.New())
		if err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", rep.Proof, err)}
		}
		vk = pk.VK
	}
	rep.TimesMS["keygen"] = float64(time.Since(start).Microseconds()) / 1000
	if len(proof.TraceVData) == len(airsMeta) {
		for i, td := range proof.TraceVData {
			if td != nil && td.LogHeight >= 0 && td.LogHeight < 31 && 1<<td.LogHeight != airsMeta[i].Height {
				return rejected(rep, fmt.Errorf("AIR %d (%s): the proof has height 2^%d, the AIR list says %d", i, airsMeta[i].Name, td.LogHeight, airsMeta[i].Height))
			}
		}
	}

	start = time.Now()
	err = stark.Verify(vk, proof, p)
	rep.TimesMS["verify"] = float64(time.Since(start).Microseconds()) / 1000
	log.Info().Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Bool("valid", err == nil).Msg("verified")
	if err != nil {
		return rejected(rep, err)
	}
	return nil
}

// rejected is a proof the verifier rejected (exit 4).
func rejected(rep *Report, err error) error {
	return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: proof rejected: %w", rep.Proof, err)}
}
