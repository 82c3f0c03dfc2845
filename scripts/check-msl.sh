#!/usr/bin/env bash
# check-msl.sh - everything about the kernels that can be verified without a Mac or a GPU:
#   1. clang address-space check of the check copy of shaders/<stage>/*.metal (scripts/mslgen -check), in
#      two flavours (docs/KERNELS.md): "cpp" = C++ with address_space(1/2/3); "ocl" = C++ for OpenCL
#      2021 without the generic address space (unqualified = private = Metal's thread);
#   2. the deliberate mistakes of shaders/bad/check_cases.metal give the expected verdicts;
#   3. internal/gpu/cuda/kernels.gen.cu, the module template kernels_pieces.gen.cu completed
#      with Keccak-f's generated code and kernels_whole.gen.cu with Fibonacci's whole program
#      (scripts/moduleinstance) compile as CUDA (clang -x cuda with
#      scripts/cuda_stub.h standing in for what NVRTC declares implicitly) and yield one PTX entry
#      per kernel in all.
# It uses the newest clang on PATH (clang-NN or clang; CLANG=... overrides) and installs one from
# Debian (apt-get) when none is found.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}

pass=0 fail=0
ok() { echo "ok    $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
notice() { echo "NOTE  $*"; }

source scripts/clang.sh
VER=$(clang_major "$CLANG")
echo "check-msl: using $CLANG (clang $VER)"

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$GO" run ./scripts/mslgen -check "$OUT/shaders.check.cpp" || { echo "check-msl: generation failed"; exit 1; }
"$GO" run ./scripts/mslgen -check "$OUT/cases.check.cpp" shaders/bad/check_cases.metal || { echo "check-msl: generation failed"; exit 1; }

CHECK_CPP="$CLANG -x c++ -std=c++17 -fsyntax-only -DMSL_CHECK"
CHECK_OCL="$CLANG --target=spir64 -x clcpp -cl-std=clc++2021 -Xclang -cl-ext=-all -fsyntax-only -DMSL_CHECK"
flavours="cpp ocl"
# C++ for OpenCL 2021 (-cl-std=clc++2021, -x clcpp) arrived in clang 14.
if [[ $VER -lt 14 ]]; then
	notice "clang $VER has no C++ for OpenCL 2021: skipping the ocl flavour (needs clang >= 14; Debian 12 has clang-14 and clang-19)"
	flavours="cpp"
fi

for fl in $flavours; do
	cmd=CHECK_${fl^^}
	if msg=$(${!cmd} "$OUT/shaders.check.cpp" 2>&1) && [[ -z $msg ]]; then ok "check[$fl] shaders/<stage>/*.metal"; else
		bad "check[$fl] shaders/<stage>/*.metal"
		echo "$msg"
	fi
	# Metal's own branch of babybear.h's wide products (two words and a carry).
	if msg=$(${!cmd} -DBB_WIDE_SPLIT "$OUT/shaders.check.cpp" 2>&1) && [[ -z $msg ]]; then ok "check[$fl] shaders/<stage>/*.metal, BB_WIDE_SPLIT"; else
		bad "check[$fl] shaders/<stage>/*.metal, BB_WIDE_SPLIT"
		echo "$msg"
	fi
done

# case               expected verdict in flavour cpp / ocl   (Metal's own verdict is in the .metal file)
cases="
NONE                 accept accept
DEVICE_TO_THREAD     reject reject
DEVICE_TO_THREAD_REF reject reject
TG_TO_DEVICE         reject reject
METHOD_ON_DEVICE     reject reject
METHOD_ON_CONSTANT   reject reject
DEVICE_METHOD        reject accept
STRUCT_COPY          reject reject
FIELD_COPY           accept accept
TG_LOCAL_VAR         reject reject
CAST                 accept reject
HALF_NAME            reject reject
PROGRAM_SCOPE_VAR    accept reject
"
while read -r c want_cpp want_ocl; do
	[[ -z $c ]] && continue
	for fl in $flavours; do
		cmd=CHECK_${fl^^}
		want=want_$fl
		if msg=$(${!cmd} -DCASE_$c "$OUT/cases.check.cpp" 2>&1) && [[ -z $msg ]]; then got=accept; else got=reject; fi
		first=$(echo "$msg" | grep -m1 -E 'error|warning' | sed 's/^[^ ]* //')
		if [[ $got == "${!want}" ]]; then ok "check[$fl] CASE_$c: $got ${first:+($first)}"; else bad "check[$fl] CASE_$c: $got, want ${!want} ${first:+($first)}"; fi
	done
done <<<"$cases"

# CUDA: syntax (host and device passes) and PTX, with a stand-in for NVRTC's implicit declarations.
ARCH=sm_90
if [[ $VER -lt 16 ]]; then
	notice "clang $VER does not know sm_90 (clang >= 16 does); checking CUDA for sm_86 instead"
	ARCH=sm_86
fi
CU="$CLANG -x cuda --cuda-gpu-arch=$ARCH -nocudainc -nocudalib -std=c++17 -include scripts/cuda_stub.h"
# Every CUDA module: the main one (kernels.gen.cu) and the templates' instances.
nk=$(grep -c '^	{Name:' internal/gpu/driver/kernels.gen.go)
ne=0
barrier=no
mulhi=no
# A module template (kernels_NAME.gen.cu) is checked completed with real generated code: the
# pieces template with Keccak-f's (scripts/moduleinstance, units and main code in one source), the
# whole template with Fibonacci's whole program.
"$GO" run ./scripts/moduleinstance -template internal/gpu/cuda/kernels_pieces.gen.cu -air keccakf -o "$OUT/kernels_pieces.keccakf.cu" ||
	bad "scripts/moduleinstance (the pieces template with Keccak-f's code)"
"$GO" run ./scripts/moduleinstance -template internal/gpu/cuda/kernels_whole.gen.cu -air fibonacci -whole -o "$OUT/kernels_whole.fibonacci.cu" ||
	bad "scripts/moduleinstance (the whole template with Fibonacci's code)"
for CUFILE in internal/gpu/cuda/kernels.gen.cu "$OUT/kernels_pieces.keccakf.cu" "$OUT/kernels_whole.fibonacci.cu"; do
	# (the one inactive #include <metal_stdlib> of prelude.h's Metal branch is preprocessed away)
	if grep '^[[:space:]]*#[[:space:]]*include' "$CUFILE" | grep -qv '<metal_stdlib>'; then
		bad "$CUFILE has an #include (NVRTC compiles it alone)"
	else
		ok "$CUFILE has no #include"
	fi
	defs=()  # the pieces template's NVRTC define (internal/gpu/cuda moduleOptions)
	[[ $CUFILE == *kernels_pieces* ]] && defs=(-DBB_SIGNFIX)
	if msg=$($CU "${defs[@]}" -fsyntax-only -Wall "$CUFILE" 2>&1) && [[ -z $msg ]]; then ok "cuda syntax (host+device, $ARCH) $CUFILE"; else
		bad "cuda syntax $CUFILE"
		echo "$msg"
	fi
	ptx="$OUT/$(basename "$CUFILE" .cu).ptx"
	if $CU "${defs[@]}" --cuda-device-only -O3 -S -o "$ptx" "$CUFILE" 2>/dev/null; then
		ne=$((ne + $(grep -o '\.entry mslk_[A-Za-z0-9_]*' "$ptx" | sort -u | wc -l)))
		grep -q 'bar.sync' "$ptx" && barrier=yes
		grep -q 'mul.hi.u32' "$ptx" && mulhi=yes
	else
		bad "cuda PTX compile $CUFILE"
	fi
done
if [[ $ne == "$nk" && $barrier == yes && $mulhi == yes ]]; then
	ok "cuda PTX $ARCH: $ne mslk_ entries in all modules (table: $nk), bar.sync, mul.hi.u32"
else
	bad "cuda PTX: $ne mslk_ entries in all modules, table has $nk (bar.sync: $barrier, mul.hi.u32: $mulhi)"
fi

echo "check-msl: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
