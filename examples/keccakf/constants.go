package keccakf

// Keccak-f[1600] constants, hand-copied from the project spec's keccakf_constants.txt, which
// transcribes Plonky3 p3-keccak-air 0.4.3 src/constants.rs (the FIPS 202 values). The tests
// recompute both tables from their FIPS 202 definitions (the rc LFSR of Algorithm 5 and the ρ
// offset recurrence of Algorithm 2).

// NumRounds is the number of Keccak-f[1600] rounds, and the number of trace rows per permutation.
const NumRounds = 24

// RC are the ι round constants: A[0][0] ^= RC[round] at the end of round 'round'.
var RC = [NumRounds]uint64{
	0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
	0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
	0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
	0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
	0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
	0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
}

// ROT are the ρ offsets, indexed ROT[x][y]: lane A'[x][y] is rotated left by ROT[x][y] bits
// (constants.rs R[x][y]; e.g. ROT[0][1] = 36, ROT[1][0] = 1).
var ROT = [5][5]int{
	{0, 36, 3, 41, 18},
	{1, 44, 10, 45, 2},
	{62, 6, 43, 15, 61},
	{28, 55, 25, 21, 56},
	{27, 20, 39, 8, 14},
}
