package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// BenchmarkClusterThroughput measures tasks/min on a three-node cluster of
// `wrench nats-server` processes with R3 streams, KV and object store:
// `wrench serve --nats URLs --replicas 3 --slots 0` takes the submissions,
// and 1, 2 or 3 `wrench worker` processes (2 slots each) run them, with
// the real worker, Docker engine and scripted model on the one-file task
// of BenchmarkServiceThroughput. b.N tasks are submitted at once; the clock
// stops when the last is final. single_node is the same-run baseline: one
// server (R1) and one worker, so workers=1 against it is what three
// replicas cost. Run it with -benchtime=20x or so.
func BenchmarkClusterThroughput(b *testing.B) {
	requireImage(b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	repo, script := helloRepo(b, 0)
	b.Run("single_node", func(b *testing.B) { benchCluster(b, ctx, 1, 1, repo, script) })
	for _, workers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchCluster(b, ctx, 3, workers, repo, script) })
	}
}

// benchCluster runs b.N tasks with an API-only serve and workers workers
// on a fresh cluster of nodes nodes (streams of as many replicas); it
// stops them all when done.
func benchCluster(b *testing.B, ctx context.Context, nodes, workers int, repo, script string) {
	cluster := startNATSCluster(b, ctx, nodes)
	deployment := fmt.Sprintf("bench-cluster-%d", time.Now().UnixNano())
	b.Cleanup(func() { removeContainers(deployment) })
	reps := strconv.Itoa(nodes)
	srv := startProc(b, "serve", "serve", "--nats", cluster.urls(), "--replicas", reps, "--slots", "0",
		"--http", "127.0.0.1:0", "--data-dir", b.TempDir(), "--deployment", deployment, "--log-level", "warn")
	apiURL, _, _ := strings.Cut(srv.line(b, ctx, "wrench serve: API on "), " ")
	procs := []*wrenchProc{}
	for i := range workers {
		id := fmt.Sprintf("w-%d", i+1)
		p := startProc(b, id, "worker", "--nats", cluster.urls(), "--replicas", reps, "--slots", "2",
			"--http", "", "--data-dir", b.TempDir(), "--deployment", deployment, "--worker-id", id, "--log-level", "warn")
		p.line(b, ctx, "wrench worker: "+id+" joined ")
		procs = append(procs, p)
	}
	c := api.NewClient(apiURL, "")
	// Warm up every worker's mirror and code paths: one task per slot.
	prefix := fmt.Sprintf("t-%d-", time.Now().UnixNano())
	var warm []task.Task
	for i := range 2 * workers {
		warm = append(warm, helloTask(fmt.Sprintf("%swarm-%d", prefix, i), repo, script))
	}
	runAll(b, ctx, c, warm)

	tasks := make([]task.Task, b.N)
	for i := range tasks {
		tasks[i] = helloTask(fmt.Sprintf("%s%04d", prefix, i), repo, script)
	}
	b.ResetTimer()
	start := time.Now()
	runAll(b, ctx, c, tasks)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Minutes(), "tasks/min")
	for _, p := range append(procs, srv) {
		if err := p.stop(b); err != nil {
			b.Errorf("%s on SIGTERM: %v", p.name, err)
		}
	}
}
