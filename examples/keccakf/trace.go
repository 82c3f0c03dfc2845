package keccakf

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/stdrng"
)

// Height is the trace height for n permutations: next_power_of_two(24n), with Rust's
// next_power_of_two(0) = 1.
func Height(n int) int {
	if n < 0 {
		panic("keccakf: negative permutation count")
	}
	h := 1
	for h < NumRounds*n {
		h <<= 1
	}
	return h
}

// RandomInputs reproduces the inputs of OpenVM's CPU Keccak example: StdRng::seed_from_u64(seed),
// then n draws of rng.random::<[u64; 25]>().
func RandomInputs(seed uint64, n int) [][25]uint64 {
	r := stdrng.SeedFromU64(seed)
	out := make([][25]uint64, n)
	for i := range out {
		out[i] = r.Lanes25()
	}
	return out
}

// GenerateTrace is p3-keccak-air 0.4.3 generate_trace_rows: the trace of the given inputs, as a
// column-major matrix of NumCols columns (cell (row r, column c) at cols[c*height+r]).
func GenerateTrace(inputs [][25]uint64) (height int, cols []field.Fp) {
	height = Height(len(inputs))
	cols = make([]field.Fp, NumCols*height)
	FillTrace(cols, height, inputs)
	return height, cols
}

// Per-row compact record of a tile, struct-of-arrays: rec[k*tileRows + t] is u64 value k of
// tile row t.
const (
	recPre    = 0           // 25 input lanes
	recA      = recPre + 25 // 25 round-input lanes
	recC      = recA + 25   // 5
	recCP     = recC + 5    // 5
	recAP     = recCP + 5   // 25
	recAPP    = recAP + 25  // 25 (A''; lane 0 is A''[0][0])
	recAPPP00 = recAPP + 25 // 1
	recCount  = recAPPP00 + 1

	tileBlocks = 8
	tileRows   = tileBlocks * NumRounds
)

// FillTrace writes the trace of inputs into dst, a column-major height×NumCols matrix
// (dst[c*height+r]); every cell is written, so dst need not be zeroed. height must be a power of
// two with height ≥ 24·len(inputs) (normally Height(len(inputs))). Rows past the real
// permutations hold the permutation of the all-zero state, restarted every 24 rows and truncated
// at the end (keccak-air.md §3). Work is split by permutation blocks across GOMAXPROCS
// goroutines, each writing disjoint rows.
func FillTrace(dst []field.Fp, height int, inputs [][25]uint64) {
	if height <= 0 || height&(height-1) != 0 {
		panic(fmt.Sprintf("keccakf: height %d is not a power of two", height))
	}
	if height < NumRounds*len(inputs) {
		panic(fmt.Sprintf("keccakf: height %d too small for %d permutations", height, len(inputs)))
	}
	if len(dst) != NumCols*height {
		panic(fmt.Sprintf("keccakf: dst has %d cells, want %d", len(dst), NumCols*height))
	}
	blocks := (height + NumRounds - 1) / NumRounds
	workers := runtime.GOMAXPROCS(0)
	if workers > blocks {
		workers = blocks
	}
	if workers <= 1 {
		fillBlocks(dst, height, inputs, 0, blocks)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		b0, b1 := blocks*w/workers, blocks*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fillBlocks(dst, height, inputs, b0, b1)
		}()
	}
	wg.Wait()
}

// fillBlocks writes the rows of permutation blocks [b0, b1), tileBlocks blocks at a time: first
// the compact per-row lane values of the tile, then every column's run of rows of the tile.
func fillBlocks(dst []field.Fp, height int, inputs [][25]uint64, b0, b1 int) {
	rec := make([]uint64, recCount*tileRows)
	for tb := b0; tb < b1; tb += tileBlocks {
		te := min(tb+tileBlocks, b1)
		r0 := tb * NumRounds
		n := min(te*NumRounds, height) - r0
		computeTile(rec, inputs, tb, n)
		emitTile(dst, height, rec, r0, n)
	}
}

// computeTile fills rec for rows r0 .. r0+n-1 of the trace, r0 = 24·firstBlock.
func computeTile(rec []uint64, inputs [][25]uint64, firstBlock, n int) {
	var v roundVals
	for t0 := 0; t0 < n; t0 += NumRounds {
		p := firstBlock + t0/NumRounds
		var st [25]uint64
		if p < len(inputs) {
			st = inputs[p]
		}
		pre := st
		for r := 0; r < NumRounds && t0+r < n; r++ {
			t := t0 + r
			for i := 0; i < 25; i++ {
				rec[(recPre+i)*tileRows+t] = pre[i]
				rec[(recA+i)*tileRows+t] = st[i]
			}
			round(&st, r, &v)
			for x := 0; x < 5; x++ {
				rec[(recC+x)*tileRows+t] = v.c[x]
				rec[(recCP+x)*tileRows+t] = v.cp[x]
			}
			for i := 0; i < 25; i++ {
				rec[(recAP+i)*tileRows+t] = v.ap[i]
				rec[(recAPP+i)*tileRows+t] = st[i]
			}
			rec[recAPP*tileRows+t] = v.app00
			rec[recAPPP00*tileRows+t] = st[0]
		}
	}
}

func emitLimbs(dst []field.Fp, height, r0, n, firstCol int, src []uint64) {
	for l := 0; l < LimbsPerLane; l++ {
		out := dst[(firstCol+l)*height+r0:][:n]
		sh := uint(BitsPerLimb * l)
		for t := range out {
			out[t] = field.Fp(uint32(src[t]>>sh) & 0xFFFF)
		}
	}
}

func emitBits(dst []field.Fp, height, r0, n, firstCol int, src []uint64) {
	for z := 0; z < 64; z++ {
		out := dst[(firstCol+z)*height+r0:][:n]
		for t := range out {
			out[t] = field.Fp(uint32(src[t]>>uint(z)) & 1)
		}
	}
}

// emitTile writes rows r0 .. r0+n-1 of every column from the tile record (tile row t = trace row
// r0+t; r0 is a multiple of 24, so the round of tile row t is t mod 24).
func emitTile(dst []field.Fp, height int, rec []uint64, r0, n int) {
	lane := func(k int) []uint64 { return rec[k*tileRows:][:n] }
	for r := 0; r < NumRounds; r++ {
		out := dst[ColStepFlag(r)*height+r0:][:n]
		for t := range out {
			out[t] = 0
		}
		for t := r; t < n; t += NumRounds {
			out[t] = 1
		}
	}
	clear(dst[ColExport*height+r0:][:n])
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			i := x + 5*y
			emitLimbs(dst, height, r0, n, ColPreimage(x, y, 0), lane(recPre+i))
			emitLimbs(dst, height, r0, n, ColA(x, y, 0), lane(recA+i))
			emitBits(dst, height, r0, n, ColAPrime(x, y, 0), lane(recAP+i))
			emitLimbs(dst, height, r0, n, ColAPrimePrime(x, y, 0), lane(recAPP+i))
		}
	}
	for x := 0; x < 5; x++ {
		emitBits(dst, height, r0, n, ColC(x, 0), lane(recC+x))
		emitBits(dst, height, r0, n, ColCPrime(x, 0), lane(recCP+x))
	}
	emitBits(dst, height, r0, n, ColAPrimePrime00Bit(0), lane(recAPP))
	emitLimbs(dst, height, r0, n, ColAPrimePrimePrime00Limb(0), lane(recAPPP00))
}
