# uncaged-workflow — see README.md. Every target works from a fresh clone.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/uncaged/workflow/shared/version.Version=$(VERSION)
PKGS      := ./...
# Every build that is not the race detector's — make build, lint, and the
# binaries the tests run — uses the Dockerfiles' settings (static, cgo off,
# -trimpath). Go caches a compiled package per set of settings, so on a
# fresh machine each package then compiles twice (these and -race), not
# three or four times.
SHIPPED   := CGO_ENABLED=0 GOFLAGS='$(GOFLAGS) -trimpath'

SHELL     := bash

.PHONY: build test go-test web web-deps web-test lint bench bench-full bench-engine bench-tunnel bench-load bench-load-quick bench-ops bench-ops-quick demo fuzz clean

## build: compile the binaries into bin/ (static, as the Dockerfiles build them).
## A first build compiles about 500 packages and takes several minutes; the
## count of packages compiled goes to stderr, and a build with nothing to
## compile prints nothing.
build:
	@mkdir -p $(BIN)
	$(SHIPPED) GO='$(GO)' ./deploy/demo/build-progress.sh -ldflags '$(LDFLAGS)' -o $(BIN)/ -- ./connector/cmd/uncaged-workflow ./gateway/cmd/uncaged-gateway

## demo: a gateway, a connector and a sample workflow on loopback (DEMO_PORT must be free; default 8080, or a free port when 8080 is taken)
demo: build
	./deploy/demo/run-demo.sh

## test: lint, the dashboard's tests and build check, and every Go test (race detector on), as CI runs it.
## The three run side by side: each leaves a core idle part of the time (a
## big package compiling alone, the longest test package finishing), and
## together they keep both busy. The dashboard's lines start with "web: ".
## Every test's events are kept in $(TESTJSON); the run ends with what was skipped
## and why. Under CI (CI set) a skipped test fails the run: CI installs everything.
TESTJSON ?= $(BIN)/test.json
# The dashboard's browser tests save a screenshot of each main view here, for
# a reviewer to look at; .ci/run lists them when the tests end.
E2E_SCREENSHOTS ?= $(CURDIR)/$(BIN)/screenshots
export E2E_SCREENSHOTS
test:
	@$(MAKE) --no-print-directory -j3 lint web-test go-test

