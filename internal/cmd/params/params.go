// Package params implements `metalprove params`: it prints the system parameters of a preset or of
// the config file's params section, the WHIR round table and the soundness breakdown.
package params

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of the params command.
type Options struct {
	IO *cmdutil.IOStreams
	// ConfigFile is the resolved --config file ("" when none) and ConfigData its bytes as the
	// root command read them (nil: read here).
	ConfigFile string
	ConfigData []byte
	// Preset is a preset name, or "" for the config file's params section (else app-100bit).
	Preset string
	// LogStackedHeight is used by app-100bit only; LogStackedHeightSet says it was given.
	LogStackedHeight    int
	LogStackedHeightSet bool
	AllowInsecure       bool
	JSON                bool
}

// NewCmdParams returns the params command. runF, when not nil, replaces paramsRun (for tests).
func NewCmdParams(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "params",
		Short: "Print system parameters, the WHIR round table and the soundness breakdown",
		Long: `Print the SWIRL system parameters of a preset (` + strings.Join(sp.PresetNames(), ", ") + `)
or of the --config file's params section, with derived values, the WHIR round table and the
soundness calculator's breakdown in bits. Without a verifying key, soundness is evaluated with the
circuit bounds of the preset (App-VM bounds for app-100bit, test and config-file parameters).
Parameters below their security target, or with a target below 100 bits, are refused unless
--allow-insecure is given.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.ConfigFile, opts.ConfigData = f.Settings.ConfigFile, f.Settings.ConfigData
			opts.LogStackedHeightSet = c.Flags().Changed("log-stacked-height") ||
				opts.LogStackedHeight != sp.DefaultAppLogStackedHeight
			if runF != nil {
				return runF(opts)
			}
			return paramsRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Preset, "preset", "", "preset: "+strings.Join(sp.PresetNames(), "|")+
		` (default: the config file's params section if any, else app-100bit)`)
	fl.IntVar(&opts.LogStackedHeight, "log-stacked-height", sp.DefaultAppLogStackedHeight,
		fmt.Sprintf("log2 of the stacked height, %d..%d (app-100bit only)", sp.WhirMaxLogFinalPolyLen+1, sp.MaxAppLogStackedHeight))
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept parameters below their security target or a target below 100 bits")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object instead of text")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// report is what --json prints.
type report struct {
	Source       string             `json:"source"`
	SecurityBits int                `json:"security_bits"`
	Insecure     bool               `json:"insecure"`
	Params       sp.SystemParams    `json:"params"`
	Derived      derived            `json:"derived"`
	PostcardHex  string             `json:"postcard_hex"`
	WhirRounds   []sp.WhirRoundInfo `json:"whir_rounds"`
	Soundness    soundness          `json:"soundness"`
}

type derived struct {
	LogStackedHeight      int `json:"log_stacked_height"`
	NumWhirRounds         int `json:"num_whir_rounds"`
	NumWhirSumcheckRounds int `json:"num_whir_sumcheck_rounds"`
	LogFinalPolyLen       int `json:"log_final_poly_len"`
	KWhir                 int `json:"k_whir"`
	LogupPowBits          int `json:"logup_pow_bits"`
}

type soundness struct {
	// Bounds names the circuit bounds the inputs were derived from (no verifying key is used).
	Bounds sp.Bounds `json:"bounds"`
	sp.Soundness
}

func paramsRun(opts *Options) error {
	p, target, bounds, source, err := resolve(opts)
	if err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return cmdutil.Usagef("%s: %v", source, err)
	}
	s, err := sp.Calculate(p, bounds.Inputs(p))
	if err != nil {
		return cmdutil.Usagef("%s: %v", source, err)
	}
	if err := sp.CheckSecurity(s, target, opts.AllowInsecure); err != nil {
		return cmdutil.Usagef("%s: %v", source, err)
	}
	r := report{
		Source: source, SecurityBits: target, Insecure: sp.Insecure(s, target), Params: p,
		Derived: derived{p.LogStackedHeight(), p.NumWhirRounds(), p.NumWhirSumcheckRounds(), p.LogFinalPolyLen(),
			p.KWhir(), p.LogupPowBits()},
		PostcardHex: hex.EncodeToString(p.AppendPostcard(nil)),
		WhirRounds:  p.RoundTable(),
		Soundness:   soundness{Bounds: bounds, Soundness: s},
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return printText(opts.IO.Out, r)
}

// resolve picks the parameters: --preset, else the config file's params section, else app-100bit.
func resolve(opts *Options) (p sp.SystemParams, target int, bounds sp.Bounds, source string, err error) {
	preset := opts.Preset
	if preset == "" && opts.ConfigFile != "" {
		p, spec, lerr := prover.ConfigParams(opts.ConfigFile, opts.ConfigData)
		switch {
		case lerr == nil:
			if opts.LogStackedHeightSet {
				return p, 0, bounds, "", cmdutil.Usagef("--log-stacked-height applies to --preset app-100bit only, not to the params section of %s", opts.ConfigFile)
			}
			return p, spec.SecurityBits, sp.AppVMBounds, "params section of " + opts.ConfigFile, nil
		case !errors.Is(lerr, sp.ErrNoParams):
			return p, 0, bounds, "", &cmdutil.UsageError{Err: lerr}
		}
	}
	if preset == "" {
		preset = "app-100bit"
	}
	if preset != "app-100bit" && opts.LogStackedHeightSet {
		return p, 0, bounds, "", cmdutil.Usagef("--log-stacked-height applies to --preset app-100bit only, not %s", preset)
	}
	p, info, err := sp.Preset(preset, opts.LogStackedHeight)
	if err != nil {
		return p, 0, bounds, "", cmdutil.Usagef("--preset: %v", err)
	}
	source = "preset " + preset
	if preset == "app-100bit" {
		source += fmt.Sprintf(" (log_stacked_height %d)", opts.LogStackedHeight)
	}
	return p, info.SecurityBits, info.Bounds, source, nil
}

func f2(b sp.Bits) string { return fmt.Sprintf("%.2f", float64(b)) }

func printText(out io.Writer, r report) error {
	p := r.Params
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "System parameters: %s, security target %d bits\n", r.Source, r.SecurityBits)
	rows := [][2]any{
		{"l_skip", p.LSkip}, {"n_stack", p.NStack}, {"log_stacked_height", r.Derived.LogStackedHeight},
		{"w_stack", p.WStack}, {"log_blowup", p.LogBlowup}, {"max_constraint_degree", p.MaxConstraintDegree},
		{"whir.k", p.Whir.K}, {"whir.rounds (num_queries)", fmt.Sprint(roundsOf(p))},
		{"whir.num_sumcheck_rounds", r.Derived.NumWhirSumcheckRounds},
		{"whir.log_final_poly_len", r.Derived.LogFinalPolyLen},
		{"whir.mu_pow_bits", p.Whir.MuPowBits}, {"whir.query_phase_pow_bits", p.Whir.QueryPhasePowBits},
		{"whir.folding_pow_bits", p.Whir.FoldingPowBits}, {"whir.proximity", p.Whir.Proximity.String()},
		{"logup.max_interaction_count", p.Logup.MaxInteractionCount},
		{"logup.log_max_message_length", p.Logup.LogMaxMessageLength}, {"logup.pow_bits", p.Logup.PowBits},
		{"postcard (hex)", r.PostcardHex},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %s\t%v\n", row[0], row[1])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "WHIR rounds")
	fmt.Fprintln(w, "  round\tregime\tlog_inv_rate\tbits/query\tnum_queries\tRS domain log\tquery index bits\tMerkle depth\tquery PoW\tfolding PoW")
	for _, x := range r.WhirRounds {
		final := ""
		if x.Final {
			final = " (final)"
		}
		fmt.Fprintf(w, "  %d%s\t%s\t%d\t%.7f\t%d\t%d\t%d\t%d\t%d\t%d\n", x.Round, final, x.Regime, x.LogInvRate,
			x.PerQueryBits, x.NumQueries, x.RSDomainLogSize, x.QueryIndexBits, x.MerkleDepth, x.QueryPowBits, x.FoldingPowBits)
	}
	fmt.Fprintln(w)
	s := r.Soundness
	in := s.Inputs
	fmt.Fprintf(w, "Soundness (bits), no verifying key: inputs from %s: N_C=%d num_airs=%d d=%d max_log_h=%d n_cols=%d n_stacked=%d n_logup=%d\n",
		s.Bounds.Name, in.MaxConstraintsPerAir, in.NumAirs, in.MaxConstraintDegree, in.MaxLogTraceHeight,
		in.NumTraceColumns, in.NumStackedColumns, in.NLogup)
	for _, c := range []struct {
		name string
		v    sp.Bits
	}{
		{"logup", s.LogupBits}, {"gkr sumcheck", s.GkrSumcheckBits}, {"gkr batching", s.GkrBatchingBits},
		{"zerocheck sumcheck", s.ZerocheckSumcheckBits}, {"constraint batching", s.ConstraintBatchingBits},
		{"stacked reduction", s.StackedReductionBits}, {"whir", s.WhirBits},
		{"  whir μ batching", s.Whir.MuBatchingBits}, {"  whir min fold (sumcheck ⊕ proximity gap)", s.Whir.FoldRbrBits},
	} {
		fmt.Fprintf(w, "  %s\t%s\n", c.name, f2(c.v))
	}
	for _, x := range s.Whir.Rounds {
		fmt.Fprintf(w, "  whir round %d: fold / query ⊕ γ (query, γ)\t%s / %s (%s, %s)\n", x.Round, f2(x.FoldBits), f2(x.ShiftBits), f2(x.QueryBits), f2(x.GammaBits))
		if x.OODBits != nil {
			fmt.Fprintf(w, "  whir round %d: OOD\t%s\n", x.Round, f2(*x.OODBits))
		}
	}
	fmt.Fprintf(w, "  total\t%s (weakest: %s)\n", f2(s.TotalBits), s.Weakest)
	if r.Insecure {
		fmt.Fprintf(w, "WARNING: INSECURE parameters (target %d bits, total %s bits), accepted because of --allow-insecure\n", r.SecurityBits, f2(s.TotalBits))
	}
	return w.Flush()
}

func roundsOf(p sp.SystemParams) []int {
	r := make([]int, len(p.Whir.Rounds))
	for i, x := range p.Whir.Rounds {
		r[i] = x.NumQueries
	}
	return r
}
