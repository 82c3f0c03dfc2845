// Command mslgen reads the MSL kernels of shaders/<stage>/*.metal and emits the code that lets the same
// kernels run on the CPU host device, on CUDA and through the clang address-space check, plus
// the Go table of kernels and their argument slots. It is run by go generate in
// internal/gpu/driver:
//
//	mslgen [-root dir]                   write the four generated files (below)
//	mslgen [-root dir] -check out.cpp [file.metal...]
//	                                     write only the clang check copy of the given files
//	                                     (default: every kernel file, see shaderFiles)
//
// Outputs, paths relative to the module root:
//
//	internal/gpu/driver/kernels.gen.go      var Kernels = []KernelInfo{...}
//	internal/gpu/host/kernels_host.gen.h    amalgamation (each file below includes it)
//	internal/gpu/host/kernels_host.gen.cpp  host trampolines of kernels without lanes + C table
//	internal/gpu/host/kernels_host_{lanes,v3,v4}.gen.cpp  the lane kernels' trampolines: baseline,
//	                                        AVX2 and AVX-512 copies (compiled in parallel)
//	internal/gpu/cuda/kernels.gen.cu        amalgamation + extern "C" __global__ mslk_NAME wrappers
//	internal/gpu/metal/shaders.gen.metal    the MSL source with includes inlined (Metal run time)
//	internal/kernels/dispatch.gen.go        one typed dispatch function per kernel (launchers.go)
//	shaders/include/field_consts.h          BabyBear/Fp4 constants from internal/field
//
// and per module template (below) NAME:
//
//	internal/gpu/host/modules/NAME.gen.cpp  the host copy (compiled at run time by the C++ compiler;
//	                                        a directory of its own, which cgo does not compile)
//	internal/gpu/cuda/kernels_NAME.gen.cu   the CUDA copy (NVRTC at run time)
//	internal/gpu/metal/module_NAME.gen.metal the Metal copy (newLibraryWithSource at run time)
//
// Module templates. A kernel file with a line `// mslgen:module NAME` is not part of the main
// outputs: its kernels' code depends on the AIR being proved. A header it includes that holds a
// line `// mslgen:runtime-header` (shaders/include/air_pieces.h) is not inlined into the
// templates; a line generatedMarker stands in its place, which the device backends replace by
// code generated at run time (internal/kernels/piececode) before they compile one module per
// such code. The check copy inlines the header (a placeholder that declares the interface).
//
// The non-Metal outputs start from one "amalgamation": the .metal files with their quoted
// #includes inlined (each file once, with #line directives so diagnostics point at the original
// files), the [[...]] attributes of kernel parameters blanked out, each `kernel void NAME(`
// renamed to msl_kernel_NAME, and the address-space keywords rewritten to the MSL_DEVICE...
// macros of shaders/include/prelude.h. Files under shaders/bad/ are never part of the real
// outputs (they hold deliberate mistakes for scripts/check-msl.sh).
//
// CUDA wrapper contract (the Go CUDA backend launches through the driver API against it): for
// each kernel, `extern "C" __global__ void mslk_NAME(...)` whose parameters are every
// [[buffer(i)]] slot in increasing i (a pointer for a `device/constant T*` slot, the struct by
// value for a `constant T&` slot), then one `unsigned tg_off_j` per [[threadgroup(j)]] in
// increasing j: the byte offset of that array in the launch's dynamic shared memory (each array
// 16-byte aligned, total = sum of the lengths each rounded up to 16). Buffer and threadgroup
// indices must be dense (0..n-1).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Param is one kernel parameter.
type Param struct {
	Type      string // declared type, e.g. "device const uint*", "constant Params&"
	Name      string
	Attr      string // "buffer", "threadgroup" or a built-in name such as "thread_position_in_grid"
	Index     int    // [[buffer(i)]] / [[threadgroup(i)]] index; position for built-ins
	ValueSize int    // sizeof the value of a `constant T&` slot
}

// IsRef reports whether a buffer parameter is a reference (`constant T& p`): passed by value.
func (p Param) IsRef() bool { return strings.HasSuffix(p.Type, "&") }

// Pointee is the type without the trailing * or &.
func (p Param) Pointee() string {
	return strings.TrimSpace(strings.TrimRight(p.Type, "*&"))
}

// Kernel is one `kernel void NAME(...)`.
type Kernel struct {
	Name        string
	Family      string // base name of the .metal file
	Pos         string // file:line
	Params      []Param
	UsesBarrier bool // has threadgroup parameters or calls threadgroup_barrier
	HostSIMD    bool // its body uses MSL_LANES or MSL_HOST_ISA_COPIES: host group trampolines get x86-64 ISA variants
	NBuf, NTG   int  // 1 + highest buffer / threadgroup index
	// Module: the CUDA module of the file's kernels ("": the main one), from a line
	// `// mslgen:module NAME` in the file (see main).
	Module string
}

// reModule finds a kernel file's CUDA module line.
var reModule = regexp.MustCompile(`(?m)^// mslgen:module ([a-z][a-z0-9_]*)\s*$`)

