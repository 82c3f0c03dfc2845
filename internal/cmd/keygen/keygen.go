// Package keygen implements `metalprove keygen`: it writes a proving-key file (internal/keyfile)
// for built-in AIRs (an example, or the AIRs a trace file names) or for OpenVM's verifying key
// (--openvm-vk), so that `prove --key` and `verify --key` need no keygen of their own.
package keygen

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/keyfile"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
)

// Options are the inputs of keygen.
type Options struct {
	IO       *cmdutil.IOStreams
	Logger   *zerolog.Logger
	Settings *cmdutil.Settings
	Version  string

	// Example names a built-in example (its AIRs; Rows their height where it matters).
	Example string
	Rows    int
	// Trace is a trace file whose sections name built-in AIRs.
	Trace string
	// OpenVMVK is OpenVM's verifying key (postcard of MultiStarkVerifyingKey); Preprocessed its
	// preprocessed traces; Names the AIRs' names.
	OpenVMVK      string
	Preprocessed  string
	Names         string
	Output        string
	Preset        string
	AllowInsecure bool
	JSON          bool
}

// Report is what keygen --json prints.
type Report struct {
	Output       string   `json:"output"`
	Source       string   `json:"source"`
	Params       string   `json:"params"`
	ParamsDigest string   `json:"params_digest"`
	SecurityBits int      `json:"security_bits"`
	PreHash      []uint32 `json:"pre_hash"`
	AIRs         []AirRow `json:"airs"`
	Bytes        int      `json:"bytes"`
}

// AirRow is one AIR of the key.
type AirRow struct {
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

// NewCmdKeygen returns the keygen command. runF, when not nil, replaces keygenRun (for tests).
func NewCmdKeygen(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Logger: &f.Logger, Settings: f.Settings, Version: f.Version}
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
	return cmd
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

func keygenRun(opts *Options) error {
	cfg := ""
	if opts.Settings != nil {
		cfg = opts.Settings.ConfigFile
	}
	input := opts.Trace + opts.OpenVMVK
	out, err := cmdutil.CreateOutput("-o", opts.Output, input, cfg)
	if err != nil {
		return err
	}
	defer out.Abort()
	if opts.Preprocessed != "" && opts.Preprocessed == opts.Output {
		return cmdutil.Usagef("-o is the --preprocessed file")
	}
	note := keyfile.Note{CreatedBy: "metalprove " + opts.Version}
	var f *keyfile.File
	if opts.OpenVMVK != "" {
		names, err := prover.ParseNames(opts.Names)
		if err != nil {
			return err
		}
		note.Source = "openvm-vk " + opts.OpenVMVK
		if f, err = prover.ImportOpenVMKey(opts.OpenVMVK, opts.Preprocessed, names, note); err != nil {
			return err
		}
	} else {
		res, err := prover.ResolveParams(opts.Preset, opts.Settings, "", opts.AllowInsecure)
		if err != nil {
			return err
		}
		note.Preset = res.Preset
		var airs []air.Air
		if opts.Example != "" {
			note.Source = "example " + opts.Example
			airs, err = exampleAirs(opts.Example, opts.Rows)
		} else {
			note.Source = "trace " + opts.Trace
			airs, _, err = prover.BuiltinAirs(opts.Trace)
		}
		if err != nil {
			return err
		}
		if f, err = prover.KeygenBuiltin(res.Params, airs, note); err != nil {
			return err
		}
	}
	k, err := prover.NewKey(opts.Output, f, opts.AllowInsecure)
	if err != nil {
		return err
	}
	b, err := keyfile.Marshal(f)
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, cmdutil.UnwrapPath(err))
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, cmdutil.UnwrapPath(err))
	}
	dg := stark.ParamsDigest(f.MVK.Params)
	rep := &Report{Output: opts.Output, Source: note.Source, Params: k.ParamsSource(), ParamsDigest: hex.EncodeToString(dg[:]),
		SecurityBits: k.SecurityBits, PreHash: stark.KeyPreHashValues(f.PreHash), Bytes: len(b)}
	for i, vk := range f.MVK.PerAir {
		row := AirRow{Name: f.Names[i], CachedMains: vk.Width.CachedMains, CommonMain: vk.Width.CommonMain, PublicValues: vk.NumPublicValues,
			Constraints: len(vk.DAG.ConstraintIdx), Interactions: len(vk.DAG.Interactions), Required: vk.IsRequired}
		if m := f.Preprocessed[i]; m != nil {
			row.PreprocessedWidth, row.PreprocessedHeight = m.Width, m.Height
		}
		rep.AIRs = append(rep.AIRs, row)
	}
	opts.Logger.Info().Str("key", opts.Output).Int("airs", len(rep.AIRs)).Int("bytes", len(b)).Msg("proving key written")
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	names := f.Names
	if len(names) > 6 {
		names = append(names[:6:6], fmt.Sprintf("… %d more", len(f.Names)-6))
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: proving key of %d AIRs (%s) from %s under %s (%d-bit target), %d bytes; pre_hash %s\n",
		opts.Output, len(f.Names), strings.Join(names, ", "), note.Source, k.ParamsSource(), k.SecurityBits, len(b), prover.PreHashString(f.PreHash))
	return err
}
