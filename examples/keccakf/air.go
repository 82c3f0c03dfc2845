package keccakf

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
)

// Air is p3-keccak-air 0.4.3 KeccakAir as an air.Air: 2633 main columns, no preprocessed trace,
// no public values, no interactions. Eval emits the 3182 constraints of keccak-air.md §6 in the
// 0.4.3 emission order and with the 0.4.3 expression-tree shapes (operand order included), since
// the OpenVM verifying key, and hence the transcript, depends on them.
type Air struct{}

var _ air.Air = Air{}

// Name is the AIR's name.
func (Air) Name() string { return "keccakf" }

// Width is a single common main trace of NumCols columns.
func (Air) Width() air.TraceWidth { return air.TraceWidth{CommonMain: NumCols} }

// NumPublicValues is 0.
func (Air) NumPublicValues() int { return 0 }

// NumConstraints is the number of constraints Eval emits.
const NumConstraints = 3182

// ConstraintGroup is one item of keccak-air.md §6: constraints First .. First+Count−1 (in
// emission order).
type ConstraintGroup struct {
	Item  int // § 6 item number, 1..15
	Name  string
	First int
	Count int
}

// ConstraintGroups lists the 15 items of keccak-air.md §6 in emission order.
var ConstraintGroups = func() []ConstraintGroup {
	items := []struct {
		name  string
		count int
	}{
		{"first flag is one", 1},
		{"other flags zero", 23},
		{"flag rotation", 24},
		{"preimage loads A", 100},
		{"preimage constant in block", 100},
		{"export is boolean", 1},
		{"export only on final step", 1},
		{"theta: C bool, C' definition", 640},
		{"theta: A' bool, A limbs", 1700},
		{"theta: A' column parity", 320},
		{"rho-pi-chi: A'' limbs", 100},
		{"A''00 bits bool", 64},
		{"A''00 limbs from bits", 4},
		{"iota: A'''00 limbs", 4},
		{"round output feeds next round", 100},
	}
	out := make([]ConstraintGroup, len(items))
	first := 0
	for i, it := range items {
		out[i] = ConstraintGroup{Item: i + 1, Name: it.name, First: first, Count: it.count}
		first += it.count
	}
	return out
}()

// ConstraintGroupOf returns the §6 item (1..15) of the constraint with emission index ci, or 0
// when ci is out of range.
func ConstraintGroupOf(ci int) int {
	for _, g := range ConstraintGroups {
		if ci >= g.First && ci < g.First+g.Count {
			return g.Item
		}
	}
	return 0
}

// Field helpers with the exact tree shapes of p3-field 0.4.3 PrimeCharacteristicRing defaults
// (on OpenVM's SymbolicExpression, whose operators build nodes without simplifying).

// double is `x.double()` = x + x.
func double(x *air.Expr) *air.Expr { return air.Add(x, x) }

// xor is `x.xor(y)` = x + y − x·y.double().
func xor(x, y *air.Expr) *air.Expr { return air.Sub(air.Add(x, y), air.Mul(x, double(y))) }

// xor3 is `x.xor3(y, z)` = x.xor(y).xor(z).
func xor3(x, y, z *air.Expr) *air.Expr { return xor(xor(x, y), z) }

// andn is `x.andn(y)` = (ONE − x)·y.
func andn(x, y *air.Expr) *air.Expr { return air.Mul(air.Sub(air.One(), x), y) }

// limbFold is `(16ℓ..16ℓ+16).rev().fold(ZERO, |acc, z| acc.double() + bit(z))`.
func limbFold(limb int, bit func(z int) *air.Expr) *air.Expr {
	acc := air.Zero()
	for z := (limb+1)*BitsPerLimb - 1; z >= limb*BitsPerLimb; z-- {
		acc = air.Add(double(acc), bit(z))
	}
	return acc
}

