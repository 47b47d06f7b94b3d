package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestResolvesTaskAndStoresResult(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	d := newDispatcher(t, c, r, dispatcher.Config{Slots: 2, WorkerID: "w1"})
	runDispatcher(t, d)

	submit(t, c, newTask("t-ok"))
	st := waitFinal(t, c, "t-ok")
	if st.State != task.StateResolved || st.Result == nil || st.Result.Worker != "w1" || st.Result.Attempt != 1 {
		t.Fatalf("status = %+v", st)
	}
	if len(st.Result.Artifacts) != 1 || st.Result.Artifacts[0] != "patch.diff" || st.Result.Timings.QueueWait <= 0 {
		t.Fatalf("result = %+v", st.Result)
	}
	b, err := c.Artifacts().Get(context.Background(), "t-ok", "patch.diff")
	if err != nil || string(b) != "--- a\n+++ b\n" {
		t.Fatalf("artifact = %q, %v", b, err)
	}
	if got := r.runs("t-ok"); len(got) != 1 {
		t.Fatalf("runs = %v, want one", got)
	}
	waitFor(t, "the task message to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
}

// A task delivered again after its result is final is acked without
// running: the exactly-once effect.
func TestRedeliveryOfFinalTaskIsAckedWithoutRunning(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{}))
	tk := newTask("t-once")
	submit(t, c, tk)
	waitFinal(t, c, tk.ID)
	waitFor(t, "the task message to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })

	// The same task again, past the duplicate window's reach (another id).
	publishRaw(t, e, tk.ID, mustJSON(t, tk), "another-msg-id")
	waitFor(t, "the copy to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
	if got := r.runs(tk.ID); len(got) != 1 {
		t.Fatalf("runs = %v, want exactly one", got)
	}
}

// TestInvalidTasksAreRejectedAndTerminated: a message that does not decode
// to the task its subject names is rejected and terminated without reaching
// the runner; one that decodes but breaks task.Validate (published past the
// queue's Submit) is rejected by the runner's own check, as the worker's.
func TestInvalidTasksAreRejectedAndTerminated(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{}))
	tests := []struct {
		name, id, body, reason string
	}{
		{"not json", "t-bad-json", `{"repo":`, "body"},
		{"unknown field", "t-bad-field", `{"repo":{"url":"/r"},"instruction":"x","instructions":"y"}`, "instructions"},
		{"no instruction", "t-bad-instr", `{"repo":{"url":"/r"}}`, "instruction"},
		{"bad repo scheme", "t-bad-scheme", `{"repo":{"url":"ftp://x/r"},"instruction":"x"}`, "repo.url"},
		{"id mismatch", "t-bad-id", `{"id":"t-other","repo":{"url":"/r"},"instruction":"x"}`, "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			publishRaw(t, e, tc.id, []byte(tc.body), tc.id)
			st := waitFinal(t, c, tc.id)
			if st.State != task.StateRejected || st.Result == nil || !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("status = %+v, want rejected mentioning %q", st, tc.reason)
			}
		})
	}
	// A message whose subject names no valid task is removed too: too
	// many tokens, or a tenant that is not a tenant's name.
	for _, subj := range []string{"a.b.c", "Not_A_Tenant.t-x", "t-x.bad!id"} {
		if _, err := natstest.JetStream(t, e).Publish(context.Background(), queue.TaskSubjectPrefix+subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "all invalid messages to be terminated", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
	if n := r.total(); n != 2 {
		t.Fatalf("runner ran %d tasks, want the two that decode", n)
	}
}

func TestRetryThenResolve(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	r.behave = func(_ context.Context, tk task.Task, attempt int, _ func(task.Event)) task.Report {
		if attempt == 1 {
			return task.Report{Retry: true, Result: task.Result{Status: task.StateFailed, Reason: "docker: engine unreachable"}}
		}
		return resolved(tk)
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Backoff: []time.Duration{10 * time.Millisecond}}))
	submit(t, c, newTask("t-retry"))
	st := waitFinal(t, c, "t-retry")
	if st.State != task.StateResolved || st.Attempt != 2 || st.Result.Attempt != 2 {
		t.Fatalf("status = %+v", st)
	}
	if got := r.runs("t-retry"); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("runs = %v, want attempts 1 and 2", got)
	}
	var requeued bool
	for _, ev := range events(t, c, "t-retry") {
		if ev.Kind == task.EventState && ev.State == task.StateQueued && strings.Contains(ev.Text, "docker: engine unreachable") {
			requeued = true
		}
	}
	if !requeued {
		t.Fatal("no queued state event naming the retry reason")
	}
}

