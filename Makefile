# rmqtopo's Makefile.
#
# Integration tests need a RabbitMQ broker with the management plugin. `make
# test` starts a private node (never the system broker on 5672/15672) with
# internal/brokertest/cmd/rabbitnode, runs every test against it and stops it,
# unless RMQTOPO_TEST_URL is already set, in which case the tests use that
# broker (set RMQTOPO_TEST_AMQP_URL too). See internal/brokertest.

SHELL := /bin/bash
GO    ?= go

# The RabbitMQ release series the tests, the demo and the benchmarks run
# on: 3.10 (the host's Debian package), 4.0 or 4.3 (Debian trixie's and
# sid's, each in a private root built once, about 2 minutes, and cached in
# ~/.cache/rmqtopo/roots); `rabbitnode releases` lists them, from the
# release profiles (rabbitmq.Table). The newest by default; `make test
# RABBITMQ=4.0` picks another, as does RMQTOPO_TEST_RABBITMQ in the
# environment.
ifeq ($(origin RABBITMQ),undefined)
RABBITMQ := $(or $(RMQTOPO_TEST_RABBITMQ),$(shell $(GO) run ./internal/brokertest/cmd/rabbitnode releases --newest))
endif
export RMQTOPO_TEST_RABBITMQ := $(RABBITMQ)

# Where `make test` and broker-start/broker-stop keep their node.
BROKER_DIR ?= .broker/test-$(RABBITMQ)
# The node's Erlang name; give each checkout its own to run tests side by side.
TEST_NODE ?= rmqtopo-make$(subst .,,$(RABBITMQ))@localhost
# Built once per run so that stopping the node does not depend on the tree
# still compiling at the end of the tests.
RABBITNODE := bin/rabbitnode
# Packages run side by side again: no test asserts a wall-clock goal any
# more (timing goals are benchmarks, see docs/benchmarks.md), so a busy
# machine makes tests slower, not red. -parallel 8 and -p 8: the
# integration tests mostly wait for the broker (TTLs, statistics), not for
# a CPU, which the defaults of both (GOMAXPROCS, 2 here) are sized for;
# with -p 2, retry, the longest package after clustertest, waited 90s for
# a slot behind cmd/rmqtopo and internal/broker.
TEST_FLAGS := -count=1 -timeout 20m -parallel 8 -p 8
# internal/clustertest (a 3-node cluster and a TLS node of its own, the
# longest package) starts first, in a go test of its own, beside all the
# others, so that it never waits behind them.
CLUSTER_PKG := ./internal/clustertest
# The test node refreshes the management statistics every second, not 5:
# tests that wait for counts (status, plans deciding on counts) wait less.
# Benchmarks and the demo keep RabbitMQ's default.
TEST_NODE_FLAGS := --stats-interval 1s
# The packages that need no broker: `make test-unit` runs them alone, in
# seconds, for the inner loop, and the views of ops (whose other tests
# need one).
UNIT_PKGS := ./spec/... ./plan/... ./render/... ./topology/... ./rabbitmq/... ./contract/... \
	./importer/... ./apply/... ./internal/definitions/... ./status/... ./internal/upgrade/...

.PHONY: all build dist generate test test-unit test-custody lint broker-start broker-stop demo bench rabbitnode rabbitmq-root

all: build

# The version and revision rmqtopo --version prints. Build information
# carries them for `go install ...@vX` and VCS-stamped builds; these fill
# the gaps when VCS stamping is off (GOFLAGS=-buildvcs=false) or there is
# no .git, so every binary the Makefile builds says what it is.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.revision=$(REVISION)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/rmqtopo ./cmd/rmqtopo

# Static release binaries (no cgo, so no libc to match) for linux and
# darwin on amd64 and arm64, version stamped, in dist/.
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

dist:
	@set -e; mkdir -p dist; \
	for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/rmqtopo-$(VERSION)-$$os-$$arch; \
		echo "$$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $$out ./cmd/rmqtopo; \
	done

rabbitnode:
	$(GO) build -o $(RABBITNODE) ./internal/brokertest/cmd/rabbitnode

# The private root of RABBITMQ's series: built once with progress lines (a
# no-op once cached, and for 3.10, which runs on the host), before any test
# binary needs it.
rabbitmq-root: rabbitnode
	@$(RABBITNODE) root --rabbitmq $(RABBITMQ) >/dev/null

# Compile everything, then run all tests against a private node (or the
# broker named by RMQTOPO_TEST_URL). The node is stopped even when tests
# fail, and the tests' exit status is kept.
# internal/clustertest also starts a 3-node cluster and a TLS node of its
# own; RMQTOPO_TEST_CLUSTER_URLS and RMQTOPO_TEST_CLUSTER_AMQP_URLS point
# it at an existing cluster instead. It starts first, before the build of
# the rest and the single node (it needs neither), and runs beside the
# other packages, its output held until they are done so that the two
# never interleave.
test: rabbitmq-root
	@set -e; \
	echo "make test: RabbitMQ $(RABBITMQ)"; \
	log=$$(mktemp); \
	$(GO) test $(TEST_FLAGS) $(CLUSTER_PKG) >$$log 2>&1 & cluster=$$!; \
	trap 'kill $$cluster 2>/dev/null || true' EXIT; \
	echo "$(GO) build ./..."; $(GO) build ./...; \
	if [ -n "$$RMQTOPO_TEST_URL" ]; then \
		echo "make test: using the broker at RMQTOPO_TEST_URL=$$RMQTOPO_TEST_URL"; \
	else \
		trap 'kill $$cluster 2>/dev/null || true; $(RABBITNODE) stop --dir $(BROKER_DIR)' EXIT; \
		$(RABBITNODE) start --dir $(BROKER_DIR) --name $(TEST_NODE) $(TEST_NODE_FLAGS) >/dev/null; \
		. $(BROKER_DIR)/env; \
	fi; \
	status=0; \
	$(GO) test $(TEST_FLAGS) $$($(GO) list ./... | grep -v '/internal/clustertest$$') || status=$$?; \
	wait $$cluster || status=$$?; \
	cat $$log; rm -f $$log; \
	exit $$status

