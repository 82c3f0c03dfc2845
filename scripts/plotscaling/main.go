// Command plotscaling turns `metalprove bench --example keccakf --json` reports, one per
// permutation count, into a PNG of the scaling (issue 13, target 2): x is the number of
// permutations (log scale), y the wall time per permutation (µs/perm, the median run's) of each
// proving stage, of the pre-proof check and of the whole proof. A flat line means that the time
// per permutation does not grow with the size.
//
//	go run ./scripts/plotscaling -o docs/scaling.png gpu-out/bench-keccakf-*-app-100bit.json
//
// Every file must be a bench report of the same example, parameters and device, with a distinct
// permutation count; a missing, malformed or mixed input is an error naming the file, and then no
// PNG is written. The PNG is written to a temporary file and renamed, so a failed run never leaves
// a partial image. Standard library only (the font is font.go's 5×7 bitmap).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/metalprove/metalprove/internal/atomicfile"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "plotscaling:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("plotscaling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "scaling.png", "PNG file to write")
	logY := fs.Bool("logy", false, "log scale on the y axis too (stages far apart in size)")
	width := fs.Int("width", 960, "image width in pixels")
	height := fs.Int("height", 600, "image height in pixels")
	title := fs.String("title", "", "title (default: the example, parameters and device of the reports)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: plotscaling [-o out.png] [-logy] REPORT.json... (bench --example keccakf --json, one per --perms)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no report files given")
	}
	if *width < 400 || *height < 300 || *width > 8000 || *height > 8000 {
		return fmt.Errorf("-width %d -height %d: must be in [400, 8000] × [300, 8000]", *width, *height)
	}
	reps := make([]*report, 0, fs.NArg())
	for _, path := range fs.Args() {
		r, err := readReport(path)
		if err != nil {
			return err
		}
		reps = append(reps, r)
	}
	p, err := buildPlot(reps)
	if err != nil {
		return err
	}
	if *title != "" {
		p.title = *title
	}
	p.logY = *logY
	img := p.render(*width, *height)
	f, err := atomicfile.Create(*out)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := png.Encode(f, img); err != nil {
		return fmt.Errorf("%s: %w", *out, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("%s: %w", *out, err)
	}
	fmt.Fprintf(stderr, "plotscaling: wrote %s (%d reports, %d lines)\n", *out, len(reps), len(p.series))
	return nil
}

// report holds the fields of a bench --example --json report (internal/cmd/bench
// ExampleReport) that the plot reads.
type report struct {
	path    string
	Example string  `json:"example"`
	Perms   int     `json:"perms"`
	Params  string  `json:"params"`
	Device  string  `json:"device"`
	Kind    string  `json:"kind"`
	Check   *stage  `json:"check"`
	Stages  []stage `json:"stages"`
	ProveMS *spread `json:"prove_ms"`
	Runs    int     `json:"runs"`
}

type stage struct {
	Stage  string  `json:"stage"`
	WallMS *spread `json:"wall_ms"`
}

type spread struct {
	Median *float64 `json:"median"`
}

// readReport reads and validates one report.
func readReport(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &report{path: path}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: not a bench --json report: %w", path, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: not a usable bench --example --json report: %s", path, fmt.Sprintf(format, a...))
	}
	if r.Example == "" {
		return nil, bad("no \"example\"")
	}
	if r.Perms <= 0 {
		return nil, bad("\"perms\" %d: must be positive (only reports that count permutations, keccakf, can be plotted per permutation)", r.Perms)
	}
	if ok, v := validMS(r.ProveMS); !ok || v <= 0 {
		return nil, bad("\"prove_ms\" has no positive median")
	}
	if len(r.Stages) == 0 {
		return nil, bad("no \"stages\"")
	}
	seen := map[string]bool{}
	for i, s := range r.Stages {
		if s.Stage == "" {
			return nil, bad("stage %d has no name", i)
		}
		if seen[s.Stage] {
			return nil, bad("stage %q twice", s.Stage)
		}
		seen[s.Stage] = true
		if ok, _ := validMS(s.WallMS); !ok {
			return nil, bad("stage %q: \"wall_ms\" has no finite, non-negative median", s.Stage)
		}
	}
	if r.Check != nil {
		if ok, _ := validMS(r.Check.WallMS); !ok {
			return nil, bad("\"check\": \"wall_ms\" has no finite, non-negative median")
		}
	}
	return r, nil
}

func validMS(s *spread) (bool, float64) {
	if s == nil || s.Median == nil {
		return false, 0
	}
	v := *s.Median
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0, v
}

// series is one line: y[i] µs per permutation at x[i] permutations.
type series struct {
	name  string
	x, y  []float64
	color color.RGBA
	thick bool
}

type plot struct {
	title, subtitle string
	series          []series
	xs              []float64 // every permutation count, ascending
	logY            bool
}

