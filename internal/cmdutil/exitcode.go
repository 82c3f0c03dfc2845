package cmdutil

import (
	"errors"
	"fmt"
)

// ExitCode is the process exit status. These values are documented in README.md; change both
// together.
type ExitCode int

const (
	// ExitOK: the command did what was asked.
	ExitOK ExitCode = 0
	// ExitError: an unexpected failure (I/O error, internal error).
	ExitError ExitCode = 1
	// ExitUsage: a bad flag, argument, config file key or parameter value.
	ExitUsage ExitCode = 2
	// ExitBadInput: an input file is malformed (trace, proof): truncated, wrong magic, bad value.
	ExitBadInput ExitCode = 3
	// ExitCheckFailed: a check ran and did not pass: a selftest check failed, or a proof was
	// rejected by the verifier.
	ExitCheckFailed ExitCode = 4
	// ExitDevice: the requested device is unavailable or failed (driver missing, out of device
	// memory).
	ExitDevice ExitCode = 5
	// ExitInterrupted: the command was interrupted (SIGINT, Ctrl-C, or SIGTERM) and stopped,
	// leaving no output file behind: 128 + SIGINT, as shells report a process killed by it.
	ExitInterrupted ExitCode = 130
)

// ErrInterrupted is the error of a command stopped by SIGINT or SIGTERM; it maps to
// ExitInterrupted.
var ErrInterrupted = errors.New("interrupted")

// UsageError marks a mistake in how the command was called; it maps to ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// BadInputError marks a malformed input file; it maps to ExitBadInput.
type BadInputError struct{ Err error }

func (e *BadInputError) Error() string { return e.Err.Error() }
func (e *BadInputError) Unwrap() error { return e.Err }

// CheckFailedError marks a check that ran and failed; it maps to ExitCheckFailed.
type CheckFailedError struct{ Err error }

func (e *CheckFailedError) Error() string { return e.Err.Error() }
func (e *CheckFailedError) Unwrap() error { return e.Err }

// DeviceError marks an unavailable or failing device; it maps to ExitDevice.
type DeviceError struct{ Err error }

func (e *DeviceError) Error() string { return e.Err.Error() }
func (e *DeviceError) Unwrap() error { return e.Err }

// ExitCodeFor maps an error returned by a command to the process exit code.
func ExitCodeFor(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var (
		usage  *UsageError
		bad    *BadInputError
		failed *CheckFailedError
		device *DeviceError
	)
	switch {
	case errors.Is(err, ErrInterrupted):
		return ExitInterrupted
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &bad):
		return ExitBadInput
	case errors.As(err, &failed):
		return ExitCheckFailed
	case errors.As(err, &device):
		return ExitDevice
	}
	return ExitError
}
