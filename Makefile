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
demo: pg-user pg-deps ## Run the demo workload (a throwaway PostgreSQL unless DATABASE_URL is set; RLMM_PG_VERSION picks its version).
	$(GO) run ./cmd/rlmmctl demo

.PHONY: test-deps-chromium
test-deps-chromium: # The plot test renders SVG with headless chromium (Debian's package); it fails without it.
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then $$SUDO apt-get update -qq; fi; \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

.PHONY: test
test: pg-user pg-deps test-deps test-deps-chromium ## Run every test with the race detector (provisions its own PostgreSQL, RLMM_PG_VERSION or 18; installs pgbouncer and chromium when missing).
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
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -vE '^(db|cmd/rlmmctl/internal/ctldb)/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
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

# The baseline migration is generated too: migrations/release_1/'s parts,
# joined into migrations/00019_release_1.sql (migrations/baseline_test.go).
BASELINE_TEST := $(GO) test -count=1 -run '^TestBaselineIsItsParts$$' ./migrations

.PHONY: generate
generate: $(SQLC) generate-proto ## Regenerate the baseline migration from its parts, db/ and cmd/rlmmctl/internal/ctldb/ (sqlc.yaml's two targets) and the gRPC code of proto/ (protoc).
	$(BASELINE_TEST) -update
	$(SQLC) generate

.PHONY: check-generated
check-generated: $(SQLC) check-generated-proto ## Fail when the baseline migration, db/, cmd/rlmmctl/internal/ctldb/ or proto/'s Go code differs from what its parts, sqlc and protoc generate.
	$(BASELINE_TEST)
	$(SQLC) diff

