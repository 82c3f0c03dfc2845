//go:build !linux && !darwin

package sysinfo

import (
	"errors"
	"time"
)

func readMemory() Memory { return Memory{} }

func diskFree(string) (uint64, error) { return 0, errors.New("free disk space unknown on this system") }

// processStart: not read on this system.
func processStart() (time.Time, bool) { return time.Time{}, false }
