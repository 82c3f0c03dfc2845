//go:build unix

package resident

import "syscall"

// umask sets the process's file mode creation mask, returning the previous one.
func umask(m int) int { return syscall.Umask(m) }
