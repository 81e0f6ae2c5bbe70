# chute: make targets. Every target that needs a system package installs it
# first (make deps), so a fresh Debian machine with Go needs nothing else.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
export PATH := $(PATH):/usr/local/go/bin

GO      ?= go
BIN     := bin/chute
BENCH_BIN := bin/chute-bench
PKGS    := ./...
# Test timeout for the whole go test run; make test must stay under 20 min.
TEST_TIMEOUT ?= 15m
# Tests calling t.Parallel that run at once (go test -parallel; its default
# is GOMAXPROCS). Nearly all of them are the e2e tests, which mostly wait on
# the processes they start (elections, leases, outages, freezes): four at a
# time on 2 cores took that package from 584 s to 343 s.
TEST_PARALLEL ?= 4
# apt packages: etcdctl for e2e tests and make run, etcd for the differential
# tests that compare chute's answers with etcd's, ClickHouse for the sink.
APT_PKGS := curl etcd-client etcd-server clickhouse-server clickhouse-client
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: build test test-e2e test-faults bench lint fmt tidy run deps clean proto

build:
	$(GO) build -o $(BIN) ./cmd/chute
	$(GO) build -o $(BENCH_BIN) ./cmd/chute-bench

# deps installs the Debian packages tests and make run need, if missing.
# Their services are not started: tests start their own servers, and a
# running etcd or ClickHouse would hold the ports make run uses. During
# the install a policy-rc.d refusing every start (exit 101, honoured by
# invoke-rc.d and deb-systemd-invoke) is in place, created only if the
# machine has none and removed after; one already there is left as it is.
# deps stops nothing: what runs was started by someone else.
POLICY_RC ?= /usr/sbin/policy-rc.d
deps:
	@missing=""; \
	for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		mark='# written by make deps: no service starts during the install'; \
		if printf '#!/bin/sh\n%s\nexit 101\n' "$$mark" | $(SUDO) sh -c 'set -C; cat > "$$1"' sh $(POLICY_RC) 2>/dev/null; then \
			trap '$(SUDO) grep -qxF "'"$$mark"'" $(POLICY_RC) && $(SUDO) rm -f $(POLICY_RC)' EXIT; \
			trap 'exit 130' INT TERM HUP; \
			$(SUDO) chmod 755 $(POLICY_RC); \
		fi; \
		$(SUDO) apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@command -v etcdctl >/dev/null && command -v etcd >/dev/null && command -v clickhouse-server >/dev/null \
		|| { echo "deps: etcdctl, etcd or clickhouse-server still missing"; exit 1; }

# test runs every test with the race detector, after the lint checks:
# first the unit tests alone (test-unit), then everything, the
# process-level tests of the e2e build tag included, then the etcdctl
# parity tests with auth enabled, then deploy/tests.
test: deps lint test-unit
	$(GO) test -race -tags e2e -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(PKGS)
	$(MAKE) --no-print-directory test-auth-parity
	$(MAKE) --no-print-directory test-deploy

# test-auth-parity runs the etcdctl parity tests again with auth enabled on
# etcd and chute and etcdctl logged in as root: the transcripts must be
# the same as without auth (internal/e2e, E2E_ETCDCTL_AUTH).
.PHONY: test-auth-parity
test-auth-parity: deps
	E2E_ETCDCTL_AUTH=1 $(GO) test -tags e2e -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) -run '^(TestEtcdctl_|TestChute_)' ./internal/e2e/

# test-unit runs go test ./... (no e2e tag) with nothing on PATH but go and
# the C toolchain the race detector needs (gcc, and the assembler and
# linker it runs, which this gcc looks up on PATH): the unit tests must
# pass on a machine without etcd, etcdctl, ClickHouse or openssl.
UNIT_TIMEOUT ?= 5m
.PHONY: test-unit
test-unit:
	@bare="$$(mktemp -d)"; trap 'rm -rf "$$bare"' EXIT; \
	ln -s "$$(command -v $(GO))" "$$bare/go"; \
	for t in gcc as ld; do ln -s "$$(command -v $$t)" "$$bare/$$t"; done; \
	echo "PATH=$$bare $(GO) test -race $(PKGS)"; \
	env PATH="$$bare" go test -race -count=1 -timeout $(UNIT_TIMEOUT) $(PKGS)

# test-deploy runs deploy/tests, a module of its own so that Prometheus'
# parsers and Helm stay out of go.mod: the alert rules, the dashboard and
# the Helm chart, checked against a built node and a private ClickHouse.
.PHONY: test-deploy
test-deploy: deps
	cd deploy/tests && $(GO) vet -tags e2e ./...
	cd deploy/tests && $(GO) test -race -tags e2e -count=1 -timeout $(TEST_TIMEOUT) ./...

