#!/usr/bin/env bash
# from-file.sh - issue 13 target 1, second half: keccakf proved from its trace file, as a user
# runs it: RUNS one-shot `prove --trace FILE --json` processes (each reads the file, uploads the
# trace, checks it, proves and writes the proof), then the medians of their times_ms, of
# read + load + the proof's stages (the target's "read, upload, prove"), and of each process's
# wall time (start, keygen, driver start and exit included).
#   bash scripts/perf/from-file.sh [OUTDIR]      (default: $OUT, else ./gpu-out)
# Settings (environment): BIN (default .gpu/metalprove), DEVICE (default cuda), PERMS (default
# 1024), PRESET (default app-100bit), RUNS (default 5), TRACE (default /tmp/keccakf-PERMS.trace,
# written first when absent). Writes OUTDIR/from-file-PERMS-PRESET.json (every run's report and
# wall time) and prints the medians.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-out}}
mkdir -p "$out"
bin=${BIN:-.gpu/metalprove}
device=${DEVICE:-cuda}
perms=${PERMS:-1024}
preset=${PRESET:-app-100bit}
runs=${RUNS:-5}
trace=${TRACE:-/tmp/keccakf-$perms.trace}
[[ -x $bin ]] || { echo "from-file: $bin is not an executable (build it: scripts/gpu-check.sh build, or set BIN)" >&2; exit 2; }
if [[ ! -s $trace ]]; then
	"$bin" trace --example keccakf --perms "$perms" -o "$trace" >/dev/null 2>&1 || { echo "from-file: writing $trace failed" >&2; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
	t0=$(date +%s%N)
	"$bin" --device "$device" prove --trace "$trace" --preset "$preset" -o "$tmp/proof" --json >"$tmp/run-$i.json" 2>"$tmp/run-$i.log" ||
		{ echo "from-file: run $i failed:" >&2; tail -5 "$tmp/run-$i.log" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000)) >"$tmp/wall-$i"
done
python3 - "$tmp" "$runs" "$out/from-file-$perms-$preset.json" "$perms" "$preset" <<'EOF'
import json, statistics, sys
tmp, runs, dst, perms, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
reps = []
for i in range(1, runs + 1):
    r = json.load(open(f"{tmp}/run-{i}.json"))
    r["process_wall_ms"] = int(open(f"{tmp}/wall-{i}").read()) / 1000
    reps.append(r)
json.dump({"perms": int(perms), "preset": preset, "runs": reps}, open(dst, "w"), indent=1)
stages = ["commit", "gkr", "constraints", "openings"]
def med(f):
    return statistics.median(f(r) for r in reps)
print(f"keccakf-{perms} {preset}, {runs} one-shot prove processes ({reps[0]['backend']})")
for k in ["read", "keygen", "load", "check", *stages, "write"]:
    print(f"  {k:<12} {med(lambda r: r['times_ms'].get(k, 0)):9.2f} ms")
print(f"  {'proof':<12} {med(lambda r: sum(r['times_ms'][s] for s in stages)):9.2f} ms  (the stages)")
print(f"  read + load + proof {med(lambda r: r['times_ms']['read'] + r['times_ms']['load'] + sum(r['times_ms'][s] for s in stages)):9.2f} ms")
print(f"  total_ms     {med(lambda r: r['total_ms']):9.2f} ms  (the command's own total)")
print(f"  process wall {med(lambda r: r['process_wall_ms']):9.2f} ms")
EOF
