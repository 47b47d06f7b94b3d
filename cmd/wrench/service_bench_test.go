package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// BenchmarkServiceThroughput measures end-to-end throughput of `wrench
// serve` (the built binary, 4 slots, the real worker and Docker engine, the
// scripted model) on a one-file repository whose task is one bash call and
// finish, test command `true`: b.N tasks are submitted at once and the
// clock stops when the last is final. It reports tasks/min, without and
// with a warm pool of 4 sandboxes (target: ≥ 60 tasks/min on 2 cores with
// --warm 4). Each task takes seconds: run it with -benchtime=40x or so.
func BenchmarkServiceThroughput(b *testing.B) {
	requireImage(b)
	for _, warm := range []int{0, 4} {
		b.Run(fmt.Sprintf("warm=%d", warm), func(b *testing.B) { benchThroughput(b, warm) })
	}
}

func benchThroughput(b *testing.B, warm int) {
	deployment := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	b.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv, apiURL, _, _ := startServeProc(b, ctx, "--slots", "4", "--warm", strconv.Itoa(warm),
		"--data-dir", b.TempDir(), "--deployment", deployment)
	repo, script := helloRepo(b, 0)
	c := api.NewClient(apiURL, "")

	// Warm up: the repository's mirror, the code paths, a full pool.
	runAll(b, ctx, c, []task.Task{helloTask("t-warmup", repo, script)})
	for warm > 0 && containersOf(b, deployment) < warm {
		select {
		case <-ctx.Done():
			b.Fatalf("the warm pool never filled: %d of %d", containersOf(b, deployment), warm)
		case <-time.After(100 * time.Millisecond):
		}
	}

	tasks := make([]task.Task, b.N)
	for i := range tasks {
		tasks[i] = helloTask(fmt.Sprintf("t-bench-%04d", i), repo, script)
	}
	b.ResetTimer()
	start := time.Now()
	done := runAll(b, ctx, c, tasks)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Minutes(), "tasks/min")
	var sandbox, total time.Duration
	for _, st := range done {
		sandbox += st.Result.Timings.SandboxStart
		total += st.Result.Timings.Total
	}
	b.ReportMetric(float64(sandbox.Milliseconds())/float64(len(done)), "ms-sandbox-start/task")
	b.ReportMetric(float64(total.Milliseconds())/float64(len(done)), "ms-run/task")
	if err := srv.stop(b); err != nil {
		b.Errorf("serve on SIGTERM: %v", err)
	}
}