# test-clickhouse-modern runs the sink's ClickHouse tests against the
# server CHUTE_TEST_CLICKHOUSE_URL names instead of Debian's 18.16, for
# example the 25.3 that deploy/compose brings up for tests:
#   docker compose -f deploy/compose/docker-compose.yml --profile test up -d clickhouse-test
#   CHUTE_TEST_CLICKHOUSE_URL=http://127.0.0.1:18123 make test-clickhouse-modern
# The tests create and drop tables and users in that server; the ones that
# must stop or restart the server skip and say so (internal/chtest).
.PHONY: test-clickhouse-modern
test-clickhouse-modern:
	@test -n "$${CHUTE_TEST_CLICKHOUSE_URL:-}" || { echo "test-clickhouse-modern: set CHUTE_TEST_CLICKHOUSE_URL=http://[user:pass@]host:port (see docs/clickhouse.md)"; exit 2; }
	@out="$$(mktemp)"; trap 'rm -f "$$out"' EXIT; \
	$(GO) test -race -tags e2e -count=1 -p 1 -v -timeout $(TEST_TIMEOUT) ./sink/ >"$$out" 2>&1 && rc=0 || rc=$$?; \
	cat "$$out"; echo "skipped against $$CHUTE_TEST_CLICKHOUSE_URL:"; grep -E -- '--- SKIP' "$$out" || echo "  none"; exit $$rc

# test-e2e runs only the process-level tests (real binary, etcdctl, etcd).
test-e2e: deps
	$(GO) test -race -tags e2e -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./internal/e2e/...

# test-faults runs the fault scenarios (internal/e2e/faults_*_test.go)
# in their full form, CHUTE_FAULTS=full: 20 kills -9 of the dispatcher per ack
# mode, 10 kills -9 of every node at once (ack=queued; ack=replicated with one
# data dir deleted), a 30 s SIGSTOP, a 60 s ClickHouse outage under the byte
# cap, graceful restarts of every node; one scenario at a time and without the race detector,
# which would slow the producers whose puts it measures. It writes the figures
# to docs/reliability.md. make test runs their short form.
FAULTS_TIMEOUT ?= 60m
test-faults: deps build
	$(GO) test -race -tags e2e -count=1 -timeout $(TEST_TIMEOUT) ./internal/faults/
	CHUTE_FAULTS=full $(GO) test -tags e2e -count=1 -timeout $(FAULTS_TIMEOUT) -run '^TestFaults_' -v ./internal/e2e/

# bench runs the benchmark, chute-bench, against a private ClickHouse
# (deploy/dev/bench.sh): one node and three, unary puts and txns of 128 from
# 100 clients until every row is in ClickHouse; the CPU per row of every
# node, of ClickHouse and of the client, against floors of the same run (the
# no-op server, the same rows inserted straight at the same rate); the
# memory of a queued row; a node tracing every call. About twenty minutes
# on 2 cores; it prints the tables and writes them, the targets, the machine
# and the method to BENCH_REPORT.
BENCH_REPORT ?= docs/benchmarks.md
bench: deps build
	deploy/dev/bench.sh $(BIN) $(BENCH_REPORT) $(BENCH_BIN)

# lint: gofmt, go vet and staticcheck (pinned; go run fetches it from the
# module proxy once), over the e2e-tagged files too.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags e2e $(PKGS)
	$(GO) run $(STATICCHECK) -tags e2e $(PKGS)
	cd deploy/tests && $(GO) run $(STATICCHECK) -tags e2e ./...

fmt:
	gofmt -w .

# tidy fails when go.mod or go.sum would change.
tidy:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

# run starts a private ClickHouse and one chute node, puts a row with
# etcdctl and shows it in ClickHouse; both keep running until Ctrl-C.
# Ports: CHUTE_RUN_CLIENT_PORT (2379), CHUTE_RUN_PEER_PORT (2380),
# CHUTE_RUN_GOSSIP_PORT (7946), CHUTE_RUN_METRICS_PORT (9379),
# CHUTE_RUN_CH_HTTP_PORT (18123), CHUTE_RUN_CH_TCP_PORT (19000), from the
# environment or the make command line (make run CHUTE_RUN_CLIENT_PORT=12379).
run: deps build
	deploy/dev/run.sh $(BIN)

# proto regenerates the peer transport's Go code from gossip/peer/peerpb/*.proto
# (the Peer and Queues services, raft's transport, the key space's KV calls)
# with pinned generators (protoc from Debian's protobuf-compiler).
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTOC_GEN_GATEWAY := github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@v2.31.0
proto:
	@command -v protoc >/dev/null || { $(SUDO) apt-get update -qq; DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq protobuf-compiler >/dev/null; }
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH=$(CURDIR)/bin/tools:$$PATH protoc --go_out=. --go_opt=module=chute \
		--go-grpc_out=. --go-grpc_opt=module=chute \
		gossip/peer/peerpb/peer.proto gossip/peer/peerpb/raft.proto \
		gossip/peer/peerpb/kv.proto \
		kv/v3lockpb/v3lock.proto kv/v3electionpb/v3election.proto
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(PROTOC_GEN_GATEWAY)
	for p in kv/v3lockpb/v3lock kv/v3electionpb/v3election; do \
		PATH=$(CURDIR)/bin/tools:$$PATH protoc --grpc-gateway_out=. --grpc-gateway_opt=module=chute \
			--grpc-gateway_opt=grpc_api_configuration=$${p}_gateway.yaml $$p.proto || exit 1; \
	done

clean:
	rm -rf bin
