package cmdutil

import (
	"io"

	"github.com/rs/zerolog"
)

// Factory hands commands their dependencies. Fields that depend on resolved global flags
// (the logger) are filled by the root command's PersistentPreRunE before any RunE runs.
type Factory struct {
	// Version is the build version string (set by the linker through main).
	Version string
	IO      *IOStreams
	// Logger writes to IO.ErrOut in the format and level the user chose.
	Logger zerolog.Logger
	// Settings are the resolved global settings (flag > env METALPROVE_* > config file > default).
	Settings *Settings
}

// Settings are the root-level settings every command may read.
type Settings struct {
	// ConfigFile is the config file that was read, or "" when none was.
	ConfigFile string
	// Device is one of gpu.Kinds; validated, used by commands that run kernels.
	Device string
	// LogLevel and LogFormat as given (validated).
	LogLevel  string
	LogFormat string
}

// NewFactory returns a factory writing to ios with a logger that discards until configured.
func NewFactory(version string, ios *IOStreams) *Factory {
	return &Factory{
		Version:  version,
		IO:       ios,
		Logger:   zerolog.New(io.Discard),
		Settings: &Settings{},
	}
}
