// Package root assembles the metalprove command tree and resolves global settings:
// flag > environment (METALPROVE_*) > config file > default.
package root

import (
	"bytes"
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
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/sysinfo"
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
--config file, then defaults. The config file holds the global flags at its top level, system
parameters under params:, and each command's own flags under commands: → the command's name
(prove:, trace:, "trace check":, bench:, …).

Exit status: 0 success, 1 unexpected failure, 2 bad usage, 3 malformed input, 4 a check or proof
failed, 5 device unavailable or out of memory, 130 interrupted (SIGINT/SIGTERM).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       f.Version,
		// The root is runnable so that an unknown command reaches rootArgs (a usage error, exit 2)
		// instead of cobra's plain error (exit 1); without arguments it prints the help.
		Args:                       rootArgs,
		SuggestionsMinimumDistance: 2,
		RunE:                       func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveSettings(cmd, s); err != nil {
				return err
			}
			if _, err := gpu.ParseKind(s.Device); err != nil {
				return cmdutil.Usagef("--device: %v", err)
			}
			s.DeviceMemoryBytes = 0
			if s.DeviceMemory != "" {
				n, err := sysinfo.ParseBytes(s.DeviceMemory)
				if err != nil {
					return cmdutil.Usagef("--device-memory: %v", err)
				}
				if n == 0 { // 0 would read as "no limit" below: say so rather than ignore it
					return cmdutil.Usagef("--device-memory %s: must be more than 0 (leave it unset to use all the device has)", s.DeviceMemory)
				}
				s.DeviceMemoryBytes = n
			}
			level := s.LogLevel
			if s.Quiet && !cmd.Flags().Changed("log-level") && s.FromCommandLine("log-level") {
				level = "warn"
			}
			f.Progress = progress.New(f.IO.ErrOut, f.IO.ErrTTY && !s.Quiet && s.LogFormat == "console")
			logger, err := newLogger(f.IO, f.Progress, level, s.LogFormat)
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
	pf.StringVar(&s.ConfigFile, "config", "", "config file (YAML: global flags in snake_case, a params section, per-command flags under commands: → NAME:)")
	pf.StringVar(&s.Device, "device", "auto", "device: "+strings.Join(gpu.KindNames(), "|"))
	pf.StringVar(&s.DeviceMemory, "device-memory", "", "use at most this much device memory, e.g. 12GiB (default: all the device has); a proof keeps less on the device to fit in it (slower), and one that would need more even so is refused before it starts")
	pf.StringVar(&s.LogLevel, "log-level", "info", "log level: "+strings.Join(logLevels, "|"))
	pf.StringVar(&s.LogFormat, "log-format", "console", "log format on stderr: console|json")
	pf.BoolVarP(&s.Quiet, "quiet", "q", false, "no progress display on stderr, and log level warn unless --log-level is given")

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

// sharedKeys are top-level config keys that are flags of several commands and apply to each
// command that has the flag: allow_insecure qualifies the params section, which every command
// that takes parameters reads; nats is the proving farm's server for worker, submit, jobs and
// fetch.
var sharedKeys = []string{"allow_insecure", "nats"}

// commandsKey is the config section that holds one section per command, keyed by the command's
// path below the root ("prove", "trace", "trace check"): the settings of one command do not
// leak into another.
const commandsKey = "commands"

// commandPath is c's path below the root: "prove", "trace check".
func commandPath(c *cobra.Command) string {
	p := c.CommandPath()
	if i := strings.IndexByte(p, ' '); i >= 0 {
		return p[i+1:]
	}
	return ""
}

// resolveSettings fills every flag the user did not set from the environment or the config
// file, records where each value came from (Settings.Origins), and rejects config keys that no
// command knows.
func resolveSettings(cmd *cobra.Command, s *cmdutil.Settings) error {
	v := viper.New()
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
	var cfg *config
	s.ConfigData = nil
	if configFile != "" {
		// Read once: the commands decode their sections (params) from s.ConfigData.
		data, err := os.ReadFile(configFile)
		if err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				return cmdutil.Usagef("config file %s: %v", configFile, pathErr.Err)
			}
			return cmdutil.Usagef("config file %s: %v", configFile, err)
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return cmdutil.Usagef("config file %s: %v", configFile, err)
		}
		if cfg, err = checkConfig(cmd.Root(), v, configFile); err != nil {
			return err
		}
		s.ConfigData = data
	}

	s.Origins = map[string]string{}
	s.Shorthands = map[string]string{}
	path := commandPath(cmd)
	var firstErr error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Shorthand != "" {
			s.Shorthands[fl.Name] = fl.Shorthand
		}
		if firstErr != nil || fl.Changed || fl.Name == "config" || fl.Name == "help" || fl.Name == "version" {
			return
		}
		key := configKey(fl.Name)
		envName := EnvPrefix + "_" + strings.ToUpper(key)
		if env, ok := os.LookupEnv(envName); ok {
			origin := envName + " (environment)"
			if err := setFlag(fl, env); err != nil {
				firstErr = cmdutil.Usagef("environment variable %s=%q: %v", envName, env, err)
				return
			}
			s.Origins[fl.Name] = origin
			return
		}
		if cfg == nil {
			return
		}
		val, origin, ok := cfg.lookup(path, key)
		if !ok {
			return
		}
		if err := setFlag(fl, val); err != nil {
			firstErr = cmdutil.Usagef("config file %s: key %s: %v", configFile, origin, err)
			return
		}
		s.Origins[fl.Name] = "key " + origin + " of config file " + configFile
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

