#!/usr/bin/env bash
# host-isa-check.sh - the host device's kernel tests once per x86-64 code path. `go test` runs the
# kernel copy that this CPU picks (AVX-512 here; internal/kernels TestISAVariantsAgree compares
# every copy the CPU can run with the baseline one); CI machines and users' CPUs may pick the AVX2
# or the baseline copy, whose vector code GCC writes differently. This builds the host package
# without clones (HD_NO_CLONES) for the baseline (SSE2) and, where the CPU has AVX2, for
# x86-64-v3, and runs the kernel tests against the Go reference on each; then once more with the
# portable lane arithmetic that other hosts (aarch64: Apple Silicon) compile (HD_GENERIC_LANES).
# internal/gpu/host holds the transcript's one-state permutation (hd_p2_absorb), tested the same way.
# Elsewhere (aarch64, ...) there is one code path, which `go test` already ran: nothing to do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if [ "$(uname -m)" != x86_64 ]; then
	echo "host-isa-check: $(uname -m): one code path, tested by go test"
	exit 0
fi
pkgs=(./internal/kernels/ ./internal/kernels/dualtest/ ./internal/gpu/host/)
isas=(x86-64)
grep -qw avx2 /proc/cpuinfo 2>/dev/null && isas+=(x86-64-v3)
for isa in "${isas[@]}"; do
	echo "host-isa-check: -march=$isa"
	CGO_CXXFLAGS="-O3 -g0 -DHD_NO_CLONES -march=$isa" "$GO" test -count=1 -short "${pkgs[@]}"
done
echo "host-isa-check: portable lane arithmetic (as on aarch64)"
CGO_CXXFLAGS="-O3 -g0 -DHD_NO_CLONES -DHD_GENERIC_LANES" "$GO" test -count=1 -short "${pkgs[@]}"