// builtins lists the supported built-in attributes (see hd_glue.h and the CUDA glue below).
var builtins = map[string]bool{
	"thread_position_in_grid":        true,
	"thread_position_in_threadgroup": true,
	"threadgroup_position_in_grid":   true,
	"threads_per_threadgroup":        true,
	"threadgroups_per_grid":          true,
	"threads_per_grid":               true,
	"thread_index_in_threadgroup":    true,
}

var builtinTypes = map[string]bool{"uint": true, "ushort": true, "uint2": true, "uint3": true}

var (
	reKernel  = regexp.MustCompile(`\bkernel\s+void\s+([A-Za-z_]\w*)\s*\(`)
	reAttr    = regexp.MustCompile(`\[\[\s*(.*?)\s*\]\]`)
	reIndexed = regexp.MustCompile(`^(buffer|threadgroup)\s*\(\s*(\d+)\s*\)$`)
	reName    = regexp.MustCompile(`([A-Za-z_]\w*)\s*$`)
	reInclude = regexp.MustCompile(`^\s*#\s*include\s*"([^"]+)"`)
	reKeyword = regexp.MustCompile(`\b(device|constant|threadgroup|thread|kernel)\b`)
	reStruct  = regexp.MustCompile(`\bstruct\s+([A-Za-z_]\w*)\s*\{`)
	reField   = regexp.MustCompile(`^uint\s+(.+)$`)
	reDecl    = regexp.MustCompile(`^([A-Za-z_]\w*)\s*(?:\[\s*(\d+)u?\s*\])?$`)
)

// rewriteKeywords replaces the MSL keywords (outside comments and literals) by the macros
// MSL_DEVICE, MSL_CONSTANT, MSL_THREADGROUP, MSL_THREAD and MSL_KERNEL of prelude.h.
func rewriteKeywords(src []byte) []byte {
	m := maskComments(src)
	var eds []edit
	for _, loc := range reKeyword.FindAllIndex(m, -1) {
		eds = append(eds, edit{loc[0], loc[1] - loc[0], "MSL_" + strings.ToUpper(string(m[loc[0]:loc[1]]))})
	}
	return applyEdits(src, eds)
}

func kw(s string) string { return string(rewriteKeywords([]byte(s))) }

// maskComments returns src with comments and string/char literals replaced by spaces (newlines
// kept), so offsets stay valid and the scanner never matches inside them.
func maskComments(src []byte) []byte {
	m := append([]byte(nil), src...)
	blank := func(i int) {
		if i < len(m) && m[i] != '\n' {
			m[i] = ' '
		}
	}
	for i := 0; i < len(m); i++ {
		switch {
		case m[i] == '/' && i+1 < len(m) && m[i+1] == '/':
			for ; i < len(m) && m[i] != '\n'; i++ {
				blank(i)
			}
		case m[i] == '/' && i+1 < len(m) && m[i+1] == '*':
			j := i
			for ; j+1 < len(m) && !(m[j] == '*' && m[j+1] == '/'); j++ {
				blank(j)
			}
			for k := j; k < j+2 && k < len(m); k++ {
				blank(k)
			}
			i = j + 1
		case m[i] == '"' || m[i] == '\'':
			q := m[i]
			for i++; i < len(m) && m[i] != q && m[i] != '\n'; i++ {
				if m[i] == '\\' {
					blank(i)
					i++
				}
				blank(i)
			}
		}
	}
	return m
}

// match returns the index of the bracket closing the one at open.
func match(m []byte, open int, lo, hi byte) (int, error) {
	depth := 0
	for i := open; i < len(m); i++ {
		switch m[i] {
		case lo:
			depth++
		case hi:
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced %c at offset %d", lo, open)
}

// splitTop splits s at commas outside (), [] and <>.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '[', '<':
			depth++
		case ')', ']', '>':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

type edit struct {
	at, n int // replace src[at:at+n]
	with  string
}

func applyEdits(src []byte, eds []edit) []byte {
	var out []byte
	last := 0
	for _, e := range eds { // edits are in ascending order and do not overlap
		out = append(out, src[last:e.at]...)
		out = append(out, e.with...)
		last = e.at + e.n
	}
	return append(out, src[last:]...)
}

// structs maps a struct name to its body (comments masked), collected from every file read.
type structs map[string]string

func (s structs) collect(src []byte) error {
	m := maskComments(src)
	for _, loc := range reStruct.FindAllSubmatchIndex(m, -1) {
		end, err := match(m, loc[1]-1, '{', '}')
		if err != nil {
			return err
		}
		s[string(m[loc[2]:loc[3]])] = string(m[loc[1]:end])
	}
	return nil
}

// valueSize is sizeof(T) of a `constant T&` parameter: T is uint or a struct of uint fields
// (scalars or arrays of literal length), which every target lays out the same way.
func (s structs) valueSize(t string) (int, error) {
	t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(t, "constant")), "const"))
	if t == "uint" {
		return 4, nil
	}
	body, ok := s[t]
	if !ok {
		return 0, fmt.Errorf("value type %q is neither uint nor a struct defined in shaders/", t)
	}
	size := 0
	for _, f := range strings.Split(body, ";") {
		f = strings.Join(strings.Fields(f), " ")
		if f == "" {
			continue
		}
		sm := reField.FindStringSubmatch(f)
		if sm == nil {
			return 0, fmt.Errorf("struct %s: field %q: value structs may only hold uint fields", t, f)
		}
		for _, d := range strings.Split(sm[1], ",") {
			dm := reDecl.FindStringSubmatch(strings.TrimSpace(d))
			if dm == nil {
				return 0, fmt.Errorf("struct %s: field %q: value structs may only hold uint fields", t, f)
			}
			n := 1
			if dm[2] != "" {
				n, _ = strconv.Atoi(dm[2])
			}
			size += 4 * n
		}
	}
	if size == 0 {
		return 0, fmt.Errorf("struct %s has no fields", t)
	}
	return size, nil
}

