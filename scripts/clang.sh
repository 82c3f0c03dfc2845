# clang.sh - sourced by the check scripts: sets CLANG to the newest clang on PATH (clang-NN or
# clang; a CLANG already set wins) and installs Debian's clang when there is none, so `make test`
# works on a fresh machine. Defines clang_major.

clang_major() { "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1; }

newest_clang() {
	local best="" bestv=0 c v
	for c in $(compgen -c clang | grep -E '^clang(-[0-9]+)?$' | sort -u); do
		v=$(clang_major "$c")
		if [[ -n $v && $v -gt $bestv ]]; then best=$c bestv=$v; fi
	done
	echo "$best"
}

CLANG=${CLANG:-$(newest_clang)}
if [[ -z $CLANG ]]; then
	echo "$(basename "$0"): no clang found; installing Debian's (apt-get install -y clang)"
	SUDO=""
	[[ $(id -u) -ne 0 ]] && SUDO=sudo
	$SUDO apt-get install -y clang >/dev/null 2>&1 || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y clang >/dev/null; } ||
		{ echo "$(basename "$0"): cannot install clang" >&2; exit 1; }
	CLANG=$(newest_clang)
fi
