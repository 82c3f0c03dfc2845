package keccakf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
)

func keccakSymbolic(t testing.TB) *air.SymbolicConstraints {
	t.Helper()
	sc, err := air.Symbolic(Air{})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// groupDegrees is the degree_multiple of each constraint of item g, in emission order, as listed
// in keccak-air.md §6.
func groupDegrees(item int) []int {
	rep := func(d, n int) []int { return slices.Repeat([]int{d}, n) }
	switch item {
	case 1, 2, 3, 4, 6, 7, 12, 14:
		return rep(2, ConstraintGroups[item-1].Count)
	case 5, 10, 11, 15:
		return rep(3, ConstraintGroups[item-1].Count)
	case 8: // per x: 64 bools, 64 C' definitions
		return slices.Repeat(append(rep(2, 64), rep(3, 64)...), 5)
	case 9: // per (y, x): 64 bools, 4 limbs
		return slices.Repeat(append(rep(2, 64), rep(3, 4)...), 25)
	case 13:
		return rep(1, 4)
	}
	return nil
}

func TestAirShape(t *testing.T) {
	a := Air{}
	if a.Name() != "keccakf" || a.NumPublicValues() != 0 {
		t.Fatalf("name %q, %d publics", a.Name(), a.NumPublicValues())
	}
	if w := a.Width(); w.CommonMain != NumCols || w.Preprocessed != 0 || len(w.CachedMains) != 0 {
		t.Fatalf("width %+v", w)
	}
	sc := keccakSymbolic(t)
	if len(sc.Constraints) != NumConstraints || NumConstraints != 3182 {
		t.Fatalf("%d constraints, want 3182", len(sc.Constraints))
	}
	if len(sc.Interactions) != 0 {
		t.Fatalf("%d interactions", len(sc.Interactions))
	}
	if d := sc.MaxConstraintDegree(); d != 3 {
		t.Fatalf("max degree %d, want 3", d)
	}
	hist := map[int]int{}
	for _, c := range sc.Constraints {
		hist[c.DegreeMultiple()]++
	}
	if hist[1] != 4 || hist[2] != 2138 || hist[3] != 1040 || len(hist) != 3 {
		t.Fatalf("degree histogram %v, want 1:4 2:2138 3:1040", hist)
	}
	next := 0
	for _, g := range ConstraintGroups {
		if g.First != next {
			t.Fatalf("item %d starts at %d, want %d", g.Item, g.First, next)
		}
		next += g.Count
		want := groupDegrees(g.Item)
		if len(want) != g.Count {
			t.Fatalf("item %d: %d degrees listed for %d constraints", g.Item, len(want), g.Count)
		}
		for k, d := range want {
			if got := sc.Constraints[g.First+k].DegreeMultiple(); got != d {
				t.Errorf("item %d constraint %d: degree %d, want %d", g.Item, k, got, d)
			}
		}
	}
	if next != NumConstraints || ConstraintGroupOf(0) != 1 || ConstraintGroupOf(3181) != 15 || ConstraintGroupOf(3182) != 0 {
		t.Fatalf("groups cover %d constraints", next)
	}
	// Domains: 24 first-row (IsFirstRow · …), 224 transition (IsTransition at the root or, for
	// item 5, one level down), the rest unfiltered by selectors.
	var first, trans int
	for _, c := range sc.Constraints {
		if c.Op() != air.OpMul {
			continue
		}
		switch {
		case c.Left().Op() == air.OpIsFirstRow:
			first++
		case c.Left().Op() == air.OpIsTransition:
			trans++
		case c.Right().Op() == air.OpMul && c.Right().Left().Op() == air.OpIsTransition:
			trans++
		}
	}
	if first != 24 || trans != 224 {
		t.Fatalf("%d first-row and %d transition constraints, want 24 and 224", first, trans)
	}
}

// The OpenVM DAG keeps every constraint (each root is a fresh node, so sort+dedup preserves the
// emission order) and has 39273 nodes (keccak-air.md §8).
func TestAirDAG(t *testing.T) {
	sc := keccakSymbolic(t)
	dag, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
	if len(dag.ConstraintIdx) != NumConstraints {
		t.Fatalf("%d constraints after sort+dedup, want %d", len(dag.ConstraintIdx), NumConstraints)
	}
	if !slices.Equal(dag.ConstraintIdx, raw) {
		t.Fatal("sort+dedup changed the constraint order")
	}
	if len(dag.Nodes) != 39273 {
		t.Fatalf("%d DAG nodes, want 39273", len(dag.Nodes))
	}
	if dag.MaxRotation() != 1 {
		t.Fatalf("max rotation %d", dag.MaxRotation())
	}
	maxDeg := 0
	for i, ci := range dag.ConstraintIdx {
		n := dag.Nodes[ci]
		if n.Degree != sc.Constraints[i].DegreeMultiple() {
			t.Fatalf("constraint %d: node degree %d, tree degree %d", i, n.Degree, sc.Constraints[i].DegreeMultiple())
		}
		maxDeg = max(maxDeg, n.Degree)
	}
	if maxDeg != 3 {
		t.Fatalf("max node degree %d", maxDeg)
	}
	// The degree quirk of §8: item 14 keeps degree 2 even though at the bit positions where no RC
	// has a 1 the rc_z sum folds to the constant 0 (57 such positions).
	var zeroBits int
	for z := 0; z < 64; z++ {
		var or uint64
		for _, rc := range RC {
			or |= rc >> uint(z) & 1
		}
		if or == 0 {
			zeroBits++
		}
	}
	if zeroBits != 57 {
		t.Fatalf("%d RC bit positions always 0, want 57", zeroBits)
	}
	g := ConstraintGroups[13]
	for k := 0; k < g.Count; k++ {
		if d := dag.Nodes[raw[g.First+k]].Degree; d != 2 {
			t.Fatalf("item 14 limb %d: node degree %d", k, d)
		}
	}
}

// shapePrinter prints an expression tree losslessly but compactly: Add(x, y) whose two operands
// are structurally equal prints as dbl(x), so the limb folds' acc.double() (whose plain printing
// doubles at each of the 16 steps) stays linear. Structure is hash-consed per node, so equal
// subtrees are recognised even when they are distinct pointers.
type shapePrinter struct {
	ids  map[*air.Expr]int
	keys map[string]int
	strs map[*air.Expr]string
}

func newShapePrinter() *shapePrinter {
	return &shapePrinter{ids: map[*air.Expr]int{}, keys: map[string]int{}, strs: map[*air.Expr]string{}}
}

func (p *shapePrinter) id(e *air.Expr) int {
	if i, ok := p.ids[e]; ok {
		return i
	}
	key := fmt.Sprint(e.Op(), e.DegreeMultiple())
	switch e.Op() {
	case air.OpVariable:
		key += e.Var().String()
	case air.OpConstant:
		key += "c" + e.Constant().String()
	case air.OpNeg:
		key += fmt.Sprint(" ", p.id(e.Left()))
	case air.OpAdd, air.OpSub, air.OpMul:
		key += fmt.Sprint(" ", p.id(e.Left()), " ", p.id(e.Right()))
	}
	i, ok := p.keys[key]
	if !ok {
		i = len(p.keys)
		p.keys[key] = i
	}
	p.ids[e] = i
	return i
}

func (p *shapePrinter) String(e *air.Expr) string {
	if s, ok := p.strs[e]; ok {
		return s
	}
	var s string
	switch e.Op() {
	case air.OpAdd, air.OpSub, air.OpMul:
		if e.Op() == air.OpAdd && p.id(e.Left()) == p.id(e.Right()) {
			s = "dbl(" + p.String(e.Left()) + ")"
		} else {
			sym := map[air.Op]string{air.OpAdd: " + ", air.OpSub: " - ", air.OpMul: " * "}[e.Op()]
			s = "(" + p.String(e.Left()) + sym + p.String(e.Right()) + ")"
		}
	case air.OpNeg:
		s = "-" + p.String(e.Left())
	default:
		s = e.String()
	}
	p.strs[e] = s
	return s
}

// Independent string builders for the expected printed shapes (keccak-air.md §6 text, p3-field
// 0.4.3: xor(a, b) = a + b − a·b.double(), andn(a, b) = (1 − a)·b, fold acc.double() + bit).
func sv(c int) string             { return fmt.Sprintf("m0[%d]", c) }
func ssub(a, b string) string     { return "(" + a + " - " + b + ")" }
func sxor(a, b string) string     { return "((" + a + " + " + b + ") - (" + a + " * dbl(" + b + ")))" }
func sxor3(a, b, c string) string { return sxor(sxor(a, b), c) }
func sandn(a, b string) string    { return "((1 - " + a + ") * " + b + ")" }
func sfold(l int, bit func(z int) string) string {
	acc := "0"
	for z := 16*l + 15; z >= 16*l; z-- {
		acc = "(dbl(" + acc + ") + " + bit(z) + ")"
	}
	return acc
}

func TestAirGolden(t *testing.T) {
	sc := keccakSymbolic(t)
	pr := newShapePrinter()
	nf := "(1 - m0[23])"
	d := "(((((m0[865] + m0[1185]) + m0[1505]) + m0[1825]) + m0[2145]) - m0[545])"
	rc := func(z int) string {
		acc := "0"
		for r := 0; r < 24; r++ {
			acc = "(" + acc + " + (" + sv(r) + " * " + fmt.Sprint(RC[r]>>uint(z)&1) + "))"
		}
		return acc
	}
	golden := []struct {
		ci   int
		want string
	}{
		{0, "(IsFirstRow * (m0[0] - 1))"},
		{1, "(IsFirstRow * m0[1])"},
		{23, "(IsFirstRow * m0[23])"},
		{24, "(IsTransition * (m0[0] - m0[1]'))"},
		{47, "(IsTransition * (m0[23] - m0[0]'))"},
		{48, "(m0[0] * (m0[25] - m0[125]))"},
		{148, "(" + nf + " * (IsTransition * (m0[25] - m0[25]')))"},
		{248, "(m0[24] * (m0[24] - 1))"},
		{249, "(" + nf + " * m0[24])"},
		{250, "(m0[225] * (m0[225] - 1))"},
		// C'[0][0] − xor3(C[0][0], C[4][0], C[1][63]).
		{314, ssub(sv(545), sxor3(sv(225), sv(225+256), sv(225+64+63)))},
		{890, "(m0[865] * (m0[865] - 1))"},
		{954, ssub(sfold(0, func(z int) string { return sxor3(sv(865+z), sv(225+z), sv(545+z)) }), sv(125))},
		// Item 9 for (y=0, x=1), limb 3: A'[1][0], C[1], C'[1], A[1][0].
		{890 + 68 + 64 + 3, ssub(sfold(3, func(z int) string { return sxor3(sv(865+64+z), sv(225+64+z), sv(545+64+z)) }), sv(129+3))},
		{2590, "((" + d + " * (" + d + " - 2)) * (" + d + " - dbl(2)))"},
		{2910, ssub(sfold(0, func(z int) string {
			return sxor(sandn(sv(ColB(1, 0, z)), sv(ColB(2, 0, z))), sv(ColB(0, 0, z)))
		}), sv(2465))},
		{3010, "(m0[2565] * (m0[2565] - 1))"},
		{3074, ssub(sfold(0, func(z int) string { return sv(2565 + z) }), sv(2465))},
		{3078, ssub(sfold(0, func(z int) string { return sxor(rc(z), sv(2565+z)) }), sv(2629))},
		{3082, "(IsTransition * (" + nf + " * (m0[2629] - m0[125]')))"},
		// Item 15 runs x outer, y inner: the 5th lane is (x=0, y=1).
		{3086, "(IsTransition * (" + nf + " * (m0[2485] - m0[145]')))"},
		{3181, "(IsTransition * (" + nf + " * (m0[2564] - m0[224]')))"},
	}
	for _, g := range golden {
		if got := pr.String(sc.Constraints[g.ci]); got != g.want {
			t.Errorf("constraint %d (item %d):\n got  %s\n want %s", g.ci, ConstraintGroupOf(g.ci), got, g.want)
		}
	}
	// On the constraints without limb folds the compact printer, with dbl(leaf) expanded back to
	// (leaf + leaf), is exactly Expr.String.
	leafDbl := regexp.MustCompile(`dbl\((m0\[\d+\]'?|\d+)\)`)
	for _, ci := range []int{0, 24, 148, 249, 250, 314, 2590, 3082} {
		compact := pr.String(sc.Constraints[ci])
		if got, want := sc.Constraints[ci].String(), leafDbl.ReplaceAllString(compact, "($1 + $1)"); got != want {
			t.Errorf("constraint %d: String %s, compact expanded %s", ci, got, want)
		}
	}
	// Anchor over all compactly printed constraints (measured with this implementation after the
	// checks above; a change means some tree shape changed).
	h := sha256.New()
	for _, c := range sc.Constraints {
		h.Write([]byte(pr.String(c)))
		h.Write([]byte{'\n'})
	}
	const want = "53f65bd234a29677406a0ee29bc7b062e264ec0288de071fefab2b629cde31c9"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("digest of all printed constraints %s, want %s", got, want)
	}
}

