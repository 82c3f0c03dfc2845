package cmdutil

import (
	"strings"

	"github.com/spf13/cobra"
)

// DeviceExplicit reports whether --device was chosen for this run of c: on the command line or by
// METALPROVE_DEVICE (a config file's device is a default that --cpuref overrides).
func DeviceExplicit(c *cobra.Command, s *Settings) bool {
	if fl := c.Flags().Lookup("device"); fl != nil && fl.Changed {
		return true
	}
	return s != nil && strings.HasPrefix(s.Origins["device"], "METALPROVE_DEVICE")
}
