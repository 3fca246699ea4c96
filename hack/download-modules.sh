#!/usr/bin/env bash
# Downloads the pinned Go modules of every module the suite builds (the
# product, the scheduler plugin, the release tooling, the test binaries
# and the old pair's build list), retrying each. On a cold machine the
# module proxy is the suite's one network step, and `go` does not retry a
# failed fetch: one TLS handshake timeout fails the whole run. With a warm
# module cache this is a check that takes seconds.
#
#   GO        go command (default: go)
#   ATTEMPTS  tries per module set (default: 5), 15 s × attempt apart
set -euo pipefail
GO="${GO:-go}"
ATTEMPTS="${ATTEMPTS:-5}"
cd "$(dirname "$0")/.."

# download DIR [FLAGS...]: go mod download in DIR, retried.
download() {
	local dir=$1 i
	shift
	for ((i = 1; ; i++)); do
		if (cd "${dir}" && "${GO}" mod download "$@"); then
			return 0
		fi
		if ((i >= ATTEMPTS)); then
			echo "download-modules: ${dir} $*: gave up after ${ATTEMPTS} attempts" >&2
			return 1
		fi
		echo "download-modules: ${dir} $*: attempt ${i} of ${ATTEMPTS} failed; retrying in $((15 * i))s" >&2
		sleep $((15 * i))
	done
}

# The sets download side by side (the module cache locks what they share);
# the script fails if any set gave up.
pids=()
download . & pids+=($!)
download . -modfile="${PWD}/test/compat/kueue-v017.mod" & pids+=($!)
download scheduler & pids+=($!)
download release & pids+=($!)
download hack/testbin & pids+=($!)
failed=0
for pid in "${pids[@]}"; do
	wait "${pid}" || failed=1
done
exit "${failed}"
