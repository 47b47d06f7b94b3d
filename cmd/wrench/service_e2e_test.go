package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// e2eTasks is how many tasks TestServiceEndToEnd runs: $WRENCH_E2E_TASKS,
// else 100 (about 30 s of tasks on 2 cores with 2 + 2 slots).
func e2eTasks(t testing.TB) int {
	v := os.Getenv("WRENCH_E2E_TASKS")
	if v == "" {
		return 100
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("WRENCH_E2E_TASKS=%q is not a positive number", v)
	}
	return n
}

// TestServiceEndToEnd runs N tiny tasks through the service as deployed:
// the built binary as `wrench serve` (2 slots, its NATS on a port) and a
// `wrench worker` process (2 slots) joined to it, the real worker with the
// Docker engine, the default sandbox image and the scripted model. Every
// task ends resolved, written final exactly once with exactly one result
// event, and no container or workspace is left.
func TestServiceEndToEnd(t *testing.T) {
	requireImage(t)
	n := e2eTasks(t)
	deployment := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	serveData, workerData := t.TempDir(), t.TempDir()
	srv, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "2", "--data-dir", serveData, "--deployment", deployment)
	wrk := startProc(t, "worker", "worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "2", "--http", "", "--data-dir", workerData,
		"--deployment", deployment, "--worker-id", "w-joined", "--log-level", "info")
	wrk.line(t, ctx, "wrench worker: w-joined joined ")

	repo, script := helloRepo(t, 0)
	c := api.NewClient(apiURL, "")
	ids := make([]string, n)
	start := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("t-e2e-%03d", i)
		if _, dup, err := c.Submit(ctx, helloTask(ids[i], repo, script)); err != nil || dup {
			t.Fatalf("submit %s: dup=%v %v", ids[i], dup, err)
		}
	}
	// Wait for every task through the CLI, as a user would.
	var wg sync.WaitGroup
	codes := make([]int, n)
	sem := make(chan struct{}, 8)
	for i, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _, codes[i] = runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "watch", id)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, code := range codes {
		if code != exitOK {
			t.Errorf("wrench watch %s: exit %d", ids[i], code)
		}
	}
	t.Logf("%d tasks over 2 processes x 2 slots in %s (%.1f tasks/min)", n, elapsed.Round(time.Second), float64(n)/elapsed.Minutes())

	out, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "list", "--json", "--limit", strconv.Itoa(task.MaxListLimit))
	var lr api.ListResponse
	if code != exitOK || json.Unmarshal([]byte(out), &lr) != nil {
		t.Fatalf("wrench list --json: exit %d: %s", code, errOut)
	}
	byWorker := map[string]int{}
	redelivered := 0
	for _, st := range lr.Tasks {
		if st.State != task.StateResolved {
			t.Errorf("%s: %s (%s)", st.TaskID, st.State, st.Reason)
		}
		byWorker[st.Worker]++
		if st.Attempt > 1 {
			redelivered++
		}
	}
	if len(lr.Tasks) != n {
		t.Errorf("wrench list shows %d tasks, want %d", len(lr.Tasks), n)
	}
	if byWorker["w-joined"] == 0 || byWorker["w-joined"] == n {
		t.Errorf("tasks by worker %v: want both processes to run some", byWorker)
	}
	t.Logf("tasks by worker: %v; redelivered: %d", byWorker, redelivered)

	finals, results := finalWrites(t, ctx, natsURL, natsSeed, ids)
	for _, id := range ids {
		if finals[id] != 1 || results[id] != 1 {
			t.Errorf("%s: written final %d times, %d result events; want 1 and 1", id, finals[id], results[id])
		}
	}

	for _, p := range []*wrenchProc{wrk, srv} {
		if err := p.stop(t); err != nil {
			t.Errorf("%s on SIGTERM: %v", p.name, err)
		}
	}
	if left := containersOf(t, deployment); left != 0 {
		t.Errorf("%d containers of deployment %s left", left, deployment)
	}
	for _, d := range []string{serveData, workerData} {
		if left := entries(t, filepath.Join(d, "workspaces")); left != 0 {
			t.Errorf("%d workspaces left in %s", left, d)
		}
	}
}

