# payguard's developer entry points. `make demo` runs the main job,
# `make ci` runs every check and test (the README's test command).

SHELL := /bin/bash
export GOTOOLCHAIN := local
BIN := $(CURDIR)/bin

TEMPORAL_CLI_VERSION := v1.5.1
STATICCHECK_VERSION  := v0.8.2
WORKFLOWCHECK_VERSION := v0.6.0
# The load client of make demo-vegeta (docs/decisions/025).
VEGETA_VERSION := v12.13.0
# The real Temporal server and its SQL tool (internal/temporalserver.Version).
TEMPORAL_SERVER_VERSION := v1.29.1

TEMPORAL      := $(BIN)/temporal
STATICCHECK   := $(BIN)/staticcheck
WORKFLOWCHECK := $(BIN)/workflowcheck
TEMPORAL_SERVER   := $(BIN)/temporal-server
TEMPORAL_SQL_TOOL := $(BIN)/temporal-sql-tool
VEGETA        := $(BIN)/vegeta

.PHONY: help tools docker-compose temporal-server-bin temporal-server test-server postgres codec-key check fmt-check vet staticcheck workflowcheck test test-short ci build demo demo-api demo-vegeta vegeta chaos chaos-ci bench dev-server pgsim worker record-histories config-doc chromium promtool

help:
	@echo "make demo   - the outage demo on the real stack (see README)"
	@echo "make demo-api - the same outage, every order placed through the HTTP order API"
	@echo "make demo-vegeta - the same outage through the API, load sent and timed by vegeta (the article's k6 test)"
	@echo "make ci     - formatting, vet, staticcheck, workflowcheck and all tests"
	@echo "make test-short - the tests that need no service (PostgreSQL, Temporal, Chromium, promtool), for the edit-test loop"
	@echo "make build  - build pgsim, worker and starter into bin/"
	@echo "make chaos  - seeded faults on the real stack, books checked (SEED=1 SEEDS=20 CHAOS_ARGS=...)"
	@echo "make codec-key - a development payload codec key in $(CODEC_KEY_FILE) (the demo makes one itself)"
	@echo "make bench  - payguard beside a no-op workflow on one stack: table, bench-out/report.json, report.svg (BENCH_ARGS=...)"
	@echo "make config-doc - regenerate docs/configuration.md from the programs' flag sets"
	@echo "make temporal-server - the real Temporal server on the local PostgreSQL, 127.0.0.1:7243 (docs/operations.md)"
	@echo "make test-server - the outage e2e and one chaos seed on the real Temporal server (part of make ci)"

$(TEMPORAL):
	@echo "Building the temporal CLI $(TEMPORAL_CLI_VERSION) (first time: 2-3 minutes)..."
	GOBIN=$(BIN) go install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# The real Temporal server and temporal-sql-tool, built from the server's
# module (first time: ~6 minutes on 2 cores). go install names them after
# their packages (server, sql): each is built into a directory of its own
# and renamed.
$(TEMPORAL_SERVER):
	@echo "Building the Temporal server $(TEMPORAL_SERVER_VERSION) (first time: ~6 minutes on 2 cores)..."
	@tmp=$$(mktemp -d) && GOBIN=$$tmp go install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) && \
		mkdir -p $(BIN) && mv $$tmp/server $@ && rmdir $$tmp

$(TEMPORAL_SQL_TOOL):
	@tmp=$$(mktemp -d) && GOBIN=$$tmp go install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && \
		mkdir -p $(BIN) && mv $$tmp/sql $@ && rmdir $$tmp

temporal-server-bin: $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL)

$(VEGETA):
	GOBIN=$(BIN) go install github.com/tsenart/vegeta/v12@$(VEGETA_VERSION)

vegeta: $(VEGETA)

$(STATICCHECK):
	GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(WORKFLOWCHECK):
	GOBIN=$(BIN) go install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

tools: $(TEMPORAL) $(STATICCHECK) $(WORKFLOWCHECK)

postgres:
	@scripts/ensure-postgres.sh

# A development key ring for the payload codec (codec.DevKeyFile, which the
# worker and starter read when neither PAYGUARD_CODEC_KEYS nor
# PAYGUARD_CODEC_KEY_FILE is set), made once and kept: payloads written
# with it must stay readable. Never for production.
CODEC_KEY_FILE ?= .payguard/codec-keys
codec-key:
	@if [ ! -s "$(CODEC_KEY_FILE)" ]; then \
		mkdir -p "$$(dirname "$(CODEC_KEY_FILE)")" && (umask 077; { \
		echo "# payguard development payload codec keys, generated on first use: never commit,"; \
		echo "# never use in production. First line encrypts; every line decrypts."; \
		echo "dev-1:$$(head -c 32 /dev/urandom | base64)"; } > "$(CODEC_KEY_FILE)") && \
		echo "Generated a development payload codec key in $(CODEC_KEY_FILE)."; fi

# Debian's Chromium for the Temporal UI test (headless, driven by chromedp).
chromium:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "Installing Debian's chromium for the UI test..."; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null || \
		{ echo "could not install chromium (run as root: apt-get install chromium)" >&2; exit 1; }; \
	else echo "Chromium is needed for the UI test: install it (Debian: apt-get install chromium)" >&2; exit 1; fi

# Debian's docker-compose (v1) for the compose test: `docker-compose config`
# validates docker-compose.yml without a Docker engine (compose_temporal_test.go).
docker-compose:
	@if command -v docker-compose >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "Installing Debian's docker-compose for the compose test..."; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose) >/dev/null || \
		{ echo "could not install docker-compose (run as root: apt-get install docker-compose)" >&2; exit 1; }; \
	else echo "docker-compose is needed for the compose test: install it (Debian: apt-get install docker-compose)" >&2; exit 1; fi

