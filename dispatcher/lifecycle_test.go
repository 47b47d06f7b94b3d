package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestCancelRunningTaskStopsRun(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	var sawCancel atomic.Bool
	r.behave = func(ctx context.Context, tk task.Task, a int, ev func(task.Event)) task.Report {
		rep := blockUntilCancelled(ctx, tk, a, ev)
		sawCancel.Store(true)
		rep.Result.Patch = "partial"
		return rep
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{}))
	submit(t, c, newTask("t-cr"))
	<-r.started
	waitState(t, c, "t-cr", task.StateRunning)
	// Cancel returns the running status, or already the cancelled one when
	// the worker was that quick.
	st, err := c.Submissions().Cancel(context.Background(), "t-cr")
	if err != nil || (st.State != task.StateRunning && st.State != task.StateCancelled) {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	st = waitFinal(t, c, "t-cr")
	if st.State != task.StateCancelled || st.Result.Patch != "partial" || !sawCancel.Load() {
		t.Fatalf("status = %+v (runner saw cancel: %v)", st, sawCancel.Load())
	}
	waitFor(t, "the task message to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
}

func TestCancelQueuedTaskNeverRuns(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	submit(t, c, newTask("t-cq"))
	if st, err := c.Submissions().Cancel(context.Background(), "t-cq"); err != nil || st.State != task.StateCancelled {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	submit(t, c, newTask("t-after"))
	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 1}))
	waitFinal(t, c, "t-after")
	if got := r.runs("t-cq"); len(got) != 0 {
		t.Fatalf("cancelled task ran: %v", got)
	}
	if st, _ := c.States().Status(context.Background(), "t-cq"); st.State != task.StateCancelled {
		t.Fatalf("status = %+v", st)
	}
}

// A cancellation requested while the task was running on a worker that
// died is honoured by the worker that gets the redelivery, without running.
func TestCancelRequestedBeforeDeliveryIsHonoured(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	ctx := context.Background()
	tk := newTask("t-cpre")
	submit(t, c, tk)
	if _, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "dead-worker"}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Submissions().Cancel(ctx, tk.ID); err != nil || st.State != task.StateRunning {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{}))
	if st := waitFinal(t, c, tk.ID); st.State != task.StateCancelled {
		t.Fatalf("status = %+v", st)
	}
	if got := r.runs(tk.ID); len(got) != 0 {
		t.Fatalf("runs = %v, want none", got)
	}
}

// gate blocks runs until released.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestSlotsBoundTasksInFlight(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		_ = g.wait(ctx)
		return resolved(tk)
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 2, Observer: obs}))
	for i := range 6 {
		submit(t, c, newTask(fmt.Sprintf("t-s%d", i)))
	}
	<-r.started
	<-r.started
	cons, err := natstest.Stream(t, e, queue.TasksStream).Consumer(context.Background(), queue.WorkersConsumer)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // a few looks while both slots are busy
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending > 2 || r.active.Load() > 2 {
			t.Fatalf("%d deliveries in flight, %d running; slots are 2", info.NumAckPending, r.active.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.open()
	for i := range 6 {
		waitFinal(t, c, fmt.Sprintf("t-s%d", i))
	}
	if p := r.peak.Load(); p != 2 {
		t.Fatalf("peak concurrency = %d, want 2", p)
	}
	if obs.count("slots-overrun") != 0 {
		t.Fatal("observer saw more busy slots than slots")
	}
}

func TestPerRepoLimit(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	var mu sync.Mutex
	active, peak := map[string]int{}, map[string]int{}
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		mu.Lock()
		repo := tk.ID[2:3] // the repository, however its URL is spelt
		active[repo]++
		peak[repo] = max(peak[repo], active[repo])
		mu.Unlock()
		_ = g.wait(ctx)
		mu.Lock()
		active[repo]--
		mu.Unlock()
		return resolved(tk)
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 2, PerRepoLimit: 1}))
	ids := []string{"t-a1", "t-a2", "t-a3", "t-b1"}
	for _, id := range ids {
		tk := newTask(id)
		tk.Repo.URL = "https://example.com/" + id[2:3] + ".git"
		if id == "t-a2" {
			tk.Repo.URL = "https://EXAMPLE.com/a/" // same repository, spelt differently
		}
		submit(t, c, tk)
	}
	// b1 runs although more a-tasks than slots came before it and wait: a
	// held task gives up its slot.
	waitFor(t, "t-b1 to start", func() bool { return len(r.runs("t-b1")) == 1 })
	waitFor(t, "one a-task to start", func() bool { return r.active.Load() == 2 })
	g.open()
	for _, id := range ids {
		if st := waitFinal(t, c, id); st.State != task.StateResolved || st.Attempt != 1 {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peak["a"] != 1 || r.peak.Load() > 2 {
		t.Fatalf("peaks = %v (overall %d); repository a must run one at a time", peak, r.peak.Load())
	}
}

func TestShutdownHandsBackRunningTasks(t *testing.T) {
	e := startNATS(t, "")
	c1 := connect(t, e)
	r1 := newFakeRunner()
	var cleaned atomic.Int32
	r1.behave = func(ctx context.Context, tk task.Task, a int, ev func(task.Event)) task.Report {
		rep := blockUntilCancelled(ctx, tk, a, ev)
		cleaned.Add(1) // the real worker removes its sandbox here
		return rep
	}
	stop1 := runDispatcher(t, newDispatcher(t, c1, r1, dispatcher.Config{Slots: 2, WorkerID: "w1"}))
	submit(t, c1, newTask("t-h1"))
	submit(t, c1, newTask("t-h2"))
	<-r1.started
	<-r1.started
	stop1()
	if cleaned.Load() != 2 {
		t.Fatalf("%d runs stopped, want 2", cleaned.Load())
	}
	for _, id := range []string{"t-h1", "t-h2"} {
		st, _ := c1.States().Status(context.Background(), id)
		if st.State != task.StateQueued || st.Reason == "" {
			t.Fatalf("%s after shutdown: %+v, want queued with a reason", id, st)
		}
	}
	c2 := connect(t, e)
	r2 := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c2, r2, dispatcher.Config{Slots: 2, WorkerID: "w2"}))
	for _, id := range []string{"t-h1", "t-h2"} {
		st := waitFinal(t, c2, id)
		if st.State != task.StateResolved || st.Result.Worker != "w2" || st.Attempt != 2 {
			t.Fatalf("%s: %+v", id, st)
		}
	}
}

