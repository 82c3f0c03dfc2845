package prover

import (
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// DefaultPreset is the preset used when neither --preset nor a config params section is given.
const DefaultPreset = "app-100bit"

// Resolved are the parameters a command runs with.
type Resolved struct {
	Params sp.SystemParams `json:"params"`
	// Preset is the preset name ("" for config-file parameters).
	Preset string `json:"preset"`
	// Source describes them: "preset test", "params section of cfg.yaml".
	Source       string `json:"source"`
	SecurityBits int    `json:"security_bits"`
}

// check validates parameters resolved elsewhere (a resident prover's client): valid, a preset's
// own where they name one, and a target below 100 bits only with allowInsecure.
func (r *Resolved) check(allowInsecure bool) (*Resolved, error) {
	if r.Preset != "" {
		p, info, err := sp.Preset(r.Preset, sp.DefaultAppLogStackedHeight)
		if err != nil {
			return nil, cmdutil.Usagef("--preset: %v", err)
		}
		if !p.Equal(r.Params) || info.SecurityBits != r.SecurityBits {
			return nil, cmdutil.Usagef("preset %s: the parameters given are not the preset's", r.Preset)
		}
	}
	if err := r.Params.Validate(); err != nil {
		return nil, cmdutil.Usagef("%s: %v", r.Source, err)
	}
	if r.SecurityBits < sp.SecurityBitsTarget && !allowInsecure {
		return nil, cmdutil.Usagef("%s has a %d-bit security target (INSECURE); pass --allow-insecure to use it", r.Source, r.SecurityBits)
	}
	return r, nil
}

// ResolveParams picks the parameters: preset, else the params section of the settings' config
// file, else fallback (a preset name; "" means DefaultPreset). Targets below 100 bits need
// allowInsecure.
func ResolveParams(preset string, settings *cmdutil.Settings, fallback string, allowInsecure bool) (*Resolved, error) {
	var r *Resolved
	if cfg := configFile(settings); preset == "" && cfg != "" {
		p, spec, err := ConfigParams(cfg, settings.ConfigData)
		switch {
		case err == nil:
			r = &Resolved{Params: p, Source: "params section of " + cfg, SecurityBits: spec.SecurityBits}
		case !errors.Is(err, sp.ErrNoParams):
			return nil, &cmdutil.UsageError{Err: err}
		}
	}
	if r == nil {
		if preset == "" {
			preset = fallback
		}
		if preset == "" {
			preset = DefaultPreset
		}
		p, info, err := sp.Preset(preset, sp.DefaultAppLogStackedHeight)
		if err != nil {
			return nil, cmdutil.Usagef("--preset: %v", err)
		}
		r = &Resolved{Params: p, Preset: preset, Source: "preset " + preset, SecurityBits: info.SecurityBits}
	}
	if err := r.Params.Validate(); err != nil {
		return nil, cmdutil.Usagef("%s: %v", r.Source, err)
	}
	if r.SecurityBits < sp.SecurityBitsTarget && !allowInsecure {
		return nil, cmdutil.Usagef("%s has a %d-bit security target (INSECURE); pass --allow-insecure to use it", r.Source, r.SecurityBits)
	}
	return r, nil
}

// ResolveProofParams is ResolveParams for a proof file of metadata meta (nil for none) at path:
// the preset the proof was made with (or its proving key's, when they are a preset) is the
// fallback; a proof made with config-file parameters needs the same --config (or a --preset).
func ResolveProofParams(preset string, settings *cmdutil.Settings, meta *stark.ProofMeta, path string, allowInsecure bool) (*Resolved, error) {
	fallback := ""
	if meta != nil {
		switch meta.Params {
		case "preset":
			fallback = meta.Preset
		case "key":
			// A key's parameters: its preset's when they are one, else only the key has them.
			if meta.Preset == "" && preset == "" {
				return nil, cmdutil.Usagef("%s was made with a proving key whose parameters are no preset: pass the same --key", path)
			}
			fallback = meta.Preset
		case "config":
			if preset == "" && configFile(settings) == "" {
				return nil, cmdutil.Usagef("%s was made with config-file parameters: pass the same --config (or --preset)", path)
			}
		}
	}
	return ResolveParams(preset, settings, fallback, allowInsecure)
}

// ConfigParams is params.LoadFile on the bytes of the config file at path that the root command
// read (data; nil: the file is read here): its params section, decoded strictly and built into
// validated parameters, the errors naming the file as LoadFile's do (ErrNoParams wrapped when it
// has none).
func ConfigParams(path string, data []byte) (sp.SystemParams, sp.Spec, error) {
	if data == nil {
		return sp.LoadFile(path)
	}
	spec, err := sp.ParseSection(data)
	if err != nil {
		return sp.SystemParams{}, sp.Spec{}, fmt.Errorf("config file %s: %w", path, err)
	}
	p, err := spec.Build()
	if err != nil {
		return sp.SystemParams{}, sp.Spec{}, fmt.Errorf("config file %s: params: %w", path, err)
	}
	return p, spec, nil
}

// configFile is the settings' config file ("" when none).
func configFile(s *cmdutil.Settings) string {
	if s == nil {
		return ""
	}
	return s.ConfigFile
}
