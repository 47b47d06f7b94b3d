package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// waitLimit bounds every wait in these tests so a bug hangs no test for
// long; it is not a speed assertion.
const waitLimit = 60 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("WRENCH_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startNATS runs an in-process JetStream server for the test.
func startNATS(t testing.TB, listen string) *natsserver.Server {
	t.Helper()
	return natstest.Start(t, natsserver.Config{Listen: listen})
}

// connect opens a Conn to e (in-process).
func connect(t testing.TB, e *natsserver.Server) *queue.Conn {
	t.Helper()
	return natstest.Connect(t, e, func(cfg *queue.Config) { cfg.Logger = testLogger(t) })
}

// newTask is a valid task with the given id.
func newTask(id string) task.Task {
	return task.Task{ID: id, Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "fix it"}
}

// fakeRunner plays a scripted outcome per task; by default it resolves at
// once. It records every Run call.
type fakeRunner struct {
	mu      sync.Mutex
	calls   map[string][]int // task id -> attempts run
	started chan string      // receives the id of every run, if not nil
	active  atomic.Int32
	peak    atomic.Int32
	// behave, when set, decides the report (and may block on ctx).
	behave func(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{calls: map[string][]int{}, started: make(chan string, 1000)}
}

func (r *fakeRunner) Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
	n := r.active.Add(1)
	defer r.active.Add(-1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	r.mu.Lock()
	r.calls[t.ID] = append(r.calls[t.ID], attempt)
	r.mu.Unlock()
	if r.started != nil {
		select {
		case r.started <- t.ID:
		default:
		}
	}
	// As the worker does, before any work: a task that breaks its own
	// rules is rejected.
	if err := t.Validate(); err != nil {
		return task.Report{Result: task.Result{Status: task.StateRejected, Reason: err.Error(), Fault: task.FaultInput}}
	}
	if r.behave != nil {
		return r.behave(ctx, t, attempt, onEvent)
	}
	return resolved(t)
}

func (r *fakeRunner) runs(id string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.calls[id]...)
}

func resolved(t task.Task) task.Report {
	return task.Report{
		Result:    task.Result{Status: task.StateResolved, Reason: "finished", Patch: "--- a\n+++ b\n"},
		Artifacts: map[string][]byte{"patch.diff": []byte("--- a\n+++ b\n")},
	}
}

// blockUntilCancelled runs until ctx is done, then reports what a worker
// reports for a cancelled run.
func blockUntilCancelled(ctx context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
	<-ctx.Done()
	return task.Report{Result: task.Result{Status: task.StateCancelled, Reason: "cancelled"}}
}

// runDispatcher runs d until the test ends (or stop is called) and returns
// stop, which cancels Run and waits for it.
func runDispatcher(t testing.TB, d *dispatcher.Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher Run: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

func newDispatcher(t testing.TB, c *queue.Conn, r dispatcher.Runner, cfg dispatcher.Config) *dispatcher.Dispatcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 200 * time.Millisecond
	}
	d, err := dispatcher.New(dispatcher.NATS(c), r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFinal waits until task id is final and returns its status.
func waitFinal(t testing.TB, c *queue.Conn, id string) task.Status {
	t.Helper()
	var st task.Status
	waitFor(t, "final state of "+id, func() bool {
		var err error
		st, err = c.States().Status(context.Background(), id)
		return err == nil && st.State.Final()
	})
	return st
}

// waitState waits until task id is in state s.
func waitState(t testing.TB, c *queue.Conn, id string, s task.State) task.Status {
	t.Helper()
	var st task.Status
	waitFor(t, string(s)+" state of "+id, func() bool {
		var err error
		st, err = c.States().Status(context.Background(), id)
		return err == nil && st.State == s
	})
	return st
}

func submit(t testing.TB, c *queue.Conn, tk task.Task) task.Status {
	t.Helper()
	st, dup, err := c.Submissions().Submit(context.Background(), tk)
	if err != nil {
		t.Fatalf("submit %s: %v", tk.ID, err)
	}
	if dup {
		t.Fatalf("submit %s: unexpected duplicate", tk.ID)
	}
	return st
}

func (r *fakeRunner) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.calls {
		n += len(a)
	}
	return n
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publishRaw puts a message on the work queue the way a foreign publisher
// would, bypassing Submit.
func publishRaw(t testing.TB, e *natsserver.Server, id string, body []byte, msgID string) {
	t.Helper()
	if _, err := natstest.JetStream(t, e).Publish(context.Background(), queue.TaskSubjectPrefix+id, body, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// events returns every event of a final task, through its result event.
func events(t testing.TB, c *queue.Conn, id string) []task.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ch, err := c.Events().Follow(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []task.Event
	for ev := range ch {
		evs = append(evs, ev)
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != task.EventResult {
		t.Fatalf("events of %s did not end with a result: %+v", id, evs)
	}
	return evs
}

// recordingObserver counts hook calls by key.
type recordingObserver struct {
	dispatcher.NopObserver
	mu     sync.Mutex
	counts map[string]int
	ctxKey any
	// busy is the last busy count Slots reported (-1 before any).
	busy int
}

type ctxKey struct{}

func newRecordingObserver() *recordingObserver {
	return &recordingObserver{counts: map[string]int{}, busy: -1}
}

func (o *recordingObserver) add(k string) {
	o.mu.Lock()
	o.counts[k]++
	o.mu.Unlock()
}

func (o *recordingObserver) count(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[k]
}

func (o *recordingObserver) TaskStarted(ctx context.Context, t task.Task, attempt int, _ time.Duration) context.Context {
	o.add(fmt.Sprintf("started:%s:%d", t.ID, attempt))
	return context.WithValue(ctx, ctxKey{}, "observed")
}

func (o *recordingObserver) TaskEvent(_ context.Context, ev task.Event) {
	o.add("event:" + ev.TaskID + ":" + string(ev.Kind))
}

func (o *recordingObserver) TaskFinished(_ context.Context, res task.Result, _ time.Duration) {
	o.add("finished:" + res.TaskID + ":" + string(res.Status))
}

func (o *recordingObserver) TaskRequeued(_ context.Context, id string, _ int, reason string) {
	o.add("requeued:" + id)
	if kind, _, ok := strings.Cut(reason, ":"); ok {
		o.add("requeued:" + id + ":" + kind)
	}
}

func (o *recordingObserver) TaskPaused(_ context.Context, id string, _ int, reason string) {
	o.add("paused:" + id + ":" + reason)
}

func (o *recordingObserver) TaskDeadLettered(_ context.Context, id, _ string) { o.add("dead:" + id) }

func (o *recordingObserver) Slots(busy, total int) {
	o.mu.Lock()
	o.busy = busy
	o.mu.Unlock()
	o.add("slots")
	if busy > total {
		o.add("slots-overrun")
	}
}

func (o *recordingObserver) ConsumerLag(uint64, uint64) { o.add("lag") }

func (o *recordingObserver) Readiness(ready bool) { o.add(fmt.Sprintf("ready:%v", ready)) }

func jetstreamSubjectFilter(s string) jetstream.StreamInfoOpt { return jetstream.WithSubjectFilter(s) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// lastBusy is the last busy-slot count reported.
func (o *recordingObserver) lastBusy() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busy
}
