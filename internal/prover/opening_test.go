package prover

import (
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// exampleSections are the trace file sections of a built-in example.
func exampleSections(t *testing.T, name string, rows int) []tracefile.Section {
	t.Helper()
	ex, err := examples.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := ex.Generate(examples.Options{Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	var file []tracefile.Section
	for _, s := range secs {
		file = append(file, tracefile.Section{
			SectionHeader: tracefile.SectionHeader{Name: s.Name, Width: s.Width(), Height: s.Height, PublicValues: s.Public},
			Data:          s.Cells,
		})
	}
	return file
}

// writeExample writes the trace of a built-in example at path.
func writeExample(t *testing.T, path, name string, rows int) {
	t.Helper()
	if err := tracefile.WriteAll(path, exampleSections(t, name, rows)); err != nil {
		t.Fatal(err)
	}
}

// loadOpened reads the statement at path (headers h) while op opens, and returns it with op's
// backend and key.
func loadOpened(t *testing.T, op *Opening, path string, h *Headers) (*Statement, *Backend, *stark.ProvingKey) {
	t.Helper()
	st, err := LoadTrace(path, h)
	if err != nil {
		op.Release()
		t.Fatal(err)
	}
	be, err := op.Backend()
	if err != nil {
		t.Fatal(err)
	}
	pk, _, err := op.Key(st, path)
	if err != nil {
		t.Fatal(err)
	}
	return st, be, pk
}

// TestOpeningKey: the key made from the headers while the cells are read is the statement's, and
// a file that changed between its headers and its cells gets the key of what was read.
func TestOpeningKey(t *testing.T) {
	p, _, err := sp.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	path := filepath.Join(t.TempDir(), "t.trace")
	for _, changed := range []bool{false, true} {
		writeExample(t, path, "fibonacci", 8)
		h, err := ReadHeaders(path)
		if err != nil {
			t.Fatal(err)
		}
		if h.TraceCellBytes() != 4*2*8 {
			t.Fatalf("cell bytes %d, want %d", h.TraceCellBytes(), 4*2*8)
		}
		op := StartOpening(nil, true, 0, p, h, &log)
		if changed {
			writeExample(t, path, "interaction-pair", 16)
		}
		st, be, pk := loadOpened(t, op, path, h)
		if len(pk.Airs) != len(st.Airs) {
			t.Errorf("changed %v: a key of %d AIRs for a statement of %d", changed, len(pk.Airs), len(st.Airs))
		}
		for i, a := range pk.Airs {
			if a.Name() != st.Airs[i].Name() {
				t.Errorf("changed %v: AIR %d of the key is %s, the statement's %s", changed, i, a.Name(), st.Airs[i].Name())
			}
		}
		pk.Free()
		be.Close()
	}
}

// TestOpeningHostKey: on a device backend the key of AIRs without preprocessed traces is made on
// the host beside the opening; it is the key the backend makes (same pre-hash, same programs).
func TestOpeningHostKey(t *testing.T) {
	p, _, err := sp.Preset("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	path := filepath.Join(t.TempDir(), "t.trace")
	for _, name := range []string{"fibonacci", "interaction-pair"} {
		writeExample(t, path, name, 16)
		h, err := ReadHeaders(path)
		if err != nil {
			t.Fatal(err)
		}
		airs, _, err := h.ScanAirs()
		if err != nil {
			t.Fatal(err)
		}
		if anyPreprocessed(airs) {
			t.Fatalf("%s: the example has a preprocessed trace: not the host-key path", name)
		}
		op := StartOpening(&cmdutil.Settings{Device: "host"}, false, 0, p, h, &log)
		st, be, pk := loadOpened(t, op, path, h)
		want, err := stark.Keygen(p, st.Airs, nil, be.Backend)
		if err != nil {
			t.Fatal(err)
		}
		if pk.VK.PreHash != want.VK.PreHash {
			t.Errorf("%s: the host's key has pre-hash %v, the backend's %v", name, pk.VK.PreHash, want.VK.PreHash)
		}
		if len(pk.VK.Programs) != len(want.VK.Programs) {
			t.Errorf("%s: %d programs, want %d", name, len(pk.VK.Programs), len(want.VK.Programs))
		}
		for i := range pk.VK.Programs {
			if pk.VK.Programs[i].NumSlots() != want.VK.Programs[i].NumSlots() {
				t.Errorf("%s: AIR %d's program differs", name, i)
			}
		}
		want.Free()
		pk.Free()
		be.Close()
	}
}
