package prover

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// ProveMemoryFactor estimates the host (and, on a GPU, device) memory a proof takes as a
// multiple of its traces' size: measured 4.9 GB peak resident for a 345 MB keccakf trace (1024
// permutations, app-100bit) on the host device. A proof whose estimate exceeds the machine's
// total memory is refused before anything is allocated.
const ProveMemoryFactor = 16

// MachineMemory reads the machine's memory (a variable for tests).
var MachineMemory = sysinfo.ReadMemory

// CheckMemory refuses a proof of traces of traceBytes whose estimate (ProveMemoryFactor ×
// traceBytes, plus 256 MiB) exceeds the machine's total memory; what names the traces.
func CheckMemory(what string, traceBytes uint64) error {
	need := ProveMemoryFactor*traceBytes + 256<<20
	mem := MachineMemory()
	if mem.Total > 0 && need > mem.Total {
		return fmt.Errorf("not enough memory: proving %s (%s of traces) needs about %s, this machine has %s",
			what, sysinfo.Bytes(traceBytes), sysinfo.Bytes(need), sysinfo.Bytes(mem.Total))
	}
	return nil
}

// DefaultSeed is the seed of OpenVM's keccakf example (StdRng::seed_from_u64(42)): the default
// --seed of the commands that generate example traces (trace, bench).
const DefaultSeed = 42

// CheckKeccakfFits refuses, before anything is allocated, a keccakf trace of perms permutations
// that does not fit: factor × its size must fit in the memory available (factor 1 to generate
// it; more to prove it) and, when dir is not empty, its size on the disk of dir. The error
// names the sizes needed and available, and this machine's limit.
func CheckKeccakfFits(perms int, factor uint64, dir string) error {
	need := examples.KeccakfTraceBytes(perms)
	mem := MachineMemory()
	if mem.Available > 0 && need*factor > mem.Available {
		what := "the trace"
		if factor > 1 {
			what = fmt.Sprintf("the trace (%s) and proving it", sysinfo.Bytes(need))
		}
		return cmdutil.Usagef("--perms %d: %s need about %s of memory, %s is available (at most %d permutations here)",
			perms, what, sysinfo.Bytes(need*factor), sysinfo.Bytes(mem.Available), examples.PermsLimit(mem.Available/factor, 0))
	}
	if dir != "" {
		if free, err := sysinfo.DiskFree(dir); err == nil && need+(1<<20) > free {
			return cmdutil.Usagef("--perms %d: the trace file needs %s of disk space, %s is free in %s",
				perms, sysinfo.Bytes(need), sysinfo.Bytes(free), dir)
		}
	}
	return nil
}
