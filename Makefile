# uncaged-workflow — see README.md. Every target works from a fresh clone.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/uncaged/workflow/shared/version.Version=$(VERSION)
PKGS      := ./...

.PHONY: build test web web-test lint bench bench-full bench-engine bench-tunnel bench-load bench-load-quick demo fuzz clean

## build: compile the binaries into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/uncaged-workflow ./connector/cmd/uncaged-workflow
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/uncaged-gateway ./gateway/cmd/uncaged-gateway

## demo: a gateway, a connector and a sample workflow on loopback (DEMO_PORT, default 8080)
demo: build
	./deploy/demo/run-demo.sh

## test: lint, the dashboard's tests and build check, then every Go test (race detector on), as CI runs it
test: lint web-test
	$(GO) test -race -count=1 $(PKGS)

## web: rebuild the dashboard into gateway/web/dist (commit the result)
web:
	cd gateway/web && npm ci --no-audit --no-fund && npm run build

## web-test: the dashboard's unit tests, and a check that the committed build matches its source
web-test:
	cd gateway/web && npm ci --no-audit --no-fund && npm test && npm run build
	@stale="$$(git status --porcelain -- gateway/web/dist)"; \
	if [ -n "$$stale" ]; then echo "gateway/web/dist does not match its source (run make web and commit):"; echo "$$stale"; exit 1; fi

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: storage benchmarks with ratios against in-run baselines (quick sizes)
bench:
	$(GO) run ./bench/cmd/storebench -threads 100000 -blobs 200000

## bench-tunnel: gateway + tunnel vs direct (throughput, CPU, latency, memory per idle connector)
bench-tunnel:
	$(GO) run ./bench/cmd/tunnelbench

## bench-load: 1,000 simulated connectors x 10 req/s x 60 s through a real gateway restarted mid-run,
## then 3 replicas over NATS with one killed (-9) mid-run; prints the cluster/single ratio line
bench-load:
	$(GO) run ./bench/cmd/loadtest -nats -chaos restart,kill-replica

## bench-load-quick: the same at a small size (100 x 5 req/s x 10 s)
bench-load-quick:
	$(GO) run ./bench/cmd/loadtest -quick -nats -chaos restart,kill-replica

## bench-engine: per-step overhead, bundle load and run-to-first-step latency
bench-engine:
	$(GO) run ./bench/cmd/enginebench

## bench-full: the issue's full sizes (1M CAS blobs; needs ~5 GB of disk and a few minutes)
bench-full:
	$(GO) run ./bench/cmd/storebench -threads 100000 -blobs 1000000

## fuzz: run each fuzz target for a while (FUZZTIME=30s by default)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run=^$$ -fuzz=FuzzParseHash -fuzztime=$(FUZZTIME) ./engine/ids
	$(GO) test -run=^$$ -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./engine/node
	$(GO) test -run=^$$ -fuzz=FuzzMarshalRoundTrip -fuzztime=$(FUZZTIME) ./engine/canonyaml
	$(GO) test -run=^$$ -fuzz=FuzzIndexFastPathAgrees -fuzztime=$(FUZZTIME) ./engine/threads
	$(GO) test -run=^$$ -fuzz=FuzzHistoryFastPathAgrees -fuzztime=$(FUZZTIME) ./engine/threads
	$(GO) test -run=^$$ -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) ./engine/jsrt
	$(GO) test -run=^$$ -fuzz=FuzzVerify -fuzztime=$(FUZZTIME) ./gateway/auth
	$(GO) test -run=^$$ -fuzz=FuzzLegacyFrame -fuzztime=$(FUZZTIME) ./gateway/legacy
	$(GO) test -run=^$$ -fuzz=FuzzThreadRunBody -fuzztime=$(FUZZTIME) ./connector/api
	$(GO) test -run=^$$ -fuzz=FuzzParseResponse -fuzztime=$(FUZZTIME) ./engine/agents/llm
	$(GO) test -run=^$$ -fuzz=FuzzReadStream -fuzztime=$(FUZZTIME) ./engine/agents/llm
	$(GO) test -run=^$$ -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./engine/yamlwf
	$(GO) test -run=^$$ -fuzz=FuzzFrom -fuzztime=$(FUZZTIME) ./shared/requestid
	$(GO) test -run=^$$ -fuzz=FuzzDecode -fuzztime=$(FUZZTIME) ./gateway/cluster
	$(GO) test -run=^$$ -fuzz=FuzzVerifyHop -fuzztime=$(FUZZTIME) ./gateway/cluster

clean:
	rm -rf $(BIN)
