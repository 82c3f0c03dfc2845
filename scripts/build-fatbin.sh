#!/usr/bin/env bash
# build-fatbin.sh [ARCH...] - precompiles the CUDA kernels with nvcc (the CUDA toolkit's compiler)
# for `make cuda`: internal/gpu/cuda/kernels.fatbin holds a cubin per architecture (default: 80 86
# 89 90, i.e. A100, RTX 30xx, L4/RTX 40xx, H100/H200) plus PTX of the newest for later GPUs, and
# kernels.fatbin.sha256 the SHA-256 of the kernels.gen.cu it came from. A binary built with
# `-tags cudafatbin` embeds both and loads the fatbin instead of running NVRTC, when the source
# hashes agree and the driver accepts an image for the GPU. Needs bash, nvcc and sha256sum only
# (no Go), so it also runs on a GPU machine without Go. Both outputs are ignored by git.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
	echo "build-fatbin: nvcc not found (install the CUDA toolkit or set NVCC); without it the kernels are compiled by NVRTC at first use" >&2
	exit 1
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(80 86 89 90)
gencode=()
for a in "${archs[@]}"; do
	case "$a" in
	[0-9][0-9] | [0-9][0-9][0-9]) gencode+=(-gencode "arch=compute_$a,code=sm_$a") ;;
	*) echo "build-fatbin: architecture '$a' is not a number like 90" >&2; exit 2 ;;
	esac
done
last=${archs[${#archs[@]}-1]}
gencode+=(-gencode "arch=compute_$last,code=compute_$last")
src=internal/gpu/cuda/kernels.gen.cu
out=internal/gpu/cuda/kernels.fatbin
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# The same language options as NVRTC's (-std=c++17); every device function in the generated
# source is declared __device__, so NVRTC's -default-device is not needed.
"$NVCC" -fatbin -std=c++17 -O3 "${gencode[@]}" -o "$tmp" "$src"
mv "$tmp" "$out"
sha256sum "$src" | cut -d' ' -f1 >"$out.sha256"
echo "build-fatbin: $out ($(wc -c <"$out") bytes) for sm_${archs[*]} + compute_$last"