# The whole conservation matrix (docs/testing.md): every layout, place of a
# message and change, plain and with migrate, on RABBITMQ's series; make
# test runs a sample of it that covers every pair. Its own node, stopped
# afterwards (or the broker named by RMQTOPO_TEST_URL).
CUSTODY_DIR ?= .broker/custody-$(RABBITMQ)
CUSTODY_NODE ?= rmqtopo-custody$(subst .,,$(RABBITMQ))@localhost

test-custody: rabbitmq-root
	@set -e; \
	echo "make test-custody: RabbitMQ $(RABBITMQ)"; \
	if [ -z "$$RMQTOPO_TEST_URL" ]; then \
		trap '$(RABBITNODE) stop --dir $(CUSTODY_DIR)' EXIT; \
		$(RABBITNODE) start --dir $(CUSTODY_DIR) --name $(CUSTODY_NODE) $(TEST_NODE_FLAGS) >/dev/null; \
		. $(CUSTODY_DIR)/env; \
	fi; \
	RMQTOPO_TEST_CUSTODY=all $(GO) test -count=1 -timeout 40m -parallel 8 -run 'TestConservationMatrix|TestPlainApplyKeepsHeldRetries' ./cmd/rmqtopo

# The broker-free packages only, each in its own test binary, no broker
# started: the inner loop, in seconds.
test-unit:
	$(GO) test -count=1 $(UNIT_PKGS)
	$(GO) test -count=1 -run '^TestDLQ(Golden|DryRunLine)$$' ./ops/

# The JSON Schema (schemas/rmqtopo.schema.json) and the key tables of
# docs/spec.md are generated from the spec's field tables
# (spec/fields_*.go); spec's TestGeneratedFiles fails until this ran.
generate:
	$(GO) generate ./spec

# gofmt must have nothing to say, go.mod and go.sum must be tidy (go mod
# tidy -diff changes nothing and fails with the diff), go vet must pass,
# and the CLI must build for every OS we ship or people build on (its test
# hooks sit behind the rmqtopo_testhooks tag, so windows builds too; the
# tagged build is vetted as well).
LINT_GOOS := linux darwin windows

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags rmqtopo_testhooks ./cmd/rmqtopo ./internal/failpoint
	@set -e; for os in $(LINT_GOOS); do \
		echo "GOOS=$$os $(GO) build ./cmd/rmqtopo"; \
		GOOS=$$os $(GO) build -o /dev/null ./cmd/rmqtopo; \
	done

# Start (or reuse) the node make test uses and print its environment;
# `eval "$$(make -s broker-start)"` points `go test` at it.
broker-start: rabbitmq-root
	@$(RABBITNODE) start --dir $(BROKER_DIR) --name $(TEST_NODE) $(TEST_NODE_FLAGS)

broker-stop: rabbitnode
	@$(RABBITNODE) stop --dir $(BROKER_DIR)

# The demo: a private node on fixed ports (AMQP 5680, management
# http://127.0.0.1:15680, guest/guest; never the system broker), then plan,
# apply and plan again examples/shop.yaml, and its retry schedule. The node
# keeps running for exploring; `bin/rabbitnode stop --dir .broker/demo`
# stops it. Running the demo again reuses it.
DEMO_DIR ?= .broker/demo
DEMO_SPEC ?= examples/shop.yaml

demo: build rabbitmq-root
	@set -e; \
	$(RABBITNODE) start --dir $(DEMO_DIR) --default-ports >/dev/null; \
	. $(DEMO_DIR)/env; \
	export RMQTOPO_URL="$$RMQTOPO_TEST_URL"; \
	echo; echo "\$$ rmqtopo plan $(DEMO_SPEC)"; \
	bin/rmqtopo plan $(DEMO_SPEC); \
	echo; echo "\$$ rmqtopo apply --auto-approve $(DEMO_SPEC)"; \
	bin/rmqtopo apply --auto-approve $(DEMO_SPEC); \
	echo; echo "\$$ rmqtopo plan --detailed-exitcode $(DEMO_SPEC)"; \
	bin/rmqtopo plan --detailed-exitcode $(DEMO_SPEC); \
	echo; echo "\$$ rmqtopo render $(DEMO_SPEC) -f schedule"; \
	bin/rmqtopo render $(DEMO_SPEC) -f schedule; \
	echo; echo "The demo broker keeps running: management UI $$RMQTOPO_TEST_URL (guest/guest)."; \
	echo "Stop it with: $(RABBITNODE) stop --dir $(DEMO_DIR)"

# Benchmarks, each step once, against a node of their own (or the broker
# named by RMQTOPO_TEST_URL). BENCH selects benchmarks by regexp. Figures
# and how to read them: docs/benchmarks.md.
BENCH_DIR ?= .broker/bench
# The bench node's Erlang name; give each checkout its own, as TEST_NODE.
BENCH_NODE ?= rmqtopo-bench@localhost
BENCH ?= .

bench: rabbitmq-root
	@set -e; \
	run() { $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 60m ./...; }; \
	if [ -n "$$RMQTOPO_TEST_URL" ]; then \
		run; \
	else \
		trap '$(RABBITNODE) stop --dir $(BENCH_DIR)' EXIT; \
		$(RABBITNODE) start --dir $(BENCH_DIR) --name $(BENCH_NODE) >/dev/null; \
		. $(BENCH_DIR)/env; \
		run; \
	fi
