// Command metalprove is the metalprove command-line tool; see README.md.
package main

import (
	"os"

	"github.com/metalprove/metalprove/internal/cmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(int(cmd.Main(version))) }
