package sysinfo

import (
	"runtime"
	"testing"
	"time"
)

func TestReadMemory(t *testing.T) {
	m := ReadMemory()
	if m.Total < 1<<28 || m.Available == 0 || m.Available > m.Total {
		t.Errorf("memory %+v", m)
	}
	free, err := DiskFree(t.TempDir())
	if err != nil || free == 0 {
		t.Errorf("disk free %d, %v", free, err)
	}
	for n, want := range map[uint64]string{999: "999 B", 1500: "1.5 kB", 23_400_000_000: "23.4 GB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "1536": 1536, "512MiB": 512 << 20, "2 GiB": 2 << 30, "1.5GB": 1_500_000_000,
		"64k": 64_000, "3kib": 3 << 10, "10 B": 10, " 7 mb ": 7_000_000, "1TiB": 1 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "1.2.3GB", "12 parsecs", "1e3", "99999999999TiB"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

var testInit = time.Now()

// TestProcessStart: on Linux the process's start is known, not after this package's init (to the
// tick's 10 ms) and not long before it.
func TestProcessStart(t *testing.T) {
	start, ok := ProcessStart()
	if runtime.GOOS != "linux" {
		if ok {
			t.Logf("process start %v", start)
		}
		return
	}
	if !ok {
		t.Fatal("ProcessStart: unknown on Linux")
	}
	if start.After(testInit.Add(20*time.Millisecond)) || start.Before(testInit.Add(-time.Minute)) {
		t.Fatalf("process start %v, package init %v", start, testInit)
	}
}
