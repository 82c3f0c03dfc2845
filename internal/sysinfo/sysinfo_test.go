package sysinfo

import "testing"

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
