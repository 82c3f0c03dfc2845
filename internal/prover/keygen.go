package prover

import (
	"encoding/hex"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/keyfile"
	"github.com/metalprove/metalprove/internal/stark"
)

// KeygenRequest are the inputs of Keygen: what `metalprove keygen` takes from its flags. One of
// Example, Trace and OpenVMVK names the AIRs.
type KeygenRequest struct {
	// Example names a built-in example (its AIRs; Rows their height where it matters).
	Example string
	Rows    int
	// Trace is a trace file whose sections name built-in AIRs.
	Trace string
	// OpenVMVK is OpenVM's verifying key (postcard of MultiStarkVerifyingKey); Preprocessed its
	// preprocessed traces; Names the AIRs' names, comma-separated.
	OpenVMVK     string
	Preprocessed string
	Names        string
	// Output is the proving-key file to write.
	Output string
	// Preset is a preset name for built-in AIRs, or "" for the config file's params section
	// (else DefaultPreset). Not with OpenVMVK.
	Preset        string
	AllowInsecure bool
	// Version is the metalprove version the key file records as its maker.
	Version string

	// Settings are the global settings (config file; nil: none).
	Settings *cmdutil.Settings
	// Logger receives the record of the key written (nil: none).
	Logger *zerolog.Logger
}

// KeygenReport is what Keygen wrote: what `metalprove keygen --json` prints.
type KeygenReport struct {
	Output       string      `json:"output"`
	Source       string      `json:"source"`
	Params       string      `json:"params"`
	ParamsDigest string      `json:"params_digest"`
	SecurityBits int         `json:"security_bits"`
	PreHash      []uint32    `json:"pre_hash"`
	AIRs         []KeyAirRow `json:"airs"`
	Bytes        int         `json:"bytes"`
}

// KeyAirRow is one AIR of a proving key, as reported.
type KeyAirRow struct {
	Name               string `json:"name"`
	PreprocessedWidth  int    `json:"preprocessed_width,omitempty"`
	PreprocessedHeight int    `json:"preprocessed_height,omitempty"`
	CachedMains        []int  `json:"cached_mains,omitempty"`
	CommonMain         int    `json:"common_main"`
	PublicValues       int    `json:"public_values"`
	Constraints        int    `json:"constraints"`
	Interactions       int    `json:"interactions"`
	Required           bool   `json:"required,omitempty"`
}

// exampleAirs are the AIRs of a built-in example (keccakf's does not depend on the count).
func exampleAirs(name string, rows int) ([]air.Air, error) {
	e, err := examples.Lookup(name)
	if err != nil {
		return nil, cmdutil.Usagef("--example: %v", err)
	}
	o := examples.Options{Rows: rows}
	if e.Takes(examples.FlagPerms) {
		o.Perms = 1
	}
	secs, err := e.Generate(o)
	if err != nil {
		return nil, cmdutil.Usagef("%v", err)
	}
	airs := make([]air.Air, len(secs))
	for i, s := range secs {
		airs[i] = s.Air
	}
	return airs, nil
}

// Keygen writes a proving-key file (internal/keyfile): the output checked and its temporary file
// created first, the key made for built-in AIRs (an example's, or those a trace file names, under
// the resolved parameters: KeygenBuiltin) or imported from OpenVM's verifying key
// (ImportOpenVMKey), its security checked (NewKey) and the file written atomically. Errors carry
// the cmdutil types of the exit status.
func Keygen(req KeygenRequest) (*KeygenReport, error) {
	out, err := cmdutil.CreateOutput("-o", req.Output, req.Trace+req.OpenVMVK, configFile(req.Settings))
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	if req.Preprocessed != "" && req.Preprocessed == req.Output {
		return nil, cmdutil.Usagef("-o is the --preprocessed file")
	}
	note := keyfile.Note{CreatedBy: "metalprove " + req.Version}
	var f *keyfile.File
	if req.OpenVMVK != "" {
		names, err := ParseNames(req.Names)
		if err != nil {
			return nil, err
		}
		note.Source = "openvm-vk " + req.OpenVMVK
		if f, err = ImportOpenVMKey(req.OpenVMVK, req.Preprocessed, names, note); err != nil {
			return nil, err
		}
	} else {
		res, err := ResolveParams(req.Preset, req.Settings, "", req.AllowInsecure)
		if err != nil {
			return nil, err
		}
		note.Preset = res.Preset
		var airs []air.Air
		if req.Example != "" {
			note.Source = "example " + req.Example
			airs, err = exampleAirs(req.Example, req.Rows)
		} else {
			note.Source = "trace " + req.Trace
			airs, _, err = BuiltinAirs(req.Trace)
		}
		if err != nil {
			return nil, err
		}
		if f, err = KeygenBuiltin(res.Params, airs, note); err != nil {
			return nil, err
		}
	}
	k, err := NewKey(req.Output, f, req.AllowInsecure)
	if err != nil {
		return nil, err
	}
	b, err := keyfile.Marshal(f)
	if err != nil {
		return nil, err
	}
	if _, err := out.Write(b); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, cmdutil.UnwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("write %s: %w", req.Output, cmdutil.UnwrapPath(err))
	}
	dg := stark.ParamsDigest(f.MVK.Params)
	params := "the key's own parameters (no preset)"
	if k.Preset != "" {
		params = "preset " + k.Preset
	}
	rep := &KeygenReport{Output: req.Output, Source: note.Source, Params: params, ParamsDigest: hex.EncodeToString(dg[:]),
		SecurityBits: k.SecurityBits, PreHash: stark.KeyPreHashValues(f.PreHash), Bytes: len(b)}
	for i, vk := range f.MVK.PerAir {
		row := KeyAirRow{Name: f.Names[i], CachedMains: vk.Width.CachedMains, CommonMain: vk.Width.CommonMain, PublicValues: vk.NumPublicValues,
			Constraints: len(vk.DAG.ConstraintIdx), Interactions: len(vk.DAG.Interactions), Required: vk.IsRequired}
		if m := f.Preprocessed[i]; m != nil {
			row.PreprocessedWidth, row.PreprocessedHeight = m.Width, m.Height
		}
		rep.AIRs = append(rep.AIRs, row)
	}
	nopLogger(req.Logger).Info().Str("key", req.Output).Int("airs", len(rep.AIRs)).Int("bytes", len(b)).Msg("proving key written")
	return rep, nil
}
