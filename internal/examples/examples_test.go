package examples

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

func defaultOpts(e *Example) Options {
	o := Options{Seed: 42}
	if e.Takes(FlagPerms) {
		o.Perms = 2
	}
	return o
}

// checkSections resolves each section's AIR by name, as trace check does, and runs the constraint
// and interaction checkers.
func checkSections(t *testing.T, secs []Section) (int, int) {
	t.Helper()
	var airs []air.Air
	var ins []air.TraceInput
	nf := 0
	for _, s := range secs {
		a, err := AirForHeight(s.Name, s.Height)
		if err != nil {
			t.Fatalf("section %s: %v", s.Name, err)
		}
		if a.Name() != s.Air.Name() || a.Width().MainWidth() != s.Width() || len(s.Cells) != s.Width()*s.Height {
			t.Fatalf("section %s: AirFor gives %s of width %d; section width %d, %d cells", s.Name, a.Name(), a.Width().MainWidth(), s.Width(), len(s.Cells))
		}
		s.Air = a
		in, err := s.TraceInput()
		if err != nil {
			t.Fatal(err)
		}
		fs, err := constraints.Check(a, in, 0)
		if err != nil {
			t.Fatalf("section %s: %v", s.Name, err)
		}
		nf += len(fs)
		airs, ins = append(airs, a), append(ins, in)
	}
	im, err := constraints.CheckInteractions(airs, ins)
	if err != nil {
		t.Fatal(err)
	}
	return nf, len(im)
}

func TestEveryExampleGeneratesValidSections(t *testing.T) {
	for _, e := range All() {
		secs, err := e.Generate(defaultOpts(e))
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		var names []string
		for _, s := range secs {
			names = append(names, s.Name)
			if s.Height < 1 || s.Height&(s.Height-1) != 0 {
				t.Errorf("%s: section %s height %d", e.Name, s.Name, s.Height)
			}
		}
		if !slices.Equal(names, e.AIRs) {
			t.Errorf("%s: sections %v, AIRs %v", e.Name, names, e.AIRs)
		}
		if nf, ni := checkSections(t, secs); nf != 0 || ni != 0 {
			t.Errorf("%s: %d constraint failures, %d imbalances", e.Name, nf, ni)
		}
		// One changed cell of the first section with constraints or interactions is caught.
		for i := range secs {
			sc, _ := air.Symbolic(secs[i].Air)
			if len(sc.Constraints) == 0 && len(sc.Interactions) == 0 {
				continue
			}
			bad := slices.Clone(secs)
			bad[i].Cells = slices.Clone(bad[i].Cells)
			c := len(bad[i].Cells) - 1 // last column, last row
			if len(sc.Constraints) == 0 {
				c = 0 // a count
			}
			bad[i].Cells[c] = bad[i].Cells[c].Add(field.New(5))
			if nf, ni := checkSections(t, bad); nf+ni == 0 {
				t.Errorf("%s: corrupting section %d cell %d goes unnoticed", e.Name, i, c)
			}
			break
		}
	}
}

func TestKeccakfMatchesGenerator(t *testing.T) {
	e, err := Lookup("keccakf")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := e.Generate(Options{Perms: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	h, cols := keccakf.GenerateTrace(keccakf.RandomInputs(7, 3))
	if len(secs) != 1 || secs[0].Height != h || !slices.Equal(secs[0].Cells, cols) || secs[0].Width() != keccakf.NumCols || len(secs[0].Public) != 0 {
		t.Error("keccakf section differs from keccakf.GenerateTrace")
	}
}

func TestRowsAndSeed(t *testing.T) {
	e, _ := Lookup("interaction-pair")
	secs, err := e.Generate(Options{Rows: 32, Seed: 3, SeedSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if secs[0].Height != 32 || secs[1].Height != 64 {
		t.Errorf("heights %d, %d", secs[0].Height, secs[1].Height)
	}
	other, _ := e.Generate(Options{Rows: 32, Seed: 4})
	if slices.Equal(secs[0].Cells, other[0].Cells) {
		t.Error("the seed does not change the trace")
	}
	f, _ := Lookup("fibonacci")
	secs, _ = f.Generate(Options{})
	if secs[0].Height != f.DefaultRows {
		t.Errorf("default rows: height %d", secs[0].Height)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		example string
		opts    Options
		want    string // "" = valid
	}{
		{"keccakf", Options{Perms: 1}, ""},
		{"keccakf", Options{Perms: 1, Seed: 9, SeedSet: true}, ""},
		{"keccakf", Options{}, "--perms 0"},
		{"keccakf", Options{Perms: MaxPerms + 1}, "--perms"},
		{"keccakf", Options{Perms: 1, Rows: 8}, "--rows does not apply to example keccakf (it takes --perms, --seed)"},
		{"fibonacci", Options{Rows: 8}, ""},
		{"fibonacci", Options{}, ""},
		{"fibonacci", Options{Rows: 6}, "--rows 6: must be a power of two"},
		{"fibonacci", Options{Rows: -4}, "--rows -4"},
		{"fibonacci", Options{Rows: 1 << 21}, "--rows 2097152"},
		{"fibonacci", Options{Perms: 2}, "--perms does not apply to example fibonacci (it takes --rows)"},
		{"fibonacci", Options{SeedSet: true}, "--seed does not apply"},
		{"interaction-pair", Options{Rows: 4, SeedSet: true}, ""},
		{"short-traces", Options{Rows: 4}, "--rows does not apply to example short-traces (it takes no options)"},
		{"mixture", Options{Rows: 1 << 17}, "--rows 131072"},
	}
	for _, tt := range tests {
		e, err := Lookup(tt.example)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Validate(tt.opts)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s %+v: %v", tt.example, tt.opts, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %+v: error %v, want %q", tt.example, tt.opts, err, tt.want)
		}
		if _, gerr := e.Generate(tt.opts); gerr == nil {
			t.Errorf("%s %+v: Generate accepts invalid options", tt.example, tt.opts)
		}
	}
}

func TestLookupAndAirFor(t *testing.T) {
	_, err := Lookup("sha256")
	if err == nil || !strings.Contains(err.Error(), `"sha256"`) || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("Lookup error %v", err)
	}
	for _, want := range []string{"keccakf", "fibonacci", "fibonacci-selector", "interaction-pair", "short-traces", "mixture"} {
		if !slices.Contains(Names(), want) {
			t.Errorf("no example %s", want)
		}
	}
	if a, err := AirFor("keccakf"); err != nil || a.Width().MainWidth() != keccakf.NumCols {
		t.Errorf("AirFor(keccakf) = %v, %v", a, err)
	}
	if _, err := AirFor("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("AirFor(nope): %v", err)
	}
	a, err := AirForHeight("fibonacci-selector", 8)
	if err != nil {
		t.Fatal(err)
	}
	if pa, ok := a.(air.PreprocessedAir); !ok || pa.PreprocessedTrace().Height != 8 {
		t.Errorf("AirForHeight: %s", fmt.Sprint(a))
	}
}