.PHONY: test-deps
test-deps: # The tests run a real PgBouncer, and fail the network with nftables (Debian's packages): install them when missing.
	@missing=; \
	if [ ! -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then missing="$$missing pgbouncer"; fi; \
	if [ ! -x /usr/sbin/nft ] && ! command -v nft >/dev/null 2>&1; then missing="$$missing nftables"; fi; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The throwaway servers run the embedded PostgreSQL binaries, which mvn
# fetches from Maven Central (internal/pgcluster, docs/TESTING.md); the
# bundles hold only the server, so psql and pg_dump come from Debian's
# postgresql-client-15 (pg_dump 15 writes schema.sql). Install both when
# missing. No server package is needed.
.PHONY: pg-deps
pg-deps:
	@missing=; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	[ -x /usr/lib/postgresql/15/bin/pg_dump ] && [ -x /usr/lib/postgresql/15/bin/psql ] || missing="$$missing postgresql-client-15"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

.PHONY: pg-user
pg-user: # PostgreSQL refuses to run as root: make sure the unprivileged user exists.
	@if [ "$$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then useradd --system --user-group --no-create-home postgres; fi

.PHONY: psql
psql: ## Open psql on DATABASE_URL (or the Docker database).
	psql "$${DATABASE_URL:-postgres://rlmm:rlmm@localhost:5432/rlmm?sslmode=disable}"

# ---- PostgreSQL versions: the default runs everything (make test and the
# Kafka and Rust suites); pg-matrix runs, on each version, what a version
# can change (docs/OPERATIONS.md's table of supported versions): the
# migrations (from empty; from the pre-release schema through release 1
# under live brokers), the conformance suite and the randomized model, the
# plan tests in both plan-cache modes, the repair functions and the roles,
# the cache's change feed with two brokers, standbys, and one Kafka line
# end to end on the fixture of that version.
PG_MATRIX_VERSIONS ?= 15 16 17 18
PG_MATRIX_KAFKA ?= 4.4.0
PG_MATRIX_ROOT := Conformance|Plans|RepairFunctions|CacheHonestThroughDBARepairs|CacheFollowsAPartitionDeleted|CacheCrossBroker|CacheMissedNotification|Replica|TestedServer
PG_MATRIX_GO = RLMM_PG_VERSION=$$v PGTEST_ROUTE=local $(GO) test $(TEST_FLAGS)

.PHONY: pg-matrix
pg-matrix: pg-user pg-deps ## On each of PostgreSQL 15 to 18 (PG_MATRIX_VERSIONS): migrations, conformance, plans, repairs, roles, the change feed, standbys, one Kafka line (~10 min a version).
	set -e; for v in $(PG_MATRIX_VERSIONS); do \
		echo "pg-matrix: PostgreSQL $$v"; \
		$(PG_MATRIX_GO) ./migrations ./rlmmtest ./internal/pgcluster; \
		$(PG_MATRIX_GO) -run '$(PG_MATRIX_ROOT)' .; \
		$(PG_MATRIX_GO) -run 'Differential|Linearizab' ./reliability; \
		$(PG_MATRIX_GO) -run 'Roles|MigrateSQL' ./cmd/rlmmctl; \
		RLMM_PG_VERSION=$$v $(MAKE) --no-print-directory kafka-matrix KAFKA_MATRIX_VERSIONS=$(PG_MATRIX_KAFKA) KAFKA_MATRIX_ROLL_VERSIONS=; \
	done

.PHONY: ci
ci: lint check-generated test fuzz kafka-e2e kafka-contract kafka-matrix rust-test pg-matrix ## What .ci/run runs (which also runs the container and DATABASE_URL routes: docs/TESTING.md).

.PHONY: bench
bench: pg-user ## Benchmark every operation against the database's own limit at 1M segments, then a fresh never-analyzed database (~11 min; BENCH_FLAGS=-segments=10000000 for 10M).
	$(GO) run ./cmd/rlmmbench $(BENCH_FLAGS)
	$(MAKE) bench-fresh
	$(MAKE) bench-ready

.PHONY: bench-ready
bench-ready: pg-user ## A broker with WithCache ready on 1,000 partitions of 1,000 segments: time, heap per segment, cost to others (~1 min).
	$(GO) test -run '^$$' -bench '^BenchmarkCacheReady1M$$' -benchtime 1x -timeout 20m ./bench

.PHONY: bench-fresh
bench-fresh: pg-user ## Benchmark a freshly written, never-analyzed database: reads, writes with WAL bytes, cross-broker freshness (~1 min).
	$(GO) test -run '^$$' -bench '^BenchmarkFresh$$' -benchtime $${BENCHTIME:-3s} ./bench

.PHONY: bench-inkless
bench-inkless: pg-user ## Add + finish next to an emulation of Inkless's PostgreSQL RLMM and two raw UPDATE commits, at 1, 8 and 32 clients (~1.5 min).
	$(GO) test -run '^$$' -bench '^BenchmarkInklessWrites$$' -benchtime $${BENCHTIME:-3s} ./bench

.PHONY: bench-month
bench-month: pg-user ## A month of churn scaled down, autovacuum at its defaults, purging in the background: size, writes, lookups at start and end (~4 min).
	$(GO) test -run '^$$' -bench '^BenchmarkMonthOfChurn$$' -benchtime 1x -timeout 30m ./bench

.PHONY: soak
soak: pg-user ## Soak: 5 minutes of mixed traffic at 8 clients, p99 and memory per minute (SOAK_FLAGS=-soak-duration=1m).
	$(GO) run ./cmd/rlmmbench -soak $(SOAK_FLAGS)

.PHONY: reliability-soak
reliability-soak: pg-user ## Longer linearizability and differential runs (RELIABILITY_SOAK=1); figures in docs/RELIABILITY.md.
	RELIABILITY_SOAK=1 $(GO) test -race -count=1 -timeout 40m -v -run 'Linearizable|Differential' ./reliability/

# ---- schema.sql: the schema the migrations build, checked in for readers ----
# sqlc reads migrations/, not this file (docs/MIGRATIONS.md says why); the
# test below migrates an empty database with remotestorage.Migrate, dumps it
# with pg_dump --schema-only and compares the normalized text.

.PHONY: schema
schema: pg-user pg-deps ## Rewrite schema.sql from the migrations (pg_dump 15 on a throwaway PostgreSQL 15, whatever RLMM_PG_VERSION says).
	$(GO) test -count=1 -run '^TestSchemaSQLMatchesMigrations$$' ./internal/schemadump -update

.PHONY: check-schema
check-schema: pg-user pg-deps ## Fail when schema.sql differs from what the migrations build.
	$(GO) test -count=1 -run '^TestSchemaSQLMatchesMigrations$$' ./internal/schemadump

check-generated: check-schema

# --- gRPC service (rlmmd) and Kafka plugin -----------------------------------
# protoc comes from Maven Central (the same compiler the Kafka plugin's build
# uses), the Go plugins from the Go module proxy; all pinned.
PROTOC_VERSION := 4.36.2
PROTOC := $(BIN)/protoc-$(PROTOC_VERSION)
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO := $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTOC_GEN_GO_GRPC := $(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
PROTO_FILES := $(shell find proto -name '*.proto' | sort)
MVN ?= mvn -B -q

$(PROTOC):
	@mkdir -p $(BIN)
	$(MVN) dependency:copy -Dartifact=com.google.protobuf:protoc:$(PROTOC_VERSION):exe:linux-x86_64 -DoutputDirectory=$(BIN) -Dmdep.stripVersion=false
	mv $(BIN)/protoc-$(PROTOC_VERSION)-linux-x86_64.exe $(PROTOC)
	chmod +x $(PROTOC)

$(PROTOC_GEN_GO):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	mv $(BIN)/protoc-gen-go $(PROTOC_GEN_GO)

$(PROTOC_GEN_GO_GRPC):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	mv $(BIN)/protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC)

# protoc-go OUT: the Go code of proto/ into OUT (paths relative to proto/).
define protoc-go
	$(PROTOC) -I proto \
		--plugin=protoc-gen-go=$(PROTOC_GEN_GO) --go_out=$(1) --go_opt=paths=source_relative \
		--plugin=protoc-gen-go-grpc=$(PROTOC_GEN_GO_GRPC) --go-grpc_out=$(1) --go-grpc_opt=paths=source_relative \
		$(patsubst proto/%,%,$(PROTO_FILES))
endef

.PHONY: generate-proto
generate-proto: $(PROTOC) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) # Regenerate proto/'s Go code.
	$(call protoc-go,proto)

.PHONY: check-generated-proto
check-generated-proto: $(PROTOC) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) # Fail when proto/'s Go code is stale or hand-edited.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(call protoc-go,$$tmp) && \
	for f in $$(cd $$tmp && find . -name '*.go'); do \
		cmp -s "$$tmp/$$f" "proto/$$f" || { echo "proto/$$f differs from what protoc generates: run make generate"; exit 1; }; \
	done; \
	for f in $$(cd proto && find . -name '*.pb.go'); do \
		[ -f "$$tmp/$$f" ] || { echo "proto/$$f has no .proto: run make generate"; exit 1; }; \
	done

