package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

// evalLevelWords runs piece k of LevelWords' words in Go over Fp4, as zc_round_levels does:
// the piece's slots (its own slot list, values by the program's slot numbering) into registers
// 0 .. nslots−1, then the instructions level by level (every level non-empty; a register an
// operand reads must be written at an earlier level), then the emits. It returns the emitted
// (output → values) and fails on malformed words.
func evalLevelWords(t *testing.T, words []uint32, k int, pp *ProgramPieces, slots []field.Fp4, public []field.Fp) map[int][]field.Fp4 {
	t.Helper()
	lp := words[words[3*k] : words[3*k]+words[3*k+1]]
	nlev, ns, nconst, ncode, nemit := int(lp[0]), int(lp[1]), int(lp[2]), int(lp[3]), int(lp[4])
	if ns != len(pp.Slots[k]) || nconst != len(pp.consts[k]) || int(words[3*k+2]) != nconst ||
		len(lp) != zcLevelHeader+nlev+1+3*ncode+2*nemit {
		t.Fatalf("piece %d: header %v (%d words, %d constants), want %d slots and %d constants", k, lp[:zcLevelHeader], len(lp),
			words[3*k+2], len(pp.Slots[k]), len(pp.consts[k]))
	}
	start := lp[zcLevelHeader : zcLevelHeader+nlev+1]
	if nlev < 1 || start[0] != 0 || int(start[nlev]) != ncode {
		t.Fatalf("piece %d: level starts %v for %d instructions", k, start, ncode)
	}
	code := lp[zcLevelHeader+nlev+1 : zcLevelHeader+nlev+1+3*ncode]
	emits := lp[zcLevelHeader+nlev+1+3*ncode:]
	regs := make([]field.Fp4, ns+ncode)
	level := make([]int, ns+ncode) // the level a register is written at (slots: −1)
	for l, s := range pp.Slots[k] {
		regs[l], level[l] = slots[s], -1
	}
	val := func(o uint32, lv int, what string) field.Fp4 {
		idx := int(o & (1<<30 - 1))
		switch constraints.Operand(o).Kind() {
		case constraints.KindReg:
			if idx >= len(regs) || level[idx] >= lv {
				t.Fatalf("piece %d: %s (level %d) reads register %d", k, what, lv, idx)
			}
			return regs[idx]
		case constraints.KindConst:
			return field.Fp4{pp.consts[k][idx]}
		case constraints.KindPublic:
			return field.Fp4{public[idx]}
		}
		t.Fatalf("piece %d: %s has a slot operand", k, what)
		return field.Fp4{}
	}
	for lv := range nlev {
		if start[lv+1] <= start[lv] && ncode > 0 {
			t.Fatalf("piece %d: level starts %v: level %d empty", k, start, lv)
		}
		for i := int(start[lv]); i < int(start[lv+1]); i++ {
			w := code[3*i:]
			what := fmt.Sprint("instruction ", i)
			if w[0]&(1<<24-1) != 0 {
				t.Fatalf("piece %d: %s: word %#x", k, what, w[0])
			}
			var v field.Fp4
			switch op := constraints.Op(w[0] >> 24); op {
			case constraints.OpAdd:
				v = val(w[1], lv, what).Add(val(w[2], lv, what))
			case constraints.OpSub:
				v = val(w[1], lv, what).Sub(val(w[2], lv, what))
			case constraints.OpMul:
				v = val(w[1], lv, what).Mul(val(w[2], lv, what))
			case constraints.OpNeg:
				v = val(w[1], lv, what).Neg()
			default:
				t.Fatalf("piece %d: %s: op %d", k, what, op)
			}
			regs[ns+i], level[ns+i] = v, lv
		}
	}
	out := map[int][]field.Fp4{}
	for e := range nemit {
		o := int(emits[2*e])
		out[o] = append(out[o], val(emits[2*e+1], nlev, fmt.Sprint("emit ", e)))
	}
	return out
}

// TestLevelWords: every piece's level code (Keccak-f's rounds' pieces, and a small AIR's) emits
// what the piece emits, to the same values, reading only registers of earlier levels; the most
// registers is a piece's slots plus instructions.
func TestLevelWords(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	airs := append(zcAirs(), keccakf.Air{})
	for _, a := range airs[len(airs)-2:] {
		pg, vk := compileProgram(t, a)
		pieces := splitProgram(t, vk, constraints.DeviceRoundPieces)
		pp, err := UploadPieces(testDev, "levels test", pieces)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pp.Free)
		lc, err := pp.LevelWords()
		if err != nil {
			t.Fatal(err)
		}
		words := lc.Words
		slots := make([]field.Fp4, pg.NumSlots())
		for s := range slots {
			slots[s] = fieldrand.Fp4(r)
		}
		public := fieldrand.Fps(r, pg.NumPublic)
		most, block, consts, emitted, listed := 0, 0, 0, 0, 0
		for k, p := range pieces {
			want := map[int][]field.Fp4{}
			constraints.Eval(p, slots, public, func(x field.Fp) field.Fp4 { return field.Fp4{x} },
				func(o int, v field.Fp4) { want[o] = append(want[o], v) }, nil)
			got := evalLevelWords(t, words, k, pp, slots, public)
			if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s piece %d: level code emits %v, the piece %v", a.Name(), k, got, want)
			}
			lp := words[words[3*k]:]
			most, block, consts = max(most, int(lp[1]+lp[3])), max(block, int(words[3*k+1])), max(consts, len(p.Consts))
			for _, in := range p.Code {
				if in.Op == constraints.OpEmit {
					emitted++
				}
			}
			listed += int(lp[4])
		}
		if emitted != listed {
			t.Errorf("%s: %d emits listed, the pieces emit %d times", a.Name(), listed, emitted)
		}
		if lc.Regs != most || lc.BlockWords != block || lc.Consts != consts {
			t.Errorf("%s: counts %d, %d, %d; the pieces' %d registers, %d words, %d constants", a.Name(), lc.Regs, lc.BlockWords, lc.Consts, most, block, consts)
		}
	}
}

