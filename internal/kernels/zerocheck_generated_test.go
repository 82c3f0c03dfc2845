package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// The generated round-0 code (piececode's units and main code in a module of the pieces
// template, compiled by the host device's C++ compiler at run time) against the interpreter over the same pieces and against
// the plain-Go model (the reference's evaluator, zcRef.uni), for every AIR of programAirs
// (Keccak-f included), random and edge-valued traces. The host device caches the modules in the
// test binary's directory (TestMain): Keccak-f's module is compiled once per run.

// zcValueKinds draw trace cells: uniform, edge values only (0, 1, p−1, 2, p−2), all zero, all
// p−1.
var zcValueKinds = []struct {
	name  string
	value func(r *rand.Rand) field.Fp
}{
	{"random", func(r *rand.Rand) field.Fp { return fieldrand.Fp(r) }},
	{"edges", func(r *rand.Rand) field.Fp {
		return [...]field.Fp{0, 1, field.Fp(field.P - 1), 2, field.Fp(field.P - 2)}[r.IntN(5)]
	}},
	{"zeros", func(*rand.Rand) field.Fp { return 0 }},
	{"p-1", func(*rand.Rand) field.Fp { return field.Fp(field.P - 1) }},
}

// TestZerocheckGeneratedMatches: round 0 by the generated code equals the interpreter's and the
// plain-Go model's, for every test AIR and Keccak-f, in DevicePieces pieces (as the device
// backend splits programs) and, for the small AIRs, in 3, over several domain sizes, heights
// (shorter and longer than 2^l_skip), slice and thread counts. Each run used the kernel it
// names. -short (scripts/host-isa-check.sh, which changes the main kernels' instruction set,
// not the modules') leaves Keccak-f out.
func TestZerocheckGeneratedMatches(t *testing.T) {
	type cfg struct {
		logN, d int
		logHs   []int
		opts    ZcOptions
	}
	cfgs := []cfg{
		{2, 3, []int{0, 2, 4}, ZcOptions{Pieces: true}},
		{4, 3, []int{3, 6}, ZcOptions{Pieces: true, UniThreads: 5, SliceBlocks: 2}},
		{2, 2, []int{0, 3, 4}, ZcOptions{Pieces: true, SliceBlocks: 1}}, // M = 8 < 16 lanes
		{0, 3, []int{0, 3}, ZcOptions{Pieces: true, UniThreads: 1}},
		// zc_slot_values (the GPUs' N = 16 path): blocks longer and shorter than the trace.
		{4, 3, []int{2, 4, 6}, ZcOptions{Pieces: true, SlotValues: true, SliceBlocks: 2}},
		{4, 2, []int{5}, ZcOptions{Pieces: true, SlotValues: true}},
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, a := range programAirs() {
		big := a.Name() == "keccakf"
		if big && testing.Short() {
			continue
		}
		pg, vk := compileProgram(t, a)
		splits := []int{constraints.DevicePieces, 3}
		if big {
			splits = splits[:1]
		}
		for _, k := range splits {
			pieces := splitProgram(t, vk, k)
			for ci, c := range cfgs {
				if big && ci > 1 && !c.opts.SlotValues {
					continue // Keccak-f's program is the same code at every shape: two shapes suffice
				}
				for _, logH := range c.logHs {
					for vi, vals := range zcValueKinds {
						if big && vi%2 != ci%2 {
							continue // two value kinds per shape
						}
						t.Run(fmt.Sprintf("%s/pieces%d/cfg%d/h%d/%s", a.Name(), len(pieces), ci, logH, vals.name), func(t *testing.T) {
							ref := newZcRefWith(r, pg, c.logN, logH, func() field.Fp { return vals.value(r) })
							if vals.name != "random" {
								for i := range ref.public {
									ref.public[i] = vals.value(r)
								}
							}
							ref.pieces = pieces
							checkGeneratedUni(t, r, a.Name(), ref, logM(c.logN, c.d), c.d+1, c.opts, vals.name == "random")
						})
					}
				}
			}
		}
	}
}

// checkGeneratedUni runs round 0 of ref's trace by the generated code and by the interpreter and
// compares both with the plain-Go model; nonZero: the model's sums must not all be zero.
func checkGeneratedUni(t *testing.T, r *rand.Rand, name string, ref *zcRef, lm, points int, opts ZcOptions, nonZero bool) {
	t.Helper()
	e, want := uniModel(t, r, ref, lm, nonZero)
	interp := opts
	interp.Interpreted = true
	for _, run := range []struct {
		kernel string
		opts   ZcOptions
		gen    bool
	}{{"zc_uni_generated", opts, true}, {"zc_uni_pieces", interp, false}} {
		dv := newZcDeviceGenerated(t, testDev, name, ref, lm, points, run.opts, run.gen)
		before := testDev.Stats().PerKernel
		got := uniRoundOf(t, dv, e)
		after := testDev.Stats().PerKernel
		if after[run.kernel] == before[run.kernel] {
			t.Fatalf("%s did not run", run.kernel)
		}
		if run.opts.SlotValues && (after["zc_slot_values"] == before["zc_slot_values"] || after["zc_uni_values"] != before["zc_uni_values"]) {
			t.Fatalf("%s: the slot values were not made by zc_slot_values alone", run.kernel)
		}
		requireUniSums(t, run.kernel, dv, got, want, lm)
	}
}

// uniRoundOf runs round 0 of dv's trace with the block weights e and returns the partial rows.
func uniRoundOf(t *testing.T, dv *zcDevice, e []field.Fp4) []uint32 {
	t.Helper()
	const eqOff = 2
	eq := uploadOn(t, testDev, append(make([]Mont4, eqOff), Mont4Slice(e)...))
	out := allocWords(t, dv.zc.UniWidth())
	b := testDev.Batch()
	if err := dv.zc.EncodeUniRound(b, dv.trace, eq, eqOff, out, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// compileLogged: the modules whose compile a test has logged (a device returns a module it has
// built as it is, its report saying compiled).
var compileLogged = map[string]bool{}

// newZcDeviceGenerated is newZcDeviceOn for ref with pieces whose generated code, when gen is
// set, is built on dev (BuildGenerated) before the trace uses them.
func newZcDeviceGenerated(t *testing.T, dev *gpu.Device, name string, ref *zcRef, logM, points int, opts ZcOptions, gen bool) *zcDevice {
	t.Helper()
	dom, err := NewZcDomain(dev, ref.logN, logM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dom.Free)
	prog, err := UploadProgram(dev, "generated test", ref.pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prog.Free)
	var parts []ZcPart
	for q, vals := range ref.parts {
		p := ZcPart{Width: ref.pg.PartWidths[q]}
		if p.Width > 0 {
			p.Values = uploadOn(t, dev, vals)
		}
		parts = append(parts, p)
	}
	tr, err := NewZcTrace(dev, dom, ref.pg, prog, ref.logH, parts, ref.public, ref.w.Out, ref.w.DenConst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Free)
	pp, err := UploadPieces(dev, "generated test", ref.pieces)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pp.Free)
	if gen {
		g, err := BuildGenerated(dev, name, pp)
		if err != nil {
			t.Fatal(err)
		}
		if err := pp.UseGenerated(g); err != nil {
			t.Fatal(err)
		}
		if g.Report.Units == 0 || g.Report.Pieces != len(ref.pieces) {
			t.Fatalf("generated code: %+v", g.Report)
		}
		if g.Report.Compiled && !compileLogged[g.Report.Cache] {
			compileLogged[g.Report.Cache] = true
			t.Logf("%s: %d pieces in %d units compiled in %v (%s)", name, g.Report.Pieces, g.Report.Units, g.Report.Elapsed, g.Report.Cache)
		}
	}
	if err := tr.UsePieces(dev, pp, ref.public); err != nil {
		t.Fatal(err)
	}
	zc, err := NewZerocheck(dev, dom, points, []*ZcTrace{tr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	return &zcDevice{dom: dom, prog: prog, trace: tr, zc: zc}
}

// TestGeneratedBuildCached: the generated code of an AIR built on a second device (another
// ProgramPieces of the same program, as a second proof of the same key in this process) is
// found, not compiled; the report says where it is kept.
func TestGeneratedBuildCached(t *testing.T) {
	_, vk := compileProgram(t, testair.SelfInteractionAir{W: 5, Bus: 3})
	var cache string
	for i := 0; i < 2; i++ {
		dev, err := gpu.Open(gpu.KindHost, gpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		pp, err := UploadPieces(dev, "generated test", splitProgram(t, vk, constraints.DevicePieces))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pp.Free)
		g, err := BuildGenerated(dev, "self-interaction", pp)
		if err != nil {
			t.Fatal(err)
		}
		if g.Report.Cache == "" || (i == 1 && (g.Report.Compiled || g.Report.Cache != cache)) {
			t.Fatalf("build %d: %+v", i, g.Report)
		}
		cache = g.Report.Cache
	}
}