// dagChecker evaluates the constraint DAG once per row (air.CheckConstraints also prints every
// failing tree, which is exponential in the fold depth, so the mutation tests use this).
type dagChecker struct {
	dag *air.DAG
	raw []int
}

func newDAGChecker(t testing.TB) *dagChecker {
	sc := keccakSymbolic(t)
	dag, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
	return &dagChecker{dag: dag, raw: raw}
}

type rowVal struct {
	cols   []field.Fp
	height int
	row    int
}

func (v *rowVal) Var(x air.Var) field.Fp {
	return v.cols[x.Index*v.height+(v.row+x.Offset)%v.height]
}
func (v *rowVal) IsFirstRow() field.Fp   { return b2fp(v.row == 0) }
func (v *rowVal) IsLastRow() field.Fp    { return b2fp(v.row == v.height-1) }
func (v *rowVal) IsTransition() field.Fp { return b2fp(v.row != v.height-1) }

func b2fp(b bool) field.Fp {
	if b {
		return field.One
	}
	return field.Zero
}

// failingItems returns the sorted §6 items with a non-zero constraint on some row.
func (d *dagChecker) failingItems(height int, cols []field.Fp) []int {
	val := &rowVal{cols: cols, height: height}
	var vals []field.Fp
	seen := map[int]bool{}
	for r := 0; r < height; r++ {
		val.row = r
		vals = d.dag.EvalNodes(val, vals)
		for ci, n := range d.raw {
			if !vals[n].IsZero() {
				seen[ConstraintGroupOf(ci)] = true
			}
		}
	}
	var items []int
	for it := range seen {
		items = append(items, it)
	}
	slices.Sort(items)
	return items
}

