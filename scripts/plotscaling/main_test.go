package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchReport is a synthetic bench --example keccakf --json report of perms permutations whose
// stages take perStageUS[stage] µs per permutation.
func benchReport(perms int, device string, perStageUS map[string]float64) map[string]any {
	var stages []any
	total := 0.0
	for _, name := range []string{"commit", "gkr", "constraints", "openings"} {
		msv := perStageUS[name] * float64(perms) / 1000
		total += msv
		stages = append(stages, map[string]any{"stage": name, "wall_ms": map[string]any{"median": msv, "min": msv, "max": msv},
			"dispatches": 3, "peak_memory_bytes": 1 << 20})
	}
	return map[string]any{
		"example": "keccakf", "perms": perms, "seed": 42, "params": "preset app-100bit", "device": device, "kind": "cuda",
		"warmup": 1, "runs": 5,
		"load":     map[string]any{"stage": "load", "wall_ms": map[string]any{"median": 1.0}},
		"check":    map[string]any{"stage": "check", "wall_ms": map[string]any{"median": 0.5 * float64(perms) / 1000}},
		"stages":   stages,
		"prove_ms": map[string]any{"median": total, "min": total, "max": total},
	}
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeReports(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	for i, perms := range []int{256, 1024, 4096, 16384} {
		us := map[string]float64{"commit": 20 - float64(i), "gkr": 2, "constraints": 60 + 3*float64(i), "openings": 25}
		paths = append(paths, writeJSON(t, dir, fmt.Sprintf("bench-keccakf-%d.json", perms), benchReport(perms, "NVIDIA H200", us)))
	}
	return paths
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

func countColour(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B && uint8(a>>8) == c.A {
				n++
			}
		}
	}
	return n
}

func TestPlotScaling(t *testing.T) {
	dir := t.TempDir()
	paths := writeReports(t, dir)
	for _, logy := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprintf("scaling-%v.png", logy))
		args := []string{"-o", out, "-width", "900", "-height", "500"}
		if logy {
			args = append(args, "-logy")
		}
		// Reports in any order.
		args = append(args, paths[2], paths[0], paths[3], paths[1])
		var stderr bytes.Buffer
		if err := run(args, &stderr); err != nil {
			t.Fatalf("logy %v: %v (%s)", logy, err, stderr.String())
		}
		img := decodePNG(t, out)
		if got := img.Bounds().Size(); got != image.Pt(900, 500) {
			t.Fatalf("logy %v: image %v, want 900×500", logy, got)
		}
		// One colour per line: four stages, the check, and the total in black; each colour
		// covers at least a line's length of pixels (legend sample + segments + markers).
		for i, c := range append(palette[:5:5], totalColor) {
			if n := countColour(img, c); n < 100 {
				t.Errorf("logy %v: line %d colour %v: %d pixels, want ≥ 100", logy, i, c, n)
			}
		}
		// Colours past the lines drawn are absent.
		if n := countColour(img, palette[6]); n != 0 {
			t.Errorf("logy %v: unused colour %v has %d pixels", logy, palette[6], n)
		}
		if !strings.Contains(stderr.String(), "6 lines") {
			t.Errorf("logy %v: stderr %q does not report 6 lines", logy, stderr.String())
		}
	}
}

func TestBuildPlotSeries(t *testing.T) {
	dir := t.TempDir()
	var reps []*report
	for _, path := range writeReports(t, dir) {
		r, err := readReport(path)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	p, err := buildPlot(reps)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.series {
		names = append(names, s.name)
	}
	want := "commit,gkr,constraints,openings,check (before each proof),prove (total)"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("series %s, want %s", got, want)
	}
	// µs per permutation back from the reports' milliseconds.
	c := p.series[2]
	for i, want := range []float64{60, 63, 66, 69} {
		if c.x[i] != float64(int(256)<<(2*i)) || abs(int(c.y[i]*1000)-int(want*1000)) > 1 {
			t.Errorf("constraints point %d: (%v, %v), want (%d, %v)", i, c.x[i], c.y[i], 256<<(2*i), want)
		}
	}
	tot := p.series[5]
	if tot.y[0] < 106.99 || tot.y[0] > 107.01 || !tot.thick || tot.color != totalColor {
		t.Errorf("total: %v µs/perm at 256 (want 107), thick %v, colour %v", tot.y[0], tot.thick, tot.color)
	}
}

func TestRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeReports(t, dir)
	base := func() map[string]any {
		return benchReport(64, "NVIDIA H200", map[string]float64{"commit": 1, "gkr": 1, "constraints": 1, "openings": 1})
	}
	mutate := func(f func(m map[string]any)) map[string]any {
		m := base()
		f(m)
		return m
	}
	raw := func(name, s string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name  string
		files []string
		want  string
	}{
		{"missing file", []string{good[0], filepath.Join(dir, "absent.json")}, "absent.json"},
		{"not JSON", []string{good[0], raw("garbage.json", "{\"example\": \"keccakf\", \"perms\": ")}, "garbage.json: not a bench --json report"},
		{"trailing garbage", []string{raw("trail.json", `{"example":"keccakf"} x`)}, "trail.json: not a bench --json report"},
		{"a kernels report", []string{raw("kernels.json", `{"device":"x","kind":"host","size_log":16,"results":[]}`)}, "no \"example\""},
		{"no perms", []string{writeJSON(t, dir, "noperms.json", mutate(func(m map[string]any) { delete(m, "perms") }))}, "\"perms\" 0"},
		{"no stages", []string{writeJSON(t, dir, "nostages.json", mutate(func(m map[string]any) { m["stages"] = []any{} }))}, "no \"stages\""},
		{"no prove_ms", []string{writeJSON(t, dir, "noprove.json", mutate(func(m map[string]any) { delete(m, "prove_ms") }))}, "\"prove_ms\""},
		{"stage without median", []string{writeJSON(t, dir, "nomedian.json", mutate(func(m map[string]any) {
			m["stages"] = []any{map[string]any{"stage": "commit", "wall_ms": map[string]any{"min": 1}}}
		}))}, "stage \"commit\""},
		{"negative time", []string{writeJSON(t, dir, "negative.json", mutate(func(m map[string]any) {
			m["stages"] = []any{map[string]any{"stage": "commit", "wall_ms": map[string]any{"median": -1}}}
		}))}, "stage \"commit\""},
		{"same size twice", []string{good[1], writeJSON(t, dir, "dup.json", benchReport(1024, "NVIDIA H200", map[string]float64{"commit": 1}))}, "both have 1024 permutations"},
		{"two devices", []string{good[1], writeJSON(t, dir, "other.json", benchReport(64, "NVIDIA H100", map[string]float64{"commit": 1}))}, "has \"NVIDIA H100\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-")+".png")
			var stderr bytes.Buffer
			err := run(append([]string{"-o", out}, tc.files...), &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Fatalf("%s exists after a failed run (%v)", out, serr)
			}
		})
	}
	// No report at all, and a failed run leaves no temporary file either.
	if err := run([]string{"-o", filepath.Join(dir, "none.png")}, &bytes.Buffer{}); err == nil {
		t.Fatal("no reports: no error")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".png") || strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// A failed write (the output's directory does not exist) is an error and leaves nothing.
func TestUnwritableOutput(t *testing.T) {
	dir := t.TempDir()
	paths := writeReports(t, dir)
	out := filepath.Join(dir, "no-such-dir", "scaling.png")
	if err := run(append([]string{"-o", out}, paths...), &bytes.Buffer{}); err == nil {
		t.Fatal("no error writing into a missing directory")
	}
}

// The font has a glyph for every character the plot writes itself.
func TestGlyphs(t *testing.T) {
	for _, s := range []string{"permutations (log scale)", "µs per permutation (log scale)", "check (before each proof)",
		"prove (total)", "metalprove bench --example keccakf: time per permutation by stage", "0123456789.",
		"commit gkr constraints openings", "preset app-100bit; host (2 threads, x86-64 fibers)"} {
		for _, r := range s {
			if _, ok := glyphs[r]; !ok {
				t.Errorf("no glyph for %q (in %q)", r, s)
			}
		}
	}
	for r, g := range glyphs {
		for i, row := range g {
			if len(row) != glyphW || strings.Trim(row, ".#") != "" {
				t.Errorf("glyph %q row %d: %q is not %d of '.' and '#'", r, i, row, glyphW)
			}
		}
	}
}
