package dispatcher_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// testCaps are cluster-wide limits by tenant and by repository URL.
type testCaps struct {
	tenants, repos map[string]int
}

func (c testCaps) TenantLimit(t string) int { return c.tenants[t] }
func (c testCaps) RepoLimit(u string) int   { return c.repos[u] }

// parseCaps reads "tenant=n,..." (the helper worker's limits); nil when
// empty.
func parseCaps(s string) dispatcher.Caps {
	if s == "" {
		return nil
	}
	c := testCaps{tenants: map[string]int{}, repos: map[string]int{}}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		c.tenants[k], _ = strconv.Atoi(v)
	}
	return c
}

func tenantTask(id, tenant, repo string) task.Task {
	tk := newTask(id)
	tk.Tenant, tk.Repo.URL = tenant, repo
	return tk
}

// concurrency records, across every dispatcher of a test, how many tasks
// run at once by a key (tenant, repository) and the order runs start and
// end in.
type concurrency struct {
	mu     sync.Mutex
	now    map[string]int
	peak   map[string]int
	starts []string
	ends   []string
	at     map[string]time.Time // "start:<id>" and "end:<id>"
}

func newConcurrency() *concurrency {
	return &concurrency{now: map[string]int{}, peak: map[string]int{}, at: map[string]time.Time{}}
}

// runner sleeps d per task, keeping count.
func (c *concurrency) runner(d time.Duration) dispatcher.Runner {
	return dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		keys := []string{"tenant:" + t.TenantName(), "repo:" + t.Repo.URL}
		c.mu.Lock()
		for _, k := range keys {
			c.now[k]++
			c.peak[k] = max(c.peak[k], c.now[k])
		}
		c.starts = append(c.starts, t.ID)
		c.at["start:"+t.ID] = time.Now()
		c.mu.Unlock()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		c.mu.Lock()
		for _, k := range keys {
			c.now[k]--
		}
		c.ends = append(c.ends, t.ID)
		c.at["end:"+t.ID] = time.Now()
		c.mu.Unlock()
		return resolved(t)
	})
}

func (c *concurrency) peakOf(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak[k]
}

