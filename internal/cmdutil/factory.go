package cmdutil

import (
	"io"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/progress"
)

// Factory hands commands their dependencies. Fields that depend on resolved global flags
// (the logger, the progress display) are filled by the root command's PersistentPreRunE before
// any RunE runs.
type Factory struct {
	// Version is the build version string (set by the linker through main).
	Version string
	IO      *IOStreams
	// Logger writes to IO.ErrOut in the format and level the user chose.
	Logger zerolog.Logger
	// Progress draws progress lines on IO.ErrOut when it is a terminal (never with --quiet or
	// JSON logs); the logger writes through it.
	Progress *progress.Display
	// Settings are the resolved global settings (flag > env METALPROVE_* > config file > default).
	Settings *Settings
}

// Settings are the root-level settings every command may read.
type Settings struct {
	// ConfigFile is the config file that was read, or "" when none was.
	ConfigFile string
	// ConfigData is that file's bytes as the root command read them (nil when none was read, or
	// when the settings were made without the root command): the commands decode their own
	// sections of it (params) from here instead of reading the file again.
	ConfigData []byte
	// Device is one of gpu.Kinds; validated, used by commands that run kernels.
	Device string
	// DeviceMemory is --device-memory as given ("" for the device's own memory) and
	// DeviceMemoryBytes its value: a cap on the device memory that commands open devices with
	// (gpu.Options.MemoryLimit; 0: none).
	DeviceMemory      string
	DeviceMemoryBytes uint64
	// LogLevel and LogFormat as given (validated).
	LogLevel  string
	LogFormat string
	// Quiet turns progress display off (and the default log level to warn).
	Quiet bool
	// Origins names where each flag not given on the command line got its value: flag name →
	// "METALPROVE_RUNS (environment)", "key commands.bench.runs of config file m.yaml".
	Origins map[string]string
	// Shorthands maps a flag name to its one-letter shorthand ("output" → "o"), for Explain.
	Shorthands map[string]string
}

// FromCommandLine reports whether flag was given on the command line (not taken from the
// environment or a config file) — or is unset, at its default.
func (s *Settings) FromCommandLine(flag string) bool {
	if s == nil {
		return true
	}
	_, ok := s.Origins[flag]
	return !ok
}

// Explain rewrites a message that names flags (--runs, -o/--output, -o) so that a flag whose
// value came from the environment or a config file is named by that source instead: an error
// about a config value names the key and the file, not a flag the user never typed.
func (s *Settings) Explain(msg string) string {
	if s == nil || len(s.Origins) == 0 {
		return msg
	}
	names := make([]string, 0, len(s.Origins))
	for n := range s.Origins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		origin := s.Origins[n]
		if sh := s.Shorthands[n]; sh != "" {
			msg = replaceFlag(msg, "-"+sh+"/--"+n, origin)
			msg = replaceFlag(msg, "--"+n, origin)
			msg = replaceFlag(msg, "-"+sh, origin)
		} else {
			msg = replaceFlag(msg, "--"+n, origin)
		}
	}
	return msg
}

// replaceFlag replaces every whole-word occurrence of token in msg by repl.
func replaceFlag(msg, token, repl string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, token)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(token)
		if (i == 0 || !isFlagChar(msg[i-1])) && (end == len(msg) || !isFlagChar(msg[end])) {
			b.WriteString(msg[:i])
			b.WriteString(repl)
		} else {
			b.WriteString(msg[:end])
		}
		msg = msg[end:]
	}
}

func isFlagChar(c byte) bool {
	return c == '-' || c == '/' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// NewFactory returns a factory writing to ios with a logger that discards until configured.
func NewFactory(version string, ios *IOStreams) *Factory {
	return &Factory{
		Version:  version,
		IO:       ios,
		Logger:   zerolog.New(io.Discard),
		Progress: progress.New(ios.ErrOut, false),
		Settings: &Settings{},
	}
}