// parseKernels finds the kernels of one file and the edits that produce its stripped copy.
// With lax (the check copy), value structs that do not qualify are let through: the check
// copy needs no sizes, and the deliberate-mistakes file binds such structs.
func parseKernels(path string, src []byte, st structs, lax bool) ([]Kernel, []edit, error) {
	m := maskComments(src)
	var ks []Kernel
	var eds []edit
	line := func(off int) int { return 1 + bytes.Count(src[:off], []byte("\n")) }
	family := strings.TrimSuffix(filepath.Base(path), ".metal")
	for _, loc := range reKernel.FindAllSubmatchIndex(m, -1) {
		k := Kernel{Name: string(m[loc[2]:loc[3]]), Family: family, Pos: fmt.Sprintf("%s:%d", path, line(loc[0]))}
		fail := func(format string, a ...any) ([]Kernel, []edit, error) {
			return nil, nil, fmt.Errorf("%s: kernel %s: %s", k.Pos, k.Name, fmt.Sprintf(format, a...))
		}
		eds = append(eds, edit{loc[2], loc[3] - loc[2], "msl_kernel_" + k.Name})
		open := loc[1] - 1
		closeP, err := match(m, open, '(', ')')
		if err != nil {
			return nil, nil, err
		}
		off := open + 1
		seenBuf, seenTG := map[int]bool{}, map[int]bool{}
		for pos, raw := range splitTop(string(m[open+1 : closeP])) {
			attrs := reAttr.FindAllStringSubmatchIndex(raw, -1)
			if len(attrs) != 1 {
				return fail("parameter %q needs exactly one [[attribute]]", strings.TrimSpace(raw))
			}
			a := attrs[0]
			eds = append(eds, edit{off + a[0], a[1] - a[0], strings.Repeat(" ", a[1]-a[0])})
			decl := strings.Join(strings.Fields(raw[:a[0]]+" "+raw[a[1]:]), " ")
			nm := reName.FindStringSubmatchIndex(decl)
			if nm == nil {
				return fail("cannot find the name in %q", decl)
			}
			p := Param{Name: decl[nm[2]:nm[3]], Type: strings.TrimSpace(decl[:nm[2]])}
			p.Type = strings.ReplaceAll(strings.ReplaceAll(p.Type, " *", "*"), " &", "&")
			attr := raw[a[2]:a[3]]
			if sm := reIndexed.FindStringSubmatch(attr); sm != nil {
				p.Attr = sm[1]
				p.Index, _ = strconv.Atoi(sm[2])
				seen := map[string]map[int]bool{"buffer": seenBuf, "threadgroup": seenTG}[p.Attr]
				if seen[p.Index] {
					return fail("duplicate [[%s]]", attr)
				}
				seen[p.Index] = true
				switch {
				case p.Attr == "buffer" && strings.HasPrefix(p.Type, "threadgroup"):
					return fail("threadgroup pointer %s must use [[threadgroup(i)]]", p.Name)
				case p.Attr == "buffer" && !strings.HasSuffix(p.Type, "*") && !p.IsRef():
					return fail("buffer parameter %s must be a pointer or reference", p.Name)
				case p.Attr == "buffer" && p.IsRef() && !strings.HasPrefix(p.Type, "constant "):
					return fail("reference parameter %s must be `constant T&` (set by value)", p.Name)
				case p.Attr == "buffer" && !p.IsRef() && !strings.HasPrefix(p.Type, "device ") && !strings.HasPrefix(p.Type, "constant "):
					return fail("buffer pointer %s must be `device T*` or `constant T*`", p.Name)
				case p.Attr == "threadgroup" && (!strings.HasPrefix(p.Type, "threadgroup ") || !strings.HasSuffix(p.Type, "*")):
					return fail("[[threadgroup(i)]] parameter %s must be `threadgroup T*`", p.Name)
				}
				if p.Attr == "buffer" {
					k.NBuf = max(k.NBuf, p.Index+1)
					if p.IsRef() {
						if p.ValueSize, err = st.valueSize(p.Pointee()); err != nil && !lax {
							return fail("parameter %s: %v", p.Name, err)
						}
					}
				} else {
					k.NTG = max(k.NTG, p.Index+1)
				}
			} else if builtins[attr] {
				p.Attr = attr
				p.Index = pos
				t := strings.TrimSpace(strings.TrimPrefix(p.Type, "const "))
				if !builtinTypes[t] {
					return fail("built-in %s has unsupported type %q (use uint, ushort, uint2, uint3)", attr, p.Type)
				}
				p.Type = t
			} else {
				return fail("unsupported attribute [[%s]] (simd-group built-ins, textures, stage_in... are not emulated)", attr)
			}
			k.Params = append(k.Params, p)
			off += len(raw) + 1
		}
		for i := 0; i < k.NBuf; i++ {
			if !seenBuf[i] {
				return fail("[[buffer(%d)]] is missing: buffer indices must be 0..%d without gaps", i, k.NBuf-1)
			}
		}
		for i := 0; i < k.NTG; i++ {
			if !seenTG[i] {
				return fail("[[threadgroup(%d)]] is missing: threadgroup indices must be 0..%d without gaps", i, k.NTG-1)
			}
		}
		bodyOpen := bytes.IndexByte(m[closeP:], '{')
		if bodyOpen < 0 || strings.TrimSpace(string(m[closeP+1:closeP+bodyOpen])) != "" {
			return fail("expected a body after the parameter list")
		}
		bodyClose, err := match(m, closeP+bodyOpen, '{', '}')
		if err != nil {
			return nil, nil, err
		}
		k.UsesBarrier = k.NTG > 0 || bytes.Contains(m[closeP:bodyClose], []byte("threadgroup_barrier"))
		k.HostSIMD = bytes.Contains(m[closeP:bodyClose], []byte("MSL_LANES")) || bytes.Contains(m[closeP:bodyClose], []byte("MSL_HOST_ISA_COPIES"))
		ks = append(ks, k)
	}
	return ks, eds, nil
}

