package constraints

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
)

// HeaderWords is the length of the header of Encode.
const HeaderWords = 8

// maxCount bounds a program's registers, outputs, slots and public values (a register or output
// index is a 24-bit field of an instruction).
const maxCount = 1 << 24

// Encode returns the program as the uint32 words the device interpreter reads:
//
//	header: Version, NumRegs, len(Code), len(Consts), len(Outputs), NumSlots, NumPublic, 0
//	code:   3 words per instruction: Op<<24 | Dst, A, B (operands as Operand: kind in the top
//	        two bits)
//	consts: one word each, canonical
func (p *Program) Encode() ([]uint32, error) {
	if p.NumRegs >= maxCount || len(p.Outputs) >= maxCount || p.NumSlots() >= maxCount || p.NumPublic >= maxCount || len(p.Consts) >= 1<<30 {
		return nil, fmt.Errorf("%w: %d registers, %d outputs, %d slots or %d constants out of range", ErrProgram,
			p.NumRegs, len(p.Outputs), p.NumSlots(), len(p.Consts))
	}
	out := make([]uint32, 0, HeaderWords+3*len(p.Code)+len(p.Consts))
	out = append(out, Version, uint32(p.NumRegs), uint32(len(p.Code)), uint32(len(p.Consts)), uint32(len(p.Outputs)),
		uint32(p.NumSlots()), uint32(p.NumPublic), 0)
	for _, in := range p.Code {
		out = append(out, uint32(in.Op)<<24|in.Dst, uint32(in.A), uint32(in.B))
	}
	for _, c := range p.Consts {
		out = append(out, uint32(c))
	}
	return out, nil
}

// Decode is the inverse of Encode for the code, constants and counts (the layout fields of a
// Program — parts, output kinds, interactions — are not encoded: an interpreter needs none). It
// validates every operand, so an interpreter may trust a decoded program.
func Decode(words []uint32) (*Program, error) {
	if len(words) < HeaderWords || words[0] != Version {
		return nil, fmt.Errorf("%w: bad header", ErrProgram)
	}
	nRegs, nCode, nConst, nOut, nSlots, nPub := int(words[1]), int(words[2]), int(words[3]), int(words[4]), int(words[5]), int(words[6])
	if nCode < 0 || nConst < 0 || len(words) != HeaderWords+3*nCode+nConst {
		return nil, fmt.Errorf("%w: %d words for %d instructions and %d constants", ErrProgram, len(words), nCode, nConst)
	}
	if nSlots < 3 || (nSlots-3)%2 != 0 || nSlots >= maxCount {
		return nil, fmt.Errorf("%w: %d slots", ErrProgram, nSlots)
	}
	// Counts the decoder allocates for are bounded before it does: every register is written and
	// every output emitted by an instruction of its own, and public values are few.
	if nRegs > nCode || nOut > nCode || nPub >= maxCount {
		return nil, fmt.Errorf("%w: %d registers, %d outputs, %d public values for %d instructions", ErrProgram, nRegs, nOut, nPub, nCode)
	}
	p := &Program{NumRegs: nRegs, NumPublic: nPub, Outputs: make([]Output, nOut), NumCols: (nSlots - 3) / 2}
	p.Used = make([]bool, nSlots)
	defined := make([]bool, nRegs)
	operand := func(i int, o Operand) error {
		lim := 0
		switch o.Kind() {
		case KindReg:
			if o.Index() >= nRegs || !defined[o.Index()] {
				return fmt.Errorf("%w: instruction %d reads register %d before it is written", ErrProgram, i, o.Index())
			}
			return nil
		case KindSlot:
			lim = nSlots
		case KindConst:
			lim = nConst
		case KindPublic:
			lim = nPub
		}
		if o.Index() >= lim {
			return fmt.Errorf("%w: instruction %d reads operand %#x out of range", ErrProgram, i, uint32(o))
		}
		if o.Kind() == KindSlot {
			p.Used[o.Index()] = true
		}
		return nil
	}
	code := words[HeaderWords : HeaderWords+3*nCode]
	for i := range nCode {
		w0 := code[3*i]
		in := Instr{Op: Op(w0 >> 24), Dst: w0 & (1<<24 - 1), A: Operand(code[3*i+1]), B: Operand(code[3*i+2])}
		var err error
		switch in.Op {
		case OpAdd, OpSub, OpMul:
			if err = operand(i, in.A); err == nil {
				err = operand(i, in.B)
			}
		case OpNeg:
			err = operand(i, in.A)
		case OpEmit:
			if int(in.Dst) >= nOut {
				err = fmt.Errorf("%w: instruction %d emits output %d of %d", ErrProgram, i, in.Dst, nOut)
			} else {
				err = operand(i, in.A)
			}
		default:
			err = fmt.Errorf("%w: instruction %d has unknown op %d", ErrProgram, i, in.Op)
		}
		if err != nil {
			return nil, err
		}
		if in.Op != OpEmit {
			if int(in.Dst) >= nRegs {
				return nil, fmt.Errorf("%w: instruction %d writes register %d of %d", ErrProgram, i, in.Dst, nRegs)
			}
			defined[in.Dst] = true
		}
		p.Code = append(p.Code, in)
	}
	for _, c := range words[HeaderWords+3*nCode:] {
		if c >= field.P {
			return nil, fmt.Errorf("%w: constant %d is not canonical", ErrProgram, c)
		}
		p.Consts = append(p.Consts, field.Fp(c))
	}
	return p, nil
}

// PiecesStamp identifies a program split into pieces (Split) by the words of its pieces (Encode,
// piece after piece, each preceded by its length): the hex SHA-256. It names a split in caches
// and reports.
func PiecesStamp(pieces []*Program) (string, error) {
	h := sha256.New()
	var buf [4]byte
	put := func(w uint32) {
		binary.LittleEndian.PutUint32(buf[:], w)
		h.Write(buf[:])
	}
	for _, p := range pieces {
		words, err := p.Encode()
		if err != nil {
			return "", err
		}
		put(uint32(len(words)))
		for _, w := range words {
			put(w)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