// TestServiceSurvivesKilledWorker: a worker process is SIGKILLed while its
// task's agent waits on the model; the task is redelivered after --ack-wait
// to the other worker and resolves there, written final once; the worker
// started in the killed one's place (same data dir) sweeps what the killed
// one left, so no container or workspace remains.
func TestServiceSurvivesKilledWorker(t *testing.T) {
	requireImage(t)
	deployment := fmt.Sprintf("e2e-kill-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	srv, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir(), "--deployment", deployment)
	data := map[string]string{"w-a": t.TempDir(), "w-b": t.TempDir()}
	startWorker := func(id string) *wrenchProc {
		p := startProc(t, id, "worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "1", "--http", "", "--data-dir", data[id],
			"--deployment", deployment, "--worker-id", id, "--ack-wait", "3s", "--log-level", "info")
		p.line(t, ctx, "wrench worker: "+id+" joined ")
		return p
	}
	workers := map[string]*wrenchProc{"w-a": startWorker("w-a"), "w-b": startWorker("w-b")}

	repo, slow := helloRepo(t, 8*time.Second)
	_, quick := helloRepo(t, 0)
	c := api.NewClient(apiURL, "")
	if _, _, err := c.Submit(ctx, helloTask("t-slow", repo, slow)); err != nil {
		t.Fatal(err)
	}
	// Kill the slow task's worker once its agent waits on the model.
	err := c.Events(ctx, "t-slow", 0, func(ev task.Event) error {
		if ev.Kind == task.EventToolResult {
			return context.Canceled
		}
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("following t-slow: %v", err)
	}
	st, err := c.Status(ctx, "t-slow")
	if err != nil || workers[st.Worker] == nil {
		t.Fatalf("t-slow runs on %q (%v)", st.Worker, err)
	}
	victim := st.Worker
	workers[victim].kill()
	if containersOf(t, deployment) == 0 {
		t.Fatal("the killed worker left no container: was it mid-task?")
	}
	ids := []string{"t-slow"}
	for i := range 3 {
		id := fmt.Sprintf("t-quick-%d", i)
		ids = append(ids, id)
		if _, _, err := c.Submit(ctx, helloTask(id, repo, quick)); err != nil {
			t.Fatal(err)
		}
	}
	// A new worker in the killed one's place, as a supervisor would start.
	workers[victim] = startWorker(victim)

	for _, id := range ids {
		if _, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "watch", id); code != exitOK {
			t.Errorf("watch %s: exit %d: %s", id, code, errOut)
		}
	}
	if st, err := c.Status(ctx, "t-slow"); err != nil || st.State != task.StateResolved || st.Attempt < 2 {
		t.Errorf("t-slow after the kill: %+v %v; want resolved on a later attempt", st, err)
	}
	finals, results := finalWrites(t, ctx, natsURL, natsSeed, ids)
	for _, id := range ids {
		if finals[id] != 1 || results[id] != 1 {
			t.Errorf("%s: written final %d times, %d result events; want 1 and 1", id, finals[id], results[id])
		}
	}
	for _, p := range []*wrenchProc{workers["w-a"], workers["w-b"], srv} {
		if err := p.stop(t); err != nil {
			t.Errorf("%s on SIGTERM: %v", p.name, err)
		}
	}
	if left := containersOf(t, deployment); left != 0 {
		t.Errorf("%d containers of deployment %s left", left, deployment)
	}
	for id, d := range data {
		if left := entries(t, filepath.Join(d, "workspaces")); left != 0 {
			t.Errorf("%d workspaces left in %s's data dir", left, id)
		}
	}
}