// palette: distinguishable on white, the total in black.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0xff, 0x7f, 0x0e, 0xff}, // orange
	{0x2c, 0xa0, 0x2c, 0xff}, // green
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0x94, 0x67, 0xbd, 0xff}, // purple
	{0x8c, 0x56, 0x4b, 0xff}, // brown
	{0xe3, 0x77, 0xc2, 0xff}, // pink
	{0x17, 0xbe, 0xcf, 0xff}, // cyan
	{0xbc, 0xbd, 0x22, 0xff}, // olive
	{0x7f, 0x7f, 0x7f, 0xff}, // grey
}

var totalColor = color.RGBA{0, 0, 0, 0xff}

// buildPlot checks that the reports belong together and makes the lines: the stages in the
// order of the first report that has them, the check, then the whole proof.
func buildPlot(reps []*report) (*plot, error) {
	slices.SortStableFunc(reps, func(a, b *report) int { return a.Perms - b.Perms })
	first := reps[0]
	for i, r := range reps[1:] {
		prev := reps[i]
		if r.Perms == prev.Perms {
			return nil, fmt.Errorf("%s and %s: both have %d permutations", prev.path, r.path, r.Perms)
		}
		for _, f := range []struct{ name, a, b string }{
			{"example", first.Example, r.Example}, {"params", first.Params, r.Params}, {"device", first.Device, r.Device},
		} {
			if f.a != f.b {
				return nil, fmt.Errorf("%s: %s %q, but %s has %q: plot one example, one parameter set and one device at a time",
					r.path, f.name, f.b, first.path, f.a)
			}
		}
	}
	p := &plot{
		title:    fmt.Sprintf("metalprove bench --example %s: time per permutation by stage", first.Example),
		subtitle: fmt.Sprintf("%s; %s", first.Params, first.Device),
	}
	idx := map[string]int{}
	add := func(name string, x, y float64) {
		i, ok := idx[name]
		if !ok {
			i = len(p.series)
			idx[name] = i
			p.series = append(p.series, series{name: name})
		}
		p.series[i].x = append(p.series[i].x, x)
		p.series[i].y = append(p.series[i].y, y)
	}
	for _, r := range reps {
		n := float64(r.Perms)
		p.xs = append(p.xs, n)
		for _, s := range r.Stages {
			add(s.Stage, n, *s.WallMS.Median*1000/n)
		}
	}
	for _, r := range reps {
		if r.Check != nil {
			add("check (before each proof)", float64(r.Perms), *r.Check.WallMS.Median*1000/float64(r.Perms))
		}
	}
	for _, r := range reps {
		add("prove (total)", float64(r.Perms), *r.ProveMS.Median*1000/float64(r.Perms))
	}
	for i := range p.series {
		p.series[i].color = palette[i%len(palette)]
	}
	last := &p.series[len(p.series)-1]
	last.color, last.thick = totalColor, true
	return p, nil
}

var (
	white    = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black    = color.RGBA{0, 0, 0, 0xff}
	grid     = color.RGBA{0xe0, 0xe0, 0xe0, 0xff}
	darkGrey = color.RGBA{0x40, 0x40, 0x40, 0xff}
)

