package prover

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

// TestProveError: the exit status of each kind of proving failure.
func TestProveError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		ctx  context.Context
		err  error
		want cmdutil.ExitCode
	}{
		{context.Background(), fmt.Errorf("commit: %w", &gpu.Error{Op: "alloc", Buffer: "codeword", Err: fmt.Errorf("%w: 1 GiB", gpu.ErrOutOfMemory)}), cmdutil.ExitDevice},
		{context.Background(), &gpu.Error{Op: "dispatch", Kernel: "ntt", Err: errors.New("launch failed")}, cmdutil.ExitDevice},
		{context.Background(), fmt.Errorf("%w: 3 inputs for 2 AIRs", stark.ErrProveInput), cmdutil.ExitBadInput},
		{context.Background(), &stark.TraceCheckError{}, cmdutil.ExitCheckFailed},
		{cancelled, errors.New("stage cancelled"), cmdutil.ExitInterrupted},
		{context.Background(), context.Canceled, cmdutil.ExitInterrupted},
		{context.Background(), errors.New("disk on fire"), cmdutil.ExitError},
	}
	for _, c := range cases {
		if got := cmdutil.ExitCodeFor(ProveError(c.ctx, "t.trace", c.err)); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.want)
		}
	}
}
