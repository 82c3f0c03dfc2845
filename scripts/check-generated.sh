#!/usr/bin/env bash
# check-generated.sh runs `go generate ./...` and fails if that changed a tracked file or created a
# new one: generated files must be committed up to date. The working tree is compared before and
# after (status and content of every changed or untracked file), so uncommitted work of your own
# does not count as a change; on a clean checkout (CI) this is `git status --porcelain` being empty.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}

# snapshot prints one line per changed or untracked file: its content hash and its status entry.
snapshot() {
	git status --porcelain=v1 --untracked-files=all -z |
		while IFS= read -r -d '' entry; do
			path=${entry:3}
			case $entry in R* | C*) IFS= read -r -d '' _ ;; esac # skip a rename's source path
			if [[ -f $path ]]; then hash=$(git hash-object -- "$path"); else hash=-; fi
			printf '%s %s\n' "$hash" "$entry"
		done
}

before=$(snapshot)
"$GO" generate ./...
after=$(snapshot)

if [[ $before != "$after" ]]; then
	echo "check-generated: 'go generate ./...' changed the working tree; commit the regenerated files:" >&2
	echo "(< before, > after: content hash and git status of each changed or untracked file)" >&2
	diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep '^[<>]' >&2 || true
	exit 1
fi
echo "check-generated: go generate ./... changed nothing"
