package prover

import (
	"context"
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/stark"
)

// ProveError classifies an error of stark.Prove or ProveTraces for the exit status: a trace that
// fails its checks (4), an input that does not fit the key (3), the device out of memory or
// failing (5), an interrupt (130).
func ProveError(ctx context.Context, what string, err error) error {
	var tce *stark.TraceCheckError
	switch {
	case ctx != nil && ctx.Err() != nil, errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, cmdutil.ErrInterrupted)
	case errors.As(err, &tce):
		return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, stark.ErrProveInput):
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, stark.ErrGkrRootNumerator):
		return &cmdutil.CheckFailedError{Err: fmt.Errorf("%s: interactions do not balance: %w", what, err)}
	case errors.Is(err, gpu.ErrOutOfMemory):
		return &cmdutil.DeviceError{Err: fmt.Errorf("prove %s: %w", what, err)}
	}
	var ge *gpu.Error
	if errors.As(err, &ge) {
		return &cmdutil.DeviceError{Err: fmt.Errorf("prove %s: %w", what, err)}
	}
	return fmt.Errorf("prove %s: %w", what, err)
}