func TestRetryExhaustedGoesToDeadLetter(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	r.behave = func(context.Context, task.Task, int, func(task.Event)) task.Report {
		return task.Report{Retry: true, Result: task.Result{Status: task.StateFailed, Reason: "clone: connection refused"}}
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, Observer: obs}))
	submit(t, c, newTask("t-exh"))
	st := waitFinal(t, c, "t-exh")
	if st.State != task.StateFailed || !strings.Contains(st.Reason, "deliveries exhausted (2)") || !strings.Contains(st.Reason, "clone: connection refused") {
		t.Fatalf("status = %+v", st)
	}
	// The final result is written before the message is copied to the
	// dead letters and terminated.
	waitFor(t, "the dead letter", func() bool {
		_, err := natstest.Stream(t, e, queue.DeadLetterStream).GetLastMsgForSubject(context.Background(), queue.DeadLetterSubjectPrefix+"t-exh")
		return err == nil
	})
	waitFor(t, "the task message to be terminated", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
	if got := r.runs("t-exh"); len(got) != 2 {
		t.Fatalf("runs = %v, want 2", got)
	}
	waitFor(t, "the dead-letter hook", func() bool { return obs.count("dead:t-exh") == 1 })
}

// A worker that dies on a task's last delivery never acks it; the server's
// max-deliveries advisory makes a dispatcher dead-letter it with a failed
// result.
func TestWorkerLostOnLastDeliveryIsDeadLettered(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	cfg := dispatcher.Config{AckWait: 300 * time.Millisecond, MaxDeliver: 2}
	w := c.Work()
	if err := w.Open(context.Background(), queue.ConsumerConfig{AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-lost"))
	for range 2 { // two deliveries to a "worker" that dies each time
		if d, err := w.Next(context.Background(), waitLimit); err != nil || d == nil {
			t.Fatal(d, err)
		}
	}
	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, cfg))
	st := waitFinal(t, c, "t-lost")
	if st.State != task.StateFailed || !strings.Contains(st.Reason, "deliveries exhausted (2)") {
		t.Fatalf("status = %+v", st)
	}
	if _, err := natstest.Stream(t, e, queue.DeadLetterStream).GetLastMsgForSubject(context.Background(), queue.DeadLetterSubjectPrefix+"t-lost"); err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	waitFor(t, "the exhausted message to be removed", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
	if got := r.runs("t-lost"); len(got) != 0 {
		t.Fatalf("runs = %v, want none", got)
	}
}

func TestRunnerWithoutFinalStateFails(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	r.behave = func(context.Context, task.Task, int, func(task.Event)) task.Report {
		return task.Report{Result: task.Result{Status: task.StateRunning, Reason: "confused"}}
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{}))
	submit(t, c, newTask("t-nf"))
	st := waitFinal(t, c, "t-nf")
	if st.State != task.StateFailed || !strings.Contains(st.Reason, "no final state") {
		t.Fatalf("status = %+v", st)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	for _, cfg := range []dispatcher.Config{
		{Slots: -1}, {PerRepoLimit: -1}, {Grace: -time.Second}, {AckWait: time.Millisecond}, {MaxDeliver: -2},
	} {
		if _, err := dispatcher.New(dispatcher.NATS(c), newFakeRunner(), cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	if _, err := dispatcher.New(dispatcher.Queue{}, newFakeRunner(), dispatcher.Config{}); err == nil {
		t.Error("New accepted a nil conn")
	}
}

func TestRunTwiceFails(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	obs := newRecordingObserver()
	d := newDispatcher(t, c, newFakeRunner(), dispatcher.Config{Observer: obs})
	runDispatcher(t, d)
	waitFor(t, "the first Run to start", func() bool { return obs.count("slots") > 0 })
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("second Run returned nil")
	}
}

func TestDeletedConsumerIsRecreated(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, newFakeRunner(), dispatcher.Config{Observer: obs}))
	waitFor(t, "the dispatcher to start", func() bool { return obs.count("slots") > 0 })
	if err := natstest.Stream(t, e, queue.TasksStream).DeleteConsumer(context.Background(), queue.WorkersConsumer); err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-recreated"))
	if st := waitFinal(t, c, "t-recreated"); st.State != task.StateResolved {
		t.Fatalf("status = %+v", st)
	}
}

func TestRunWithDoneContextReturnsNil(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newDispatcher(t, c, newFakeRunner(), dispatcher.Config{}).Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}
