#!/usr/bin/env bash
# build-metallib.sh (macOS only; `make` runs it): compiles each shaders/*.metal to AIR with
# `xcrun -sdk macosx metal -c` and links them with `xcrun -sdk macosx metallib` into
# internal/gpu/metal/metallib/metalprove.metallib, which the Metal backend embeds. Without it the
# backend compiles the embedded shaders.gen.metal at start-up instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-internal/gpu/metal/metallib/metalprove.metallib}

if [[ $(uname -s) != Darwin ]]; then
	echo "build-metallib: not macOS: skipped"
	exit 0
fi
if ! command -v xcrun >/dev/null 2>&1; then
	echo "build-metallib: xcrun not found: install Xcode command line tools (xcode-select --install)" >&2
	exit 1
fi
if ! xcrun -sdk macosx --find metal >/dev/null 2>&1; then
	echo "build-metallib: xcrun cannot find the Metal compiler: install Xcode (the command line tools" \
		"alone lack it; recent Xcode: xcodebuild -downloadComponent MetalToolchain)" >&2
	exit 1
fi

shopt -s nullglob
srcs=(shaders/*.metal)
if ((${#srcs[@]} == 0)); then
	rm -f "$OUT"
	echo "build-metallib: no shaders/*.metal: no metallib (the backend compiles its embedded source)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
airs=()
for src in "${srcs[@]}"; do
	air=$tmp/$(basename "$src" .metal).air
	xcrun -sdk macosx metal -c -I shaders/include -mmacosx-version-min=13.0 -o "$air" "$src"
	airs+=("$air")
done
mkdir -p "$(dirname "$OUT")"
xcrun -sdk macosx metallib -o "$tmp/out.metallib" "${airs[@]}"
mv "$tmp/out.metallib" "$OUT"
echo "build-metallib: $OUT from ${#srcs[@]} files"
