// Package keccakf is the Keccak-f[1600] example of metalprove: the column layout, trace
// generation and independent checks for Plonky3's p3-keccak-air 0.4.3 AIR (2633 columns, 24 rows
// per permutation), as described in the project spec keccak-air.md, and the AIR itself: its
// constraints are written with the internal/air builder in air.go.
package keccakf

// Group is one field of Plonky3's #[repr(C)] KeccakCols struct: a block of consecutive columns
// holding an array of the given shape, flattened row-major (last index fastest).
type Group struct {
	Name  string
	Shape []int // storage order, e.g. [5 5 4] = [y][x][limb]
	First int   // first column
}

// Width is the number of columns of the group (the product of its shape; 1 for a scalar).
func (g Group) Width() int {
	w := 1
	for _, s := range g.Shape {
		w *= s
	}
	return w
}

// First columns of the groups, in declaration order (keccak-air.md §2).
const (
	firstStepFlags  = 0
	firstExport     = 24
	firstPreimage   = 25
	firstA          = 125
	firstC          = 225
	firstCPrime     = 545
	firstAPrime     = 865
	firstAPP        = 2465
	firstAPP00Bits  = 2565
	firstAPPP00Limb = 2629
)

// NumCols is the trace width, size_of::<KeccakCols<u8>>().
const NumCols = 2633

// Limb and bit counts.
const (
	BitsPerLimb  = 16
	LimbsPerLane = 4
	NumLanes     = 25
	// RateLimbs is columns.rs RATE_LIMBS: the 1088-bit rate of Keccak-256 in 16-bit limbs.
	RateLimbs = 1088 / BitsPerLimb
)

// Groups is the column layout, one entry per KeccakCols field in declaration order.
var Groups = []Group{
	{"step_flags", []int{NumRounds}, firstStepFlags},
	{"export", nil, firstExport},
	{"preimage", []int{5, 5, LimbsPerLane}, firstPreimage},                  // [y][x][limb]
	{"a", []int{5, 5, LimbsPerLane}, firstA},                                // [y][x][limb]
	{"c", []int{5, 64}, firstC},                                             // [x][z]
	{"c_prime", []int{5, 64}, firstCPrime},                                  // [x][z]
	{"a_prime", []int{5, 5, 64}, firstAPrime},                               // [y][x][z]
	{"a_prime_prime", []int{5, 5, LimbsPerLane}, firstAPP},                  // [y][x][limb]
	{"a_prime_prime_0_0_bits", []int{64}, firstAPP00Bits},                   // [z]
	{"a_prime_prime_prime_0_0_limbs", []int{LimbsPerLane}, firstAPPP00Limb}, // [limb]
}

// ColStepFlag is step_flags[r], r ∈ 0..23.
func ColStepFlag(r int) int { return firstStepFlags + r }

// ColExport is the export column.
const ColExport = firstExport

func laneLimb(first, x, y, l int) int { return first + LimbsPerLane*(5*y+x) + l }

// ColPreimage is preimage[y][x][l]: limb l of input lane (x, y).
func ColPreimage(x, y, l int) int { return laneLimb(firstPreimage, x, y, l) }

// ColA is a[y][x][l]: limb l of the round-input lane A[x][y].
func ColA(x, y, l int) int { return laneLimb(firstA, x, y, l) }

// ColC is c[x][z]: bit z of C[x].
func ColC(x, z int) int { return firstC + 64*x + z }

// ColCPrime is c_prime[x][z]: bit z of C'[x].
func ColCPrime(x, z int) int { return firstCPrime + 64*x + z }

// ColAPrime is a_prime[y][x][z]: bit z of A'[x][y].
func ColAPrime(x, y, z int) int { return firstAPrime + 64*(5*y+x) + z }

// ColAPrimePrime is a_prime_prime[y][x][l]: limb l of A”[x][y].
func ColAPrimePrime(x, y, l int) int { return laneLimb(firstAPP, x, y, l) }

// ColAPrimePrime00Bit is a_prime_prime_0_0_bits[z]: bit z of A”[0][0].
func ColAPrimePrime00Bit(z int) int { return firstAPP00Bits + z }

// ColAPrimePrimePrime00Limb is a_prime_prime_prime_0_0_limbs[l]: limb l of A”'[0][0].
func ColAPrimePrimePrime00Limb(l int) int { return firstAPPP00Limb + l }

// ColOut is OUT(x,y,l): limb l of the round output A”'[x][y], which is the A”'00 limb column
// for (0,0) and the A” limb column elsewhere (A” and A”' coincide off (0,0)).
func ColOut(x, y, l int) int {
	if x == 0 && y == 0 {
		return ColAPrimePrimePrime00Limb(l)
	}
	return ColAPrimePrime(x, y, l)
}

// ColB is the A' column holding bit z of B[x][y] = ROTL(A'[a][x], ROT[a][x]) with
// a = (x+3y) mod 5: B is not stored, it re-indexes A'.
func ColB(x, y, z int) int {
	a := (x + 3*y) % 5
	r := ROT[a][x]
	return ColAPrime(a, x, (z+64-r)%64)
}

func rateLimb(i int) (x, y, l int) {
	if i < 0 || i >= RateLimbs {
		panic("keccakf: rate limb index out of range")
	}
	u := i / LimbsPerLane
	return u % 5, u / 5, i % LimbsPerLane
}

// InputLimbCol is columns.rs input_limb(i), i < RateLimbs: the preimage column of rate limb i
// (lane i/4, limb i%4).
func InputLimbCol(i int) int {
	x, y, l := rateLimb(i)
	return ColPreimage(x, y, l)
}

// OutputLimbCol is columns.rs output_limb(i), i < RateLimbs: the OUT column of rate limb i.
func OutputLimbCol(i int) int {
	x, y, l := rateLimb(i)
	return ColOut(x, y, l)
}
