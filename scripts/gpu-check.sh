#!/usr/bin/env bash
# gpu-check.sh - the CUDA run on a lent NVIDIA GPU, in two halves:
#   scripts/gpu-check.sh build   here (Go is here, not there): builds .gpu/metalprove (linux/amd64,
#                                cgo; needs only libc, libdl, libpthread at run time)
#   scripts/gpu-check.sh run     there, from the repository root with .gpu carried: prints the GPU,
#                                runs `selftest --device cuda` (every kernel against the pure-Go
#                                reference, and the conformance suite: every proving stage beside
#                                cpuref, round by round, whole proofs byte for byte) and
#                                `bench --kernels --device cuda`, writing JSON and logs to $OUT (or
#                                ./gpu-out when OUT is unset).
#   scripts/gpu-check.sh bench   there, after run (or alone): the main job, `bench --example keccakf`
#                                on CUDA for PERMS (default "1024") under PRESETS (default
#                                "app-100bit openvm-keccakf"), JSON to $OUT; then one proof of
#                                128 permutations on CUDA and on the host device (16 cores there),
#                                whose proof files must be byte-identical and verify.
#   scripts/gpu-check.sh keys    there: OpenVM's keys (testdata) through keygen --openvm-vk and
#                                prove --key on CUDA, proof bytes compared with OpenVM's proofs;
#                                keccakf-1024 benched from the built-in AIR and from its key file.
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
bench)
	out=${OUT:-gpu-out}
	mkdir -p "$out"
	bin=.gpu/metalprove
	status=0
	for preset in ${PRESETS:-app-100bit openvm-keccakf}; do
		for perms in ${PERMS:-1024}; do
			"$bin" --device cuda --log-format json bench --example keccakf --perms "$perms" --preset "$preset" \
				--warmup 1 --runs "${RUNS:-5}" --json >"$out/bench-keccakf-$perms-$preset.json" 2>"$out/bench-keccakf-$perms-$preset.log" || status=$?
			python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print(sys.argv[2], sys.argv[3], "prove median %.2f ms" % r["prove_ms"]["median"])
for s in [r["load"], r["check"]]+r["stages"]:
    print("  %-12s %9.2f ms  disp %5d  syncs %4d  gap %6.2f ms  wait %6.2f ms  h2d %12d  d2h %10d  peak %12d" % (s["stage"], s["wall_ms"]["median"], s["dispatches"], s["syncs"], s["host_gap_ms"], s["sync_wait_ms"], s["bytes_to_device"], s["bytes_from_device"], s["peak_memory_bytes"]))
    for p in s.get("parts") or []:
        print("    %-12s %7.2f ms  disp %5d  syncs %4d  gap %6.2f ms  wait %6.2f ms" % (p["stage"], p["wall_ms"]["median"], p["dispatches"], p["syncs"], p["host_gap_ms"], p["sync_wait_ms"]))' \
				"$out/bench-keccakf-$perms-$preset.json" "$perms" "$preset" || status=1
		done
	done
	# An interaction-heavy statement (LogUp-GKR): interaction-pair at 2^20 sender rows.
	"$bin" --device cuda --log-format json bench --example interaction-pair --rows "${PAIR_ROWS:-1048576}" --preset app-100bit \
		--warmup 1 --runs 3 --json >"$out/bench-pair.json" 2>"$out/bench-pair.log" || status=$?
	python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print("interaction-pair prove median %.2f ms, device check %.2f ms" % (r["prove_ms"]["median"], r["check"]["wall_ms"]["median"]))
