#!/usr/bin/env bash
# scaling.sh - issue 13 target 2: `bench --example keccakf --json` at several permutation counts
# (one JSON report per size), then the plot of time per permutation by stage against the size
# (scripts/plotscaling).
#   bash scripts/perf/scaling.sh [OUTDIR]      (default: $OUT, else ./gpu-out)
# Settings (environment):
#   BIN     the binary (default .gpu/metalprove, as built by `scripts/gpu-check.sh build`)
#   DEVICE  --device (default cuda)          PRESET  --preset (default app-100bit)
#   PERMS   the sizes (default "256 1024 4096 16384")
#   WARMUP, RUNS  per size (default 1 and 5)  EXTRA  more bench flags (e.g. --allow-insecure)
#   PLOTFLAGS  flags of plotscaling (e.g. -logy)
# Writes OUTDIR/bench-keccakf-<perms>-<preset>.json and .log per size, then
# OUTDIR/scaling-<device>-<preset>.png when Go is on this machine. The lent GPU machines have no
# Go: there the script stops after the JSON files (carry .gpu; the files come back under $OUT),
# and the plot is made here from them:
#   go run ./scripts/plotscaling -o docs/scaling-cuda-app-100bit.png <returned dir>/bench-keccakf-*-app-100bit.json
# A size that fails (out of memory, too large for the parameters) is reported and skipped; the
# exit status is then 1, after the other sizes and the plot.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-out}}
mkdir -p "$out"
bin=${BIN:-.gpu/metalprove}
device=${DEVICE:-cuda}
preset=${PRESET:-app-100bit}
[[ -x $bin ]] || { echo "scaling: $bin is not an executable (build it: scripts/gpu-check.sh build, or set BIN)" >&2; exit 2; }
status=0
files=()
for perms in ${PERMS:-256 1024 4096 16384}; do
	base="$out/bench-keccakf-$perms-$preset"
	# shellcheck disable=SC2086 # EXTRA is a list of flags
	if "$bin" --device "$device" --log-format json bench --example keccakf --perms "$perms" --preset "$preset" \
		--warmup "${WARMUP:-1}" --runs "${RUNS:-5}" ${EXTRA:-} --json >"$base.json" 2>"$base.log"; then
		files+=("$base.json")
		echo "scaling: $perms permutations: $base.json"
	else
		echo "scaling: $perms permutations FAILED (exit $?); last log lines:" >&2
		tail -3 "$base.log" >&2
		rm -f "$base.json"
		status=1
	fi
done
((${#files[@]})) || exit 1
go=$(command -v go || { [[ -x /usr/local/go/bin/go ]] && echo /usr/local/go/bin/go; })
if [[ -n $go ]]; then
	# shellcheck disable=SC2086 # PLOTFLAGS is a list of flags
	"$go" run ./scripts/plotscaling ${PLOTFLAGS:-} -o "$out/scaling-$device-$preset.png" "${files[@]}" || status=1
else
	echo "scaling: no Go here: make the plot where Go is, from the JSON files:" >&2
	echo "  go run ./scripts/plotscaling -o scaling-$device-$preset.png ${files[*]}" >&2
fi
exit $status
