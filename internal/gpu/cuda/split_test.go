package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/gpu/driver"
)

// kernelsIn lists the kernels (entry points) a program still defines as kernels.
func kernelsIn(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(line, globalPrefix); ok {
			out = append(out, rest[:strings.Index(rest, "(")])
		}
	}
	return out
}

func TestSplitKernels(t *testing.T) {
	var b strings.Builder
	b.WriteString("// a comment naming extern \"C\" __global__ void mslk_not_a_kernel(\n__device__ int helper(int x) { return x + 1; }\n")
	for i := range 5 {
		fmt.Fprintf(&b, "%smslk_k%d(int* p) {\n  p[0] = helper(%d);\n}\n\n", globalPrefix, i, i)
	}
	src := b.String()
	parts, partOf := splitKernels(src, 2)
	if len(parts) != 2 || len(partOf) != 5 {
		t.Fatalf("%d parts, %d kernels placed", len(parts), len(partOf))
	}
	seen := map[string]int{}
	for p, part := range parts {
		// The rest of the source is untouched: only the demoted kernels' prefixes change, so every
		// line keeps its number (diagnostics name the same lines).
		if strings.Count(part, "\n") != strings.Count(src, "\n") || !strings.Contains(part, "__device__ int helper(int x)") ||
			!strings.Contains(part, "mslk_not_a_kernel") {
			t.Errorf("part %d changed more than the kernels' prefixes:\n%s", p, part)
		}
		ks := kernelsIn(part)
		if got := strings.Count(part, demotedPrefix); got+len(ks) != 5 {
			t.Errorf("part %d: %d kernels and %d demoted, want 5 in all", p, len(ks), got)
		}
		for _, k := range ks {
			seen[k]++
			if partOf[k] != p {
				t.Errorf("kernel %s is in part %d, partOf says %d", k, p, partOf[k])
			}
		}
	}
	for i := range 5 {
		if k := fmt.Sprintf("mslk_k%d", i); seen[k] != 1 || partOf[k] != i%2 {
			t.Errorf("%s: a kernel in %d parts, partOf %d", k, seen[k], partOf[k])
		}
	}
	// One program: n < 2, or fewer than two kernels.
	for _, c := range []struct {
		src string
		n   int
	}{{src, 1}, {src, 0}, {"__device__ int f();\n" + globalPrefix + "mslk_only(int* p) {}\n", 8}, {"int x;\n", 8}} {
		if parts, partOf := splitKernels(c.src, c.n); len(parts) != 1 || parts[0] != c.src || partOf != nil {
			t.Errorf("n %d: %d parts, partOf %v", c.n, len(parts), partOf)
		}
	}
	// More parts than kernels: one kernel a program.
	if parts, _ := splitKernels(src, 16); len(parts) != 5 {
		t.Errorf("16 parts of 5 kernels: %d programs", len(parts))
	}
	if n := mainParts(); n < 1 || n > maxMainParts {
		t.Errorf("mainParts() = %d", n)
	}
}

// The embedded kernels.gen.cu split as the backend compiles it: every kernel of the kernel table
// (but those of module templates) is a kernel in exactly the program partOf names, and each
// program keeps every kernel exactly once (as a kernel or demoted).
func TestSplitEmbeddedKernels(t *testing.T) {
	if !strings.Contains(kernelsSource, "__global__") {
		t.Skip("kernels.gen.cu is still the placeholder")
	}
	parts, partOf := splitKernels(kernelsSource, maxMainParts)
	if len(parts) != maxMainParts {
		t.Fatalf("%d programs", len(parts))
	}
	where := map[string]int{}
	for p, part := range parts {
		for _, k := range kernelsIn(part) {
			if _, dup := where[k]; dup {
				t.Errorf("%s is a kernel in programs %d and %d", k, where[k], p)
			}
			where[k] = p
		}
	}
	n := 0
	for i := range driver.Kernels {
		k := &driver.Kernels[i]
		if k.Module != "" {
			continue
		}
		n++
		entry := KernelPrefix + k.Name
		if p, ok := where[entry]; !ok || partOf[entry] != p {
			t.Errorf("%s: a kernel of program %d (found %v), partOf says %d", entry, p, ok, partOf[entry])
		}
	}
	if len(where) != n || len(partOf) != n {
		t.Errorf("%d kernels in the programs, %d placed, %d in the table", len(where), len(partOf), n)
	}
}
