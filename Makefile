# Wrench: `make demo` runs the main job, `make test` runs the tests.
SHELL := /bin/bash
GO ?= go
BIN := bin/wrench
IMAGE ?= wrench-sandbox:default
TEST_TIMEOUT ?= 45m
export CGO_ENABLED := 0

.PHONY: all build image demo test test-unit bench deps vet clean

all: build

# A static binary: it is also the in-sandbox helper, copied into containers.
build:
	$(GO) build -o $(BIN) ./cmd/wrench

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

# Only the packages that need neither Docker nor NATS.
test-unit:
	$(GO) test -count=1 ./task/... ./agent/... ./llm/...

bench: build image
	@scripts/bench.sh

clean:
	rm -rf bin
