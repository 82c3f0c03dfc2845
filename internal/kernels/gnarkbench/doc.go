// Package gnarkbench compares the host device (internal/gpu/host running the kernels of
// internal/kernels) and the pure-Go references (internal/backend/cpuref, internal/poseidon2) with
// gnark-crypto's Go BabyBear code, in the same `go test -bench` run. It holds only tests and
// benchmarks, so gnark-crypto is a test-only dependency: nothing of it links into the binaries.
//
//	go test -run XXX -bench . ./internal/kernels/gnarkbench
//	GNARKBENCH=1 go test -run Summary -v ./internal/kernels/gnarkbench   # ratio table
//
// NTT: gnark's radix-2 FFT (DIF, then the bit-reversal permutation, so that both sides pay for a
// natural-order-in, natural-order-out transform) against kernels.NTT on the host device and
// cpuref.DFT, for 2^16 and 2^20 elements, one column and 16 columns.
//
// Poseidon2: gnark's BabyBear width-16 permutation (8 full + 13 partial rounds, like ours, but
// its round constants and internal diagonal differ from ours: a cost comparison only, outputs are
// not compared) over 2^16 states against kernels.Poseidon2.Permute on the host device and
// poseidon2.Permute. Batched Go loops (gnark and ours) run on GOMAXPROCS goroutines, as the host
// device runs on all cores.
package gnarkbench
