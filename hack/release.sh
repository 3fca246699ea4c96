#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: sets the version everywhere it is named and
# writes the release's artifacts to _output/release/VERSION:
#
#   manifests.yaml                       kustomize build of config/default (kubectl kustomize)
#   progress-planner-X.Y.Z.tgz           the packaged charts (Helm SDK: lint, then package)
#   planner-scheduler-X.Y.Z.tgz
#   kubectl-planner_VERSION_OS_ARCH.tar.gz   linux and darwin, amd64 and arm64 (binary + LICENSE)
#   planner.yaml                         the krew manifest with the archives' sha256, validated by krew
#   CHANGELOG.md                         this version's CHANGELOG entry
#   SHA256SUMS                           sha256 of every file above
#
# The version lands in config/manager (image tag), both charts (version,
# appVersion), plugins/planner.yaml, the charts' golden renders and
# CHANGELOG.md ("## Unreleased" becomes "## VERSION - DATE"); commit those
# changes and tag the commit. Images: make images VERSION=... (offline OCI
# archives) or the Dockerfile with a registry. Nothing is downloaded but
# Go modules.
#
#   KUBECTL  kubectl used for kustomize (default: kubectl on PATH, else the
#            one make testbins builds)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
VERSION="${1:-}"
GO="${GO:-go}"
die() { echo "release: ERROR: $*" >&2; exit 1; }
log() { echo "release: $*" >&2; }

[[ "${VERSION}" =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] || die "VERSION '${VERSION}' is not vMAJOR.MINOR.PATCH[-PRE]"
CHART_VERSION="${BASH_REMATCH[1]}"
OUT="${ROOT}/_output/release/${VERSION}"
COMMIT="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
BUILD_DATE="$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)"

KUBECTL="${KUBECTL:-}"
if [[ -z "${KUBECTL}" ]]; then
	if command -v kubectl >/dev/null 2>&1; then
		KUBECTL=kubectl
	else
		KUBECTL="$(bash hack/build-testbins.sh)/kubectl"
	fi
fi

log "setting ${VERSION} in config/, charts/, plugins/"
sed -i -E "s|^(    newTag: ).*|\1${VERSION} # make release VERSION=... sets it|" config/manager/kustomization.yaml
sed -i -E "s|(image: ghcr.io/progress-planner/planner:).*|\1${VERSION}|" config/manager/manager.yaml
for c in charts/progress-planner charts/planner-scheduler; do
	sed -i -E "s|^version: .*|version: ${CHART_VERSION}|; s|^appVersion: .*|appVersion: ${VERSION}|" "${c}/Chart.yaml"
done
sed -i -E "s|^(  version: )v.*|\1${VERSION}|; s|download/v[^/]+/kubectl-planner_v[^_]+_|download/${VERSION}/kubectl-planner_${VERSION}_|" plugins/planner.yaml
(cd release && "${GO}" test -count=1 ./charts -update >/dev/null) || die "regenerating the charts' golden renders failed"

if ! grep -q "^## ${VERSION} " CHANGELOG.md; then
	grep -q "^## Unreleased" CHANGELOG.md || die "CHANGELOG.md has neither '## ${VERSION} ' nor '## Unreleased' to release"
	sed -i "s|^## Unreleased.*|## ${VERSION} - $(date -u +%Y-%m-%d)|" CHANGELOG.md
fi

rm -rf "${OUT}"
mkdir -p "${OUT}"
log "manifests.yaml (${KUBECTL} kustomize config/default)"
"${KUBECTL}" kustomize config/default >"${OUT}/manifests.yaml"

log "charts"
(cd release && "${GO}" run ./cmd/package-chart -out "${OUT}" ../charts/progress-planner ../charts/planner-scheduler) >&2

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
declare -A SUMS
for plat in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os="${plat%/*}" arch="${plat#*/}"
	log "kubectl-planner ${os}/${arch}"
	d="${tmp}/${os}-${arch}"
	mkdir -p "${d}"
	CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" "${GO}" build -trimpath \
		-ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildDate=${BUILD_DATE}" \
		-o "${d}/kubectl-planner" ./cmd/planner
	cp LICENSE "${d}/"
	archive="kubectl-planner_${VERSION}_${os}_${arch}.tar.gz"
	# Fixed owner and times: the archive depends on the binary only.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="${BUILD_DATE}" -C "${d}" -cf - kubectl-planner LICENSE | gzip -n >"${OUT}/${archive}"
	SUMS["${os}_${arch}"]="$(sha256sum "${OUT}/${archive}" | cut -d' ' -f1)"
done

log "krew manifest"
cp plugins/planner.yaml "${OUT}/planner.yaml"
for key in "${!SUMS[@]}"; do
	# Each platform's sha256 line follows its uri line.
	sed -i -E "/kubectl-planner_${VERSION}_${key}\.tar\.gz/{n;s|sha256: .*|sha256: \"${SUMS[${key}]}\"|}" "${OUT}/planner.yaml"
done
grep -q '"0000000000000000000000000000000000000000000000000000000000000000"' "${OUT}/planner.yaml" && die "a platform of the krew manifest kept its placeholder checksum"
(cd release && "${GO}" build -o "${tmp}/validate-krew-manifest" sigs.k8s.io/krew/cmd/validate-krew-manifest)
"${tmp}/validate-krew-manifest" -manifest "${OUT}/planner.yaml" -skip-install 2>&1 | sed 's/^/release: krew: /' >&2

log "CHANGELOG entry"
awk -v v="## ${VERSION} " 'index($0, v) == 1 {p = 1; print; next} p && /^## / {exit} p' CHANGELOG.md >"${OUT}/CHANGELOG.md"
[[ -s "${OUT}/CHANGELOG.md" ]] || die "no CHANGELOG entry for ${VERSION}"

(cd "${OUT}" && sha256sum -- * >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
log "done: ${OUT}"
ls -l "${OUT}" >&2
