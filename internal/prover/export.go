package prover

import (
	"encoding/hex"
	"fmt"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/keyfile"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// VKExportRequest are the inputs of ExportVK: what `metalprove vk export` takes from its flags.
// One of Trace and Key names the AIRs.
type VKExportRequest struct {
	// Trace is a trace file whose sections name the built-in AIRs and their heights.
	Trace string
	// Key is a proving-key file to export instead of a trace file's AIRs.
	Key string
	// Output is the file the verifying key is written to.
	Output string
	// PreprocessedOut, when set, receives the preprocessed traces as a trace file (not Output).
	PreprocessedOut string
	// Preset is a preset name for Trace's AIRs, or "" for the config file's params section
	// (else DefaultPreset). Not with Key.
	Preset        string
	AllowInsecure bool

	// Settings are the global settings (config file; nil: none).
	Settings *cmdutil.Settings
}

// VKExportReport is what ExportVK wrote: what `metalprove vk export` prints.
type VKExportReport struct {
	Output string `json:"output"`
	// AIRs are the key's AIR names, in key order.
	AIRs []string `json:"airs"`
	// Params describes the parameters; ParamsDigest is their SHA-256 (hex).
	Params       string   `json:"params"`
	ParamsDigest string   `json:"params_digest"`
	Bytes        int      `json:"bytes"`
	PreHash      []uint32 `json:"pre_hash"`
	// PreprocessedOut is the trace file of the Preprocessed traces ("" when none was asked for).
	PreprocessedOut string `json:"preprocessed_out,omitempty"`
	Preprocessed    int    `json:"preprocessed,omitempty"`
}

// ExportVK writes the verifying key of a trace file's built-in AIRs (keygen under the resolved
// parameters) or of a proving-key file in OpenVM's postcard form (MultiStarkVerifyingKey,
// parameters and pre_hash included), atomically, the output checked and its temporary file
// created first; with PreprocessedOut also the AIRs' preprocessed traces as a trace file. Errors
// carry the cmdutil types of the exit status.
func ExportVK(req VKExportRequest) (*VKExportReport, error) {
	input := req.Trace
	if req.Key != "" {
		input = req.Key
	}
	if req.PreprocessedOut != "" {
		if req.PreprocessedOut == req.Output {
			return nil, cmdutil.Usagef("--preprocessed-out and -o are the same file")
		}
		if err := cmdutil.CheckOutput("--preprocessed-out", req.PreprocessedOut, input, configFile(req.Settings)); err != nil {
			return nil, err
		}
	}
	out, err := cmdutil.CreateOutput("-o", req.Output, input, configFile(req.Settings))
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	var f *keyfile.File
	var source string
	if req.Key != "" {
		k, err := ReadKey(req.Key, req.AllowInsecure)
		if err != nil {
			return nil, err
		}
		f, source = k.File, k.ParamsSource()
	} else {
		res, err := ResolveParams(req.Preset, req.Settings, "", req.AllowInsecure)
		if err != nil {
			return nil, err
		}
		airs, _, err := BuiltinAirs(req.Trace)
		if err != nil {
			return nil, err
		}
		if f, err = KeygenBuiltin(res.Params, airs, keyfile.Note{Source: "trace " + req.Trace}); err != nil {
			return nil, err
		}
		source = res.Source
	}
	b := f.MVK.AppendKeyPostcard(nil, f.PreHash)
	if _, err := out.Write(b); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, err)
	}
	pre := PreprocessedSections(f)
	if req.PreprocessedOut != "" {
		if len(pre) == 0 {
			return nil, cmdutil.Usagef("--preprocessed-out: no AIR of the key has a preprocessed trace")
		}
		if err := tracefile.WriteAll(req.PreprocessedOut, pre); err != nil {
			return nil, fmt.Errorf("write %s: %w", req.PreprocessedOut, err)
		}
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, err)
	}
	dg := stark.ParamsDigest(f.MVK.Params)
	rep := &VKExportReport{Output: req.Output, AIRs: f.Names, Params: source, ParamsDigest: hex.EncodeToString(dg[:]),
		Bytes: len(b), PreHash: stark.KeyPreHashValues(f.PreHash)}
	if req.PreprocessedOut != "" {
		rep.PreprocessedOut, rep.Preprocessed = req.PreprocessedOut, len(pre)
	}
	return rep, nil
}

// ProofExportRequest are the inputs of ExportProof: what `metalprove proof export` takes from
// its arguments.
type ProofExportRequest struct {
	// Proof is the proof file (Prove) whose proof is exported.
	Proof string
	// Output is the file the bare codec bytes are written to.
	Output string
	// Preset is a preset name, or "" for the config file's params section, else the proof
	// file's preset.
	Preset string
	// Key is the proving-key file the proof was made with (its parameters).
	Key string

	// Settings are the global settings (config file; nil: none).
	Settings *cmdutil.Settings
}

// ProofExportReport is what ExportProof wrote: what `metalprove proof export` prints.
type ProofExportReport struct {
	Output string `json:"output"`
	Proof  string `json:"proof"`
	// Bytes counts the codec bytes written, of CodecVersion.
	Bytes        int    `json:"bytes"`
	CodecVersion uint32 `json:"codec_version"`
	// Params describes the parameters the proof was made under.
	Params string `json:"params"`
}

// ExportProof writes the proof inside a proof file as bare codec bytes (OpenVM's Proof::encode),
// without the metalprove envelope or metadata, atomically, the output checked and its temporary
// file created first. The proof file is checked first (envelope, CRC, the parameters' digest, a
// full decode) with the parameters it names, req.Preset's or req.Key's; nothing is verified, so
// parameters below 100 bits are accepted. Errors carry the cmdutil types of the exit status.
func ExportProof(req ProofExportRequest) (*ProofExportReport, error) {
	out, err := cmdutil.CreateOutput("-o", req.Output, req.Proof, configFile(req.Settings))
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	meta, env, err := ReadProofFile(req.Proof)
	if err != nil {
		return nil, err
	}
	var res *Resolved
	if req.Key != "" {
		k, err := ReadKey(req.Key, true)
		if err != nil {
			return nil, err
		}
		if err := CheckProofKey(k, req.Proof, meta); err != nil {
			return nil, err
		}
		res = k.Resolved()
	} else if res, err = ResolveProofParams(req.Preset, req.Settings, meta, req.Proof, true); err != nil {
		return nil, err
	}
	if _, err := stark.UnmarshalProofFile(env, res.Params); err != nil {
		return nil, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", req.Proof, err)}
	}
	// A valid envelope: the proof's codec bytes lie between its header and its CRC.
	body := env[stark.EnvelopeOverhead-4 : len(env)-4]
	if _, err := out.Write(body); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, err)
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, err)
	}
	return &ProofExportReport{Output: req.Output, Proof: req.Proof, Bytes: len(body), CodecVersion: stark.CodecVersion, Params: res.Source}, nil
}
