# syntax=docker/dockerfile:1
# Images of Progress Planner for users with a registry, multi-architecture
# with buildx (the Go build runs on the build machine's platform and
# cross-compiles, so no emulation is needed):
#
#   docker buildx build --platform linux/amd64,linux/arm64 --target planner \
#     --build-arg VERSION=v0.1.0 -t ghcr.io/progress-planner/planner:v0.1.0 --push .
#   docker buildx build --platform linux/amd64,linux/arm64 --target planner-scheduler \
#     --build-arg VERSION=v0.1.0 -t ghcr.io/progress-planner/planner-scheduler:v0.1.0 --push .
#
# Without a registry or Docker, `make image` / `make images` build the same
# images offline (release/image: one layer, the static binary and the
# nonroot user of distroless static:nonroot).

ARG GO_VERSION=1.26
ARG BASE=gcr.io/distroless/static:nonroot

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS source
WORKDIR /src
# Modules first: a source change does not download them again.
COPY go.mod go.sum ./
COPY scheduler/go.mod scheduler/go.sum scheduler/
RUN --mount=type=cache,target=/go/pkg/mod go mod download && cd scheduler && go mod download
COPY . .

FROM source AS build-planner
ARG TARGETOS TARGETARCH VERSION=dev COMMIT=unknown BUILD_DATE=1970-01-01T00:00:00Z
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildDate=${BUILD_DATE}" \
      -o /out/planner ./cmd/planner

FROM source AS build-scheduler
ARG TARGETOS TARGETARCH COMMIT=unknown BUILD_DATE=1970-01-01T00:00:00Z
# --version is the Kubernetes release it is built from, as for
# kube-scheduler (the Makefile's SCHED_LDFLAGS).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd scheduler && K8S=$(go list -m -f '{{.Version}}' k8s.io/kubernetes) && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${K8S} -X k8s.io/component-base/version.gitCommit=${COMMIT} -X k8s.io/component-base/version.buildDate=${BUILD_DATE} -X k8s.io/component-base/version.gitTreeState=clean" \
      -o /out/planner-scheduler ./cmd/planner-scheduler

FROM ${BASE} AS planner-scheduler
ARG VERSION=dev
LABEL org.opencontainers.image.title=planner-scheduler \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.source=https://github.com/progress-planner/planner \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build-scheduler /out/planner-scheduler /planner-scheduler
USER 65532:65532
ENTRYPOINT ["/planner-scheduler"]

# Last, so a plain `docker build .` builds the planner.
FROM ${BASE} AS planner
ARG VERSION=dev
LABEL org.opencontainers.image.title=planner \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.source=https://github.com/progress-planner/planner \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build-planner /out/planner /planner
USER 65532:65532
ENTRYPOINT ["/planner"]
