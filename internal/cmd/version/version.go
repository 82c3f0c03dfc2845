// Package version implements `metalprove version`: the build version, the Go toolchain that built
// the binary and the target platform.
package version

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
)

// Options are the inputs of the version command.
type Options struct {
	IO      *cmdutil.IOStreams
	Version string
	JSON    bool
}

// Info is what `metalprove version --json` prints.
type Info struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
}

// NewCmdVersion returns the version command. runF, when not nil, replaces versionRun (for tests).
func NewCmdVersion(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the metalprove version, the Go version and the platform",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON object instead of text")
	return cmd
}

// current returns the build information of this process.
func current(version string) Info {
	return Info{Version: version, GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
}

func versionRun(opts *Options) error {
	info := current(opts.Version)
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	_, err := fmt.Fprintf(opts.IO.Out, "metalprove %s\n%s %s/%s\n", info.Version, info.GoVersion, info.GOOS, info.GOARCH)
	return err
}
