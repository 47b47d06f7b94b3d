#!/usr/bin/env bash
# `make bench`: every benchmark, BENCH_COUNT runs each, summarised as medians
# with the ratios the targets are stated in, all measured in this same run.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${BENCH_COUNT:-5}
out=${BENCH_OUT:-.bench/latest}
mkdir -p "$(dirname "$out")"
: > "$out.raw"
export CGO_ENABLED=0
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3), docker $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo none), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out.head"

# bench PKG REGEX ITERATIONS: one benchmark family, a fixed number of
# iterations per run (container starts and clones are too slow for -benchtime
# in seconds, per-call ones too fast for one iteration).
bench() {
  go test -run '^$' -bench "$2" -benchmem -count "$count" -benchtime "$3" -timeout 60m "$1" 2>&1 | tee -a "$out.raw"
}
bench ./sandbox/docker 'SandboxReady' 3x
bench ./sandbox/docker 'Exec' 50x
bench ./sandbox/pool 'PoolAcquire' 5x
bench ./sandbox/image 'FirstGoTest' 3x
bench ./workspace 'Clone' 1x
bench ./environment 'TaskStart|GoTestOnSnapshot' 3x
bench ./egress 'EgressDownload' 6x
bench ./queue 'Admission' 2000x
bench ./dispatcher 'DispatchOverhead|Throughput|CancelLatency' 300x # DispatchOverheadTenants, ThroughputTenants too
bench ./dispatcher 'MemoryPerInFlightTask' 3x
bench ./cmd/wrench 'ServiceThroughput' 60x
bench ./cmd/wrench 'ServiceLatency' 5x
bench ./cmd/wrench 'ServiceMemoryPerTask' 1x
bench ./cmd/wrench 'BenchRun' 3x
bench ./cmd/wrench 'ClusterThroughput' 20x
bench ./agent 'Turn|Cancel' 500x
bench ./agent/editformat '.' 1s
bench ./diff '.' 1s
bench ./llm '.' 1s

go run ./tools/benchtable \
  -ratio 'SandboxReady/wrench_start=SandboxReady/docker_run_true' \
  -ratio 'Exec/shim=Exec/cli_docker_exec' \
  -ratio 'Exec/shim=Exec/api_exec' \
  -ratio 'Exec/api_exec=Exec/cli_docker_exec' \
  -ratio 'FirstGoTest/prebuilt_cache=FirstGoTest/empty_cache' \
  -ratio 'FirstGoTest/prebuilt_cache/net_http=FirstGoTest/empty_cache/net_http' \
  -ratio 'Clone/first=Clone/git_cli' \
  -ratio 'TaskStart/snapshot_hit=TaskStart/clone_start' \
  -ratio 'GoTestOnSnapshot/hit_first=GoTestOnSnapshot/warm_second' \
  -ratio 'Admission/sync_lazy=Admission/sync_always@tasks/s' \
  -ratio 'DispatchOverheadTenants=DispatchOverhead@p50-ms' \
  -ratio 'ThroughputTenants=Throughput@tasks/s' \
  -ratio 'Clone/mirror=Clone/git_cli' \
  -ratio 'ServiceLatency/warm=4=ServiceLatency/warm=0' \
  -ratio 'ClusterThroughput/workers=1=ClusterThroughput/single_node@tasks/min' \
  -ratio 'ClusterThroughput/workers=2=ClusterThroughput/workers=1@tasks/min' \
  -ratio 'ClusterThroughput/workers=3=ClusterThroughput/workers=1@tasks/min' < "$out.raw" | tee "$out.md"