for s in r["stages"]:
    print("  %-12s %9.2f ms  disp %5d  syncs %4d  gap %6.2f ms  peak %12d" % (s["stage"], s["wall_ms"]["median"], s["dispatches"], s["syncs"], s["host_gap_ms"], s["peak_memory_bytes"]))' "$out/bench-pair.json" || status=1
	# The pre-proof check of keccakf-1024 on the device, as prove runs it.
	"$bin" trace --example keccakf --perms 1024 -o /tmp/k1024.trace >/dev/null 2>&1 || status=$?
	"$bin" --device cuda prove --trace /tmp/k1024.trace -o /tmp/k1024.proof --json >"$out/prove-k1024-cuda.json" 2>"$out/prove-k1024-cuda.log" || status=$?
	python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print("prove k1024 (one process):", ", ".join("%s %.2f ms" % (s["stage"], s["wall_ms"]) for s in r["stages"]))' "$out/prove-k1024-cuda.json" || status=1
	"$bin" trace --example keccakf --perms 128 -o /tmp/k128.trace >/dev/null 2>&1 || status=$?
	"$bin" --device cuda prove --trace /tmp/k128.trace -o "$out/k128-cuda.proof" --json >"$out/prove-k128-cuda.json" 2>"$out/prove-k128-cuda.log" || status=$?
	"$bin" --device host prove --trace /tmp/k128.trace -o /tmp/k128-host.proof >/dev/null 2>&1 || status=$?
	if cmp "$out/k128-cuda.proof" /tmp/k128-host.proof; then echo "k128: CUDA and host-device proofs byte-identical"; else status=1; fi
	"$bin" verify "$out/k128-cuda.proof" || status=$?
	rm -f "$out/k128-cuda.proof"
	exit $status
	;;
keys)
	# OpenVM's keys in, OpenVM's proofs out, on CUDA: keygen --openvm-vk of the keys in
	# internal/cmd/testdata/openvm-v2.0.1, prove --key of the same statements, proof export, and
	# the bytes compared with the proofs OpenVM's prover made; then keccakf-1024 benched from the
	# built-in AIR and from its key file (PERMS, default 1024), on one lease.
	out=${OUT:-gpu-out}
	mkdir -p "$out"
	bin=.gpu/metalprove
	vec=internal/cmd/testdata/openvm-v2.0.1
	tmp=$(mktemp -d)
	status=0
	"$bin" trace --example fibonacci --rows 8 -o "$tmp/fib.trace" >/dev/null || status=$?
	"$bin" trace --example keccakf --perms 16 -o "$tmp/k16.trace" >/dev/null || status=$?
	"$bin" keygen --openvm-vk "$vec/fib.vk.postcard" --names fibonacci --allow-insecure -o "$tmp/fib.pk" || status=$?
	"$bin" keygen --openvm-vk "$vec/keccakf.vk.postcard" --names keccakf -o "$tmp/keccakf.pk" || status=$?
	for fx in "fib fib fib.proof --allow-insecure" "keccakf k16 keccakf-16.proof"; do
		read -r key trace want extra <<<"$fx"
		"$bin" --device cuda prove --key "$tmp/$key.pk" --trace "$tmp/$trace.trace" -o "$tmp/$trace.proof" $extra --json >"$tmp/$trace.json" 2>>"$out/keys.log" || status=$?
		"$bin" proof export "$tmp/$trace.proof" -o "$tmp/$trace.bare" >/dev/null || status=$?
		if cmp "$tmp/$trace.bare" "$vec/$want"; then echo "$key: CUDA proof from OpenVM's key = OpenVM's $want"; else status=1; fi
		python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print("  backend", r["backend"], "stages:", ", ".join("%s %.2f ms" % (s["stage"], s["wall_ms"]) for s in r["stages"]))' "$tmp/$trace.json" || status=1
		"$bin" verify --key "$tmp/$key.pk" "$tmp/$trace.proof" $extra >/dev/null || status=$?
	done
	"$bin" keygen --example keccakf -o "$tmp/builtin.pk" || status=$?
	for perms in ${PERMS:-1024}; do
		for src in builtin key; do
			k=(--preset app-100bit)
			if [[ $src == key ]]; then k=(--key "$tmp/builtin.pk"); fi
			"$bin" --device cuda --log-format json bench --example keccakf --perms "$perms" "${k[@]}" \
				--warmup 1 --runs "${RUNS:-7}" --json >"$tmp/bench-$src.json" 2>>"$out/keys.log" || status=$?
			python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print(sys.argv[2], sys.argv[3], "prove median %.2f ms (min %.2f, max %.2f)" % (r["prove_ms"]["median"], r["prove_ms"]["min"], r["prove_ms"]["max"]),
      "; ".join("%s %.2f" % (s["stage"], s["wall_ms"]["median"]) for s in r["stages"]))' "$tmp/bench-$src.json" "$perms" "$src" || status=1
		done
	done
	rm -rf "$tmp"
	exit $status
	;;
*)
	echo "usage: scripts/gpu-check.sh build|run|bench|keys" >&2
	exit 2
	;;
esac
