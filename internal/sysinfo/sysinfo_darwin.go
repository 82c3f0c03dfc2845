package sysinfo

import (
	"encoding/binary"
	"syscall"
	"time"
)

// readMemory reads hw.memsize (macOS compresses and swaps memory; it gives no cheap figure of
// what is available, so Available is Total).
func readMemory() Memory {
	s, err := syscall.Sysctl("hw.memsize")
	if err != nil {
		return Memory{}
	}
	b := []byte(s)
	// syscall.Sysctl drops a trailing NUL byte of the 8-byte value.
	for len(b) < 8 {
		b = append(b, 0)
	}
	return Memory{Total: binary.LittleEndian.Uint64(b[:8])}
}

func diskFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// processStart: not read on this system.
func processStart() (time.Time, bool) { return time.Time{}, false }
