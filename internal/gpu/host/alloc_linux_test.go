package host_test

import (
	"bufio"
	"bytes"
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

// TestRecyclerMovesPages: a request no free piece holds gets the free pieces' pages moved into a
// mapping of its own (mremap: the pages keep the freed buffers' bytes, nothing faults in again),
// fresh pages only for what they lack; Alloc zeroes the moved pages.
func TestRecyclerMovesPages(t *testing.T) {
	h, err := host.Open(2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const mib = 1 << 20
	a, err := h.Alloc(8 * mib)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Alloc(8 * mib)
	if err != nil {
		t.Fatal(err)
	}
	fillBuffer(t, h, a, 8*mib, 1)
	fillBuffer(t, h, b, 8*mib, 2)
	h.Free(a)
	h.Free(b)
	_, _, _, _, moves0, fresh0 := host.RecyclerStats(h)
	c, err := h.AllocUninit(16 * mib)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16*mib)
	if err := h.Download(got, c, 0); err != nil {
		t.Fatal(err)
	}
	lo, hi := bytes.Count(got[:8*mib], got[:1]), bytes.Count(got[8*mib:], got[8*mib:8*mib+1])
	if lo != 8*mib || hi != 8*mib || got[0]+got[8*mib] != 3 {
		t.Errorf("16 MiB from two freed 8 MiB buffers (bytes 1 and 2): halves of %d×%d and %d×%d", lo, got[0], hi, got[8*mib])
	}
	live, cached, peak, _, moves, fresh := host.RecyclerStats(h)
	if moves != moves0+2 || fresh != fresh0 || live != 16*mib || cached != 0 || peak != 16*mib {
		t.Errorf("moves %d → %d, fresh bytes %d → %d, live %d, cached %d, peak %d; want 2 moves, no fresh bytes, 16 MiB live and at the peak", moves0, moves, fresh0, fresh, live, cached, peak)
	}
	h.Free(c)
	// Larger than everything cached: the 16 MiB moved, 4 MiB fresh; zeroed by Alloc.
	d, err := h.Alloc(20 * mib)
	if err != nil {
		t.Fatal(err)
	}
	if !allBytes(t, h, d, 20*mib, 0) {
		t.Error("Alloc of moved pages is not zero")
	}
	live, cached, peak, _, _, fresh = host.RecyclerStats(h)
	if fresh != fresh0+4*mib || live != 20*mib || cached != 0 || peak != 20*mib {
		t.Errorf("20 MiB from 16 cached: fresh bytes %d → %d, live %d, cached %d, peak %d; want 4 MiB fresh, 20 MiB live and at the peak", fresh0, fresh, live, cached, peak)
	}
	h.Free(d)
}
