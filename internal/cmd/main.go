// Package cmd wires the command tree to the process: it builds the factory, runs the root
// command and turns the returned error into a message on stderr and an exit code.
package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmd/root"
	"github.com/metalprove/metalprove/internal/cmdutil"
)

// Main runs metalprove with os.Args and returns the exit code.
func Main(version string) cmdutil.ExitCode {
	ios := cmdutil.System()
	return Run(cmdutil.NewFactory(version, ios), nil)
}

// Run executes the command tree with args (nil: os.Args[1:]) and returns the exit code. Errors are
// printed once, on stderr, prefixed by "metalprove: ".
func Run(f *cmdutil.Factory, args []string) cmdutil.ExitCode {
	rootCmd := NewCommandTree(f)
	if args != nil {
		rootCmd.SetArgs(args)
	}
	err := rootCmd.Execute()
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "metalprove: %v\n", err)
		if code := cmdutil.ExitCodeFor(err); code == cmdutil.ExitUsage {
			fmt.Fprintln(f.IO.ErrOut, "Run 'metalprove --help' for usage.")
		}
	}
	return cmdutil.ExitCodeFor(err)
}

// NewCommandTree builds the root command with every subcommand.
func NewCommandTree(f *cmdutil.Factory) *cobra.Command {
	return root.NewCmdRoot(f, subcommands(f)...)
}
