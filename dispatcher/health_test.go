package dispatcher_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// engine stands for a worker's own infrastructure in these tests: the
// probe and the runner both see whether it is up. (cmd/wrench's
// TestWorkerEngineDown does the same with a real Docker engine.)
type engine struct{ down atomic.Bool }

func (e *engine) probe(context.Context) error {
	if e.down.Load() {
		return errors.New("sandbox ping: unavailable: docker engine unreachable")
	}
	return nil
}

// run fails as the worker does when the engine is down.
func (e *engine) run(_ context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
	if e.down.Load() {
		return task.Report{Result: task.Result{Status: task.StateFailed, Fault: task.FaultInfra, Reason: "sandbox start: unavailable"}, Retry: true}
	}
	return resolved(t)
}

// A worker whose engine fails the probe after a run failed on it hands the
// task over without spending a delivery (with MaxDeliver 1 a spent one
// would dead-letter it), goes unready and fetches nothing; once the probe
// passes it takes tasks again and the task resolves, its result counting
// the hand-back.
func TestWorkerFaultHandsTaskOverWithoutSpendingDelivery(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	var eng engine
	r := newFakeRunner()
	r.behave = eng.run
	obs := newRecordingObserver()
	d := newDispatcher(t, c, r, dispatcher.Config{MaxDeliver: 1, Probe: eng.probe, ProbeInterval: 20 * time.Millisecond, Observer: obs})
	runDispatcher(t, d)
	waitFor(t, "the first readiness report", func() bool { return obs.count("ready:true") == 1 })

	eng.down.Store(true)
	submit(t, c, newTask("t-eng"))
	waitFor(t, "the hand-over", func() bool { return obs.count("requeued:t-eng:worker fault") == 1 })
	st := waitState(t, c, "t-eng", task.StateQueued)
	if !strings.Contains(st.Reason, "worker fault: sandbox ping") {
		t.Errorf("queued for %q, want the worker fault", st.Reason)
	}
	if err := d.Ready(); err == nil || !strings.Contains(err.Error(), "docker engine unreachable") {
		t.Errorf("Ready() = %v, want the engine's fault", err)
	}
	if obs.count("ready:false") != 1 {
		t.Errorf("readiness reports: %v", obs.counts)
	}
	// Unready, the worker fetches nothing: the reissued message waits.
	waitFor(t, "the task to wait undelivered", func() bool {
		pending, ackPending, err := c.Work().Lag(context.Background())
		return err == nil && pending == 1 && ackPending == 0
	})
	if got := r.runs("t-eng"); len(got) != 1 {
		t.Fatalf("runs while unready = %v, want the one that found the fault", got)
	}

	eng.down.Store(false)
	st = waitFinal(t, c, "t-eng")
	if st.State != task.StateResolved || st.Result.Attempt != 2 || st.Result.HandedBack != 1 {
		t.Fatalf("status %s attempt %d handed back %d (%s), want resolved on attempt 2 with 1 handed back",
			st.State, st.Result.Attempt, st.Result.HandedBack, st.Reason)
	}
	if d.Ready() != nil || obs.count("ready:true") != 2 {
		t.Errorf("Ready() = %v after the probe passed; readiness reports %v", d.Ready(), obs.counts)
	}
	if obs.count("dead:t-eng") != 0 {
		t.Error("the task was dead-lettered")
	}
}

// A fault the probe does not confirm follows the task: the delivery counts
// (here the last one: dead letter) and the worker stays ready.
func TestFaultThatFollowsTheTaskCounts(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	r.behave = func(context.Context, task.Task, int, func(task.Event)) task.Report {
		return task.Report{Result: task.Result{Status: task.StateFailed, Fault: task.FaultInfra, Reason: "clone: connection reset"}, Retry: true}
	}
	var eng engine
	d := newDispatcher(t, c, r, dispatcher.Config{MaxDeliver: 1, Probe: eng.probe})
	runDispatcher(t, d)
	submit(t, c, newTask("t-net"))
	st := waitFinal(t, c, "t-net")
	if st.State != task.StateFailed || !strings.Contains(st.Reason, "deliveries exhausted (1)") || st.Result.HandedBack != 0 {
		t.Fatalf("status = %+v", st)
	}
	if d.Ready() != nil {
		t.Errorf("Ready() = %v, want ready", d.Ready())
	}
}

// A worker whose engine is down when it starts takes no task.
func TestWorkerStartsUnreadyWhenProbeFails(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	var eng engine
	eng.down.Store(true)
	r := newFakeRunner()
	d := newDispatcher(t, c, r, dispatcher.Config{Probe: eng.probe, ProbeInterval: 20 * time.Millisecond})
	submit(t, c, newTask("t-wait"))
	runDispatcher(t, d)
	waitFor(t, "unready", func() bool { return d.Ready() != nil })
	if pending, _, err := c.Work().Lag(context.Background()); err != nil || pending != 1 || r.total() != 0 {
		t.Fatalf("pending %d (%v), runs %d; want the task left in the queue", pending, err, r.total())
	}
	eng.down.Store(false)
	if st := waitFinal(t, c, "t-wait"); st.State != task.StateResolved || st.Result.Attempt != 1 {
		t.Fatalf("status = %+v", st)
	}
}

// A message reissued on the task's last counted delivery (a shutdown) gets
// that one delivery again; when the worker of that one dies, the next
// delivery dead-letters the task as the server's own limit would (that
// limit is per message) and does not run it.
func TestReissuedTaskPastItsLimitIsDeadLettered(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	cfg := dispatcher.Config{MaxDeliver: 2, AckWait: 300 * time.Millisecond}
	w := c.Work()
	if err := w.Open(context.Background(), queue.ConsumerConfig{AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-past"))
	// Delivery 1 counts (a worker died on it).
	if dl, err := w.Next(context.Background(), waitLimit); err != nil || dl == nil || dl.Nak(0) != nil {
		t.Fatalf("first delivery: %+v, %v", dl, err)
	}
	// Delivery 2, the last, is handed back at shutdown: reissued, free.
	r1 := newFakeRunner()
	r1.behave = blockUntilCancelled
	stop := runDispatcher(t, newDispatcher(t, connect(t, e), r1, cfg))
	<-r1.started
	stop()
	// Its one more delivery goes to a worker that dies.
	dl, err := w.Next(context.Background(), waitLimit)
	if err != nil || dl == nil || dl.Earlier != 2 || dl.Free != 1 {
		t.Fatalf("reissued delivery = %+v, %v; want 2 earlier, 1 free", dl, err)
	}
	if err := dl.Nak(0); err != nil {
		t.Fatal(err)
	}
	r2 := newFakeRunner()
	runDispatcher(t, newDispatcher(t, connect(t, e), r2, cfg))
	st := waitFinal(t, c, "t-past")
	if st.State != task.StateFailed || !strings.Contains(st.Reason, "deliveries exhausted (2)") || st.Result.Attempt != 4 || st.Result.HandedBack != 1 {
		t.Fatalf("status %s attempt %d handed back %d: %s", st.State, st.Result.Attempt, st.Result.HandedBack, st.Reason)
	}
	if got := r2.runs("t-past"); len(got) != 0 {
		t.Fatalf("ran past the limit: %v", got)
	}
	waitFor(t, "the dead letter", func() bool {
		_, err := natstest.Stream(t, e, queue.DeadLetterStream).GetLastMsgForSubject(context.Background(), queue.DeadLetterSubjectPrefix+"t-past")
		return err == nil
	})
}