// config is a checked config file: top-level global keys and per-command sections.
type config struct {
	global   map[string]any
	commands map[string]map[string]any
}

// lookup finds key for the command at path: in its section, else at the top level when key is
// global or shared. origin names the key ("commands.prove.output", "device").
func (c *config) lookup(path, key string) (val any, origin string, ok bool) {
	if sec, found := c.commands[path]; found {
		if val, ok = sec[key]; ok {
			return val, commandsKey + "." + path + "." + key, true
		}
	}
	val, ok = c.global[key]
	return val, key, ok
}

// checkConfig checks the keys of a config file: at the top level the global flags (the root's
// persistent flags), the shared keys and the sections (params, commands); under commands one
// section per command path holding that command's own flags. Errors name the key and the file.
func checkConfig(root *cobra.Command, v *viper.Viper, file string) (*config, error) {
	global := map[string]bool{}
	root.PersistentFlags().VisitAll(func(fl *pflag.Flag) { global[configKey(fl.Name)] = true })
	delete(global, "config")
	delete(global, "help")
	for _, k := range sharedKeys {
		global[k] = true
	}
	cmds := map[string]*cobra.Command{}
	flagOf := map[string][]string{} // flag key → commands that have it
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root {
			cmds[commandPath(c)] = c
			c.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
				if fl.Name != "help" {
					flagOf[configKey(fl.Name)] = append(flagOf[configKey(fl.Name)], commandPath(c))
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	cfg := &config{global: map[string]any{}, commands: map[string]map[string]any{}}
	all := v.AllSettings()
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		val := all[key]
		switch {
		case slices.Contains(sectionKeys, key):
		case key == commandsKey:
			secs, ok := val.(map[string]any)
			if !ok {
				return nil, cmdutil.Usagef("config file %s: key %s: want a section per command (prove:, trace:, …), got %v", file, key, val)
			}
			if err := checkCommandSections(secs, cmds, file, cfg); err != nil {
				return nil, err
			}
		case global[key]:
			cfg.global[key] = val
		case len(flagOf[key]) > 0:
			where := flagOf[key]
			sort.Strings(where)
			return nil, cmdutil.Usagef("config file %s: key %q is a flag of %s, not a global setting: put it in the command's section (%s: → %s: → %s: …); top-level keys are %s, params and %s",
				file, key, strings.Join(where, ", "), commandsKey, where[0], key, strings.Join(sortedKeys(global), ", "), commandsKey)
		default:
			return nil, cmdutil.Usagef("config file %s: unknown key %q", file, key)
		}
	}
	return cfg, nil
}

func checkCommandSections(secs map[string]any, cmds map[string]*cobra.Command, file string, cfg *config) error {
	paths := make([]string, 0, len(secs))
	for p := range secs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		c, ok := cmds[path]
		if !ok {
			known := make([]string, 0, len(cmds))
			for p, c := range cmds {
				if c.Runnable() && !c.Hidden && p != "help" && p != "completion" && !strings.HasPrefix(p, "completion ") {
					known = append(known, p)
				}
			}
			sort.Strings(known)
			return cmdutil.Usagef("config file %s: key %s.%s: unknown command %q (commands: %s)", file, commandsKey, path, path, strings.Join(known, ", "))
		}
		sec, ok := secs[path].(map[string]any)
		if !ok {
			if secs[path] == nil {
				continue
			}
			return cmdutil.Usagef("config file %s: key %s.%s: want the command's flags as keys, got %v", file, commandsKey, path, secs[path])
		}
		flags := map[string]bool{}
		c.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) { flags[configKey(fl.Name)] = true })
		delete(flags, "help")
		for key := range sec {
			if !flags[key] {
				return cmdutil.Usagef("config file %s: unknown key %s.%s.%s (keys of %s: %s)", file, commandsKey, path, key, path, strings.Join(sortedKeys(flags), ", "))
			}
		}
		cfg.commands[path] = sec
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// logLevels are the values accepted by --log-level.
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// newLogger builds the zerolog logger on stderr (console records through the progress display,
// which keeps them clear of its line).
func newLogger(ios *cmdutil.IOStreams, pd *progress.Display, level, format string) (zerolog.Logger, error) {
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
		w := zerolog.ConsoleWriter{Out: pd.Writer(), NoColor: !ios.ErrTTY, TimeFormat: "15:04:05"}
		return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
	}
	return zerolog.Logger{}, cmdutil.Usagef("--log-format %q: must be console or json", format)
}