// amalgamator inlines quoted #includes once each, with #line markers. With rewrite it also
// rewrites the MSL keywords (non-Metal targets); kernel edits are applied by the caller.
type amalgamator struct {
	root    string
	incDirs []string
	rewrite bool
	// markers: a runtime header's include becomes generatedMarker (module templates).
	markers bool
	seen    map[string]bool
	out     bytes.Buffer
}

// generatedMarker is the line of a module template that the device backends replace by the code
// generated at run time (driver.GeneratedCodeMarker; internal/gpu/driver tests that they agree).
const generatedMarker = "// mslgen:generated-code"

// reRuntimeHeader marks a header whose code is generated at run time.
var reRuntimeHeader = regexp.MustCompile(`(?m)^// mslgen:runtime-header\s*$`)

// rel is path relative to the module root, with forward slashes (stable #line names).
func (a *amalgamator) rel(path string) string {
	r, err := filepath.Rel(a.root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(r)
}

func (a *amalgamator) add(path string, src []byte) error {
	a.seen[path] = true
	fmt.Fprintf(&a.out, "#line 1 %q\n", a.rel(path))
	text := src
	if a.rewrite {
		text = rewriteKeywords(src)
	}
	lines := strings.SplitAfter(string(text), "\n")
	for i, ln := range lines {
		sm := reInclude.FindStringSubmatch(ln)
		if sm == nil {
			a.out.WriteString(ln)
			continue
		}
		inc, err := a.resolve(filepath.Dir(path), sm[1])
		if err != nil {
			return fmt.Errorf("%s:%d: %v", a.rel(path), i+1, err)
		}
		if !a.seen[inc] {
			body, err := os.ReadFile(inc)
			if err != nil {
				return err
			}
			if a.markers && reRuntimeHeader.Match(body) {
				a.seen[inc] = true
				a.out.WriteString(generatedMarker + "\n")
				fmt.Fprintf(&a.out, "#line %d %q\n", i+2, a.rel(path))
				continue
			}
			if err := a.add(inc, body); err != nil {
				return err
			}
			if !bytes.HasSuffix(body, []byte("\n")) {
				a.out.WriteString("\n")
			}
		}
		fmt.Fprintf(&a.out, "#line %d %q\n", i+2, a.rel(path))
	}
	return nil
}

func (a *amalgamator) resolve(dir, name string) (string, error) {
	for _, d := range append([]string{dir}, a.incDirs...) {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("include %q not found (quoted includes come from shaders/include/)", name)
}

const banner = "// Code generated by scripts/mslgen; DO NOT EDIT.\n"

// findRoot walks up from the working directory to the directory holding go.mod.
func findRoot() string {
	dir, err := os.Getwd()
	check(err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			check(fmt.Errorf("no go.mod above the working directory; pass -root"))
		}
		dir = parent
	}
}

func main() {
	root := flag.String("root", "", "module root (default: the directory of the nearest go.mod)")
	checkOut := flag.String("check", "", "write only the clang check copy of the given .metal files (default: every kernel file) to this file")
	flag.Parse()
	if *root == "" {
		*root = findRoot()
	}
	r, err := filepath.Abs(*root)
	check(err)
	files := flag.Args()
	for i, f := range files {
		files[i], err = filepath.Abs(f)
		check(err)
	}
	if len(files) == 0 {
		files = shaderFiles(r)
	}
	if len(files) == 0 {
		check(fmt.Errorf("no shaders/<stage>/*.metal under %s", r))
	}
	incDirs := []string{filepath.Join(r, "shaders", "include")}
	if *checkOut == "" {
		// Before the headers are read: babybear.h and bb4.h include it.
		write(filepath.Join(r, "shaders/include/field_consts.h"), genFieldHeader())
	}

	// Structs of every file and header (value sizes), then kernels.
	st := structs{}
	srcs := make([][]byte, len(files))
	for i, path := range files {
		srcs[i], err = os.ReadFile(path)
		check(err)
		check(st.collect(srcs[i]))
	}
	// am: the main kernel files, rewritten (the host copy; in check mode every file); cu: the
	// same for CUDA's main module; metal: the Metal copy. A file with a line
	// `// mslgen:module NAME` goes to module template NAME instead (one copy per target, with
	// generatedMarker for the runtime headers it includes; see the package comment).
	checkMode := *checkOut != ""
	am := &amalgamator{root: r, incDirs: incDirs, rewrite: true, seen: map[string]bool{}}
	cu := &amalgamator{root: r, incDirs: incDirs, rewrite: true, seen: map[string]bool{}}
	metal := &amalgamator{root: r, incDirs: incDirs, seen: map[string]bool{}}
	type template struct{ host, cu, metal *amalgamator }
	mods := map[string]*template{}
	var modNames []string
	// Headers too, so that value structs declared there are known when kernels are parsed.
	collectIncludes(st, incDirs)
	var kernels []Kernel
	names := map[string]string{}
	for i, path := range files {
		rel := am.rel(path)
		ks, eds, err := parseKernels(rel, srcs[i], st, checkMode)
		check(err)
		for _, k := range ks {
			if prev, dup := names[k.Name]; dup {
				check(fmt.Errorf("%s: kernel %s already defined at %s", k.Pos, k.Name, prev))
			}
			names[k.Name] = k.Pos
		}
		edited := applyEdits(srcs[i], eds)
		kernels = append(kernels, ks...)
		m := reModule.FindSubmatch(srcs[i])
		if m == nil || checkMode {
			check(am.add(path, edited))
			check(cu.add(path, edited))
			check(metal.add(path, srcs[i]))
			if m == nil {
				continue
			}
		}
		mod := string(m[1])
		for j := len(kernels) - len(ks); j < len(kernels); j++ {
			kernels[j].Module = mod
		}
		t := mods[mod]
		if t == nil {
			mk := func(rewrite bool) *amalgamator {
				return &amalgamator{root: r, incDirs: incDirs, rewrite: rewrite, markers: true, seen: map[string]bool{}}
			}
			t = &template{host: mk(true), cu: mk(true), metal: mk(false)}
			mods[mod] = t
			modNames = append(modNames, mod)
		}
		check(t.host.add(path, edited))
		check(t.cu.add(path, edited))
		check(t.metal.add(path, srcs[i]))
	}
	if checkMode {
		write(*checkOut, banner+am.out.String())
		return
	}
	write(filepath.Join(r, "internal/gpu/driver/kernels.gen.go"), genGo(kernels))
	write(filepath.Join(r, "internal/kernels/dispatch.gen.go"), genLaunchers(kernels, st))
	inModule := func(mod string) []Kernel {
		var ks []Kernel
		for _, k := range kernels {
			if k.Module == mod {
				ks = append(ks, k)
			}
		}
		return ks
	}
	hostMain, hostCopies := genHost(inModule(""), am.out.String(), "hd_kernels", "hd_nkernels", true)
	write(filepath.Join(r, "internal/gpu/host/kernels_host.gen.h"), banner+hostHeader(am.out.String()))
	write(filepath.Join(r, "internal/gpu/host/kernels_host.gen.cpp"), banner+hostMain)
	for suffix, text := range hostCopies {
		write(filepath.Join(r, "internal/gpu/host/kernels_host_"+suffix+".gen.cpp"), banner+text)
	}
	write(filepath.Join(r, "internal/gpu/cuda/kernels.gen.cu"), banner+genCUDA(inModule(""), cu.out.String()))
	write(filepath.Join(r, "internal/gpu/metal/shaders.gen.metal"), banner+metal.out.String())
	for _, mod := range modNames {
		t := mods[mod]
		modMain, _ := genHost(inModule(mod), t.host.out.String(), "hd_module_kernels", "hd_module_nkernels", false)
		write(filepath.Join(r, "internal/gpu/host/modules/"+mod+".gen.cpp"), banner+modMain)
		write(filepath.Join(r, "internal/gpu/cuda/kernels_"+mod+".gen.cu"), banner+genCUDA(inModule(mod), t.cu.out.String()))
		write(filepath.Join(r, "internal/gpu/metal/module_"+mod+".gen.metal"), banner+t.metal.out.String())
	}
}

// shaderFiles lists the kernel files: shaders/<stage>/*.metal, grouped by the prover stage they
// serve (commit, gkr, constraints, openings; common for several), plus any shaders/*.metal;
// never shaders/include (headers) or shaders/bad (deliberate mistakes for scripts/check-msl.sh).
// Sorted by path.
func shaderFiles(root string) []string {
	dir := filepath.Join(root, "shaders")
	files, err := filepath.Glob(filepath.Join(dir, "*.metal"))
	check(err)
	ents, err := os.ReadDir(dir)
	check(err)
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "include" || e.Name() == "bad" {
			continue
		}
		sub, err := filepath.Glob(filepath.Join(dir, e.Name(), "*.metal"))
		check(err)
		files = append(files, sub...)
	}
	sort.Strings(files)
	return files
}

