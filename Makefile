# Progress Planner — developer entry points. Every target is what CI and the
# docs run; numbers quoted in docs come from these commands.

GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time, not the wall clock: rebuilding a commit gives the same
# binary and image digest.
BUILD_DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)
# planner-scheduler is kube-scheduler: its --version is the Kubernetes
# release it is built from (scheduler/go.mod), as kube-scheduler's own
# build stamps it; the image's labels carry the planner's VERSION.
# Recursive (=): evaluated only by the targets that use it.
SCHED_LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(shell cd scheduler && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) \
	-X k8s.io/component-base/version.gitCommit=$(COMMIT) -X k8s.io/component-base/version.buildDate=$(BUILD_DATE) \
	-X k8s.io/component-base/version.gitTreeState=clean
# Images: REGISTRY/planner:VERSION and REGISTRY/planner-scheduler:VERSION.
REGISTRY ?= ghcr.io/progress-planner
HOSTARCH := $(shell $(GO) env GOARCH)
ARCHS   ?= $(HOSTARCH)
ABSBIN   = $(abspath $(BIN))
DATA    ?=
CUTOFFS ?= 0.25,0.5,0.75
EVAL_EVERY ?= 1
EXT_OUT ?= _output/external-curves
EVAL_PAUSE ?= 0
LOSS_EVERY ?= 0
BENCH   ?= .
COUNT   ?= 6
FUZZTIME ?= 30s
# Minimizing each new interesting input may take this long (go's default, 60s,
# let FuzzParseConfig spend its whole FUZZTIME minimizing one input).
FUZZMINIMIZE ?= 2s

# Every Go build these targets run uses the release builds' flags (static,
# -trimpath: the images' binaries, the control-plane testbins), so vet, the
# unit and e2e test builds and `make image` share one compile of each
# package: on a cold machine `make test` compiles the product's world once,
# not once for the tests and again for the image (docs/testing.md).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)) -trimpath)

.PHONY: all build test modules unit unit-main unit-scheduler vet vet-main vet-scheduler vet-release vet-compat nested-scheduler nested-compat nested-release e2e-build e2e-release e2e-main-a e2e-main-b testbins-build probe-check fmt-check bench fuzz backtest backtest-stress backtest-lodo external-curves examples clean generate manifests verify-generated testbins chromium e2e e2e-lane-a e2e-lane-b e2e-compat capacity-backtest screenshots

all: build

build: ## Build the planner binary into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/planner ./cmd/planner

.PHONY: image images image-planner image-scheduler kubectl-planner helm-lint chart-test release

# Static linux binaries for the images (CGO off: the distroless/scratch base
# has no libc), stripped, with version stamps.
image-planner:
	@mkdir -p $(BIN)/images
	for a in $(ARCHS); do CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/linux-$$a/planner ./cmd/planner || exit 1; done
	cd release && $(GO) run ./cmd/build-image --name planner --ref $(REGISTRY)/planner:$(VERSION) \
		--version $(VERSION) --commit $(COMMIT) --created $(BUILD_DATE) \
		--description "Progress Planner controller and CLI: forecasts of TrainJobs, Kueue priority boosts" \
		$(foreach a,$(ARCHS),--bin linux/$(a)=$(ABSBIN)/linux-$(a)/planner) --out $(ABSBIN)/images/planner-$(VERSION).tar

