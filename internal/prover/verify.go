package prover

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/stark"
)

// VerifyRequest are the inputs of Verify: what `metalprove verify` takes from its arguments.
type VerifyRequest struct {
	// Proof is the proof file (Prove) to verify.
	Proof string
	// OpenVM, when set, is a file of bare proof codec bytes (Proof::encode, as OpenVM's prover
	// writes them) to verify instead of a proof file; Trace or Key must name the AIRs.
	OpenVM string
	// Trace, when set, names the AIRs by the sections of this trace file instead of the proof
	// file's metadata.
	Trace string
	// Key, when set, is the proving-key file the proof was made with: the verifying key and the
	// parameters come from it (not with Trace or Preset).
	Key string
	// Preset is a preset name, or "" for the config file's params section, else the proof
	// file's preset.
	Preset        string
	AllowInsecure bool

	// Settings are the global settings (config file; nil: none).
	Settings *cmdutil.Settings
	// Logger receives the verification record (nil: none).
	Logger *zerolog.Logger
}

// VerifyReport is what Verify found: what `metalprove verify --json` prints.
type VerifyReport struct {
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

// Verify verifies a proof file (or bare OpenVM proof bytes): it reads the file, takes the AIRs
// from its metadata, a trace file or a proving key, resolves the parameters, decodes the proof,
// rebuilds the verifying key (keygen on the CPU reference backend; the key's own with req.Key)
// and runs stark.Verify. The report is returned whatever the outcome, Valid, Error (its flags
// explained by req.Settings) and ExitCode filled in; the error is nil for a valid proof, else of
// the cmdutil type of the exit status (a rejected proof is a CheckFailedError, a malformed file a
// BadInputError).
func Verify(req VerifyRequest) (*VerifyReport, error) {
	rep := &VerifyReport{Proof: req.Proof, TimesMS: map[string]float64{}, AIRsFrom: "metadata"}
	if req.OpenVM != "" {
		rep.Proof = req.OpenVM
	}
	err := verify(req, rep)
	rep.Valid = err == nil
	rep.ExitCode = int(cmdutil.ExitCodeFor(err))
	if err != nil {
		rep.Error = req.Settings.Explain(err.Error())
	}
	return rep, err
}

// verify fills rep and returns nil for a valid proof.
func verify(req VerifyRequest, rep *VerifyReport) error {
	log := nopLogger(req.Logger)
	start := time.Now()
	var meta *stark.ProofMeta
	var env []byte
	if req.OpenVM == "" {
		var err error
		if meta, env, err = ReadProofFile(req.Proof); err != nil {
			return err
		}
	} else {
		b, err := ReadBounded(req.OpenVM, stark.MaxProofFileSize)
		if err != nil {
			return err
		}
		if IsProofFile(b) {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: a metalprove proof file, not bare OpenVM proof bytes: verify it without --openvm (or 'metalprove proof export' it first)", req.OpenVM)}
		}
		env = b
	}
	var key *Key
	var airsMeta []stark.ProofMetaAir
	switch {
	case req.Key != "":
		var err error
		if key, err = ReadKey(req.Key, req.AllowInsecure); err != nil {
			return err
		}
		if err := CheckProofKey(key, rep.Proof, meta); err != nil {
			return err
		}
		rep.AIRsFrom = req.Key
	case meta != nil && meta.KeyPreHash != nil && req.Trace == "":
		return cmdutil.Usagef("%s was made with a proving key (pre_hash %v): verify it with --key FILE", req.Proof, meta.KeyPreHash)
	case req.Trace != "":
		var err error
		if airsMeta, err = TraceAirs(req.Trace); err != nil {
			return err
		}
		rep.AIRsFrom = req.Trace
	case meta != nil:
		airsMeta = meta.AIRs
	default:
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: the proof file has no metadata naming its AIRs; pass --trace FILE", req.Proof)}
	}
	rep.AIRs = airsMeta
	var res *Resolved
	var err error
	if key != nil {
		res = key.Resolved()
	} else if res, err = ResolveProofParams(req.Preset, req.Settings, meta, req.Proof, req.AllowInsecure); err != nil {
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
	rep.TimesMS["read"] = ms(time.Since(start))

	var proof *stark.Proof
	if req.OpenVM != "" {
		lim := stark.LimitsFor(p)
		if proof, err = stark.DecodeProof(env, &lim); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: not a proof for %s: %w", req.OpenVM, res.Source, err)}
		}
		rep.ProofBytes = len(env)
	} else {
		// The envelope records the digest of the prover's parameters (offset 12, envelope.go): a
		// mismatch is a proof for other parameters, a rejection rather than a malformed file.
		if len(env) >= 44 && bytes.HasPrefix(env, []byte(stark.EnvelopeMagic)) && !bytes.Equal(env[12:44], dg[:]) {
			return rejected(rep, fmt.Errorf("%w: the proof was made for parameters with digest %x, not %s (%x)", stark.ErrParamsMismatch, env[12:44], res.Source, dg))
		}
		if proof, err = stark.UnmarshalProofFile(env, p); err != nil {
			return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", req.Proof, err)}
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
	rep.TimesMS["keygen"] = ms(time.Since(start))
	if len(proof.TraceVData) == len(airsMeta) {
		for i, td := range proof.TraceVData {
			if td != nil && td.LogHeight >= 0 && td.LogHeight < 31 && 1<<td.LogHeight != airsMeta[i].Height {
				return rejected(rep, fmt.Errorf("AIR %d (%s): the proof has height 2^%d, the AIR list says %d", i, airsMeta[i].Name, td.LogHeight, airsMeta[i].Height))
			}
		}
	}

	start = time.Now()
	err = stark.Verify(vk, proof, p)
	rep.TimesMS["verify"] = ms(time.Since(start))
	log.Info().Str("elapsed", time.Since(start).Round(time.Microsecond).String()).Bool("valid", err == nil).Msg("verified")
	if err != nil {
		return rejected(rep, err)
	}
	return nil
}

// rejected is a proof the verifier rejected (exit 4).
func rejected(rep *VerifyReport, err error) error {
	return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: proof rejected: %w", rep.Proof, err)}
}
