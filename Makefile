# remotestorage: Kafka tiered-storage metadata in PostgreSQL.
# `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
SQLC_VERSION := v1.31.1
BIN := $(CURDIR)/bin
SQLC := $(BIN)/sqlc-$(SQLC_VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
TEST_FLAGS ?= -race -count=1 -timeout 20m
FUZZTIME ?= 15s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: demo
demo: pg-user ## Run the demo workload (a throwaway PostgreSQL unless DATABASE_URL is set).
	$(GO) run ./cmd/rlmmctl demo

.PHONY: test-deps-chromium
test-deps-chromium: # The plot test renders SVG with headless chromium (Debian's package); it fails without it.
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then $$SUDO apt-get update -qq; fi; \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

.PHONY: test
test: pg-user test-deps test-deps-chromium ## Run every test with the race detector (provisions its own PostgreSQL; installs pgbouncer and chromium when missing).
	$(GO) test $(TEST_FLAGS) ./...

.PHONY: fuzz
fuzz: pg-user ## Run each fuzz target briefly (FUZZTIME=15s).
	@set -e; for target in $$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/func //' | sort -u); do \
		pkg=$$(grep -rlE "^func $$target\(" --include='*_test.go' . | head -n1 | xargs dirname); \
		echo "fuzz $$target in $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint (.golangci.yml: the standard linters and depguard).
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^internal/db/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

# Built from source with the local Go (about 3 minutes cold), as sqlc is.
$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $(GOLANGCI_LINT)

$(SQLC):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	mv $(BIN)/sqlc $(SQLC)

.PHONY: generate
generate: $(SQLC) ## Regenerate internal/db/ from queries/ and migrations/ with sqlc.
	$(SQLC) generate

.PHONY: check-generated
check-generated: $(SQLC) ## Fail when internal/db/ differs from what sqlc generates.
	$(SQLC) diff

.PHONY: test-deps
test-deps: # The tests run a real PgBouncer (Debian's package): install it when missing.
	@if [ ! -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then \
		echo "installing pgbouncer (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq pgbouncer >/dev/null; \
	fi

.PHONY: pg-user
pg-user: # PostgreSQL refuses to run as root: make sure the unprivileged user exists.
	@if [ "$$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then useradd --system --user-group --no-create-home postgres; fi

.PHONY: db-up
db-up: ## Start PostgreSQL in Docker (docker compose); then export DATABASE_URL=postgres://rlmm:rlmm@localhost:5432/rlmm?sslmode=disable
	docker compose up -d --wait

.PHONY: db-down
db-down: ## Stop the Docker PostgreSQL and delete its data.
	docker compose down -v

.PHONY: psql
psql: ## Open psql on DATABASE_URL (or the Docker database).
	psql "$${DATABASE_URL:-postgres://rlmm:rlmm@localhost:5432/rlmm?sslmode=disable}"

.PHONY: ci
ci: lint check-generated test fuzz ## What .ci/run runs.

.PHONY: bench
bench: pg-user ## Benchmark every operation against the database's own limit at 1M segments, then a fresh never-analyzed database (~11 min; BENCH_FLAGS=-segments=10000000 for 10M).
	$(GO) run ./cmd/rlmmbench $(BENCH_FLAGS)
	$(MAKE) bench-fresh
	$(MAKE) bench-ready

.PHONY: bench-ready
bench-ready: pg-user ## A broker with WithCache ready on 1,000 partitions of 1,000 segments: time, heap per segment, cost to others (~1 min).
	$(GO) test -run '^$$' -bench '^BenchmarkCacheReady1M$$' -benchtime 1x -timeout 20m .

.PHONY: bench-fresh
bench-fresh: pg-user ## Benchmark a freshly written, never-analyzed database: reads, writes with WAL bytes, cross-broker freshness (~1 min).
	$(GO) test -run '^$$' -bench '^BenchmarkFresh$$' -benchtime $${BENCHTIME:-3s} .

.PHONY: soak
soak: pg-user ## Soak: 5 minutes of mixed traffic at 8 clients, p99 and memory per minute (SOAK_FLAGS=-soak-duration=1m).
	$(GO) run ./cmd/rlmmbench -soak $(SOAK_FLAGS)

.PHONY: reliability-soak
reliability-soak: pg-user ## Longer linearizability and differential runs (RELIABILITY_SOAK=1); figures in docs/RELIABILITY.md.
	RELIABILITY_SOAK=1 $(GO) test -race -count=1 -timeout 40m -v -run 'Linearizable|Differential' ./reliability/