image-scheduler:
	@mkdir -p $(BIN)/images
	for a in $(ARCHS); do (cd scheduler && CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-s -w $(SCHED_LDFLAGS)" -o $(ABSBIN)/linux-$$a/planner-scheduler ./cmd/planner-scheduler) || exit 1; done
	cd release && $(GO) run ./cmd/build-image --name planner-scheduler --ref $(REGISTRY)/planner-scheduler:$(VERSION) \
		--version $(VERSION) --commit $(COMMIT) --created $(BUILD_DATE) \
		--description "kube-scheduler with Progress Planner's ProgressAware plugin" \
		$(foreach a,$(ARCHS),--bin linux/$(a)=$(ABSBIN)/linux-$(a)/planner-scheduler) --out $(ABSBIN)/images/planner-scheduler-$(VERSION).tar

kubectl-planner: ## The kubectl plugin: bin/kubectl-planner, the planner under the plugin name (kubectl planner get|explain|report|forecast).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-planner ./cmd/planner

helm-lint: ## helm lint of both charts, with default and non-default values (Helm SDK).
	cd release && $(GO) test -count=1 -run 'TestHelmLint' -v ./charts

chart-test: ## helm lint and the golden helm template tests (cd release && go test ./charts -update rewrites the golden files).
	cd release && $(GO) test -count=1 -v ./charts

release: ## make release VERSION=vX.Y.Z: versions set, artifacts in _output/release/VERSION (hack/release.sh).
	bash hack/release.sh $(VERSION)

image: ## The planner's image for this machine's architecture, offline: bin/images/planner-VERSION.tar (an OCI archive; docker/podman load).
	$(MAKE) image-planner ARCHS=$(HOSTARCH)

images: ## Both images (planner, planner-scheduler) for linux/amd64 and linux/arm64, offline (OCI archives with an index).
	$(MAKE) image-planner image-scheduler ARCHS="amd64 arm64"

test: modules fmt-check vet-main unit-main e2e ## The full test suite (README's test command; .ci/run calls it). The nested modules' vet and unit tests and the old pair's vet run inside e2e (nested-scheduler, nested-compat, nested-release), beside the e2e lanes.

modules: ## Download every pinned Go module the suite builds, retrying each set (a cold machine's one network step; hack/download-modules.sh).
	GO=$(GO) bash hack/download-modules.sh

unit: unit-main unit-scheduler ## Unit tests: fast, no binaries, no shared data (the product, then the scheduler plugin's nested module).

unit-main:
	$(GO) test -count=1 ./...

unit-scheduler:
	cd scheduler && $(GO) test -count=1 ./...

vet: vet-main vet-scheduler vet-release ## go vet of every module, and the function-length check.

vet-main:
	$(GO) vet ./...
	$(GO) run ./hack/funclen -limit 120 -strict . > /dev/null || { $(GO) run ./hack/funclen -limit 120 .; exit 1; }  # a function past 120 lines needs a `// long:` reason

vet-scheduler:
	cd scheduler && $(GO) vet ./... && $(GO) vet -tags e2e ./...

vet-release:
	cd release && $(GO) vet ./...

PROBES ?= 500

testbins: testbins-build probe-check ## Build kube-apiserver, etcd and kubectl for the e2e suites (cached; docs/testing.md): v1.36.3 from hack/testbin, for both pairs and the scheduler plugin; then repeat their version probes PROBES times.

testbins-build:
	bash hack/build-testbins.sh

probe-check: testbins-build
	bash hack/build-testbins.sh --probe-check $(PROBES)

chromium: ## Install headless Chromium (Debian package) for the e2e browser test, when missing.
	bash hack/install-chromium.sh

# The e2e suites run in two lanes at once (make -j2). test/e2e runs one
# control plane per test, one test at a time, and spends much of its time
# waiting (control-plane start-ups, Kueue's requeue batches, replays in
# real time): about 25 min on 2 cores in one process. Its tests are split
# between the lanes by name: lane A runs those E2E_LANE_A matches, lane B
# all others (-test.skip), so a new test runs in lane B without being
# listed anywhere. Both lanes run the one test binary built first.
E2E_LANE_A ?= ^Test(Fault|Fidelity|Explain|Simulate|Sweep|Chart|SecureMetrics|Kubectl|ReportLayout|LivePage)
E2E_BIN    := $(CURDIR)/$(BIN)/e2e.test

e2e: testbins-build chromium ## E2E suites on a real control plane (kube-apiserver, etcd, Kueue in-process), in two lanes at once beside the nested modules' compiles (nested-*): the default pair's test/e2e split between the lanes, then the release module and the scheduler plugin's e2e in one, the live forecast test and the old pair (e2e-compat) in the other.
	$(MAKE) -j2 --output-sync=line probe-check e2e-build
	$(MAKE) -j4 --output-sync=line e2e-lane-a e2e-lane-b

# The probes (a process start each, mostly waiting) run beside the e2e
# packages' vet and the test binary's compile.
e2e-build:
	$(GO) vet -tags e2e ./test/... ./cmd/...
	$(GO) test -c -tags e2e -o $(E2E_BIN) ./test/e2e

e2e-lane-a: e2e-release nested-scheduler
	cd scheduler && $(GO) test -tags e2e -count=1 -timeout 15m ./e2e/...

e2e-release: e2e-main-a nested-release
	cd release && $(GO) test -count=1 -timeout 30m ./...

e2e-lane-b: e2e-main-b nested-compat
	$(MAKE) e2e-compat

e2e-main-a:
	cd test/e2e && $(E2E_BIN) -test.count=1 -test.timeout=50m -test.run='$(E2E_LANE_A)'

e2e-main-b:
	cd test/e2e && $(E2E_BIN) -test.count=1 -test.timeout=50m -test.skip='$(E2E_LANE_A)'
	$(GO) test -tags e2e -count=1 -timeout 20m ./cmd/...

# The compiles the lanes' later suites need, in two chains beside the
# lanes: the old pair's vet, then the scheduler plugin's module (vet, unit
# tests), which reuses the old pair's Kubernetes v0.35.4 packages
# (docs/testing.md); and the release module's vet. The old pair comes
# first so that its e2e tests, which mostly wait on their control plane,
# run beside the scheduler module's compile rather than after it. At the
# lowest CPU priority: the e2e lanes spend most of their time waiting on
# their control planes, and these fill that time without taking the CPU
# from them when they need it.
nested-compat:
	nice -n 19 $(MAKE) vet-compat

nested-scheduler: nested-compat
	nice -n 19 $(MAKE) -j1 vet-scheduler unit-scheduler

nested-release:
	nice -n 19 $(MAKE) vet-release

# The old pair (docs/compatibility.md): Kueue v0.17.0 + Trainer v2.2.0, on
# the default pair's control plane (kube-apiserver v1.36.3 / etcd v3.6.8:
# one build on a cold machine). Same packages, built with the build
# list of test/compat/kueue-v017.mod (GOFLAGS reaches the tests' own `go list
# -m` too) and the build tag that selects the framework's Kueue v0.17 wiring.
COMPAT_GOFLAGS := $(GOFLAGS) -modfile=$(CURDIR)/test/compat/kueue-v017.mod
COMPAT_TAGS    := e2e,kueue_v017
COMPAT_RUN     ?= ^(TestControlPlaneYield|TestLoweredBoostNeedsNudge|TestPlannerPlateauedJobYields|TestPlannerNearDoneJobProtected|TestPlannerRestart|TestPlannerPriorityBoostOff|TestPlannerDetectsKueue|TestBatchJobYieldsThroughEndpoint|TestJobSetYieldsThroughEndpoint)$$

e2e-compat: vet-compat ## E2E on the old pair (Kueue v0.17 + Trainer v2.2, on the Kubernetes v1.36.3 control plane): yield, near-done protection, restart, wake-up, PriorityBoost off, a Job and a JobSet yielding through the progress endpoint.
	bash hack/build-testbins.sh
	GOFLAGS="$(COMPAT_GOFLAGS)" $(GO) test -tags $(COMPAT_TAGS) -count=1 -timeout 20m -run '$(COMPAT_RUN)' ./test/e2e/

vet-compat:
	GOFLAGS="$(COMPAT_GOFLAGS)" $(GO) vet -tags $(COMPAT_TAGS) ./pkg/... ./test/...

screenshots: testbins chromium ## Regenerate docs/img/report.png and docs/img/live.png: the browser layout tests' screenshots at 1280 px (docs/report.md).
	PLANNER_SCREENSHOT_DIR=$(CURDIR)/docs/img $(GO) test -tags e2e -count=1 -run 'TestReportLayoutInBrowser|TestLivePageInBrowser' ./test/e2e

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: ## Benchmarks, benchstat-friendly: make bench COUNT=10 > new.txt
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) ./pkg/...