# Debian's prometheus package for promtool, which checks ops/prometheus and
# runs its alert rule tests (ops/prometheus/rules_test.go).
promtool:
	@if command -v promtool >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "Installing Debian's prometheus (for promtool) for the alert rule tests..."; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) >/dev/null || \
		{ echo "could not install prometheus (run as root: apt-get install prometheus)" >&2; exit 1; }; \
	else echo "promtool is needed for the alert rule tests: install Prometheus (Debian: apt-get install prometheus)" >&2; exit 1; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

workflowcheck: $(WORKFLOWCHECK)
	$(WORKFLOWCHECK) ./workflows/...

check: fmt-check vet staticcheck workflowcheck

# e2e runs after the other packages, not beside them: its outage scenario
# times a circuit breaker against a worker under the race detector, which a
# 2-core machine shared with the other test binaries cannot keep on time.
test: $(TEMPORAL) $(VEGETA) temporal-server-bin postgres chromium promtool docker-compose
	PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) PAYGUARD_VEGETA=$(VEGETA) go test -race -count=1 -timeout 20m $$(go list ./... | grep -v '/e2e$$')
	PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) go test -race -count=1 -timeout 20m ./e2e/

# The edit-test loop: workflow unit tests, the gateway client, pgsim, config,
# everything that needs no service (PostgreSQL, Temporal, Chromium), in about a minute.
test-short:
	go test -short -count=1 ./...

ci: tools postgres check test chaos-ci test-server

build:
	go build -o $(BIN)/ ./pgsim ./worker ./starter ./api ./demo ./chaos

# The main job: the outage demo on a real local stack (DEMO_EXIT=1 to exit when done).
demo: $(TEMPORAL) postgres build
	$(BIN)/demo $(DEMO_ARGS)

# The same outage with every order placed through the HTTP order API.
demo-api: $(TEMPORAL) postgres build
	$(BIN)/demo --via api --out demo-api-out $(DEMO_ARGS)

# The same through a real load client: vegeta paces and sends the POSTs and
# times the answers, its report printed beside the demo's (docs/decisions/025).
demo-vegeta: $(TEMPORAL) $(VEGETA) postgres build
	$(BIN)/demo --via vegeta --out demo-vegeta-out $(DEMO_ARGS)

# Chaos: SEEDS runs from SEED on, each with its own stack; exit 1 if any
# run found a violation (chaos-out/report.json, or chaos-out/seed-N/ for a soak).
SEED  ?= 1
SEEDS ?= 1
CHAOS_ARGS ?=
chaos: $(TEMPORAL) postgres build
	@fail=0; for s in $$(seq $(SEED) $$(( $(SEED) + $(SEEDS) - 1 ))); do \
		out=chaos-out; [ $(SEEDS) -gt 1 ] && out=chaos-out/seed-$$s; \
		PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) $(BIN)/chaos --seed $$s --bin $(BIN) --out $$out $(CHAOS_ARGS) || fail=1; \
	done; exit $$fail

# The short seeded run `make ci` includes (~2 minutes); CHAOS_CI_ARGS adds
# flags (test-server's --temporal server).
CHAOS_CI_ARGS ?=
chaos-ci:
	$(MAKE) chaos SEED=1 SEEDS=1 CHAOS_ARGS="--duration 40s --rate 2 --order-deadline 30s --settle 2m $(CHAOS_CI_ARGS)"

# The real Temporal server on the local PostgreSQL (databases temporal and
# temporal_visibility, set up on first use), 127.0.0.1:7243, until Ctrl-C.
temporal-server: temporal-server-bin postgres
	go run ./internal/temporalserver/serve

# The outage e2e and one chaos seed on the real Temporal server, each on
# databases of its own (~3 minutes).
test-server: $(TEMPORAL) temporal-server-bin postgres build
	PAYGUARD_TEMPORAL=server PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) go test -race -count=1 -timeout 10m \
		-run '^(TestGatewayOutageLifecycle|TestTemporalIsTheKindAsked)$$' ./e2e/
	$(MAKE) chaos-ci CHAOS_CI_ARGS="--temporal server --out chaos-server-out"

# The benchmark (docs/design.md §11, docs/bench.md): its own stack, ~6 minutes; BENCH_ARGS
# takes its flags (--quick, --waiting-10k, --worker-args "...", --label L).
BENCH_ARGS ?=
bench: $(TEMPORAL) postgres build
	PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) go run ./bench --bin $(BIN) --out bench-out $(BENCH_ARGS)

# Re-record workflows/testdata from real runs of each workflow path.
record-histories: $(TEMPORAL) postgres
	PAYGUARD_RECORD_HISTORIES=1 PAYGUARD_TEST_CODEC_KEY_FILE=$(CURDIR)/workflows/testdata/codec-test-keys PAYGUARD_TEMPORAL_CLI=$(TEMPORAL) go test -count=1 -run TestRecordReplayHistories ./e2e/

# docs/configuration.md from every program's flag set; its test
# (internal/configdoc) fails when the two differ. Without VCS stamping, as
# a test binary is built, so both see the same build.
config-doc:
	go run -buildvcs=false ./internal/configdoc -o docs/configuration.md

# The pieces of the stack, one per terminal, for running it by hand.
dev-server: $(TEMPORAL)
	scripts/dev-server.sh

pgsim:
	go run ./pgsim

# One build at a time on a dev server that keeps its history: each start
# makes this build current, so new orders reach it (docs/rollout.md).
worker: postgres codec-key
	go run ./worker --set-current always
