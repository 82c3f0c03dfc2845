//go:build ignore

// cgocheck type-checks the darwin cgo files of this package on any OS, for scripts/check-metal.sh:
//
//	CC="clang --target=arm64-apple-macos12 -nostdlibinc -isystem internal/gpu/metal/stubs" \
//	  go run internal/gpu/metal/cgocheck.go ./internal/gpu/metal
//
// `go vet` cannot do this off macOS: building runtime/cgo for darwin needs Apple's libc headers.
// Instead this runs `go tool cgo` for GOOS=darwin with $CC (which compiles the preamble and
// bridge.h against the stub headers and reads the C types back from the Mach-O debug info), then
// type-checks the package's Go files (in-package tests included) and cgo's output, function
// bodies included, with go/types.
// Imports are type-checked from source for darwin/arm64; runtime/cgo is replaced by its one type
// that cgo's output uses. It checks types only: it compiles no Objective-C and links nothing.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

type listed struct {
	Dir, ImportPath string
	GoFiles         []string
	TestGoFiles     []string
	CgoFiles        []string
	CgoCFLAGS       []string
	CgoCPPFLAGS     []string
}

var darwinEnv = []string{"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=1"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run cgocheck.go <package>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "cgocheck:", err)
		os.Exit(1)
	}
}

func run(pattern string) error {
	cmd := exec.Command("go", "list", "-json", pattern)
	cmd.Env = append(os.Environ(), darwinEnv...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	var p listed
	if err := json.Unmarshal(out, &p); err != nil {
		return err
	}
	if len(p.CgoFiles) == 0 {
		return fmt.Errorf("%s has no cgo files for darwin/arm64", p.ImportPath)
	}
	tmp, err := os.MkdirTemp("", "cgocheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	args := []string{"tool", "cgo", "-objdir", tmp, "-importpath", p.ImportPath, "--", "-I", p.Dir}
	args = append(args, p.CgoCPPFLAGS...)
	args = append(args, p.CgoCFLAGS...)
	args = append(args, p.CgoFiles...)
	cmd = exec.Command("go", args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), darwinEnv...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool cgo (GOOS=darwin, CC=%q): %w", os.Getenv("CC"), err)
	}

	// Parse cgo's output under names in the package directory, so imports resolve in the module.
	fset := token.NewFileSet()
	var files []*ast.File
	add := func(src, name string) error {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), readFile(src), parser.ParseComments)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	}
	for _, f := range append(p.GoFiles, p.TestGoFiles...) {
		if err := add(filepath.Join(p.Dir, f), f); err != nil {
			return err
		}
	}
	for _, f := range p.CgoFiles {
		gen := strings.TrimSuffix(f, ".go") + ".cgo1.go"
		if err := add(filepath.Join(tmp, gen), gen); err != nil {
			return err
		}
	}
	if err := add(filepath.Join(tmp, "_cgo_gotypes.go"), "_cgo_gotypes.go"); err != nil {
		return err
	}

	ctxt := build.Default
	ctxt.GOOS, ctxt.GOARCH, ctxt.CgoEnabled = "darwin", "arm64", false
	build.Default = ctxt // the source importer reads build.Default
	conf := types.Config{Importer: &imp{src: importer.ForCompiler(fset, "source", nil).(types.ImporterFrom), fset: fset}}
	var errs []error
	conf.Error = func(err error) { errs = append(errs, err) }
	conf.Check(p.ImportPath, fset, files, nil)
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d type errors in %s for darwin/arm64 with cgo", len(errs), p.ImportPath)
	}
	fmt.Printf("cgocheck: %s type-checks for darwin/arm64 with cgo (%d files)\n", p.ImportPath, len(files))
	return nil
}

func readFile(name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cgocheck:", err)
		os.Exit(1)
	}
	return b
}

// imp imports from source, except runtime/cgo, whose cgo-only file holds the Incomplete type
// that cgo's output refers to.
type imp struct {
	src  types.ImporterFrom
	fset *token.FileSet
	rt   *types.Package
}

func (i *imp) Import(path string) (*types.Package, error) { return i.ImportFrom(path, "", 0) }

func (i *imp) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if path != "runtime/cgo" {
		return i.src.ImportFrom(path, dir, mode)
	}
	if i.rt == nil {
		f, err := parser.ParseFile(i.fset, "runtime/cgo/stub.go", "package cgo\n\ntype Incomplete struct{ _ [0]func() }\n", 0)
		if err != nil {
			return nil, err
		}
		i.rt, err = (&types.Config{}).Check("runtime/cgo", i.fset, []*ast.File{f}, nil)
		if err != nil {
			return nil, err
		}
	}
	return i.rt, nil
}
