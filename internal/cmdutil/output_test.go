package cmdutil

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.trace")
	if err := os.WriteFile(in, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.trace")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.proof")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	rofile := filepath.Join(dir, "ro.proof")
	if err := os.WriteFile(rofile, []byte("keep"), 0o444); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // in the error; "" for none
	}{
		{"fine", filepath.Join(dir, "out.proof"), ""},
		{"same path", in, "is the input file"},
		{"same path spelled otherwise", filepath.Join(dir, ".", "in.trace"), "is the input file"},
		{"symlink to the input", link, "is a symbolic link"},
		{"dangling symlink", dangling, "is a symbolic link"},
		{"FIFO", fifo, "is not a regular file (a FIFO)"},
		{"read-only file", rofile, "is read-only (mode 0444)"},
		{"directory", dir, "is a directory"},
		{"trailing slash", filepath.Join(dir, "new") + "/", "is a directory"},
		{"missing directory", filepath.Join(dir, "nope", "out.proof"), "does not exist"},
		{"parent is a file", filepath.Join(in, "out.proof"), "is not a directory"},
	}
	if os.Geteuid() != 0 {
		tests = append(tests, struct{ name, path, want string }{"read-only directory", filepath.Join(ro, "out.proof"), "not writable"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CreateOutput("-o", tt.path, in, "")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				f.Abort()
				return
			}
			if err == nil {
				f.Abort()
				t.Fatalf("no error, want %q", tt.want)
			}
			if ExitCodeFor(err) != ExitUsage || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), tt.path) || strings.Contains(err.Error(), ".tmp-") {
				t.Errorf("error %q (exit %d): want exit 2 naming %s and %q", err, ExitCodeFor(err), tt.path, tt.want)
			}
		})
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 6 {
		t.Errorf("temporary files left: %v", ents)
	}
	if b, err := os.ReadFile(rofile); err != nil || string(b) != "keep" {
		t.Errorf("the read-only output was touched: %q, %v", b, err)
	}
	// A device (as root, writing -o /dev/null used to replace the machine's /dev/null with the
	// proof). CheckOutput writes nothing, so this test cannot harm /dev/null if it fails.
	if err := CheckOutput("-o", os.DevNull); err == nil || !strings.Contains(err.Error(), "a character device") {
		t.Errorf("-o %s: %v", os.DevNull, err)
	}
}

func TestExplain(t *testing.T) {
	s := &Settings{
		Origins:    map[string]string{"runs": "key commands.bench.runs of config file m.yaml", "output": "METALPROVE_OUTPUT (environment)"},
		Shorthands: map[string]string{"output": "o"},
	}
	tests := []struct{ in, want string }{
		{"--runs 0: must be ≥ 1", "key commands.bench.runs of config file m.yaml 0: must be ≥ 1"},
		{"--runs-log is fine, --warmup too", "--runs-log is fine, --warmup too"},
		{"-o/--output is required", "METALPROVE_OUTPUT (environment) is required"},
		{"-o x: is a directory", "METALPROVE_OUTPUT (environment) x: is a directory"},
		{"see --output.", "see METALPROVE_OUTPUT (environment)."},
	}
	for _, tt := range tests {
		if got := s.Explain(tt.in); got != tt.want {
			t.Errorf("Explain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if !s.FromCommandLine("preset") || s.FromCommandLine("runs") {
		t.Error("FromCommandLine")
	}
}
