#!/usr/bin/env bash
# ntt-profile.sh - on the device machine (repository root, .gpu carried): profile the two
# ntt_pass launches of a 2^22×16 forward NTT with Nsight Compute, print ptxas resource usage of
# the CUDA kernels, check the NTT kernels and bench. Usage (device tool, carry [".gpu"]):
#   bash scripts/perf/ntt-profile.sh [bin ...]    (default .gpu/metalprove)
# Writes to $OUT (or ./gpu-out): ptxas.txt, ncu-<bin>.txt, bench-<bin>.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(.gpu/metalprove)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${ncu:-absent}"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${PTXAS:-1}" = 1 ]; then
	"$nvcc" -arch=sm_90 -cubin -std=c++17 -Xptxas -v -o /tmp/k.cubin -x cu internal/gpu/cuda/kernels.gen.cu 2>&1 |
		grep -A2 "ntt_pass" >"$out/ptxas.txt" || true
	cat "$out/ptxas.txt"
fi
for bin in "${bins[@]}"; do
	tag=$(basename "$bin")
	echo "=== $bin"
	"$bin" --device cuda selftest --kernels --run ntt 2>&1 | tail -5
	"$bin" --device cuda bench --kernels --size-log 20 --runs 7 2>&1 | tee "$out/bench-$tag.txt" | grep -i "copy\|ntt"
	if [ -n "${ncu:-}" ] && [ "${NCU:-1}" = 1 ]; then
		timeout 300 "$ncu" --clock-control none --kernel-name regex:mslk_ntt_pass --launch-count 2 \
			--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
			--section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
			--section ComputeWorkloadAnalysis --section SourceCounters \
			--metrics dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum \
			"$bin" --device cuda bench --kernels --size-log 22 --runs 1 >"$out/ncu-$tag.txt" 2>&1
		grep -v "^==PROF==" "$out/ncu-$tag.txt" | grep -n "mslk_ntt_pass\|Duration\|Throughput\|Registers\|Achieved Occupancy\|Theoretical Occupancy\|Block Limit\|Stall\|bank\|dram__\|lts__\|Warp Cycles\|Eligible\|Issued Warp\|No Eligible" | head -120
	fi
done