func checkTrace(t testing.TB, height int, cols []field.Fp) []air.Failure {
	t.Helper()
	f, err := constraints.Check(Air{}, TraceInput(height, cols), 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAirConstraintsHoldOnValidTraces(t *testing.T) {
	cases := []struct {
		name   string
		inputs [][25]uint64
		height int
	}{
		{"N=0", nil, 1},
		{"N=1 plonky3", [][25]uint64{plonky3Input()}, 32},
		{"N=2 plonky3+zero", [][25]uint64{plonky3Input(), {}}, 64},
		{"N=3 seed 7", RandomInputs(7, 3), 128},
		{"N=5 seed 42", RandomInputs(42, 5), 128},
	}
	for _, c := range cases {
		h, cols := GenerateTrace(c.inputs)
		if h != c.height {
			t.Fatalf("%s: height %d, want %d", c.name, h, c.height)
		}
		if f := checkTrace(t, h, cols); len(f) != 0 {
			t.Errorf("%s: %d failures, first %v", c.name, len(f), f[0])
		}
	}
}

// Single-cell mutations of every column group, each caught by the expected §6 items (the exact
// set of failing items is checked, so a constraint that silently stopped firing shows up).
func TestAirMutations(t *testing.T) {
	chk := newDAGChecker(t)
	inputs := RandomInputs(42, 3)
	h, base := GenerateTrace(inputs)
	const r0 = 24 // block 1: rows 24..47, transitions on both sides
	cols := slices.Clone(base)
	at := func(r, c int) *field.Fp { return &cols[c*h+r] }
	bump := func(v field.Fp) field.Fp { return v.Add(field.One) }
	flip := func(v field.Fp) field.Fp { return field.One.Sub(v) }
	set := func(x uint32) func(field.Fp) field.Fp { return func(field.Fp) field.Fp { return field.New(x) } }
	cases := []struct {
		name string
		row  int
		col  int
		mut  func(field.Fp) field.Fp
		want []int
	}{
		{"flag 0 cleared on row 0", 0, ColStepFlag(0), flip, []int{1, 3, 14}},
		{"flag 1 set on row 0", 0, ColStepFlag(1), flip, []int{2, 3, 14}},
		{"flag 5 cleared mid-block", r0 + 5, ColStepFlag(5), flip, []int{3, 14}},
		{"flag 23 cleared on final row", r0 + 23, ColStepFlag(23), flip, []int{3, 5, 14, 15}},
		{"export on non-final row", r0 + 3, ColExport, set(1), []int{7}},
		{"export = 2 on final row", r0 + 23, ColExport, set(2), []int{6}},
		{"preimage on row 1 of block", r0 + 1, ColPreimage(2, 3, 1), bump, []int{5}},
		{"preimage on row 0 of block", r0, ColPreimage(2, 3, 1), bump, []int{4, 5}},
		{"C bit = 2", r0 + 7, ColC(3, 17), set(2), []int{8, 9}},
		{"C' bit flipped", r0 + 7, ColCPrime(3, 17), flip, []int{8, 9, 10}},
		{"A' bit flipped", r0 + 9, ColAPrime(4, 1, 40), flip, []int{9, 10, 11}},
		{"A'' limb bumped", r0 + 11, ColAPrimePrime(1, 2, 2), bump, []int{11, 15}},
		{"A''00 bit flipped", r0 + 12, ColAPrimePrime00Bit(5), flip, []int{13, 14}},
		{"A''00 bit = 2", r0 + 12, ColAPrimePrime00Bit(5), set(2), []int{12, 13, 14}},
		{"A'''00 limb bumped", r0 + 13, ColAPrimePrimePrime00Limb(0), bump, []int{14, 15}},
		{"A on row 1 of block", r0 + 1, ColA(0, 0, 3), bump, []int{9, 15}},
	}
	for _, c := range cases {
		copy(cols, base)
		p := at(c.row, c.col)
		*p = c.mut(*p)
		got := chk.failingItems(h, cols)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: failing items %v, want %v", c.name, got, c.want)
		}
	}
	// export = 1 on a step-23 row satisfies the AIR (keccak-air.md §12).
	copy(cols, base)
	*at(r0+23, ColExport) = field.One
	if got := chk.failingItems(h, cols); len(got) != 0 {
		t.Errorf("export on a final row: failing items %v", got)
	}
}

// BenchmarkKeccakConstraintCheck: air.CheckConstraints (symbolic eval, DAG build, then every
// node on every row) on the 2048-row trace of 64 permutations.
func BenchmarkKeccakConstraintCheck(b *testing.B) {
	h, cols := GenerateTrace(RandomInputs(42, 64))
	in := TraceInput(h, cols)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		f, err := constraints.Check(Air{}, in, 1)
		if err != nil || len(f) != 0 {
			b.Fatal(err, f)
		}
	}
	b.ReportMetric(float64(h*b.N)/time.Since(start).Seconds(), "rows/s")
}
