#!/usr/bin/env bash
# host-isa-check.sh - the host device's kernel copies that `go test` does not pick, tested and
# timed. On x86-64 the kernels written with lanes are compiled once per instruction set (hd_glue.h:
# AVX-512, AVX2, the SSE2 baseline) and the runtime runs the best this CPU has; users' CPUs may
# run another copy, whose vector code GCC writes differently. For every copy below the best, with
# METALPROVE_HOST_ISA set (the copies of the build users get, no rebuild), the kernel tests
# against the Go reference (internal/kernels TestISAVariantsAgree compares the copies' outputs
# with each other in the plain go test). Timing a copy is not a check and is not done here:
# METALPROVE_HOST_ISA=x86-64-v3 metalprove bench --kernels --device host (docs/DEVELOPING.md).
# Then once more with the portable lane arithmetic that other hosts (aarch64: Apple Silicon)
# compile (HD_GENERIC_LANES): a build of its own. internal/gpu/host holds the transcript's
# one-state permutation (hd_p2_absorb), tested the same way.
# Elsewhere (aarch64, ...) there is one code path, which `go test` already ran: nothing to do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if [ "$(uname -m)" != x86_64 ]; then
	echo "host-isa-check: $(uname -m): one code path, tested by go test"
	exit 0
fi
pkgs=(./internal/kernels/ ./internal/kernels/dualtest/ ./internal/gpu/host/)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One cache for the host modules the kernel tests compile (fixed flags whatever the copy): the
# Makefile passes the one `unit` used.
export METALPROVE_HOST_CACHE=${METALPROVE_HOST_CACHE:-$tmp/modules}
"$GO" build -o "$tmp/metalprove" ./cmd/metalprove
# The copies this CPU runs, best first (the device's name says which one runs).
isas=()
for isa in x86-64-v4 x86-64-v3 x86-64; do
	if METALPROVE_HOST_ISA=$isa "$tmp/metalprove" bench --kernels --device host --size-log 4 --runs 1 >/dev/null 2>&1; then
		isas+=("$isa")
	fi
done
if [ ${#isas[@]} -eq 0 ]; then
	echo "host-isa-check: the host device opens with none of x86-64-v4, x86-64-v3, x86-64" >&2
	exit 1
fi
echo "host-isa-check: this CPU runs the copies ${isas[*]}; go test ran ${isas[0]}"
for isa in "${isas[@]:1}"; do
	echo "host-isa-check: kernel tests on the $isa copies"
	METALPROVE_HOST_ISA=$isa "$GO" test -count=1 -short "${pkgs[@]}"
done
echo "host-isa-check: portable lane arithmetic (as on aarch64)"
CGO_CXXFLAGS="-O3 -g0 -DHD_NO_CLONES -DHD_GENERIC_LANES" "$GO" test -count=1 -short "${pkgs[@]}"