# grpcnotrace: see kafka/embed-rlmmd.sh.
BUILD_RLMMD = $(GO) build -tags grpcnotrace -o $(BIN)/rlmmd ./cmd/rlmmd

.PHONY: rlmmd
rlmmd: ## Build rlmmd, the gRPC service (bin/rlmmd).
	$(BUILD_RLMMD)

KAFKA_JAR := kafka/target/remotestorage-kafka-0.1.0.jar

.PHONY: kafka
kafka: ## Build the Kafka plugin's shaded jar (kafka/target/remotestorage-kafka-0.1.0.jar) with rlmmd for linux/amd64 and linux/arm64 inside; its tests run in kafka-e2e.
	cd kafka && $(MVN) package

.PHONY: kafka-e2e
kafka-e2e: pg-user ## Kafka 4.4 brokers (in process) with the plugin in the embedded mode and a throwaway PostgreSQL, end to end, the import from Kafka's topic-based manager, then the end-to-end steps again in the sidecar mode (~12 min; Maven fetches Kafka).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmmctl ./cmd/rlmmctl
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN)
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Drlmm.e2e.mode=sidecar \
		-Dit.test=KafkaTieredStorageIT -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false -Dfailsafe.failIfNoSpecifiedTests=false

# `make kafka-roll`: the rolling switch from Kafka's topic-based manager onto
# the plugin and back, on three brokers (RollingSwitchIT); kafka-e2e runs it
# among the other suites, kafka-matrix on KAFKA_MATRIX_ROLL_VERSIONS too.
.PHONY: kafka-roll
kafka-roll: pg-user ## The rolling switch of three Kafka 4.4 brokers from the topic-based manager onto the plugin and back, with producer and consumer running (~3 min).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Dit.test=RollingSwitchIT -Dfailsafe.failIfNoSpecifiedTests=false

# `make kafka-import`: the import and verify of Kafka's topic-based metadata
# (TbrlmmImportIT) alone; kafka-e2e runs it among the other suites.
.PHONY: kafka-import
kafka-import: pg-user ## Import and verify of Kafka's topic-based metadata (__remote_log_metadata) into the store, against an in-process broker, rlmmd and a throwaway PostgreSQL (~2 min).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Dit.test=TbrlmmImportIT -Dfailsafe.failIfNoSpecifiedTests=false

.PHONY: kafka-import-bench
kafka-import-bench: pg-user ## The import's and verify's throughput on a metadata topic of about 12,000 records (bench.partitions, bench.segments; ~3 min).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Dit.test=TbrlmmImportBench -Dfailsafe.failIfNoSpecifiedTests=false