## go-test: every Go test, race detector on, then the list of skipped tests
## (after web-deps: a test type-checks the scaffold with the dashboard's TypeScript)
go-test: web-deps
	@mkdir -p $(BIN)
	$(GO) tool gotestsum --format pkgname --jsonfile $(TESTJSON) -- -race -count=1 -timeout 20m $(PKGS)
	@skipped="$$(grep -c '"Action":"skip","Package":"[^"]*","Test":' $(TESTJSON) || true)"; \
	if [ "$$skipped" != 0 ]; then \
	  echo "$$skipped test(s) skipped; each one's reason is under === Skipped above"; \
	  if [ -n "$$CI" ]; then echo "CI runs every test: install what the skipped ones need (.ci/run)"; exit 1; fi; \
	fi

## web: rebuild the dashboard into gateway/web/dist (commit the result)
web:
	cd gateway/web && $(NPM_CI) && npm run build

# NPM_CI installs the dashboard's packages unless node_modules already holds
# exactly what package-lock.json names: npm ci first deletes node_modules,
# and the Go tests running beside web-test use its TypeScript compiler.
NPM_CI = { cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null || \
  { npm ci --no-audit --no-fund && cp package-lock.json node_modules/.installed-lock; }; }

## web-deps: the dashboard's packages (npm ci), unless node_modules already holds them
web-deps:
	@set -o pipefail; { cd gateway/web && $(NPM_CI); } 2>&1 | sed -u 's/^/web: /'

## web-test: the dashboard's unit tests, and a check that the committed build matches its source.
## It builds into a temporary directory: the Go tests running beside it embed gateway/web/dist.
web-test: web-deps
	@set -o pipefail; out="$$(mktemp -d)"; trap 'rm -rf "$$out"' EXIT; \
	{ cd gateway/web && npm test && npm run build -- --outDir "$$out" --emptyOutDir && \
	  if ! diff -r dist "$$out" >/dev/null; then \
	    echo "gateway/web/dist does not match its source (run make web and commit):"; diff -rq dist "$$out"; exit 1; \
	  fi; } 2>&1 | sed -u 's/^/web: /'

## lint: gofmt, go vet, staticcheck and errcheck (both pinned in go.mod as tools; errcheck's exceptions, with reasons, in .ci/errcheck-excludes)
lint:
	@unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(SHIPPED) $(GO) vet $(PKGS)
	$(SHIPPED) $(GO) tool staticcheck $(PKGS)
	$(SHIPPED) $(GO) tool errcheck -exclude .ci/errcheck-excludes $(PKGS)

## bench: storage benchmarks with ratios against in-run baselines (quick sizes)
bench:
	$(GO) run ./bench/cmd/storebench -threads 100000 -blobs 200000

## bench-tunnel: this tunnel vs frp (HTTP vhost and tcp), chisel and an nginx hop, each right after its own direct run
## (throughput, CPU, latency, 100 MB, RSS over time); about 10 minutes
bench-tunnel:
	$(GO) run ./bench/cmd/tunnelbench

## bench-load: 1,000 simulated connectors x 10 req/s x 60 s through a real gateway restarted mid-run,
## then 3 replicas over NATS with one killed (-9) mid-run; prints the cluster/single ratio line
bench-load:
	$(GO) run ./bench/cmd/loadtest -nats -chaos restart,kill-replica

## bench-load-quick: the same at a small size (100 x 5 req/s x 10 s)
bench-load-quick:
	$(GO) run ./bench/cmd/loadtest -quick -nats -chaos restart,kill-replica

## bench-ops: 3 replicas behind nginx, NATS, PostgreSQL, 3 connectors under load, through a rolling restart,
## kill -9 of the busiest replica, NATS and PostgreSQL stopped 30 s each; one line per fault, targets checked
bench-ops:
	$(GO) run ./bench/cmd/opsbench

## bench-ops-quick: the same with a short steady state and settling (≤ 5 minutes on 2 cores)
bench-ops-quick:
	$(GO) run ./bench/cmd/opsbench -quick

## bench-engine: CLI start vs hello-world, per-step overhead and fsyncs, bundle load, run-to-first-step and 2-step-thread latency,
## steps/s of 1, 8 and 32 threads of one workflow, live-stream latency and idle CPU through a gateway (-only cli|steps|run|scale|live)
bench-engine:
	$(GO) run ./bench/cmd/enginebench

## bench-full: the issue's full sizes (1M CAS blobs; needs ~5 GB of disk and a few minutes)
bench-full:
	$(GO) run ./bench/cmd/storebench -threads 100000 -blobs 1000000

## fuzz: run each fuzz target for a while (FUZZTIME=30s by default)
FUZZTIME ?= 30s
# Go minimizes every input that finds new coverage for up to -fuzzminimizetime
# (60s by default), fuzzing nothing new meanwhile: runs showed 0 execs/s for
# most of their time. A second each keeps the fuzzers fuzzing; a failing
# input is still saved, minimized as far as that second got (raise
# FUZZMINIMIZETIME to shrink one further).
FUZZMINIMIZETIME ?= 1s
FUZZFLAGS = -run=^$$ -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZETIME)
# fuzz-one runs target $(1) of package $(2). Go 1.26's fuzzing coordinator
# can report "context deadline exceeded" as -fuzztime runs out, more often
# on a busy machine (go.dev/issue/75804, fixed in Go 1.27): a run that
# ends so without writing a failing input found nothing and passes.
define fuzz-one
	@log=$$(mktemp); rc=$$(mktemp); \
	{ $(GO) test $(FUZZFLAGS) -fuzz='^$(1)$$' $(2) 2>&1; echo $$? >$$rc; } | tee $$log; \
	status=$$(cat $$rc); \
	if [ "$$status" != 0 ] && grep -qx '    context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
		echo "$(1): only Go's end-of-fuzztime race (go.dev/issue/75804), no failing input: passed"; status=0; \
	fi; \
	rm -f $$log $$rc; exit $$status
endef
fuzz:
	$(call fuzz-one,FuzzParseHash,./engine/ids)
	$(call fuzz-one,FuzzParse,./engine/node)
	$(call fuzz-one,FuzzMarshalRoundTrip,./engine/canonyaml)
	$(call fuzz-one,FuzzIndexFastPathAgrees,./engine/threads)
	$(call fuzz-one,FuzzHistoryFastPathAgrees,./engine/threads)
	$(call fuzz-one,FuzzLoad,./engine/jsrt)
	$(call fuzz-one,FuzzVerify,./gateway/auth)
	$(call fuzz-one,FuzzMalformedMessages,./gateway/auth)
	$(call fuzz-one,FuzzLegacyFrame,./gateway/legacy)
	$(call fuzz-one,FuzzThreadRunBody,./connector/api)
	$(call fuzz-one,FuzzParseResponse,./engine/agents/llm)
	$(call fuzz-one,FuzzReadStream,./engine/agents/llm)
	$(call fuzz-one,FuzzParse,./engine/yamlwf)
	$(call fuzz-one,FuzzFrom,./shared/requestid)
	$(call fuzz-one,FuzzDecode,./gateway/cluster)
	$(call fuzz-one,FuzzVerifyHop,./gateway/cluster)
	$(call fuzz-one,FuzzDelivery,./gateway/trigger)
	STORAGE_DAMAGE_CASES=1000 STORAGE_DAMAGE_SEED=random $(GO) test -count=1 -timeout 30m -run '^TestRandomDamageNeverCostsANamedNode$$' ./engine/gc

clean:
	rm -rf $(BIN)