fuzz: ## Run each fuzz target for FUZZTIME.
	$(GO) test -run '^$$' -fuzz '^FuzzParseSnapshot$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/progress
	$(GO) test -run '^$$' -fuzz '^FuzzReadHistoryFile$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/progress
	$(GO) test -run '^$$' -fuzz '^FuzzReadPhillyTrace$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./simulator
	$(GO) test -run '^$$' -fuzz '^FuzzReadAlibabaTrace$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./simulator
	$(GO) test -run '^$$' -fuzz '^FuzzParseScenario$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./simulator
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalHistory$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/progress
	$(GO) test -run '^$$' -fuzz '^FuzzFitUntrustedHistory$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/forecast
	$(GO) test -run '^$$' -fuzz '^FuzzParsePolicy$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/preempt
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/plannerconfig
	$(GO) test -run '^$$' -fuzz '^FuzzParseObjectiveAnnotation$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/kueueext
	$(GO) test -run '^$$' -fuzz '^FuzzParseStopOptIn$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./pkg/kueueext

backtest: ## make backtest DATA=../shared/data/curves [CUTOFFS=...] [EVAL_EVERY=3: the fewer-evaluations stress test] [EVAL_PAUSE=30: the evaluation-pause stress test] [LOSS_EVERY=5: training-loss reports between evaluations] (no DATA: embedded synthetic examples)
	$(GO) run ./cmd/planner backtest --cutoffs $(CUTOFFS) --eval-every $(EVAL_EVERY) --eval-pause $(EVAL_PAUSE) --loss-every $(LOSS_EVERY) $(DATA)

