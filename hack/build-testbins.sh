#!/usr/bin/env bash
# Builds the control-plane binaries that the e2e suites run (kube-apiserver
# and etcd) from the modules pinned in a hack/testbin* Go module, into a cache
# directory, and prints that directory on stdout (messages go to stderr).
#
#   K8S              which pinned set (default and only: v1.36.3, hack/testbin,
#                    etcd 3.6.8; both Kueue pairs and the scheduler plugin run on it)
#   PLANNER_TESTBIN  cache directory
#                    (default ~/.cache/progress-planner/testbin/k8s-<K8S>-etcd-v<etcd>)
#   GO               go command (default: go)
#
# Idempotent: a binary that is already there and reports the pinned version is
# kept. Nothing is downloaded except Go modules through the module proxy.
set -euo pipefail

K8S_VERSION="${K8S:-v1.36.3}"
case "${K8S_VERSION}" in
v1.36.3) MODSUBDIR=testbin ETCD_VERSION=3.6.8 ;;
*)
	echo "build-testbins: ERROR: K8S=${K8S_VERSION}: the pinned set is v1.36.3 (docs/testing.md, \"Changing versions\")" >&2
	exit 1
	;;
esac
K8S_MAJOR="$(echo "${K8S_VERSION#v}" | cut -d. -f1)"
K8S_MINOR="$(echo "${K8S_VERSION#v}" | cut -d. -f2)"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODDIR="${ROOT}/hack/${MODSUBDIR}"
GO="${GO:-go}"
OUT="${PLANNER_TESTBIN:-${HOME}/.cache/progress-planner/testbin/k8s-${K8S_VERSION}-etcd-v${ETCD_VERSION}}"

log() { echo "build-testbins: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v "${GO}" >/dev/null 2>&1 || die "'${GO}' not found: a Go toolchain is needed to build the test binaries"
[[ -f "${MODDIR}/go.mod" ]] || die "${MODDIR}/go.mod is missing"

# The pinned versions live in hack/testbin/go.mod; refuse to build something
# other than what this script labels the directory with.
grep -qE "^[[:space:]]*k8s.io/kubernetes ${K8S_VERSION}\$" "${MODDIR}/go.mod" ||
	die "hack/${MODSUBDIR}/go.mod does not pin k8s.io/kubernetes ${K8S_VERSION}; update this script with it"
grep -qE "^[[:space:]]*go.etcd.io/etcd/server/v3 v${ETCD_VERSION}\$" "${MODDIR}/go.mod" ||
	die "hack/${MODSUBDIR}/go.mod does not pin go.etcd.io/etcd/server/v3 v${ETCD_VERSION}; update this script with it"

mkdir -p "${OUT}"

# prints_line BIN LINE: BIN --version prints LINE as one of its lines.
# The output is captured whole and matched in bash, never piped into
# `grep -q`: grep exits at its first match, and under pipefail a binary that
# is still writing (etcd prints four lines) dies of SIGPIPE and fails the
# check although the version is right (docs/testing.md).
prints_line() {
	local bin="$1" line="$2" out
	[[ -x "${bin}" ]] || return 1
	out="$("${bin}" --version 2>/dev/null)" || return 1
	[[ $'\n'"${out}"$'\n' == *$'\n'"${line}"$'\n'* ]]
}
apiserver_ok() { prints_line "${OUT}/kube-apiserver" "Kubernetes ${K8S_VERSION}"; }
etcd_ok() { prints_line "${OUT}/etcd" "etcd Version: ${ETCD_VERSION}"; }
# kubectl: the e2e tests of the kubectl plugin and the printer columns.
kubectl_ok() {
	local out
	[[ -x "${OUT}/kubectl" ]] || return 1
	out="$("${OUT}/kubectl" version --client 2>/dev/null)" || return 1
	[[ $'\n'"${out}"$'\n' == *$'\n'"Client Version: ${K8S_VERSION}"$'\n'* ]]
}

# --probe-check N: run both version probes N times against the cached
# binaries and fail on the first miss (make testbins-probe-check). Guards
# against a probe that passes most of the time.
if [[ "${1:-}" == "--probe-check" ]]; then
	n="${2:-500}"
	[[ "${n}" =~ ^[1-9][0-9]{0,5}$ ]] || die "--probe-check wants a count from 1 to 999999, got '${n}'"
	for ((i = 1; i <= n; i++)); do
		apiserver_ok || die "probe ${i}/${n}: kube-apiserver --version check failed"
		etcd_ok || die "probe ${i}/${n}: etcd --version check failed"
	done
	log "version probes passed ${n} of ${n} times"
	exit 0
fi

# build PKG NAME [LDFLAGS]: builds into a temporary file and renames it into
# place, so an interrupted build never leaves a half-written binary behind.
build() {
	local pkg="$1" name="$2" ldflags="${3:-}" tmp start
	tmp="$(mktemp "${OUT}/.${name}.XXXXXX")"
	start=$(date +%s)
	log "building ${name} from ${pkg} (a first build takes several minutes on 2 cores)..."
	if ! (cd "${MODDIR}" && CGO_ENABLED=0 "${GO}" build -trimpath -buildvcs=false \
		-ldflags "-s -w ${ldflags}" -o "${tmp}" "${pkg}"); then
		rm -f "${tmp}"
		die "go build ${pkg} failed"
	fi
	chmod 0755 "${tmp}"
	mv -f "${tmp}" "${OUT}/${name}"
	log "built ${name} in $(($(date +%s) - start)) s"
}

if apiserver_ok; then
	log "kube-apiserver ${K8S_VERSION} already in ${OUT}"
else
	# Kueue parses the server version: without these stamps the binary reports
	# v0.0.0-master+$Format:%H$ and Kueue fails to start.
	cv=k8s.io/component-base/version
	build k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver \
		"-X ${cv}.gitVersion=${K8S_VERSION} -X ${cv}.gitMajor=${K8S_MAJOR} -X ${cv}.gitMinor=${K8S_MINOR} -X ${cv}.gitTreeState=clean -X ${cv}.buildDate=1970-01-01T00:00:00Z"
	apiserver_ok || die "${OUT}/kube-apiserver --version does not print 'Kubernetes ${K8S_VERSION}': $("${OUT}/kube-apiserver" --version 2>&1 || true)"
fi

if etcd_ok; then
	log "etcd ${ETCD_VERSION} already in ${OUT}"
else
	build go.etcd.io/etcd/server/v3 etcd
	etcd_ok || die "${OUT}/etcd --version does not print 'etcd Version: ${ETCD_VERSION}': $("${OUT}/etcd" --version 2>&1 || true)"
fi

# kubectl only from a module that records it (tools.go): a testbin module
# without it does not carry kubectl's dependencies.
if ! grep -q 'k8s.io/kubernetes/cmd/kubectl' "${MODDIR}/tools.go"; then
	log "kubectl: not recorded in hack/${MODSUBDIR}/tools.go; not built for ${K8S_VERSION}"
elif kubectl_ok; then
	log "kubectl ${K8S_VERSION} already in ${OUT}"
else
	cv=k8s.io/component-base/version
	build k8s.io/kubernetes/cmd/kubectl kubectl \
		"-X ${cv}.gitVersion=${K8S_VERSION} -X ${cv}.gitMajor=${K8S_MAJOR} -X ${cv}.gitMinor=${K8S_MINOR} -X ${cv}.gitTreeState=clean -X ${cv}.buildDate=1970-01-01T00:00:00Z"
	kubectl_ok || die "${OUT}/kubectl version --client does not print 'Client Version: ${K8S_VERSION}': $("${OUT}/kubectl" version --client 2>&1 || true)"
fi

echo "${OUT}"
