#!/usr/bin/env bash
# fuzz-smoke.sh runs every fuzz target of the module for FUZZTIME each (default 50000x: a count of
# executions), minimising a new input for at most FUZZMINIMIZETIME (default 500x):
#   go test -run='^$' -fuzz='^Name$' -fuzztime=$FUZZTIME -fuzzminimizetime=$FUZZMINIMIZETIME ./pkg
# Counts, not durations: Go 1.26's fuzz coordinator can report a bare "context deadline exceeded"
# when a duration -fuzztime expires while a worker is busy (go.dev/issue/75804, fixed in Go 1.27),
# and it failed CI that way while a worker spent seconds minimising a large proof input (the default
# minimise budget is 60 s). A count has no deadline to race, and the bounded minimisation keeps a
# target's run short on a 2-core machine.
# Targets are discovered with `go test -list '^Fuzz' ./...`. A failing input is written by the
# fuzzer under the package's testdata/fuzz/ and the script fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-50000x}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-500x}

module=$("$GO" list -m)
# `go test -list` prints the matching names of a package, then "ok  <package> <time>".
listing=$("$GO" test -list '^Fuzz' ./...)
targets=()
names=()
while IFS= read -r line; do
	case $line in
	Fuzz*) names+=("$line") ;;
	ok* | "?"*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in "${names[@]}"; do targets+=("$pkg $n"); done
		names=()
		;;
	esac
done <<<"$listing"

if ((${#targets[@]} == 0)); then
	echo "fuzz-smoke: no fuzz targets"
	exit 0
fi
echo "fuzz-smoke: ${#targets[@]} targets, $FUZZTIME each (minimise $FUZZMINIMIZETIME)"
# One line per target; the fuzzer's progress lines are printed only when a target fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	if [[ $pkg == "$module" ]]; then dir=.; else dir=./${pkg#"$module"/}; fi
	start=$SECONDS
	if ! "$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" "$dir" >"$log" 2>&1; then
		cat "$log"
		echo "fuzz-smoke: $name in $dir FAILED (the failing input is under $dir/testdata/fuzz/$name)"
		exit 1
	fi
	echo "fuzz-smoke: $name in $dir ok ($((SECONDS - start)) s)"
done