// collectIncludes reads the structs of every header, so value structs may live in headers.
func collectIncludes(st structs, dirs []string) {
	for _, d := range dirs {
		hs, err := filepath.Glob(filepath.Join(d, "*.h"))
		check(err)
		sort.Strings(hs)
		for _, h := range hs {
			b, err := os.ReadFile(h)
			check(err)
			check(st.collect(b))
		}
	}
}

// hostHeader is the host's amalgamation of the kernels (split: kernels_host.gen.h, included by
// each of the package's files of trampolines) with the glue the trampolines use.
func hostHeader(amalg string) string {
	return "#include \"hd_runtime.h\"\n" + amalg + "\n#line 1 \"<mslgen host>\"\n#include \"hd_glue.h\"\n"
}

// baselineLanesNote heads the file of the baseline copies of the lane kernels. Where the AVX2 and
// AVX-512 copies exist (x86-64, GCC, clones on: the condition of HD_ISA_VARIANTS in hd_glue.h),
// the baseline (SSE2) copy runs only on CPUs without AVX2, and GCC compiles it at -O1: 92 → 50 s
// of the build's CPU on the 2-vCPU VM, the largest of the host package's files (issue 23: make in
// ≤ 3 min). Everywhere else (aarch64: Apple Silicon, or HD_NO_CLONES) it is the only copy and
// keeps the package's -O3.
const baselineLanesNote = `#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HD_NO_CLONES)
#pragma GCC optimize("O1")
#endif
`

