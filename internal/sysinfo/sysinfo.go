// Package sysinfo reads what the machine offers to a request before it is made: physical memory
// (total, and available to a new process where the system says so) and free disk space, so that
// commands refuse a request that cannot fit instead of failing in the middle of it (a Go program
// that runs out of memory dies with a fatal error that no code can catch).
package sysinfo

import "fmt"

// Memory describes the machine's memory in bytes. Available is what a new allocation can use
// without swapping (Linux MemAvailable); where the system does not say, it is Total. Zero means
// unknown.
type Memory struct {
	Total     uint64
	Available uint64
}

// ReadMemory returns the machine's memory (zeros when it cannot be read).
func ReadMemory() Memory {
	m := readMemory()
	if m.Available == 0 || m.Available > m.Total && m.Total > 0 {
		m.Available = m.Total
	}
	return m
}

// DiskFree returns the bytes an unprivileged user can still write in the file system of dir.
func DiskFree(dir string) (uint64, error) { return diskFree(dir) }

// Bytes formats n as "1.2 GB" (decimal units, as disk and memory sizes are usually quoted).
func Bytes(n uint64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