// BenchmarkServiceLatency measures one task at a time through `wrench
// serve` (4 slots, real worker, Docker, scripted model, the task of
// BenchmarkServiceThroughput): submission to final state, without and with a
// warm pool of 4 sandboxes, which takes the container start off a task's
// path when the service is not saturated.
func BenchmarkServiceLatency(b *testing.B) {
	requireImage(b)
	for _, warm := range []int{0, 4} {
		b.Run(fmt.Sprintf("warm=%d", warm), func(b *testing.B) {
			deployment := fmt.Sprintf("bench-lat-%d", time.Now().UnixNano())
			b.Cleanup(func() { removeContainers(deployment) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			srv, apiURL, _, _ := startServeProc(b, ctx, "--slots", "4", "--warm", strconv.Itoa(warm),
				"--data-dir", b.TempDir(), "--deployment", deployment)
			repo, script := helloRepo(b, 0)
			c := api.NewClient(apiURL, "")
			runAll(b, ctx, c, []task.Task{helloTask("t-warmup", repo, script)})
			var sandbox time.Duration
			b.ResetTimer()
			for i := range b.N {
				if warm > 0 {
					b.StopTimer() // a full pool, as an idle service has
					for containersOf(b, deployment) < warm && ctx.Err() == nil {
						time.Sleep(50 * time.Millisecond)
					}
					b.StartTimer()
				}
				done := runAll(b, ctx, c, []task.Task{helloTask(fmt.Sprintf("t-lat-%04d", i), repo, script)})
				sandbox += done[0].Result.Timings.SandboxStart
			}
			b.StopTimer()
			b.ReportMetric(float64(sandbox.Milliseconds())/float64(b.N), "ms-sandbox-start/task")
			if err := srv.stop(b); err != nil {
				b.Errorf("serve on SIGTERM: %v", err)
			}
		})
	}
}

// runAll submits tasks and waits until every one is final; each must be
// resolved. It returns their final states.
func runAll(b testing.TB, ctx context.Context, c *api.Client, tasks []task.Task) []task.Status {
	b.Helper()
	var done []task.Status
	want := map[string]bool{}
	for _, t := range tasks {
		if _, _, err := c.Submit(ctx, t); err != nil {
			b.Fatalf("submit %s: %v", t.ID, err)
		}
		want[t.ID] = true
	}
	for len(want) > 0 {
		lr, err := c.List(ctx, task.ListOptions{Limit: task.MaxListLimit})
		if err != nil {
			b.Fatalf("list: %v", err)
		}
		for _, st := range lr.Tasks {
			if want[st.TaskID] && st.State.Final() {
				if st.State != task.StateResolved {
					b.Fatalf("%s: %s (%s)", st.TaskID, st.State, st.Reason)
				}
				delete(want, st.TaskID)
				done = append(done, st)
			}
		}
		if len(want) == 0 {
			return done
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d tasks not final: %v", len(want), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return done
}

// BenchmarkServiceMemoryPerTask measures what one in-flight task costs the
// `wrench serve` process (the real worker; sandboxes are containers, not
// counted): the process's resident memory and Go heap with 8 tasks whose
// agents wait on a scripted model delay (sandbox up, one tool call done),
// minus the same figures idle after a warm-up task, divided by 8. Target:
// ≤ 10 MB per task. The scripted model's per-task HTTP server runs in the
// same process and is counted too.
func BenchmarkServiceMemoryPerTask(b *testing.B) {
	requireImage(b)
	const inFlight = 8
	for range b.N {
		deployment := fmt.Sprintf("bench-mem-%d", time.Now().UnixNano())
		b.Cleanup(func() { removeContainers(deployment) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		srv, apiURL, _, _ := startServeProc(b, ctx, "--slots", strconv.Itoa(inFlight),
			"--data-dir", b.TempDir(), "--deployment", deployment)
		repo, quick := helloRepo(b, 0)
		_, slow := helloRepo(b, 5*time.Minute)
		c := api.NewClient(apiURL, "")
		runAll(b, ctx, c, []task.Task{helloTask("t-warmup", repo, quick)})
		time.Sleep(2 * time.Second) // let the warm-up's garbage be collected
		idle := sampleMemory(b, srv.cmd.Process.Pid, apiURL)

		ids := make([]string, inFlight)
		for i := range ids {
			ids[i] = fmt.Sprintf("t-mem-%d", i)
			if _, _, err := c.Submit(ctx, helloTask(ids[i], repo, slow)); err != nil {
				b.Fatal(err)
			}
		}
		for _, id := range ids {
			err := c.Events(ctx, id, 0, func(ev task.Event) error {
				if ev.Kind == task.EventToolResult {
					return context.Canceled // its agent now waits on the model
				}
				return nil
			})
			if err != context.Canceled {
				b.Fatalf("%s never got to its model wait: %v", id, err)
			}
		}
		busy := sampleMemory(b, srv.cmd.Process.Pid, apiURL)
		const mb = 1 << 20
		b.ReportMetric(float64(busy.rss-idle.rss)/inFlight/mb, "MB-rss/task")
		b.ReportMetric(float64(busy.heap-idle.heap)/inFlight/mb, "MB-heap/task")
		b.ReportMetric(float64(idle.rss)/mb, "MB-rss-idle")
		for _, id := range ids {
			_, _ = c.Cancel(ctx, id)
		}
		if err := srv.stop(b); err != nil {
			b.Errorf("serve on SIGTERM: %v", err)
		}
		cancel()
	}
}

// memory is a process's resident set and Go heap in use, in bytes.
type memory struct{ rss, heap int64 }

func sampleMemory(b testing.TB, pid int, apiURL string) memory {
	b.Helper()
	var m memory
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			m.rss = kb << 10
		}
	}
	resp, err := http.Get(apiURL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			m.heap = int64(f)
		}
	}
	if m.rss == 0 || m.heap == 0 {
		b.Fatalf("no memory figures for pid %d: %+v", pid, m)
	}
	return m
}
