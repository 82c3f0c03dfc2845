package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/gpu"
)

// Launchers of shaders/rap/zerocheck_pieces.metal: round 0 of the batch constraint sumcheck by
// the generated code of an AIR's pieces (scripts/piecegen), for pieces whose stamp says they are
// the ones the code was generated from (ProgramPieces.Generated). The kernels read a slice's
// slot-value table (zc_uni_values) as zc_uni_pieces does and write the same partial rows, with
// the same parameters; they need no scratch, since a piece's values stay in registers.

// encodeUniGenerated encodes the round-0 kernel of air's generated pieces over one slice.
func (z *Zerocheck) encodeUniGenerated(b *gpu.Batch, air string, groups, tpg gpu.Dim3, t *ZcTrace, eq *gpu.Array[uint32],
	params zcUniPiecesParams) error {
	switch air {
	case "keccakf":
		dispatchZcUniKeccakf(b, groups, tpg, t.pieces.cp.Buffer, t.pieces.table.Buffer, t.weights.Buffer, z.vals.Buffer,
			eq.Buffer, z.partials.Buffer, params)
		return nil
	}
	return fmt.Errorf("kernels: no round-0 kernel for the generated pieces of %s", air)
}
