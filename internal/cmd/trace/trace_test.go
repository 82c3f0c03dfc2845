package trace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/tracefile"
)

func TestNewCmdTrace(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr bool
	}{
		{args: []string{}, want: Options{Seed: prover.DefaultSeed}},
		{args: []string{"--example", "keccakf", "--perms", "3", "-o", "k.bin"},
			want: Options{Example: "keccakf", Perms: 3, Seed: 42, Output: "k.bin"}},
		{args: []string{"--example=keccakf", "--perms=1", "--seed", "7", "--output", "x", "--json"},
			want: Options{Example: "keccakf", Perms: 1, Seed: 7, SeedSet: true, Output: "x", JSON: true}},
		{args: []string{"--example", "fibonacci", "--rows", "64", "-o", "f.bin"},
			want: Options{Example: "fibonacci", Rows: 64, Seed: 42, Output: "f.bin"}},
		{args: []string{"--example", "interaction-pair", "--seed", "3", "-o", "f.bin"},
			want: Options{Example: "interaction-pair", Seed: 3, SeedSet: true, Output: "f.bin"}},
		{args: []string{"--rows", "0"}, wantErr: true},
		{args: []string{"--perms", "many"}, wantErr: true},
		{args: []string{"--seed", "-1"}, wantErr: true},
		{args: []string{"extra"}, wantErr: true},
		{args: []string{"--no-such-flag"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("dev")
		got, ok := cmdtest.Parse(t, f, NewCmdTrace, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		if got.Example != tt.want.Example || got.Perms != tt.want.Perms || got.Seed != tt.want.Seed ||
			got.Output != tt.want.Output || got.JSON != tt.want.JSON || got.Rows != tt.want.Rows || got.SeedSet != tt.want.SeedSet {
			t.Errorf("%v: options %+v, want %+v", tt.args, *got, tt.want)
		}
		if got.Logger != &f.Logger || got.IO != f.IO {
			t.Errorf("%v: options not wired to the factory", tt.args)
		}
	}
}

func TestNewCmdInfo(t *testing.T) {
	tests := []struct {
		args     []string
		wantPath string
		wantJSON bool
		wantErr  bool
	}{
		{args: []string{"a.bin"}, wantPath: "a.bin"},
		{args: []string{"--json", "b.bin"}, wantPath: "b.bin", wantJSON: true},
		{args: []string{}, wantErr: true},
		{args: []string{"a", "b"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("dev")
		got, ok := cmdtest.Parse(t, f, NewCmdInfo, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		if got.Path != tt.wantPath || got.JSON != tt.wantJSON {
			t.Errorf("%v: options %+v", tt.args, *got)
		}
	}

	// The subcommand is attached to trace.
	ios, _, _, _ := cmdutil.TestStreams()
	cmd := NewCmdTrace(cmdutil.NewFactory("dev", ios), nil)
	if sub, _, err := cmd.Find([]string{"info", "x"}); err != nil || sub.Name() != "info" {
		t.Errorf("trace info not found: %v", err)
	}
}

func newOpts(t *testing.T) (*Options, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	ios, _, out, errOut := cmdutil.TestStreams()
	logger := zerolog.New(errOut).Level(zerolog.InfoLevel)
	return &Options{IO: ios, Logger: &logger, Example: "keccakf", Perms: 1, Seed: prover.DefaultSeed,
		Output: filepath.Join(t.TempDir(), "k.bin")}, out, errOut
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func Test_traceRun_usageErrors(t *testing.T) {
	tests := []struct {
		name string
		set  func(o *Options)
		want []string
	}{
		{"no example", func(o *Options) { o.Example = "" }, []string{"--example", "keccakf"}},
		{"unknown example", func(o *Options) { o.Example = "sha256" }, []string{"sha256", "known: keccakf, fibonacci"}},
		{"rows for keccakf", func(o *Options) { o.Rows = 8 }, []string{"--rows does not apply to example keccakf", "--perms, --seed"}},
		{"perms for a test AIR", func(o *Options) { o.Example = "fibonacci" }, []string{"--perms does not apply to example fibonacci", "--rows"}},
		{"seed without randomness", func(o *Options) { o.Example, o.Perms, o.SeedSet = "mixture", 0, true }, []string{"--seed does not apply to example mixture"}},
		{"rows not a power of two", func(o *Options) { o.Example, o.Perms, o.Rows = "fibonacci", 0, 12 }, []string{"--rows 12", "power of two"}},
		{"rows for short-traces", func(o *Options) { o.Example, o.Perms, o.Rows = "short-traces", 0, 4 }, []string{"--rows does not apply", "takes no options"}},
		{"zero perms", func(o *Options) { o.Perms = 0 }, []string{"--perms 0"}},
		{"negative perms", func(o *Options) { o.Perms = -5 }, []string{"--perms -5"}},
		{"too many perms", func(o *Options) { o.Perms = MaxPerms + 1 }, []string{"--perms 4194305", "4194304"}},
		{"over the file limit", func(o *Options) { o.Perms = MaxPerms }, []string{"--perms 4194304", "trace file limit", "at most 174762"}},
		{"no output", func(o *Options) { o.Output = "" }, []string{"-o"}},
		{"output is a directory", func(o *Options) { o.Output = filepath.Dir(o.Output) }, []string{"is a directory"}},
	}
	for _, tt := range tests {
		opts, out, _ := newOpts(t)
		tt.set(opts)
		err := traceRun(opts)
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage {
			t.Errorf("%s: error %v, want a usage error", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if out.Len() != 0 {
			t.Errorf("%s: stdout %q", tt.name, out)
		}
		if opts.Output != "" {
			if names := dirEntries(t, filepath.Dir(opts.Output)); len(names) != 0 && tt.name != "output is a directory" {
				t.Errorf("%s: files left: %v", tt.name, names)
			}
		}
	}
	if got := maxPermsForFile(); keccakf.Height(got+1)*keccakf.NumCols*4 <= int(tracefile.DefaultMaxSectionBytes) ||
		keccakf.Height(got)*keccakf.NumCols*4 > int(tracefile.DefaultMaxSectionBytes) {
		t.Errorf("maxPermsForFile() = %d is not the largest count that fits", got)
	}
}

// roundTrip generates the trace of n permutations, reads it back with info, and checks both
// against keccakf's own generation and digest.
func roundTrip(t *testing.T, n int) {
	opts, out, logs := newOpts(t)
	opts.Perms, opts.JSON = n, true
	if err := traceRun(opts); err != nil {
		t.Fatal(err)
	}
	height, cols := keccakf.GenerateTrace(keccakf.RandomInputs(42, n))
	d := keccakf.TraceDigest(height, cols)
	want := hex.EncodeToString(d[:])

	var gen GenerateReport
	dec := json.NewDecoder(out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&gen); err != nil || dec.More() {
		t.Fatalf("n=%d: stdout is not one GenerateReport: %v\n%s", n, err, out)
	}
	if gen.Path != opts.Output || gen.Digest != want || len(gen.Sections) != 1 ||
		gen.Sections[0] != (SectionShape{Name: "keccakf", Width: keccakf.NumCols, Height: height, Digest: want}) {
		t.Errorf("n=%d: report %+v, want digest %s height %d", n, gen, want, height)
	}
	for _, msg := range []string{"generating trace", "trace generated", "trace file written"} {
		if !strings.Contains(logs.String(), `"message":"`+msg+`"`) {
			t.Errorf("n=%d: no %q log line:\n%s", n, msg, logs)
		}
	}

	// The file holds exactly the generated trace.
	secs, err := tracefile.ReadAll(opts.Output)
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].Name != "keccakf" || secs[0].Width != keccakf.NumCols || secs[0].Height != height ||
		len(secs[0].PublicValues) != 0 || !slices.Equal(secs[0].Data, cols) {
		t.Fatalf("n=%d: file content differs from keccakf.GenerateTrace", n)
	}
	if names := dirEntries(t, filepath.Dir(opts.Output)); len(names) != 1 {
		t.Errorf("n=%d: directory holds %v, want only the trace file", n, names)
	}

	ios, _, iout, _ := cmdutil.TestStreams()
	if err := infoRun(&InfoOptions{IO: ios, Path: opts.Output, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var info InfoReport
	dec = json.NewDecoder(iout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil || dec.More() {
		t.Fatalf("n=%d: info stdout is not one InfoReport: %v\n%s", n, err, iout)
	}
	st, _ := os.Stat(opts.Output)
	cellBytes := int64(4 * keccakf.NumCols * height)
	wantSec := SectionInfo{Name: "keccakf", Width: keccakf.NumCols, Height: height, CellBytes: cellBytes, Digest: want}
	if info.Path != opts.Output || info.SizeBytes != st.Size() || len(info.Sections) != 1 {
		t.Fatalf("n=%d: info %+v", n, info)
	}
	wantSec.PublicValues = []uint32{}
	if s := info.Sections[0]; !reflect.DeepEqual(s, wantSec) {
		t.Errorf("n=%d: section %+v, want %+v", n, info.Sections[0], wantSec)
	}

	ios, _, iout, _ = cmdutil.TestStreams()
	if err := infoRun(&InfoOptions{IO: ios, Path: opts.Output}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"1 section\n", "section 0: keccakf", "width          2633", "public values  0\n", want} {
		if !strings.Contains(iout.String(), w) {
			t.Errorf("n=%d: info text lacks %q:\n%s", n, w, iout)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{1, 3} {
		roundTrip(t, n)
	}
}

// TestRoundTripSmallTiles forces the digest through tiles smaller than the section.
func TestRoundTripSmallTiles(t *testing.T) {
	saved := digestTileBytes
	digestTileBytes = 4 * keccakf.NumCols * 16
	defer func() { digestTileBytes = saved }()
	roundTrip(t, 3)
}

func Test_traceRun_textOutputEmpty(t *testing.T) {
	opts, out, _ := newOpts(t)
	if err := traceRun(opts); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout without --json: %q", out)
	}
}

func Test_traceRun_noPartialFile(t *testing.T) {
	// Missing output directory.
	opts, _, _ := newOpts(t)
	dir := filepath.Dir(opts.Output)
	opts.Output = filepath.Join(dir, "missing", "k.bin")
	err := traceRun(opts)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("error %v, want one naming the missing directory", err)
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("files left: %v", names)
	}

	// Interrupted: nothing at the destination, no temporary file.
	opts, _, _ = newOpts(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts.Context = ctx
	if err := traceRun(opts); !errors.Is(err, errInterrupted) {
		t.Errorf("cancelled: error %v", err)
	}
	if names := dirEntries(t, filepath.Dir(opts.Output)); len(names) != 0 {
		t.Errorf("cancelled: files left: %v", names)
	}
}

func writeTrace(t *testing.T, n int) (path string, data []byte) {
	t.Helper()
	opts, _, _ := newOpts(t)
	opts.Perms = n
	if err := traceRun(opts); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(opts.Output)
	if err != nil {
		t.Fatal(err)
	}
	return opts.Output, data
}

func Test_infoRun_malformed(t *testing.T) {
	path, good := writeTrace(t, 1)
	cells := int64(tracefile.FileHeaderSize + 2 + len("keccakf") + 12 + 4)
	tests := []struct {
		name string
		edit func([]byte) []byte
		want string // the message also names this
	}{
		{"truncated in cells", func(b []byte) []byte { return b[:len(b)/2] }, "section 0"},
		{"truncated header", func(b []byte) []byte { return b[:10] }, "byte offset 10"},
		{"empty", func(b []byte) []byte { return nil }, "byte offset 0"},
		{"bad magic", func(b []byte) []byte { b[0] ^= 1; return b }, "byte offset"},
		{"flipped section header byte", func(b []byte) []byte { b[tracefile.FileHeaderSize+3] ^= 0x20; return b }, "section 0"},
		{"flipped cell byte", func(b []byte) []byte { b[cells+1000] ^= 0x01; return b }, `section 0 "keccakf"`},
		{"value not < p", func(b []byte) []byte { b[cells+3] = 0xff; return b }, "not < p"},
		{"flipped checksum", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, "checksum"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, "trailing"},
	}
	for _, tt := range tests {
		bad := tt.edit(bytes.Clone(good))
		p := filepath.Join(t.TempDir(), "bad.bin")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		ios, _, out, _ := cmdutil.TestStreams()
		err := infoRun(&InfoOptions{IO: ios, Path: p})
		var fe *tracefile.FormatError
		if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !errors.As(err, &fe) {
			t.Errorf("%s: error %v (%T), want exit 3 wrapping a FormatError", tt.name, err, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "byte offset") || !strings.Contains(msg, tt.want) || !strings.Contains(msg, p) {
			t.Errorf("%s: message %q should name the path, %q and the byte offset", tt.name, msg, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: stdout %q", tt.name, out)
		}
	}
	if err := infoRun(&InfoOptions{IO: &cmdutil.IOStreams{Out: &bytes.Buffer{}}, Path: path}); err != nil {
		t.Errorf("the unmodified file: %v", err)
	}
}

func Test_infoRun_missingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.bin")
	ios, _, _, _ := cmdutil.TestStreams()
	err := infoRun(&InfoOptions{IO: ios, Path: p})
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !strings.Contains(err.Error(), p) {
		t.Errorf("error %v, want exit 3 naming %s", err, p)
	}
	err = infoRun(&InfoOptions{IO: ios, Path: filepath.Dir(p)})
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: error %v, want exit 3", err)
	}
}

// naiveDigest is SHA-256 of the cells of s row-major as little-endian u32.
func naiveDigest(s tracefile.Section) string {
	var b []byte
	for r := range s.Height {
		for c := range s.Width {
			b = binary.LittleEndian.AppendUint32(b, uint32(s.Data[c*s.Height+r]))
		}
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

func TestInfoSectionsAndPublicValues(t *testing.T) {
	mk := func(name string, w, h, npub int) tracefile.Section {
		s := tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: name, Width: w, Height: h}}
		for i := range npub {
			s.PublicValues = append(s.PublicValues, field.Fp(1000+i))
		}
		for i := range w * h {
			s.Data = append(s.Data, field.Fp(uint32(i)*2654435761%field.P))
		}
		return s
	}
	secs := []tracefile.Section{mk("a", 3, 8, 2), mk("bé b", 1, 1, 0), mk("c", 5, 32, 17)}
	path := filepath.Join(t.TempDir(), "multi.bin")
	if err := tracefile.WriteAll(path, secs); err != nil {
		t.Fatal(err)
	}
	saved := digestTileBytes
	digestTileBytes = 4 * 5 * 4 // tiles of 4 rows for section c
	defer func() { digestTileBytes = saved }()

	rep, err := inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	check := func(rep *InfoReport, how string) {
		if len(rep.Sections) != 3 {
			t.Fatalf("%s: %d sections", how, len(rep.Sections))
		}
		for i, s := range rep.Sections {
			in := secs[i]
			if s.Index != i || s.Name != in.Name || s.Width != in.Width || s.Height != in.Height ||
				s.NumPublicValues != len(in.PublicValues) || s.CellBytes != int64(4*in.Width*in.Height) ||
				s.Digest != naiveDigest(in) {
				t.Errorf("%s: section %d: %+v", how, i, s)
			}
		}
		if pv := rep.Sections[0].PublicValues; len(pv) != 2 || pv[0] != 1000 || pv[1] != 1001 {
			t.Errorf("%s: public values %v", how, pv)
		}
		if rep.Sections[2].PublicValues != nil {
			t.Errorf("%s: 17 public values shown: %v", how, rep.Sections[2].PublicValues)
		}
	}
	check(rep, "file")

	ios, _, out, _ := cmdutil.TestStreams()
	if err := printInfo(ios.Out, rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"3 sections", "section 1: bé b", "public values  2: [1000 1001]", "17 (not shown: more than 16)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, out)
		}
	}

	// A FIFO is not seekable: the section is read into memory instead, with the same digests.
	if runtime.GOOS == "windows" {
		return
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	data, _ := os.ReadFile(path)
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Write(data)
			f.Close()
		}
	}()
	rep, err = inspect(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SizeBytes != -1 {
		t.Errorf("FIFO size %d, want -1", rep.SizeBytes)
	}
	check(rep, "fifo")
}
