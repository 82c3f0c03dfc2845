package keccakf

import (
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

// Layout of crypto/sha3's marshaled SHAKE state (Go ≥ 1.24; keccak-air.md §11). This is an
// implementation detail of the standard library, checked on every use.
const (
	shakeMarshaledLen = 207
	shakeMagic        = "sha\x09"
	shakeRateOff      = 4
	shakeStateOff     = 5
	shakeNOff         = 205
	shakeDirOff       = 206
)

// ErrOracleFormat reports that crypto/sha3's marshaled state no longer has the expected layout.
var ErrOracleFormat = errors.New("keccakf: crypto/sha3 SHAKE marshaled state format changed")

// StdlibKeccakF computes Keccak-f[1600](in) with the standard library's permutation (reached
// through SHAKE128's MarshalBinary/UnmarshalBinary): the input lanes are planted as the state, the
// read buffer is marked exhausted in squeeze direction, and reading one byte runs exactly one
// permutation. It is an independent oracle for Permute and the trace.
func StdlibKeccakF(in [25]uint64) ([25]uint64, error) {
	h := sha3.NewSHAKE128()
	b, err := h.MarshalBinary()
	if err != nil {
		return [25]uint64{}, err
	}
	if err := checkShakeFormat(b); err != nil {
		return [25]uint64{}, err
	}
	for i, v := range in {
		binary.LittleEndian.PutUint64(b[shakeStateOff+8*i:], v)
	}
	b[shakeNOff] = b[shakeRateOff]
	b[shakeDirOff] = 1
	if err := h.UnmarshalBinary(b); err != nil {
		return [25]uint64{}, fmt.Errorf("%w: %v", ErrOracleFormat, err)
	}
	var one [1]byte
	if _, err := h.Read(one[:]); err != nil {
		return [25]uint64{}, err
	}
	b, err = h.MarshalBinary()
	if err != nil {
		return [25]uint64{}, err
	}
	if err := checkShakeFormat(b); err != nil {
		return [25]uint64{}, err
	}
	var out [25]uint64
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[shakeStateOff+8*i:])
	}
	if one[0] != byte(out[0]) {
		return [25]uint64{}, fmt.Errorf("%w: squeezed byte %#x is not byte 0 of the state %#x", ErrOracleFormat, one[0], byte(out[0]))
	}
	return out, nil
}

func checkShakeFormat(b []byte) error {
	if len(b) != shakeMarshaledLen {
		return fmt.Errorf("%w: %d bytes, want %d", ErrOracleFormat, len(b), shakeMarshaledLen)
	}
	if string(b[:4]) != shakeMagic {
		return fmt.Errorf("%w: magic %q, want %q", ErrOracleFormat, b[:4], shakeMagic)
	}
	if b[shakeRateOff] != 168 {
		return fmt.Errorf("%w: rate byte %d, want 168", ErrOracleFormat, b[shakeRateOff])
	}
	return nil
}

// lanesAt rebuilds 25 lanes from the limb columns col(x,y,l) of row r.
func lanesAt(height int, cols []field.Fp, r int, col func(x, y, l int) int) (lanes [25]uint64, err error) {
	for y := 0; y < 5; y++ {
		for x := 0; x < 5; x++ {
			var v uint64
			for l := 0; l < LimbsPerLane; l++ {
				c := col(x, y, l)
				limb := uint32(cols[c*height+r])
				if limb > 0xFFFF {
					return lanes, fmt.Errorf("row %d column %d (lane %d limb %d) = %d is not a 16-bit limb", r, c, x+5*y, l, limb)
				}
				v |= uint64(limb) << (BitsPerLimb * l)
			}
			lanes[x+5*y] = v
		}
	}
	return lanes, nil
}

// CheckTraceAgainstOracle checks a column-major trace against crypto/sha3's permutation: for
// every full 24-row block p (real and padding), the preimage on row 24p must be inputs[p] (zero
// for padding blocks) and the OUT limbs on row 24p+23 must be Keccak-f of it. It checks block
// inputs and outputs only, not the intermediate columns.
func CheckTraceAgainstOracle(height int, cols []field.Fp, inputs [][25]uint64) error {
	if height <= 0 || len(cols) != NumCols*height {
		return fmt.Errorf("keccakf: trace has %d cells, want %d×%d", len(cols), NumCols, height)
	}
	if height < NumRounds*len(inputs) {
		return fmt.Errorf("keccakf: height %d holds fewer than %d permutations", height, len(inputs))
	}
	for p := 0; p < height/NumRounds; p++ {
		var want [25]uint64
		if p < len(inputs) {
			want = inputs[p]
		}
		in, err := lanesAt(height, cols, NumRounds*p, ColPreimage)
		if err != nil {
			return fmt.Errorf("block %d: %v", p, err)
		}
		if in != want {
			for i := range in {
				if in[i] != want[i] {
					return fmt.Errorf("block %d: preimage lane %d = %016x, want %016x", p, i, in[i], want[i])
				}
			}
		}
		exp, err := StdlibKeccakF(in)
		if err != nil {
			return err
		}
		out, err := lanesAt(height, cols, NumRounds*p+NumRounds-1, ColOut)
		if err != nil {
			return fmt.Errorf("block %d: %v", p, err)
		}
		for i := range out {
			if out[i] != exp[i] {
				return fmt.Errorf("block %d: output lane %d = %016x, oracle %016x", p, i, out[i], exp[i])
			}
		}
	}
	return nil
}

// TraceDigest is SHA-256 of all cells in row-major order, each as a little-endian u32 (the
// regression anchor of keccak-air.md §12). It streams a few rows at a time.
func TraceDigest(height int, cols []field.Fp) [32]byte {
	if len(cols) != NumCols*height {
		panic(fmt.Sprintf("keccakf: trace has %d cells, want %d×%d", len(cols), NumCols, height))
	}
	const tile = 64
	h := sha256.New()
	buf := make([]byte, tile*NumCols*4)
	for r0 := 0; r0 < height; r0 += tile {
		n := min(tile, height-r0)
		for c := 0; c < NumCols; c++ {
			col := cols[c*height+r0:][:n]
			for t, v := range col {
				binary.LittleEndian.PutUint32(buf[(t*NumCols+c)*4:], uint32(v))
			}
		}
		h.Write(buf[:n*NumCols*4])
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