// TestZerocheckRoundLevels: rounds j ≥ 1 run level-scheduled (zc_round_levels) equal the plain-Go
// round for every test AIR in pieces, on the host device (one lane group a group, k threads on
// it: k = 1 is the serial walk) and on the host posing as a GPU (groups of 32 threads, k of them a
// lane group, several lane groups a group), down to one pair, with the constant denominator term.
func TestZerocheckRoundLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	gdev, lb := openLimitedWith(t, &limitedBackend{tgMemory: 1 << 20})
	for _, c := range []struct {
		logN, logH, logRows, points, pieces, k int
		gpu                                    bool
	}{
		{2, 6, 4, 4, 3, 1, false}, {2, 6, 1, 4, 5, 2, false}, {2, 9, 7, 3, 2, 4, false}, {0, 6, 6, 4, 64, 1, false},
		{2, 6, 4, 4, 3, 0, true}, {2, 6, 1, 4, 5, 8, true}, {2, 9, 7, 3, 2, 32, true}, {4, 8, 2, 4, 4, 1, true},
	} {
		for _, a := range zcAirs() {
			pg, vk := compileProgram(t, a)
			t.Run(fmt.Sprintf("%s/h%d/rows%d/p%d/pieces%d/k%d/gpu%v", a.Name(), c.logH, c.logRows, c.points, c.pieces, c.k, c.gpu), func(t *testing.T) {
				ref := newZcRef(r, pg, c.logN, c.logH)
				ref.pieces = splitProgram(t, vk, c.pieces)
				dev, opts := testDev, ZcOptions{Pieces: true, Levels: true, LevelThreads: c.k}
				if c.gpu {
					dev, opts = gdev, ZcOptions{LevelThreads: c.k}
				}
				dv := newZcDeviceOn(t, dev, ref, logM(c.logN, 3), c.points, opts)
				rp := dv.zc.round[dv.trace]
				wantK := c.k // GPUs: 0 chooses by round
				if !c.gpu {
					wantK = max(c.k, 1)
				}
				if rp.levelBelow == 0 || rp.levelK != wantK || (c.gpu && rp.levelTpg != 32) || (!c.gpu && rp.levelTpg != wantK) {
					t.Fatalf("round plan %+v: want levels, %d threads a lane group", rp, wantK)
				}
				checkZcRound(t, dev, r, ref, pg, dv, c.logRows, c.points)
			})
		}
	}
	if lb.largest["zc_round_levels"] != 32 || lb.largest["zc_round_pieces"] != 0 {
		t.Errorf("kernels run on the GPU-shaped device: %v", lb.largest)
	}
}

// TestZerocheckRoundLevelsKeccak: Keccak-f's rounds' pieces (up to 47 levels, 75 slots, emits
// fused and not) level-scheduled on the host posing as a GPU, against the plain-Go round: with 2
// compute units a round's lane groups get 8 threads each (4 lane groups a group), with 64 they
// get 16 (2 a group).
func TestZerocheckRoundLevelsKeccak(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	pg, vk := compileProgram(t, keccakf.Air{})
	pieces := splitProgram(t, vk, constraints.DeviceRoundPieces)
	for _, c := range []struct{ cus, k int }{{2, 8}, {64, 16}} {
		t.Run(fmt.Sprint("cus", c.cus), func(t *testing.T) {
			dev, lb := openLimitedWith(t, &limitedBackend{tgMemory: 320 << 10, computeUnits: c.cus})
			ref := newZcRef(r, pg, 2, 6)
			ref.pieces = pieces
			dv := newZcDeviceOn(t, dev, ref, logM(2, 3), 4, ZcOptions{})
			rp := dv.zc.round[dv.trace]
			if rp.levelBelow == 0 || rp.levelK != 0 || rp.levelKMin != 8 || rp.levelTpg != 32 {
				t.Fatalf("round plan %+v: want levels by round (8 threads a lane group at least) in groups of 32", rp)
			}
			for _, logRows := range []int{4, 1} {
				units := ((1<<(logRows-1))*4 + 15) / 16
				if k, u, _ := dv.zc.levelShape(&rp, dv.trace.roundPieces(), units); k != c.k || u != 32/c.k {
					t.Fatalf("2^%d rows: %d threads a lane group, %d lane groups a group; want %d", logRows, k, u, c.k)
				}
				checkZcRound(t, dev, r, ref, pg, dv, logRows, 4)
			}
			if lb.largest["zc_round_levels"] != 32 {
				t.Errorf("zc_round_levels did not run in groups of 32: %v", lb.largest)
			}
		})
	}
}
