package host_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/host"
)

// TestLargeBuffersAskForHugePages: a large buffer is a mapping of its own starting on a 2 MiB
// boundary whose whole 2 MiB pages carry MADV_HUGEPAGE (VmFlags "hg" in /proc/self/smaps), and a
// small one is calloc'd.
func TestLargeBuffersAskForHugePages(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	small, err := h.Alloc(host.RecycleMin - 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free(small)
	if _, n, mapped := host.BufferMapping(small); mapped != 0 {
		t.Errorf("a %d-byte buffer is mapped (%d bytes)", n, mapped)
	}
	big, err := h.Alloc(5<<20 + 12)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free(big)
	start, n, mapped := host.BufferMapping(big)
	const huge = 2 << 20
	if mapped < n || start%huge != 0 {
		t.Fatalf("large buffer: mapped %d bytes for %d, start %#x", mapped, n, start)
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("this kernel has no transparent huge pages (%v): madvise refuses MADV_HUGEPAGE", err)
	}
	flags, err := vmFlags(start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("VmFlags of the large buffer's mapping: %q, want hg (MADV_HUGEPAGE)", flags)
	}
}

// vmFlags returns the VmFlags line of the mapping of /proc/self/smaps that holds addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping of /proc/self/smaps holds %#x", addr)
}
