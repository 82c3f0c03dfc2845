package device

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
)

// Constraint programs on the device: each program is uploaded once per backend and kept until
// Close (the stages of every proof reuse it). Stages that need only some of an AIR's outputs
// (the GKR leaves: its interactions; the trace check: its constraints) compile that program once
// per verifying key.

// programCache holds the uploaded programs, the per-key programs compiled for some outputs and
// the tables of the columns programs read from trace rows.
type programCache struct {
	uploaded map[*constraints.Program]*kernels.Program
	compiled map[compiledKey]*constraints.Program
	columns  map[*constraints.Program]*usedColumns
}

// usedColumns is a program's kernels.UsedColumns table, on the device (nil when it reads no
// column).
type usedColumns struct {
	kernels.UsedColumns
	words *gpu.Array[uint32]
}

type compiledKey struct {
	vk   *air.VerifyingKey
	outs constraints.Outputs
}

// program returns p on the device, uploading it on first use.
func (b *Backend) program(p *constraints.Program) (*kernels.Program, error) {
	if p == nil {
		return nil, fmt.Errorf("backend/device: nil constraint program")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if dp, ok := b.progs.uploaded[p]; ok {
		return dp, nil
	}
	dp, err := kernels.UploadProgram(b.dev, fmt.Sprintf("%d instructions", len(p.Code)), p)
	if err != nil {
		return nil, err
	}
	if b.progs.uploaded == nil {
		b.progs.uploaded = map[*constraints.Program]*kernels.Program{}
	}
	b.progs.uploaded[p] = dp
	return dp, nil
}

// programFor returns vk's program compiled for outs (constraints.Compile), compiling it on first
// use, and the program on the device.
func (b *Backend) programFor(vk *air.VerifyingKey, outs constraints.Outputs) (*constraints.Program, *kernels.Program, error) {
	key := compiledKey{vk, outs}
	b.mu.Lock()
	p, ok := b.progs.compiled[key]
	b.mu.Unlock()
	if !ok {
		var err error
		if p, err = constraints.Compile(vk, outs); err != nil {
			return nil, nil, err
		}
		b.mu.Lock()
		if q, ok := b.progs.compiled[key]; ok {
			p = q // compiled meanwhile by another goroutine: keep one
		} else {
			if b.progs.compiled == nil {
				b.progs.compiled = map[compiledKey]*constraints.Program{}
			}
			b.progs.compiled[key] = p
		}
		b.mu.Unlock()
	}
	dp, err := b.program(p)
	if err != nil {
		return nil, nil, err
	}
	return p, dp, nil
}

// columnsOf returns the table of the trace columns p reads, uploading it on first use.
func (b *Backend) columnsOf(p *constraints.Program) (*usedColumns, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if u, ok := b.progs.columns[p]; ok {
		return u, nil
	}
	u := &usedColumns{UsedColumns: kernels.UsedColumnsOf(p)}
	if len(u.Words) > 0 {
		var err error
		if u.words, err = gpu.UploadArray(b.dev, "program columns", u.Words); err != nil {
			return nil, err
		}
	}
	if b.progs.columns == nil {
		b.progs.columns = map[*constraints.Program]*usedColumns{}
	}
	b.progs.columns[p] = u
	return u, nil
}

// freePrograms frees every uploaded program and table (Close).
func (b *Backend) freePrograms() {
	b.mu.Lock()
	pc := b.progs
	b.progs = programCache{}
	b.mu.Unlock()
	for _, dp := range pc.uploaded {
		dp.Free()
	}
	for _, u := range pc.columns {
		if u.words != nil {
			u.words.Free()
		}
	}
}
