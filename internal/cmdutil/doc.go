// Package cmdutil owns what every metalprove command shares: the IO streams, the Factory of
// lazily built dependencies, the typed errors and the process exit codes they map to.
package cmdutil
