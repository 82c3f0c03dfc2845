package kernels

import (
	"fmt"
	"github.com/metalprove/metalprove/examples/keccakf"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// zcAirs are test AIRs covering every program shape: rotations and selectors (Fibonacci),
// preprocessed and cached parts (PreprocessedCached, FibonacciSelector), interactions with and
// without rotations.
func zcAirs() []air.Air {
	ins := []testair.Instance{testair.Fibonacci(0, 1, 16), testair.FibonacciSelector(7, 3, 8), testair.PreprocessedCached(2, 16)}
	ins = append(ins, testair.InteractionsFixture11(true)...)
	ins = append(ins, testair.SelfInteraction([]int{3}, 4, 5)...)
	var out []air.Air
	seen := map[string]bool{}
	for _, in := range ins {
		if !seen[in.Air.Name()] {
			seen[in.Air.Name()] = true
			out = append(out, in.Air)
		}
	}
	return out
}

// zcRef is a plain-Go model of one trace, the reference backend's way: every stored slot
// materialised at the lifted height.
type zcRef struct {
	pg           *constraints.Program
	w            *constraints.Weights
	public       []field.Fp
	logN, nLift  int
	cols         [][]field.Fp // per slot (nil: not stored)
	parts        [][]field.Fp // per part, column-major canonical values
	logH, height int
	// pieces, when set, is pg split (constraints.Split): the device trace gets them (UsePieces).
	pieces []*constraints.Program
	// whole, when set, is pg's generated whole-program code: the device program gets it
	// (Program.UseGenerated).
	whole *GeneratedWhole
	// shifted: the device runs round 0 on the shifted domain (NewZcShiftedDomain) and uni models
	// its points.
	shifted bool
}

func newZcRef(r *rand.Rand, pg *constraints.Program, logN, logH int) *zcRef {
	return newZcRefWith(r, pg, logN, logH, func() field.Fp { return fieldrand.Fp(r) })
}

// newZcRefWith is newZcRef with trace values drawn by value.
func newZcRefWith(r *rand.Rand, pg *constraints.Program, logN, logH int, value func() field.Fp) *zcRef {
	h, n := 1<<logH, 1<<logN
	z := &zcRef{pg: pg, logN: logN, nLift: max(logH-logN, 0), logH: logH, height: h, public: fieldrand.Fps(r, pg.NumPublic)}
	z.w = &constraints.Weights{Out: make([]field.Fp4, len(pg.Outputs)), DenConst: fieldrand.Fp4(r)}
	for o := range z.w.Out {
		z.w.Out[o] = fieldrand.Fp4(r)
	}
	hl := n << z.nLift
	z.cols = make([][]field.Fp, pg.NumSlots())
	for q, pw := range pg.PartWidths {
		vals := make([]field.Fp, pw*h)
		for i := range vals {
			vals[i] = value()
		}
		z.parts = append(z.parts, vals)
		for c := 0; c < pw; c++ {
			src := vals[c*h : (c+1)*h]
			s := 2 * (pg.PartStart[q] + c)
			loc, rot := make([]field.Fp, hl), make([]field.Fp, hl)
			for i := range loc {
				loc[i], rot[i] = src[i&(h-1)], src[(i+1)&(h-1)]
			}
			z.cols[s] = loc
			if pg.NeedRot {
				z.cols[s+1] = rot
			}
		}
	}
	first, last, trans := make([]field.Fp, hl), make([]field.Fp, hl), make([]field.Fp, hl)
	for i := range first {
		if i&(h-1) == 0 {
			first[i] = field.One
		}
		if i&(h-1) == h-1 {
			last[i] = field.One
		} else {
			trans[i] = field.One
		}
	}
	z.cols[pg.SlotIsFirst()], z.cols[pg.SlotIsLast()], z.cols[pg.SlotIsTransition()] = first, last, trans
	return z
}

// lagrangeAt returns L_j(z) for the N-th roots of unity ω^j, by the product formula.
func lagrangeAt(logN int, z field.Fp) []field.Fp {
	n := 1 << logN
	om := field.Powers(field.TwoAdicGenerator(logN), n)
	out := make([]field.Fp, n)
	for j := range out {
		num, den := field.One, field.One
		for k := 0; k < n; k++ {
			if k != j {
				num = num.Mul(z.Sub(om[k]))
				den = den.Mul(om[j].Sub(om[k]))
			}
		}
		out[j] = num.Mul(den.Inverse())
	}
	return out
}

// uni returns S_k[i] (k = Zc, Num, Den; i < M) of round 0 with the block weights e.
func (z *zcRef) uni(logM int, e []field.Fp4) [3][]field.Fp4 {
	n, m := 1<<z.logN, 1<<logM
	pts := field.Powers(field.TwoAdicGenerator(logM), m)
	if z.shifted {
		pts = field.Powers(field.TwoAdicGenerator(logM+1), 2*m)
		for i := range m {
			pts[i] = pts[2*i+1]
		}
		pts = pts[:m]
	}
	lag := make([][]field.Fp, m)
	for i := range lag {
		lag[i] = lagrangeAt(z.logN, pts[i])
	}
	var out [3][]field.Fp4
	for k := range out {
		out[k] = make([]field.Fp4, m)
	}
	slots := make([]field.Fp, z.pg.NumSlots())
	var regs []field.Fp
	for x, ex := range e {
		for i := 0; i < m; i++ {
			for s, u := range z.pg.Used {
				if !u {
					continue
				}
				var v field.Fp
				for j := 0; j < n; j++ {
					v = v.Add(lag[i][j].Mul(z.cols[s][x*n+j]))
				}
				slots[s] = v
			}
			var c constraints.Combined
			c, regs = z.pg.CombineBase(z.w, slots, z.public, regs)
			out[0][i] = out[0][i].Add(ex.Mul(c.Zc))
			out[1][i] = out[1][i].Add(ex.Mul(c.Num))
			out[2][i] = out[2][i].Add(ex.Mul(c.Den))
		}
	}
	return out
}

// bind returns the tables of BindUnivariate (per slot, nil when not stored).
func (z *zcRef) bind(w []field.Fp4) [][]field.Fp4 {
	n := 1 << z.logN
	out := make([][]field.Fp4, len(z.cols))
	for s, col := range z.cols {
		if col == nil {
			continue
		}
		tab := make([]field.Fp4, len(col)/n)
		for x := range tab {
			for j, wj := range w {
				tab[x] = tab[x].Add(wj.MulBase(col[x*n+j]))
			}
		}
		out[s] = tab
	}
	return out
}

// round returns R_k[X−1] over tables (per slot) with the pair weights e (cpuref's Round).
func (z *zcRef) round(tables [][]field.Fp4, e []field.Fp4, points int) [3][]field.Fp4 {
	var out [3][]field.Fp4
	for k := range out {
		out[k] = make([]field.Fp4, points)
	}
	slots := make([]field.Fp4, len(tables))
	diff := make([]field.Fp4, len(tables))
	var regs []field.Fp4
	for y, ey := range e {
		for s, u := range z.pg.Used {
			if u {
				slots[s] = tables[s][2*y]
				diff[s] = tables[s][2*y+1].Sub(tables[s][2*y])
			}
		}
		for x := 0; x < points; x++ {
			for s, u := range z.pg.Used {
				if u {
					slots[s] = slots[s].Add(diff[s])
				}
			}
			var c constraints.Combined
			c, regs = z.pg.CombineExt(z.w, slots, z.public, regs)
			out[0][x] = out[0][x].Add(ey.Mul(c.Zc))
			out[1][x] = out[1][x].Add(ey.Mul(c.Num))
			out[2][x] = out[2][x].Add(ey.Mul(c.Den))
		}
	}
	return out
}

// requireNonZero fails when every sum of the reference is zero (a comparison that proves nothing).
func requireNonZero(t *testing.T, sums [][]field.Fp4) {
	t.Helper()
	for _, s := range sums {
		for _, v := range s {
			if !v.IsZero() {
				return
			}
		}
	}
	t.Fatal("the reference sums are all zero")
}

// zcDevice is one trace's device side for the tests.
type zcDevice struct {
	dom   *ZcDomain
	prog  *Program
	trace *ZcTrace
	zc    *Zerocheck
}

func newZcDevice(t *testing.T, ref *zcRef, logM, points int, opts ZcOptions) *zcDevice {
	t.Helper()
	return newZcDeviceOn(t, testDev, ref, logM, points, opts)
}

// upWords uploads w to dev for the test's duration.
func upWords(t *testing.T, dev *gpu.Device, w []uint32) *gpu.Array[uint32] {
	t.Helper()
	a, err := gpu.UploadArray(dev, "test input", w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Free)
	return a
}

func newZcDeviceOn(t *testing.T, dev *gpu.Device, ref *zcRef, logM, points int, opts ZcOptions) *zcDevice {
	t.Helper()
	newDom := NewZcDomain
	if ref.shifted {
		newDom = NewZcShiftedDomain
	}
	dom, err := newDom(dev, ref.logN, logM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dom.Free)
	prog, err := UploadProgram(dev, "zerocheck test", ref.pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prog.Free)
	if ref.whole != nil {
		if err := prog.UseGenerated(ref.whole); err != nil {
			t.Fatal(err)
		}
	}
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
	// The shape a memory estimate makes from the key alone, before any upload.
	shape, err := ZcShapeOf(dev, ref.pg, ref.logN, ref.logH)
	if err != nil {
		t.Fatal(err)
	}
	if ref.whole != nil {
		shape.UseWhole(ref.whole)
	}
	if ref.pieces != nil {
		pp, err := UploadPieces(dev, "zerocheck test", ref.pieces)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pp.Free)
		if err := tr.UsePieces(dev, pp, ref.public); err != nil {
			t.Fatal(err)
		}
		ps := pp.Shape()
		shape.Pieces = &ps
	}
	if got := tr.Shape(); !reflect.DeepEqual(got, shape) {
		t.Fatalf("trace shape %+v, from the program %+v", got, shape)
	}
	zc, err := NewZerocheck(dev, dom, points, []*ZcTrace{tr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	// The scratch planned from the shape is the scratch allocated.
	sc, err := ZerocheckScratch(dev, ref.logN, logM, points, []ZcShape{shape}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := zc.scratchBytes(); sc.Bytes() != got {
		t.Fatalf("planned scratch %+v: %d bytes, allocated %d", sc, sc.Bytes(), got)
	}
	return &zcDevice{dom: dom, prog: prog, trace: tr, zc: zc}
}

// scratchBytes is the device memory of the zerocheck's scratch buffers.
func (z *Zerocheck) scratchBytes() int64 {
	var n int64
	for _, a := range []*gpu.Array[Mont]{z.slots, z.regs, z.coefs, z.deltas, z.vals} {
		if a != nil {
			n += int64(a.Size())
		}
	}
	for _, a := range []*gpu.Array[uint32]{z.partials, z.mid} {
		if a != nil {
			n += int64(a.Size())
		}
	}
	return n
}

func logM(logN, d int) int {
	m := 0
	for 1<<m < d*((1<<logN)-1)+1 {
		m++
	}
	return m
}

// TestZerocheckUniMatchesGo: round 0 equals the plain-Go model (materialised lifted columns,
// Lagrange interpolation at every point) for every test AIR, traces shorter and longer than
// 2^l_skip, both strategies (coset DFTs and one point per lane), small slices and odd thread
// counts, at an output offset.
func TestZerocheckUniMatchesGo(t *testing.T) {
	type cfg struct {
		logN, d int
		logHs   []int
		opts    ZcOptions
		shifted bool
	}
	cfgs := []cfg{
		{2, 3, []int{0, 1, 2, 4}, ZcOptions{}, false},
		{2, 3, []int{3, 5}, ZcOptions{PointMode: true}, false},
		{2, 3, []int{0, 2, 5}, ZcOptions{PointMode: true, UnitItems: true}, false},
		{4, 3, []int{3, 6}, ZcOptions{PointMode: true, UnitItems: true, UniThreads: 5, SliceBlocks: 2}, false},
		{4, 3, []int{6}, ZcOptions{UnitItems: true, UniThreads: 3}, false},
		{2, 2, []int{0, 4}, ZcOptions{UnitItems: true}, false},
		{2, 2, []int{0, 3, 4}, ZcOptions{}, false}, // M = 8 < 16 lanes: units span blocks
		{4, 3, []int{2, 4, 6}, ZcOptions{}, false},
		{4, 3, []int{6}, ZcOptions{SliceBlocks: 1, UniThreads: 3}, false},
		{4, 3, []int{0, 6}, ZcOptions{NoTranspose: true}, false},
		{5, 3, []int{3, 7}, ZcOptions{NoTranspose: true, UniThreads: 2}, false},
		{4, 3, []int{5}, ZcOptions{PointMode: true, SliceBlocks: 2, UniThreads: 5}, false},
		{0, 3, []int{0, 3}, ZcOptions{}, false},
		{1, 3, []int{0, 2}, ZcOptions{PointMode: true}, false},
		{5, 2, []int{5, 6}, ZcOptions{}, false},
		{3, 4, []int{2, 5}, ZcOptions{UniThreads: 1}, false},
		// The program in pieces (zc_uni_values, zc_uni_pieces: 5 pieces).
		{2, 3, []int{0, 1, 2, 4}, ZcOptions{Pieces: true}, false},
		{4, 3, []int{3, 6}, ZcOptions{Pieces: true, UniThreads: 5, SliceBlocks: 2}, false},
		{2, 2, []int{0, 3, 4}, ZcOptions{Pieces: true, SliceBlocks: 1}, false}, // M = 8 < 16 lanes
		{0, 3, []int{0, 3}, ZcOptions{Pieces: true, UniThreads: 1}, false},
		{5, 2, []int{5, 6}, ZcOptions{Pieces: true}, false},
		// The shifted domain (ZcRound0Domain without interactions): both strategies, pieces.
		{4, 3, []int{3, 6}, ZcOptions{}, true},
		{4, 3, []int{5}, ZcOptions{PointMode: true, UnitItems: true, UniThreads: 5, SliceBlocks: 2}, true},
		{2, 2, []int{0, 4}, ZcOptions{UnitItems: true}, true},
		{0, 3, []int{0, 3}, ZcOptions{}, true},
		{4, 3, []int{3, 6}, ZcOptions{Pieces: true, UniThreads: 5, SliceBlocks: 2}, true},
		{5, 3, []int{7}, ZcOptions{Pieces: true}, true},
	}
	r := rand.New(rand.NewPCG(31, 32))
	for ci, c := range cfgs {
		for _, a := range zcAirs() {
			pg, vk := compileProgram(t, a)
			for _, logH := range c.logHs {
				t.Run(fmt.Sprintf("cfg%d/%s/h%d", ci, a.Name(), logH), func(t *testing.T) {
					ref := newZcRef(r, pg, c.logN, logH)
					if c.opts.Pieces {
						ref.pieces = splitProgram(t, vk, 5)
					}
					lm := logM(c.logN, c.d)
					if c.shifted {
						ref.shifted = true
						lm, _ = ZcRound0Domain(c.logN, c.d, false)
					}
					dv := newZcDevice(t, ref, lm, c.d+1, c.opts)
					x := 1 << ref.nLift
					e := make([]field.Fp4, x)
					for i := range e {
						e[i] = fieldrand.Fp4(r)
					}
					const eqOff, outOff = 3, 8
					eq := uploadOn(t, testDev, append(make([]Mont4, eqOff), Mont4Slice(e)...))
					out := allocWords(t, outOff+dv.zc.UniWidth())
					b := testDev.Batch()
					if err := dv.zc.EncodeUniRound(b, dv.trace, eq, eqOff, out, outOff); err != nil {
						t.Fatal(err)
					}
					got, err := out.ReadAll()
					if err != nil {
						t.Fatal(err)
					}
					want := ref.uni(lm, e)
					requireNonZero(t, want[:])
					for q := 0; q < 1<<lm; q++ {
						i := dv.dom.PointOf(q)
						for k := 0; k < 3; k++ {
							g := Fp4OfMont(got[outOff+12*q+4*k:])
							if g != want[k][i] {
								t.Fatalf("class %d (point %d) sum %d = %v, want %v", q, i, k, g, want[k][i])
							}
						}
					}
				})
			}
		}
	}
}

// TestZerocheckBindMatchesGo: BindUnivariate's tables (columns, rotations, selectors) equal
// Σ_j w_j·t(ω^j, x) of the lifted columns, with the host's lanes and with the GPUs' 64-bit sums
// (WideBind; there the trace values and weights lean to p − 1, the sums' largest terms).
func TestZerocheckBindMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct {
		logN, logH int
		wide       bool
	}{{2, 0, false}, {2, 1, false}, {2, 2, false}, {2, 5, false}, {4, 3, false}, {4, 9, false}, {0, 3, false}, {5, 7, false},
		{2, 1, true}, {2, 5, true}, {4, 9, true}, {0, 3, true}, {1, 4, true}, {5, 7, true}, {3, 6, true}} {
		for _, a := range zcAirs() {
			pg, _ := compileProgram(t, a)
			t.Run(fmt.Sprintf("%s/n%d/h%d/wide%v", a.Name(), c.logN, c.logH, c.wide), func(t *testing.T) {
				ref := newZcRef(r, pg, c.logN, c.logH)
				big := func() field.Fp { return field.Fp(field.P - 1 - uint32(r.IntN(3))) }
				if c.wide {
					ref = newZcRefWith(r, pg, c.logN, c.logH, func() field.Fp {
						if r.IntN(2) == 0 {
							return big()
						}
						return fieldrand.Fp(r)
					})
				}
				dv := newZcDevice(t, ref, logM(c.logN, 3), 4, ZcOptions{WideBind: c.wide})
				w := make([]field.Fp4, 1<<c.logN)
				for j := range w {
					w[j] = fieldrand.Fp4(r)
					if c.wide && j%2 == 0 {
						// the coefficient whose R²-scaled form (ZcBindWeights) is p − 1: (p − 1)·R^−2
						w[j][j%4] = CanonicalOf(Mont(CanonicalOf(Mont(field.P - 1))))
					}
				}
				x := 1 << ref.nLift
				stride := x + 3
				tables := allocArray[Mont4](t, testDev, dv.trace.NumTables()*stride)
				wa := uploadWords(t, "bind weights", ZcBindWeights(w))
				first, last, sum := ZcSelectorBind(c.logN, c.logH, w)
				b := testDev.Batch()
				if err := dv.zc.EncodeBindUni(b, dv.trace, wa, first, last, sum, tables, stride); err != nil {
					t.Fatal(err)
				}
				got, err := tables.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				want := ref.bind(w)
				for s, tab := range want {
					tau := dv.trace.TableOf(s)
					if (tab == nil) != (tau < 0) {
						t.Fatalf("slot %d: stored %v, table %d", s, tab != nil, tau)
					}
					for xx, v := range tab {
						if g := Fp4Of(got[tau*stride+xx]); g != v {
							t.Fatalf("slot %d (table %d) row %d = %v, want %v", s, tau, xx, g, v)
						}
					}
				}
			})
		}
	}
}

// TestZerocheckRoundMatchesGo: a round j ≥ 1 over random tables equals cpuref's Round formula, for
// several table heights (down to one pair), thread counts and point counts.
func TestZerocheckRoundMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	// pieces > 0: the program split into that many pieces, every round run by zc_round_pieces.
	for _, c := range []struct{ logN, logH, logRows, points, threads, pieces int }{
		{2, 6, 4, 4, 0, 0}, {2, 6, 1, 4, 0, 0}, {2, 9, 7, 3, 5, 0}, {4, 8, 2, 4, 1, 0}, {4, 10, 6, 5, 0, 0}, {0, 6, 6, 4, 3, 0},
		{2, 6, 4, 4, 0, 3}, {2, 6, 1, 4, 0, 5}, {2, 9, 7, 3, 5, 2}, {4, 8, 2, 4, 1, 4}, {0, 6, 6, 4, 3, 64},
	} {
		for _, a := range zcAirs() {
			pg, vk := compileProgram(t, a)
			t.Run(fmt.Sprintf("%s/h%d/rows%d/p%d/pieces%d", a.Name(), c.logH, c.logRows, c.points, c.pieces), func(t *testing.T) {
				ref := newZcRef(r, pg, c.logN, c.logH)
				opts := ZcOptions{RoundThreads: c.threads}
				if c.pieces > 0 {
					ref.pieces = splitProgram(t, vk, c.pieces)
					opts.Pieces, opts.PieceThreads = true, c.threads
				}
				checkZcRound(t, testDev, r, ref, pg, newZcDevice(t, ref, logM(c.logN, 3), c.points, opts), c.logRows, c.points)
			})
		}
	}
}

// checkZcRound runs EncodeRound of dv (on dev) over random tables of 2^logRows rows and
// compares it with the plain-Go round formula.
func checkZcRound(t *testing.T, dev *gpu.Device, r *rand.Rand, ref *zcRef, pg *constraints.Program, dv *zcDevice, logRows, points int) {
	t.Helper()
	rows := 1 << logRows
	stride := rows + 1
	tables := make([][]field.Fp4, pg.NumSlots())
	entries := make([]Mont4, dv.trace.NumTables()*stride)
	for s := range tables {
		tau := dv.trace.TableOf(s)
		if tau < 0 {
			continue
		}
		tables[s] = make([]field.Fp4, rows)
		for y := range tables[s] {
			tables[s][y] = fieldrand.Fp4(r)
			entries[tau*stride+y] = Mont4Of(tables[s][y])
		}
	}
	e := make([]field.Fp4, rows/2)
	for i := range e {
		e[i] = fieldrand.Fp4(r)
	}
	ta := uploadOn(t, dev, entries)
	eq := uploadOn(t, dev, append(make([]Mont4, 1), Mont4Slice(e)...))
	out := upWords(t, dev, make([]uint32, 4+dv.zc.RoundWidth()))
	b := dev.Batch()
	if err := dv.zc.EncodeRound(b, dv.trace, ta, stride, logRows, eq, 1, out, 4); err != nil {
		t.Fatal(err)
	}
	got, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := ref.round(tables, e, points)
	requireNonZero(t, want[:])
	for x := 0; x < points; x++ {
		for k := 0; k < 3; k++ {
			if g := Fp4OfMont(got[4+12*x+4*k:]); g != want[k][x] {
				t.Fatalf("X = %d sum %d = %v, want %v", x+1, k, g, want[k][x])
			}
		}
	}
}

// splitProgram is constraints.Split(vk, All, k).
func splitProgram(t *testing.T, vk *air.VerifyingKey, k int) []*constraints.Program {
	t.Helper()
	ps, err := constraints.Split(vk, constraints.All, k)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// zcWideAir has many outputs of each kind (40 constraints, 20 message fields): every term of the
// combination sums can be (p−1)² at once.
type zcWideAir struct{}

func (zcWideAir) Name() string          { return "zerocheck-wide" }
func (zcWideAir) Width() air.TraceWidth { return air.TraceWidth{CommonMain: 40} }
func (zcWideAir) NumPublicValues() int  { return 0 }
func (zcWideAir) Eval(b *air.Builder) {
	local := b.Main(0)
	for _, x := range local {
		b.AssertZero(x)
	}
	b.PushInteraction(1, local[:20], local[20], 1)
	b.PushInteraction(2, local[21:39], local[39], 1)
}

// TestZerocheckCombineExtremes: outputs and weights whose Montgomery forms are all p−1 (the
// largest products of the host's unreduced 64-bit sums), in round 0 and in a round j ≥ 1.
func TestZerocheckCombineExtremes(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	pg, _ := compileProgram(t, zcWideAir{})
	top := CanonicalOf(Mont(field.P - 1)) // Montgomery form p−1
	topFp4 := field.Fp4{top, top, top, top}
	ref := newZcRefWith(r, pg, 2, 6, func() field.Fp { return top })
	for o := range ref.w.Out {
		ref.w.Out[o] = topFp4
	}
	ref.w.DenConst = topFp4
	for _, opts := range []ZcOptions{{}, {PointMode: true}} {
		dv := newZcDevice(t, ref, logM(2, 3), 4, opts)
		e := make([]field.Fp4, 1<<ref.nLift)
		for i := range e {
			e[i] = topFp4
		}
		eq := uploadOn(t, testDev, Mont4Slice(e))
		out := allocWords(t, dv.zc.UniWidth())
		b := testDev.Batch()
		if err := dv.zc.EncodeUniRound(b, dv.trace, eq, 0, out, 0); err != nil {
			t.Fatal(err)
		}
		got, err := out.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		want := ref.uni(logM(2, 3), e)
		requireNonZero(t, want[:])
		for q := 0; q < 1<<logM(2, 3); q++ {
			for k := 0; k < 3; k++ {
				if g := Fp4OfMont(got[12*q+4*k:]); g != want[k][dv.dom.PointOf(q)] {
					t.Fatalf("round 0 (%+v): class %d sum %d = %v, want %v", opts, q, k, g, want[k][dv.dom.PointOf(q)])
				}
			}
		}
		// A round over tables whose every coefficient is p−1 in Montgomery form.
		rows := 1 << ref.nLift
		tables := make([][]field.Fp4, pg.NumSlots())
		entries := make([]Mont4, dv.trace.NumTables()*rows)
		for s := range tables {
			if tau := dv.trace.TableOf(s); tau >= 0 {
				tables[s] = make([]field.Fp4, rows)
				for y := range tables[s] {
					tables[s][y] = topFp4
					if y%2 == 1 {
						tables[s][y] = field.Fp4{top, 0, top, 1} // t[2y+1] − t[2y] ≠ 0
					}
				}
				copy(entries[tau*rows:], Mont4Slice(tables[s]))
			}
		}
		ta := uploadOn(t, testDev, entries)
		rout := allocWords(t, dv.zc.RoundWidth())
		b = testDev.Batch()
		if err := dv.zc.EncodeRound(b, dv.trace, ta, rows, ref.nLift, eq, 0, rout, 0); err != nil {
			t.Fatal(err)
		}
		if got, err = rout.ReadAll(); err != nil {
			t.Fatal(err)
		}
		rw := ref.round(tables, e[:rows/2], 4)
		for x := 0; x < 4; x++ {
			for k := 0; k < 3; k++ {
				if g := Fp4OfMont(got[12*x+4*k:]); g != rw[k][x] {
					t.Fatalf("round (%+v): X = %d sum %d = %v, want %v", opts, x+1, k, g, rw[k][x])
				}
			}
		}
	}
}

// TestZerocheckGPUShapes runs round 0, BindUnivariate and a round on the host device posing as a
// GPU (limits_test.go): the launchers take their GPU plans (one point per lane and step, threads
// interleaved in the scratch, groups of the kernels' limits) and must still match the plain-Go
// model.
func TestZerocheckGPUShapes(t *testing.T) {
	dev, lb := openLimited(t, map[string]int{"zc_uni_eval": 64, "zc_round_eval": 32, "zc_round_pieces": 32, "zc_uni_pieces": 64})
	r := rand.New(rand.NewPCG(81, 82))
	// pieces > 0: the trace has its program in pieces (a GPU runs them in rounds with few pairs).
	for _, c := range []struct{ logN, d, logH, pieces int }{{2, 3, 5, 0}, {2, 3, 1, 0}, {4, 3, 6, 0}, {2, 2, 4, 0}, {2, 3, 5, 3}, {4, 3, 6, 8}} {
		for _, a := range zcAirs() {
			pg, vk := compileProgram(t, a)
			t.Run(fmt.Sprintf("%s/n%d/h%d/pieces%d", a.Name(), c.logN, c.logH, c.pieces), func(t *testing.T) {
				ref := newZcRef(r, pg, c.logN, c.logH)
				if c.pieces > 0 {
					ref.pieces = splitProgram(t, vk, c.pieces)
				}
				lm := logM(c.logN, c.d)
				// Pieces: 3 walked by zc_round_pieces, 8 level-scheduled (zc_round_levels).
				dv := newZcDeviceOn(t, dev, ref, lm, c.d+1, ZcOptions{NoLevels: c.pieces == 3})
				if up := dv.zc.uni[dv.trace]; up.coset || up.tpg != 64 || up.pieces != (c.pieces > 0) {
					t.Fatalf("round-0 plan %+v: want the GPU plan in groups of 64", up)
				}
				x := 1 << ref.nLift
				e := make([]field.Fp4, x)
				for i := range e {
					e[i] = fieldrand.Fp4(r)
				}
				eq := uploadOn(t, dev, Mont4Slice(e))
				out := upWords(t, dev, make([]uint32, dv.zc.UniWidth()+dv.zc.RoundWidth()))
				b := dev.Batch()
				if err := dv.zc.EncodeUniRound(b, dv.trace, eq, 0, out, 0); err != nil {
					t.Fatal(err)
				}
				w := make([]field.Fp4, 1<<c.logN)
				for j := range w {
					w[j] = fieldrand.Fp4(r)
				}
				tables := allocArray[Mont4](t, dev, dv.trace.NumTables()*x)
				first, last, sum := ZcSelectorBind(c.logN, c.logH, w)
				if err := dv.zc.EncodeBindUni(b, dv.trace, upWords(t, dev, ZcBindWeights(w)), first, last, sum, tables, x); err != nil {
					t.Fatal(err)
				}
				if ref.nLift > 0 {
					if err := dv.zc.EncodeRound(b, dv.trace, tables, x, ref.nLift, eq, 0, out, dv.zc.UniWidth()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := out.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				want := ref.uni(lm, e)
				for q := 0; q < 1<<lm; q++ {
					for k := 0; k < 3; k++ {
						if g := Fp4OfMont(got[12*q+4*k:]); g != want[k][dv.dom.PointOf(q)] {
							t.Fatalf("round 0: class %d sum %d = %v, want %v", q, k, g, want[k][dv.dom.PointOf(q)])
						}
					}
				}
				if ref.nLift == 0 {
					return
				}
				bound := ref.bind(w)
				rw := ref.round(bound, e[:x/2], c.d+1)
				for xx := 0; xx <= c.d; xx++ {
					for k := 0; k < 3; k++ {
						if g := Fp4OfMont(got[dv.zc.UniWidth()+12*xx+4*k:]); g != rw[k][xx] {
							t.Fatalf("round 1: X = %d sum %d = %v, want %v", xx+1, k, g, rw[k][xx])
						}
					}
				}
			})
		}
	}
	if lb.largest["zc_round_pieces"] == 0 || lb.largest["zc_round_levels"] == 0 || lb.largest["zc_uni_pieces"] == 0 || lb.largest["zc_coeffs_tiles"] == 0 {
		t.Errorf("zc_round_pieces, zc_round_levels, zc_uni_pieces or zc_coeffs_tiles never ran: %v", lb.largest)
	}
	if lb.largest["zc_uni_eval"] > 64 || lb.largest["zc_round_eval"] > 32 || lb.largest["zc_round_pieces"] > 32 || lb.largest["zc_uni_pieces"] > 64 {
		t.Errorf("groups above the kernels' limits: %v", lb.largest)
	}
}

// TestZerocheckRoundPiecesFallback: on a GPU-shaped device whose threadgroup memory cannot hold one
// thread's piece registers (16 bytes × 16 lanes × the registers of Keccak-f in 16 pieces, a split
// coarser than the device's whose pieces keep shared values live: 71 registers), the rounds run
// the whole program (zc_round_pieces never runs) and still match the plain-Go round; with room for
// the registers, zc_round_pieces runs them.
func TestZerocheckRoundPiecesFallback(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	pg, vk := compileProgram(t, keccakf.Air{})
	pieces := splitProgram(t, vk, 16)
	regs := 0
	for _, p := range pieces {
		regs = max(regs, p.NumRegs)
	}
	small := 16*16*regs - 16 // below one thread's registers
	if small < 4<<10 || small >= 32<<10 {
		t.Fatalf("pieces of %d registers: %d bytes do not lie between 4 and 32 KiB", regs, small)
	}
	for _, mem := range []int{small, 32 << 10} {
		t.Run(fmt.Sprint("tg", mem), func(t *testing.T) {
			dev, lb := openLimitedWith(t, &limitedBackend{tgMemory: mem})
			ref := newZcRef(r, pg, 2, 6)
			ref.pieces = pieces
			dv := newZcDeviceOn(t, dev, ref, logM(2, 3), 4, ZcOptions{})
			if rp := dv.zc.round[dv.trace]; (rp.pieceBelow > 0) != (mem > small) {
				t.Fatalf("round plan %+v with %d bytes of threadgroup memory", rp, mem)
			}
			checkZcRound(t, dev, r, ref, pg, dv, 4, 4)
			if ran := lb.largest["zc_round_pieces"] > 0; ran != (mem > small) {
				t.Errorf("zc_round_pieces ran: %v, with %d bytes of threadgroup memory", ran, mem)
			}
		})
	}
}

// TestZcEncodeWeights: zc_weights makes each test AIR's output weights and LogUp constant from
// the challenges as constraints.Program.Weights does (λ powers, eq3b, eq3b·β^J).
func TestZcEncodeWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for _, a := range zcAirs() {
		pg, _ := compileProgram(t, a)
		t.Run(a.Name(), func(t *testing.T) {
			ref := newZcRef(r, pg, 2, 4)
			dv := newZcDeviceOn(t, testDev, ref, logM(2, 3), 3, ZcOptions{})
			lambda, beta := fieldrand.Fp4(r), fieldrand.Fp4(r)
			eq3b := make([]field.Fp4, len(pg.Interactions))
			for k := range eq3b {
				eq3b[k] = fieldrand.Fp4(r)
			}
			want, err := pg.Weights(lambda, beta, eq3b)
			if err != nil {
				t.Fatal(err)
			}
			dc, err := pg.DenConst(beta, eq3b)
			if err != nil || dc != want.DenConst {
				t.Fatalf("DenConst %v (%v), Weights' %v", dc, err, want.DenConst)
			}
			tr := dv.trace
			b := testDev.Batch()
			if err := tr.EncodeWeights(b, lambda, beta, eq3b, dc); err != nil {
				t.Fatal(err)
			}
			got := readFp4(t, tr.weights)
			if len(got) != len(want.Out)+1 {
				t.Fatalf("%d weights, want %d + 1", len(got), len(want.Out))
			}
			for o, w := range want.Out {
				if got[o] != w {
					t.Fatalf("output %d (%+v): got %v, want %v", o, pg.Outputs[o], got[o], w)
				}
			}
			if got[len(want.Out)] != dc {
				t.Fatalf("LogUp constant %v, want %v", got[len(want.Out)], dc)
			}
			if err := tr.EncodeWeights(b, lambda, beta, append(eq3b, beta), dc); err == nil {
				t.Error("one eq3b weight too many: no error")
			}
		})
	}
}
