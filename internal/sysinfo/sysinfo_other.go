//go:build !linux && !darwin

package sysinfo

import "errors"

func readMemory() Memory { return Memory{} }

func diskFree(string) (uint64, error) { return 0, errors.New("free disk space unknown on this system") }