# `make kafka-readiness-bench H=100000,1000000,10000000 LIVE=40000`: one broker's
# time to ready after a restart with TBRLMM and with the plugin, at each
# history size H (docs/BENCHMARKS.md). The plot goes to READINESS_SVG, each
# result line to kafka/target/readiness.txt too.
H ?= 100000,1000000,10000000
LIVE ?= 40000
READINESS_SVG ?= $(CURDIR)/docs/readiness.svg
.PHONY: kafka-readiness-bench
kafka-readiness-bench: pg-user ## Restart readiness (isReady, first remote fetch) and metadata memory, TBRLMM against the plugin, at history sizes H, the live set fixed (~15 min at the default H).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Dit.test=ReadinessBench -Dfailsafe.failIfNoSpecifiedTests=false -Dbench.records=$(H) -Dbench.live=$(LIVE) -Dbench.svg=$(READINESS_SVG)

# `make kafka-matrix`: the end-to-end suite's brokers on the newest patch of
# each Kafka line from 3.9, all loading the one plugin jar built against
# 4.4.0. -Dkafka.line picks the line's test kit (kafka/pom.xml). Every line
# runs every step but brokerRestart (make kafka-e2e runs it on 4.4.0), and
# the mirror's suite. The rolling switch runs on KAFKA_MATRIX_ROLL_VERSIONS,
# lines older than the newest whose brokers the tests can restart (4.x: 4.4's
# test kit restarts one, KitCluster takes the same steps on older 4.x kits).
KAFKA_MATRIX_VERSIONS ?= 3.9.1 4.0.2 4.1.2 4.2.2 4.3.2 4.4.0
KAFKA_MATRIX_ROLL_VERSIONS ?= 4.3.2
KAFKA_MATRIX_TESTS := KafkaTieredStorageIT\#copyAndReadBack+leadershipMove+rlmmdDown+databaseDown+rlmmctl+retention+topicDeletion,TopicMirrorIT
KAFKA_MATRIX_JAR := $(BIN)/remotestorage-kafka-matrix.jar

.PHONY: kafka-matrix
kafka-matrix: pg-user ## The plugin jar on the brokers of every Kafka line from 3.9 to 4.4, end to end (~2 min a line; KAFKA_MATRIX_VERSIONS).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmmctl ./cmd/rlmmctl
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B -q --no-transfer-progress package -DskipTests
	cp $(KAFKA_JAR) $(KAFKA_MATRIX_JAR)
	set -e; for v in $(KAFKA_MATRIX_VERSIONS); do \
		echo "kafka-matrix: Kafka $$v"; \
		(cd kafka && mvn -B --no-transfer-progress verify -Pkafka-matrix -De2e.skip=false -Dkafka.version=$$v -Dkafka.line=$${v%.*} \
			-Drlmm.bin.dir=$(BIN) -Drlmm.plugin.jar=$(KAFKA_MATRIX_JAR) \
			-Dit.test='$(KAFKA_MATRIX_TESTS)' -Dfailsafe.failIfNoSpecifiedTests=false); \
	done
	set -e; for v in $(KAFKA_MATRIX_ROLL_VERSIONS); do \
		echo "kafka-matrix: the rolling switch on Kafka $$v"; \
		(cd kafka && mvn -B --no-transfer-progress verify -Pkafka-matrix -De2e.skip=false -Dkafka.version=$$v -Dkafka.line=$${v%.*} \
			-Drlmm.bin.dir=$(BIN) -Drlmm.plugin.jar=$(KAFKA_MATRIX_JAR) \
			-Dit.test=RollingSwitchIT -Dfailsafe.failIfNoSpecifiedTests=false); \
	done

# The Kafka lines whose own metadata-manager tests run against the plugin
# (kafka/contract/pom.xml's profiles): the oldest supported and the newest
# whose test jars Maven Central serves.
KAFKA_CONTRACT_LINES ?= 3.9 4.3

.PHONY: kafka-contract
kafka-contract: pg-user ## Kafka's own metadata-manager tests (3.9.1, 4.3.1), unmodified, against the plugin, rlmmd and a throwaway PostgreSQL (~4 min; docs/KAFKA.md).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B -q --no-transfer-progress package -DskipTests
	set -e; for line in $(KAFKA_CONTRACT_LINES); do \
		echo "kafka-contract: Kafka $$line"; \
		(cd kafka/contract && mvn -B --no-transfer-progress verify -Dkafka.line=$$line -Drlmm.bin.dir=$(BIN)); \
	done
