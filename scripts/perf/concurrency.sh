#!/usr/bin/env bash
# concurrency.sh - issue 13 target 3: proofs in flight. `bench --example keccakf --concurrency N
# --json` for N in 1 2 4 8 on one GPU (one JSON report per N), then, where the machine has two or
# more GPUs, the same spread over all of them; prints proofs/s per N and the speed-up over N = 1.
#   bash scripts/perf/concurrency.sh OUTDIR      (default: $OUT, else ./gpu-out)
# Settings (environment):
#   BIN     the binary (default .gpu/metalprove, as built by `scripts/gpu-check.sh build`)
#   DEVICE  --device (default cuda)          PRESET  --preset (default app-100bit)
#   PERMS   --perms (default 1024)           CONC    the N values (default "1 2 4 8")
#   WARMUP, RUNS  per worker (default 1 and 5: N × 5 timed proofs)
#   GPUS    the GPUs of the one-GPU series (default 0); MULTI  the GPUs of the spread series
#           (default: every visible GPU when there are two or more, e.g. "0,1"; "" or "none" skips)
#   EXTRA   more bench flags (e.g. --allow-insecure)
# Writes OUTDIR/conc-keccakf-<perms>-<preset>-gpu<GPUS>-n<N>.json and .log per run, and, for the
# spread series, ...-gpus<MULTI>-n<N>.json. The lent GPU machines have no Go, and need none here.
# A run that fails (out of memory: exit 5 says how many proofs fit) is reported and skipped; the
# exit status is then 1, after the other runs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-out}}
mkdir -p "$out"
bin=${BIN:-.gpu/metalprove}
device=${DEVICE:-cuda}
preset=${PRESET:-app-100bit}
perms=${PERMS:-1024}
[[ -x $bin ]] || { echo "concurrency: $bin is not an executable (build it: scripts/gpu-check.sh build, or set BIN)" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
status=0
summary() { # file label
	python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
g=", ".join("GPU %d: %d queues, %d proofs" % (u["ordinal"], u["queues"], u["proofs"]) for u in r.get("gpus") or [])
print("%-22s N=%-2d %8.2f proofs/s  latency median %8.2f ms  wall %9.1f ms  peak %d  identical %s  [%s]" % (
    sys.argv[2], r["concurrency"], r["proofs_per_second"], r["prove_ms"]["median"], r.get("timed_wall_ms", 0),
    r["peak_memory_bytes"], r["identical_proofs"], g))' "$1" "$2"
}
series() { # gpus tag
	local gpuflag=(--gpus "$1")
	[[ $device == cuda ]] || gpuflag=() # --gpus is CUDA's; the host device and Metal have one
	for n in ${CONC:-1 2 4 8}; do
		base="$out/conc-keccakf-$perms-$preset-$2-n$n"
		# shellcheck disable=SC2086 # EXTRA is a list of flags
		if "$bin" --device "$device" --log-format json bench --example keccakf --perms "$perms" --preset "$preset" \
			--concurrency "$n" "${gpuflag[@]}" --warmup "${WARMUP:-1}" --runs "${RUNS:-5}" ${EXTRA:-} --json >"$base.json" 2>"$base.log"; then
			summary "$base.json" "$2" || status=1
		else
			echo "concurrency: $2 N=$n FAILED (exit $?); last log lines:" >&2
			tail -3 "$base.log" >&2
			rm -f "$base.json"
			status=1
		fi
	done
}
one=${GPUS:-0}
series "$one" "gpu${one//,/-}"
multi=${MULTI-}
if [[ -z ${MULTI+x} ]]; then
	count=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
	if ((count >= 2)); then
		multi=$(seq -s, 0 $((count - 1)))
	fi
fi
if [[ $device == cuda && -n $multi && $multi != none ]]; then
	series "$multi" "gpus${multi//,/-}"
fi
exit $status
