//go:build !amd64

package poseidon2