backtest-stress: ## make backtest-stress DATA="../shared/data/curves _output/external-curves": the backtest as recorded and under every stress test and metamorphic check, with the forecast-trust bounds each run misses (docs/backtest.md 7.53)
	$(GO) run ./cmd/planner backtest --stress-battery $(DATA)

backtest-lodo: ## make backtest-lodo DATA=../shared/data/curves: each dataset's figures under constants chosen without it (docs/backtest.md 7.2)
	$(GO) run ./cmd/planner backtest --leave-one-dataset-out $(DATA)

external-curves: ## make external-curves [EXT_OUT=_output/external-curves]: recast the public YOLO and Lightning logs of test/external-curves as progress histories, then `make backtest DATA=$(EXT_OUT)` (docs/backtest.md 7.25)
	$(GO) run ./hack/extcurves -in test/external-curves -out $(EXT_OUT)

capacity-backtest: ## The capacity forecast's 1h-interval coverage on the built-in simulator scenario (docs/report.md).
	$(GO) run ./cmd/planner simulate --capacity-backtest

examples: ## Regenerate the synthetic example histories shipped in examples/.
	$(GO) run ./hack/gen-examples

CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1

generate: ## Generate the deepcopy code of api/ from its kubebuilder markers.
	$(CONTROLLER_GEN) object paths=./api/...

manifests: ## Generate the CRDs in config/crd/bases from the api/ types.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases

verify-generated: generate manifests ## Fail when the generated files differ from the committed ones.
	@out=$$(git status --porcelain -- 'api/*/zz_generated.deepcopy.go' config/crd/bases); \
	if [ -n "$$out" ]; then echo "$$out"; echo "generated files are stale: run make generate manifests and commit"; exit 1; fi

clean:
	rm -rf $(BIN)
