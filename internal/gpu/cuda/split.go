package cuda

import (
	"runtime"
	"strings"
)

// The main module is compiled as several NVRTC programs side by side, each the whole source with
// only some of its kernels left as kernels. On a machine whose CUDA JIT cache
// (~/.nv/ComputeCache, which NVRTC's CUBIN output goes through) is empty — any freshly started
// one — NVRTC spent 7.8–9.8 s compiling kernels.gen.cu as one program, nearly all of it in code
// generation per kernel, and 0.1–0.35 s once that cache held it; as 16 programs on 16 cores it
// took 2.3 s (the longest program, 2.3 s, holds the costliest kernel), with the same CPU time in
// all (H200 host, NVRTC 13.0: docs/perf-notes/first-proof.md).

// globalPrefix begins each kernel's definition (cmd/mslgen's contract, package doc): at the
// start of a line, followed by mslk_NAME(.
const globalPrefix = `extern "C" __global__ void `

// demotedPrefix replaces globalPrefix for the kernels a program leaves out: an unused static
// function, which NVRTC drops with everything only it calls.
const demotedPrefix = `static __device__ __attribute__((unused)) void `

// maxMainParts caps the programs of the main module: 32 programs took 2.06 s against 2.34 s for
// 16 on a 16-core host (the costliest kernel bounds both), each parsing the whole source again.
const maxMainParts = 16

// mainParts is how many programs the main module is compiled as on this host: one per core, at
// most maxMainParts.
func mainParts() int { return min(max(runtime.NumCPU(), 1), maxMainParts) }

// splitKernels splits a CUDA source into at most n programs by kernel: kernel i (in the order of
// the source) stays a kernel in program i mod n, and the others become unused static functions
// there; every program keeps the rest of the source as it is (so diagnostics name the same
// lines). partOf gives each kernel's program by entry point (mslk_NAME). A source with fewer
// than two kernels, or n < 2, is one program (partOf nil).
func splitKernels(src string, n int) (parts []string, partOf map[string]int) {
	var at []int // offsets of the kernels' definitions
	for off := 0; ; {
		i := strings.Index(src[off:], globalPrefix)
		if i < 0 {
			break
		}
		i += off
		if i == 0 || src[i-1] == '\n' {
			at = append(at, i)
		}
		off = i + len(globalPrefix)
	}
	n = min(n, len(at))
	if n < 2 {
		return []string{src}, nil
	}
	partOf = make(map[string]int, len(at))
	for k, i := range at {
		name := src[i+len(globalPrefix):]
		if j := strings.IndexAny(name, "( \t\n"); j >= 0 {
			name = name[:j]
		}
		partOf[name] = k % n
	}
	parts = make([]string, n)
	for p := range parts {
		var b strings.Builder
		b.Grow(len(src) + len(at)*(len(demotedPrefix)-len(globalPrefix)))
		prev := 0
		for k, i := range at {
			if k%n == p {
				continue
			}
			b.WriteString(src[prev:i])
			b.WriteString(demotedPrefix)
			prev = i + len(globalPrefix)
		}
		b.WriteString(src[prev:])
		parts[p] = b.String()
	}
	return parts, partOf
}
