package kernels

import (
	"testing"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
)

// TestGeneratedPiecesCurrent: the generated piece code (pieces.gen.go, shaders/include/
// keccakf_pieces.h) is that of the pieces devices make of Keccak-f's program today, so the
// launchers select it; a change to the compiler or to Split without `go generate` fails here.
func TestGeneratedPiecesCurrent(t *testing.T) {
	vk, err := air.Keygen(keccakf.Air{}, 255, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := constraints.Split(vk, constraints.All, constraints.DevicePieces)
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := constraints.PiecesStamp(ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(generatedPieces) != 1 || generatedPieces[0].air != "keccakf" {
		t.Fatalf("generated pieces: %+v, want Keccak-f's", generatedPieces)
	}
	if g := generatedPieces[0]; g.stamp != stamp || g.pieces != len(ps) {
		t.Fatalf("generated Keccak-f pieces: stamp %s (%d pieces), today's split %s (%d): run go generate ./internal/gpu/driver/",
			g.stamp, g.pieces, stamp, len(ps))
	}
	// A different split (another piece count) is not the generated code's.
	other, err := constraints.Split(vk, constraints.All, constraints.DevicePieces/2)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := constraints.PiecesStamp(other); s == stamp {
		t.Fatal("two splits of Keccak-f have one stamp")
	}
}