func TestShutdownLetsTasksFinishWithinGrace(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		if err := g.wait(ctx); err != nil {
			return task.Report{Result: task.Result{Status: task.StateCancelled}}
		}
		return resolved(tk)
	}
	d := newDispatcher(t, c, r, dispatcher.Config{Slots: 2, Grace: waitLimit})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	submit(t, c, newTask("t-g1"))
	<-r.started
	cancel() // SIGTERM
	// Fetching has stopped: a task submitted now stays queued.
	time.Sleep(300 * time.Millisecond) // let the fetch loop see ctx (no assertion on timing)
	submit(t, c, newTask("t-g2"))
	g.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, _ := c.States().Status(context.Background(), "t-g1"); st.State != task.StateResolved {
		t.Fatalf("t-g1 = %+v, want resolved within grace", st)
	}
	if st, _ := c.States().Status(context.Background(), "t-g2"); st.State != task.StateQueued || len(r.runs("t-g2")) != 0 {
		t.Fatalf("t-g2 = %+v, want queued and never run", st)
	}
}

func TestTwoDispatchersShareWork(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r1, r2 := newFakeRunner(), newFakeRunner()
	for _, r := range []*fakeRunner{r1, r2} {
		r.behave = func(_ context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
			time.Sleep(5 * time.Millisecond)
			return resolved(tk)
		}
	}
	runDispatcher(t, newDispatcher(t, connect(t, e), r1, dispatcher.Config{Slots: 2, WorkerID: "w1"}))
	runDispatcher(t, newDispatcher(t, connect(t, e), r2, dispatcher.Config{Slots: 2, WorkerID: "w2"}))
	const n = 40
	for i := range n {
		submit(t, c, newTask(fmt.Sprintf("t-m%d", i)))
	}
	for i := range n {
		id := fmt.Sprintf("t-m%d", i)
		st := waitFinal(t, c, id)
		if runs := len(r1.runs(id)) + len(r2.runs(id)); st.State != task.StateResolved || runs != 1 {
			t.Fatalf("%s: %s after %d runs", id, st.State, runs)
		}
	}
	if r1.total() == 0 || r2.total() == 0 {
		t.Logf("work split %d/%d", r1.total(), r2.total())
	}
}