# The tests of krabka-remote-storage-pg start real rlmmd processes and a
# throwaway PostgreSQL (bin/rlmm-pgfixture), as the Kafka plugin's do.
CARGO_JOBS ?= 2

.PHONY: rust-test
rust-test: pg-user ## The Rust crates of rust/: rustfmt check, clippy with warnings denied, and their tests against rlmmd and a throwaway PostgreSQL (cargo fetches from crates.io).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd rust && cargo fmt --all --check
	cd rust && cargo clippy --locked -j$(CARGO_JOBS) --all-targets -- -D warnings
	cd rust && RLMMD_BIN=$(BIN)/rlmmd RLMM_PGFIXTURE_BIN=$(BIN)/rlmm-pgfixture cargo test --locked -j$(CARGO_JOBS)

.PHONY: kafka-bench
kafka-bench: pg-user ## The plugin's lookup latency, the broker's copy throughput with this store against Kafka's topic-based default, and the mirror's cost (~6 min).
	$(BUILD_RLMMD)
	$(GO) build -o $(BIN)/rlmm-pgfixture ./internal/pgfixture
	cd kafka && mvn -B --no-transfer-progress verify -De2e.skip=false -Drlmm.bin.dir=$(BIN) -Dit.test='RlmmdPluginIT#lookupLatency,KafkaCopyBench,MirrorBench' -Dfailsafe.failIfNoSpecifiedTests=false

# ---- Containers: the PostgreSQL image, the container route, docker-compose.yml ----
# Docker when a Docker daemon answers, else podman (internal/pgtest/image/engine.sh;
# CONTAINER_ENGINE=docker|podman overrides). docs/TESTING.md has the details.
PG_IMAGE_DIR := internal/pgtest/image
PG_IMAGE_ENGINE = $(shell $(PG_IMAGE_DIR)/engine.sh name)
# Named by a hash of its inputs, so it is rebuilt only when they change.
PG_IMAGE = localhost/remotestorage-postgres:15-$(shell cat $(PG_IMAGE_DIR)/build.sh $(PG_IMAGE_DIR)/entrypoint.sh | sha256sum | cut -c1-12)
PG_IMAGE_ALIAS := localhost/remotestorage-postgres:15
# The tests of the container route: the conformance suites (with the
# randomized model test), the racing brokers, and pgtest's own.
TEST_CONTAINER_RUN ?= ^(Test.*Conformance|Test.*Brokers.*|TestRefusalNamesTheStateAfterTheLock|TestServer|TestRouteErrors|TestParallelTestsGetDifferentMigratedDatabases|TestWritesAreIsolated|TestDatabaseIsDroppedAtCleanup)$$
TEST_CONTAINER_PKGS ?= . ./migrations ./internal/pgtest
# The root package's share took 503 s under a load average of 30 on 2 cores.
TEST_CONTAINER_FLAGS ?= -race -count=1 -timeout 20m
# go test -v without the RUN/PAUSE/CONT lines and the subtests' PASS lines:
# what remains names the route, each test's result and any failure.
TEST_CONTAINER_FILTER := grep -vE '^ *(=== (RUN|PAUSE|CONT|NAME)|    +--- PASS|--- PASS: .*/)'

.PHONY: image
image: ## Build the PostgreSQL 15 test image from Debian's packages (debootstrap; root), unless its inputs are unchanged.
	@$(PG_IMAGE_DIR)/build.sh $(PG_IMAGE_ENGINE) $(PG_IMAGE) $(PG_IMAGE_ALIAS)

.PHONY: test-container
test-container: pg-user test-deps image ## The container route: testcontainers starts the image through Docker or podman's API; conformance, randomized model, racing brokers.
	@$(PG_IMAGE_DIR)/engine.sh service
	set -o pipefail; \
	engine=$(PG_IMAGE_ENGINE); \
	if [ $$engine = podman ]; then export TESTCONTAINERS_RYUK_DISABLED=$${TESTCONTAINERS_RYUK_DISABLED:-true}; fi; \
	DOCKER_HOST=$$($(PG_IMAGE_DIR)/engine.sh docker-host) \
	TESTCONTAINERS_HOST_OVERRIDE=$${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1} \
	PGTEST_ROUTE=container PGTEST_IMAGE=$(PG_IMAGE) \
	$(GO) test $(TEST_CONTAINER_FLAGS) -v -run '$(TEST_CONTAINER_RUN)' $(TEST_CONTAINER_PKGS) 2>&1 | $(TEST_CONTAINER_FILTER)

