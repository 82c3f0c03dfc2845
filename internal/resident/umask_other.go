//go:build !unix

package resident

// umask does nothing where there is no file mode creation mask.
func umask(m int) int { return m }