// When another worker takes the task over (its delivery timed out here),
// this worker's run is cancelled and its result discarded: one final result.
func TestTakeoverCancelsStaleRun(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	firstDone := make(chan error, 1)
	r.behave = func(ctx context.Context, tk task.Task, attempt int, ev func(task.Event)) task.Report {
		if attempt == 1 {
			<-ctx.Done()
			firstDone <- context.Cause(ctx)
			return task.Report{Result: task.Result{Status: task.StateResolved, Reason: "stale"}}
		}
		return resolved(tk)
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{WorkerID: "w1", AckWait: 600 * time.Millisecond}))
	tk := newTask("t-take")
	submit(t, c, tk)
	waitState(t, c, tk.ID, task.StateRunning)
	other, _, err := c.States().Acquire(context.Background(), tk, queue.Claim{Attempt: 2, Worker: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; err == nil {
		t.Fatal("stale run ended without a cause")
	}
	_, ferr := other.Finish(context.Background(), task.Result{Status: task.StateUnresolved, Reason: "w2 result"})
	st := waitFinal(t, c, tk.ID)
	if st.Reason == "stale" {
		t.Fatalf("the stale run's result was written: %+v", st)
	}
	if ferr == nil && st.Result.Worker != "w2" {
		t.Fatalf("final = %+v, want w2's", st)
	}
	if ferr != nil && !errors.Is(ferr, queue.ErrLostLease) {
		t.Fatal(ferr)
	}
	waitFor(t, "the message to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
}

// A task that runs for several AckWaits is kept by its heartbeats: it is
// never handed to the other worker.
func TestHeartbeatsKeepLongTaskFromRedelivery(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	const ackWait = 400 * time.Millisecond
	long := func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		select {
		case <-time.After(5 * ackWait):
		case <-ctx.Done():
		}
		return resolved(tk)
	}
	r1, r2 := newFakeRunner(), newFakeRunner()
	r1.behave, r2.behave = long, long
	runDispatcher(t, newDispatcher(t, connect(t, e), r1, dispatcher.Config{WorkerID: "w1", AckWait: ackWait}))
	submit(t, c, newTask("t-long"))
	<-r1.started
	runDispatcher(t, newDispatcher(t, connect(t, e), r2, dispatcher.Config{WorkerID: "w2", AckWait: ackWait}))
	st := waitFinal(t, c, "t-long")
	if st.State != task.StateResolved || st.Attempt != 1 || st.Result.Worker != "w1" {
		t.Fatalf("status = %+v", st)
	}
	if n := len(r2.runs("t-long")); n != 0 {
		t.Fatalf("the other worker ran the task %d times", n)
	}
}

// A shutdown on a task's last delivery hands it back without exhausting it.
func TestShutdownOnLastDeliveryDoesNotExhaust(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r1 := newFakeRunner()
	r1.behave = blockUntilCancelled
	cfg := dispatcher.Config{MaxDeliver: 1}
	stop := runDispatcher(t, newDispatcher(t, connect(t, e), r1, cfg))
	submit(t, c, newTask("t-last"))
	<-r1.started
	stop()
	r2 := newFakeRunner()
	runDispatcher(t, newDispatcher(t, connect(t, e), r2, cfg))
	if st := waitFinal(t, c, "t-last"); st.State != task.StateResolved {
		t.Fatalf("status = %+v, want resolved by the next worker", st)
	}
	waitFor(t, "the work queue to drain", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
}

// TestFreeSlotsWhenIdle: a waiting fetch holds a slot, but an idle worker
// reports every slot free (wrench_worker_free_slots), a running task one
// fewer, and every slot free again once it is done.
func TestFreeSlotsWhenIdle(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		_ = g.wait(ctx)
		return resolved(tk)
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 2, Observer: obs}))
	waitBusy := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for obs.lastBusy() != want {
			if time.Now().After(deadline) {
				t.Fatalf("busy slots %d, want %d", obs.lastBusy(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond) // the fetch loop is waiting for work
	waitBusy(0)
	submit(t, c, newTask("t-idle"))
	<-r.started
	waitBusy(1)
	g.open()
	waitFinal(t, c, "t-idle")
	waitBusy(0)
}

// A run that ends after its task was taken over without its heartbeat
// noticing (the process was paused past the ack wait, as under SIGSTOP)
// has its result discarded, and the log says who holds the task now
// instead of claiming another worker finished it.
func TestPausedRunsResultDiscardedTruthfully(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	var logs syncLog
	release := make(chan struct{})
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, attempt int, ev func(task.Event)) task.Report {
		<-release // "paused": the heartbeat (every AckWait/3) has not run yet
		return task.Report{Result: task.Result{Status: task.StateResolved, Reason: "stale"}}
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{WorkerID: "w1", AckWait: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	tk := newTask("t-paused")
	submit(t, c, tk)
	waitState(t, c, tk.ID, task.StateRunning)
	if _, _, err := c.States().Acquire(context.Background(), tk, queue.Claim{Attempt: 2, Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "the discard to be logged", func() bool { return strings.Contains(logs.String(), "result is discarded") })
	if l := logs.String(); strings.Contains(l, "another worker finished") || !strings.Contains(l, "now_worker=w2") {
		t.Errorf("log:\n%s", l)
	}
	if st, _ := c.States().Status(context.Background(), tk.ID); st.State != task.StateRunning || st.Worker != "w2" {
		t.Errorf("the stale result overwrote w2's record: %+v", st)
	}
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
