# Progress Planner — developer entry points. Every target is what CI and the
# docs run; numbers quoted in docs come from these commands.

GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
DATA    ?=
CUTOFFS ?= 0.25,0.5,0.75
BENCH   ?= .
COUNT   ?= 6
FUZZTIME ?= 30s

.PHONY: all build test unit vet fmt-check bench fuzz backtest examples clean

all: build

build: ## Build the planner binary into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/planner ./cmd/planner

test: vet fmt-check unit ## The full test suite (README's test command; .ci/run calls it).

unit: ## Unit tests: fast, no binaries, no shared data.
	$(GO) test -count=1 ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: ## Benchmarks, benchstat-friendly: make bench COUNT=10 > new.txt
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) ./pkg/...

fuzz: ## Run each fuzz target for FUZZTIME.
	$(GO) test -run '^$$' -fuzz '^FuzzParseSnapshot$$' -fuzztime $(FUZZTIME) ./pkg/forecast
	$(GO) test -run '^$$' -fuzz '^FuzzReadHistoryFile$$' -fuzztime $(FUZZTIME) ./pkg/forecast

backtest: ## make backtest DATA=../shared/data/curves [CUTOFFS=...] (no DATA: embedded synthetic examples)
	$(GO) run ./cmd/planner backtest --cutoffs $(CUTOFFS) $(DATA)

examples: ## Regenerate the synthetic example histories shipped in examples/.
	$(GO) run ./hack/gen-examples

clean:
	rm -rf $(BIN)