// hostISAs are the instruction-set copies of the group trampolines of kernels written with lanes
// (HD_ISA_VARIANTS, hd_glue.h): on x86-64 a copy for x86-64-v3 (AVX2) and one for x86-64-v4
// (AVX-512) beside the baseline one; the runtime picks one per dispatch from what the CPU
// supports (hd_runtime.cpp).
//
// Each file of copies defines HD_LANE_COPY (the x86-64 level it is compiled for; 1 for the baseline
// file): babybear.h chooses the representation of a lane vector from it (HD_LANE_PARTS).
var hostISAs = []struct{ suffix, attr, level string }{{"v3", "HD_TARGET_V3 ", "3"}, {"v4", "HD_TARGET_V4 ", "4"}}

// genHost: CPU trampolines. item runs one work item (on a fiber when the kernel has barriers);
// group loops over a whole threadgroup for barrier-free kernels.
// table and count name the C table and its length: hd_kernels and hd_nkernels for the main copy,
// linked into the binary; hd_module_kernels and hd_module_nkernels for a module template, which
// the host device compiles into a shared library at run time and opens with dlopen.
//
// With split, the kernels' trampolines with lanes go to files of their own (copies, keyed by the
// suffix: v3, v4, and lanes for the baseline copy), each including the amalgamation
// (kernels_host.gen.h), and the main file declares them: go build compiles a package's C++
// files in parallel, and the copies were most of the one file's compile time (277 s of CPU at
// -O3 on the 2-vCPU VM, 127 s without the AVX2 and AVX-512 copies). A module stays one file.
func genHost(ks []Kernel, amalg, table, count string, split bool) (main string, copies map[string]string) {
	head := hostHeader(amalg) + "\n"
	if split {
		head = "#include \"kernels_host.gen.h\"\n\n"
	}
	// The files of copies leave out the host-only functions that the kernels do not use
	// (HD_TRAMPOLINES_ONLY: poseidon2.metal's exported transcript helpers).
	copyHead := "#define HD_TRAMPOLINES_ONLY 1\n" + head
	var b strings.Builder
	b.WriteString(head)
	files := map[string]*strings.Builder{} // split: the files of copies, by suffix
	if split {
		for _, v := range hostISAs {
			files[v.suffix] = &strings.Builder{}
			files[v.suffix].WriteString("#define HD_LANE_COPY " + v.level + "\n" + copyHead + "#if HD_ISA_VARIANTS\n")
		}
		files["lanes"] = &strings.Builder{}
		files["lanes"].WriteString(baselineLanesNote + "#define HD_LANE_COPY 1\n" + copyHead)
	}
	for _, k := range ks {
		// Prologue: bind every slot to a local once per call. `constant T&` values are copied
		// (constant memory is immutable during a dispatch), and so is the launch geometry, so
		// that stores through the kernel's device pointers cannot alias them and the compiler
		// may keep them in registers.
		pro := []string{"const hd_launch L_ = *Lp, *L = &L_;"}
		var args []string
		for i, p := range k.Params {
			v := fmt.Sprintf("a%d", i)
			switch {
			case p.Attr == "buffer" && p.IsRef():
				pro = append(pro, fmt.Sprintf("%s %s = *(%s*)L->bufs[%d];", kw(p.Pointee()), v, kw(p.Pointee()), p.Index))
				args = append(args, v)
			case p.Attr == "buffer":
				pro = append(pro, fmt.Sprintf("%s const %s = (%s)L->bufs[%d];", kw(p.Type), v, kw(p.Type), p.Index))
				args = append(args, v)
			case p.Attr == "threadgroup":
				pro = append(pro, fmt.Sprintf("%s const %s = (%s)tg[%d];", kw(p.Type), v, kw(p.Type), p.Index))
				args = append(args, v)
			default:
				args = append(args, fmt.Sprintf("hd_cvt<%s>(hd_bi_%s(L, gp, lp))", p.Type, p.Attr))
			}
		}
		pro = append(pro, "(void)tg;")
		call := fmt.Sprintf("msl_kernel_%s(%s);", k.Name, strings.Join(args, ", "))
		// The per-item trampoline exists only for kernels with barriers (the runtime runs those
		// items on fibers: groups of more than one thread, which the launchers give the host
		// device for no lane kernel). Only the group trampolines of kernels written with lanes
		// are compiled once per instruction set (compile time grows with every copy).
		if k.UsesBarrier {
			fmt.Fprintf(&b, "static void hd_item_%s(const hd_launch* Lp, hd_u3 gp, hd_u3 lp, unsigned char* const* tg) {\n  %s\n  %s\n}\n",
				k.Name, strings.Join(pro, "\n  "), call)
		}
		sig := func(storage, suffix string) string {
			return fmt.Sprintf("%svoid hd_group_%s%s(const hd_launch* Lp, hd_u3 gp, unsigned char* const* tg)", storage, k.Name, suffix)
		}
		group := func(w *strings.Builder, attr, storage, suffix string) {
			fmt.Fprintf(w, "%s%s {\n  %s\n  HD_FOR_EACH_ITEM(L, lp) %s\n}\n",
				attr, sig(storage, suffix), strings.Join(pro, "\n  "), call)
		}
		if k.HostSIMD {
			b.WriteString("#if HD_ISA_VARIANTS\n")
			for _, v := range hostISAs {
				if split {
					fmt.Fprintf(&b, "%s;\n", sig("", "_"+v.suffix))
					group(files[v.suffix], v.attr, "", "_"+v.suffix)
				} else {
					group(&b, v.attr, "static ", "_"+v.suffix)
				}
			}
			b.WriteString("#endif\n")
		}
		if k.HostSIMD && split {
			fmt.Fprintf(&b, "%s;\n", sig("", ""))
			group(files["lanes"], "", "", "")
		} else {
			group(&b, "", "static ", "")
		}
		sizes := make([]string, k.NBuf)
		for i := range sizes {
			sizes[i] = "0"
		}
		var asserts []string
		for _, p := range k.Params {
			if p.Attr == "buffer" && p.IsRef() {
				sizes[p.Index] = strconv.Itoa(p.ValueSize)
				asserts = append(asserts, fmt.Sprintf("static_assert(sizeof(%s) == %d, \"%s: value size of %s\");", kw(p.Pointee()), p.ValueSize, k.Name, p.Name))
			}
		}
		for _, a := range asserts {
			b.WriteString(a + "\n")
		}
		fmt.Fprintf(&b, "static const unsigned hd_valsize_%s[] = {%s};\n\n", k.Name, strings.Join(append(sizes, "0"), ", "))
	}
	fmt.Fprintf(&b, "extern \"C\" const hd_kernel %s[] = {\n", table)
	for _, k := range ks {
		item := "nullptr"
		if k.UsesBarrier {
			item = "hd_item_" + k.Name
		}
		isa := "{nullptr, nullptr}"
		if k.HostSIMD {
			isa = fmt.Sprintf("HD_ISA_GROUPS(hd_group_%s_v3, hd_group_%s_v4)", k.Name, k.Name)
		}
		fmt.Fprintf(&b, "    {%q, %s, hd_group_%s, %d, %d, hd_valsize_%s, %d, %s},\n",
			k.Name, item, k.Name, b2i(k.UsesBarrier), k.NBuf, k.Name, k.NTG, isa)
	}
	fmt.Fprintf(&b, "};\nextern \"C\" const int %s = %d;\n", count, len(ks))
	if split {
		copies = map[string]string{}
		for suffix, w := range files {
			if suffix != "lanes" {
				w.WriteString("#endif\n")
			}
			copies[suffix] = w.String()
		}
	}
	return b.String(), copies
}

