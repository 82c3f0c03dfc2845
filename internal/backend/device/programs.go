package device

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
)

// Programs evaluated on trace rows (rows.go). Every program is uploaded once per backend through
// Backend.program (constraints.go); the stages that need only some of an AIR's outputs (the GKR
// leaves: its interactions; the trace check: its constraints) compile that program once per
// verifying key, and each program's table of the trace columns it reads is uploaded once. All of
// it lives until Close.

// rowProgramCache holds the column tables (the programs compiled for some outputs are in the
// backend's Shared).
type rowProgramCache struct {
	columns map[*constraints.Program]*usedColumns
}

// compiledKey names a key's program for some outputs, whole (pieces 0) or split into at most
// pieces pieces.
type compiledKey struct {
	vk     *air.VerifyingKey
	outs   constraints.Outputs
	pieces int
}

// usedColumns is a program's kernels.UsedColumns table, on the device (nil when it reads no
// column).
type usedColumns struct {
	kernels.UsedColumns
	words *gpu.Array[uint32]
}

// programFor returns vk's program compiled for outs (constraints.Compile, once per Shared), and
// the program on the device.
func (b *Backend) programFor(vk *air.VerifyingKey, outs constraints.Outputs) (*constraints.Program, *kernels.Program, error) {
	p, err := b.shared.compile(vk, outs)
	if err != nil {
		return nil, nil, err
	}
	dp, err := b.program(p)
	if err != nil {
		return nil, nil, err
	}
	return p, dp, nil
}

// columnsOf returns the table of the trace columns p reads, uploading it on first use.
func (b *Backend) columnsOf(p *constraints.Program) (*usedColumns, error) {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	if u, ok := b.rowProgs.columns[p]; ok {
		return u, nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	u := &usedColumns{UsedColumns: kernels.UsedColumnsOf(p)}
	if len(u.Words) > 0 {
		var err error
		if u.words, err = gpu.UploadArray(b.dev, "program columns", u.Words); err != nil {
			return nil, err
		}
	}
	if b.rowProgs.columns == nil {
		b.rowProgs.columns = map[*constraints.Program]*usedColumns{}
	}
	b.rowProgs.columns[p] = u
	return u, nil
}

// freeRowPrograms frees the column tables (Close; the uploaded programs are freePrograms').
func (b *Backend) freeRowPrograms() {
	b.progMu.Lock()
	defer b.progMu.Unlock()
	for _, u := range b.rowProgs.columns {
		if u.words != nil {
			u.words.Free()
		}
	}
	b.rowProgs = rowProgramCache{}
}
