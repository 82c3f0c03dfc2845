//go:build unix

package device_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system, all threads) of the process so far: on a shared machine
// it varies less than the wall time of a benchmark.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