// cudaGlue is inlined after the kernels: NVRTC compiles the file alone, without any #include.
const cudaGlue = `
#line 1 "<mslgen cuda glue>"
// All [[threadgroup(i)]] arguments live in the dynamic shared memory of the launch, at byte
// offsets passed as the trailing tg_off_j kernel parameters (like Metal's
// setThreadgroupMemoryLength:atIndex:); each array is 16-byte aligned.
extern __shared__ __align__(16) unsigned char msl_tg_mem[];

struct msl_u3 {
  unsigned x, y, z;
};
template <class T> __device__ __forceinline__ T msl_cvt(msl_u3 v);
template <> __device__ __forceinline__ uint msl_cvt<uint>(msl_u3 v) { return v.x; }
template <> __device__ __forceinline__ ushort msl_cvt<ushort>(msl_u3 v) { return (ushort)v.x; }
template <> __device__ __forceinline__ uint2 msl_cvt<uint2>(msl_u3 v) { return uint2(v.x, v.y); }
template <> __device__ __forceinline__ uint3 msl_cvt<uint3>(msl_u3 v) { return uint3(v.x, v.y, v.z); }

// Metal built-ins for dispatchThreadgroups (every block full).
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_thread_position_in_threadgroup() { return msl_u3{threadIdx.x, threadIdx.y, threadIdx.z}; }
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_threadgroup_position_in_grid() { return msl_u3{blockIdx.x, blockIdx.y, blockIdx.z}; }
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_threads_per_threadgroup() { return msl_u3{blockDim.x, blockDim.y, blockDim.z}; }
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_threadgroups_per_grid() { return msl_u3{gridDim.x, gridDim.y, gridDim.z}; }
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_thread_position_in_grid() {
  return msl_u3{blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y,
                blockIdx.z * blockDim.z + threadIdx.z};
}
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_threads_per_grid() {
  return msl_u3{gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z};
}
static __device__ __forceinline__ __attribute__((unused)) msl_u3 msl_bi_thread_index_in_threadgroup() {
  return msl_u3{threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), 0, 0};
}

// Programmatic dependent launch (sm_90+): the backend lets each kernel's groups become resident
// while the kernel before it on the stream drains. So every kernel first waits, before any memory
// access, until the previous grid has completed and its writes are visible, and only then lets
// the next grid launch: at most one grid waits ahead. Absent below sm_90, where the backend
// launches plainly. Metal's dispatches in one command buffer need nothing of the kind.
static __device__ __forceinline__ void msl_grid_order() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

`

