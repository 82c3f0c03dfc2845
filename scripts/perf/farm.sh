#!/usr/bin/env bash
# farm.sh - issue 26: proofs per second of the proving farm (NATS JetStream) for 1, 2 and 4
# workers. For each worker count: a fresh JetStream server on 127.0.0.1 (scripts/farmserver, the
# nats-server Go module), JOBS jobs submitted (distinct traces of the example, one proving key),
# then the workers started (one process each) and timed until `jobs --wait` sees every job done;
# proofs/s = JOBS / that wall time, which includes each worker's start (device open, key fetch).
# Every job must end done: the proofs are then fetched and the first one verified.
#   bash scripts/perf/farm.sh OUTDIR      (default: $OUT, else ./farm-out)
# Settings (environment):
#   BIN     metalprove (default: built into OUTDIR with go build)
#   SERVER  farmserver (default: built into OUTDIR with go build)
#   DEVICE  --device of the workers (default host)
#   EXAMPLE keccakf (PERMS, default 2) or a test AIR (ROWS, default 16; preset test)
#   JOBS    jobs per run (default 12)        WORKERS  worker counts (default "1 2 4")
#   CONC    --concurrency of each worker (default 1)
#   GPUS    with DEVICE=cuda: the GPUs, worker i on GPUS[i mod count] (default "0")
#   PORT    server port (default 14222)
# Writes OUTDIR/farm-<example>-w<N>.log (worker logs) and prints one line per worker count.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-farm-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -z ${BIN:-} ]]; then
	go build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o "$out/metalprove" ./cmd/metalprove
	bin=$out/metalprove
else
	bin=$BIN
fi
if [[ -z ${SERVER:-} ]]; then
	go build -o "$out/farmserver" ./scripts/farmserver
	server=$out/farmserver
else
	server=$SERVER
fi
device=${DEVICE:-host}
example=${EXAMPLE:-keccakf}
jobs=${JOBS:-12}
conc=${CONC:-1}
port=${PORT:-14222}
url=nats://127.0.0.1:$port
read -r -a gpus <<<"${GPUS:-0}"
IFS=, read -r -a gpus <<<"${gpus[*]}"
work=$(mktemp -d)
srv_pid=
worker_pids=()
cleanup() {
	((${#worker_pids[@]})) && kill "${worker_pids[@]}" 2>/dev/null || true
	[[ -n $srv_pid ]] && kill "$srv_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mp() { "$bin" --log-level warn "$@"; }

# The key and JOBS distinct traces.
insecure=()
if [[ $example == keccakf ]]; then
	size=(--perms "${PERMS:-2}")
	mp keygen --example keccakf -o "$work/key.pk" >/dev/null
else
	size=(--rows "${ROWS:-16}")
	insecure=(--allow-insecure)
	mp keygen --example "$example" "${size[@]}" --preset test --allow-insecure -o "$work/key.pk" >/dev/null
fi
traces=()
for i in $(seq 1 "$jobs"); do
	seed=()
	[[ $example == keccakf || $example == interaction-pair ]] && seed=(--seed "$i")
	mp trace --example "$example" "${size[@]}" "${seed[@]}" -o "$work/t$i.trace"
	traces+=("$work/t$i.trace")
done

echo "farm.sh: $(uname -n), $(nproc) CPUs, device $device, example $example ${size[*]}, $jobs jobs a run, --concurrency $conc"
echo "farm.sh: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $("$bin" version | head -1)"
# The baseline: one prove process of the first trace, as a farm worker proves it.
t0=$(date +%s.%N)
mp --device "$device" prove --key "$work/key.pk" "${insecure[@]}" --trace "${traces[0]}" -o "$work/direct.proof" >/dev/null
t1=$(date +%s.%N)
awk -v t0="$t0" -v t1="$t1" -v load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)" 'BEGIN {
	printf "direct prove (one process): %.2f s, %.2f proofs/s (load average %s)\n", t1 - t0, 1 / (t1 - t0), load }'
base=
for n in ${WORKERS:-1 2 4}; do
	rm -rf "$work/js"
	"$server" -dir "$work/js" -port "$port" >"$work/url" &
	srv_pid=$!
	for _ in $(seq 100); do [[ -s $work/url ]] && break; kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
	[[ -s $work/url ]] || { echo "farm.sh: the server did not start on port $port (PORT= to choose another)" >&2; exit 1; }
	mp submit --nats "$url" --key "$work/key.pk" "${insecure[@]}" "${traces[@]}" >"$work/ids"
	log=$out/farm-$example-w$n.log
	: >"$log"
	worker_pids=()
	t0=$(date +%s.%N)
	for w in $(seq 0 $((n - 1))); do
		gpuflag=()
		[[ $device == cuda ]] && gpuflag=(--gpus "${gpus[$((w % ${#gpus[@]}))]}")
		"$bin" --device "$device" --log-level warn worker --nats "$url" --name "w$w" --concurrency "$conc" "${gpuflag[@]}" >>"$log" 2>&1 &
		worker_pids+=($!)
	done
	if ! mp jobs --nats "$url" --wait >"$work/jobs.txt"; then
		echo "farm.sh: $n workers: jobs failed:" >&2
		cat "$work/jobs.txt" >&2
		exit 1
	fi
	t1=$(date +%s.%N)
	kill -TERM "${worker_pids[@]}" 2>/dev/null || true
	wait "${worker_pids[@]}" 2>/dev/null || true
	worker_pids=()
	mkdir -p "$work/proofs"
	mp fetch --nats "$url" -o "$work/proofs" $(cat "$work/ids") >/dev/null
	mp verify --key "$work/key.pk" "${insecure[@]}" "$work/proofs/$(head -1 "$work/ids").proof" >/dev/null
	kill "$srv_pid"
	wait "$srv_pid" 2>/dev/null || true
	srv_pid=
	load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)
	awk -v n="$n" -v jobs="$jobs" -v t0="$t0" -v t1="$t1" -v base="$base" -v load="$load" 'BEGIN {
		wall = t1 - t0; rate = jobs / wall
		line = sprintf("workers %d: %d jobs in %.2f s, %.2f proofs/s", n, jobs, wall, rate)
		if (base != "") line = line sprintf(", %.2fx one worker", rate / base)
		print line sprintf(" (load average %s)", load) }'
	[[ -n $base ]] || base=$(awk -v jobs="$jobs" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.6f", jobs / (t1 - t0) }')
done
