# Wrench: `make demo` runs the main job, `make test` runs the tests.
SHELL := /bin/bash
GO ?= go
BIN := bin/wrench
IMAGE ?= wrench-sandbox:default
WRENCH_IMAGE ?= wrench:dev
# A package binary may take this long: cmd/wrench, the longest, took 20 min
# in a full local run on this 2-core machine and 42 min on CI before the
# disk supervisor stopped asking the engine for layer sizes (2026-11-28).
TEST_TIMEOUT ?= 75m
export CGO_ENABLED := 0
# A host that trusts extra CA certificates (a TLS-re-signing egress, as on
# the machines this project is tested on) gives its bundle to sandboxes, so
# setup can reach the module proxy and package registries (--sandbox-ca).
ifneq ($(wildcard /usr/local/share/ca-certificates/*.crt),)
export WRENCH_SANDBOX_CA ?= /etc/ssl/certs/ca-certificates.crt
endif

.PHONY: all build image wrench-image k8s-tools test-k8s demo test test-unit bench chaos deps vet clean

all: build

# The version `wrench version`, --version and the wrench_build_info metric
# report: the nearest tag, else the commit, "-dirty" with local changes.
# Empty (no git) lets the binary fall back to what Go stamped in it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

# A static binary: it is also the in-sandbox helper, copied into containers.
# scripts/gobuild.sh shows progress (the first build takes minutes).
# With it, bin/ gets the rest of what the Dockerfile copies: the host's CA
# bundle and a skeleton root (a /tmp, and the data directory uid 1000 owns).
build:
	@GO=$(GO) scripts/gobuild.sh $(BIN) -ldflags "-X main.version=$(VERSION)" ./cmd/wrench
	@scripts/image-files.sh bin

# Wrench's own image (Dockerfile), from what `build` put in bin/.
wrench-image: build
	docker build -t $(WRENCH_IMAGE) .

# The default sandbox image, built from Debian packages (no registry needed).
image: build
	$(BIN) image build --tag $(IMAGE)

# Debian packages the tests use (nats-server for restart tests, promtool for
# the metrics lint, mmdebstrap for the image). Installs only what is missing.
deps:
	@scripts/deps.sh

demo: build image
	@scripts/demo.sh $(BIN)

vet:
	$(GO) vet ./...

# Everything, against the real Docker engine and real NATS.
test: deps build image vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# helm, kube-apiserver and kubectl for the chart tests, built from the Go
# module proxy once into a cache directory (scripts/k8s-tools.sh).
k8s-tools:
	@scripts/k8s-tools.sh all >/dev/null

# The chart against the real tools: every documented values combination
# rendered by helm, linted --strict, applied server-side to a kube-apiserver
# started by the test, and upgraded between them.
test-k8s: deps k8s-tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'Helm|Chart|ValuesSchema' ./deploy/deploytest/

# Only the packages that need neither Docker nor NATS.
test-unit:
	$(GO) test -count=1 ./task/... ./agent/... ./llm/...

bench: build image
	@scripts/bench.sh

# The fault suite (internal/chaos, docs/reliability.md "Chaos"): a deployment
# of real processes on loopback, TASKS tasks, faults drawn from SEED (the
# same SEED reproduces a run's plan); exits non-zero on any violation.
# CHAOS_FLAGS adds flags (e.g. -embedded, -workers 2, -keep); the results
# table goes to bin/chaos-results.md.
SEED ?= $(shell date +%s)
TASKS ?= 500
CHAOS_FLAGS ?=
chaos: build image
	$(GO) run ./tools/chaos -bin $(BIN) -seed $(SEED) -tasks $(TASKS) -markdown bin/chaos-results.md $(CHAOS_FLAGS)

clean:
	rm -rf bin