.PHONY: db-up
db-up: image ## Start docker-compose.yml's PostgreSQL (docker compose, podman compose or podman-compose); then export DATABASE_URL=postgres://rlmm:rlmm@127.0.0.1:5432/rlmm?sslmode=disable
	@PGTEST_IMAGE=$(PG_IMAGE) $(PG_IMAGE_DIR)/engine.sh db-up

.PHONY: db-down
db-down: ## Stop docker-compose.yml's PostgreSQL and delete its data.
	@PGTEST_IMAGE=$(PG_IMAGE) $(PG_IMAGE_DIR)/engine.sh db-down

.PHONY: test-database-url
test-database-url: pg-user test-deps ## The DATABASE_URL route against docker-compose.yml's database (db-up, the container route's tests, db-down).
	$(MAKE) db-up
	set -o pipefail; status=0; \
	DATABASE_URL=postgres://rlmm:rlmm@127.0.0.1:$${RLMM_DB_PORT:-5432}/rlmm?sslmode=disable PGTEST_ROUTE=DATABASE_URL \
	$(GO) test $(TEST_CONTAINER_FLAGS) -v -run '$(TEST_CONTAINER_RUN)' $(TEST_CONTAINER_PKGS) 2>&1 | $(TEST_CONTAINER_FILTER) || status=$$?; \
	$(MAKE) db-down; exit $$status
# ---- end of Containers ----

# ---- The operators' kit (deploy/): the rlmmd image, the systemd unit, the
# alert rules and the dashboard, tested against a real rlmmd (docs/OPERATIONS.md).
RLMMD_IMAGE ?= localhost/remotestorage-rlmmd:latest
OPS_TEST_FLAGS ?= -count=1 -timeout 15m

# The engine the image is built and run with: docker where a daemon answers;
# else podman, set up as for the container route (podman-setup.sh, as root:
# idempotent; its API service must not hold make's output open).
.PHONY: ops-engine
ops-engine:
	@engine=$$($(PG_IMAGE_DIR)/engine.sh name 2>/dev/null || true); \
	if [ "$$engine" != docker ] && { [ -z "$$engine" ] || [ "$$(id -u)" = 0 ]; }; then \
		$(PG_IMAGE_DIR)/podman-setup.sh </dev/null >/dev/null 2>&1 || { echo "internal/pgtest/image/podman-setup.sh failed: run it for its error" >&2; exit 1; }; \
	fi

.PHONY: image-rlmmd
image-rlmmd: ops-engine ## Build the rlmmd image (RLMMD_IMAGE): a static rlmmd FROM scratch, non-root, its health check rlmmd --health-probe.
	@deploy/image/build.sh $(PG_IMAGE_ENGINE) $(RLMMD_IMAGE)

# promtool comes from Debian's prometheus package: on PATH, or else taken
# out of the package into bin/ (apt-get download; installing the package
# would also start a Prometheus server). systemd-analyze is systemd's.
.PHONY: ops-deps
ops-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	if ! command -v systemd-analyze >/dev/null 2>&1; then \
		echo "installing systemd (apt-get)"; \
		if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then $$SUDO apt-get update -qq; fi; \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends systemd >/dev/null; \
	fi; \
	if ! command -v promtool >/dev/null 2>&1 && [ ! -x $(BIN)/promtool ]; then \
		echo "taking promtool out of Debian's prometheus package (apt-get download) into $(BIN)/promtool"; \
		if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then $$SUDO apt-get update -qq; fi; \
		tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd "$$tmp" && apt-get download -qq prometheus 2>/dev/null) && \
		dpkg-deb -x "$$tmp"/prometheus_*.deb "$$tmp/root" && \
		mkdir -p $(BIN) && install -m 0755 "$$tmp/root/usr/bin/promtool" $(BIN)/promtool; \
	fi

.PHONY: ops-test
ops-test: pg-user pg-deps ops-deps image-rlmmd ## The kit's tests (deploy/, build tag opskit): metric names of the rules and dashboard against a real rlmmd's scrape, promtool, the image, the systemd unit (~2 min).
	set -o pipefail; cd deploy && PATH="$$PATH:$(BIN)" RLMMD_IMAGE=$(RLMMD_IMAGE) CONTAINER_ENGINE=$(PG_IMAGE_ENGINE) \
		$(GO) test -tags opskit $(OPS_TEST_FLAGS) -v ./... 2>&1 | $(TEST_CONTAINER_FILTER)
