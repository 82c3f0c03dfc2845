// Package verify implements `metalprove verify`: it reads a proof file written by `metalprove
// prove`, rebuilds the verifying key from the AIRs its metadata names (or from the sections of a
// trace file) with the CPU reference backend, and verifies the proof.
package verify

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/cmd/prove"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// Options are the inputs of the verify command.
type Options struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings

	Proof string
	// Trace, when set, names the AIRs by the sections of this trace file instead of the proof
	// file's metadata.
	Trace         string
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
}

// NewCmdVerify returns the verify command. runF, when not nil, replaces verifyRun (for tests).
func NewCmdVerify(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings}
	cmd := &cobra.Command{
		Use:   "verify PROOF",
		Short: "Verify a proof file written by metalprove prove",
		Long: `Verify a proof file. The verifying key is rebuilt, not read: the proof file's metadata
names the AIRs (in key order) and their trace heights, and the preset the proof was made with;
each AIR is found by name as 'metalprove trace check' finds a section's AIR, and its key is
generated again (preprocessed traces committed with the CPU reference backend). --trace FILE
takes the AIRs from the sections of a trace file instead (for proof files without metadata).

Parameters: --preset NAME, else the --config file's params section, else the preset recorded in the
proof file, else ` + prove.DefaultPreset + `. Targets below 100 bits (the test preset) need
--allow-insecure. The proof file records the digest of the parameters it was made with; other
parameters reject it.

Exit status: 0 when the proof is valid; 4 when it is rejected (the stage and reason are printed);
3 when the file is missing, truncated or malformed, or names an unknown AIR; 2 for bad flags.`,
		Example: `  metalprove verify p16.bin
  metalprove verify fib.proof --preset test --allow-insecure --json
  metalprove verify bare.proof --trace k16.bin`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Proof = args[0]
			if runF != nil {
				return runF(opts)
			}
			return verifyRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Trace, "trace", "", "take the AIRs from this trace file's sections instead of the proof's metadata")
	fl.StringVar(&opts.Preset, "preset", "", "preset (default: the config file's params section, else the proof file's preset)")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters with a security target below 100 bits")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	return cmd
}

// traceAirs lists the sections of a trace file (names and heights) without reading the cells.
func traceAirs(path string) ([]stark.ProofMetaAir, error) {
	r, err := tracefile.Open(path)
	if err != nil {
		return nil, &cmdutil.BadInputError{Err: err}
	}
	defer r.Close()
	var out []stark.ProofMetaAir
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err == nil {
			err = r.SkipCells()
		}
		if err != nil {
			return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, err)}
		}
		out = append(out, stark.ProofMetaAir{Name: h.Name, Height: h.Height})
	}
	if len(out) == 0 {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: no sections", path)}
	}
	return out, nil
}

func verifyRun(opts *Options) error {
	log := opts.Logger
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	rep := &Report{Proof: opts.Proof, TimesMS: map[string]float64{}, AIRsFrom: "metadata"}
	start := time.Now()
	meta, env, err := stark.ReadProofFileRaw(opts.Proof)
	if err != nil {
		return &cmdutil.BadInputError{Err: err}
	}
	airsMeta := []stark.ProofMetaAir(nil)
	switch {
	case opts.Trace != "":
		if airsMeta, err = traceAirs(opts.Trace); err != nil {
			return err
		}
		rep.AIRsFrom = opts.Trace
	case meta != nil:
		airsMeta = meta.AIRs
	default:
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: the proof file has no metadata naming its AIRs; pass --trace FILE", opts.Proof)}
	}
	rep.AIRs = airsMeta
	fallback := ""
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	if meta != nil {
		switch meta.Params {
		case "preset":
			fallback = meta.Preset
		case "config":
			if opts.Preset == "" && cfg == "" {
				return cmdutil.Usagef("%s was made with config-file parameters: pass the same --config (or --preset)", opts.Proof)
			}
		}
	}
	res, err := prove.ResolveParams(opts.Preset, cfg, fallback, opts.AllowInsecure)
	if err != nil {
		return err
	}
	p := res.Params
	rep.Params = res.Source
	dg := stark.ParamsDigest(p)
	rep.ParamsDigest = hex.EncodeToString(dg[:])

	airs := make([]air.Air, len(airsMeta))
	for i, am := range airsMeta {
		if airs[i], err = examples.AirForHeight(am.Name, am.Height); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: AIR %d: %w", opts.Proof, i, err)}
		}
	}
	rep.TimesMS["read"] = float64(time.Since(start).Microseconds()) / 1000

	// The envelope records the digest of the prover's parameters (offset 12, envelope.go): a
	// mismatch is a proof for other parameters, a rejection rather than a malformed file.
	if len(env) >= 44 && bytes.HasPrefix(env, []byte(stark.EnvelopeMagic)) && !bytes.Equal(env[12:44], dg[:]) {
		return fail(opts, rep, fmt.Errorf("%w: the proof was made for parameters with digest %x, not %s (%x)", stark.ErrParamsMismatch, env[12:44], res.Source, dg))
	}
	proof, err := stark.UnmarshalProofFile(env, p)
	if err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Proof, err)}
	}
	// UnmarshalProofFile checked the envelope's length field: the rest is the spec encoding.
	rep.ProofBytes = len(env) - stark.EnvelopeOverhead

	start = time.Now()
	pk, err := stark.Keygen(p, airs, nil, cpuref.New())
	if err != nil {
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", opts.Proof, err)}
	}
	rep.TimesMS["keygen"] = float64(time.Since(start).Microseconds()) / 1000
	if len(proof.TraceVData) == len(airsMeta) {
		for i, td := range proof.TraceVData {
			if td != nil && td.LogHeight >= 0 && td.LogHeight < 31 && 1<<td.LogHeight != airsMeta[i].Height {
				return fail(opts, rep, fmt.Errorf("AIR %d (%s): the proof has height 2^%d, the AIR list says %d", i, airsMeta[i].Name, td.LogHeight, airsMeta[i].Height))
			}
		}
	}

	start = time.Now()
	err = stark.Verify(pk.VK, proof, p)
	rep.TimesMS["verify"] = float64(time.Since(start).Microseconds()) / 1000
	log.Info().Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Bool("valid", err == nil).Msg("verified")
	if err != nil {
		return fail(opts, rep, err)
	}
	rep.Valid = true
	return report(opts, rep)
}

// fail reports a rejected proof (exit 4).
func fail(opts *Options, rep *Report, err error) error {
	rep.Valid = false
	rep.Error = err.Error()
	if opts.JSON {
		if rerr := report(opts, rep); rerr != nil {
			return rerr
		}
	}
	return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: proof rejected: %w", opts.Proof, err)}
}

func report(opts *Options, rep *Report) error {
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if !rep.Valid {
		return nil
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s: valid proof of %d AIRs (AIRs from %s) under %s; %d bytes; verified in %.1f ms\n",
		rep.Proof, len(rep.AIRs), rep.AIRsFrom, rep.Params, rep.ProofBytes, rep.TimesMS["verify"])
	return err
}
