package sysinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func readMemory() Memory {
	var m Memory
	f, err := os.Open("/proc/meminfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			fs := strings.Fields(v)
			if len(fs) == 0 {
				continue
			}
			n, err := strconv.ParseUint(fs[0], 10, 64)
			if err != nil {
				continue
			}
			if len(fs) > 1 && fs[1] == "kB" {
				n *= 1024
			}
			switch k {
			case "MemTotal":
				m.Total = n
			case "MemAvailable":
				m.Available = n
			}
		}
	}
	if m.Total == 0 {
		var si syscall.Sysinfo_t
		if syscall.Sysinfo(&si) == nil {
			m.Total = uint64(si.Totalram) * uint64(si.Unit)
		}
	}
	return m
}

func diskFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
