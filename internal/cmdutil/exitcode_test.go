package cmdutil

import (
	"errors"
	"fmt"
	"testing"
)

func TestExitCodeFor(t *testing.T) {
	base := errors.New("x")
	tests := []struct {
		err  error
		want ExitCode
	}{
		{nil, ExitOK},
		{base, ExitError},
		{Usagef("bad %s", "flag"), ExitUsage},
		{&BadInputError{Err: base}, ExitBadInput},
		{&CheckFailedError{Err: base}, ExitCheckFailed},
		{&DeviceError{Err: base}, ExitDevice},
		{fmt.Errorf("context: %w", &DeviceError{Err: base}), ExitDevice},
		{fmt.Errorf("context: %w", Usagef("y")), ExitUsage},
		{fmt.Errorf("prove: %w", ErrInterrupted), ExitInterrupted},
	}
	for _, tt := range tests {
		if got := ExitCodeFor(tt.err); got != tt.want {
			t.Errorf("ExitCodeFor(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	if err := Usagef("n=%d", 3); err.Error() != "n=3" || !errors.Is(&BadInputError{Err: base}, base) {
		t.Errorf("messages or unwrapping broken: %q", err)
	}
}
