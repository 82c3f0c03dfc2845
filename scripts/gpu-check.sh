#!/usr/bin/env bash
# gpu-check.sh - the CUDA run on a lent NVIDIA GPU, in two halves:
#   scripts/gpu-check.sh build   here (Go is here, not there): builds .gpu/metalprove (linux/amd64,
#                                cgo; needs only libc, libdl, libpthread at run time)
#   scripts/gpu-check.sh run     there, from the repository root with .gpu carried: prints the GPU,
#                                runs `selftest --device cuda` (every kernel against the pure-Go
#                                reference) and `bench --kernels --device cuda`, writing JSON and
#                                logs to $OUT (or ./gpu-out when OUT is unset).
# With the device tool: run `scripts/gpu-check.sh build`, then run `bash scripts/gpu-check.sh run`
# with carry [".gpu"]. Nothing here is needed by CI.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
build)
	mkdir -p .gpu
	GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
	"$GO" build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o .gpu/metalprove ./cmd/metalprove
	echo "built .gpu/metalprove ($(du -h .gpu/metalprove | cut -f1)); carry .gpu"
	;;
run)
	out=${OUT:-gpu-out}
	mkdir -p "$out"
	bin=.gpu/metalprove
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
	"$bin" version
	status=0
	"$bin" --device cuda selftest 2>&1 | tee "$out/selftest-cuda.txt" || status=$?
	"$bin" --device cuda --log-format json bench --kernels --json >"$out/bench-cuda.json" 2>"$out/bench-cuda.log" || status=$?
	"$bin" --device cuda bench --kernels
	exit $status
	;;
*)
	echo "usage: scripts/gpu-check.sh build|run" >&2
	exit 2
	;;
esac