// genCUDA: one extern "C" __global__ mslk_NAME per kernel computing the built-ins from
// blockIdx/threadIdx, threadgroup parameters carved out of dynamic shared memory at offsets
// passed as trailing kernel arguments. No host code: the Go backend launches via the driver API.
func genCUDA(ks []Kernel, amalg string) string {
	var b strings.Builder
	b.WriteString("// Compiled by NVRTC alone (no #include). Parameters of mslk_NAME: every [[buffer(i)]] in\n")
	b.WriteString("// increasing i (pointer, or the `constant T&` struct by value), then unsigned tg_off_j per\n")
	b.WriteString("// [[threadgroup(j)]]: byte offsets into the dynamic shared memory, 16-byte aligned.\n")
	b.WriteString(amalg)
	b.WriteString(cudaGlue)
	for _, k := range ks {
		var params []string
		args := make([]string, len(k.Params))
		byBuf := make([]string, k.NBuf)
		byTG := make([]string, k.NTG)
		for i, p := range k.Params {
			switch {
			case p.Attr == "buffer" && p.IsRef():
				byBuf[p.Index] = fmt.Sprintf("%s %s", kw(p.Pointee()), p.Name)
				args[i] = p.Name
			case p.Attr == "buffer":
				byBuf[p.Index] = fmt.Sprintf("%s %s", kw(p.Type), p.Name)
				args[i] = p.Name
			case p.Attr == "threadgroup":
				byTG[p.Index] = fmt.Sprintf("unsigned tg_off_%d", p.Index)
				args[i] = fmt.Sprintf("(%s)(msl_tg_mem + tg_off_%d)", kw(p.Type), p.Index)
			default:
				args[i] = fmt.Sprintf("msl_cvt<%s>(msl_bi_%s())", p.Type, p.Attr)
			}
		}
		params = append(append(params, byBuf...), byTG...)
		fmt.Fprintf(&b, "extern \"C\" __global__ void mslk_%s(%s) {\n  msl_grid_order();\n  msl_kernel_%s(\n      %s);\n}\n\n",
			k.Name, strings.Join(params, ", "), k.Name, strings.Join(args, ",\n      "))
	}
	return b.String()
}

// genGo: the backend-independent description of each kernel's argument slots.
func genGo(ks []Kernel) string {
	var b strings.Builder
	b.WriteString(banner)
	b.WriteString("\npackage driver\n\n// Kernels lists every kernel of shaders/<stage>/*.metal in file and declaration order.\nvar Kernels = []KernelInfo{\n")
	for _, k := range ks {
		mod := ""
		if k.Module != "" {
			mod = fmt.Sprintf("Module: %q, ", k.Module)
		}
		fmt.Fprintf(&b, "\t{Name: %q, Family: %q, %sPos: %q, UsesBarrier: %v, NBuf: %d, NTG: %d, Params: []Param{\n",
			k.Name, k.Family, mod, k.Pos, k.UsesBarrier, k.NBuf, k.NTG)
		for _, p := range k.Params {
			switch p.Attr {
			case "buffer":
				if p.IsRef() {
					fmt.Fprintf(&b, "\t\t{Name: %q, Type: %q, Kind: ParamValue, Index: %d, ValueSize: %d},\n", p.Name, p.Type, p.Index, p.ValueSize)
				} else {
					fmt.Fprintf(&b, "\t\t{Name: %q, Type: %q, Kind: ParamBuffer, Index: %d},\n", p.Name, p.Type, p.Index)
				}
			case "threadgroup":
				fmt.Fprintf(&b, "\t\t{Name: %q, Type: %q, Kind: ParamThreadgroup, Index: %d},\n", p.Name, p.Type, p.Index)
			default:
				fmt.Fprintf(&b, "\t\t{Name: %q, Type: %q, Kind: ParamBuiltin, Index: %d, Builtin: %q},\n", p.Name, p.Type, p.Index, p.Attr)
			}
		}
		b.WriteString("\t}},\n")
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	check(err)
	return string(src)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// write replaces path only when its content changes (keeps timestamps for build caches).
func write(path, s string) {
	if old, err := os.ReadFile(path); err == nil && string(old) == s {
		return
	}
	check(os.MkdirAll(filepath.Dir(path), 0o755))
	check(os.WriteFile(path, []byte(s), 0o644))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mslgen:", err)
		os.Exit(1)
	}
}
