#!/usr/bin/env bash
# build-metallib.sh (macOS only; `make` runs it): compiles internal/gpu/metal/shaders.gen.metal (the
# shaders/<stage>/*.metal kernels with their includes inlined and #line directives, so diagnostics name the
# original files; the very text the Metal backend compiles at start-up when it has no usable
# metallib) with `xcrun -sdk macosx metal`, and links it with `xcrun -sdk macosx metallib` into
# internal/gpu/metal/metallib/metalprove.metallib, which the backend embeds. Beside it goes the
# stamp metalprove.metallib.sha256: the SHA-256 of the source it was built from; the backend uses
# the metallib only when the stamp matches its embedded source (a stale one is logged and skipped).
#
# The Metal compiler is probed by running it (`xcrun -sdk macosx metal --version`): since Xcode 26
# the Metal Toolchain is a separate component, and `xcrun --find metal` prints a path even when it
# is missing. Without a working compiler (or without xcrun) the script removes any old metallib,
# warns and succeeds: the backend compiles its embedded source at start-up, which needs no
# toolchain. METALPROVE_REQUIRE_METALLIB=1 (the macOS CI workflow sets it) makes that a failure.
# A failing compilation always fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-internal/gpu/metal/metallib/metalprove.metallib}
SRC=internal/gpu/metal/shaders.gen.metal
# The MSL version, pinned: the backend's source fallback compiles with the same
# (MTLLanguageVersion2_4 in internal/gpu/metal/bridge.m; a Go test checks that the two agree).
MSL_STD=macos-metal2.4

if [[ $(uname -s) != Darwin ]]; then
	echo "build-metallib: not macOS: skipped"
	exit 0
fi

# Whatever happens next, no metallib from an earlier build survives unless rebuilt here.
rm -f "$OUT" "$OUT.sha256"

no_metallib() {
	if [[ ${METALPROVE_REQUIRE_METALLIB:-0} == 1 ]]; then
		echo "build-metallib: error: $1 (METALPROVE_REQUIRE_METALLIB=1)" >&2
		exit 1
	fi
	echo "build-metallib: warning: $1" >&2
	echo "build-metallib: warning: building without a metallib; the Metal backend compiles its embedded source at start-up" >&2
	exit 0
}

if ! command -v xcrun >/dev/null 2>&1; then
	no_metallib "xcrun not found: install Xcode (xcode-select --install gives only the command line tools, without the Metal compiler)"
fi
if ! version=$(xcrun -sdk macosx metal --version 2>&1); then
	no_metallib "the Metal compiler does not run ('xcrun -sdk macosx metal --version' said: $(head -n 3 <<<"$version" | tr '\n' ' ')); install Xcode, and with Xcode 26 or later the Metal Toolchain: xcodebuild -downloadComponent MetalToolchain"
fi
echo "build-metallib: $(head -n 1 <<<"$version")"

sha256() {
	if command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" | cut -d ' ' -f 1
	else
		sha256sum "$1" | cut -d ' ' -f 1
	fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hash=$(sha256 "$SRC")
xcrun -sdk macosx metal -c -std="$MSL_STD" -mmacosx-version-min=13.0 -o "$tmp/metalprove.air" "$SRC"
xcrun -sdk macosx metallib -o "$tmp/out.metallib" "$tmp/metalprove.air"
# The source must not have changed while it was compiled: the stamp would lie.
[[ $(sha256 "$SRC") == "$hash" ]] || { echo "build-metallib: $SRC changed during the build" >&2; exit 1; }
printf '%s  %s\n' "$hash" "$(basename "$SRC")" >"$tmp/out.sha256"
mkdir -p "$(dirname "$OUT")"
mv "$tmp/out.metallib" "$OUT"
mv "$tmp/out.sha256" "$OUT.sha256"
echo "build-metallib: $OUT from $SRC (-std=$MSL_STD, SHA-256 $hash)"
