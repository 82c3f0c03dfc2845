#!/usr/bin/env bash
# fuzz-smoke.sh runs every fuzz target of the module for FUZZTIME (default 5s) each:
#   go test -run='^$' -fuzz='^Name$' -fuzztime=$FUZZTIME ./pkg
# Targets are discovered with `go test -list '^Fuzz' ./...`. A failing input is written by the
# fuzzer under the package's testdata/fuzz/ and the script fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

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
echo "fuzz-smoke: ${#targets[@]} targets, $FUZZTIME each"
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	if [[ $pkg == "$module" ]]; then dir=.; else dir=./${pkg#"$module"/}; fi
	echo "fuzz-smoke: $name in $dir"
	"$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$dir"
done
