// Package sysinfo reads what the machine offers to a request before it is made: physical memory
// (total, and available to a new process where the system says so) and free disk space, so that
// commands refuse a request that cannot fit instead of failing in the middle of it (a Go program
// that runs out of memory dies with a fatal error that no code can catch); and when this process
// started, so that a command can account for its whole life.
package sysinfo

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Memory describes the machine's memory in bytes. Available is what a new allocation can use
// without swapping (Linux MemAvailable); where the system does not say, it is Total. Zero means
// unknown.
type Memory struct {
	Total     uint64
	Available uint64
}

// ProcessStart returns when the system started this process (exec), to the system's resolution
// (Linux: clock ticks, 10 ms), and false where it cannot say.
func ProcessStart() (time.Time, bool) { return processStart() }

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

// ParseBytes reads a size such as "1536", "512MiB", "2 GiB", "1.5GB" or "64k": a number with an
// optional unit, decimal (B, k/kB, M/MB, G/GB, T/TB) or binary (KiB, MiB, GiB, TiB), case
// insensitive.
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (512MiB, 2GiB, 1.5GB)", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, unit)
	}
	b := math.Round(v * mult)
	if b >= 1<<63 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return uint64(b), nil
}
