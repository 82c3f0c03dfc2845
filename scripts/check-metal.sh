#!/usr/bin/env bash
# check-metal.sh checks the Metal backend (internal/gpu/metal) on a machine without Xcode:
#   1. bridge.m (Objective-C, ARC) passes clang -fsyntax-only -Werror -Wall for arm64 macOS against
#      the stub headers in internal/gpu/metal/stubs (Foundation/Metal/dispatch/libc subset);
#   2. metal_darwin.go and its test type-check for darwin/arm64 with cgo: `go tool cgo` runs with
#      that clang (so the cgo preamble and bridge.h are compiled against the stubs and calls are
#      checked against bridge.h's prototypes), then go/types checks the Go (cgocheck.go);
#   3. `go vet` for darwin without cgo (metal.go, metal_other.go) and for this OS;
#   4. the shipped cgo flags of every package, as `go list` computes them for darwin/arm64,
#      darwin/amd64 and this OS: no -Werror (kept in these checks only) and no -lstdc++ on darwin
#      (macOS SDKs ship only libc++: "library not found for -lstdc++");
#   5. go test of internal/gpu/metal: on Linux its portable tests (policy_test.go), on macOS all.
# Not checked here: the real SDK's declarations, linking, and anything at run time (the macOS CI
# workflow builds and tests on Apple Silicon). On macOS step 1 uses the real SDK and step 2 is
# left to the real build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
PKG=internal/gpu/metal
STUBS=$PWD/$PKG/stubs

# cgo_flags_check GOOS GOARCH: step 4 for one platform (go list reads the #cgo lines; it builds
# nothing, so it runs on any OS).
cgo_flags_check() {
	local goos=$1 goarch=$2 lines bad
	lines=$(GOOS=$goos GOARCH=$goarch CGO_ENABLED=1 "$GO" list -f \
		'{{.ImportPath}}: {{join .CgoCFLAGS " "}} {{join .CgoCPPFLAGS " "}} {{join .CgoCXXFLAGS " "}} {{join .CgoLDFLAGS " "}}' ./...)
	bad=$(grep -E -- '(^| )-Werror' <<<"$lines" || true)
	if [[ -n $bad ]]; then
		echo "check-metal: shipped cgo flags for $goos/$goarch contain -Werror:" >&2
		echo "$bad" >&2
		exit 1
	fi
	if [[ $goos == darwin ]]; then
		bad=$(grep -E -- '(^| )-lstdc\+\+( |$)' <<<"$lines" || true)
		if [[ -n $bad ]]; then
			echo "check-metal: cgo flags for darwin/$goarch link -lstdc++, which macOS SDKs do not ship (use -lc++):" >&2
			echo "$bad" >&2
			exit 1
		fi
		grep -q -- '^github.com/metalprove/metalprove/internal/gpu/host: .*-lc++' <<<"$lines" ||
			{ echo "check-metal: internal/gpu/host does not link -lc++ for darwin/$goarch" >&2; exit 1; }
	fi
}
for p in darwin/arm64 darwin/amd64 "$("$GO" env GOOS)/$("$GO" env GOARCH)"; do
	cgo_flags_check "${p%/*}" "${p#*/}"
done
echo "check-metal: shipped cgo flags ok (no -Werror; darwin links libc++, not libstdc++)"

if [[ $(uname -s) == Darwin ]]; then
	command -v xcrun >/dev/null 2>&1 || { echo "check-metal: xcrun not found: install Xcode command line tools (xcode-select --install)" >&2; exit 1; }
	xcrun clang -mmacosx-version-min=12.0 -x objective-c -fobjc-arc -Werror -Wall -Wunguarded-availability -fsyntax-only "$PKG/bridge.m"
	echo "check-metal: bridge.m ok (macOS SDK)"
	GOOS=darwin CGO_ENABLED=0 "$GO" vet "./$PKG/"
	"$GO" vet "./$PKG/" ./internal/gpu/
	"$GO" test -count=1 "./$PKG/"
	echo "check-metal: ok"
	exit 0
fi
source scripts/clang.sh

TARGET=(--target=arm64-apple-macos12 -nostdlibinc -isystem "$STUBS")

"$CLANG" "${TARGET[@]}" -x objective-c -fobjc-arc -Werror -Wall -Wextra -Wunguarded-availability -fsyntax-only "$PKG/bridge.m"
echo "check-metal: bridge.m ok ($("$CLANG" --version | head -n1), stub headers)"

CC="$CLANG ${TARGET[*]}" "$GO" run "./$PKG/cgocheck.go" "./$PKG"

GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 "$GO" vet "./$PKG/"
"$GO" vet "./$PKG/" ./internal/gpu/
# 5. The backend's decisions that need no Metal (policy.go: stale-metallib stamp, ranges, blits,
#    command-buffer budget) and scripts/build-metallib.sh run with stand-in uname and xcrun.
"$GO" test -count=1 "./$PKG/"
echo "check-metal: ok (bridge.m syntax, darwin cgo type check, cgo flags, vet, policy tests); nothing here ran on Metal"
