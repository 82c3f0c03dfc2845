package selftest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/stdrng"
)

func keccakChecks() []Check {
	return []Check{
		{Name: "keccak/permute-kat", Run: checkKeccakPermuteKAT},
		{Name: "keccak/permute-vs-stdlib", Run: checkKeccakPermuteVsStdlib},
		{Name: "keccak/trace-digest-n1", Run: checkKeccakTraceDigest},
		{Name: "keccak/stdrng-kat", Run: checkStdRngKAT},
		{Name: "keccak/air-shape", Run: checkKeccakAirShape},
		{Name: "keccak/air-constraints-n1", Run: checkKeccakAirConstraints},
		{Name: "keccak/air-mutation-detected", Run: checkKeccakAirMutation},
	}
}

// keccakPlonky3Input is Plonky3's test input in[i] = i·0x0123456789ABCDEF.
func keccakPlonky3Input() [25]uint64 {
	var in [25]uint64
	for i := range in {
		in[i] = uint64(i) * 0x0123456789ABCDEF
	}
	return in
}

// checkKeccakPermuteKAT: Keccak-f[1600] of the zero state and of the Plonky3 input, both with the
// Go permutation and the crypto/sha3 oracle (keccak-air.md §11).
func checkKeccakPermuteKAT() error {
	type kat struct {
		name string
		in   [25]uint64
		want map[int]uint64
	}
	for _, k := range []kat{
		{"zero", [25]uint64{}, map[int]uint64{0: 0xF1258F7940E1DDE7}},
		{"plonky3", keccakPlonky3Input(), map[int]uint64{0: 0xd68a506cf64b9e07, 1: 0x82589e1590ac8145, 24: 0xc3c420a7841c8d70}},
	} {
		st := k.in
		keccakf.Permute(&st)
		or, err := keccakf.StdlibKeccakF(k.in)
		if err != nil {
			return err
		}
		for i, w := range k.want {
			if st[i] != w {
				return fmt.Errorf("%s: Permute lane %d = %016x, want %016x", k.name, i, st[i], w)
			}
			if or[i] != w {
				return fmt.Errorf("%s: stdlib oracle lane %d = %016x, want %016x", k.name, i, or[i], w)
			}
		}
	}
	return nil
}

// checkKeccakPermuteVsStdlib: the Go permutation against crypto/sha3's on seeded random states.
func checkKeccakPermuteVsStdlib() error {
	r := stdrng.SeedFromU64(2024)
	for k := 0; k < 16; k++ {
		in := r.Lanes25()
		want, err := keccakf.StdlibKeccakF(in)
		if err != nil {
			return err
		}
		got := in
		keccakf.Permute(&got)
		if got != want {
			return fmt.Errorf("input %d: Permute differs from crypto/sha3", k)
		}
	}
	return nil
}

// checkKeccakTraceDigest: the 32×2633 trace of the Plonky3 input hashes to the anchor of
// keccak-air.md §12, and its block outputs match the oracle.
func checkKeccakTraceDigest() error {
	inputs := [][25]uint64{keccakPlonky3Input()}
	h, cols := keccakf.GenerateTrace(inputs)
	if h != 32 {
		return fmt.Errorf("height %d, want 32", h)
	}
	if err := keccakf.CheckTraceAgainstOracle(h, cols, inputs); err != nil {
		return err
	}
	d := keccakf.TraceDigest(h, cols)
	const want = "fe93c3e6caf9c4ea8faaaa122563c47031bba77879ef7062add211d57a45144a"
	if got := hex.EncodeToString(d[:]); got != want {
		return fmt.Errorf("trace digest %s, want %s", got, want)
	}
	return nil
}

