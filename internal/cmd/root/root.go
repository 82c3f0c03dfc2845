// Package root assembles the metalprove command tree and resolves global settings:
// flag > environment (METALPROVE_*) > config file > default.
package root

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
)

// EnvPrefix is the prefix of environment variables that set flags: --log-level ↔ METALPROVE_LOG_LEVEL.
const EnvPrefix = "METALPROVE"

// sectionKeys are top-level config file keys that are not flags; each is decoded (strictly) by
// the package that owns it.
var sectionKeys = []string{"params"}

// NewCmdRoot returns the root command with every subcommand attached.
func NewCmdRoot(f *cmdutil.Factory, subcommands ...*cobra.Command) *cobra.Command {
	s := f.Settings
	cmd := &cobra.Command{
		Use:   "metalprove",
		Short: "STARK prover (OpenVM SWIRL, BabyBear) for Apple GPUs, with CUDA and CPU host devices",
		Long: `metalprove proves and verifies AIR traces with the SWIRL proof system of OpenVM's
stark-backend v2 (BabyBear, quartic extension, Poseidon2, stacked PCS opened with WHIR,
LogUp-GKR). Settings come from flags, then METALPROVE_* environment variables, then the
--config file, then defaults.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       f.Version,
		// The root is runnable so that an unknown command reaches rootArgs (a usage error, exit 2)
		// instead of cobra's plain error (exit 1); without arguments it prints the help.
		Args:                       rootArgs,
		SuggestionsMinimumDistance: 2,
		RunE:                       func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveSettings(cmd); err != nil {
				return err
			}
			if _, err := gpu.ParseKind(s.Device); err != nil {
				return cmdutil.Usagef("--device: %v", err)
			}
			logger, err := newLogger(f.IO, s.LogLevel, s.LogFormat)
			if err != nil {
				return err
			}
			f.Logger = logger
			if s.ConfigFile != "" {
				f.Logger.Debug().Str("config", s.ConfigFile).Msg("config file read")
			}
			return nil
		},
	}
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetIn(f.IO.In)
	cmd.SetVersionTemplate("metalprove {{.Version}}\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.UsageError{Err: err} })

	pf := cmd.PersistentFlags()
	pf.StringVar(&s.ConfigFile, "config", "", "config file (YAML; keys are flag names in snake_case, plus a params section)")
	pf.StringVar(&s.Device, "device", "auto", "device: "+strings.Join(gpu.KindNames(), "|"))
	pf.StringVar(&s.LogLevel, "log-level", "info", "log level: "+strings.Join(logLevels, "|"))
	pf.StringVar(&s.LogFormat, "log-format", "console", "log format on stderr: console|json")

	for _, c := range subcommands {
		cmd.AddCommand(c)
	}
	usageArgs(cmd)
	return cmd
}

// rootArgs rejects arguments to the root command: the first one is an unknown command.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return &cmdutil.UsageError{Err: errors.New(msg)}
}

// usageArgs makes every positional-argument check in the tree return a UsageError, so that a
// wrong argument count exits with ExitUsage like a wrong flag does.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var usage *cmdutil.UsageError
			if err != nil && !errors.As(err, &usage) {
				return &cmdutil.UsageError{Err: err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// configKey is the config-file key of a flag: --log-stacked-height ↔ log_stacked_height.
func configKey(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

// resolveSettings fills every flag the user did not set from the environment or the config file,
// and rejects config keys that no command knows.
func resolveSettings(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()

	configFlag := cmd.Flags().Lookup("config")
	configFile := configFlag.Value.String()
	if !configFlag.Changed {
		if env, ok := os.LookupEnv(EnvPrefix + "_CONFIG"); ok {
			configFile = env
			if err := configFlag.Value.Set(env); err != nil {
				return err
			}
		}
	}
	if configFile != "" {
		v.SetConfigFile(configFile)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				return cmdutil.Usagef("config file %s: %v", configFile, pathErr.Err)
			}
			return cmdutil.Usagef("config file %s: %v", configFile, err)
		}
		if err := checkConfigKeys(cmd.Root(), v, configFile); err != nil {
			return err
		}
	}

	var firstErr error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if firstErr != nil || fl.Changed || fl.Name == "config" || fl.Name == "help" || fl.Name == "version" {
			return
		}
		var val any
		if env, ok := os.LookupEnv(EnvPrefix + "_" + strings.ToUpper(configKey(fl.Name))); ok {
			val = env
		} else if key := configKey(fl.Name); v.InConfig(key) {
			val = v.Get(key)
		} else {
			return
		}
		if err := setFlag(fl, val); err != nil {
			firstErr = cmdutil.Usagef("setting %s from environment or config: %v", fl.Name, err)
		}
	})
	return firstErr
}

// setFlag sets a flag from a config or environment value, keeping lists as lists.
func setFlag(fl *pflag.Flag, val any) error {
	if list, ok := val.([]any); ok {
		for _, item := range list {
			if err := fl.Value.Set(fmt.Sprint(item)); err != nil {
				return err
			}
		}
		return nil
	}
	return fl.Value.Set(fmt.Sprint(val))
}

// checkConfigKeys rejects top-level config keys that are neither a flag of some command nor a
// known section, naming the key and the file.
func checkConfigKeys(root *cobra.Command, v *viper.Viper, file string) error {
	known := map[string]bool{}
	for _, k := range sectionKeys {
		known[k] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		mark := func(fl *pflag.Flag) { known[configKey(fl.Name)] = true }
		c.LocalFlags().VisitAll(mark)
		c.PersistentFlags().VisitAll(mark)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	delete(known, "config")
	delete(known, "help")

	var unknown []string
	for key := range v.AllSettings() {
		if !known[key] {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return cmdutil.Usagef("config file %s: unknown key %q", file, unknown[0])
	}
	return nil
}

// logLevels are the values accepted by --log-level.
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// newLogger builds the zerolog logger on stderr.
func newLogger(ios *cmdutil.IOStreams, level, format string) (zerolog.Logger, error) {
	// zerolog.ParseLevel also accepts numbers, "panic", "fatal" and "disabled"; only the
	// documented names are allowed here.
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || !slices.Contains(logLevels, level) {
		return zerolog.Logger{}, cmdutil.Usagef("--log-level %q: must be one of %s", level, strings.Join(logLevels, ", "))
	}
	switch format {
	case "json":
		return zerolog.New(ios.ErrOut).Level(lvl).With().Timestamp().Logger(), nil
	case "console":
		w := zerolog.ConsoleWriter{Out: ios.ErrOut, NoColor: !ios.ErrTTY, TimeFormat: "15:04:05"}
		return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
	}
	return zerolog.Logger{}, cmdutil.Usagef("--log-format %q: must be console or json", format)
}
