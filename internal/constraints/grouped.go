package constraints

import (
	"container/heap"
	"fmt"
	"slices"
)

// GroupedByOp returns a copy of p whose instructions run in another order, one that keeps runs of
// one operation long: an interpreter that dispatches on each instruction's operation (the host
// device's, 16 points an instruction) then mostly takes the branch it took before, where in
// Compile's depth-first order the operation changes at four of five instructions. The order is a
// list schedule of the code's dependences in which an instruction runs no more than window
// instructions ahead of the earliest one not yet run; among the instructions ready, one of the
// previous instruction's operation is taken first, else the earliest (window 1: Compile's order).
// Registers are allocated again by liveness: the values computed ahead of their place stay live
// longer, so NumRegs may grow (Keccak-f with window 256: 644 → 721). The outputs, their values and
// everything but Code and NumRegs are p's.
func (p *Program) GroupedByOp(window int) (*Program, error) {
	if window < 1 {
		return nil, fmt.Errorf("%w: grouping window %d", ErrProgram, window)
	}
	n := len(p.Code)
	// The code in SSA form (codeDeps, which checks it), and each instruction's readers.
	deps, err := codeDeps(p)
	if err != nil {
		return nil, err
	}
	readers := make([][]int, n)
	pending := make([]int, n) // producers not yet run
	for i := range n {
		for k, d := range deps[i] {
			if d >= 0 && (k == 0 || deps[i][0] != d) {
				readers[d] = append(readers[d], i)
				pending[i]++
			}
		}
	}

	// The schedule: ready instructions per operation, earliest first.
	var ready [numOps]indexHeap
	for i := range n {
		if pending[i] == 0 {
			heap.Push(&ready[p.Code[i].Op], i)
		}
	}
	order := make([]int, 0, n)
	ran := make([]bool, n)
	front := 0 // the earliest instruction not yet run
	cur := Op(numOps)
	for len(order) < n {
		for front < n && ran[front] {
			front++
		}
		pick := -1
		if cur < numOps && ready[cur].Len() > 0 && ready[cur][0] < front+window {
			pick = heap.Pop(&ready[cur]).(int)
		} else {
			// The earliest ready instruction (the front one: its operands precede it).
			best := Op(numOps)
			for op := range numOps {
				if ready[op].Len() > 0 && (best == numOps || ready[op][0] < ready[best][0]) {
					best = op
				}
			}
			if best == numOps {
				return nil, fmt.Errorf("%w: the code's dependences have a cycle", ErrProgram)
			}
			pick = heap.Pop(&ready[best]).(int)
			cur = best
		}
		ran[pick] = true
		order = append(order, pick)
		for _, r := range readers[pick] {
			if pending[r]--; pending[r] == 0 {
				heap.Push(&ready[p.Code[r].Op], r)
			}
		}
	}

	// Registers by liveness in the new order: a value's register is free once its last reader has
	// read it (the reader's own result may take it, as in Compile).
	pos := make([]int, n)
	for q, i := range order {
		pos[i] = q
	}
	lastUse := make([]int, n)
	for i := range n {
		lastUse[i] = -1
		for _, r := range readers[i] {
			lastUse[i] = max(lastUse[i], pos[r])
		}
	}
	out := *p
	out.Code = make([]Instr, 0, n)
	reg := make([]uint32, n)
	var free []uint32
	used := 0
	for q, i := range order {
		in := p.Code[i]
		for k, d := range deps[i] {
			if d < 0 {
				continue
			}
			if k == 0 {
				in.A = KindReg | Operand(reg[d])
			} else {
				in.B = KindReg | Operand(reg[d])
			}
			if lastUse[d] == q && (k == 0 || deps[i][0] != d) {
				free = append(free, reg[d])
			}
		}
		if in.Op != OpEmit {
			if len(readers[i]) == 0 {
				return nil, fmt.Errorf("%w: instruction %d computes a value nothing reads", ErrProgram, i)
			}
			if len(free) > 0 {
				reg[i] = free[len(free)-1]
				free = free[:len(free)-1]
			} else {
				reg[i] = uint32(used)
				used++
			}
			in.Dst = reg[i]
		}
		out.Code = append(out.Code, in)
	}
	out.NumRegs = used
	out.Code = slices.Clip(out.Code)
	return &out, nil
}

// indexHeap is a min-heap of instruction indices.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// HostOpWindow is the window of GroupedByOp for the host device's interpreter.
const HostOpWindow = 256