// checkStdRngKAT: rand 0.9 StdRng vectors (keccak-air.md §9) and a ChaCha12 block.
func checkStdRngKAT() error {
	s := stdrng.PCG32Seed(0)
	if got := binary.LittleEndian.Uint64(s[:8]); got != 5029875928683246316 {
		return fmt.Errorf("PCG32 seed(0) = %d, want 5029875928683246316", got)
	}
	if got := stdrng.FromSeed([32]byte{1, 0, 0, 0, 23, 0, 0, 0, 200, 1, 0, 0, 210, 30}).Uint64(); got != 10719222850664546238 {
		return fmt.Errorf("from_seed first u64 = %d, want 10719222850664546238", got)
	}
	in := stdrng.SeedFromU64(42).Lanes25()
	if in[0] != 0x86cc7763222724a2 || in[1] != 0x8af00a133fad517d || in[2] != 0xa2ef6071de5134d1 {
		return fmt.Errorf("seed 42 input lanes 0..2 = %016x %016x %016x", in[0], in[1], in[2])
	}
	var blk [16]uint32
	stdrng.Block(&blk, &[8]uint32{}, 0, 0, stdrng.Rounds)
	if blk[0] != 0x6a9af49b || blk[15] != 0xbe261341 {
		return fmt.Errorf("ChaCha12 zero-key block words 0,15 = %08x %08x", blk[0], blk[15])
	}
	return nil
}

// checkKeccakAirShape: the Keccak AIR emits 3182 constraints of max degree 3, and the OpenVM DAG
// keeps all of them in emission order (keccak-air.md §6, §8).
func checkKeccakAirShape() error {
	sc, err := air.Symbolic(keccakf.Air{})
	if err != nil {
		return err
	}
	if n := len(sc.Constraints); n != 3182 {
		return fmt.Errorf("%d constraints, want 3182", n)
	}
	if d := sc.MaxConstraintDegree(); d != 3 {
		return fmt.Errorf("max constraint degree %d, want 3", d)
	}
	dag, raw := air.BuildDAG(sc.Constraints, sc.Interactions)
	if len(dag.ConstraintIdx) != 3182 {
		return fmt.Errorf("DAG keeps %d constraints, want 3182", len(dag.ConstraintIdx))
	}
	for i := range raw {
		if raw[i] != dag.ConstraintIdx[i] {
			return fmt.Errorf("DAG constraint %d out of emission order", i)
		}
	}
	return nil
}

// checkKeccakAirConstraints: every constraint vanishes on every row of the N=1 trace of the
// Plonky3 input (32 rows: one block plus a partial zero-padding block).
func checkKeccakAirConstraints() error {
	h, cols := keccakf.GenerateTrace([][25]uint64{keccakPlonky3Input()})
	f, err := constraints.Check(keccakf.Air{}, keccakf.TraceInput(h, cols), 1)
	if err != nil {
		return err
	}
	if len(f) != 0 {
		return fmt.Errorf("valid trace fails: %v", f[0])
	}
	return nil
}

// checkKeccakAirMutation: single-cell mutations of the N=1 trace are caught by the expected
// constraint: export on a non-final row (item 7, constraint 249) and a preimage limb changed on
// row 1 (item 5, caught first on row 0, constraint 148 + 4·(5y+x) + limb).
func checkKeccakAirMutation() error {
	h, base := keccakf.GenerateTrace([][25]uint64{keccakPlonky3Input()})
	for _, m := range []struct {
		name     string
		row, col int
		wantRow  int
		wantCons int
	}{
		{"export on row 3", 3, keccakf.ColExport, 3, 249},
		{"preimage[y=3][x=2][1] on row 1", 1, keccakf.ColPreimage(2, 3, 1), 0, 148 + 4*(5*3+2) + 1},
	} {
		cols := append([]field.Fp(nil), base...)
		cols[m.col*h+m.row] = cols[m.col*h+m.row].Add(field.One)
		f, err := constraints.Check(keccakf.Air{}, keccakf.TraceInput(h, cols), 1)
		if err != nil {
			return err
		}
		if len(f) == 0 {
			return fmt.Errorf("%s: mutation not detected", m.name)
		}
		if f[0].Row != m.wantRow || f[0].Constraint != m.wantCons {
			return fmt.Errorf("%s: first failure row %d constraint %d, want row %d constraint %d", m.name, f[0].Row, f[0].Constraint, m.wantRow, m.wantCons)
		}
	}
	return nil
}