// Eval emits the constraints (p3-keccak-air 0.4.3 round_flags.rs eval_round_flags, then
// air.rs KeccakAir::eval).
func (Air) Eval(b *air.Builder) {
	local, next := b.Main(0), b.Main(1)

	// Items 1–3: eval_round_flags.
	b.WhenFirstRow().AssertOne(local[ColStepFlag(0)])
	for r := 1; r < NumRounds; r++ {
		b.WhenFirstRow().AssertZero(local[ColStepFlag(r)])
	}
	for r := 0; r < NumRounds; r++ {
		b.WhenTransition().AssertZero(air.Sub(local[ColStepFlag(r)], next[ColStepFlag((r+1)%NumRounds)]))
	}

	firstStep := local[ColStepFlag(0)]
	notFinalStep := air.Sub(air.One(), local[ColStepFlag(NumRounds-1)])

	// Item 4: when(first_step) preimage == a.
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			f := b.When(firstStep)
			for l := 0; l < LimbsPerLane; l++ {
				f.AssertZero(air.Sub(local[ColPreimage(x, y, l)], local[ColA(x, y, l)]))
			}
		}
	}

	// Item 5: when(not_final_step).when_transition() local preimage == next preimage.
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			f := b.When(notFinalStep).WhenTransition()
			for l := 0; l < LimbsPerLane; l++ {
				f.AssertZero(air.Sub(local[ColPreimage(x, y, l)], next[ColPreimage(x, y, l)]))
			}
		}
	}

	// Items 6–7: export.
	b.AssertBool(local[ColExport])
	b.When(notFinalStep).AssertZero(local[ColExport])

	// Item 8: per x, C bits boolean then C'[x][z] = xor3(C[x][z], C[x−1][z], C[x+1][z−1]).
	for x := 0; x < 5; x++ {
		for z := 0; z < 64; z++ {
			b.AssertBool(local[ColC(x, z)])
		}
		for z := 0; z < 64; z++ {
			xr := xor3(local[ColC(x, z)], local[ColC((x+4)%5, z)], local[ColC((x+1)%5, (z+63)%64)])
			b.AssertZero(air.Sub(local[ColCPrime(x, z)], xr))
		}
	}

	// Item 9: per y, x: A' bits boolean, then limb(xor3(A', C, C')) − A.
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			getBit := func(z int) *air.Expr {
				return xor3(local[ColAPrime(x, y, z)], local[ColC(x, z)], local[ColCPrime(x, z)])
			}
			for z := 0; z < 64; z++ {
				b.AssertBool(local[ColAPrime(x, y, z)])
			}
			for l := 0; l < LimbsPerLane; l++ {
				b.AssertZero(air.Sub(limbFold(l, getBit), local[ColA(x, y, l)]))
			}
		}
	}

	// Item 10: diff·(diff − 2)·(diff − four), diff = Σ_y A'[x][y][z] − C'[x][z], four = TWO.double().
	for x := 0; x < 5; x++ {
		four := double(air.ConstInt(2))
		for z := 0; z < 64; z++ {
			sum := local[ColAPrime(x, 0, z)]
			for y := 1; y < 5; y++ {
				sum = air.Add(sum, local[ColAPrime(x, y, z)])
			}
			diff := air.Sub(sum, local[ColCPrime(x, z)])
			b.AssertZero(air.Mul(air.Mul(diff, air.Sub(diff, air.ConstInt(2))), air.Sub(diff, four)))
		}
	}

	// Item 11: A''[x][y] = xor(andn(B[x+1][y], B[x+2][y]), B[x][y]).
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			getBit := func(z int) *air.Expr {
				an := andn(local[ColB((x+1)%5, y, z)], local[ColB((x+2)%5, y, z)])
				return xor(an, local[ColB(x, y, z)])
			}
			for l := 0; l < LimbsPerLane; l++ {
				b.AssertZero(air.Sub(limbFold(l, getBit), local[ColAPrimePrime(x, y, l)]))
			}
		}
	}

	// Items 12–13: bits of A''[0][0].
	for z := 0; z < 64; z++ {
		b.AssertBool(local[ColAPrimePrime00Bit(z)])
	}
	for l := 0; l < LimbsPerLane; l++ {
		fold := limbFold(l, func(z int) *air.Expr { return local[ColAPrimePrime00Bit(z)] })
		b.AssertZero(air.Sub(fold, local[ColAPrimePrime(0, 0, l)]))
	}

	// Item 14: A'''[0][0] = A''[0][0] xor RC, rc_z = Σ_r step_flags[r]·from_bool(bit z of RC[r]).
	getXoredBit := func(z int) *air.Expr {
		rc := air.Zero()
		for r := 0; r < NumRounds; r++ {
			k := air.Const(field.New(uint32(RC[r]>>uint(z)) & 1))
			rc = air.Add(rc, air.Mul(local[ColStepFlag(r)], k))
		}
		return xor(rc, local[ColAPrimePrime00Bit(z)])
	}
	for l := 0; l < LimbsPerLane; l++ {
		b.AssertZero(air.Sub(limbFold(l, getXoredBit), local[ColAPrimePrimePrime00Limb(l)]))
	}

	// Item 15: when_transition().when(not_final_step) round output == next round input.
	for x := 0; x < 5; x++ {
		for y := 0; y < 5; y++ {
			f := b.WhenTransition().When(notFinalStep)
			for l := 0; l < LimbsPerLane; l++ {
				f.AssertZero(air.Sub(local[ColOut(x, y, l)], next[ColA(x, y, l)]))
			}
		}
	}
}

// TraceInput wraps a column-major trace from GenerateTrace / FillTrace (cols[c*height+r]) as the
// input of air.CheckConstraints. The slice is shared, not copied.
func TraceInput(height int, cols []field.Fp) air.TraceInput {
	return air.TraceInput{CommonMain: air.Matrix{Width: NumCols, Height: height, Values: cols}}
}