// Two dispatchers sharing one NATS, six slots between them, respect the
// cluster-wide limits: at most 2 of tenant acme's tasks and at most 1 of
// repository /shared at once, while other tasks fill the other slots.
func TestClusterLimitsAcrossDispatchers(t *testing.T) {
	e := startNATS(t, "")
	caps := testCaps{tenants: map[string]int{"acme": 2}, repos: map[string]int{"https://example.com/shared.git": 1}}
	c := newConcurrency()
	for _, w := range []string{"w1", "w2"} {
		runDispatcher(t, newDispatcher(t, connect(t, e), c.runner(300*time.Millisecond),
			dispatcher.Config{Slots: 3, WorkerID: w, AckWait: time.Second, Caps: caps}))
	}
	sub := connect(t, e)
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("t-acme%d", i)
		submit(t, sub, tenantTask(id, "acme", fmt.Sprintf("https://example.com/a%d.git", i)))
		ids = append(ids, id)
	}
	for i := range 4 {
		id := fmt.Sprintf("t-shared%d", i)
		submit(t, sub, tenantTask(id, "bolt", "https://example.com/shared.git"))
		ids = append(ids, id)
	}
	for i := range 4 {
		id := fmt.Sprintf("t-free%d", i)
		submit(t, sub, tenantTask(id, "bolt", fmt.Sprintf("https://example.com/f%d.git", i)))
		ids = append(ids, id)
	}
	for _, id := range ids {
		if st := waitFinal(t, sub, id); st.State != task.StateResolved {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	if p := c.peakOf("tenant:acme"); p != 2 {
		t.Errorf("tenant acme ran %d tasks at once, want its limit 2", p)
	}
	if p := c.peakOf("repo:https://example.com/shared.git"); p != 1 {
		t.Errorf("repository shared ran %d tasks at once, want its limit 1", p)
	}
	if p := c.peakOf("tenant:bolt"); p < 3 {
		t.Errorf("tenant bolt (no limit) ran at most %d tasks at once: the limited tasks held its slots", p)
	}
}

// A worker that dies holding a tenant's only place does not keep it: its
// lease expires (AckWait), the other worker takes the place, and runs both
// the dead worker's task (redelivered) and its own, one at a time.
func TestDeadWorkersPlaceComesBack(t *testing.T) {
	e := startNATS(t, "127.0.0.1:0")
	const ackWait = time.Second
	dir := t.TempDir()
	runLog := filepath.Join(dir, "runs")
	sub := connect(t, e)
	helper := startHelper(t, "worker", "WRENCH_NATS_URL="+e.ClientURL(), "WRENCH_WORKER_ID=doomed",
		"WRENCH_RUN_SLEEP=forever", "WRENCH_RUN_LOG="+runLog, "WRENCH_SLOTS=2",
		"WRENCH_ACK_WAIT="+ackWait.String(), "WRENCH_TENANT_LIMITS=acme=1")
	submit(t, sub, tenantTask("t-held", "acme", "https://example.com/a.git"))
	waitFor(t, "the doomed worker to run t-held", func() bool { return len(runLines(t, runLog)["t-held"]) == 1 })

	c := newConcurrency()
	caps := testCaps{tenants: map[string]int{"acme": 1}}
	runDispatcher(t, newDispatcher(t, connect(t, e), c.runner(100*time.Millisecond),
		dispatcher.Config{Slots: 2, WorkerID: "survivor", AckWait: ackWait, Caps: caps}))
	submit(t, sub, tenantTask("t-waits", "acme", "https://example.com/b.git"))
	// While the holder lives and renews its lease, the place stays taken:
	// the second task waits (the doomed worker has a free slot but its
	// only place is held).
	time.Sleep(3 * ackWait)
	if st, _ := sub.States().Status(context.Background(), "t-waits"); st.State != task.StateQueued {
		t.Fatalf("t-waits is %s while acme's one place is held", st.State)
	}
	helper.kill(t)
	for _, id := range []string{"t-held", "t-waits"} {
		if st := waitFinal(t, sub, id); st.State != task.StateResolved || st.Worker != "survivor" {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	if p := c.peakOf("tenant:acme"); p != 1 {
		t.Errorf("acme ran %d tasks at once on the survivor, want 1", p)
	}
}

// Fair share: tenant acme queues a burst of 200 tasks, two workers start
// four of them, then tenant bolt submits one. When one of acme's running
// tasks ends and its slot frees, bolt's task is the next to start, before
// the 196 of acme's still queued. With one queue (first in, first out) it
// would start after all of them.
func TestFairShareBurst(t *testing.T) {
	e := startNATS(t, "")
	release := make(chan struct{})
	var mu sync.Mutex
	var starts []string
	var freed time.Time
	started := map[string]time.Time{}
	r := dispatcher.RunnerFunc(func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		mu.Lock()
		starts = append(starts, tk.ID)
		started[tk.ID] = time.Now()
		mu.Unlock()
		if tk.Tenant == "acme" {
			select {
			case <-release:
				mu.Lock()
				if freed.IsZero() {
					freed = time.Now()
				}
				mu.Unlock()
			case <-ctx.Done():
			}
		}
		return resolved(tk)
	})
	for _, w := range []string{"w1", "w2"} {
		runDispatcher(t, newDispatcher(t, connect(t, e), r, dispatcher.Config{Slots: 2, WorkerID: w, AckWait: 5 * time.Second}))
	}
	sub := connect(t, e)
	for i := range 200 {
		submit(t, sub, tenantTask(fmt.Sprintf("t-a%03d", i), "acme", "https://example.com/a.git"))
	}
	running := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(starts)
	}
	waitFor(t, "four of acme's tasks to run", func() bool { return running() >= 4 })
	submit(t, sub, tenantTask("t-b", "bolt", "https://example.com/b.git"))
	// The workers learn of bolt's queue from the publish (a subscription);
	// give that trip its time before a slot frees.
	time.Sleep(100 * time.Millisecond)
	release <- struct{}{} // one of acme's tasks ends; its slot frees
	waitFor(t, "a task to start in the freed slot", func() bool { return running() >= 5 })
	mu.Lock()
	next := starts[4]
	delay := started[next].Sub(freed)
	mu.Unlock()
	close(release)
	if next != "t-b" {
		t.Fatalf("after the first slot freed, acme's %s started, not bolt's task", next)
	}
	t.Logf("bolt's task started %s after the slot freed", delay.Round(time.Millisecond))
	if st := waitFinal(t, sub, "t-b"); st.State != task.StateResolved {
		t.Fatalf("t-b: %+v", st)
	}
}
