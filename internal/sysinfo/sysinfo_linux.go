package sysinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every Linux architecture Go runs on.
const userHZ = 100

// processStart reads the process's start (field 22 of /proc/self/stat: clock ticks after boot)
// against the time since boot (/proc/uptime).
func processStart() (time.Time, bool) {
	now := time.Now()
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return time.Time{}, false
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
	i := strings.LastIndexByte(string(stat), ')')
	fs := strings.Fields(string(stat)[i+1:])
	us := strings.Fields(string(up))
	if i < 0 || len(fs) < 20 || len(us) < 1 {
		return time.Time{}, false
	}
	ticks, err1 := strconv.ParseUint(fs[19], 10, 64) // field 22
	uptime, err2 := strconv.ParseFloat(us[0], 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	age := time.Duration((uptime - float64(ticks)/userHZ) * float64(time.Second))
	if age < 0 {
		age = 0
	}
	return now.Add(-age), true
}

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
