#!/usr/bin/env bash
# first-proof.sh - on a lent GPU, from the repository root with .gpu carried: two one-shot
# `prove --trace` processes of keccakf-1024 with an empty kernel cache (XDG_CACHE_HOME in a new
# temporary directory), timed whole, with the log records of the NVRTC compiles; then a bench of
# the same statement. Measures what a user's first proof costs (issue 23). BIN: the binary
# (default .gpu/metalprove; a `make cuda` one has the main module precompiled).
set -u
bin=${BIN:-.gpu/metalprove}
export XDG_CACHE_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$bin" trace --example keccakf --perms 1024 -o /tmp/k1024.trace >/dev/null 2>&1
for i in 1 2; do
	s=$(date +%s.%N)
	"$bin" --device cuda prove --trace /tmp/k1024.trace -o /tmp/k1024.proof --json >/tmp/p$i.json 2>/tmp/p$i.log
	e=$(date +%s.%N)
	echo "process $i: $(python3 -c "print('%.2f s' % ($e-$s))")"
	grep -E "compil" /tmp/p$i.log | cut -c1-400
done
python3 -c 'import json
for i in (1, 2):
    r = json.load(open("/tmp/p%d.json" % i))
    print("process %d: times_ms" % i, ", ".join("%s %.2f" % kv for kv in r["times_ms"].items()))
    for k in r.get("constraint_kernels") or []:
        print("  constraint kernels:", k)'
"$bin" --device cuda bench --example keccakf --perms 1024 --preset app-100bit --runs 7 --json 2>/dev/null |
	python3 -c 'import json,sys; r=json.load(sys.stdin); print("bench k1024 median %.2f ms (min %.2f max %.2f)" % (r["prove_ms"]["median"], r["prove_ms"]["min"], r["prove_ms"]["max"]), "; ".join("%s %.2f" % (s["stage"], s["wall_ms"]["median"]) for s in r["stages"]))'