// render draws the plot on a w×h image.
func (p *plot) render(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	const s = 2 // font scale
	lineH := textHeight(s) + 6

	// Legend width: the longest name plus the line sample.
	legendW := 0
	for _, se := range p.series {
		legendW = max(legendW, textWidth(se.name, s))
	}
	legendW += 40
	left, right := 110, w-legendW-30
	top, bottom := 20+2*lineH+10, h-70
	if right-left < 150 {
		right = w - 30 // no room beside the plot: the legend goes over it
	}

	drawText(img, left, 12, fit(p.title, w-left-10, s), s, black)
	drawText(img, left, 12+lineH, fit(p.subtitle, w-left-10, s), 1+s/2, darkGrey)

	// x: log2 of the permutation count, padded half a step each side.
	lx0, lx1 := math.Log2(p.xs[0]), math.Log2(p.xs[len(p.xs)-1])
	if lx1-lx0 < 1 {
		lx0, lx1 = lx0-1, lx1+1
	}
	pad := (lx1 - lx0) * 0.06
	lx0, lx1 = lx0-pad, lx1+pad
	px := func(x float64) int {
		return left + int(math.Round((math.Log2(x)-lx0)/(lx1-lx0)*float64(right-left)))
	}

	// y: linear from 0 to a round maximum, or log10 between round powers.
	ymax, ymin := 0.0, math.Inf(1)
	for _, se := range p.series {
		for _, v := range se.y {
			ymax = max(ymax, v)
			if v > 0 {
				ymin = min(ymin, v)
			}
		}
	}
	var ticks []float64
	var py func(float64) int
	if p.logY && ymax > 0 {
		e0, e1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
		if e1 <= e0 {
			e1 = e0 + 1
		}
		for e := e0; e <= e1; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
		py = func(v float64) int {
			return bottom - int(math.Round((math.Log10(v)-e0)/(e1-e0)*float64(bottom-top)))
		}
	} else {
		p.logY = false
		step := niceStep(ymax / 5)
		ytop := step * math.Ceil(ymax/step)
		if ytop == 0 {
			ytop, step = 1, 0.2
		}
		for i := 0; float64(i)*step <= ytop*(1+1e-9); i++ {
			ticks = append(ticks, float64(i)*step)
		}
		py = func(v float64) int { return bottom - int(math.Round(v/ytop*float64(bottom-top))) }
	}

	// Grid, ticks and tick labels.
	for _, t := range ticks {
		y := py(t)
		hline(img, left, right, y, grid)
		lab := tickLabel(t, ticks)
		drawText(img, left-8-textWidth(lab, s), y-textHeight(s)/2, lab, s, black)
	}
	for _, x := range p.xs {
		xp := px(x)
		vline(img, xp, top, bottom, grid)
		lab := strconv.FormatFloat(x, 'f', -1, 64)
		drawText(img, xp-textWidth(lab, s)/2, bottom+8, lab, s, black)
	}
	// Axes.
	hline(img, left, right, bottom, black)
	vline(img, left, top, bottom, black)
	xl := "permutations (log scale)"
	drawText(img, (left+right-textWidth(xl, s))/2, bottom+8+lineH+6, xl, s, black)
	yl := "µs per permutation"
	if p.logY {
		yl += " (log scale)"
	}
	drawText(rotated{img: img, ox: 12, oy: (top + bottom + textWidth(yl, s)) / 2}, 0, 0, yl, s, black)

	// Lines and markers (the total last, over the others).
	for _, se := range p.series {
		r := 1
		if se.thick {
			r = 2
		}
		var prev image.Point
		for i := range se.x {
			if p.logY && se.y[i] <= 0 {
				prev = image.Point{-1, -1}
				continue
			}
			pt := image.Pt(px(se.x[i]), py(se.y[i]))
			if i > 0 && prev.X >= 0 {
				line(img, prev, pt, r, se.color)
			}
			square(img, pt, r+2, se.color)
			prev = pt
		}
	}

	// Legend: to the right of the plot, or inside its top-right corner when there is no room.
	lx, ly := right+20, top
	if right == w-30 {
		lx = right - legendW
		ly = top + 6
	}
	box := image.Rect(lx-6, ly-6, lx+legendW, ly+len(p.series)*lineH+2)
	draw.Draw(img, box, image.NewUniform(white), image.Point{}, draw.Src)
	rect(img, box, darkGrey)
	for i, se := range p.series {
		y := ly + i*lineH + textHeight(s)/2
		r := 1
		if se.thick {
			r = 2
		}
		line(img, image.Pt(lx, y), image.Pt(lx+24, y), r, se.color)
		square(img, image.Pt(lx+12, y), r+2, se.color)
		drawText(img, lx+32, y-textHeight(s)/2, se.name, s, black)
	}
	return img
}

// niceStep is the smallest of 1, 2, 2.5, 5 × 10^k that is ≥ raw.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= raw*(1-1e-12) {
			return m * e
		}
	}
	return 10 * e
}

// tickLabel formats t with as many decimals as the ticks' spacing needs.
func tickLabel(t float64, ticks []float64) string {
	if len(ticks) < 2 {
		return strconv.FormatFloat(t, 'g', 4, 64)
	}
	step := ticks[1] - ticks[0]
	if ticks[0] > 0 && ticks[1]/ticks[0] >= 9.99 { // log ticks: powers of ten
		step = ticks[0]
	}
	dec := 0
	for step < 1-1e-9 && dec < 6 {
		step *= 10
		dec++
	}
	if step-math.Floor(step) > 1e-6 && dec < 6 { // 2.5 steps
		dec++
	}
	return strconv.FormatFloat(t, 'f', dec, 64)
}

// fit shortens s with "..." so that it fits in w pixels at scale.
func fit(s string, w, scale int) string {
	r := []rune(s)
	for len(r) > 3 && textWidth(string(r), scale) > w {
		r = append(r[:len(r)-4], []rune("...")...)
	}
	return strings.TrimSpace(string(r))
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func rect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y, c)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, c)
	vline(img, r.Max.X, r.Min.Y, r.Max.Y, c)
}

// square fills the square of half-side r around p.
func square(img *image.RGBA, p image.Point, r int, c color.RGBA) {
	draw.Draw(img, image.Rect(p.X-r, p.Y-r, p.X+r+1, p.Y+r+1), image.NewUniform(c), image.Point{}, draw.Src)
}

// line draws from a to b with a square brush of half-side r (Bresenham).
func line(img *image.RGBA, a, b image.Point, r int, c color.RGBA) {
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	for {
		for oy := -r + 1; oy < r; oy++ {
			for ox := -r + 1; ox < r; ox++ {
				img.SetRGBA(a.X+ox, a.Y+oy, c)
			}
		}
		img.SetRGBA(a.X, a.Y, c)
		if a == b {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			a.X += sx
		}
		if e2 <= dx {
			e += dx
			a.Y += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
