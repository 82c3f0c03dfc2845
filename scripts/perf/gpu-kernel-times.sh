#!/usr/bin/env bash
# gpu-kernel-times.sh - per-kernel GPU times of one proof on a lent NVIDIA GPU, with Nsight
# Compute (ncu, one replay pass: the duration metric only; clocks left as they are). Run there from
# the repository root with .gpu carried (scripts/gpu-check.sh build):
#   bash scripts/perf/gpu-kernel-times.sh EXAMPLE-ARGS...    (default: --example keccakf --perms 1024)
# Writes $OUT/kernel-times-$LABEL.csv (raw ncu rows; LABEL defaults to "proof") and prints a table: per kernel, launches, total and
# mean µs, share of the total.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=.gpu/metalprove
args=("$@")
((${#args[@]})) || args=(--example keccakf --perms 1024)
"$bin" trace "${args[@]}" -o /tmp/profile.trace >/dev/null 2>&1 || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -n $ncu ]] || { echo "gpu-kernel-times: ncu not found" >&2; exit 1; }
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
	"$bin" --device cuda prove --trace /tmp/profile.trace --no-check -o /tmp/profile.proof ${PROVE_FLAGS:-} >"$out/kernel-times-${LABEL:-proof}.csv" 2>"$out/kernel-times-${LABEL:-proof}.log"
python3 - "$out/kernel-times-${LABEL:-proof}.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]
k, t = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
tot, cnt = collections.Counter(), collections.Counter()
for r in rows[hdr + 1:]:
    v = r[t].replace(",", "") if len(r) > max(k, t) else ""
    if not v.replace(".", "", 1).isdigit():
        continue
    name = r[k].split("(")[0].replace("mslk_", "")
    tot[name] += float(v) / 1000  # ns -> µs
    cnt[name] += 1
s = sum(tot.values())
print("%-32s %7s %12s %10s %6s" % ("kernel", "launches", "total µs", "mean µs", "share"))
for name, v in tot.most_common():
    print("%-32s %7d %12.1f %10.1f %5.1f%%" % (name, cnt[name], v, v / cnt[name], 100 * v / s))
print("%-32s %7d %12.1f" % ("all kernels", sum(cnt.values()), s))
PY
