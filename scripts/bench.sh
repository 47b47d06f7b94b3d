#!/usr/bin/env bash
# `make bench`: every benchmark, -count runs each, summarised as medians with
# the ratios the targets are stated in, all measured in this same run.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${BENCH_COUNT:-5}
out=${BENCH_OUT:-.bench/latest.txt}
mkdir -p "$(dirname "$out")"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3), docker $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo none)" | tee "$out.head"
# Benchmarks that start containers or clone big repositories take a few
# runs, not a fixed time.
CGO_ENABLED=0 go test -run '^$' -bench . -benchmem -count "$count" -benchtime "${BENCH_TIME:-1x}" -timeout 60m \
  ./sandbox/... ./workspace/... ./dispatcher/... 2>&1 | tee "$out.slow"
CGO_ENABLED=0 go test -run '^$' -bench . -benchmem -count "$count" -timeout 20m \
  ./agent/... ./llm/... ./tools/... 2>&1 | tee "$out.fast"
cat "$out.slow" "$out.fast" | go run ./tools/benchtable \
  -ratio 'SandboxReady/wrench_start=SandboxReady/docker_run_true' \
  -ratio 'Exec/shim=Exec/cli_docker_exec' \
  -ratio 'Exec/shim=Exec/api_exec' \
  -ratio 'Exec/api_exec=Exec/cli_docker_exec' \
  -ratio 'FirstGoTest/prebuilt_cache=FirstGoTest/empty_cache' \
  -ratio 'FirstGoTest/prebuilt_cache/net_http=FirstGoTest/empty_cache/net_http' \
  -ratio 'Clone/first=Clone/git_cli' \
  -ratio 'Clone/mirror=Clone/git_cli' | tee "$out"
